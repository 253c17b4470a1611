/* keyspace.c - sharded chained hash tables of typed entries, with expiry and memory accounting.
 *
 * Layout (DESIGN.md "Memory layout"): an entry is one allocation holding the chain pointer, the
 * absolute expiry, an 8-byte value and the key bytes inline. Strings that are not canonical
 * integers and window logs live in a second allocation pointed to by the value.
 *
 * Shard = top bits of the key's hash, bucket = low bits, so growing or shrinking a shard's table
 * never moves a key to another shard (its lock stays the same) and SCAN's reverse-binary cursor
 * works per shard. Nothing here takes a lock: keyspace.h states what the caller must hold. */
#include "rlimitd/keyspace.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/hash.h"
#include "rlimitd/swlog.h"
#include "rlimitd/util.h"

#define MIN_BUCKETS 16
#define NS_PER_MS 1000000

struct entry {
    struct entry *next;
    int64_t expire; /* absolute ns; 0 = none */
    union {
        int64_t i; /* KS_GCRA: TAT; KS_INT: the value */
        void *p;   /* KS_RAW: struct rawstr; KS_SWLOG: struct swlog */
    } v;
    uint32_t klen;
    uint8_t type;
    char key[];
};

struct rawstr {
    size_t len;
    char data[];
};

struct shard {
    pthread_mutex_t lock;
    struct entry **buckets;
    uint64_t mask;          /* buckets - 1 */
    uint64_t expire_cursor; /* where the active expiry sweep resumes */
    /* Written under the lock, read by INFO without it: relaxed atomics. */
    _Atomic uint64_t count;
    _Atomic uint64_t expires;
    _Atomic int64_t mem;
} __attribute__((aligned(64)));

struct keyspace {
    unsigned bits;
    unsigned nshards;
    uint8_t seed[16];
    _Atomic uint64_t maxmemory;
    struct shard *shards;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        /* DESIGN.md "Errors": a limiter that silently loses state is worse than a restart. */
        fprintf(stderr, "rlimitd: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "rlimitd: out of memory allocating %zu x %zu bytes\n", n, size);
        abort();
    }
    return p;
}

static void counter_add(_Atomic uint64_t *c, int64_t d)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
                          memory_order_relaxed);
}

static void mem_add(struct shard *sh, void *p, int sign)
{
    int64_t n = (int64_t)malloc_usable_size(p) * sign;
    atomic_store_explicit(&sh->mem, atomic_load_explicit(&sh->mem, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static void *shard_alloc(struct shard *sh, size_t n)
{
    void *p = xmalloc(n);
    mem_add(sh, p, 1);
    return p;
}

static void shard_free(struct shard *sh, void *p)
{
    if (p == NULL)
        return;
    mem_add(sh, p, -1);
    free(p);
}

struct keyspace *ks_create(unsigned shard_bits, const uint8_t seed[16])
{
    if (shard_bits > 12)
        return NULL;
    struct keyspace *ks = xcalloc(1, sizeof(*ks));
    ks->bits = shard_bits;
    ks->nshards = 1u << shard_bits;
    memcpy(ks->seed, seed, 16);
    if (posix_memalign((void **)&ks->shards, 64, ks->nshards * sizeof(struct shard)) != 0)
        abort();
    memset(ks->shards, 0, ks->nshards * sizeof(struct shard));
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        pthread_mutex_init(&sh->lock, NULL);
        sh->mask = MIN_BUCKETS - 1;
        sh->buckets = xcalloc(MIN_BUCKETS, sizeof(struct entry *));
        mem_add(sh, sh->buckets, 1);
    }
    return ks;
}

static void free_value(struct shard *sh, struct entry *e)
{
    if (e->type == KS_RAW || e->type == KS_SWLOG)
        shard_free(sh, e->v.p);
    e->v.p = NULL;
}

static void free_entry(struct shard *sh, struct entry *e)
{
    free_value(sh, e);
    if (e->expire != 0)
        counter_add(&sh->expires, -1);
    counter_add(&sh->count, -1);
    shard_free(sh, e);
}

void ks_flush_shard(struct keyspace *ks, unsigned shard)
{
    struct shard *sh = &ks->shards[shard];
    for (uint64_t b = 0; b <= sh->mask; b++) {
        struct entry *e = sh->buckets[b];
        while (e != NULL) {
            struct entry *next = e->next;
            free_entry(sh, e);
            e = next;
        }
        sh->buckets[b] = NULL;
    }
    /* Give a big emptied table back to the allocator. */
    if (sh->mask + 1 > MIN_BUCKETS) {
        shard_free(sh, sh->buckets);
        sh->buckets = xcalloc(MIN_BUCKETS, sizeof(struct entry *));
        mem_add(sh, sh->buckets, 1);
        sh->mask = MIN_BUCKETS - 1;
    }
    sh->expire_cursor = 0;
}

void ks_destroy(struct keyspace **ksp)
{
    struct keyspace *ks = *ksp;
    if (ks == NULL)
        return;
    for (unsigned i = 0; i < ks->nshards; i++) {
        ks_flush_shard(ks, i);
        free(ks->shards[i].buckets);
        pthread_mutex_destroy(&ks->shards[i].lock);
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
    return ks->bits == 0 ? 0 : (unsigned)(k->hash >> (64 - ks->bits));
}

unsigned ks_nshards(const struct keyspace *ks)
{
    return ks->nshards;
}

void ks_lock(struct keyspace *ks, unsigned shard)
{
    pthread_mutex_lock(&ks->shards[shard].lock);
}

void ks_unlock(struct keyspace *ks, unsigned shard)
{
    pthread_mutex_unlock(&ks->shards[shard].lock);
}

void ks_set_maxmemory(struct keyspace *ks, uint64_t bytes)
{
    atomic_store_explicit(&ks->maxmemory, bytes, memory_order_relaxed);
}

uint64_t ks_used_memory(const struct keyspace *ks)
{
    int64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].mem, memory_order_relaxed);
    return sum < 0 ? 0 : (uint64_t)sum;
}

uint64_t ks_key_count(const struct keyspace *ks)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].count, memory_order_relaxed);
    return sum;
}

uint64_t ks_expires_count(const struct keyspace *ks)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].expires, memory_order_relaxed);
    return sum;
}

/* Creating a key is refused over maxmemory; everything else keeps working (SPEC 7). */
static int over_maxmemory(const struct keyspace *ks)
{
    uint64_t max = atomic_load_explicit(&ks->maxmemory, memory_order_relaxed);
    return max != 0 && ks_used_memory(ks) > max;
}

static struct shard *shard_of(struct keyspace *ks, const struct ks_key *k)
{
    return &ks->shards[ks_shard(ks, k)];
}

static uint64_t entry_hash(const struct keyspace *ks, const struct entry *e)
{
    return hash_siphash13(e->key, e->klen, ks->seed);
}

static void resize(struct keyspace *ks, struct shard *sh, uint64_t nbuckets)
{
    struct entry **nb = xcalloc(nbuckets, sizeof(*nb));
    uint64_t nmask = nbuckets - 1;
    for (uint64_t b = 0; b <= sh->mask; b++) {
        struct entry *e = sh->buckets[b];
        while (e != NULL) {
            struct entry *next = e->next;
            uint64_t i = entry_hash(ks, e) & nmask;
            e->next = nb[i];
            nb[i] = e;
            e = next;
        }
    }
    shard_free(sh, sh->buckets);
    mem_add(sh, nb, 1);
    sh->buckets = nb;
    sh->mask = nmask;
}

static void maybe_shrink(struct keyspace *ks, struct shard *sh)
{
    uint64_t n = sh->mask + 1;
    uint64_t count = atomic_load_explicit(&sh->count, memory_order_relaxed);
    if (n > MIN_BUCKETS && count < n / 8) {
        uint64_t target = n;
        while (target > MIN_BUCKETS && count < target / 4)
            target /= 2;
        resize(ks, sh, target);
        sh->expire_cursor = 0;
    }
}

static void set_expire(struct shard *sh, struct entry *e, int64_t at)
{
    if ((e->expire != 0) != (at != 0))
        counter_add(&sh->expires, at != 0 ? 1 : -1);
    e->expire = at;
}

/* Finds key; an expired entry is freed here and reported absent (lazy expiry). */
static struct entry *find(struct keyspace *ks, const struct ks_key *k, int64_t now)
{
    struct shard *sh = shard_of(ks, k);
    struct entry **pp = &sh->buckets[k->hash & sh->mask];
    for (struct entry *e = *pp; e != NULL; pp = &e->next, e = e->next) {
        if (e->klen != k->len || memcmp(e->key, k->p, k->len) != 0)
            continue;
        if (e->expire != 0 && e->expire <= now) {
            *pp = e->next;
            free_entry(sh, e);
            return NULL;
        }
        return e;
    }
    return NULL;
}

/* Adds a new entry for a key known to be absent. Value and expiry are the caller's to set. */
static struct entry *insert(struct keyspace *ks, const struct ks_key *k, enum ks_type type)
{
    struct shard *sh = shard_of(ks, k);
    struct entry *e = shard_alloc(sh, offsetof(struct entry, key) + k->len);
    e->expire = 0;
    e->v.i = 0;
    e->klen = (uint32_t)k->len;
    e->type = (uint8_t)type;
    memcpy(e->key, k->p, k->len);
    uint64_t b = k->hash & sh->mask;
    e->next = sh->buckets[b];
    sh->buckets[b] = e;
    counter_add(&sh->count, 1);
    if (atomic_load_explicit(&sh->count, memory_order_relaxed) > sh->mask + 1)
        resize(ks, sh, (sh->mask + 1) * 2);
    return e;
}

static int unlink_entry(struct keyspace *ks, const struct ks_key *k, struct entry *target)
{
    struct shard *sh = shard_of(ks, k);
    for (struct entry **pp = &sh->buckets[k->hash & sh->mask]; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == target) {
            *pp = target->next;
            free_entry(sh, target);
            return 1;
        }
    }
    return 0;
}

int ks_gcra_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                  const struct gcra_limits *l, struct gcra_result *r, const char **err)
{
    struct entry *e = find(ks, key, now);
    if (e != NULL && e->type != KS_GCRA)
        return KS_WRONGTYPE;
    if (gcra_step(l, now, e != NULL, e != NULL ? e->v.i : 0, r, err) != 0)
        return -100;
    if (!r->store)
        return KS_OK;
    if (e == NULL) {
        if (over_maxmemory(ks))
            return KS_OOM;
        e = insert(ks, key, KS_GCRA);
    }
    e->v.i = r->new_tat;
    /* SPEC 2: the key expires at its TAT, when the bucket is full again. */
    set_expire(shard_of(ks, key), e, r->new_tat);
    return KS_OK;
}

/* Window logs grow geometrically but never past max_count + 1 slots (SPEC 3), and shrink when
 * they are mostly empty, so a burst does not pin memory forever. */
static uint32_t ring_capacity(uint32_t cap, uint32_t needed, int64_t max_count)
{
    uint64_t ceiling = (uint64_t)max_count + 1;
    if (needed > cap) {
        uint64_t grown = (uint64_t)cap * 2;
        if (grown < needed)
            grown = needed;
        if (grown > ceiling)
            grown = ceiling;
        return (uint32_t)grown;
    }
    if (cap > ceiling || (cap > 8 && needed < cap / 4)) {
        uint64_t shrunk = (uint64_t)needed * 2;
        if (shrunk < 4)
            shrunk = 4;
        if (shrunk > ceiling)
            shrunk = ceiling;
        if (shrunk < needed)
            shrunk = needed;
        return (uint32_t)shrunk;
    }
    return cap;
}

int ks_swlog_apply(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t period_ms,
                   int64_t max_count, int *allowed)
{
    struct shard *sh = shard_of(ks, key);
    int64_t now_ms = now / NS_PER_MS;
    struct entry *e = find(ks, key, now);
    if (e != NULL && e->type != KS_SWLOG)
        return KS_WRONGTYPE;
    if (e == NULL) {
        if (over_maxmemory(ks))
            return KS_OOM;
        uint32_t cap = max_count + 1 < 4 ? (uint32_t)(max_count + 1) : 4;
        struct swlog *log = shard_alloc(sh, swlog_bytes(cap));
        swlog_init(log, cap);
        e = insert(ks, key, KS_SWLOG);
        e->v.p = log;
    }
    struct swlog *log = e->v.p;
    swlog_trim(log, now_ms, period_ms);
    uint32_t needed = swlog_needed(log, max_count);
    uint32_t cap = ring_capacity(log->cap, needed, max_count);
    if (cap != log->cap) {
        struct swlog *bigger = shard_alloc(sh, swlog_bytes(cap));
        swlog_init(bigger, cap);
        swlog_copy(bigger, log);
        shard_free(sh, log);
        e->v.p = log = bigger;
    }
    *allowed = swlog_record(log, now_ms, max_count);
    /* SPEC 3: the key expires `period` after its newest attempt. cmd_limit bounds period so
     * this cannot overflow. */
    set_expire(sh, e, (swlog_newest(log) + period_ms) * NS_PER_MS);
    return KS_OK;
}

enum ks_type ks_get(struct keyspace *ks, const struct ks_key *key, int64_t now,
                    struct ks_value *v)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL)
        return KS_NONE;
    if (v != NULL) {
        v->type = e->type;
        v->i = 0;
        v->p = NULL;
        v->len = 0;
        switch (e->type) {
        case KS_GCRA:
        case KS_INT:
            v->i = e->v.i;
            break;
        case KS_RAW: {
            const struct rawstr *s = e->v.p;
            v->p = s->data;
            v->len = s->len;
            break;
        }
        case KS_SWLOG:
            v->i = ((const struct swlog *)e->v.p)->len;
            break;
        }
    }
    return e->type;
}

/* Stores val in e as KS_INT when it is a canonical integer (what INCR can work on), else raw. */
static void store_string(struct shard *sh, struct entry *e, const char *val, size_t len)
{
    int64_t n;
    free_value(sh, e);
    if (util_parse_i64(val, len, &n) == 0) {
        e->type = KS_INT;
        e->v.i = n;
        return;
    }
    struct rawstr *s = shard_alloc(sh, sizeof(*s) + len);
    s->len = len;
    memcpy(s->data, val, len);
    e->type = KS_RAW;
    e->v.p = s;
}

int ks_set(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *val,
           size_t len, int64_t expire_at, int flags)
{
    struct shard *sh = shard_of(ks, key);
    struct entry *e = find(ks, key, now);
    if ((flags & KS_SET_NX) && e != NULL)
        return 0;
    if ((flags & KS_SET_XX) && e == NULL)
        return 0;
    if (e == NULL) {
        if (over_maxmemory(ks))
            return KS_OOM;
        e = insert(ks, key, KS_INT);
    }
    store_string(sh, e, val, len);
    if (!(flags & KS_SET_KEEPTTL))
        set_expire(sh, e, expire_at);
    return 1;
}

int ks_incrby(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t delta,
              int64_t *out)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL) {
        if (over_maxmemory(ks))
            return KS_OOM;
        e = insert(ks, key, KS_INT);
        e->v.i = 0;
    }
    switch (e->type) {
    case KS_INT:
        break;
    case KS_RAW:
        return KS_NOTINT;
    default:
        return KS_WRONGTYPE;
    }
    int64_t sum;
    if (__builtin_add_overflow(e->v.i, delta, &sum))
        return KS_OVERFLOW;
    e->v.i = sum;
    *out = sum;
    return KS_OK;
}

int ks_del(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL)
        return 0;
    unlink_entry(ks, key, e);
    maybe_shrink(ks, shard_of(ks, key));
    return 1;
}

int64_t ks_ttl_ns(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL)
        return -2;
    if (e->expire == 0)
        return -1;
    return e->expire - now;
}

int ks_expire(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t at, int flags)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL)
        return 0;
    /* Redis 7 semantics: a key without expiry has an infinite TTL for GT/LT. */
    int has = e->expire != 0;
    if ((flags & KS_EXPIRE_NX) && has)
        return 0;
    if ((flags & KS_EXPIRE_XX) && !has)
        return 0;
    if ((flags & KS_EXPIRE_GT) && (!has || at <= e->expire))
        return 0;
    if ((flags & KS_EXPIRE_LT) && has && at >= e->expire)
        return 0;
    if (at <= now) {
        unlink_entry(ks, key, e);
        return 1;
    }
    set_expire(shard_of(ks, key), e, at);
    return 1;
}

int ks_persist(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct entry *e = find(ks, key, now);
    if (e == NULL || e->expire == 0)
        return 0;
    set_expire(shard_of(ks, key), e, 0);
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
    uint64_t v = cursor;
    size_t visited = 0;
    do {
        for (struct entry *e = sh->buckets[v & sh->mask]; e != NULL; e = e->next) {
            if (e->expire == 0 || e->expire > now)
                cb(ud, e->key, e->klen, (enum ks_type)e->type);
        }
        /* Increment the reversed cursor: the high bits of the bucket index advance first, so
         * buckets already visited before a resize map onto visited buckets after it. */
        v |= ~sh->mask;
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
    if (atomic_load_explicit(&sh->expires, memory_order_relaxed) == 0) {
        maybe_shrink(ks, sh);
        return 0;
    }
    for (size_t i = 0; i < max_buckets; i++) {
        uint64_t b = sh->expire_cursor & sh->mask;
        struct entry **pp = &sh->buckets[b];
        while (*pp != NULL) {
            struct entry *e = *pp;
            if (e->expire != 0 && e->expire <= now) {
                *pp = e->next;
                free_entry(sh, e);
                freed++;
            } else {
                pp = &e->next;
            }
        }
        sh->expire_cursor = (b + 1) & sh->mask;
        if (sh->expire_cursor == 0 && i + 1 >= sh->mask + 1)
            break; /* a whole lap of a small table */
    }
    maybe_shrink(ks, sh);
    return freed;
}

uint64_t ks_dump_shard(struct keyspace *ks, unsigned shard, int64_t now, ks_dump_fn cb, void *ud)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t n = 0;
    for (uint64_t b = 0; b <= sh->mask; b++) {
        for (struct entry *e = sh->buckets[b]; e != NULL; e = e->next) {
            if (e->expire != 0 && e->expire <= now)
                continue; /* SPEC 6: expired state is skipped on write */
            struct ks_record r = {0};
            r.type = e->type;
            r.key = e->key;
            r.klen = e->klen;
            r.expire = e->expire;
            if (e->type == KS_GCRA || e->type == KS_INT) {
                r.i = e->v.i;
            } else if (e->type == KS_RAW) {
                const struct rawstr *str = e->v.p;
                r.p = str->data;
                r.len = str->len;
            } else {
                r.log = e->v.p;
            }
            cb(ud, &r);
            n++;
        }
    }
    return n;
}

void ks_reserve(struct keyspace *ks, uint64_t n)
{
    uint64_t per = n / ks->nshards + 1;
    uint64_t size = MIN_BUCKETS;
    while (size < per && size < (1ull << 40))
        size *= 2;
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        if (sh->mask + 1 < size)
            resize(ks, sh, size);
    }
}

int ks_restore(struct keyspace *ks, const struct ks_record *r, int64_t now)
{
    if (r->type < KS_GCRA || r->type > KS_SWLOG)
        return -1;
    if (r->type == KS_SWLOG) {
        if (r->nts == 0 || r->ts == NULL)
            return -1;
        for (uint32_t i = 1; i < r->nts; i++)
            if (r->ts[i] < r->ts[i - 1])
                return -1;
    }
    /* SPEC 6: expired state is skipped on load too. */
    if (r->expire != 0 && r->expire <= now)
        return 0;
    struct ks_key k;
    ks_key_init(ks, &k, r->key, r->klen);
    struct shard *sh = shard_of(ks, &k);
    struct entry *e = find(ks, &k, now);
    if (e == NULL)
        e = insert(ks, &k, r->type);
    free_value(sh, e);
    e->type = (uint8_t)r->type;
    switch (r->type) {
    case KS_GCRA:
    case KS_INT:
        e->v.i = r->i;
        break;
    case KS_RAW: {
        struct rawstr *str = shard_alloc(sh, sizeof(*str) + r->len);
        str->len = r->len;
        memcpy(str->data, r->p, r->len);
        e->v.p = str;
        break;
    }
    default: {
        struct swlog *log = shard_alloc(sh, swlog_bytes(r->nts));
        swlog_init(log, r->nts);
        /* Recording in order rebuilds the ring exactly: max_count = n - 1 keeps all n. */
        for (uint32_t i = 0; i < r->nts; i++)
            swlog_record(log, r->ts[i], (int64_t)r->nts - 1);
        e->v.p = log;
        break;
    }
    }
    set_expire(sh, e, r->expire);
    return 1;
}

const char *ks_type_name(enum ks_type t)
{
    switch (t) {
    case KS_NONE:
        return "none";
    case KS_SWLOG:
        return "zset";
    default:
        return "string";
    }
}
