/* ks_lease.c - concurrency leases (KS_LEASE, keyspace.h "concurrency leases"): a key's struct
 * lease_set (lease.h) in a blob of the shard, every change made by lease.c. The key's expiry is
 * its latest lease's, so a set whose leases all expired goes with its key, by lazy or active
 * expiry; leases expired earlier are dropped by the next write to the key. */
#include "ks_internal.h"

#include "rlimitd/lease.h"

/* The set at slot i (its entry must be KS_LEASE). */
static struct lease_set *set_at(struct shard *sh, uint64_t i)
{
    return e_ptr(slot_entry(sh, i));
}

/* After a change: an empty set deletes the key; else the key expires with its last lease. */
static void settle(struct keyspace *ks, struct shard *sh, uint64_t i)
{
    struct lease_set *s = set_at(sh, i);
    if (s->n == 0) {
        remove_slot(ks, sh, i);
        maybe_shrink(ks, sh);
        return;
    }
    set_expire(sh, i, lease_max_expire(s)); /* counts the write for WATCH */
}

/* The set at key with the expired leases dropped (*purged says whether any were): its slot,
 * or -1 (absent), -2 (another type). */
static int64_t open_set(struct keyspace *ks, struct shard *sh, const struct ks_key *key,
                        int64_t now, int *purged)
{
    int64_t i = find(ks, sh, key, now);
    *purged = 0;
    if (i < 0)
        return -1;
    if (e_type(slot_entry(sh, (uint64_t)i)) != KS_LEASE)
        return -2;
    *purged = lease_purge(set_at(sh, (uint64_t)i), now) > 0;
    return i;
}

int ks_lease_acquire(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t limit,
                     int64_t ttl_ns, struct ks_lease_out *out)
{
    struct shard *sh = shard_of(ks, key);
    int purged;
    int64_t i = open_set(ks, sh, key, now, &purged);
    *out = (struct ks_lease_out){0};
    if (i == -2)
        return KS_WRONGTYPE;
    struct lease_set *s;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        i = (int64_t)insert(ks, sh, key, KS_LEASE, F_HAS_EXP);
        s = shard_alloc(sh, lease_set_bytes(4));
        lease_set_init(s, 4, 0);
        e_set_ptr(slot_entry(sh, (uint64_t)i), s);
    }
    s = set_at(sh, (uint64_t)i);
    if (s->n >= limit) {
        out->count = s->n;
        out->next_free = lease_min_expire(s);
        if (purged)
            settle(ks, sh, (uint64_t)i); /* the latest expiry may have gone with them */
        return KS_OK;
    }
    if (s->n == s->cap) {
        uint32_t cap = lease_grow_cap(s, limit);
        struct lease_set *g = shard_alloc(sh, lease_set_bytes(cap));
        memcpy(g, s, lease_set_bytes(s->n));
        g->cap = cap;
        shard_free(sh, s);
        e_set_ptr(slot_entry(sh, (uint64_t)i), g);
        s = g;
    }
    out->id = lease_new_id(s, now);
    lease_put(s, out->id, now + ttl_ns);
    out->count = s->n;
    settle(ks, sh, (uint64_t)i);
    return KS_OK;
}

int ks_lease_release(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t id,
                     struct ks_lease_out *out)
{
    struct shard *sh = shard_of(ks, key);
    int purged;
    int64_t i = open_set(ks, sh, key, now, &purged);
    *out = (struct ks_lease_out){0};
    if (i == -2)
        return KS_WRONGTYPE;
    if (i < 0)
        return KS_OK;
    struct lease_set *s = set_at(sh, (uint64_t)i);
    int at = lease_find(s, id);
    if (at >= 0) {
        lease_remove(s, at);
        out->done = 1;
    }
    out->count = s->n;
    if (out->done || purged)
        settle(ks, sh, (uint64_t)i);
    return KS_OK;
}

int ks_lease_renew(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t id,
                   int64_t ttl_ns, struct ks_lease_out *out)
{
    struct shard *sh = shard_of(ks, key);
    int purged;
    int64_t i = open_set(ks, sh, key, now, &purged);
    *out = (struct ks_lease_out){0};
    if (i == -2)
        return KS_WRONGTYPE;
    if (i < 0)
        return KS_OK;
    struct lease_set *s = set_at(sh, (uint64_t)i);
    if (lease_find(s, id) >= 0) {
        lease_put(s, id, now + ttl_ns);
        out->done = 1;
    }
    out->count = s->n;
    if (out->done || purged)
        settle(ks, sh, (uint64_t)i);
    return KS_OK;
}

int ks_lease_count(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *count)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    *count = 0;
    if (i < 0)
        return KS_OK;
    if (e_type(slot_entry(sh, (uint64_t)i)) != KS_LEASE)
        return KS_WRONGTYPE;
    *count = lease_count_live(set_at(sh, (uint64_t)i), now);
    return KS_OK;
}
