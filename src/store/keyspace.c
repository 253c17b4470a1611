/* keyspace.c - sharded open-addressing tables of typed entries, with expiry and memory accounting.
 *
 * Why this layout: the goal is at most 40 bytes of RSS per GCRA key with a 14-byte key (issue 5).
 * A malloc'd entry per key (48-byte chunk) plus an 8-byte bucket pointer cannot get there, so:
 *
 * Table (per shard): open addressing with linear probing. A slot is a 1-byte tag (0 = empty, else
 * 0x80 | 7 hash bits that neither the shard nor the home slot use) in one array and a 32-bit entry
 * reference in a parallel array: 5 bytes a slot. A probe reads tags only and touches an entry only
 * on a tag match (a false match is 1 in 128). The table doubles when it would pass 7/8 full, and
 * halves (down to 16 slots) when below 1/8 full, as the chained table did. Deletion shifts the
 * rest of the cluster back (no tombstones), so "every slot between a key's home slot and the key
 * is occupied" always holds; lookups stop at the first empty slot.
 *   Worst case right after a doubling at 1M keys over 256 shards (3906 keys in 8192 slots):
 *   24 B entry + 5 B / 0.48 load = 34.5 B/key; at 10M keys (39062 in 65536 slots) 24 + 8.4.
 *   64-bit slots (pointer + 16-bit tag) would cost 24 + 8 / 0.48 = 40.8 B: over budget.
 *
 * Entries (per shard): a slab allocator with size classes in 8-byte steps from 16 to 256 bytes,
 * 64 KiB slabs from mmap (so freed tables and slabs go back to the kernel and never fragment the
 * malloc heap), and a free list per class threaded through freed entries. Entries above 256 bytes
 * get their own malloc block. A reference is (block index << 13) | (offset / 8), so there is no
 * malloc header per key. An entry is
 *     [8 value][1 flags][1 key length; 255 = a 4-byte length follows][4 length?][8 expiry?][key]
 * The value is the TAT or integer, or a pointer to a malloc'd blob (KS_RAW string, KS_SWLOG ring).
 * The expiry field exists only when the expiry is not implied: a GCRA key expires at its TAT
 * (COMMANDS.md, CL.THROTTLE), so F_EXP_IS_VAL says "expiry == value" and a GCRA entry with a 14-byte key is 24
 * bytes. EXPIRE/PERSIST on such a key, or a type change, moves the entry to the class of its new
 * shape and updates its slot. Nothing outside this file ever holds an entry pointer across a call
 * that could move it.
 *
 * Memory accounting (ks_used_memory): slab pages as the bump pointer first touches them (what RSS
 * sees, not the 64 KiB reservation), slot arrays, large entries and blobs (malloc_usable_size).
 * When a table shrinks, the live entries are also copied into fresh slabs and the old slabs are
 * unmapped, so memory goes back after mass expiry, not only after FLUSHALL.
 *
 * SCAN: the cursor is a home slot, advanced in reverse-binary order as Redis's dictScan does. For
 * home slot v it walks from slot v to the next empty slot and reports the keys whose home is v:
 * all of them lie in that run (the invariant above). Doubling splits home v into v and v + n, and
 * halving merges them, exactly as chained buckets split and merge, so keys present for the whole
 * scan are reported at least once across resizes.
 *
 * Shard = top bits of the key's hash, home slot = low bits, so resizing never moves a key to
 * another shard (its lock stays the same). Nothing here takes a lock: keyspace.h states what the
 * caller must hold. */
#include "rlimitd/keyspace.h"
#include "rlimitd/alloc.h"
#include "rlimitd/clock.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "rlimitd/hash.h"
#include "rlimitd/swlog.h"
#include "rlimitd/util.h"
#include "rlimitd/zset.h"

#define MIN_SLOTS 16
#define PAGE 4096u

/* Slot arrays at least this many slots come from mmap: 5 * 4096 bytes is whole pages, and a
 * freed table goes straight back to the kernel instead of leaving a hole in the heap. */
#define MMAP_TABLE_SLOTS 4096

/* ---- entry layout ---- */
#define E_FLAGS 8
#define E_KLEN 9
#define E_HDR 10
#define KLEN_LONG 255
#define F_TYPE 0x07       /* enum ks_type */
#define F_HAS_EXP 0x08    /* an 8-byte expiry field follows the key length */
#define F_EXP_IS_VAL 0x10 /* the expiry is the value (GCRA: the TAT) */
#define F_EPOCH 0x20      /* dump epoch of the entry (see "Sliced dumps" at ks_dump_begin) */
#define F_CRING 0x40      /* KS_SWLOG: the value is a struct cring, not a struct swlog */

/* ---- slab allocator ---- */
#define SLAB_SIZE 65536u
#define UNIT_SHIFT 3
#define OFF_BITS 13 /* SLAB_SIZE >> UNIT_SHIFT = 8192 units */
#define MIN_ENTRY 16u
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
    uint64_t slab_bytes;        /* accounted slab pages (touched ones) */
    uint32_t *slab_idx;         /* which blocks are mmap'd slabs (the rest are large entries) */
    uint32_t nslab;
    uint32_t cap_slab;
};

struct rawstr {
    size_t len;
    char data[];
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
    struct slabs sl;
    /* Sliced dump (ks_dump_begin): entries whose F_EPOCH bit differs from epoch are still to be
     * dumped; dump_left counts them. Outside a dump every entry's bit equals epoch. */
    uint8_t epoch;
    uint8_t dumping;
    uint64_t dump_left;
    uint64_t dump_cursor;
    uint64_t table_gen;   /* bumped whenever the slot array is replaced */
    uint64_t dump_gen;    /* table_gen the cursor refers to */
    unsigned dump_wraps;  /* passes wrapped since the last resize */
    /* Bulk load (ks_bulk_add): keys in the slabs but not yet in the table. */
    uint64_t *bulk;
    uint64_t nbulk, cap_bulk;
    /* Written under the lock, read by INFO without it: relaxed atomics. */
    _Atomic uint64_t count;
    _Atomic uint64_t expires;
    _Atomic uint64_t limiter; /* entries of type KS_GCRA or KS_SWLOG (INFO limiter_keys) */
    _Atomic int64_t mem;
    /* Keys some session WATCHes (keyspace.c "Watched keys"); NULL almost always. */
    struct ks_watch *watch;
} __attribute__((aligned(64)));

struct keyspace {
    unsigned bits;
    unsigned nshards;
    uint8_t seed[16];
    _Atomic uint64_t maxmemory;
    _Atomic uint64_t external; /* memory held outside the tables that counts too (Lua) */
    struct shard *shards;
    int bulk; /* between ks_bulk_begin and ks_bulk_end */
};

static void *xmmap(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        alloc_fail(n);
    return p;
}

static void counter_add(_Atomic uint64_t *c, int64_t d)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
                          memory_order_relaxed);
}

static void count_limiter(struct shard *sh, enum ks_type t, int64_t d)
{
    if (t == KS_GCRA || t == KS_SWLOG)
        counter_add(&sh->limiter, d);
}

static void mem_add_n(struct shard *sh, int64_t n)
{
    atomic_store_explicit(&sh->mem, atomic_load_explicit(&sh->mem, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static void mem_add(struct shard *sh, void *p, int sign)
{
    mem_add_n(sh, (int64_t)malloc_usable_size(p) * sign);
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

/* ---- entries: field access (unaligned fields go through memcpy; x86 makes that a load) ---- */

static inline int64_t e_val(const uint8_t *e)
{
    int64_t v;
    memcpy(&v, e, 8);
    return v;
}

static inline void e_set_val(uint8_t *e, int64_t v)
{
    memcpy(e, &v, 8);
}

static inline void *e_ptr(const uint8_t *e)
{
    void *p;
    memcpy(&p, e, sizeof(p));
    return p;
}

static inline void e_set_ptr(uint8_t *e, void *p)
{
    memcpy(e, &p, sizeof(p));
}

static inline enum ks_type e_type(const uint8_t *e)
{
    return (enum ks_type)(e[E_FLAGS] & F_TYPE);
}

static inline size_t e_klen(const uint8_t *e)
{
    if (e[E_KLEN] != KLEN_LONG)
        return e[E_KLEN];
    uint32_t n;
    memcpy(&n, e + E_HDR, 4);
    return n;
}

/* Offset of the expiry field (when F_HAS_EXP) for a key of klen bytes. */
static inline size_t exp_off(size_t klen)
{
    return E_HDR + (klen >= KLEN_LONG ? 4 : 0);
}

static inline size_t key_off(uint8_t flags, size_t klen)
{
    return exp_off(klen) + ((flags & F_HAS_EXP) ? 8 : 0);
}

static inline const char *e_key(const uint8_t *e, size_t klen)
{
    return (const char *)e + key_off(e[E_FLAGS], klen);
}

static inline size_t entry_size(uint8_t flags, size_t klen)
{
    size_t n = key_off(flags, klen) + klen;
    return n < MIN_ENTRY ? MIN_ENTRY : n;
}

static inline int64_t e_expire(const uint8_t *e)
{
    uint8_t f = e[E_FLAGS];
    if (f & F_EXP_IS_VAL)
        return e_val(e);
    if (f & F_HAS_EXP) {
        int64_t x;
        memcpy(&x, e + exp_off(e_klen(e)), 8);
        return x;
    }
    return 0;
}

static inline int e_expired(const uint8_t *e, int64_t now)
{
    int64_t x = e_expire(e);
    return x != 0 && x <= now;
}

/* ---- slab allocator ---- */

static inline uint8_t *sl_ptr(const struct slabs *s, uint32_t ref)
{
    return s->blk[ref >> OFF_BITS] + ((size_t)(ref & ((1u << OFF_BITS) - 1)) << UNIT_SHIFT);
}

static inline uint8_t *ref_ptr(const struct shard *sh, uint32_t ref)
{
    return sl_ptr(&sh->sl, ref);
}

static void slabs_init(struct slabs *s)
{
    memset(s, 0, sizeof(*s));
    for (unsigned c = 0; c < NCLASS; c++) {
        s->free_head[c] = REF_NONE;
        s->bump_off[c] = SLAB_SIZE;
    }
}

static uint32_t new_index(struct shard *sh, struct slabs *s)
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

static uint32_t slab_alloc(struct shard *sh, struct slabs *s, size_t size)
{
    uint32_t ref;
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
            /* Count a page when the bump pointer first reaches it: that is when RSS grows. */
            uint32_t pages_before = (off + PAGE - 1) / PAGE;
            uint32_t pages_after = (off + csize + PAGE - 1) / PAGE;
            if (pages_after != pages_before) {
                s->slab_bytes += (uint64_t)(pages_after - pages_before) * PAGE;
                mem_add_n(sh, (int64_t)(pages_after - pages_before) * PAGE);
            }
            ref = (s->bump_blk[c] << OFF_BITS) | (off >> UNIT_SHIFT);
            s->bump_off[c] = off + csize;
        }
    }
    return ref;
}

static void slab_free(struct shard *sh, struct slabs *s, uint32_t ref, size_t size)
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
    memcpy(sl_ptr(s, ref), &s->free_head[c], 4);
    s->free_head[c] = ref;
}

/* Unmaps every slab of s and frees its index arrays. Large entries are not freed here: a flush
 * frees them while walking the table, a compaction hands them to the new allocator. */
static void slabs_release(struct shard *sh, struct slabs *s)
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

/* ---- shard bookkeeping ---- */

static size_t table_bytes(uint64_t nslots)
{
    return (size_t)nslots * (1 + sizeof(uint32_t));
}

static void table_alloc(struct shard *sh, uint64_t nslots)
{
    size_t n = table_bytes(nslots);
    uint8_t *p;
    if (nslots >= MMAP_TABLE_SLOTS) {
        p = xmmap(n); /* zero-filled */
        mem_add_n(sh, (int64_t)n);
    } else {
        p = xmalloc(n);
        memset(p, 0, nslots);
        mem_add(sh, p, 1);
    }
    sh->tags = p;
    sh->refs = (uint32_t *)(p + nslots);
    sh->mask = nslots - 1;
    sh->table_gen++;
}

static void table_free(struct shard *sh, uint8_t *tags, uint64_t nslots)
{
    if (tags == NULL)
        return;
    if (nslots >= MMAP_TABLE_SLOTS) {
        munmap(tags, table_bytes(nslots));
        mem_add_n(sh, -(int64_t)table_bytes(nslots));
    } else {
        shard_free(sh, tags);
    }
}

struct keyspace *ks_create(unsigned shard_bits, const uint8_t seed[16])
{
    if (shard_bits > 12)
        return NULL;
    struct keyspace *ks = calloc(1, sizeof(*ks));
    if (ks == NULL)
        alloc_fail(sizeof(*ks));
    ks->bits = shard_bits;
    ks->nshards = 1u << shard_bits;
    memcpy(ks->seed, seed, 16);
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

static uint8_t tag_of(uint64_t hash)
{
    /* Bits 44..50: below the shard bits (at most the top 12) and above any realistic home slot
     * bits, so tags stay independent of where a key sits. */
    return (uint8_t)(0x80 | ((hash >> 44) & 0x7f));
}

static uint64_t entry_hash(const struct keyspace *ks, const uint8_t *e)
{
    size_t klen = e_klen(e);
    return hash_siphash13(e_key(e, klen), klen, ks->seed);
}

/* Types whose value field points to a heap block (or structure) of the shard. */
static int has_blob(enum ks_type t)
{
    return t == KS_RAW || t == KS_SWLOG || t == KS_ZSET || t == KS_HASH || t == KS_LIST;
}

/* Bytes a blob accounts for in the shard's memory. */
static size_t blob_bytes(enum ks_type t, void *p)
{
    return t == KS_HASH   ? hv_bytes(p)
           : t == KS_LIST ? lv_bytes(p)
           : t == KS_ZSET ? zs_bytes(p)
                          : malloc_usable_size(p);
}

/* ---- Watched keys ----
 *
 * WATCH needs to know whether a key was written between WATCH and EXEC, by anyone: commands,
 * the limiters, expiry. Each shard keeps the keys watched in it (a short list: only keys some
 * session WATCHes right now), each with a version. Every write to an entry (creation, new value,
 * new expiry, deletion, expiry) goes through touch_entry, which, when the shard's list is not
 * empty, bumps the version of that key if it is watched. A session remembers the version it saw
 * at WATCH and EXEC compares. Unwatched traffic pays one pointer test per write. */
struct ks_watch {
    struct ks_watch *next;
    unsigned shard;
    uint32_t refs;    /* sessions watching it */
    uint64_t version; /* bumped on every write to the key */
    uint64_t hash;
    size_t len;
    char key[];
};

static void touch_key(struct shard *sh, const char *key, size_t klen)
{
    for (struct ks_watch *w = sh->watch; w != NULL; w = w->next)
        if (w->len == klen && memcmp(w->key, key, klen) == 0)
            w->version++;
}

static inline void touch_entry(struct shard *sh, const uint8_t *e)
{
    if (__builtin_expect(sh->watch != NULL, 0)) {
        size_t klen = e_klen(e);
        touch_key(sh, e_key(e, klen), klen);
    }
}


/* Frees the blob an entry's value points to, if any. */
static void free_value(struct shard *sh, uint8_t *e)
{
    enum ks_type t = e_type(e);
    if (e_ptr(e) == NULL && (t == KS_ZSET || t == KS_HASH || t == KS_LIST))
        return; /* moved away by a rename */
    if (t == KS_ZSET) {
        struct zset *z = e_ptr(e);
        mem_add_n(sh, -(int64_t)zs_bytes(z));
        zs_free(z);
        e_set_ptr(e, NULL);
    } else if (t == KS_HASH) {
        mem_add_n(sh, -(int64_t)hv_bytes(e_ptr(e)));
        hv_free(e_ptr(e));
        e_set_ptr(e, NULL);
    } else if (t == KS_LIST) {
        mem_add_n(sh, -(int64_t)lv_bytes(e_ptr(e)));
        lv_free(e_ptr(e));
        e_set_ptr(e, NULL);
    } else if (has_blob(t)) {
        shard_free(sh, e_ptr(e));
        e_set_ptr(e, NULL);
        e[E_FLAGS] &= (uint8_t)~F_CRING;
    }
}

/* Frees the entry in slot i and its blob, and updates the counters; the slot is not touched. */
static void free_entry_at(struct shard *sh, uint64_t i)
{
    uint32_t ref = sh->refs[i];
    uint8_t *e = ref_ptr(sh, ref);
    free_value(sh, e);
    if (sh->dumping && (e[E_FLAGS] & F_EPOCH) != sh->epoch)
        sh->dump_left--; /* removed before the dump reached it: not in this snapshot */
    if (e_expire(e) != 0)
        counter_add(&sh->expires, -1);
    counter_add(&sh->count, -1);
    count_limiter(sh, e_type(e), -1);
    slab_free(sh, &sh->sl, ref, entry_size(e[E_FLAGS], e_klen(e)));
}

static int64_t lookup(const struct shard *sh, const struct ks_key *k);

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
        if (entry_size(e[E_FLAGS], e_klen(e)) > MAX_SMALL) {
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
        table_free(sh, sh->tags, sh->mask + 1);
        table_alloc(sh, MIN_SLOTS);
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

uint64_t ks_used_memory(const struct keyspace *ks)
{
    int64_t sum = 0;
    for (unsigned i = 0; i < ks->nshards; i++)
        sum += atomic_load_explicit(&ks->shards[i].mem, memory_order_relaxed);
    return (sum < 0 ? 0 : (uint64_t)sum) +
           atomic_load_explicit(&ks->external, memory_order_relaxed);
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

/* Creating a key is refused over maxmemory; everything else keeps working (COMMANDS.md, Wire protocol). */
static int over_maxmemory(const struct keyspace *ks)
{
    uint64_t max = atomic_load_explicit(&ks->maxmemory, memory_order_relaxed);
    return max != 0 && ks_used_memory(ks) > max;
}

int ks_over_maxmemory(const struct keyspace *ks)
{
    return over_maxmemory(ks);
}

static struct shard *shard_of(struct keyspace *ks, const struct ks_key *k)
{
    return &ks->shards[ks_shard(ks, k)];
}

static inline uint8_t *slot_entry(const struct shard *sh, uint64_t i)
{
    return ref_ptr(sh, sh->refs[i]);
}

/* Slot of key, or -1. Reads tags until the first empty slot; an entry is read on a tag match. */
static int64_t lookup(const struct shard *sh, const struct ks_key *k)
{
    uint64_t mask = sh->mask;
    uint64_t i = k->hash & mask;
    uint8_t tag = tag_of(k->hash);
    for (;;) {
        uint8_t t = sh->tags[i];
        if (t == 0)
            return -1;
        if (t == tag) {
            const uint8_t *e = slot_entry(sh, i);
            size_t klen = e_klen(e);
            if (klen == k->len && memcmp(e_key(e, klen), k->p, klen) == 0)
                return (int64_t)i;
        }
        i = (i + 1) & mask;
    }
}

/* Frees the entry in slot i and closes the gap: each later entry of the cluster whose home slot
 * is not between the hole and itself moves back into the hole, so no probe ever stops short. */
static void remove_slot(const struct keyspace *ks, struct shard *sh, uint64_t i)
{
    touch_entry(sh, slot_entry(sh, i));
    free_entry_at(sh, i);
    uint64_t mask = sh->mask;
    uint64_t hole = i;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (sh->tags[j] == 0)
            break;
        uint64_t home = entry_hash(ks, slot_entry(sh, j)) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            sh->tags[hole] = sh->tags[j];
            sh->refs[hole] = sh->refs[j];
            hole = j;
        }
    }
    sh->tags[hole] = 0;
}

/* Finds key; an expired entry is freed here and reported absent (lazy expiry). */
static int64_t find(const struct keyspace *ks, struct shard *sh, const struct ks_key *k,
                    int64_t now)
{
    int64_t i = lookup(sh, k);
    if (i < 0)
        return -1;
    if (e_expired(slot_entry(sh, (uint64_t)i), now)) {
        remove_slot(ks, sh, (uint64_t)i);
        return -1;
    }
    return i;
}

/* Moves the shard to a table of nslots slots. With compact, the live entries are also copied
 * into fresh slabs and the old ones unmapped, which is what gives memory back after many keys
 * went away (only done when shrinking, when most of the old slab space is dead). */
static void rehash(const struct keyspace *ks, struct shard *sh, uint64_t nslots, int compact)
{
    uint8_t *otags = sh->tags;
    uint32_t *orefs = sh->refs;
    uint64_t on = sh->mask + 1;
    struct slabs old = sh->sl;
    if (compact)
        slabs_init(&sh->sl);
    table_alloc(sh, nslots);
    uint64_t mask = sh->mask;
    for (uint64_t i = 0; i < on; i++) {
        if (otags[i] == 0)
            continue;
        uint32_t ref = orefs[i];
        const uint8_t *e = sl_ptr(&old, ref);
        uint64_t j = entry_hash(ks, e) & mask;
        if (compact) {
            size_t size = entry_size(e[E_FLAGS], e_klen(e));
            if (size > MAX_SMALL) {
                uint32_t b = new_index(sh, &sh->sl);
                sh->sl.blk[b] = old.blk[ref >> OFF_BITS];
                ref = b << OFF_BITS;
            } else {
                ref = slab_alloc(sh, &sh->sl, size);
                memcpy(ref_ptr(sh, ref), e, size);
            }
        }
        while (sh->tags[j] != 0)
            j = (j + 1) & mask;
        sh->tags[j] = otags[i];
        sh->refs[j] = ref;
    }
    table_free(sh, otags, on);
    if (compact)
        slabs_release(sh, &old);
}

static void maybe_shrink(const struct keyspace *ks, struct shard *sh)
{
    uint64_t n = sh->mask + 1;
    uint64_t count = atomic_load_explicit(&sh->count, memory_order_relaxed);
    if (count == 0 && sh->sl.nblk > 0) {
        /* An empty shard keeps no slabs (its free lists are all that is left in them). */
        slabs_release(sh, &sh->sl);
        slabs_init(&sh->sl);
    }
    if (n > MIN_SLOTS && count < n / 8) {
        uint64_t target = n;
        while (target > MIN_SLOTS && count < target / 4)
            target /= 2;
        rehash(ks, sh, target, 1);
        sh->expire_cursor = 0;
    }
}

/* A new slab entry for a key of this type and shape: flags, key length and key written; the
 * value (and the expiry, if the shape has one) are the caller's to fill. Returns its reference
 * and sets *out to it. */
static uint32_t entry_new(struct shard *sh, enum ks_type type, uint8_t flags, const char *key,
                          size_t klen, uint8_t **out)
{
    uint32_t ref = slab_alloc(sh, &sh->sl, entry_size(flags, klen));
    uint8_t *e = ref_ptr(sh, ref);
    /* A key created while its shard is being dumped is not part of that snapshot: it is born
     * with the current epoch, as if already dumped. */
    e[E_FLAGS] = (uint8_t)(flags | (uint8_t)type | sh->epoch);
    if (klen >= KLEN_LONG) {
        uint32_t n = (uint32_t)klen;
        e[E_KLEN] = KLEN_LONG;
        memcpy(e + E_HDR, &n, 4);
    } else {
        e[E_KLEN] = (uint8_t)klen;
    }
    memcpy(e + key_off(flags, klen), key, klen);
    *out = e;
    return ref;
}

/* Adds an entry for a key known to be absent, with shape flags (F_HAS_EXP / F_EXP_IS_VAL), value
 * 0 and expiry field 0. Returns its slot (after growing the table if that was needed). */
static uint64_t insert(const struct keyspace *ks, struct shard *sh, const struct ks_key *k,
                       enum ks_type type, uint8_t flags)
{
    uint64_t count = atomic_load_explicit(&sh->count, memory_order_relaxed);
    if ((count + 1) * 8 > (sh->mask + 1) * 7)
        rehash(ks, sh, (sh->mask + 1) * 2, 0);
    uint8_t *e;
    uint32_t ref = entry_new(sh, type, flags, k->p, k->len, &e);
    e_set_val(e, 0);
    if (flags & F_HAS_EXP)
        memset(e + exp_off(k->len), 0, 8);
    uint64_t mask = sh->mask;
    uint64_t i = k->hash & mask;
    while (sh->tags[i] != 0)
        i = (i + 1) & mask;
    sh->tags[i] = tag_of(k->hash);
    sh->refs[i] = ref;
    counter_add(&sh->count, 1);
    count_limiter(sh, type, 1);
    touch_entry(sh, e);
    return i;
}

/* Gives the entry in slot i the shape nflags (type bits included); exp fills the expiry field if
 * the new shape has one. A change of shape moves the entry to its new size class. */
static uint8_t *reshape(struct shard *sh, uint64_t i, uint8_t nflags, int64_t exp)
{
    uint32_t oref = sh->refs[i];
    uint8_t *o = ref_ptr(sh, oref);
    size_t klen = e_klen(o);
    uint8_t oflags = o[E_FLAGS];
    nflags = (uint8_t)((nflags & ~F_EPOCH) | (oflags & F_EPOCH)); /* a reshape is no new key */
    if ((oflags & F_HAS_EXP) == (nflags & F_HAS_EXP)) {
        o[E_FLAGS] = nflags;
        if (nflags & F_HAS_EXP)
            memcpy(o + exp_off(klen), &exp, 8);
        return o;
    }
    size_t osize = entry_size(oflags, klen);
    uint32_t nref = slab_alloc(sh, &sh->sl, entry_size(nflags, klen));
    o = ref_ptr(sh, oref);
    uint8_t *n = ref_ptr(sh, nref);
    memcpy(n, o, exp_off(klen)); /* value, flags, key length */
    n[E_FLAGS] = nflags;
    if (nflags & F_HAS_EXP)
        memcpy(n + exp_off(klen), &exp, 8);
    memcpy(n + key_off(nflags, klen), o + key_off(oflags, klen), klen);
    slab_free(sh, &sh->sl, oref, osize);
    sh->refs[i] = nref;
    return n;
}

static void count_expiry_change(struct shard *sh, int64_t old, int64_t at)
{
    if ((old != 0) != (at != 0))
        counter_add(&sh->expires, at != 0 ? 1 : -1);
}

/* Sets the expiry of slot i to at (0 = none), choosing the smallest shape that holds it. */
static void set_expire(struct shard *sh, uint64_t i, int64_t at)
{
    uint8_t *e = slot_entry(sh, i);
    int64_t old = e_expire(e);
    uint8_t f = e[E_FLAGS] & (uint8_t) ~(F_HAS_EXP | F_EXP_IS_VAL);
    if (at != 0)
        f |= (e_type(e) == KS_GCRA && at == e_val(e)) ? F_EXP_IS_VAL : F_HAS_EXP;
    touch_entry(sh, reshape(sh, i, f, at));
    count_expiry_change(sh, old, at);
}

/* Stores a new TAT in the GCRA entry of slot i; its expiry becomes the TAT (COMMANDS.md, CL.THROTTLE). */
static void set_gcra(struct shard *sh, uint64_t i, int64_t tat)
{
    uint8_t *e = slot_entry(sh, i);
    int64_t old = e_expire(e);
    if ((e[E_FLAGS] & (F_HAS_EXP | F_EXP_IS_VAL)) != F_EXP_IS_VAL)
        e = reshape(sh, i, (uint8_t)((e[E_FLAGS] & F_TYPE) | F_EXP_IS_VAL), 0);
    e_set_val(e, tat);
    touch_entry(sh, e);
    count_expiry_change(sh, old, tat);
}

/* Before an entry's value or type changes, an implied expiry (== value) becomes a stored one,
 * and the old blob is freed. Returns the (possibly moved) entry. */
static uint8_t *prepare_new_value(struct shard *sh, uint64_t i)
{
    uint8_t *e = slot_entry(sh, i);
    if (e[E_FLAGS] & F_EXP_IS_VAL) {
        int64_t at = e_val(e);
        uint8_t f = e[E_FLAGS] & (uint8_t)~F_EXP_IS_VAL;
        if (at != 0)
            f |= F_HAS_EXP;
        e = reshape(sh, i, f, at);
    }
    free_value(sh, e);
    return e;
}

static void set_type(struct shard *sh, uint8_t *e, enum ks_type t)
{
    count_limiter(sh, e_type(e), -1);
    count_limiter(sh, t, 1);
    e[E_FLAGS] = (uint8_t)((e[E_FLAGS] & ~F_TYPE) | (uint8_t)t);
}

/* Stores r->new_tat at key if the step said so: slot i (-1 if absent, then created). */
static int gcra_store(struct keyspace *ks, struct shard *sh, const struct ks_key *key, int64_t i,
                      const struct gcra_result *r)
{
    if (!r->store)
        return KS_OK;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        i = (int64_t)insert(ks, sh, key, KS_GCRA, F_EXP_IS_VAL);
    }
    set_gcra(sh, (uint64_t)i, r->new_tat);
    return KS_OK;
}

int ks_gcra_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                  const struct gcra_limits *l, struct gcra_result *r, const char **err)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    const uint8_t *e = i >= 0 ? slot_entry(sh, (uint64_t)i) : NULL;
    if (e != NULL && e_type(e) != KS_GCRA)
        return KS_WRONGTYPE;
    if (gcra_step(l, now, e != NULL, e != NULL ? e_val(e) : 0, r, err) != 0)
        return KS_LIMIT_ERR;
    return gcra_store(ks, sh, key, i, r);
}

/* GCRA shares CL.THROTTLE's entry: the same KS_GCRA type and nanosecond TAT, expiring at it. */
int ks_gcra_redis_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                        const struct gcra_redis_args *a, struct gcra_result *r, const char **err)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    const uint8_t *e = i >= 0 ? slot_entry(sh, (uint64_t)i) : NULL;
    if (e != NULL && e_type(e) != KS_GCRA)
        return KS_WRONGTYPE;
    if (gcra_redis_step(a, now, e != NULL, e != NULL ? e_val(e) : 0, r, err) != 0)
        return KS_LIMIT_ERR;
    return gcra_store(ks, sh, key, i, r);
}

static size_t cring_bytes(uint32_t cap)
{
    return sizeof(struct cring) + (size_t)cap * sizeof(uint32_t);
}

/* Whether log, in a ring of cap slots, can be a cring. */
static int cring_fits(const struct swlog *log, uint32_t cap)
{
    if (cap > CRING_MAX_CAP)
        return 0;
    return log->len < 2 ||
           (uint64_t)swlog_newest(log) - (uint64_t)swlog_at(log, 0) <= UINT32_MAX;
}

static void cring_store(struct cring *c, const struct swlog *log, uint32_t cap)
{
    uint64_t base = log->len > 0 ? (uint64_t)swlog_at(log, 0) : 0;
    c->base_lo = (uint32_t)base;
    c->base_hi = (uint32_t)(base >> 32);
    c->cap = (uint8_t)cap;
    c->len = (uint8_t)log->len;
    c->pad_[0] = c->pad_[1] = 0;
    for (uint32_t i = 0; i < log->len; i++)
        c->off[i] = (uint32_t)((uint64_t)swlog_at(log, i) - base);
}

/* The cring as a struct swlog in b (through swlog.c's own functions only). */
static struct swlog *cring_load(const struct cring *c, union swlog_buf *b)
{
    uint64_t base = ((uint64_t)c->base_hi << 32) | c->base_lo;
    swlog_init(&b->log, c->cap);
    /* Recording in order rebuilds the ring exactly: max_count = cap - 1 keeps up to cap. */
    for (uint32_t i = 0; i < c->len; i++)
        swlog_record(&b->log, (int64_t)(base + c->off[i]), (int64_t)c->cap - 1);
    return &b->log;
}

/* Stores log (cap slots, on the stack or the heap) as entry e's value, as a cring when it fits,
 * replacing whatever e held (old, a heap block or NULL). */
static void store_log(struct shard *sh, uint8_t *e, void *old, struct swlog *log, int on_heap)
{
    uint32_t cap = log->cap;
    touch_entry(sh, e);
    if (cring_fits(log, cap)) {
        struct cring *c = old;
        if (!(e[E_FLAGS] & F_CRING) || c == NULL || c->cap != cap) {
            if (old != NULL)
                shard_free(sh, old);
            c = shard_alloc(sh, cring_bytes(cap));
        }
        cring_store(c, log, cap);
        if (on_heap)
            shard_free(sh, log);
        e_set_ptr(e, c);
        e[E_FLAGS] |= F_CRING;
        return;
    }
    if (!on_heap) {
        struct swlog *w = shard_alloc(sh, swlog_bytes(cap));
        swlog_init(w, cap);
        swlog_copy(w, log);
        log = w;
    }
    if (old != NULL && old != log)
        shard_free(sh, old);
    e_set_ptr(e, log);
    e[E_FLAGS] &= (uint8_t)~F_CRING;
}

/* ---- sorted sets ---- */

size_t ks_swlog_member(char *buf, int64_t ms, uint32_t dup)
{
    if (dup == 0)
        return (size_t)sprintf(buf, "%lld", (long long)ms);
    return (size_t)sprintf(buf, "%lld-%u", (long long)ms, dup);
}

/* The window log of entry e as a new sorted set: every attempt a member (ks_swlog_member)
 * scored with its millisecond. */
static struct zset *log_as_zset(const uint8_t *e)
{
    union swlog_buf buf;
    const struct swlog *log =
        (e[E_FLAGS] & F_CRING) ? cring_load(e_ptr(e), &buf) : (const struct swlog *)e_ptr(e);
    struct zset *z = zs_new(log->len, 0);
    uint32_t dup = 0;
    for (uint32_t i = 0; i < log->len; i++) {
        int64_t t = swlog_at(log, i);
        dup = i > 0 && swlog_at(log, i - 1) == t ? dup + 1 : 0;
        char m[48];
        size_t n = ks_swlog_member(m, t, dup);
        double out;
        int skipped;
        zs_add(&z, m, n, (double)t, 0, &out, &skipped);
    }
    return z;
}

/* ISALLOWED's recipe on an ordinary sorted set (keyspace.h ks_swlog_apply). */
static int zset_window_apply(struct shard *sh, uint64_t i, int64_t now_ms, int64_t period_ms,
                             int64_t max_count, int *allowed, int64_t *in_window)
{
    struct zset *z = e_ptr(slot_entry(sh, i));
    size_t before = zs_bytes(z);
    int64_t cutoff;
    if (!__builtin_sub_overflow(now_ms, period_ms, &cutoff)) {
        struct zs_score_range r = {-INFINITY, (double)cutoff, 0, 0};
        size_t a, b;
        zs_range_score(z, &r, &a, &b);
        zs_del_range(&z, a, b);
    }
    /* The attempt's member: after every member already scored now_ms ("T", "T-1", ...), so a
     * burst in one millisecond keeps its order even after the oldest of it was dropped. */
    struct zs_score_range same = {(double)now_ms, (double)now_ms, 0, 0};
    size_t a, b;
    uint32_t dup = 0;
    zs_range_score(z, &same, &a, &b);
    if (b > a) {
        struct zs_iter it;
        struct zs_item item;
        char base[32];
        size_t blen = ks_swlog_member(base, now_ms, 0);
        zs_iter_init(&it, z, a, 0);
        for (size_t k = a; k < b && zs_iter_next(&it, &item); k++) {
            uint32_t d = 0;
            if (item.len > blen + 1 && item.len < blen + 12 && item.m[blen] == '-' &&
                memcmp(item.m, base, blen) == 0)
                d = (uint32_t)strtoul(item.m + blen + 1, NULL, 10);
            if (d + 1 > dup && d < UINT32_MAX - 1)
                dup = d + 1;
        }
    }
    char m[48];
    size_t n = ks_swlog_member(m, now_ms, dup);
    double out;
    int skipped;
    zs_add(&z, m, n, (double)now_ms, 0, &out, &skipped);
    size_t card = zs_card(z);
    *allowed = (uint64_t)card <= (uint64_t)max_count;
    if (in_window != NULL)
        *in_window = (int64_t)card;
    if ((uint64_t)card > (uint64_t)max_count + 1)
        zs_del_range(&z, 0, card - (size_t)max_count - 1);
    e_set_ptr(slot_entry(sh, i), z);
    mem_add_n(sh, (int64_t)zs_bytes(z) - (int64_t)before);
    set_expire(sh, i, (now_ms + period_ms) * CLOCK_NS_PER_MS);
    return KS_OK;
}

int ks_zset_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 size_t size_hint, size_t member_hint, struct ks_zref *ref)
{
    struct shard *sh = shard_of(ks, key);
    memset(ref, 0, sizeof(*ref));
    ref->mode = mode;
    ref->slot = -1;
    if (mode == KS_Z_CREATE && over_maxmemory(ks))
        return KS_OOM;
    int64_t i = find(ks, sh, key, now);
    if (i < 0) {
        if (mode == KS_Z_CREATE)
            ref->z = zs_new(size_hint, member_hint);
        return KS_OK;
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    if (t == KS_SWLOG) {
        struct zset *z = log_as_zset(e);
        if (mode == KS_Z_READ) {
            ref->z = z;
            ref->temp = 1;
            return KS_OK;
        }
        /* A write makes the window log an ordinary sorted set for good; its expiry stays. */
        e = prepare_new_value(sh, (uint64_t)i);
        set_type(sh, e, KS_ZSET);
        e_set_ptr(e, z);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        t = KS_ZSET;
    }
    if (t != KS_ZSET)
        return KS_WRONGTYPE;
    ref->z = e_ptr(e);
    ref->slot = i;
    ref->bytes = zs_bytes(ref->z);
    return KS_OK;
}

void ks_zset_close(struct keyspace *ks, const struct ks_key *key, struct ks_zref *ref)
{
    struct shard *sh = shard_of(ks, key);
    struct zset *z = ref->z;
    ref->z = NULL;
    if (z == NULL)
        return;
    if (ref->temp) {
        zs_free(z);
        return;
    }
    if (ref->mode == KS_Z_READ)
        return;
    if (ref->slot < 0) {
        if (zs_card(z) == 0) {
            zs_free(z);
            return;
        }
        uint64_t i = insert(ks, sh, key, KS_ZSET, 0);
        e_set_ptr(slot_entry(sh, i), z);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        return;
    }
    uint64_t i = (uint64_t)ref->slot;
    e_set_ptr(slot_entry(sh, i), z);
    mem_add_n(sh, (int64_t)zs_bytes(z) - (int64_t)ref->bytes);
    if (zs_card(z) == 0) {
        remove_slot(ks, sh, i);
        maybe_shrink(ks, sh);
    } else {
        /* WATCH: a write-mode close counts as a write (a no-op Z write too: conservative). */
        touch_entry(sh, slot_entry(sh, i));
    }
}

int ks_swlog_apply(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t period_ms,
                   int64_t max_count, int *allowed, int64_t *in_window)
{
    struct shard *sh = shard_of(ks, key);
    int64_t now_ms = now / CLOCK_NS_PER_MS;
    int64_t i = find(ks, sh, key, now);
    union swlog_buf buf, moved;
    struct swlog *log;
    if (i >= 0 && e_type(slot_entry(sh, (uint64_t)i)) == KS_ZSET)
        return zset_window_apply(sh, (uint64_t)i, now_ms, period_ms, max_count, allowed,
                                 in_window);
    if (i >= 0 && e_type(slot_entry(sh, (uint64_t)i)) != KS_SWLOG)
        return KS_WRONGTYPE;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        uint32_t cap = swlog_initial_cap(max_count);
        /* Created with its expiry field: set_expire below then writes it in place. */
        i = (int64_t)insert(ks, sh, key, KS_SWLOG, F_HAS_EXP);
        swlog_init(&buf.log, cap);
        store_log(sh, slot_entry(sh, (uint64_t)i), NULL, &buf.log, 0);
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    void *stored = e_ptr(e);
    int on_heap = !(e[E_FLAGS] & F_CRING);
    log = on_heap ? stored : cring_load(stored, &buf);
    swlog_trim(log, now_ms, period_ms);
    uint32_t needed = swlog_needed(log, max_count);
    uint32_t cap = swlog_fit_cap(log->cap, needed, max_count);
    if (cap != log->cap) {
        struct swlog *to = cap <= CRING_MAX_CAP ? &moved.log : shard_alloc(sh, swlog_bytes(cap));
        swlog_init(to, cap);
        swlog_copy(to, log);
        if (on_heap) {
            shard_free(sh, log);
            if (stored == log)
                stored = NULL;
        }
        log = to;
        on_heap = cap > CRING_MAX_CAP;
    }
    *allowed = swlog_record(log, now_ms, max_count);
    /* Allowed means nothing was dropped: the log holds exactly the window's attempts. */
    if (in_window != NULL)
        *in_window = log->len;
    int64_t newest = swlog_newest(log);
    if (log != stored)
        store_log(sh, e, stored, log, on_heap);
    else if (cring_fits(log, log->cap))
        store_log(sh, e, NULL, log, 1); /* a wide log that fits a cring again */
    /* COMMANDS.md, ISALLOWED: the key expires `period` after its newest attempt. cmd_limit bounds period so
     * this cannot overflow. */
    set_expire(sh, (uint64_t)i, (newest + period_ms) * CLOCK_NS_PER_MS);
    return KS_OK;
}

enum ks_type ks_get(struct keyspace *ks, const struct ks_key *key, int64_t now, struct ks_value *v)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return KS_NONE;
    const uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    if (v != NULL) {
        v->type = t;
        v->i = 0;
        v->p = NULL;
        v->len = 0;
        switch (t) {
        case KS_GCRA:
        case KS_INT:
            v->i = e_val(e);
            break;
        case KS_RAW: {
            const struct rawstr *s = e_ptr(e);
            v->p = s->data;
            v->len = s->len;
            break;
        }
        case KS_HASH:
            v->i = (int64_t)hv_count(e_ptr(e));
            break;
        case KS_LIST:
            v->i = (int64_t)lv_count(e_ptr(e));
            break;
        case KS_SWLOG:
            v->i = (e[E_FLAGS] & F_CRING) ? ((const struct cring *)e_ptr(e))->len
                                          : ((const struct swlog *)e_ptr(e))->len;
            break;
        case KS_ZSET:
            v->i = (int64_t)zs_card(e_ptr(e));
            break;
        default:
            break;
        }
    }
    return t;
}

/* Stores val in slot i as KS_INT when it is a canonical integer (what INCR can work on), else
 * raw. The expiry is left as it was. */
static void store_string(struct shard *sh, uint64_t i, const char *val, size_t len)
{
    int64_t n;
    uint8_t *e = prepare_new_value(sh, i);
    touch_entry(sh, e);
    if (util_parse_i64(val, len, &n) == 0) {
        set_type(sh, e, KS_INT);
        e_set_val(e, n);
        return;
    }
    struct rawstr *s = shard_alloc(sh, sizeof(*s) + len);
    s->len = len;
    memcpy(s->data, val, len);
    set_type(sh, e, KS_RAW);
    e_set_ptr(e, s);
}

int ks_set(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *val, size_t len,
           int64_t expire_at, int flags)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if ((flags & KS_SET_NX) && i >= 0)
        return 0;
    if ((flags & KS_SET_XX) && i < 0)
        return 0;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        int with_exp = !(flags & KS_SET_KEEPTTL) && expire_at != 0;
        i = (int64_t)insert(ks, sh, key, KS_INT, with_exp ? F_HAS_EXP : 0);
    }
    store_string(sh, (uint64_t)i, val, len);
    if (!(flags & KS_SET_KEEPTTL))
        set_expire(sh, (uint64_t)i, expire_at);
    return 1;
}

int ks_incrby(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t delta,
              int64_t *out)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        i = (int64_t)insert(ks, sh, key, KS_INT, 0);
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    switch (e_type(e)) {
    case KS_INT:
        break;
    case KS_RAW:
        return KS_NOTINT;
    default:
        return KS_WRONGTYPE;
    }
    int64_t sum;
    if (__builtin_add_overflow(e_val(e), delta, &sum))
        return KS_OVERFLOW;
    e_set_val(e, sum);
    touch_entry(sh, e);
    *out = sum;
    return KS_OK;
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

int64_t ks_ttl_ns(struct keyspace *ks, const struct ks_key *key, int64_t now)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return -2;
    int64_t x = e_expire(slot_entry(sh, (uint64_t)i));
    if (x == 0)
        return -1;
    return x - now;
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
    if ((flags & KS_EXPIRE_GT) && (!has || at <= x))
        return 0;
    if ((flags & KS_EXPIRE_LT) && has && at >= x)
        return 0;
    if (at <= now) {
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
     * inline number or a pointer to its block) moves as it is, with its expiry and shape. */
    uint8_t *e = slot_entry(ss, (uint64_t)i);
    enum ks_type t = e_type(e);
    uint8_t shape = e[E_FLAGS] & (F_HAS_EXP | F_EXP_IS_VAL | F_CRING);
    int64_t exp = e_expire(e);
    uint8_t val[8];
    memcpy(val, e, sizeof(val));
    if (has_blob(t)) {
        void *blob = e_ptr(e);
        int64_t bytes = (int64_t)blob_bytes(t, blob);
        mem_add_n(ss, -bytes);
        mem_add_n(ds, bytes);
        e_set_ptr(e, NULL); /* not freed with the old entry */
    }
    remove_slot(ks, ss, (uint64_t)i);
    uint64_t k = insert(ks, ds, dst, t, shape & (F_HAS_EXP | F_EXP_IS_VAL));
    uint8_t *n = slot_entry(ds, k);
    memcpy(n, val, sizeof(val));
    n[E_FLAGS] |= shape & F_CRING;
    if (shape & F_HAS_EXP)
        memcpy(n + exp_off(dst->len), &exp, 8);
    if (exp != 0)
        counter_add(&ds->expires, 1);
    maybe_shrink(ks, ss);
    return 1;
}

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

int ks_hash_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_href *r)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    r->slot = i;
    r->h = NULL;
    r->bytes = 0;
    if (i >= 0) {
        uint8_t *e = slot_entry(sh, (uint64_t)i);
        if (e_type(e) != KS_HASH)
            return KS_WRONGTYPE;
        r->h = e_ptr(e);
        r->bytes = hv_bytes(r->h);
    } else if (mode == KS_H_CREATE) {
        if (over_maxmemory(ks))
            return KS_OOM;
        r->h = hv_new();
    }
    return KS_OK;
}

void ks_hash_close(struct keyspace *ks, const struct ks_key *key, struct ks_href *r, int changed)
{
    struct shard *sh = shard_of(ks, key);
    if (r->slot < 0) {
        if (r->h == NULL)
            return;
        if (hv_count(r->h) == 0) {
            hv_free(r->h);
        } else {
            uint64_t i = insert(ks, sh, key, KS_HASH, 0);
            e_set_ptr(slot_entry(sh, i), r->h);
            mem_add_n(sh, (int64_t)hv_bytes(r->h));
        }
    } else {
        uint8_t *e = slot_entry(sh, (uint64_t)r->slot);
        e_set_ptr(e, r->h);
        mem_add_n(sh, (int64_t)hv_bytes(r->h) - (int64_t)r->bytes);
        if (hv_count(r->h) == 0) {
            remove_slot(ks, sh, (uint64_t)r->slot);
            maybe_shrink(ks, sh);
        } else if (changed) {
            touch_entry(sh, e);
        }
    }
    r->h = NULL;
}

int ks_list_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_lref *r)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    r->slot = i;
    r->l = NULL;
    r->bytes = 0;
    if (i >= 0) {
        uint8_t *e = slot_entry(sh, (uint64_t)i);
        if (e_type(e) != KS_LIST)
            return KS_WRONGTYPE;
        r->l = e_ptr(e);
        r->bytes = lv_bytes(r->l);
    } else if (mode == KS_H_CREATE) {
        if (over_maxmemory(ks))
            return KS_OOM;
        r->l = lv_new();
    }
    return KS_OK;
}

void ks_list_close(struct keyspace *ks, const struct ks_key *key, struct ks_lref *r, int changed)
{
    struct shard *sh = shard_of(ks, key);
    if (r->slot < 0) {
        if (r->l == NULL)
            return;
        if (lv_count(r->l) == 0) {
            lv_free(r->l);
        } else {
            uint64_t i = insert(ks, sh, key, KS_LIST, 0);
            e_set_ptr(slot_entry(sh, i), r->l);
            mem_add_n(sh, (int64_t)lv_bytes(r->l));
        }
    } else {
        uint8_t *e = slot_entry(sh, (uint64_t)r->slot);
        e_set_ptr(e, r->l);
        mem_add_n(sh, (int64_t)lv_bytes(r->l) - (int64_t)r->bytes);
        if (lv_count(r->l) == 0) {
            remove_slot(ks, sh, (uint64_t)r->slot);
            maybe_shrink(ks, sh);
        } else if (changed) {
            touch_entry(sh, e);
        }
    }
    r->l = NULL;
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
    if (atomic_load_explicit(&sh->expires, memory_order_relaxed) == 0) {
        maybe_shrink(ks, sh);
        return 0;
    }
    uint64_t n = sh->mask + 1;
    uint64_t i = sh->expire_cursor & sh->mask;
    for (uint64_t examined = 0; examined < max_buckets && examined < n; examined++) {
        if (sh->tags[i] != 0 && e_expired(slot_entry(sh, i), now)) {
            /* The backward shift may have moved a later entry into slot i: look again. */
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

/* ---- Sliced dumps ----
 *
 * A snapshot must not hold a shard's lock for the whole shard (tens of thousands of entries,
 * milliseconds at 10M keys: every command on that shard waits that long). So a save dumps a shard
 * in slices of a bounded number of slots, releasing the lock in between, while commands keep
 * changing the shard. A slot cursor alone is not enough: between slices a deletion's backward
 * shift can move a not-yet-dumped entry to a slot already passed (it would be missed), and a
 * resize moves every entry (some would be missed, others dumped twice; a loader that trusts a
 * snapshot to hold each key once must never see a double).
 *
 * So the "dumped or not" state lives in the entry itself: one flag bit, F_EPOCH, compared with
 * the shard's epoch. Outside a dump every entry's bit equals sh->epoch. ks_dump_begin flips
 * sh->epoch, which marks every existing entry "to dump" in O(1), and sets dump_left to the entry
 * count. A slice dumps entries whose bit differs and flips it; entries keep their bit when they
 * move (backward shift, reshape, rehash, compaction copy the flags byte), keys created during the
 * dump are born with the new epoch (not part of this snapshot), and freeing a not-yet-dumped
 * entry decrements dump_left (it is not part of it either). The dump ends when dump_left is 0.
 * Hence every key that exists for the whole dump is written exactly once, as it was at the
 * moment its slice ran; a key created or deleted during the dump may or may not be written.
 *
 * Efficiency, not correctness, is what the cursor is for: a slice goes on past its budget to the
 * next empty slot, so the cursor always follows an empty slot. An entry not yet passed then has
 * its home slot at or after the cursor (its probe run cannot cross that empty slot), and since a
 * backward shift moves an entry only towards its home, it can never move behind the cursor:
 * one pass finds everything. After a resize (a new slot array: table_gen changed) the cursor
 * starts again at slot 0; already-dumped entries are skipped by their bit. If a pass ends with
 * entries left (only after such a restart), the cursor wraps. */

void ks_dump_begin(struct keyspace *ks, unsigned shard)
{
    struct shard *sh = &ks->shards[shard];
    if (sh->dumping) {
        fprintf(stderr, "rlimitd: ks_dump_begin on a shard already being dumped\n");
        abort();
    }
    sh->epoch ^= F_EPOCH;
    sh->dumping = 1;
    sh->dump_left = atomic_load_explicit(&sh->count, memory_order_relaxed);
    sh->dump_cursor = 0;
    sh->dump_gen = sh->table_gen;
    sh->dump_wraps = 0;
}

int ks_dump_slice(struct keyspace *ks, unsigned shard, int64_t now, uint64_t max_slots,
                  ks_dump_fn cb, void *ud, uint64_t *dumped)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t mask = sh->mask;
    uint64_t i = sh->dump_cursor;
    uint64_t visited = 0;
    uint8_t epoch = sh->epoch;
    union swlog_buf logbuf;
    if (!sh->dumping)
        return 1;
    if (sh->dump_gen != sh->table_gen) {
        i = 0; /* resized (or rehashed) since the last slice */
        sh->dump_gen = sh->table_gen;
        sh->dump_wraps = 0;
    }
    while (sh->dump_left > 0) {
        if (i > mask) {
            /* Entries left after a full pass: only after a resize, see above. A second wrap
             * without a resize means dump_left and the bits disagree: a broken invariant. */
            i = 0;
            if (++sh->dump_wraps > 2) {
                fprintf(stderr, "rlimitd: sliced dump lost track of %llu entries\n",
                        (unsigned long long)sh->dump_left);
                abort();
            }
        }
        if (visited >= max_slots && sh->tags[i] == 0)
            break; /* the next slice starts at an empty slot: see above */
        visited++;
        uint64_t ahead = (i + 8) & mask;
        if (sh->tags[ahead] != 0)
            __builtin_prefetch(slot_entry(sh, ahead));
        if (sh->tags[i] == 0) {
            i++;
            continue;
        }
        uint8_t *e = slot_entry(sh, i);
        i++;
        if ((e[E_FLAGS] & F_EPOCH) == epoch)
            continue; /* dumped already, or created during this dump */
        e[E_FLAGS] ^= F_EPOCH;
        sh->dump_left--;
        if (e_expired(e, now))
            continue; /* SNAPSHOT.md: expired state is skipped on write */
        struct ks_record r = {0};
        r.type = e_type(e);
        r.klen = e_klen(e);
        r.key = e_key(e, r.klen);
        r.expire = e_expire(e);
        if (r.type == KS_GCRA || r.type == KS_INT) {
            r.i = e_val(e);
        } else if (r.type == KS_RAW) {
            const struct rawstr *str = e_ptr(e);
            r.p = str->data;
            r.len = str->len;
        } else if (r.type == KS_ZSET) {
            r.zs = e_ptr(e);
        } else if (r.type == KS_HASH) {
            r.hv = e_ptr(e);
        } else if (r.type == KS_LIST) {
            r.lv = e_ptr(e);
        } else {
            r.log = (e[E_FLAGS] & F_CRING) ? cring_load(e_ptr(e), &logbuf) : e_ptr(e);
        }
        cb(ud, &r);
        (*dumped)++;
    }
    sh->dump_cursor = i;
    if (sh->dump_left > 0)
        return 0;
    sh->dumping = 0;
    return 1;
}

size_t ks_dump_peek(struct keyspace *ks, unsigned shard, uint64_t max_slots, const void **addrs,
                    size_t cap)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t mask = sh->mask;
    uint64_t i = sh->dump_gen == sh->table_gen ? sh->dump_cursor : 0;
    size_t n = 0;
    if (!sh->dumping)
        return 0;
    for (uint64_t k = 0; k < max_slots && n < cap && i <= mask; k++, i++)
        if (sh->tags[i] != 0)
            addrs[n++] = slot_entry(sh, i);
    return n;
}

uint64_t ks_dump_shard(struct keyspace *ks, unsigned shard, int64_t now, ks_dump_fn cb, void *ud)
{
    uint64_t n = 0;
    ks_dump_begin(ks, shard);
    ks_dump_slice(ks, shard, now, UINT64_MAX, cb, ud, &n);
    return n;
}

void ks_reserve(struct keyspace *ks, uint64_t n)
{
    uint64_t per = n / ks->nshards + 1;
    uint64_t size = MIN_SLOTS;
    while (size / 8 * 7 < per && size < (1ull << 40))
        size *= 2;
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        if (sh->mask + 1 < size)
            rehash(ks, sh, size, 0);
    }
}

/* What ks_restore refuses: an unknown type, a window log with no or unsorted timestamps. */
static int record_invalid(const struct ks_record *r)
{
    if (r->type == KS_HASH)
        return r->hv == NULL || hv_count(r->hv) == 0;
    if (r->type == KS_LIST)
        return r->lv == NULL || lv_count(r->lv) == 0;
    if (r->type < KS_GCRA || r->type > KS_ZSET)
        return 1;
    if (r->type == KS_ZSET)
        return r->zs == NULL || zs_card(r->zs) == 0;
    if (r->type == KS_SWLOG) {
        if (r->nts == 0 || r->ts == NULL)
            return 1;
        for (uint32_t i = 1; i < r->nts; i++)
            if (r->ts[i] < r->ts[i - 1])
                return 1;
    }
    return 0;
}

/* Entry e's value becomes a ring holding exactly the record's timestamps (e holds none). */
static void set_restored_log(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    union swlog_buf buf;
    int on_heap = r->nts > CRING_MAX_CAP;
    struct swlog *log = on_heap ? shard_alloc(sh, swlog_bytes(r->nts)) : &buf.log;
    swlog_init(log, r->nts);
    /* Recording in order rebuilds the ring exactly: max_count = n - 1 keeps all n. */
    for (uint32_t j = 0; j < r->nts; j++)
        swlog_record(log, r->ts[j], (int64_t)r->nts - 1);
    store_log(sh, e, NULL, log, on_heap);
}

/* Sets the value of a new entry from a record (the entry's shape is already final). */
static void set_restored_value(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    switch (r->type) {
    case KS_GCRA:
    case KS_INT:
        e_set_val(e, r->i);
        break;
    case KS_RAW: {
        struct rawstr *str = shard_alloc(sh, sizeof(*str) + r->len);
        str->len = r->len;
        memcpy(str->data, r->p, r->len);
        e_set_ptr(e, str);
        break;
    }
    case KS_ZSET: {
        struct zset *z = zs_dup(r->zs);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        e_set_ptr(e, z);
        break;
    }
    case KS_HASH: {
        struct hashval *h = hv_clone(r->hv);
        e_set_ptr(e, h);
        mem_add_n(sh, (int64_t)hv_bytes(h));
        break;
    }
    case KS_LIST: {
        struct listval *l = lv_clone(r->lv);
        e_set_ptr(e, l);
        mem_add_n(sh, (int64_t)lv_bytes(l));
        break;
    }
    default:
        set_restored_log(sh, e, r);
        break;
    }
}

/* The shape a restored entry is born with, so a load never moves entries between classes. */
static uint8_t restored_shape(const struct ks_record *r)
{
    if (r->expire == 0)
        return 0;
    return (r->type == KS_GCRA && r->expire == r->i) ? F_EXP_IS_VAL : F_HAS_EXP;
}

/* What both load paths do first: -1 for an invalid record, 0 for one to skip (SNAPSHOT.md: expired
 * state is skipped on load too), 1 to load it. */
static int restore_admit(const struct ks_record *r, int64_t now)
{
    if (record_invalid(r))
        return -1;
    return r->expire != 0 && r->expire <= now ? 0 : 1;
}

/* Fills a new entry, born with restored_shape(r), with the record's value and expiry. */
static void fill_restored(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    if (e[E_FLAGS] & F_HAS_EXP)
        memcpy(e + exp_off(r->klen), &r->expire, 8);
    set_restored_value(sh, e, r);
}

int ks_restore(struct keyspace *ks, const struct ks_record *r, int64_t now)
{
    int admit = restore_admit(r, now);
    if (admit <= 0)
        return admit;
    struct ks_key k;
    ks_key_init(ks, &k, r->key, r->klen);
    struct shard *sh = shard_of(ks, &k);
    int64_t si = find(ks, sh, &k, now);
    if (si < 0) {
        uint64_t i = insert(ks, sh, &k, r->type, restored_shape(r));
        fill_restored(sh, slot_entry(sh, i), r);
        if (r->expire != 0)
            counter_add(&sh->expires, 1);
        return 1;
    }
    uint64_t i = (uint64_t)si;
    uint8_t *e = prepare_new_value(sh, i);
    set_type(sh, e, r->type);
    if (r->type == KS_GCRA || r->type == KS_INT) {
        /* An implied expiry must not change before set_expire has counted the old one. */
        if (e[E_FLAGS] & F_EXP_IS_VAL) {
            set_gcra(sh, i, r->i);
            e = slot_entry(sh, i);
        } else {
            e_set_val(e, r->i);
        }
    } else {
        set_restored_value(sh, e, r);
    }
    set_expire(sh, i, r->expire);
    return 1;
}

/* ---- Bulk loading ----
 *
 * Loading a 10M-key snapshot with ks_restore spent most of its time waiting for memory: every
 * key's home slot is a random place in tables far bigger than the caches (and in a VM a TLB miss
 * is a nested page walk). A bulk load does not touch the tables while it reads: ks_bulk_add
 * writes each entry into its shard's slabs (sequential per shard) and appends (home bits, tag,
 * reference) to the shard's pending list, sequential too. ks_bulk_end then builds each shard's
 * table in one go: a counting sort of the pending list by home slot, and the slots filled in home
 * order, a sequential sweep through the table. Placing keys in ascending home order at the first
 * free slot at or after the home gives a table that satisfies the invariant lookups and deletions
 * rely on (every slot between a key's home slot and the key is occupied).
 *
 * Duplicates: a snapshot holds each key once (ks_dump_slice), but a file could say otherwise,
 * and ks_restore's answer is that the later record replaces the earlier. Equal keys have equal
 * hashes, so the sweep meets the earlier one in the new key's probe run, as a lookup would (the
 * run is the few slots just filled, still in the cache); it is freed and the later entry takes
 * its slot. The sort is stable, so "later" is file order: the keyspace ks_restore would build. */

#define BULK_HOME_BITS 25 /* home bits kept per pending key; bigger tables rehash the entry */

int ks_bulk_begin(struct keyspace *ks)
{
    if (ks->bulk || ks_key_count(ks) != 0)
        return -1;
    ks->bulk = 1;
    return 0;
}

int ks_bulk_add(struct keyspace *ks, const struct ks_record *r, int64_t now)
{
    if (!ks->bulk) {
        fprintf(stderr, "rlimitd: ks_bulk_add without ks_bulk_begin\n");
        abort();
    }
    int admit = restore_admit(r, now);
    if (admit <= 0)
        return admit;
    struct ks_key k;
    ks_key_init(ks, &k, r->key, r->klen);
    struct shard *sh = shard_of(ks, &k);
    uint8_t *e;
    uint32_t ref = entry_new(sh, r->type, restored_shape(r), r->key, r->klen, &e);
    fill_restored(sh, e, r);
    if (sh->nbulk == sh->cap_bulk) {
        /* mmap'd, not malloc'd: 8 bytes a key for the duration of the load only (80 MB at 10M
         * keys), which munmap gives back, where the malloc heap might keep it. */
        size_t old = sh->cap_bulk * sizeof(*sh->bulk);
        sh->cap_bulk = sh->cap_bulk ? sh->cap_bulk * 2 : PAGE / sizeof(*sh->bulk);
        size_t n = sh->cap_bulk * sizeof(*sh->bulk);
        void *p = sh->bulk == NULL ? xmmap(n) : mremap(sh->bulk, old, n, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            alloc_fail(n);
        sh->bulk = p;
    }
    sh->bulk[sh->nbulk++] = ((uint64_t)ref << 32) |
                            ((k.hash & ((1u << BULK_HOME_BITS) - 1)) << 7) |
                            (uint64_t)(tag_of(k.hash) & 0x7f);
    counter_add(&sh->count, 1);
    count_limiter(sh, r->type, 1);
    if (r->expire != 0)
        counter_add(&sh->expires, 1);
    return 1;
}

/* Home slot (in a table of mask + 1 slots) and tag of a pending key. */
static void bulk_slot(const struct keyspace *ks, const struct shard *sh, uint64_t item,
                      uint64_t mask, uint64_t *home, uint8_t *tag)
{
    if (mask < (1u << BULK_HOME_BITS)) {
        *home = (item >> 7) & mask;
        *tag = (uint8_t)(0x80 | (item & 0x7f));
    } else {
        uint64_t h = entry_hash(ks, ref_ptr(sh, (uint32_t)(item >> 32)));
        *home = h & mask;
        *tag = tag_of(h);
    }
}

static int same_key(const struct shard *sh, uint32_t a, uint32_t b)
{
    const uint8_t *x = ref_ptr(sh, a), *y = ref_ptr(sh, b);
    size_t kx = e_klen(x), ky = e_klen(y);
    return kx == ky && memcmp(e_key(x, kx), e_key(y, ky), kx) == 0;
}

struct bulk_scratch {
    uint32_t *count;
    uint64_t ncount;
    uint64_t *sorted;
    uint64_t nsorted;
};

static void bulk_build(const struct keyspace *ks, struct shard *sh, struct bulk_scratch *b)
{
    uint64_t n = sh->nbulk;
    uint64_t size = sh->mask + 1;
    while (n * 8 > size * 7)
        size *= 2;
    if (size != sh->mask + 1) {
        table_free(sh, sh->tags, sh->mask + 1);
        table_alloc(sh, size);
    }
    uint64_t mask = sh->mask;
    if (b->ncount < size + 1) {
        if (b->count != NULL)
            munmap(b->count, b->ncount * sizeof(*b->count));
        b->ncount = size + 1;
        b->count = xmmap(b->ncount * sizeof(*b->count));
    }
    if (b->nsorted < n) {
        if (b->sorted != NULL)
            munmap(b->sorted, b->nsorted * sizeof(*b->sorted));
        b->nsorted = n;
        b->sorted = xmmap(n * sizeof(*b->sorted));
    }
    uint32_t *count = b->count;
    uint64_t *sorted = b->sorted;
    uint64_t home;
    uint8_t tag;
    /* Counting sort by home slot. Stable: equal keys stay in the order they were added. */
    memset(count, 0, (size + 1) * sizeof(*count));
    for (uint64_t j = 0; j < n; j++) {
        bulk_slot(ks, sh, sh->bulk[j], mask, &home, &tag);
        count[home + 1]++;
    }
    for (uint64_t h = 0; h < size; h++)
        count[h + 1] += count[h];
    for (uint64_t j = 0; j < n; j++) {
        bulk_slot(ks, sh, sh->bulk[j], mask, &home, &tag);
        sorted[count[home]++] = sh->bulk[j];
    }
    /* The sweep: slots [last home placed, next) are occupied, all slots from next on are free
     * (but for keys that wrapped past the end, placed at the start at the very end). */
    uint64_t next = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t item = sorted[j];
        uint32_t ref = (uint32_t)(item >> 32);
        bulk_slot(ks, sh, item, mask, &home, &tag);
        int wraps = (home > next ? home : next) > mask;
        /* The probe run of this key: [home, next) in the sweep, up to an empty slot after a
         * wrap. An equal key in it is an earlier record of the same key. */
        uint64_t i = home;
        int replaced = 0;
        while (wraps ? sh->tags[i] != 0 : i < next) {
            if (sh->tags[i] == tag && same_key(sh, sh->refs[i], ref)) {
                free_entry_at(sh, i);
                sh->refs[i] = ref;
                replaced = 1;
                break;
            }
            i = (i + 1) & mask;
        }
        if (replaced)
            continue;
        if (!wraps) {
            i = home > next ? home : next;
            next = i + 1;
        } /* else i is the first free slot after the run, as a probe finds it */
        sh->tags[i] = tag;
        sh->refs[i] = ref;
    }
    munmap(sh->bulk, sh->cap_bulk * sizeof(*sh->bulk));
    sh->bulk = NULL;
    sh->nbulk = sh->cap_bulk = 0;
}

void ks_bulk_end(struct keyspace *ks)
{
    struct bulk_scratch b = {0};
    for (unsigned s = 0; s < ks->nshards; s++)
        if (ks->shards[s].nbulk > 0)
            bulk_build(ks, &ks->shards[s], &b);
    if (b.count != NULL)
        munmap(b.count, b.ncount * sizeof(*b.count));
    if (b.sorted != NULL)
        munmap(b.sorted, b.nsorted * sizeof(*b.sorted));
    ks->bulk = 0;
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
    default:
        return "string";
    }
}
