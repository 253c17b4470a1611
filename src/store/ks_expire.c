/* ks_expire.c - expiry: TTL, EXPIRE and PERSIST on a key, the active expiry cycle, and SCAN.
 *
 * Expiry is lazy (find frees an expired entry it meets, ks_internal.h) and active
 * (ks_expire_cycle walks a shard's slots from where it stopped last).
 *
 * SCAN: the cursor is a home slot, advanced in reverse-binary order as Redis's dictScan does. For
 * home slot v it walks from slot v to the next empty slot and reports the keys whose home is v:
 * all of them lie in that run (ks_table.c's invariant). Doubling splits home v into v and v + n,
 * and halving merges them, exactly as chained buckets split and merge, so keys present for the
 * whole scan are reported at least once across resizes. */
#include "ks_internal.h"

int64_t ks_ttl_ns(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return -2;
    int64_t x = e_expire(slot_entry(sh, (uint64_t)i));
    if (x == 0)
        return -1;
    return x < 0 ? INT64_MAX : x - now; /* x < 0: a far stamp (keyspace.h) */
}

int ks_expiry(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *stamp)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return -2;
    *stamp = e_expire(slot_entry(sh, (uint64_t)i));
    return *stamp != 0 ? 1 : -1;
}

int ks_expire(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t at, int flags)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return 0;
    /* Redis 7 semantics: a key without expiry has an infinite TTL for GT/LT. */
    int64_t x = e_expire(slot_entry(sh, (uint64_t)i));
    int has = x != 0;
    if ((flags & KS_EXPIRE_NX) && has)
        return 0;
    if ((flags & KS_EXPIRE_XX) && !has)
        return 0;
    if ((flags & KS_EXPIRE_GT) && (!has || ks_stamp_le(at, x)))
        return 0;
    if ((flags & KS_EXPIRE_LT) && has && ks_stamp_le(x, at))
        return 0;
    if (ks_stamp_le(at, now)) {
        remove_slot(ks, sh, (uint64_t)i);
        return 1;
    }
    set_expire(sh, (uint64_t)i, at);
    return 1;
}

int ks_persist(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0 || e_expire(slot_entry(sh, (uint64_t)i)) == 0)
        return 0;
    set_expire(sh, (uint64_t)i, 0);
    return 1;
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    return __builtin_bswap64(v);
}

uint64_t ks_scan_shard(struct keyspace *ks, unsigned shard, uint64_t cursor, size_t count,
                       int64_t now, ks_visit_fn cb, void *ud)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t mask = sh->mask;
    uint64_t v = cursor;
    size_t visited = 0;
    do {
        /* Every key whose home slot is v lies between v and the next empty slot. */
        uint64_t home = v & mask;
        for (uint64_t i = home; sh->tags[i] != 0; i = (i + 1) & mask) {
            const uint8_t *e = slot_entry(sh, i);
            if ((entry_hash(ks, e) & mask) != home || e_expired(e, now))
                continue;
            size_t klen = e_klen(e);
            cb(ud, e_key(e, klen), klen, e_type(e));
        }
        /* Increment the reversed cursor: the high bits of the home slot advance first, so
         * homes already visited before a resize map onto visited homes after it. */
        v |= ~mask;
        v = rev64(v);
        v++;
        v = rev64(v);
        visited++;
    } while (v != 0 && visited < count);
    return v;
}

size_t ks_expire_cycle(struct keyspace *ks, unsigned shard, int64_t now, size_t max_buckets)
{
    struct shard *sh = &ks->shards[shard];
    size_t freed = 0;
    meta_sync(ks, sh); /* a policy change that found this shard busy (ks_set_eviction) */
    release_idle_slabs(ks, sh);
    if (atomic_load_explicit(&sh->expires, memory_order_relaxed) == 0) {
        maybe_shrink(ks, sh);
        return 0;
    }
    uint64_t n = sh->mask + 1;
    uint64_t i = sh->expire_cursor & sh->mask;
    for (uint64_t examined = 0; examined < max_buckets && examined < n; examined++) {
        if (sh->tags[i] != 0 && e_expired(slot_entry(sh, i), now)) {
            /* The backward shift may have moved a later entry into slot i: look again. */
            raise_event(ks, KS_EVENT_EXPIRED, slot_entry(sh, i));
            remove_slot(ks, sh, i);
            freed++;
            continue;
        }
        i = (i + 1) & sh->mask;
    }
    sh->expire_cursor = i;
    maybe_shrink(ks, sh);
    return freed;
}
