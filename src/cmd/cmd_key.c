/* cmd_key.c - keyspace commands: EXISTS, DEL/UNLINK, TYPE, TTL, PTTL, EXPIRE, PEXPIRE, PERSIST,
 * SCAN, DBSIZE, FLUSHALL/FLUSHDB. */
#include "cmd_internal.h"
#include "cmd_notify.h"
#include "rlimitd/alloc.h"
#include "rlimitd/clock.h"

#include <stdlib.h>
#include <string.h>

#include "rlimitd/util.h"


/* EXISTS only looks at its keys (Redis's LOOKUP_NOTOUCH); TOUCH counts as their access for an
 * LRU/LFU policy. Both answer how many exist. */
static void exists_generic(struct cmd_ctx *x, int touch)
{
    int64_t n = 0;
    ks_notouch(!touch);
    for (int i = 0; i < x->nkeys; i++) {
        if (ks_get(x->env->ks, &x->keys[i], x->now, NULL) != KS_NONE)
            n++;
        else
            notify_keymiss(&x->keys[i]);
    }
    ks_notouch(0);
    reply_int(x->out, n);
}

static void cmd_exists(struct cmd_ctx *x)
{
    exists_generic(x, 0);
}

static void cmd_touch(struct cmd_ctx *x)
{
    exists_generic(x, 1);
}

static void cmd_del(struct cmd_ctx *x)
{
    int64_t n = 0;
    for (int i = 0; i < x->nkeys; i++)
        if (ks_del(x->env->ks, &x->keys[i], x->now) == 1) {
            notify_key(NOTIFY_GENERIC, "del", &x->keys[i]);
            n++;
        }
    reply_int(x->out, n);
}

static void cmd_type(struct cmd_ctx *x)
{
    ks_notouch(1); /* TYPE only looks at the key, as Redis's */
    enum ks_type t = ks_get(x->env->ks, &x->keys[0], x->now, NULL);
    ks_notouch(0);
    if (t == KS_NONE)
        notify_keymiss(&x->keys[0]);
    reply_simple(x->out, ks_type_name(t));
}

/* The key's expiry stamp (keyspace.h) into *stamp: 1, or -1 (none), or -2 (absent: a miss).
 * TTL, PTTL, EXPIRETIME and PEXPIRETIME only look at the key, as Redis's. */
static int key_expiry(struct cmd_ctx *x, int64_t *stamp)
{
    ks_notouch(1);
    int rc = ks_expiry(x->env->ks, &x->keys[0], x->now, stamp);
    ks_notouch(0);
    if (rc == -2)
        notify_keymiss(&x->keys[0]);
    return rc;
}

/* Remaining ms, rounded up so a live key never reports 0 before it is gone; -2 / -1 as is. An
 * expiry past the year 2262 counts from the command's ms, as Redis's expire - mstime(). */
static int64_t pttl_ms(struct cmd_ctx *x)
{
    int64_t at;
    int rc = key_expiry(x, &at);
    if (rc < 0)
        return rc;
    if (at < 0)
        return ks_stamp_ms(at) - x->now / CLOCK_NS_PER_MS;
    int64_t ns = at - x->now;
    return (ns + CLOCK_NS_PER_MS - 1) / CLOCK_NS_PER_MS;
}

/* Redis's rounding of ms (>= 0) to the nearest second, (ms + 500) / 1000, without overflow for
 * an expiry within 500 ms of INT64_MAX (Redis answers 9223372036854776 there too). */
static int64_t round_seconds(int64_t ms)
{
    return (int64_t)(((uint64_t)ms + 500) / 1000);
}

static void cmd_pttl(struct cmd_ctx *x)
{
    reply_int(x->out, pttl_ms(x));
}

static void cmd_ttl(struct cmd_ctx *x)
{
    int64_t ms = pttl_ms(x);
    /* Redis rounds TTL to the nearest second. */
    reply_int(x->out, ms < 0 ? ms : round_seconds(ms));
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT as Redis 7.0's expireGenericCommand: options first
 * ("Unsupported option", incompatible pairs), then the number, then the overflow checks in ms
 * (seconds past LLONG_MAX / 1000, or the sum with the base time). Relative times count from the
 * command's clock read truncated to ms, as Redis's mstime(). Every ms up to LLONG_MAX is kept
 * exactly (expiry stamps, keyspace.h); a time at or before the epoch is already past, as any
 * before now: the key is deleted. */
static void expire_generic(struct cmd_ctx *x, int64_t unit_ms, int relative, const char *name)
{
    int flags = 0;
    for (int i = 3; i < x->argc; i++) {
        if (arg_is(x, i, "NX"))
            flags |= KS_EXPIRE_NX;
        else if (arg_is(x, i, "XX"))
            flags |= KS_EXPIRE_XX;
        else if (arg_is(x, i, "GT"))
            flags |= KS_EXPIRE_GT;
        else if (arg_is(x, i, "LT"))
            flags |= KS_EXPIRE_LT;
        else {
            reply_errorf(x->out, "ERR Unsupported option %.*s",
                         (int)strnlen(x->argv[i], x->lens[i]), x->argv[i]);
            return;
        }
    }
    if ((flags & KS_EXPIRE_NX) && (flags & (KS_EXPIRE_XX | KS_EXPIRE_GT | KS_EXPIRE_LT))) {
        reply_error(x->out, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if ((flags & KS_EXPIRE_GT) && (flags & KS_EXPIRE_LT)) {
        reply_error(x->out, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    int64_t v;
    if (arg_i64(x, 2, &v))
        return;
    int64_t base = relative ? x->now / CLOCK_NS_PER_MS : 0;
    if ((unit_ms == 1000 && (v > INT64_MAX / 1000 || v < INT64_MIN / 1000)) ||
        v * unit_ms > INT64_MAX - base) {
        reply_errorf(x->out, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t ms = v * unit_ms + base;
    int64_t at = ms > 0 ? ks_stamp_from_ms(ms) : 1; /* 1: the epoch's first ns, long past */
    int rc = ks_expire(x->env->ks, &x->keys[0], x->now, at, flags);
    if (rc == 1) /* a time already past deleted the key */
        notify_key(NOTIFY_GENERIC, ks_stamp_le(at, x->now) ? "del" : "expire", &x->keys[0]);
    reply_int(x->out, rc);
}

static void cmd_expire(struct cmd_ctx *x)
{
    expire_generic(x, 1000, 1, "expire");
}

static void cmd_pexpire(struct cmd_ctx *x)
{
    expire_generic(x, 1, 1, "pexpire");
}

static void cmd_expireat(struct cmd_ctx *x)
{
    expire_generic(x, 1000, 0, "expireat");
}

static void cmd_pexpireat(struct cmd_ctx *x)
{
    expire_generic(x, 1, 0, "pexpireat");
}

/* The absolute expiry in ms, -1 none, -2 absent. */
static int64_t expiretime_ms(struct cmd_ctx *x)
{
    int64_t at;
    int rc = key_expiry(x, &at);
    return rc < 0 ? rc : ks_stamp_ms(at);
}

static void cmd_expiretime(struct cmd_ctx *x)
{
    int64_t ms = expiretime_ms(x);
    reply_int(x->out, ms < 0 ? ms : round_seconds(ms)); /* Redis rounds to the nearest second */
}

static void cmd_pexpiretime(struct cmd_ctx *x)
{
    reply_int(x->out, expiretime_ms(x));
}

static void rename_generic(struct cmd_ctx *x, int nx)
{
    int rc = ks_rename(x->env->ks, &x->keys[0], &x->keys[1], x->now, nx);
    if (rc == 1 && !(x->keys[0].len == x->keys[1].len &&
                     memcmp(x->keys[0].p, x->keys[1].p, x->keys[0].len) == 0)) {
        notify_key(NOTIFY_GENERIC, "rename_from", &x->keys[0]);
        notify_key(NOTIFY_GENERIC, "rename_to", &x->keys[1]);
    }
    if (rc == KS_NOKEY)
        reply_error(x->out, "ERR no such key");
    else if (nx)
        reply_int(x->out, rc);
    else
        reply_ok(x->out);
}

static void cmd_rename(struct cmd_ctx *x)
{
    rename_generic(x, 0);
}

static void cmd_renamenx(struct cmd_ctx *x)
{
    rename_generic(x, 1);
}

static void cmd_persist(struct cmd_ctx *x)
{
    int rc = ks_persist(x->env->ks, &x->keys[0], x->now);
    if (rc == 1)
        notify_key(NOTIFY_GENERIC, "persist", &x->keys[0]);
    reply_int(x->out, rc);
}

static void cmd_dbsize(struct cmd_ctx *x)
{
    reply_int(x->out, (int64_t)ks_key_count(x->env->ks));
}

static void cmd_flushall(struct cmd_ctx *x)
{
    if (x->argc > 2 || (x->argc == 2 && !arg_is(x, 1, "ASYNC") && !arg_is(x, 1, "SYNC"))) {
        reply_syntax_error(x->out);
        return;
    }
    unsigned n = ks_nshards(x->env->ks);
    for (unsigned i = 0; i < n; i++) {
        ctx_lock_shard(x, i);
        ks_flush_shard(x->env->ks, i);
        ctx_unlock_shard(x, i);
    }
    reply_ok(x->out);
}

/* ---- SCAN ---- */

struct scan_state {
    const char *pattern; /* prepared (util_glob_prepare), NULL = any key */
    size_t plen;
    char *prepared;      /* owns pattern */
    int never;           /* the pattern matches nothing (Redis's nesting limit) */
    const char *type;    /* NULL = any */
    struct rbuf keys; /* the matching keys, each as a RESP bulk string */
    int64_t n;
};

static void scan_visit(void *ud, const char *key, size_t len, enum ks_type type)
{
    struct scan_state *st = ud;
    if (st->never || (st->type != NULL && strcmp(st->type, ks_type_name(type)) != 0))
        return;
    if (st->pattern != NULL && !util_glob_match_prepared(st->pattern, st->plen, key, len, 0))
        return;
    reply_bulk(&st->keys, key, len);
    st->n++;
}

/* The MATCH pattern, prepared once for every key it is matched against; "*" skips the matcher. */
static void scan_pattern(struct scan_state *st, const char *pat, size_t plen)
{
    free(st->prepared);
    st->prepared = NULL;
    st->pattern = NULL;
    st->never = 0;
    if (plen == 1 && pat[0] == '*')
        return;
    st->prepared = xmalloc(plen + 1);
    int64_t n = util_glob_prepare(pat, plen, st->prepared);
    st->never = n < 0;
    st->pattern = st->prepared;
    st->plen = n < 0 ? 0 : (size_t)n;
}

/* KEYS: every shard in turn, each under its own lock for one whole pass over its table (so no
 * key is seen twice and none missed), the lock released before the next shard. Another client
 * waits at most one shard's pass (keys / 256 entries), never the whole keyspace. */
static void cmd_keys(struct cmd_ctx *x)
{
    struct scan_state st = {0};
    scan_pattern(&st, x->argv[1], x->lens[1]);
    rbuf_init(&st.keys);
    unsigned n = ks_nshards(x->env->ks);
    for (unsigned i = 0; i < n; i++) {
        ctx_lock_shard(x, i);
        ks_scan_shard(x->env->ks, i, 0, SIZE_MAX, x->now, scan_visit, &st);
        ctx_unlock_shard(x, i);
    }
    reply_array(x->out, st.n);
    rbuf_append(x->out, st.keys.p, st.keys.len);
    rbuf_free(&st.keys);
    free(st.prepared);
}

static int parse_cursor(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
            return -1;
    }
    *out = v;
    return 0;
}

/* The cursor packs the shard in its low bits and that shard's reverse-binary bucket cursor
 * above them; 0 starts and ends, as in Redis. */
static void cmd_scan(struct cmd_ctx *x)
{
    uint64_t cursor;
    if (parse_cursor(x->argv[1], x->lens[1], &cursor) != 0) {
        reply_error(x->out, "ERR invalid cursor");
        return;
    }
    struct scan_state st = {0};
    int64_t count = 10;
    for (int i = 2; i < x->argc; i += 2) {
        if (i + 1 >= x->argc) {
            reply_syntax_error(x->out);
            goto out;
        }
        if (arg_is(x, i, "MATCH")) {
            scan_pattern(&st, x->argv[i + 1], x->lens[i + 1]);
        } else if (arg_is(x, i, "COUNT")) {
            if (arg_i64(x, i + 1, &count))
                goto out;
            if (count < 1) {
                reply_syntax_error(x->out);
                goto out;
            }
        } else if (arg_is(x, i, "TYPE")) {
            st.type = x->argv[i + 1];
        } else {
            reply_syntax_error(x->out);
            goto out;
        }
    }
    struct keyspace *ks = x->env->ks;
    unsigned nshards = ks_nshards(ks);
    unsigned bits = (unsigned)__builtin_ctz(nshards);
    unsigned shard = (unsigned)(cursor & (nshards - 1));
    uint64_t bucket = cursor >> bits;
    rbuf_init(&st.keys);
    /* COUNT is the amount of work, as in Redis: roughly COUNT keys, but an empty stretch of the
     * keyspace stops after 10 x COUNT buckets so one call stays short. */
    size_t step = count > 1024 ? 1024 : (size_t)count;
    int64_t max_work = count > 100000 ? 1000000 : count * 10;
    int64_t work = 0;
    uint64_t next;
    for (;;) {
        ctx_lock_shard(x, shard);
        bucket = ks_scan_shard(ks, shard, bucket, step, x->now, scan_visit, &st);
        ctx_unlock_shard(x, shard);
        work += (int64_t)step;
        if (bucket == 0 && ++shard == nshards) {
            next = 0;
            break;
        }
        next = (bucket << bits) | shard;
        if (st.n >= count || work >= max_work)
            break;
    }
    reply_array(x->out, 2);
    reply_bulk_i64(x->out, (int64_t)next);
    reply_array(x->out, st.n);
    rbuf_append(x->out, st.keys.p, st.keys.len);
    rbuf_free(&st.keys);
out:
    free(st.prepared);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_key_table[] = {
    {"exists", -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "keyspace read fast", cmd_exists,
     {.summary = "Counts how many of the given keys exist", .since = "1.0.0", .group = "generic",
      .complexity = "O(N) where N is the number of keys", .args = "*key:key", .keyflags = "RO",
      .tips = "request_policy:multi_shard response_policy:agg_sum"}},
    {"del", -2, CMD_WRITE, 1, -1, 1, "keyspace write slow", cmd_del,
     {.summary = "Deletes keys", .since = "1.0.0", .group = "generic",
      .complexity = "O(N) where N is the number of keys", .args = "*key:key",
      .keyflags = "RM delete", .tips = "request_policy:multi_shard response_policy:agg_sum"}},
    {"unlink", -2, CMD_WRITE | CMD_FAST, 1, -1, 1, "keyspace write fast", cmd_del,
     {.summary = "Deletes keys", .since = "4.0.0", .group = "generic",
      .complexity = "O(N) where N is the number of keys", .args = "*key:key",
      .keyflags = "RM delete", .tips = "request_policy:multi_shard response_policy:agg_sum"}},
    {"type", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "keyspace read fast", cmd_type,
     {.summary = "Returns the type of the value stored at a key", .since = "1.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key", .keyflags = "RO"}},
    {"ttl", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "keyspace read fast", cmd_ttl,
     {.summary = "Returns the time to live of a key in seconds", .since = "1.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key", .keyflags = "RO access",
      .tips = "nondeterministic_output"}},
    {"pttl", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "keyspace read fast", cmd_pttl,
     {.summary = "Returns the time to live of a key in milliseconds", .since = "2.6.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key", .keyflags = "RO access",
      .tips = "nondeterministic_output"}},
    {"expire", -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "keyspace write fast", cmd_expire,
     {.summary = "Sets the time to live of a key in seconds", .since = "1.0.0", .group = "generic",
      .complexity = "O(1)", .args = "key:key seconds:integer ?condition(nx=NX xx=XX gt=GT lt=LT)",
      .keyflags = "RW update"}},
    {"pexpire", -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "keyspace write fast", cmd_pexpire,
     {.summary = "Sets the time to live of a key in milliseconds", .since = "2.6.0",
      .group = "generic", .complexity = "O(1)",
      .args = "key:key milliseconds:integer ?condition(nx=NX xx=XX gt=GT lt=LT)",
      .keyflags = "RW update"}},
    {"expireat", -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "keyspace write fast", cmd_expireat,
     {.summary = "Sets the expiry of a key to a Unix time in seconds", .since = "1.2.0",
      .group = "generic", .complexity = "O(1)",
      .args = "key:key unix-time-seconds:unix-time ?condition(nx=NX xx=XX gt=GT lt=LT)",
      .keyflags = "RW update"}},
    {"pexpireat", -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "keyspace write fast", cmd_pexpireat,
     {.summary = "Sets the expiry of a key to a Unix time in milliseconds", .since = "2.6.0",
      .group = "generic", .complexity = "O(1)",
      .args = "key:key unix-time-milliseconds:unix-time ?condition(nx=NX xx=XX gt=GT lt=LT)",
      .keyflags = "RW update"}},
    {"expiretime", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "keyspace read fast", cmd_expiretime,
     {.summary = "Returns the expiry of a key as a Unix time in seconds", .since = "7.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key", .keyflags = "RO access"}},
    {"pexpiretime", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "keyspace read fast", cmd_pexpiretime,
     {.summary = "Returns the expiry of a key as a Unix time in milliseconds", .since = "7.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key", .keyflags = "RO access"}},
    {"rename", 3, CMD_WRITE, 1, 2, 1, "keyspace write slow", cmd_rename,
     {.summary = "Renames a key, replacing the destination if it exists", .since = "1.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key newkey:key",
      .keyflags = "RW access delete|OW update", .notes = NULL}},
    {"renamenx", 3, CMD_WRITE | CMD_FAST, 1, 2, 1, "keyspace write fast", cmd_renamenx,
     {.summary = "Renames a key only if the new name does not exist", .since = "1.0.0",
      .group = "generic", .complexity = "O(1)", .args = "key:key newkey:key",
      .keyflags = "RW access delete|OW insert"}},
    {"touch", -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "keyspace read fast", cmd_touch,
     {.summary = "Alters the last access time of a key(s). "
                 "Returns the number of existing keys specified.",
      .since = "3.2.1", .group = "generic", .complexity = "O(N) where N is the number of keys",
      .args = "*key:key", .keyflags = "RO",
      .tips = "request_policy:multi_shard response_policy:agg_sum"}},
    {"keys", 2, CMD_READONLY | CMD_ALLSHARDS, 0, 0, 0, "keyspace read slow dangerous", cmd_keys,
     {.summary = "Returns the keys matching a glob pattern", .since = "1.0.0",
      .group = "generic", .complexity = "O(N) with N the number of keys",
      .args = "pattern:pattern",
      .tips = "request_policy:all_shards nondeterministic_output_order"}},
    {"persist", 2, CMD_WRITE | CMD_FAST, 1, 1, 1, "keyspace write fast", cmd_persist,
     {.summary = "Removes the expiry of a key", .since = "2.2.0", .group = "generic",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RW update"}},
    {"scan", -2, CMD_READONLY | CMD_ALLSHARDS, 0, 0, 0, "keyspace read slow", cmd_scan,
     {.summary = "Iterates over the key space", .since = "2.8.0", .group = "generic",
      .complexity = "O(1) for every call. O(N) for a complete iteration",
      .args = "cursor:integer ?pattern:pattern=MATCH ?count:integer=COUNT ?type:string=TYPE",
      .tips = "nondeterministic_output request_policy:special"}},
    {"dbsize", 1, CMD_READONLY | CMD_FAST | CMD_ALLSHARDS, 0, 0, 0,
     "keyspace read fast", cmd_dbsize,
     {.summary = "Returns the number of keys", .since = "1.0.0", .group = "server",
      .complexity = "O(1)", .tips = "request_policy:all_shards response_policy:agg_sum"}},
    {"flushall", -1, CMD_WRITE | CMD_ALLSHARDS, 0, 0, 0,
     "keyspace write slow dangerous", cmd_flushall,
     {.summary = "Removes every key", .since = "1.0.0", .group = "server",
      .complexity = "O(N) where N is the number of keys", .args = "?async(async=ASYNC sync=SYNC)",
      .tips = "request_policy:all_shards response_policy:all_succeeded"}},
    {"flushdb", -1, CMD_WRITE | CMD_ALLSHARDS, 0, 0, 0,
     "keyspace write slow dangerous", cmd_flushall,
     {.summary = "Removes every key (rlimitd has one database)", .since = "1.0.0",
      .group = "server", .complexity = "O(N) where N is the number of keys",
      .args = "?async(async=ASYNC sync=SYNC)",
      .tips = "request_policy:all_shards response_policy:all_succeeded"}},
};
const int cmd_key_count = (int)(sizeof(cmd_key_table) / sizeof(cmd_key_table[0]));
