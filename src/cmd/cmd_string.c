/* cmd_string.c - string commands as Redis 7.0 answers them: GET, SET (every option), SETEX,
 * PSETEX, SETNX, GETSET, GETDEL, GETEX, MGET, MSET, MSETNX, STRLEN, APPEND, INCR, INCRBY, DECR,
 * DECRBY, INCRBYFLOAT. KS_INT and KS_GCRA read as the decimal text GET shows. */
#include "cmd_internal.h"
#include "cmd_notify.h"
#include "rlimitd/clock.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/util.h"


/* A string value's bytes: KS_RAW as stored, KS_INT and KS_GCRA (its TAT in ns, as GET shows it,
 * gcra.h) formatted into buf (at least GCRA_TAT_TEXT_MAX bytes). Returns 0, or KS_WRONGTYPE for
 * the other types. */
static int string_bytes(const struct ks_value *v, char *buf, const char **p, size_t *len)
{
    switch (v->type) {
    case KS_RAW:
        *p = v->p;
        *len = v->len;
        return 0;
    case KS_INT:
        *len = util_fmt_i64(buf, v->i);
        *p = buf;
        return 0;
    case KS_GCRA:
        *len = gcra_tat_format(buf, v->i);
        *p = buf;
        return 0;
    default:
        return KS_WRONGTYPE;
    }
}

/* Replies the string at key as a bulk (nil if absent) and returns 0; WRONGTYPE and -1 for the
 * other types. What GET, GETDEL, GETEX, GETSET and SET ... GET answer. */
static int reply_string_at(struct cmd_ctx *x, const struct ks_key *key)
{
    struct ks_value v;
    if (ks_get(x->env->ks, key, x->now, &v) == KS_NONE) {
        notify_keymiss(key);
        reply_nil(x->out);
        return 0;
    }
    if (v.type == KS_RAW) { /* string_bytes's first case, without its call: GET's common one */
        reply_bulk(x->out, v.p, v.len);
        return 0;
    }
    char buf[24];
    const char *p;
    size_t len;
    if (string_bytes(&v, buf, &p, &len) != 0) {
        reply_ks_error(x->out, KS_WRONGTYPE);
        return -1;
    }
    reply_bulk(x->out, p, len);
    return 0;
}

static void cmd_get(struct cmd_ctx *x)
{
    reply_string_at(x, &x->keys[0]);
}

/* SET's and GETEX's options, parsed as Redis 7.0 does: one pass that only checks the words and
 * their combinations (syntax error), the expiry's number read afterwards. */
#define OPT_NX 0x1
#define OPT_XX 0x2
#define OPT_GET 0x4
#define OPT_KEEPTTL 0x8
#define OPT_PERSIST 0x10
#define OPT_EX 0x20
#define OPT_PX 0x40
#define OPT_EXAT 0x80
#define OPT_PXAT 0x100
#define OPT_EXPIRY (OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT)

struct set_opts {
    int flags;
    int expire_arg; /* argv index of the expiry's number, 0 for none */
};

#define WORD_IS(w) (c == (w)[0] && arg_is(x, i, (w))) /* w upper case */
/* is_set: SET's words (NX XX GET KEEPTTL), else GETEX's (PERSIST). A repeated expiry word of
 * the same kind is accepted, the last one counting, as in Redis. Returns 0, or -1 after the
 * syntax error reply. */
static int parse_set_opts(struct cmd_ctx *x, int from, int is_set, struct set_opts *o)
{
    static const struct {
        const char *word;
        int flag;
    } expiry[] = {{"EX", OPT_EX}, {"PX", OPT_PX}, {"EXAT", OPT_EXAT}, {"PXAT", OPT_PXAT}};
    o->flags = 0;
    o->expire_arg = 0;
    for (int i = from; i < x->argc; i++) {
        int f = o->flags, e = 0;
        /* Only the words with the argument's first letter are compared (WORD_IS). */
        char c = x->lens[i] > 0 ? (char)(x->argv[i][0] & ~0x20) : '\0';
        for (size_t k = 0; k < sizeof(expiry) / sizeof(expiry[0]); k++)
            if (WORD_IS(expiry[k].word))
                e = expiry[k].flag;
        if (is_set && WORD_IS("NX") && !(f & OPT_XX)) {
            o->flags |= OPT_NX;
        } else if (is_set && WORD_IS("XX") && !(f & OPT_NX)) {
            o->flags |= OPT_XX;
        } else if (is_set && WORD_IS("GET")) {
            o->flags |= OPT_GET;
        } else if (is_set && WORD_IS("KEEPTTL") && !(f & (OPT_PERSIST | OPT_EXPIRY))) {
            o->flags |= OPT_KEEPTTL;
        } else if (!is_set && WORD_IS("PERSIST") && !(f & (OPT_EXPIRY | OPT_KEEPTTL))) {
            o->flags |= OPT_PERSIST;
        } else if (e != 0 && !(f & (OPT_KEEPTTL | OPT_PERSIST | (OPT_EXPIRY & ~e))) &&
                   i + 1 < x->argc) {
            o->flags |= e;
            o->expire_arg = ++i;
        } else {
            reply_syntax_error(x->out);
            return -1;
        }
    }
    return 0;
}
#undef WORD_IS

/* The expiry's number to an expiry stamp (keyspace.h), as Redis's getExpireMillisecondsOrReply:
 * not positive, or seconds past LLONG_MAX / 1000, is "invalid expire time in '<cmd>' command".
 * Redis counts in ms up to LLONG_MAX, and so do stamps. Returns 0, or -1 after the error
 * reply. */
static int expire_stamp(struct cmd_ctx *x, int i, int flags, const char *cmd, int64_t *at)
{
    int64_t v;
    if (arg_i64(x, i, &v))
        return -1;
    int seconds = (flags & (OPT_EX | OPT_EXAT)) != 0;
    if (v <= 0 || (seconds && v > INT64_MAX / 1000)) {
        reply_errorf(x->out, "ERR invalid expire time in '%s' command", cmd);
        return -1;
    }
    int64_t ms = seconds ? v * 1000 : v;
    if (flags & (OPT_EX | OPT_PX)) {
        int64_t now_ms = x->now / CLOCK_NS_PER_MS;
        if (__builtin_add_overflow(ms, now_ms, &ms)) {
            reply_errorf(x->out, "ERR invalid expire time in '%s' command", cmd);
            return -1;
        }
    }
    *at = ks_stamp_from_ms(ms);
    return 0;
}

/* The write shared by SET, SETEX, PSETEX, SETNX, GETSET: flags are OPT_*; at is an expiry
 * stamp, 0 for none. Returns 1 set, 0 not set (NX/XX), or a KS_* error. */
static int set_value(struct cmd_ctx *x, const struct ks_key *key, const char *val, size_t len,
                     int flags, int64_t at)
{
    struct keyspace *ks = x->env->ks;
    /* An absolute time already past: Redis stores and the key is gone at once; so it is here,
     * by deleting whatever was there when the write would have happened. */
    if (at != 0 && ks_stamp_le(at, x->now)) {
        int exists = ks_get(ks, key, x->now, NULL) != KS_NONE;
        if (((flags & OPT_NX) && exists) || ((flags & OPT_XX) && !exists))
            return 0;
        ks_del(ks, key, x->now);
        /* Redis stores it and its expiry (set, expire), and the key expires at the next look. */
        notify_key(NOTIFY_STRING, "set", key);
        notify_key(NOTIFY_GENERIC, "expire", key);
        notify_key(NOTIFY_EXPIRED, "expired", key);
        return 1;
    }
    int kf = ((flags & OPT_NX) ? KS_SET_NX : 0) | ((flags & OPT_XX) ? KS_SET_XX : 0) |
             ((flags & OPT_KEEPTTL) ? KS_SET_KEEPTTL : 0);
    int rc = ks_set(ks, key, x->now, val, len, at, kf);
    if (rc == 1) {
        notify_key(NOTIFY_STRING, "set", key);
        if (at != 0)
            notify_key(NOTIFY_GENERIC, "expire", key);
    }
    return rc;
}

static void cmd_set(struct cmd_ctx *x)
{
    struct set_opts o;
    int64_t at = 0;
    if (parse_set_opts(x, 3, 1, &o) != 0)
        return;
    if (o.expire_arg && expire_stamp(x, o.expire_arg, o.flags, "set", &at) != 0)
        return;
    if ((o.flags & OPT_GET) && reply_string_at(x, &x->keys[0]) != 0)
        return;
    int rc = set_value(x, &x->keys[0], x->argv[2], x->lens[2], o.flags, at);
    if (rc < 0) {
        if (!(o.flags & OPT_GET)) /* with GET the old value is the reply (OOM only on a new key,
                                   * whose old value was nil) */
            reply_ks_error(x->out, rc);
    } else if (!(o.flags & OPT_GET)) {
        if (rc == 0)
            reply_nil(x->out);
        else
            reply_ok(x->out);
    }
}

static void setex_generic(struct cmd_ctx *x, int flag, const char *cmd)
{
    int64_t at;
    if (expire_stamp(x, 2, flag, cmd, &at) != 0)
        return;
    int rc = set_value(x, &x->keys[0], x->argv[3], x->lens[3], 0, at);
    if (rc < 0)
        reply_ks_error(x->out, rc);
    else
        reply_ok(x->out);
}

static void cmd_setex(struct cmd_ctx *x)
{
    setex_generic(x, OPT_EX, "setex");
}

static void cmd_psetex(struct cmd_ctx *x)
{
    setex_generic(x, OPT_PX, "psetex");
}

static void cmd_setnx(struct cmd_ctx *x)
{
    int rc = set_value(x, &x->keys[0], x->argv[2], x->lens[2], OPT_NX, 0);
    if (rc < 0)
        reply_ks_error(x->out, rc);
    else
        reply_int(x->out, rc);
}

static void cmd_getset(struct cmd_ctx *x)
{
    if (reply_string_at(x, &x->keys[0]) != 0)
        return;
    /* The reply is out; an OOM can only refuse a new key, whose old value (nil) was replied. */
    set_value(x, &x->keys[0], x->argv[2], x->lens[2], 0, 0);
}

static void cmd_getdel(struct cmd_ctx *x)
{
    enum ks_type t = ks_get(x->env->ks, &x->keys[0], x->now, NULL);
    if (reply_string_at(x, &x->keys[0]) == 0 && t != KS_NONE &&
        ks_del(x->env->ks, &x->keys[0], x->now) == 1)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
}

static void cmd_getex(struct cmd_ctx *x)
{
    struct set_opts o;
    if (parse_set_opts(x, 2, 0, &o) != 0)
        return;
    struct ks_value v;
    struct keyspace *ks = x->env->ks;
    if (ks_get(ks, &x->keys[0], x->now, &v) == KS_NONE) {
        notify_keymiss(&x->keys[0]);
        reply_nil(x->out);
        return;
    }
    if (v.type != KS_RAW && v.type != KS_INT && v.type != KS_GCRA) {
        reply_ks_error(x->out, KS_WRONGTYPE);
        return;
    }
    int64_t at = 0;
    if (o.expire_arg && expire_stamp(x, o.expire_arg, o.flags, "getex", &at) != 0)
        return;
    reply_string_at(x, &x->keys[0]);
    if (o.expire_arg) {
        ks_expire(ks, &x->keys[0], x->now, at, 0); /* a time already past deletes the key */
        notify_key(NOTIFY_GENERIC, ks_stamp_le(at, x->now) ? "del" : "expire", &x->keys[0]);
    } else if ((o.flags & OPT_PERSIST) && ks_persist(ks, &x->keys[0], x->now) == 1) {
        notify_key(NOTIFY_GENERIC, "persist", &x->keys[0]);
    }
}

static void cmd_mget(struct cmd_ctx *x)
{
    reply_array(x->out, x->nkeys);
    for (int i = 0; i < x->nkeys; i++) {
        struct ks_value v;
        char buf[24];
        const char *p;
        size_t len;
        enum ks_type t = ks_get(x->env->ks, &x->keys[i], x->now, &v);
        if (t == KS_NONE)
            notify_keymiss(&x->keys[i]);
        if (t == KS_NONE || string_bytes(&v, buf, &p, &len) != 0)
            reply_nil(x->out); /* MGET answers nil for a key of another type, as Redis */
        else
            reply_bulk(x->out, p, len);
    }
}

/* MSET and MSETNX: every key's shard is locked (key positions 1, -1, 2), and memory is checked
 * before the first write, so the command is all or nothing, and no reader sees part of it. */
static int mset_generic(struct cmd_ctx *x, int nx)
{
    if (x->argc % 2 == 0) {
        reply_errorf(x->out, "ERR wrong number of arguments for '%s' command",
                     nx ? "msetnx" : "mset");
        return -1;
    }
    struct keyspace *ks = x->env->ks;
    int creates = 0;
    for (int i = 0; i < x->nkeys; i++) {
        if (ks_get(ks, &x->keys[i], x->now, NULL) != KS_NONE) {
            if (nx) {
                reply_int(x->out, 0);
                return -1;
            }
        } else {
            creates = 1;
        }
    }
    if (creates && ks_over_maxmemory(ks)) {
        reply_ks_error(x->out, KS_OOM);
        return -1;
    }
    for (int i = 0; i < x->nkeys; i++) {
        int a = 2 + 2 * i;
        /* Checked above: an OOM cannot happen between here and the last key. */
        ks_set(ks, &x->keys[i], x->now, x->argv[a], x->lens[a], 0, 0);
        notify_key(NOTIFY_STRING, "set", &x->keys[i]);
    }
    return 0;
}

static void cmd_mset(struct cmd_ctx *x)
{
    if (mset_generic(x, 0) == 0)
        reply_ok(x->out);
}

static void cmd_msetnx(struct cmd_ctx *x)
{
    if (mset_generic(x, 1) == 0)
        reply_int(x->out, 1);
}

static void cmd_strlen(struct cmd_ctx *x)
{
    struct ks_value v;
    char buf[24];
    const char *p;
    size_t len;
    if (ks_get(x->env->ks, &x->keys[0], x->now, &v) == KS_NONE) {
        notify_keymiss(&x->keys[0]);
        reply_int(x->out, 0);
    } else if (string_bytes(&v, buf, &p, &len) != 0)
        reply_ks_error(x->out, KS_WRONGTYPE);
    else
        reply_int(x->out, (int64_t)len);
}

/* Redis's proto-max-bulk-len default: the largest string APPEND may build. */
#define STRING_MAX_LEN (512ull * 1024 * 1024)

static void cmd_append(struct cmd_ctx *x)
{
    struct ks_value v;
    struct keyspace *ks = x->env->ks;
    if (ks_get(ks, &x->keys[0], x->now, &v) == KS_NONE) {
        int rc = ks_set(ks, &x->keys[0], x->now, x->argv[2], x->lens[2], 0, 0);
        if (rc < 0) {
            reply_ks_error(x->out, rc);
        } else {
            notify_key(NOTIFY_STRING, "append", &x->keys[0]);
            reply_int(x->out, (int64_t)x->lens[2]);
        }
        return;
    }
    char buf[24];
    const char *p;
    size_t len;
    if (string_bytes(&v, buf, &p, &len) != 0) {
        reply_ks_error(x->out, KS_WRONGTYPE);
        return;
    }
    if (len + x->lens[2] > STRING_MAX_LEN) {
        reply_error(x->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return;
    }
    size_t newlen = len + x->lens[2];
    if (v.type == KS_GCRA) {
        /* A limiter's state read as its TAT text becomes that string (the expiry kept). */
        char *nv = xmalloc(newlen);
        memcpy(nv, p, len);
        memcpy(nv + len, x->argv[2], x->lens[2]);
        ks_set(ks, &x->keys[0], x->now, nv, newlen, 0, KS_SET_KEEPTTL);
        free(nv);
    } else {
        ks_append(ks, &x->keys[0], x->now, x->argv[2], x->lens[2], &newlen); /* seen above */
    }
    notify_key(NOTIFY_STRING, "append", &x->keys[0]);
    reply_int(x->out, (int64_t)newlen);
}

static void cmd_incrbyfloat(struct cmd_ctx *x)
{
    struct ks_value v;
    struct keyspace *ks = x->env->ks;
    long double cur = 0, incr;
    if (ks_get(ks, &x->keys[0], x->now, &v) != KS_NONE) {
        char buf[24];
        const char *p;
        size_t len;
        if (string_bytes(&v, buf, &p, &len) != 0) {
            reply_ks_error(x->out, KS_WRONGTYPE);
            return;
        }
        if (v.type == KS_RAW ? util_parse_ld(p, len, &cur) != 0 : (cur = (long double)v.i, 0)) {
            reply_error(x->out, "ERR value is not a valid float");
            return;
        }
    }
    if (util_parse_ld(x->argv[2], x->lens[2], &incr) != 0) {
        reply_error(x->out, "ERR value is not a valid float");
        return;
    }
    cur += incr;
    if (isnan(cur) || isinf(cur)) {
        reply_error(x->out, "ERR increment would produce NaN or Infinity");
        return;
    }
    char *out = xmalloc(UTIL_LD_MAX_CHARS);
    size_t len = util_fmt_ld_human(out, cur);
    int rc = ks_set(ks, &x->keys[0], x->now, out, len, 0, KS_SET_KEEPTTL);
    if (rc < 0) {
        reply_ks_error(x->out, rc);
    } else {
        notify_key(NOTIFY_STRING, "incrbyfloat", &x->keys[0]);
        reply_bulk(x->out, out, len);
    }
    free(out);
}

static void incr_by(struct cmd_ctx *x, int64_t delta)
{
    int64_t v;
    int rc = ks_incrby(x->env->ks, &x->keys[0], x->now, delta, &v);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
    } else {
        notify_key(NOTIFY_STRING, "incrby", &x->keys[0]);
        reply_int(x->out, v);
    }
}

static void cmd_incr(struct cmd_ctx *x)
{
    incr_by(x, 1);
}

static void cmd_decr(struct cmd_ctx *x)
{
    incr_by(x, -1);
}

static void cmd_incrby(struct cmd_ctx *x)
{
    int64_t d;
    if (arg_i64(x, 2, &d) == 0)
        incr_by(x, d);
}

static void cmd_decrby(struct cmd_ctx *x)
{
    int64_t d;
    if (arg_i64(x, 2, &d))
        return;
    if (d == INT64_MIN) {
        reply_error(x->out, "ERR decrement would overflow");
        return;
    }
    incr_by(x, -d);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_string_table[] = {
    {"get", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "read string fast", cmd_get,
     {.summary = "Returns the string value of a key", .since = "1.0.0", .group = "string",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RO access"}},
    {"set", -3, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write string slow", cmd_set,
     {.summary = "Sets the string value of a key, with an optional expiry and existence condition",
      .since = "1.0.0", .group = "string", .complexity = "O(1)",
      .args = "key:key value:string ?condition(nx=NX xx=XX) ?get=GET ?expiration(seconds:integer=EX "
              "milliseconds:integer=PX unix-time-seconds:unix-time=EXAT "
              "unix-time-milliseconds:unix-time=PXAT keepttl=KEEPTTL)",
      .keyflags = "RW access update variable_flags", .resolved = "OW update",
      .notes = "RW and ACCESS due to the optional `GET` argument"}},
    {"incr", 2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_incr,
     {.summary = "Adds one to the integer value of a key", .since = "1.0.0", .group = "string",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RW access update"}},
    {"incrby", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_incrby,
     {.summary = "Adds an amount to the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key increment:integer",
      .keyflags = "RW access update"}},
    {"decr", 2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_decr,
     {.summary = "Subtracts one from the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key", .keyflags = "RW access update"}},
    {"decrby", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_decrby,
     {.summary = "Subtracts an amount from the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key decrement:integer",
      .keyflags = "RW access update"}},
    {"setex", 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write string slow", cmd_setex,
     {.summary = "Sets the string value and the expiry in seconds of a key", .since = "2.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key seconds:integer value:string",
      .keyflags = "OW update"}},
    {"psetex", 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write string slow", cmd_psetex,
     {.summary = "Sets the string value and the expiry in milliseconds of a key",
      .since = "2.6.0", .group = "string", .complexity = "O(1)",
      .args = "key:key milliseconds:integer value:string", .keyflags = "OW update"}},
    {"setnx", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_setnx,
     {.summary = "Sets the string value of a key only if the key does not exist",
      .since = "1.0.0", .group = "string", .complexity = "O(1)", .args = "key:key value:string",
      .keyflags = "OW insert"}},
    {"getset", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_getset,
     {.summary = "Sets the string value of a key and returns the old value", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key value:string",
      .keyflags = "RW access update"}},
    {"getdel", 2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write string fast", cmd_getdel,
     {.summary = "Returns the string value of a key and deletes the key", .since = "6.2.0",
      .group = "string", .complexity = "O(1)", .args = "key:key",
      .keyflags = "RW access delete"}},
    {"getex", -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write string fast", cmd_getex,
     {.summary = "Returns the string value of a key and optionally sets or removes its expiry",
      .since = "6.2.0", .group = "string", .complexity = "O(1)",
      .args = "key:key ?expiration(seconds:integer=EX milliseconds:integer=PX "
              "unix-time-seconds:unix-time=EXAT unix-time-milliseconds:unix-time=PXAT "
              "persist=PERSIST)",
      .keyflags = "RW access update", .notes = "RW and UPDATE because it changes the TTL"}},
    {"mget", -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "read string fast", cmd_mget,
     {.summary = "Returns the string values of the given keys", .since = "1.0.0",
      .group = "string", .complexity = "O(N) where N is the number of keys to retrieve.",
      .args = "*key:key", .keyflags = "RO access", .tips = "request_policy:multi_shard"}},
    {"mset", -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 2, "write string slow", cmd_mset,
     {.summary = "Sets the string values of several keys, all at once", .since = "1.0.1",
      .group = "string", .complexity = "O(N) where N is the number of keys to set.",
      .args = "*key_value{key:key value:string}", .keyflags = "OW update",
      .tips = "request_policy:multi_shard response_policy:all_succeeded"}},
    {"msetnx", -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 2, "write string slow", cmd_msetnx,
     {.summary = "Sets the string values of several keys only if none of them exists",
      .since = "1.0.1", .group = "string",
      .complexity = "O(N) where N is the number of keys to set.",
      .args = "*key_value{key:key value:string}", .keyflags = "OW insert",
      .tips = "request_policy:multi_shard response_policy:agg_min"}},
    {"strlen", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "read string fast", cmd_strlen,
     {.summary = "Returns the length of a string value", .since = "2.2.0", .group = "string",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RO"}},
    {"append", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_append,
     {.summary = "Appends a string to the value of a key, creating it if absent",
      .since = "2.0.0", .group = "string",
      .complexity = "O(1) amortized for a small appended value", .args = "key:key value:string",
      .keyflags = "RW insert"}},
    {"incrbyfloat", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast",
     cmd_incrbyfloat,
     {.summary = "Adds a floating point amount to the value of a key", .since = "2.6.0",
      .group = "string", .complexity = "O(1)", .args = "key:key increment:double",
      .keyflags = "RW access update"}},
};
const int cmd_string_count = (int)(sizeof(cmd_string_table) / sizeof(cmd_string_table[0]));
