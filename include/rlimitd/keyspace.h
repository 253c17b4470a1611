/* keyspace.h - the sharded in-memory tables of typed entries (DESIGN.md "Keyspace").
 *
 * Locking contract: every function that takes a key requires the caller to hold the lock of that
 * key's shard (ks_lock(ks, ks_shard(ks, key))); functions taking a shard index require that
 * shard's lock. The command layer does the locking (src/cmd, cmd_run.c); nothing in here locks,
 * except the global counters, which are atomics. Every time is absolute wall-clock nanoseconds; `now` is the command's clock read.
 * An entry whose expiry is <= now is treated as absent and freed on the spot. */
#ifndef RLIMITD_KEYSPACE_H
#define RLIMITD_KEYSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"
#include "rlimitd/hashval.h"
#include "rlimitd/listval.h"

struct keyspace;

/* A key with its hash computed once (ks_key_init), used for both shard and bucket. */
struct ks_key {
    const char *p;
    size_t len;
    uint64_t hash;
};

enum ks_type {
    KS_NONE = 0, /* absent */
    KS_GCRA,     /* CL.THROTTLE state: the TAT; TYPE says "string" */
    KS_INT,      /* a string that is a canonical int64 (counters) */
    KS_RAW,      /* any other string */
    KS_SWLOG,    /* ISALLOWED window log; TYPE says "zset", Z reads see it as one */
    KS_ZSET,     /* a sorted set (zset.h) */
    KS_HASH,     /* a hash (hashval.h) */
    KS_LIST,     /* a list (listval.h) */
    KS_LEASE,    /* concurrency leases (lease.h); TYPE says "rlim-leas" */
};

/* Results of the typed operations (negative = error). */
#define KS_OK 0
#define KS_WRONGTYPE (-1)
#define KS_OOM (-2)      /* would add a key while used memory > maxmemory */
#define KS_NOTINT (-3)   /* INCR on a string that is not an integer */
#define KS_OVERFLOW (-4) /* INCR past int64 */
#define KS_NOKEY (-5)    /* RENAME of an absent key */
#define KS_LIMIT_ERR (-100) /* the limiter arithmetic refused the call; *err says why */

/* Shard count is 1 << shard_bits (0..12). seed keys the hash. Returns NULL on bad arguments. */
struct keyspace *ks_create(unsigned shard_bits, const uint8_t seed[16]);
/* Frees everything and sets *ksp to NULL. */
void ks_destroy(struct keyspace **ksp);

void ks_key_init(const struct keyspace *ks, struct ks_key *k, const char *p, size_t len);
unsigned ks_shard(const struct keyspace *ks, const struct ks_key *k);
unsigned ks_nshards(const struct keyspace *ks);
void ks_lock(struct keyspace *ks, unsigned shard);
void ks_unlock(struct keyspace *ks, unsigned shard);
/* 0 if the shard was free and is now held, -1 if another thread (or this one) holds it. */
int ks_trylock(struct keyspace *ks, unsigned shard);
/* ks_lock that gives up at a CLOCK_MONOTONIC deadline: 0 held, -1 timed out. */
int ks_timedlock(struct keyspace *ks, unsigned shard, int64_t mono_deadline_ns);

/* ---- keyspace events raised inside the store ----
 * What happens to a key in here rather than in a command (COMMANDS.md, Keyspace
 * notifications): a key created (Redis's `new`), expired lazily or by the active cycle
 * (`expired`), evicted (`evicted`). The command layer, which publishes them, registers one
 * function before any thread runs; it is called with the shard lock held, before the entry is
 * freed (the key bytes are valid for the call), and only when the word at *classes has one of
 * the bits want[ev] (a relaxed load: the one test a disabled event costs). */
enum ks_event { KS_EVENT_NEW = 0, KS_EVENT_EXPIRED, KS_EVENT_EVICTED, KS_EVENTS };
typedef void (*ks_event_fn)(void *ud, enum ks_event ev, const char *key, size_t klen);
void ks_set_event_hook(struct keyspace *ks, ks_event_fn fn, void *ud, const int64_t *classes,
                       const int64_t want[KS_EVENTS]);

/* 0 = no limit. Checked when a command would create a key. */
void ks_set_maxmemory(struct keyspace *ks, uint64_t bytes);
/* 1 if maxmemory is set and used memory is above it: what refuses a new key. Multi-key writes
 * (MSET) ask once before writing any key, so they are refused whole, never half done. */
int ks_over_maxmemory(const struct keyspace *ks);

/* ---- eviction (src/store/ks_evict.c; CONFIG.md, maxmemory-policy) ----
 * The policies in Redis's order (its error text lists them so). */
enum ks_policy {
    KS_POL_VOLATILE_LRU = 0,
    KS_POL_VOLATILE_LFU,
    KS_POL_VOLATILE_RANDOM,
    KS_POL_VOLATILE_TTL,
    KS_POL_ALLKEYS_LRU,
    KS_POL_ALLKEYS_LFU,
    KS_POL_ALLKEYS_RANDOM,
    KS_POL_NOEVICTION,
};

/* Sets the policy and its tunables (maxmemory-samples, lfu-log-factor, lfu-decay-time). Moving
 * to or from an LRU/LFU policy gives each shard its access array or takes it away, one shard
 * lock at a time: the caller must hold no shard lock. */
void ks_set_eviction(struct keyspace *ks, int policy, int samples, int lfu_log_factor,
                     int lfu_decay_time);

/* Redis's performEvictions: while used memory plus `extra` is over maxmemory, deletes keys the
 * policy picks (each through the same path as DEL, so WATCH sees it), for at most about a
 * millisecond. Takes shard locks with trylock only, one at a time, so it may be called with
 * other shard locks held. Adds the keys deleted to *evicted. Returns 0 when at or under the
 * limit, or when keys were deleted and the time ran out (Redis's EVICT_RUNNING: the command
 * runs); -1 when still over and nothing could be deleted (noeviction, no candidate). */
int ks_evict(struct keyspace *ks, uint64_t extra, int64_t now, uint64_t *evicted);
/* A command the last ks_evict answered 0 for creates its keys without a second look at
 * maxmemory (Redis decides once, before the command); the dispatcher calls this before each
 * command, so that a command that did not ask ks_evict is checked when it creates a key. */
void ks_evict_forget(void);

/* Redis's LOOKUP_NOTOUCH: while set on the calling thread, finding a key does not count as an
 * access for an LRU/LFU policy (OBJECT, TYPE, EXISTS, TTL and its kin, MEMORY USAGE look at a
 * key without using it). The command sets it around its own calls and clears it after. */
void ks_notouch(int on);

/* The access data an LRU/LFU policy keeps of key (its shard locked): *idle_s seconds since the
 * last access (-1: not tracked now) and *freq the LFU counter (-1: not tracked now). Returns 0,
 * or -1 if the key is absent. A read: it does not count as an access. */
int ks_access_info(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *idle_s,
                   int64_t *freq);
/* Bytes allocated for entries, values and tables (malloc_usable_size), all shards, plus the
 * external bytes last set and the counters registered with ks_count_memory: Redis's
 * used_memory, what maxmemory is checked against. */
uint64_t ks_used_memory(const struct keyspace *ks);
/* ks_used_memory less the registered counters: what the keys, tables and Lua hold. */
uint64_t ks_data_memory(const struct keyspace *ks);
/* Makes *counter (a byte count one thread keeps; a uint64 whose deltas may wrap, read as their
 * sum) part of ks_used_memory from now on, for the keyspace's life: the network layer's
 * per-thread total of its connections' buffers, so that clients count toward maxmemory as
 * Redis's normal clients do. At most KS_MAX_COUNTED; returns -1 past that. */
#define KS_MAX_COUNTED 32
int ks_count_memory(struct keyspace *ks, const _Atomic uint64_t *counter);
/* Memory outside the keyspace that counts toward maxmemory (the Lua engines and the script
 * cache: cmd_script.c keeps it current). */
void ks_set_external_memory(struct keyspace *ks, uint64_t bytes);
/* Live entries (may include expired ones not yet reclaimed) and those with an expiry. */
uint64_t ks_key_count(const struct keyspace *ks);
uint64_t ks_expires_count(const struct keyspace *ks);
/* Live entries holding limiter state (KS_GCRA, KS_SWLOG, KS_LEASE), counted as ks_key_count is. */
uint64_t ks_limiter_key_count(const struct keyspace *ks);
/* MEMORY USAGE (ks_usage.c): the bytes key holds now, its table slot, entry and value block
 * (malloc_usable_size), the sizes the shard's byte counter added for it. KS_OK, or KS_NOKEY when it
 * is absent (an expired key is reclaimed here). The caller holds the key's shard lock. */
int ks_key_memory(struct keyspace *ks, const struct ks_key *key, int64_t now, uint64_t *bytes);
/* The bytes of one shard's slot array (tags and references); the caller holds its lock. */
uint64_t ks_shard_table_memory(struct keyspace *ks, unsigned shard);

/* ---- limiter state ---- */

/* One CL.THROTTLE on key: reads the TAT, runs gcra_step, stores the new TAT with expiry at it.
 * Returns KS_OK, KS_WRONGTYPE, KS_OOM, or KS_LIMIT_ERR with *err set on arithmetic overflow. */
int ks_gcra_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                  const struct gcra_limits *l, struct gcra_result *r, const char **err);
/* One GCRA (COMMANDS.md, GCRA) on key: the same state and returns as ks_gcra_apply, gcra_redis_step's
 * arithmetic. */
int ks_gcra_redis_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                        const struct gcra_redis_args *a, struct gcra_result *r, const char **err);

/* GCRA state read and written apart, for a decision over several keys (THROTTLE.ALL):
 * ks_gcra_read sets *has and *tat (the stored TAT, gcra.h) as gcra_step takes them, KS_OK or
 * KS_WRONGTYPE; ks_gcra_write stores tat with expiry at it (gcra_tat_expire), KS_OK,
 * KS_WRONGTYPE or KS_OOM (a new key over maxmemory: a caller writing several keys asks
 * ks_over_maxmemory first, so that none or all are written). */
int ks_gcra_read(struct keyspace *ks, const struct ks_key *key, int64_t now, int *has,
                 int64_t *tat);
int ks_gcra_write(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t tat);

/* One ISALLOWED on key: records an attempt at now (ms) in the window log, sets *allowed, and
 * expires the key period_ms after the newest attempt. If in_window is not NULL and the attempt
 * was allowed, *in_window is the number of attempts now in the window, this one included.
 * Returns KS_OK, KS_WRONGTYPE, KS_OOM.
 * On an ordinary sorted set (KS_ZSET) the same recipe runs on the set itself: members with a
 * score at or before now - period are removed, the attempt is added as member
 * ks_swlog_member(now) with score now, allowed if the set then holds at most max_count members,
 * the lowest ranks beyond max_count + 1 are dropped, and the key expires period after now. */
int ks_swlog_apply(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t period_ms,
                   int64_t max_count, int *allowed, int64_t *in_window);

/* ---- concurrency leases (lease.h, COMMANDS.md, LEASE.*) ----
 * A key's leases: each op first drops the leases expired at now; the key expires with its last
 * lease and is deleted when its last lease is released. Each returns KS_OK, or KS_WRONGTYPE
 * (another type under the key; nothing changed), ks_lease_acquire also KS_OOM (a new key over
 * maxmemory). */

/* The outcome of an op, for the reply, INFO limiter and waiters. */
struct ks_lease_out {
    int64_t id;        /* ACQUIRE: the new lease's id, 0 when full */
    int64_t count;     /* live leases after the op */
    int64_t next_free; /* when full: the earliest expiry (ns), when a slot frees by itself */
    int done;          /* RELEASE/RENEW: 1 if the lease existed (and was released / renewed) */
};
int ks_lease_acquire(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t limit,
                     int64_t ttl_ns, struct ks_lease_out *out);
int ks_lease_release(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t id,
                     struct ks_lease_out *out);
int ks_lease_renew(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t id,
                   int64_t ttl_ns, struct ks_lease_out *out);
/* LEASE.COUNT: live leases at now, without writing (a read). */
int ks_lease_count(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *count);

/* ---- strings and counters ---- */

/* A read-only view of a value; pointers stay valid while the shard lock is held and the key is
 * not modified. For KS_GCRA, i is the TAT; for KS_INT the integer; for KS_RAW p/len the bytes;
 * for KS_SWLOG, i is the number of attempts stored. */
struct ks_value {
    enum ks_type type;
    int64_t i;
    const char *p;
    size_t len;
};

/* Looks key up. Returns its type (KS_NONE if absent) and fills *v if v is not NULL. */
enum ks_type ks_get(struct keyspace *ks, const struct ks_key *key, int64_t now,
                    struct ks_value *v);

#define KS_SET_NX 1      /* only if absent */
#define KS_SET_XX 2      /* only if present */
#define KS_SET_KEEPTTL 4 /* keep the current expiry */

/* SET: replaces whatever key holds with the string val (stored as KS_INT when canonical).
 * expire_at is absolute ns, 0 for none. Returns 1 if set, 0 if NX/XX prevented it, KS_OOM. */
int ks_set(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *val,
           size_t len, int64_t expire_at, int flags);

/* APPEND to an existing string (KS_RAW or KS_INT): n bytes of p added at its end, the expiry
 * kept, *newlen set to the new length. A string that must grow gets room for later appends
 * (ks_values.c string_room), so appending is amortised O(n). Returns KS_OK, KS_NOKEY (absent:
 * the caller creates it with ks_set, which is where maxmemory refuses a new key) or
 * KS_WRONGTYPE. The caller checks the length limit first. */
int ks_append(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *p, size_t n,
              size_t *newlen);

/* INCRBY: absent counts as 0 (created without expiry). Returns KS_OK with *out, KS_WRONGTYPE
 * (GCRA or window state), KS_NOTINT, KS_OVERFLOW, KS_OOM. */
int ks_incrby(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t delta,
              int64_t *out);

/* ---- hashes (docs/COMMANDS.md, Hashes) ---- */

#define KS_H_READ 0   /* h is NULL if the key is absent */
#define KS_H_WRITE 1  /* the same, for a handler that may change or empty the hash */
#define KS_H_CREATE 2 /* a write that may add fields: an absent key gets an empty hash, stored by
                       * ks_hash_close only if it then holds fields; refused over maxmemory */

/* An open hash: the handler reads and changes *h through hv_* (which may move it), then closes.
 * A hash stored inside its entry is opened as a copy in `local` (nothing to free: a read-only
 * handler need not close). */
struct ks_href {
    struct hashval *h;
    int64_t slot; /* the entry's slot, -1 for a hash not stored yet */
    size_t bytes; /* hv_bytes when opened (0 for a copy in local) */
    struct hv_local local;
};

/* Opens the hash at key (its shard locked). Returns KS_OK, KS_WRONGTYPE (another type: nothing
 * opened), or KS_OOM (KS_H_CREATE on an absent key over maxmemory). Every KS_OK open of a write
 * mode must be closed with ks_hash_close before any other call on that shard. */
int ks_hash_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_href *r);
/* Stores the (possibly moved) hash back and accounts its memory; an emptied hash deletes the
 * key, a new one is created. changed: whether the handler wrote (WATCH sees it). */
void ks_hash_close(struct keyspace *ks, const struct ks_key *key, struct ks_href *r, int changed);

/* ---- lists (docs/COMMANDS.md, Lists) ---- */

/* Modes as the hash ones: KS_H_READ, KS_H_WRITE, KS_H_CREATE (an absent key gets an empty list,
 * stored by ks_list_close only if it then holds elements; refused over maxmemory). */

/* An open list: the handler reads and changes *l through lv_* (which may move it), then closes. */
struct ks_lref {
    struct listval *l;
    int64_t slot; /* the entry's slot, -1 for a list not stored yet */
    size_t bytes; /* lv_bytes when opened */
};

/* Opens the list at key (its shard locked), as ks_hash_open. Every KS_OK open of a write mode
 * must be closed with ks_list_close before any other call on that shard. */
int ks_list_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_lref *r);
/* Stores the (possibly moved) list back and accounts its memory; an emptied list deletes the
 * key, a new one is created. changed: whether the handler wrote (WATCH sees it). */
void ks_list_close(struct keyspace *ks, const struct ks_key *key, struct ks_lref *r, int changed);
/* HSET's fast path: if key holds a hash stored in its entry, every field of the npairs field/value
 * pairs at argv/lens exists in it and each new value's stored form is as long as the old one's,
 * the values are rewritten in place (a token bucket's read-then-write) and 1 is returned. Else
 * nothing is changed and 0 is returned: the caller takes ks_hash_open's path. */
int ks_hash_update_inline(struct keyspace *ks, const struct ks_key *key, int64_t now, int npairs,
                          char *const *argv, const size_t *lens);

/* Reads' fast path: if key holds a hash stored in its entry, copies its compact form (hashval.h)
 * into buf (HV_COMPACT_MAX bytes) and returns its length; else 0 (absent, another type, or a
 * hash on the heap: the caller takes ks_hash_open's path). */
size_t ks_hash_peek_inline(struct keyspace *ks, const struct ks_key *key, int64_t now,
                           unsigned char *buf);

/* ---- sorted sets (docs/COMMANDS.md, Sorted sets) ---- */

struct zset;

#define KS_Z_READ 0   /* a read: a window log is shown as a temporary sorted set */
#define KS_Z_WRITE 1  /* a write that only removes: a window log is converted to a sorted set */
#define KS_Z_CREATE 2 /* a write that may add: refused over maxmemory (KS_OOM) as Redis refuses
                       * its deny-oom commands; an absent key gets an empty set, stored by
                       * ks_zset_close only if it is no longer empty */

/* An open sorted set. z is NULL when the key is absent (KS_Z_READ, KS_Z_WRITE). The handler
 * may read *z and, for the write modes, change it through zs_* calls (which may move it);
 * the rest is the keyspace's. */
struct ks_zref {
    struct zset *z;
    int64_t slot;  /* the entry's slot, -1 for a set not stored yet */
    size_t bytes;  /* zs_bytes when opened */
    int mode;
    int temp;      /* a window log's temporary view: freed by close */
    int changed;   /* set by the handler when it changed the set: WATCH sees a write, as Redis
                    * signals a key only when a member was added, re-scored or removed */
};

/* Opens key as a sorted set. The size and member-length hints are for a set created here (see
 * zs_new). Returns KS_OK, KS_WRONGTYPE (a string or GCRA state), or KS_OOM. Every successful
 * open must be closed before the shard lock is released, with no other key touched between. */
int ks_zset_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 size_t size_hint, size_t member_hint, struct ks_zref *ref);
/* Stores the (possibly moved) set back, accounts its memory, and deletes the key if the set
 * became empty (Redis never keeps an empty sorted set). */
void ks_zset_close(struct keyspace *ks, const struct ks_key *key, struct ks_zref *ref);

/* Members of window logs as sorted sets: the attempt's millisecond time in decimal; the k-th
 * further attempt in the same millisecond gets "-k" appended ("1700000000123",
 * "1700000000123-1", ...). Writes the member of the attempt at ms that has `dup` attempts of the
 * same ms before it into buf (>= 48 bytes) and returns its length. */
size_t ks_swlog_member(char *buf, int64_t ms, uint32_t dup);

/* ---- generic key commands ---- */

/* 1 if deleted, 0 if absent. */
int ks_del(struct keyspace *ks, const struct ks_key *key, int64_t now);

/* ---- expiry stamps ----
 * A key's absolute expiry is one int64 "stamp" (every `at` and `expire_at` of this API, and
 * struct ks_record's expire): 0 for none; else nanoseconds since the epoch, as the clock
 * gives them, up to KS_STAMP_NS_MS_MAX ms (the year 2262); and past that, so that Redis's whole
 * range (ms up to INT64_MAX) is kept exactly, milliseconds counted up from INT64_MIN. As
 * unsigned numbers, stamps are in time order, and the far ones come after every nanosecond
 * one: compare them with ks_stamp_le only. A live key's stamp is always past now, which is
 * positive, so nothing else needs to know (a snapshot keeps the stamp as it is). */
#define KS_STAMP_NS_MS_MAX (INT64_MAX / 1000000) /* the last ms a nanosecond stamp holds */

/* The stamp of an absolute time in ms (ms > 0; a time not after now is stored as 1). */
static inline int64_t ks_stamp_from_ms(int64_t ms)
{
    if (ms <= KS_STAMP_NS_MS_MAX)
        return ms * 1000000;
    return (int64_t)((uint64_t)INT64_MIN + (uint64_t)(ms - KS_STAMP_NS_MS_MAX - 1));
}

/* The absolute time in ms of a stamp (not 0): whole ms for a nanosecond one. */
static inline int64_t ks_stamp_ms(int64_t stamp)
{
    if (stamp >= 0)
        return stamp / 1000000;
    return (int64_t)((uint64_t)stamp - (uint64_t)INT64_MIN) + KS_STAMP_NS_MS_MAX + 1;
}

/* Whether stamp a is at or before stamp b (neither 0). */
static inline int ks_stamp_le(int64_t a, int64_t b)
{
    return (uint64_t)a <= (uint64_t)b;
}

/* Remaining time to live in ns: -2 absent, -1 no expiry; INT64_MAX for an expiry past the
 * year 2262 (ks_expiry has it exactly). */
int64_t ks_ttl_ns(struct keyspace *ks, const struct ks_key *key, int64_t now);
/* The key's expiry stamp into *stamp: returns 1, or -1 (no expiry), or -2 (absent). */
int ks_expiry(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t *stamp);

#define KS_EXPIRE_NX 1
#define KS_EXPIRE_XX 2
#define KS_EXPIRE_GT 4
#define KS_EXPIRE_LT 8

/* Sets the expiry to the stamp at (not 0). An expiry at or before now deletes the key, as
 * Redis does. Flags as EXPIRE's NX/XX/GT/LT (a key without expiry counts as infinite TTL for
 * GT/LT). Returns 1 if the expiry was set (or the key deleted), 0 otherwise. */
int ks_expire(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t at, int flags);

/* Removes the expiry. 1 if there was one, 0 otherwise. */
int ks_persist(struct keyspace *ks, const struct ks_key *key, int64_t now);

/* RENAME / RENAMENX: moves src's value, type and expiry to dst (both shards locked), replacing
 * dst unless nx. Returns 1 if renamed (src == dst counts, unless nx), 0 if nx and dst exists (or
 * src == dst), KS_NOKEY if src is absent. */
int ks_rename(struct keyspace *ks, const struct ks_key *src, const struct ks_key *dst, int64_t now,
              int nx);

/* ---- WATCH (src/store/ks_internal.h "Watched keys"; keyspace.c) ----
 * Every write to a watched key (any command, limiter, deletion, expiry, FLUSHALL) bumps its
 * version. ks_watch_key (key's shard locked) registers one watcher of key and returns its
 * handle with the version now; ks_watch_changed (the handle's shard locked) says whether the key
 * was written since that version or has expired since; ks_watch_release (shard locked) drops
 * the watcher. */
struct ks_watch;
struct ks_watch *ks_watch_key(struct keyspace *ks, const struct ks_key *key, int64_t now,
                              uint64_t *version);
unsigned ks_watch_shard(const struct ks_watch *w);
int ks_watch_changed(struct keyspace *ks, const struct ks_watch *w, uint64_t version, int64_t now);
void ks_watch_release(struct keyspace *ks, struct ks_watch *w);

/* ---- whole shards (caller holds that shard's lock) ---- */

/* Frees every entry of the shard. */
void ks_flush_shard(struct keyspace *ks, unsigned shard);

/* Visits live entries of one shard for SCAN, starting at bucket cursor `cursor` (0 = start),
 * visiting at least `count` buckets or until the shard ends. Calls cb for each live key.
 * Returns the next bucket cursor, 0 when the shard is done. Uses reverse-binary cursor
 * increments, so keys present for the whole iteration are returned at least once even if the
 * table resizes between calls. */
typedef void (*ks_visit_fn)(void *ud, const char *key, size_t len, enum ks_type type);
uint64_t ks_scan_shard(struct keyspace *ks, unsigned shard, uint64_t cursor, size_t count,
                       int64_t now, ks_visit_fn cb, void *ud);

/* Active expiry: examines up to max_buckets buckets of the shard from where the last call
 * stopped, frees expired entries, and shrinks the table if it became sparse. A shard that has
 * had no key through KS_IDLE_SWEEPS calls in a row, with nothing allocated between, also gives
 * its entry slabs back here (deleting a shard's last key does not: that key may come right back,
 * and unmapping on every such delete cost a lease pool that empties on every ACQUIRE/RELEASE
 * pair 8 times a CL.THROTTLE). Returns the number of entries freed. */
#define KS_IDLE_SWEEPS 10
size_t ks_expire_cycle(struct keyspace *ks, unsigned shard, int64_t now, size_t max_buckets);

/* ---- snapshots (the snapshot layer encodes; the keyspace only hands out and takes back) ---- */

struct swlog;
struct lease_set;

/* One entry as the snapshot layer sees it. Pointers are valid during the callback only. */
struct ks_record {
    enum ks_type type;
    const char *key;
    size_t klen;
    int64_t expire;          /* absolute ns, 0 = none */
    int64_t i;               /* KS_GCRA: TAT; KS_INT: the value */
    const char *p;           /* KS_RAW: the bytes */
    size_t len;
    const struct swlog *log; /* KS_SWLOG (dump only) */
    const struct hashval *hv; /* KS_HASH (dump and restore: read only; restore copies it) */
    const struct listval *lv; /* KS_LIST (dump and restore: read only; restore copies it) */
    const int64_t *ts;       /* KS_SWLOG (restore only): timestamps, oldest first */
    uint32_t nts;
    const struct zset *zs;   /* KS_ZSET (dump and restore; restore copies it) */
    const struct lease_set *leases; /* KS_LEASE (dump and restore; restore copies it) */
};

/* Calls cb for every entry of the shard that is live at now (caller holds the shard lock).
 * Returns the number of entries visited. Same as ks_dump_begin + one unbounded ks_dump_slice. */
typedef void (*ks_dump_fn)(void *ud, const struct ks_record *r);
uint64_t ks_dump_shard(struct keyspace *ks, unsigned shard, int64_t now, ks_dump_fn cb, void *ud);

/* A dump of one shard in slices, the lock released between them (src/store/ks_dump.c "Sliced dumps").
 * ks_dump_begin starts it (shard lock held; at most one dump per shard at a time: the caller
 * serializes saves). Each ks_dump_slice (shard lock held) examines about max_slots slots (it
 * goes on to the next empty slot), calls cb for the live entries not dumped yet, adds their
 * number to *dumped, and returns 1 once the shard is done, else 0. Every key that exists for the
 * whole dump is handed out exactly once, whatever commands, expiry and resizes do between
 * slices; keys created or deleted during the dump may or may not be. */
void ks_dump_begin(struct keyspace *ks, unsigned shard);
int ks_dump_slice(struct keyspace *ks, unsigned shard, int64_t now, uint64_t max_slots,
                  ks_dump_fn cb, void *ud, uint64_t *dumped);
/* Shard lock held: the addresses (at most cap) of the entries the next ks_dump_slice of
 * max_slots will read, for the caller to prefetch after unlocking, so that the slice itself,
 * under the lock, does not wait for memory. Only for __builtin_prefetch, which never faults: the
 * shard may change once the lock is released, and an address may then point anywhere. */
size_t ks_dump_peek(struct keyspace *ks, unsigned shard, uint64_t max_slots, const void **addrs,
                    size_t cap);

/* Sizes the tables for about n keys in all, so a load does not rehash as it goes. */
void ks_reserve(struct keyspace *ks, uint64_t n);

/* Stores a record (replacing the key if present) unless it has expired at now. Caller holds the
 * key's shard lock. Returns 1 if stored, 0 if skipped as expired, -1 if the record is invalid
 * (unknown type, a window log with no or unsorted timestamps). */
int ks_restore(struct keyspace *ks, const struct ks_record *r, int64_t now);

/* Bulk loading into an empty keyspace (a snapshot at start), much faster than ks_restore for
 * millions of keys (src/store/ks_dump.c "Bulk loading"). ks_bulk_begin returns -1 if the keyspace holds
 * keys. ks_bulk_add stores a record as ks_restore does (same return values, same checks; a later
 * record of a key replaces an earlier one) but the key is not visible until ks_bulk_end, which
 * must come before any other call on the keyspace. Single-threaded: the caller holds nothing and
 * nothing else may run. */
int ks_bulk_begin(struct keyspace *ks);
int ks_bulk_add(struct keyspace *ks, const struct ks_record *r, int64_t now);
void ks_bulk_end(struct keyspace *ks);

/* Type names as TYPE and SCAN TYPE use them: "none", "string", "zset" (window logs too),
 * "hash", "list", "rlim-leas" (a lease set, named as rlimit.so's module type). */
const char *ks_type_name(enum ks_type t);

#endif
