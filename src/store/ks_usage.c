/* ks_usage.c - what one key costs in memory (MEMORY USAGE) and what the tables themselves cost
 * (MEMORY STATS), counted from the same sizes the shard's byte counter adds (ks_slab.c), so the
 * figures add up to ks_used_memory's: nothing is estimated or sampled. */
#include <malloc.h>

#include "ks_internal.h"

/* The bytes the slab allocator hands out for an entry of `size` bytes: its class (a multiple of
 * 8, at least MIN_ENTRY), or the whole malloc block of a large entry. */
static uint64_t entry_alloc_bytes(const uint8_t *e)
{
    size_t size = e_size(e);
    if (size > MAX_SMALL)
        return malloc_usable_size((void *)e); /* a large entry is its own block (slab_alloc) */
    return (size + 7) / 8 * 8;
}

int ks_key_memory(struct keyspace *ks, const struct ks_key *key, int64_t now, uint64_t *bytes)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return KS_NOKEY;
    const uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    /* The key's own slot in the table (a tag byte and a 32-bit reference), its entry (value
     * field, flags, lengths, expiry, key bytes; a small hash's fields too), and the block its
     * value points to, measured as free_value would give it back. */
    uint64_t n = 1 + sizeof(uint32_t) + entry_alloc_bytes(e);
    if (has_blob(t) && !e_inline_hash(e) && e_ptr(e) != NULL)
        n += blob_bytes(t, e_ptr(e));
    *bytes = n;
    return KS_OK;
}

uint64_t ks_shard_table_memory(struct keyspace *ks, unsigned shard)
{
    const struct shard *sh = &ks->shards[shard];
    return sh->tags != NULL ? (sh->mask + 1) * (1 + sizeof(uint32_t)) : 0;
}
