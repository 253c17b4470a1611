/* ks_slab.c - each shard's entry allocator and its byte counter.
 *
 * Entries (per shard): a slab allocator with size classes in 8-byte steps from 16 to 256 bytes,
 * 64 KiB slabs from mmap (so freed tables and slabs go back to the kernel and never fragment the
 * malloc heap), and a free list per class threaded through freed entries. Entries above 256 bytes
 * get their own malloc block. A reference is (block index << 13) | (offset / 8), so there is no
 * malloc header per key (ks_entry.h has the entry's layout).
 *
 * Memory accounting (ks_used_memory): live slab entries at their class size, slot arrays, large
 * entries and blobs (malloc_usable_size), all added to the shard's mem counter here (shard_alloc,
 * shard_free, mem_add). Entries are counted live, not as the slab pages they touched, as Redis's
 * used_memory counts what the allocator has handed out: a deleted entry (DEL, expiry, eviction)
 * lowers it at once, which is what lets eviction get under maxmemory; the freed slots wait on the
 * free lists for the next keys (RSS minus used memory shows them, as fragmentation). When a table
 * shrinks, the live entries are also copied into fresh slabs and the old slabs are unmapped
 * (ks_table.c rehash), so memory goes back after mass expiry, not only after FLUSHALL. A shard
 * left with no key keeps its slabs until the active-expiry sweep has found it empty for a while
 * (ks_table.c release_idle_slabs), so a key created and deleted in a loop maps nothing anew. */
#include "ks_internal.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rlimitd/alloc.h"

void *xmmap(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        alloc_fail(n);
    return p;
}

void mem_add(struct shard *sh, void *p, int sign)
{
    mem_add_n(sh, (int64_t)malloc_usable_size(p) * sign);
}

void *shard_alloc(struct shard *sh, size_t n)
{
    void *p = xmalloc(n);
    mem_add(sh, p, 1);
    return p;
}

void shard_free(struct shard *sh, void *p)
{
    if (p == NULL)
        return;
    mem_add(sh, p, -1);
    free(p);
}

void slabs_init(struct slabs *s)
{
    memset(s, 0, sizeof(*s));
    for (unsigned c = 0; c < NCLASS; c++) {
        s->free_head[c] = REF_NONE;
        s->bump_off[c] = SLAB_SIZE;
    }
}

uint32_t new_index(struct shard *sh, struct slabs *s)
{
    if (s->nfree_idx > 0)
        return s->free_idx[--s->nfree_idx];
    if (s->nblk >= MAX_BLOCKS) {
        fprintf(stderr, "rlimitd: a keyspace shard ran out of entry blocks\n");
        abort();
    }
    if (s->nblk == s->cap) {
        /* The index arrays are bookkeeping of a few bytes per 64 KiB; they are counted too. */
        if (s->blk != NULL)
            mem_add(sh, s->blk, -1);
        s->cap = s->cap ? s->cap * 2 : 16;
        s->blk = xrealloc(s->blk, s->cap * sizeof(*s->blk));
        mem_add(sh, s->blk, 1);
    }
    return s->nblk++;
}

uint32_t slab_alloc(struct shard *sh, struct slabs *s, size_t size)
{
    uint32_t ref;
    sh->idle_sweeps = 0; /* the shard is in use: its slabs stay (release_idle_slabs) */
    if (size > MAX_SMALL) {
        uint32_t i = new_index(sh, s);
        s->blk[i] = shard_alloc(sh, size);
        ref = i << OFF_BITS;
    } else {
        unsigned c = (unsigned)((size + 7) / 8 - MIN_ENTRY / 8);
        uint32_t csize = (c + MIN_ENTRY / 8) * 8;
        if (s->free_head[c] != REF_NONE) {
            ref = s->free_head[c];
            memcpy(&s->free_head[c], sl_ptr(s, ref), 4);
        } else {
            if (s->bump_off[c] + csize > SLAB_SIZE) {
                uint32_t i = new_index(sh, s);
                s->blk[i] = xmmap(SLAB_SIZE);
                if (s->nslab == s->cap_slab) {
                    void *old = s->slab_idx;
                    if (old != NULL)
                        mem_add(sh, old, -1);
                    s->cap_slab = s->cap_slab ? s->cap_slab * 2 : 8;
                    s->slab_idx = xrealloc(old, s->cap_slab * sizeof(*s->slab_idx));
                    mem_add(sh, s->slab_idx, 1);
                }
                s->slab_idx[s->nslab++] = i;
                s->bump_blk[c] = i;
                s->bump_off[c] = 0;
            }
            uint32_t off = s->bump_off[c];
            ref = (s->bump_blk[c] << OFF_BITS) | (off >> UNIT_SHIFT);
            s->bump_off[c] = off + csize;
        }
        s->slab_bytes += csize;
        mem_add_n(sh, csize);
    }
    return ref;
}

void slab_free(struct shard *sh, struct slabs *s, uint32_t ref, size_t size)
{
    if (size > MAX_SMALL) {
        uint32_t i = ref >> OFF_BITS;
        shard_free(sh, s->blk[i]);
        s->blk[i] = NULL;
        if (s->nfree_idx == s->cap_free_idx) {
            if (s->free_idx != NULL)
                mem_add(sh, s->free_idx, -1);
            s->cap_free_idx = s->cap_free_idx ? s->cap_free_idx * 2 : 16;
            s->free_idx = xrealloc(s->free_idx, s->cap_free_idx * sizeof(*s->free_idx));
            mem_add(sh, s->free_idx, 1);
        }
        s->free_idx[s->nfree_idx++] = i;
        return;
    }
    unsigned c = (unsigned)((size + 7) / 8 - MIN_ENTRY / 8);
    uint32_t csize = (c + MIN_ENTRY / 8) * 8;
    memcpy(sl_ptr(s, ref), &s->free_head[c], 4);
    s->free_head[c] = ref;
    s->slab_bytes -= csize;
    mem_add_n(sh, -(int64_t)csize);
}

/* Unmaps every slab of s and frees its index arrays. Large entries are not freed here: a flush
 * frees them while walking the table, a compaction hands them to the new allocator. */
void slabs_release(struct shard *sh, struct slabs *s)
{
    for (uint32_t i = 0; i < s->nslab; i++)
        munmap(s->blk[s->slab_idx[i]], SLAB_SIZE);
    shard_free(sh, s->slab_idx);
    shard_free(sh, s->blk);
    shard_free(sh, s->free_idx);
    mem_add_n(sh, -(int64_t)s->slab_bytes);
    s->blk = NULL;
    s->free_idx = NULL;
    s->slab_idx = NULL;
}
