/* ks_evict.c - maxmemory-policy: which keys go when used memory is over maxmemory, and the
 * access data the LRU and LFU policies need (CONFIG.md, maxmemory-policy).
 *
 * Access data. An entry has no spare bit (ks_entry.h: the flags byte is full, the value and the
 * key length are used whole, a slot is a tag and a reference). So the access data of an LRU or
 * LFU policy is a uint16 array parallel to the shard's slots, moved with its slot wherever the
 * table moves a reference (insert, backward-shift removal, rehash, bulk load), and allocated only
 * while such a policy is set: under the default noeviction and the random and ttl policies a key
 * costs the same bytes as before. Under LRU a slot holds the second of its last access (16 bits,
 * so an idle time is exact up to 18 hours and then wraps); under LFU it holds Redis's counter
 * (8 bits, incremented log-probabilistically by lfu-log-factor) and the minute of its last decay
 * (8 bits: a key idle more than 4 hours 16 minutes decays as if the count wrapped). Redis keeps
 * 24 bits per key for the same; these are the widths that fit 2 bytes a slot.
 *
 * Sampling. As Redis, eviction does not sort the keyspace: each round samples maxmemory-samples
 * keys in each of a few shards (from a random slot, the next occupied ones; for the volatile
 * policies the ones with an expiry), scores them (idle time, 255 - LFU counter, or nearness of
 * the expiry), and keeps the best EVPOOL_SIZE across rounds in a pool of this thread; the best in
 * the pool that still exists is deleted. A pool entry names its key by shard and 64-bit hash, so
 * the pool holds no key bytes; the key is found again by probing from its home slot.
 *
 * Locks. Every shard is taken with trylock, one at a time, and released before the next: a busy
 * shard is skipped, never waited for, so eviction cannot deadlock with the locks its caller may
 * hold (a script's, another thread's) and no lock order applies (DESIGN.md, Threads). A deletion
 * goes through remove_slot, the path of DEL and expiry, so WATCH sees it. */
#include "ks_internal.h"

#include <stdlib.h>
#include <time.h>

#include "rlimitd/alloc.h"

#define EVPOOL_SIZE 16
#define SHARDS_PER_ROUND 4
#define EVICT_BUDGET_NS 1000000 /* Redis's eviction time limit idea: about a millisecond */
#define MAX_WALK 1024           /* slots a sample examines in one shard at most */

/* The shards are brought to the new policy's access data here when free, else by the next
 * eviction round or active expiry cycle that holds them (meta_sync): the caller may hold shard
 * locks (CONFIG SET inside EXEC), so this never waits for one. */
void ks_set_eviction(struct keyspace *ks, int policy, int samples, int lfu_log_factor,
                     int lfu_decay_time)
{
    atomic_store_explicit(&ks->samples, samples, memory_order_relaxed);
    atomic_store_explicit(&ks->lfu_log_factor, lfu_log_factor, memory_order_relaxed);
    atomic_store_explicit(&ks->lfu_decay_time, lfu_decay_time, memory_order_relaxed);
    atomic_store_explicit(&ks->policy, policy, memory_order_relaxed);
    for (unsigned s = 0; s < ks->nshards; s++) {
        struct shard *sh = &ks->shards[s];
        if (pthread_mutex_trylock(&sh->lock) != 0)
            continue;
        meta_sync(ks, sh);
        pthread_mutex_unlock(&sh->lock);
    }
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ks_access_info(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *idle_s,
                   int64_t *freq)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = lookup(sh, key);
    if (i < 0)
        return -1;
    if (e_expired(slot_entry(sh, (uint64_t)i), now)) {
        raise_event(ks, KS_EVENT_EXPIRED, slot_entry(sh, (uint64_t)i)); /* lazy expiry, as find */
        remove_slot(ks, sh, (uint64_t)i);
        return -1;
    }
    *idle_s = -1;
    *freq = -1;
    if (sh->meta != NULL && sh->meta_kind == META_LRU)
        *idle_s = (uint16_t)(lru_clock(now) - sh->meta[i]);
    else if (sh->meta != NULL && sh->meta_kind == META_LFU)
        *freq = lfu_decayed(ks, sh->meta[i], now);
    return 0;
}

/* ---- choosing and deleting ---- */

static int is_volatile(int policy)
{
    return policy <= KS_POL_VOLATILE_TTL;
}

/* Higher = evict sooner. */
static uint64_t score(const struct keyspace *ks, const struct shard *sh, uint64_t i, int policy,
                      int64_t now)
{
    switch (policy) {
    case KS_POL_VOLATILE_TTL:
        return UINT64_MAX - (uint64_t)e_expire(slot_entry(sh, i));
    case KS_POL_VOLATILE_LRU:
    case KS_POL_ALLKEYS_LRU:
        return sh->meta_kind == META_LRU ? (uint16_t)(lru_clock(now) - sh->meta[i]) : 0;
    default: /* LFU */
        return sh->meta_kind == META_LFU ? 255 - lfu_decayed(ks, sh->meta[i], now) : 0;
    }
}

struct pool_ent {
    uint64_t hash;
    uint64_t score;
    unsigned shard;
};

/* The pool, best candidate last. Per thread: eviction runs on any I/O thread at once. */
static _Thread_local struct pool_ent pool[EVPOOL_SIZE];
static _Thread_local int npool;
static _Thread_local const struct keyspace *pool_ks;
static _Thread_local int pool_policy;
static _Thread_local unsigned shard_cursor;

static void pool_insert(uint64_t hash, uint64_t sc, unsigned shard)
{
    for (int k = 0; k < npool; k++)
        if (pool[k].hash == hash && pool[k].shard == shard)
            return; /* sampled again */
    int at = 0;
    while (at < npool && pool[at].score < sc)
        at++;
    if (npool == EVPOOL_SIZE) {
        if (at == 0)
            return; /* worse than everything kept */
        memmove(&pool[0], &pool[1], (size_t)(at - 1) * sizeof(pool[0])); /* drop the worst */
        at--;
    } else {
        memmove(&pool[at + 1], &pool[at], (size_t)(npool - at) * sizeof(pool[0]));
        npool++;
    }
    pool[at] = (struct pool_ent){hash, sc, shard};
}

static void pool_remove(int k)
{
    memmove(&pool[k], &pool[k + 1], (size_t)(npool - k - 1) * sizeof(pool[0]));
    npool--;
}

static int qualifies(const struct shard *sh, uint64_t i, int policy)
{
    return !is_volatile(policy) || e_expire(slot_entry(sh, i)) != 0;
}

static int shard_has_candidates(struct shard *sh, int policy)
{
    _Atomic uint64_t *c = is_volatile(policy) ? &sh->expires : &sh->count;
    return atomic_load_explicit(c, memory_order_relaxed) != 0;
}

/* Samples up to `samples` candidates of a locked shard into the pool. */
static void sample_shard(const struct keyspace *ks, struct shard *sh, unsigned s, int policy,
                         int samples, int64_t now)
{
    uint64_t n = sh->mask + 1;
    uint64_t i = rng_next() & sh->mask;
    int got = 0;
    for (uint64_t walked = 0; walked < n && walked < MAX_WALK && got < samples; walked++) {
        if (sh->tags[i] != 0 && qualifies(sh, i, policy)) {
            pool_insert(entry_hash(ks, slot_entry(sh, i)), score(ks, sh, i, policy, now), s);
            got++;
        }
        i = (i + 1) & sh->mask;
    }
}

/* Slot of the entry whose key hashes to hash, or -1. */
static int64_t find_by_hash(const struct keyspace *ks, const struct shard *sh, uint64_t hash)
{
    uint64_t i = hash & sh->mask;
    uint8_t tag = tag_of(hash);
    for (;;) {
        uint8_t t = sh->tags[i];
        if (t == 0)
            return -1;
        if (t == tag && entry_hash(ks, slot_entry(sh, i)) == hash)
            return (int64_t)i;
        i = (i + 1) & sh->mask;
    }
}

static void delete_slot(struct keyspace *ks, struct shard *sh, uint64_t i)
{
    raise_event(ks, KS_EVENT_EVICTED, slot_entry(sh, i)); /* before the entry is freed */
    remove_slot(ks, sh, i);
    maybe_shrink(ks, sh);
}

/* One key by an LRU, LFU or TTL policy. 1 if deleted, 0 if no candidate was found. */
static int evict_pooled(struct keyspace *ks, int policy, int64_t now)
{
    if (pool_ks != ks || pool_policy != policy) {
        npool = 0;
        pool_ks = ks;
        pool_policy = policy;
    }
    int samples = atomic_load_explicit(&ks->samples, memory_order_relaxed);
    unsigned visited = 0;
    for (unsigned tried = 0; tried < ks->nshards && visited < SHARDS_PER_ROUND; tried++) {
        unsigned s = shard_cursor++ & (ks->nshards - 1);
        struct shard *sh = &ks->shards[s];
        if (!shard_has_candidates(sh, policy) || pthread_mutex_trylock(&sh->lock) != 0)
            continue;
        meta_sync(ks, sh);
        sample_shard(ks, sh, s, policy, samples, now);
        pthread_mutex_unlock(&sh->lock);
        visited++;
    }
    for (int k = npool - 1; k >= 0; k--) {
        struct shard *sh = &ks->shards[pool[k].shard];
        if (pthread_mutex_trylock(&sh->lock) != 0)
            continue; /* busy now: kept for a later round */
        int64_t i = find_by_hash(ks, sh, pool[k].hash);
        pool_remove(k);
        if (i >= 0 && qualifies(sh, (uint64_t)i, policy)) {
            delete_slot(ks, sh, (uint64_t)i);
            pthread_mutex_unlock(&sh->lock);
            return 1;
        }
        pthread_mutex_unlock(&sh->lock); /* gone or changed since sampled */
    }
    return 0;
}

/* One random key (of those with an expiry for volatile-random). 1 if deleted, 0 if none found. */
static int evict_random(struct keyspace *ks, int policy)
{
    unsigned start = (unsigned)rng_next();
    for (unsigned tried = 0; tried < ks->nshards; tried++) {
        struct shard *sh = &ks->shards[(start + tried) & (ks->nshards - 1)];
        if (!shard_has_candidates(sh, policy) || pthread_mutex_trylock(&sh->lock) != 0)
            continue;
        uint64_t n = sh->mask + 1;
        uint64_t i = rng_next() & sh->mask;
        for (uint64_t walked = 0; walked < n && walked < MAX_WALK; walked++) {
            if (sh->tags[i] != 0 && qualifies(sh, i, policy)) {
                delete_slot(ks, sh, i);
                pthread_mutex_unlock(&sh->lock);
                return 1;
            }
            i = (i + 1) & sh->mask;
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return 0;
}

_Thread_local int evict_admitted;

void ks_evict_forget(void)
{
    evict_admitted = 0;
}

int ks_evict(struct keyspace *ks, uint64_t extra, int64_t now, uint64_t *evicted)
{
    evict_admitted = 0;
    uint64_t max = atomic_load_explicit(&ks->maxmemory, memory_order_relaxed);
    if (max == 0 || ks_used_memory(ks) + extra <= max) {
        evict_admitted = 1;
        return 0;
    }
    int policy = atomic_load_explicit(&ks->policy, memory_order_relaxed);
    if (policy == KS_POL_NOEVICTION)
        return -1;
    int64_t deadline = mono_ns() + EVICT_BUDGET_NS;
    uint64_t freed = 0;
    unsigned misses = 0;
    int rc = 0;
    while (ks_used_memory(ks) + extra > max) {
        int got = (policy == KS_POL_ALLKEYS_RANDOM || policy == KS_POL_VOLATILE_RANDOM)
                      ? evict_random(ks, policy)
                      : evict_pooled(ks, policy, now);
        if (got) {
            freed++;
            misses = 0;
        } else if (++misses > 8) {
            rc = -1; /* nothing left the policy may delete (or every shard busy) */
            break;
        }
        /* Time is looked at after deletions only, as Redis does: a thread that lost its CPU
         * while sampling has not failed to find keys (the misses bound that search). */
        if (got && (freed & 15) == 0 && mono_ns() > deadline)
            break; /* having deleted keys: the command runs (EVICT_RUNNING) */
    }
    *evicted += freed;
    evict_admitted = rc == 0;
    return rc;
}
