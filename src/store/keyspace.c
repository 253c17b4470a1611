/* keyspace.c - the keyspace as a whole: create, flush and destroy, shard locks, memory and key
 * counts, WATCH, and the operations on any key (DEL, RENAME, ks_type_name).
 *
 * The keyspace is split into shards (a power of two), each a table of entries (ks_table.c) in
 * its own slabs (ks_slab.c) under its own lock; ks_internal.h lists which file does what. Nothing
 * in src/store takes a lock: keyspace.h states what the caller must hold. */
#include "ks_internal.h"

#include <stdlib.h>
#include <time.h>

#include "rlimitd/alloc.h"
#include "rlimitd/zset.h"

/* What ks_set_event_hook's classes word is while no hook is set: nothing wanted. */
static const int64_t no_classes = 0;

struct keyspace *ks_create(unsigned shard_bits, const uint8_t seed[16])
{
    if (shard_bits > 12)
        return NULL;
    struct keyspace *ks = calloc(1, sizeof(*ks));
    if (ks == NULL)
        alloc_fail(sizeof(*ks));
    ks->bits = shard_bits;
    ks->nshards = 1u << shard_bits;
    ks->policy = KS_POL_NOEVICTION; /* Redis's defaults until ks_set_eviction */
    ks->samples = 5;
    ks->lfu_log_factor = 10;
    ks->lfu_decay_time = 1;
    memcpy(ks->seed, seed, 16);
    ks->ev_classes = &no_classes;
    zs_set_seed(seed);
    hv_set_seed(seed);
    if (posix_memalign((void **)&ks->shards, 64, ks->nshards * sizeof(struct shard)) != 0)
        abort();
    memset(ks->shards, 0, ks->nshards * sizeof(struct shard));
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        pthread_mutex_init(&sh->lock, NULL);
        slabs_init(&sh->sl);
        table_alloc(sh, MIN_SLOTS);
    }
    return ks;
}

void ks_set_event_hook(struct keyspace *ks, ks_event_fn fn, void *ud, const int64_t *classes,
                       const int64_t want[KS_EVENTS])
{
    ks->ev_fn = fn;
    ks->ev_ud = ud;
    for (int i = 0; i < KS_EVENTS; i++)
        ks->ev_want[i] = fn != NULL ? want[i] : 0;
    ks->ev_classes = fn != NULL ? classes : &no_classes;
}

void ks_flush_shard(struct keyspace *ks, unsigned shard)
{
    struct shard *sh = &ks->shards[shard];
    for (struct ks_watch *w = sh->watch; w != NULL; w = w->next) {
        struct ks_key k = {w->key, w->len, w->hash};
        if (lookup(sh, &k) >= 0)
            w->version++;
    }
    for (uint64_t i = 0; i <= sh->mask; i++) {
        if (sh->tags[i] == 0)
            continue;
        uint32_t ref = sh->refs[i];
        uint8_t *e = ref_ptr(sh, ref);
        free_value(sh, e);
        if (e_size(e) > MAX_SMALL) {
            shard_free(sh, sh->sl.blk[ref >> OFF_BITS]);
            sh->sl.blk[ref >> OFF_BITS] = NULL;
        }
    }
    slabs_release(sh, &sh->sl);
    slabs_init(&sh->sl);
    atomic_store_explicit(&sh->count, 0, memory_order_relaxed);
    atomic_store_explicit(&sh->expires, 0, memory_order_relaxed);
    atomic_store_explicit(&sh->limiter, 0, memory_order_relaxed);
    sh->dump_left = 0; /* a dump in progress has nothing left to find */
    /* Give a big emptied table back. */
    if (sh->mask + 1 > MIN_SLOTS) {
        uint64_t on = sh->mask + 1;
        table_free(sh, sh->tags, on);
        table_alloc(sh, MIN_SLOTS);
        if (sh->meta != NULL) {
            meta_free(sh, sh->meta, on);
            sh->meta = meta_alloc(sh, MIN_SLOTS);
        }
    } else {
        memset(sh->tags, 0, sh->mask + 1);
    }
    sh->expire_cursor = 0;
}

void ks_destroy(struct keyspace **ksp)
{
    struct keyspace *ks = *ksp;
    if (ks == NULL)
        return;
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        ks_flush_shard(ks, i);
        if (sh->meta != NULL)
            meta_free(sh, sh->meta, sh->mask + 1);
        table_free(sh, sh->tags, sh->mask + 1);
        pthread_mutex_destroy(&sh->lock);
    }
    free(ks->shards);
    free(ks);
    *ksp = NULL;
}

void ks_key_init(const struct keyspace *ks, struct ks_key *k, const char *p, size_t len)
{
    k->p = p;
    k->len = len;
    k->hash = hash_siphash13(p, len, ks->seed);
}

unsigned ks_shard(const struct keyspace *ks, const struct ks_key *k)
{
    return shard_index(ks, k);
}

unsigned ks_nshards(const struct keyspace *ks)
{
    return ks->nshards;
}

void ks_lock(struct keyspace *ks, unsigned shard)
{
    pthread_mutex_lock(&ks->shards[shard].lock);
}

int ks_timedlock(struct keyspace *ks, unsigned shard, int64_t mono_deadline_ns)
{
    /* pthread_mutex_timedlock against the wall clock, the deadline carried over from the
     * monotonic one: ThreadSanitizer knows timedlock but not clocklock, and would take every
     * shard clocklock had taken for unlocked. A wall-clock step shortens or stretches one wait;
     * callers look at the monotonic time again after it. */
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    int64_t left = mono_deadline_ns - ((int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec);
    if (left < 0)
        left = 0;
    int64_t at = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec + left;
    struct timespec ts = {(time_t)(at / 1000000000), (long)(at % 1000000000)};
    return pthread_mutex_timedlock(&ks->shards[shard].lock, &ts) == 0 ? 0 : -1;
}

int ks_trylock(struct keyspace *ks, unsigned shard)
{
    return pthread_mutex_trylock(&ks->shards[shard].lock) == 0 ? 0 : -1;
}

void ks_unlock(struct keyspace *ks, unsigned shard)
{
    pthread_mutex_unlock(&ks->shards[shard].lock);
}

void ks_set_maxmemory(struct keyspace *ks, uint64_t bytes)
{
    atomic_store_explicit(&ks->maxmemory, bytes, memory_order_relaxed);
}

uint64_t ks_data_memory(const struct keyspace *ks)
{
    int64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].mem, memory_order_relaxed);
    return (sum < 0 ? 0 : (uint64_t)sum) +
           atomic_load_explicit(&ks->external, memory_order_relaxed);
}

/* Each counter is one thread's running sum of its own deltas: read alone it is that thread's
 * true total (never "negative"), so the sum needs no lock and no ordering. */
uint64_t ks_used_memory(const struct keyspace *ks)
{
    uint64_t sum = ks_data_memory(ks);
    unsigned n = atomic_load_explicit(&ks->ncounted, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        sum += atomic_load_explicit(ks->counted[i], memory_order_relaxed);
    return sum;
}

int ks_count_memory(struct keyspace *ks, const _Atomic uint64_t *counter)
{
    unsigned n = atomic_load_explicit(&ks->ncounted, memory_order_relaxed);
    if (n >= KS_MAX_COUNTED)
        return -1;
    ks->counted[n] = counter;
    atomic_store_explicit(&ks->ncounted, n + 1, memory_order_release);
    return 0;
}

void ks_set_external_memory(struct keyspace *ks, uint64_t bytes)
{
    atomic_store_explicit(&ks->external, bytes, memory_order_relaxed);
}

uint64_t ks_key_count(const struct keyspace *ks)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].count, memory_order_relaxed);
    return sum;
}

uint64_t ks_limiter_key_count(const struct keyspace *ks)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].limiter, memory_order_relaxed);
    return sum;
}

uint64_t ks_expires_count(const struct keyspace *ks)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].expires, memory_order_relaxed);
    return sum;
}

int ks_over_maxmemory(const struct keyspace *ks)
{
    return over_maxmemory(ks);
}

int ks_del(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return 0;
    remove_slot(ks, sh, (uint64_t)i);
    maybe_shrink(ks, sh);
    return 1;
}

int ks_rename(struct keyspace *ks, const struct ks_key *src, const struct ks_key *dst, int64_t now,
              int nx)
{
    struct shard *ss = shard_of(ks, src), *ds = shard_of(ks, dst);
    int64_t i = find(ks, ss, src, now);
    if (i < 0)
        return KS_NOKEY;
    if (src->len == dst->len && memcmp(src->p, dst->p, src->len) == 0)
        return nx ? 0 : 1;
    int64_t j = find(ks, ds, dst, now);
    if (j >= 0) {
        if (nx)
            return 0;
        remove_slot(ks, ds, (uint64_t)j);
        i = lookup(ss, src); /* the backward shift may have moved it */
    }
    /* The key is part of the entry, so the entry is rebuilt under the new name; the value (an
     * inline number or a pointer to its block) moves as it is, with its expiry and shape; an
     * inline hash is copied out and written into the new entry. */
    uint8_t *e = slot_entry(ss, (uint64_t)i);
    enum ks_type t = e_type(e);
    uint8_t shape = e[E_FLAGS] & (F_HAS_EXP | F_EXP_IS_VAL | F_CRING);
    int64_t exp = e_expire(e);
    uint8_t val[8];
    memcpy(val, e, sizeof(val));
    unsigned char hc[HV_COMPACT_MAX];
    size_t hn = e_inline_hash(e) ? inline_read(e, hc) : 0;
    if (hn == 0 && has_blob(t)) {
        void *blob = e_ptr(e);
        int64_t bytes = (int64_t)blob_bytes(t, blob);
        mem_add_n(ss, -bytes);
        mem_add_n(ds, bytes);
        e_set_ptr(e, NULL); /* not freed with the old entry */
    }
    remove_slot(ks, ss, (uint64_t)i);
    uint64_t k = insert(ks, ds, dst, t, shape & (F_HAS_EXP | F_EXP_IS_VAL));
    uint8_t *n = slot_entry(ds, k);
    if (hn > 0 && hn <= inline_cap(n[E_FLAGS], dst->len)) {
        n = set_inline_room(ds, k, hn);
        inline_write(n, hc, hn);
    } else if (hn > 0) {
        /* Under a longer name it no longer fits its entry: it goes to the heap. */
        struct hv_local buf;
        struct hashval *h = hv_to_heap(hv_compact_load(&buf, hc, hn));
        e_set_ptr(n, h);
        mem_add_n(ds, (int64_t)hv_bytes(h));
    } else {
        memcpy(n, val, sizeof(val));
    }
    if (t == KS_SWLOG)
        n[E_FLAGS] |= shape & F_CRING;
    if (shape & F_HAS_EXP)
        memcpy(n + exp_off(dst->len), &exp, 8);
    if (exp != 0)
        counter_add(&ds->expires, 1);
    maybe_shrink(ks, ss);
    return 1;
}

/* ---- WATCH (ks_internal.h "Watched keys") ---- */

struct ks_watch *ks_watch_key(struct keyspace *ks, const struct ks_key *key, int64_t now,
                              uint64_t *version)
{
    struct shard *sh = shard_of(ks, key);
    find(ks, sh, key, now); /* an expired entry goes now, so EXEC sees later expiries only */
    struct ks_watch *w;
    for (w = sh->watch; w != NULL; w = w->next)
        if (w->len == key->len && memcmp(w->key, key->p, key->len) == 0)
            break;
    if (w == NULL) {
        w = shard_alloc(sh, sizeof(*w) + key->len);
        w->shard = ks_shard(ks, key);
        w->refs = 0;
        w->version = 0;
        w->hash = key->hash;
        w->len = key->len;
        memcpy(w->key, key->p, key->len);
        w->next = sh->watch;
        sh->watch = w;
    }
    w->refs++;
    *version = w->version;
    return w;
}

unsigned ks_watch_shard(const struct ks_watch *w)
{
    return w->shard;
}

int ks_watch_changed(struct keyspace *ks, const struct ks_watch *w, uint64_t version, int64_t now)
{
    if (w->version != version)
        return 1;
    /* Expired since WATCH but not reclaimed yet: a change all the same. */
    struct shard *sh = &ks->shards[w->shard];
    struct ks_key k = {w->key, w->len, w->hash};
    int64_t i = lookup(sh, &k);
    return i >= 0 && e_expired(slot_entry(sh, (uint64_t)i), now);
}

void ks_watch_release(struct keyspace *ks, struct ks_watch *w)
{
    if (--w->refs != 0)
        return;
    struct shard *sh = &ks->shards[w->shard];
    struct ks_watch **pp = &sh->watch;
    while (*pp != w)
        pp = &(*pp)->next;
    *pp = w->next;
    shard_free(sh, w);
}

const char *ks_type_name(enum ks_type t)
{
    switch (t) {
    case KS_NONE:
        return "none";
    case KS_SWLOG:
    case KS_ZSET:
        return "zset";
    case KS_HASH:
        return "hash";
    case KS_LIST:
        return "list";
    case KS_LEASE:
        return "rlim-leas";
    default:
        return "string";
    }
}
