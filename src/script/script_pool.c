/* script_pool.c - size-class free lists over one arena per Lua state (script_pool.h). */
#include "script_pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef POOL_ASAN
/* A block on a free list is poisoned, so AddressSanitizer still reports a use after free of a
 * Lua object until the block is handed out again. */
#include <sanitizer/asan_interface.h>
#define POISON(b, n) ASAN_POISON_MEMORY_REGION((b), (n))
#define UNPOISON(b, n) ASAN_UNPOISON_MEMORY_REGION((b), (n))
#else
#define POISON(b, n) ((void)(b), (void)(n))
#define UNPOISON(b, n) ((void)(b), (void)(n))
#endif

/* Class of a size in 1..POOL_MAX_BLOCK, and the block size of a class. */
static inline unsigned class_of(size_t n)
{
    return (unsigned)((n - 1) >> 4);
}

static inline size_t class_size(unsigned c)
{
    return ((size_t)c + 1) << 4;
}

void script_pool_init(struct script_pool *p)
{
    memset(p, 0, sizeof(*p));
    void *a = mmap(NULL, POOL_ARENA_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED)
        return; /* no arena: every block comes from malloc */
    p->base = p->bump = a;
    p->end = p->base + POOL_ARENA_BYTES;
    POISON(p->base, POOL_ARENA_BYTES);
}

void script_pool_free(struct script_pool *p)
{
    if (p->base != NULL) {
        UNPOISON(p->base, POOL_ARENA_BYTES);
        munmap(p->base, POOL_ARENA_BYTES);
    }
    memset(p, 0, sizeof(*p));
}

/* A block of class c from its free list or the arena, or NULL when both are empty. */
static inline void *take(struct script_pool *p, unsigned c)
{
    size_t sz = class_size(c);
    void *b = p->free[c];
    if (b != NULL) {
        UNPOISON(b, sz);
        p->free[c] = *(void **)b;
        return b;
    }
    if ((size_t)(p->end - p->bump) < sz)
        return NULL;
    b = p->bump;
    p->bump += sz;
    UNPOISON(b, sz);
    return b;
}

static inline void give_back(struct script_pool *p, void *b, size_t size)
{
    unsigned c = class_of(size);
    *(void **)b = p->free[c];
    p->free[c] = b;
    POISON(b, class_size(c));
}

static void *alloc_new(struct script_pool *p, size_t n)
{
    if (n <= POOL_MAX_BLOCK) {
        void *b = take(p, class_of(n));
        if (b != NULL)
            return b;
    }
    return malloc(n);
}

void *script_pool_realloc_slow(struct script_pool *p, void *ptr, size_t osize, size_t nsize)
{
    if (ptr == NULL)
        return nsize == 0 ? NULL : alloc_new(p, nsize);
    if (!script_pool_owns(p, ptr)) {
        if (nsize == 0) {
            free(ptr);
            return NULL;
        }
        if (nsize > POOL_MAX_BLOCK || nsize <= osize)
            return realloc(ptr, nsize); /* glibc never fails a shrink */
        void *b = take(p, class_of(nsize));
        if (b == NULL)
            return realloc(ptr, nsize);
        memcpy(b, ptr, osize);
        free(ptr);
        return b;
    }
    if (nsize == 0) {
        give_back(p, ptr, osize);
        return NULL;
    }
    if (nsize <= osize) {
        /* A shrink stays in place: the block is at least nsize, and goes back to the smaller
         * class when freed. It never fails. */
        return ptr;
    }
    if (nsize <= class_size(class_of(osize)))
        return ptr;
    void *b = alloc_new(p, nsize);
    if (b == NULL)
        return NULL;
    memcpy(b, ptr, osize);
    give_back(p, ptr, osize);
    return b;
}
