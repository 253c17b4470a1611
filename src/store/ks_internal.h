/* ks_internal.h - what the files of the keyspace share, private to src/store: the shard and
 * keyspace structures, the slab and table constants, the hot-path helpers (static inline, so a
 * lookup costs no call across files) and the prototypes of the internal functions.
 *
 * Which file owns what (src/store/README.md):
 *   keyspace.c   create/destroy/flush, locks, memory and key counts, WATCH's API, DEL, RENAME
 *   ks_table.c   the open-addressing table: insert, remove, rehash, shrink, entry shape changes,
 *                and the version of watched keys that every write moves (touch_key)
 *   ks_slab.c    the per-shard slab allocator and the shard's byte counter
 *   ks_entry.h   the entry layout (inline accessors)
 *   ks_values.c  strings, counters, GCRA, lists, ks_get
 *   ks_hash.c    hashes, in the entry or on the heap
 *   ks_swlog.c   window logs (ISALLOWED), crings, sorted-set open/close
 *   ks_expire.c  TTL/EXPIRE/PERSIST, the active expiry cycle, SCAN
 *   ks_dump.c    sliced dumps, restore, bulk loading (the snapshot API)
 *   ks_usage.c   what a key occupies (MEMORY USAGE) and a shard's slot array (MEMORY STATS)
 *   ks_evict.c   maxmemory-policy: sampling, the eviction pool, deleting (ks_evict)
 *   ks_meta.c    the LRU/LFU access data beside the slots, the LFU counter, a thread's PRNG
 * Calls between them go one way (a circle would be a layering failure): ks_slab.c calls none of
 * them; ks_table.c calls ks_slab.c; keyspace.c, ks_values.c, ks_hash.c, ks_swlog.c and
 * ks_expire.c call those two, and the value files keyspace.c's ks_used_memory (over_maxmemory);
 * ks_meta.c calls ks_slab.c only (the table, keyspace.c, ks_dump.c and ks_expire.c call it);
 * ks_evict.c calls the table, keyspace.c and ks_meta.c, and none of them calls it;
 * ks_dump.c and ks_usage.c call any of them and none calls them. The value types (zset.c,
 * hashval.c, listval.c) call none of the keyspace's files. */
#ifndef RLIMITD_KS_INTERNAL_H
#define RLIMITD_KS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "ks_entry.h"
#include "rlimitd/hash.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/swlog.h"
#include "rlimitd/util.h"

#define MIN_SLOTS 16
#define PAGE 4096u

/* Slot arrays at least this many slots come from mmap: 5 * 4096 bytes is whole pages, and a
 * freed table goes straight back to the kernel instead of leaving a hole in the heap. */
#define MMAP_TABLE_SLOTS 4096

/* ---- slab allocator (ks_slab.c) ---- */
#define SLAB_SIZE 65536u
#define UNIT_SHIFT 3
#define OFF_BITS 13 /* SLAB_SIZE >> UNIT_SHIFT = 8192 units */
#define MAX_SMALL 256u
#define NCLASS ((MAX_SMALL - MIN_ENTRY) / 8 + 1)
#define MAX_BLOCKS ((1u << (32 - OFF_BITS)) - 1) /* keeps REF_NONE out of reach */
#define REF_NONE UINT32_MAX

struct slabs {
    uint8_t **blk; /* a 64 KiB slab or one large entry, by index */
    uint32_t nblk; /* indices handed out so far */
    uint32_t cap;
    uint32_t *free_idx; /* indices of freed large entries, for reuse */
    uint32_t nfree_idx;
    uint32_t cap_free_idx;
    uint32_t free_head[NCLASS]; /* free list of each class, REF_NONE = empty */
    uint32_t bump_blk[NCLASS];  /* slab being carved for each class */
    uint32_t bump_off[NCLASS];  /* next free byte in it; SLAB_SIZE = none yet */
    uint64_t slab_bytes;        /* accounted bytes of live slab entries (class sizes) */
    uint32_t *slab_idx;         /* which blocks are mmap'd slabs (the rest are large entries) */
    uint32_t nslab;
    uint32_t cap_slab;
};

/* A window log as stored (issue 5: at most 40 bytes per key plus 8 per timestamp). swlog.c's
 * struct swlog keeps int64 timestamps (16 + 8 * cap bytes in a malloc chunk: 112 for the 11 slots
 * of max_count 10, 152 bytes per key in all). A cring keeps them as uint32 offsets from the
 * oldest, oldest first: 12 + 4 * cap bytes, 56 for 11 slots, a 64-byte malloc chunk (about 106
 * bytes per key in all). swlog.c stays the only code that decides anything: each ISALLOWED
 * unpacks the cring into a struct swlog on the stack (cring_load), runs swlog_trim / swlog_fit_cap
 * / swlog_record on it exactly as on a stored swlog, and packs the result back (cring_store).
 * That is O(len) per call instead of O(log len), so a cring is used up to CRING_MAX_CAP slots
 * only, and only while the newest and oldest timestamps are less than 2^32 ms (49 days) apart
 * (a wall clock that stepped far, or a restored file, can make them so); otherwise the entry
 * holds a struct swlog as before (F_CRING clear). The ring's capacity, as swlog_fit_cap chose
 * it, is kept in cap, so rings are sized exactly as in the Redis module. */
#define CRING_MAX_CAP 64

struct cring {
    uint32_t base_lo, base_hi; /* the oldest timestamp, ms (two halves: 4-byte alignment) */
    uint8_t cap, len;
    uint8_t pad_[2];
    uint32_t off[]; /* cap slots, len used: timestamp i = base + off[i] */
};

/* Room for a struct swlog of up to CRING_MAX_CAP slots on the stack. */
union swlog_buf {
    struct swlog log;
    int64_t words[2 + CRING_MAX_CAP];
};

struct shard {
    pthread_mutex_t lock;
    uint8_t *tags; /* nslots tags, then the refs array in the same block */
    uint32_t *refs;
    uint64_t mask;          /* slots - 1 */
    uint64_t expire_cursor; /* where the active expiry sweep resumes */
    /* Active-expiry sweeps in a row that found the shard empty but holding slabs, with no entry
     * allocated since (slab_alloc resets it): release_idle_slabs unmaps them at
     * KS_IDLE_SWEEPS. */
    uint32_t idle_sweeps;
    struct slabs sl;
    /* Sliced dump (ks_dump_begin): entries whose F_EPOCH bit differs from epoch are still to be
     * dumped; dump_left counts them. Outside a dump every entry's bit equals epoch. */
    uint8_t epoch;
    uint8_t dumping;
    uint64_t dump_left;
    uint64_t dump_cursor;
    uint64_t table_gen;  /* bumped whenever the slot array is replaced */
    uint64_t dump_gen;   /* table_gen the cursor refers to */
    unsigned dump_wraps; /* passes wrapped since the last resize */
    /* Bulk load (ks_bulk_add): keys in the slabs but not yet in the table. */
    uint64_t *bulk;
    uint64_t nbulk, cap_bulk;
    /* Written under the lock, read by INFO without it: relaxed atomics. */
    _Atomic uint64_t count;
    _Atomic uint64_t expires;
    _Atomic uint64_t limiter; /* entries of type KS_GCRA, KS_SWLOG, KS_LEASE (limiter_keys) */
    _Atomic int64_t mem;
    /* Keys some session WATCHes ("Watched keys" below); NULL almost always. */
    struct ks_watch *watch;
    /* Under an LRU or LFU policy only: one uint16 per slot, moved with its slot (ks_evict.c
     * "Access data"); NULL otherwise, so the default policy costs no byte per key. */
    uint16_t *meta;
    uint8_t meta_kind; /* META_NONE, META_LRU, META_LFU */
    int64_t meta_clock; /* the last command's time seen by find (a new key's first access) */
} __attribute__((aligned(64)));

struct keyspace {
    unsigned bits;
    unsigned nshards;
    uint8_t seed[16];
    _Atomic uint64_t maxmemory;
    _Atomic uint64_t external; /* memory held outside the tables that counts too (Lua) */
    /* Counters kept elsewhere that count too (ks_count_memory: each I/O thread's connection
     * buffers), each written by one thread; registered before the threads start. */
    const _Atomic uint64_t *counted[KS_MAX_COUNTED];
    _Atomic unsigned ncounted;
    struct shard *shards;
    int bulk; /* between ks_bulk_begin and ks_bulk_end */
    /* Eviction (ks_evict.c): written by ks_set_eviction, read by any thread. */
    _Atomic int policy;
    _Atomic int samples;
    _Atomic int lfu_log_factor;
    _Atomic int lfu_decay_time;
    /* Keyspace events (keyspace.h, ks_set_event_hook): ev_classes never NULL (a zero word
     * until a hook is set), written before the threads start. */
    const int64_t *ev_classes;
    int64_t ev_want[KS_EVENTS];
    ks_event_fn ev_fn;
    void *ev_ud;
};

/* Raises ev for entry e (before it is freed) if the hook wants it: one load and one test when
 * it does not. */
static inline void raise_event(const struct keyspace *ks, enum ks_event ev, const uint8_t *e)
{
    if (__builtin_expect((__atomic_load_n(ks->ev_classes, __ATOMIC_RELAXED) & ks->ev_want[ev]) != 0,
                         0)) {
        size_t klen = e_klen(e);
        ks->ev_fn(ks->ev_ud, ev, e_key(e, klen), klen);
    }
}

/* ---- counters (written under the shard lock, read by INFO without it) ---- */

static inline void counter_add(_Atomic uint64_t *c, int64_t d)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
                          memory_order_relaxed);
}

static inline void count_limiter(struct shard *sh, enum ks_type t, int64_t d)
{
    if (t == KS_GCRA || t == KS_SWLOG || t == KS_LEASE)
        counter_add(&sh->limiter, d);
}

static inline void mem_add_n(struct shard *sh, int64_t n)
{
    atomic_store_explicit(&sh->mem, atomic_load_explicit(&sh->mem, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* ---- slab allocator (ks_slab.c) ---- */

static inline uint8_t *sl_ptr(const struct slabs *s, uint32_t ref)
{
    return s->blk[ref >> OFF_BITS] + ((size_t)(ref & ((1u << OFF_BITS) - 1)) << UNIT_SHIFT);
}

static inline uint8_t *ref_ptr(const struct shard *sh, uint32_t ref)
{
    return sl_ptr(&sh->sl, ref);
}

void *xmmap(size_t n);
void mem_add(struct shard *sh, void *p, int sign);
void *shard_alloc(struct shard *sh, size_t n);
void shard_free(struct shard *sh, void *p);
void slabs_init(struct slabs *s);
uint32_t new_index(struct shard *sh, struct slabs *s);
uint32_t slab_alloc(struct shard *sh, struct slabs *s, size_t size);
void slab_free(struct shard *sh, struct slabs *s, uint32_t ref, size_t size);
void slabs_release(struct shard *sh, struct slabs *s);

/* ---- the table (ks_table.c) ---- */

static inline uint8_t tag_of(uint64_t hash)
{
    /* Bits 44..50: below the shard bits (at most the top 12) and above any realistic home slot
     * bits, so tags stay independent of where a key sits. */
    return (uint8_t)(0x80 | ((hash >> 44) & 0x7f));
}

static inline uint64_t entry_hash(const struct keyspace *ks, const uint8_t *e)
{
    size_t klen = e_klen(e);
    return hash_siphash13(e_key(e, klen), klen, ks->seed);
}

/* ks_shard, inline: every command starts here. The top bits of the hash pick the shard. */
static inline unsigned shard_index(const struct keyspace *ks, const struct ks_key *k)
{
    return ks->bits == 0 ? 0 : (unsigned)(k->hash >> (64 - ks->bits));
}

static inline struct shard *shard_of(struct keyspace *ks, const struct ks_key *k)
{
    return &ks->shards[shard_index(ks, k)];
}

static inline uint8_t *slot_entry(const struct shard *sh, uint64_t i)
{
    return ref_ptr(sh, sh->refs[i]);
}

/* Slot of key, or -1. Reads tags until the first empty slot; an entry is read on a tag match. */
static inline int64_t lookup(const struct shard *sh, const struct ks_key *k)
{
    uint64_t mask = sh->mask;
    uint64_t i = k->hash & mask;
    uint8_t tag = tag_of(k->hash);
    /* The tag and the reference live in two arrays: both loads start now, so their cache misses
     * overlap instead of following each other (the entry's has to wait for the reference). */
    __builtin_prefetch(&sh->refs[i]);
    for (;;) {
        uint8_t t = sh->tags[i];
        if (t == 0)
            return -1;
        if (t == tag) {
            const uint8_t *e = slot_entry(sh, i);
            size_t klen = e_klen(e);
            if (klen == k->len && util_bytes_eq(e_key(e, klen), k->p, klen))
                return (int64_t)i;
        }
        i = (i + 1) & mask;
    }
}

/* ---- access data for LRU/LFU eviction (ks_evict.c "Access data") ---- */

#define META_NONE 0
#define META_LRU 1
#define META_LFU 2
#define LFU_INIT_VAL 5

/* The LRU clock: seconds, 16 bits (an idle time is exact up to 18 hours, then wraps). */
static inline uint16_t lru_clock(int64_t now)
{
    return (uint16_t)((uint64_t)now / 1000000000u);
}

/* The value a slot's access data starts with: a new key was just accessed. */
static inline uint16_t meta_fresh(uint8_t kind, int64_t now)
{
    if (kind == META_LRU)
        return lru_clock(now);
    /* LFU: [8 bits minutes of the last decay][8 bits counter] */
    return (uint16_t)((((uint64_t)now / 60000000000u) & 0xff) << 8 | LFU_INIT_VAL);
}

/* ks_meta.c */
uint64_t rng_next(void);
unsigned lfu_decayed(const struct keyspace *ks, uint16_t m, int64_t now);
uint16_t lfu_touch(const struct keyspace *ks, uint16_t m, int64_t now);
uint16_t *meta_alloc(struct shard *sh, uint64_t nslots);
/* Gives the locked shard the access data the policy now wants (or frees it). */
void meta_sync(const struct keyspace *ks, struct shard *sh);
void meta_free(struct shard *sh, uint16_t *meta, uint64_t nslots);
/* The wall clock (coarse, ns) for a key's first access where no command clock is at hand. */
int64_t meta_now(void);

/* Set by ks_notouch: the calling thread's command only looks at keys (ks_meta.c). */
extern _Thread_local int meta_notouch;

/* An access to the entry in slot i (a command found it), unless the command only looks. */
static inline void meta_touch(const struct keyspace *ks, struct shard *sh, uint64_t i,
                              int64_t now)
{
    if (__builtin_expect(sh->meta != NULL, 0) && !meta_notouch)
        sh->meta[i] = sh->meta_kind == META_LRU ? lru_clock(now) : lfu_touch(ks, sh->meta[i], now);
}

void table_alloc(struct shard *sh, uint64_t nslots);
void table_free(struct shard *sh, uint8_t *tags, uint64_t nslots);
void remove_slot(const struct keyspace *ks, struct shard *sh, uint64_t i);

/* Finds key; an expired entry is freed here and reported absent (lazy expiry). */
static inline int64_t find(const struct keyspace *ks, struct shard *sh, const struct ks_key *k,
                           int64_t now)
{
    if (__builtin_expect(sh->meta != NULL, 0))
        sh->meta_clock = now; /* insert, which has no clock, stamps a new key with it */
    int64_t i = lookup(sh, k);
    if (i < 0)
        return -1;
    if (e_expired(slot_entry(sh, (uint64_t)i), now)) {
        raise_event(ks, KS_EVENT_EXPIRED, slot_entry(sh, (uint64_t)i));
        remove_slot(ks, sh, (uint64_t)i);
        return -1;
    }
    meta_touch(ks, sh, (uint64_t)i, now);
    return i;
}

void rehash(const struct keyspace *ks, struct shard *sh, uint64_t nslots, int compact);
void maybe_shrink(const struct keyspace *ks, struct shard *sh);
/* Memory release of an emptied shard, off the delete path: a shard with no key keeps its slabs
 * (and their index arrays) until KS_IDLE_SWEEPS active-expiry sweeps in a row have found it so
 * with no allocation between (1 s at the cron's 100 ms), then unmaps them. Called by
 * ks_expire_cycle under the shard lock; returns 1 when it released them. */
int release_idle_slabs(const struct keyspace *ks, struct shard *sh);
uint32_t entry_new(struct shard *sh, enum ks_type type, uint8_t flags, const char *key, size_t klen,
                   uint8_t **out);
uint64_t insert(const struct keyspace *ks, struct shard *sh, const struct ks_key *k,
                enum ks_type type, uint8_t flags);
uint8_t *reshape(struct shard *sh, uint64_t i, uint8_t nflags, int64_t exp);
/* Gives the hash entry in slot i room for n inline compact bytes (ks_entry.h "Hashes in the
 * entry"; 0: none, F_HINLINE cleared), moving it to another size class when its size changes.
 * Sets F_HINLINE and e[0] = n; the bytes are the caller's to write. Returns the entry. */
uint8_t *set_inline_room(struct shard *sh, uint64_t i, size_t n);
/* Most compact bytes an entry of this shape may hold inline (0: none). */
size_t inline_cap(uint8_t flags, size_t klen);

/* ---- values and expiry of an entry (ks_table.c) ---- */

int has_blob(enum ks_type t);
size_t blob_bytes(enum ks_type t, void *p);
void free_value(struct shard *sh, uint8_t *e);
void free_entry_at(struct shard *sh, uint64_t i);

static inline void count_expiry_change(struct shard *sh, int64_t old, int64_t at)
{
    if ((old != 0) != (at != 0))
        counter_add(&sh->expires, at != 0 ? 1 : -1);
}

static inline void set_type(struct shard *sh, uint8_t *e, enum ks_type t)
{
    count_limiter(sh, e_type(e), -1);
    count_limiter(sh, t, 1);
    e[E_FLAGS] = (uint8_t)((e[E_FLAGS] & ~F_TYPE) | ((uint8_t)t & F_TYPE)); /* e_type */
}

void set_expire(struct shard *sh, uint64_t i, int64_t at);
uint8_t *prepare_new_value(struct shard *sh, uint64_t i);

/* Set by this thread's last ks_evict when it admitted the command it ran for: used memory was
 * at or under the limit, or eviction stopped for time having deleted keys (Redis's
 * EVICT_RUNNING). That command's new keys are then created without a second look: Redis decides
 * once, before the command, and another thread's writes between the decision and the key must
 * not refuse it half way (under an allkeys policy that refused a few writes in a thousand).
 * ks_evict_forget clears it before every command, so a command that did not ask is checked. */
extern _Thread_local int evict_admitted;

/* Creating a key is refused over maxmemory; everything else keeps working (COMMANDS.md, Wire
 * protocol). */
static inline int over_maxmemory(const struct keyspace *ks)
{
    uint64_t max = atomic_load_explicit(&ks->maxmemory, memory_order_relaxed);
    return max != 0 && !evict_admitted && ks_used_memory(ks) > max;
}

/* ---- Watched keys ----
 *
 * WATCH needs to know whether a key was written between WATCH and EXEC, by anyone: commands,
 * the limiters, expiry. Each shard keeps the keys watched in it (a short list: only keys some
 * session WATCHes right now), each with a version. Every write to an entry (creation, new value,
 * new expiry, deletion, expiry) goes through touch_entry, which, when the shard's list is not
 * empty, bumps the version of that key if it is watched (touch_key, ks_table.c). A session
 * remembers the version it saw at WATCH and EXEC compares (keyspace.c: ks_watch_key,
 * ks_watch_changed, ks_watch_release). Unwatched traffic pays one pointer test per write. */
struct ks_watch {
    struct ks_watch *next;
    unsigned shard;
    uint32_t refs;    /* sessions watching it */
    uint64_t version; /* bumped on every write to the key */
    uint64_t hash;
    size_t len;
    char key[];
};

/* Bumps the version of key if it is watched in sh. */
void touch_key(struct shard *sh, const char *key, size_t klen);

static inline void touch_entry(struct shard *sh, const uint8_t *e)
{
    if (__builtin_expect(sh->watch != NULL, 0)) {
        size_t klen = e_klen(e);
        touch_key(sh, e_key(e, klen), klen);
    }
}

/* ---- GCRA (ks_values.c) and window logs (ks_swlog.c), used by restore too ---- */

void set_gcra(struct shard *sh, uint64_t i, int64_t tat);

/* The cring as a struct swlog in b (through swlog.c's own functions only). Inline: every
 * ISALLOWED on a small log runs it. */
static inline struct swlog *cring_load(const struct cring *c, union swlog_buf *b)
{
    uint64_t base = ((uint64_t)c->base_hi << 32) | c->base_lo;
    swlog_init(&b->log, c->cap);
    /* Recording in order rebuilds the ring exactly: max_count = cap - 1 keeps up to cap. */
    for (uint32_t i = 0; i < c->len; i++)
        swlog_record(&b->log, (int64_t)(base + c->off[i]), (int64_t)c->cap - 1);
    return &b->log;
}

void store_log(struct shard *sh, uint8_t *e, void *old, struct swlog *log, int on_heap);

#endif
