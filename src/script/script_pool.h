/* script_pool.h - the small-object allocator under each thread's Lua state (script_engine.c).
 *
 * A Lua script allocates and frees many small objects per call (strings, tables, closures,
 * call frames), all from the one thread that owns the state. The pool serves blocks of up to
 * POOL_MAX_BLOCK bytes from a per-state arena, in 16-byte size classes with one free list each,
 * with no locking and no header per block; larger blocks, and small ones once the arena is used
 * up, come from malloc. A freed block goes back to its class's free list, never to the system:
 * the arena's touched pages (at most POOL_ARENA_BYTES) stay with the state until it closes. */
#ifndef RLIMITD_SCRIPT_POOL_H
#define RLIMITD_SCRIPT_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Under AddressSanitizer every block goes through script_pool.c, which poisons free ones. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#define POOL_NO_INLINE 1
#endif

#define POOL_MAX_BLOCK 512
#define POOL_CLASSES (POOL_MAX_BLOCK / 16)
#define POOL_ARENA_BYTES ((size_t)8 << 20)

struct script_pool {
    char *base, *bump, *end;  /* the arena; [bump, end) never handed out yet */
    void *free[POOL_CLASSES]; /* class c holds blocks of 16 * (c + 1) bytes */
};

/* Reserves the arena (address space only: pages are touched as blocks are first used). */
void script_pool_init(struct script_pool *p);
/* Unmaps the arena. Every block it handed out must be dead (the Lua state closed). */
void script_pool_free(struct script_pool *p);

/* lua_Alloc's contract: ptr of osize bytes (NULL, 0 for a new block) becomes nsize bytes; nsize
 * 0 frees and returns NULL. Returns NULL when malloc fails, which never happens on a shrink.
 * osize must be the size the block was last given with (Lua 5.1 always passes it). The common
 * cases (a new small block, freeing one) are inline; the rest is script_pool_realloc_slow. */
void *script_pool_realloc_slow(struct script_pool *p, void *ptr, size_t osize, size_t nsize);

static inline int script_pool_owns(const struct script_pool *p, const void *b)
{
    return (uintptr_t)b - (uintptr_t)p->base < POOL_ARENA_BYTES && p->base != NULL;
}

static inline void *script_pool_realloc(struct script_pool *p, void *ptr, size_t osize,
                                        size_t nsize)
{
#ifndef POOL_NO_INLINE
    if (ptr == NULL && nsize - 1 < POOL_MAX_BLOCK) {
        void **head = &p->free[(nsize - 1) >> 4];
        void *b = *head;
        if (b != NULL) {
            *head = *(void **)b;
            return b;
        }
    } else if (nsize == 0 && script_pool_owns(p, ptr)) {
        void **head = &p->free[(osize - 1) >> 4];
        *(void **)ptr = *head;
        *head = ptr;
        return NULL;
    }
#endif
    return script_pool_realloc_slow(p, ptr, osize, nsize);
}

#endif
