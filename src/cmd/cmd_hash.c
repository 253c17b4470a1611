/* cmd_hash.c - hash commands as Redis 7.0 answers them (docs/COMMANDS.md "Hashes"): HSET,
 * HSETNX, HMSET, HGET, HMGET, HDEL, HEXISTS, HLEN, HGETALL, HKEYS, HVALS, HINCRBY,
 * HINCRBYFLOAT, HSTRLEN. The token-bucket recipe keeps `tokens` and `ts` in one. */
#include "cmd_internal.h"
#include "cmd_notify.h"

#include <math.h>
#include <stdlib.h>

#include "rlimitd/alloc.h"
#include "rlimitd/util.h"

/* Opens key's hash; on WRONGTYPE or OOM replies the error and returns -1. */
static int open_hash(struct cmd_ctx *x, int mode, struct ks_href *r)
{
    int rc = ks_hash_open(x->env->ks, &x->keys[0], x->now, mode, r);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return -1;
    }
    if (mode == KS_H_READ && r->h == NULL) /* only the read commands open for reading */
        notify_keymiss(&x->keys[0]);
    return 0;
}

static void close_hash(struct cmd_ctx *x, struct ks_href *r, int changed)
{
    ks_hash_close(x->env->ks, &x->keys[0], r, changed);
}

/* HSET and HMSET: field value pairs after the key; Redis checks the pairing first. */
static int hset_generic(struct cmd_ctx *x, const char *name, int64_t *created)
{
    if (x->argc % 2 == 1) {
        reply_errorf(x->out, "ERR wrong number of arguments for '%s' command", name);
        return -1;
    }
    *created = 0;
    if (ks_hash_update_inline(x->env->ks, &x->keys[0], x->now, (x->argc - 2) / 2, x->argv + 2,
                              x->lens + 2)) {
        notify_key(NOTIFY_HASH, "hset", &x->keys[0]);
        return 0; /* every field existed and was rewritten in place */
    }
    struct ks_href r;
    if (open_hash(x, KS_H_CREATE, &r) != 0)
        return -1;
    for (int i = 2; i < x->argc; i += 2)
        *created += hv_set(&r.h, x->argv[i], x->lens[i], x->argv[i + 1], x->lens[i + 1]);
    close_hash(x, &r, 1);
    notify_key(NOTIFY_HASH, "hset", &x->keys[0]);
    return 0;
}

static void cmd_hset(struct cmd_ctx *x)
{
    int64_t n;
    if (hset_generic(x, "hset", &n) == 0)
        reply_int(x->out, n);
}

static void cmd_hmset(struct cmd_ctx *x)
{
    int64_t n;
    if (hset_generic(x, "hmset", &n) == 0)
        reply_ok(x->out);
}

static void cmd_hsetnx(struct cmd_ctx *x)
{
    struct ks_href r;
    if (open_hash(x, KS_H_CREATE, &r) != 0)
        return;
    const char *v;
    size_t vlen;
    int exists = hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen);
    if (!exists)
        hv_set(&r.h, x->argv[2], x->lens[2], x->argv[3], x->lens[3]);
    close_hash(x, &r, !exists);
    if (!exists)
        notify_key(NOTIFY_HASH, "hset", &x->keys[0]);
    reply_int(x->out, !exists);
}

static void cmd_hget(struct cmd_ctx *x)
{
    struct ks_href r;
    const char *v;
    size_t vlen;
    if (open_hash(x, KS_H_READ, &r) != 0)
        return;
    if (r.h != NULL && hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen))
        reply_bulk(x->out, v, vlen);
    else
        reply_nil(x->out);
}

static void cmd_hmget(struct cmd_ctx *x)
{
    unsigned char c[HV_COMPACT_MAX];
    size_t cn = ks_hash_peek_inline(x->env->ks, &x->keys[0], x->now, c);
    if (cn > 0) { /* a hash in its entry: read where it is */
        reply_array(x->out, x->argc - 2);
        for (int i = 2; i < x->argc; i++) {
            const char *v;
            size_t vlen;
            char num[HV_NUM_BYTES];
            if (hv_compact_get(c, cn, x->argv[i], x->lens[i], &v, &vlen, num))
                reply_bulk(x->out, v, vlen);
            else
                reply_nil(x->out);
        }
        return;
    }
    struct ks_href r;
    if (open_hash(x, KS_H_READ, &r) != 0)
        return;
    reply_array(x->out, x->argc - 2);
    for (int i = 2; i < x->argc; i++) {
        const char *v;
        size_t vlen;
        if (r.h != NULL && hv_get(r.h, x->argv[i], x->lens[i], &v, &vlen))
            reply_bulk(x->out, v, vlen);
        else
            reply_nil(x->out);
    }
}

static void cmd_hdel(struct cmd_ctx *x)
{
    struct ks_href r;
    if (open_hash(x, KS_H_WRITE, &r) != 0)
        return;
    int64_t n = 0;
    for (int i = 2; r.h != NULL && i < x->argc && hv_count(r.h) > 0; i++)
        n += hv_del(&r.h, x->argv[i], x->lens[i]);
    int emptied = n > 0 && (r.h == NULL || hv_count(r.h) == 0);
    close_hash(x, &r, n > 0);
    if (n > 0)
        notify_key(NOTIFY_HASH, "hdel", &x->keys[0]);
    if (emptied)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
    reply_int(x->out, n);
}

static void cmd_hexists(struct cmd_ctx *x)
{
    struct ks_href r;
    const char *v;
    size_t vlen;
    if (open_hash(x, KS_H_READ, &r) == 0)
        reply_int(x->out, r.h != NULL && hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen));
}

static void cmd_hlen(struct cmd_ctx *x)
{
    struct ks_href r;
    if (open_hash(x, KS_H_READ, &r) == 0)
        reply_int(x->out, r.h != NULL ? (int64_t)hv_count(r.h) : 0);
}

static void cmd_hstrlen(struct cmd_ctx *x)
{
    struct ks_href r;
    const char *v;
    size_t vlen;
    if (open_hash(x, KS_H_READ, &r) != 0)
        return;
    if (r.h != NULL && hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen))
        reply_int(x->out, (int64_t)vlen);
    else
        reply_int(x->out, 0);
}

#define WANT_FIELDS 1
#define WANT_VALUES 2

/* HGETALL answers a map (Redis's addReplyMapLen: pairs in RESP3, flat in RESP2), HKEYS and
 * HVALS an array. */
static void hgetall_generic(struct cmd_ctx *x, int want)
{
    struct ks_href r;
    if (open_hash(x, KS_H_READ, &r) != 0)
        return;
    int64_t n = r.h != NULL ? (int64_t)hv_count(r.h) : 0;
    if (want == (WANT_FIELDS | WANT_VALUES))
        reply_map(x->out, n);
    else
        reply_array(x->out, n);
    if (r.h == NULL)
        return;
    struct hv_iter it;
    const char *f, *v;
    size_t flen, vlen;
    hv_iter_init(&it, r.h);
    while (hv_next(&it, &f, &flen, &v, &vlen)) {
        if (want & WANT_FIELDS)
            reply_bulk(x->out, f, flen);
        if (want & WANT_VALUES)
            reply_bulk(x->out, v, vlen);
    }
}

static void cmd_hgetall(struct cmd_ctx *x)
{
    hgetall_generic(x, WANT_FIELDS | WANT_VALUES);
}

static void cmd_hkeys(struct cmd_ctx *x)
{
    hgetall_generic(x, WANT_FIELDS);
}

static void cmd_hvals(struct cmd_ctx *x)
{
    hgetall_generic(x, WANT_VALUES);
}

/* HINCRBY in Redis's order: the increment, the type, the field's value, the overflow. */
static void cmd_hincrby(struct cmd_ctx *x)
{
    int64_t incr, cur = 0;
    if (arg_i64(x, 3, &incr))
        return;
    struct ks_href r;
    if (open_hash(x, KS_H_CREATE, &r) != 0)
        return;
    const char *v;
    size_t vlen;
    if (hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen) && util_parse_i64(v, vlen, &cur) != 0) {
        close_hash(x, &r, 0);
        reply_error(x->out, "ERR hash value is not an integer");
        return;
    }
    int64_t sum;
    if (__builtin_add_overflow(cur, incr, &sum)) {
        close_hash(x, &r, 0);
        reply_error(x->out, "ERR increment or decrement would overflow");
        return;
    }
    char buf[24];
    size_t n = util_fmt_i64(buf, sum);
    hv_set(&r.h, x->argv[2], x->lens[2], buf, n);
    close_hash(x, &r, 1);
    notify_key(NOTIFY_HASH, "hincrby", &x->keys[0]);
    reply_int(x->out, sum);
}

static void cmd_hincrbyfloat(struct cmd_ctx *x)
{
    long double incr, cur = 0;
    if (util_parse_ld(x->argv[3], x->lens[3], &incr) != 0) {
        reply_error(x->out, "ERR value is not a valid float");
        return;
    }
    if (isnan(incr) || isinf(incr)) {
        reply_error(x->out, "ERR value is NaN or Infinity");
        return;
    }
    struct ks_href r;
    if (open_hash(x, KS_H_CREATE, &r) != 0)
        return;
    const char *v;
    size_t vlen;
    if (hv_get(r.h, x->argv[2], x->lens[2], &v, &vlen) && util_parse_ld(v, vlen, &cur) != 0) {
        close_hash(x, &r, 0);
        reply_error(x->out, "ERR hash value is not a float");
        return;
    }
    cur += incr;
    if (isnan(cur) || isinf(cur)) {
        close_hash(x, &r, 0);
        reply_error(x->out, "ERR increment would produce NaN or Infinity");
        return;
    }
    char *buf = xmalloc(UTIL_LD_MAX_CHARS);
    size_t n = util_fmt_ld_human(buf, cur);
    hv_set(&r.h, x->argv[2], x->lens[2], buf, n);
    close_hash(x, &r, 1);
    notify_key(NOTIFY_HASH, "hincrbyfloat", &x->keys[0]);
    reply_bulk(x->out, buf, n);
    free(buf);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

#define HASH_DOC(sum, cx, a)                                                                       \
    .summary = sum, .since = "2.0.0", .group = "hash", .complexity = cx, .args = a

const struct cmd_def cmd_hash_table[] = {
    {"hset",
     -4,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hset,
     {HASH_DOC("Sets fields of a hash, creating it if absent; returns how many were new",
               "O(1) for each field/value pair added",
               "key:key *field_value{field:string "
               "value:string}"),
      .keyflags = "RW update"}},
    {"hsetnx",
     4,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hsetnx,
     {HASH_DOC("Sets a field of a hash only if the field does not exist", "O(1)",
               "key:key field:string value:string"),
      .keyflags = "RW insert"}},
    {"hmset",
     -4,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hmset,
     {HASH_DOC("Sets fields of a hash (HSET replying +OK)",
               "O(N) where N is the number of fields being set.",
               "key:key *field_value{field:string value:string}"),
      .keyflags = "RW update"}},
    {"hget",
     3,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read hash fast",
     cmd_hget,
     {HASH_DOC("Returns the value of a field of a hash", "O(1)", "key:key field:string"),
      .keyflags = "RO access"}},
    {"hmget",
     -3,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read hash fast",
     cmd_hmget,
     {HASH_DOC("Returns the values of fields of a hash",
               "O(N) where N is the number of fields being requested.", "key:key *field:string"),
      .keyflags = "RO access"}},
    {"hdel",
     -3,
     CMD_WRITE | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hdel,
     {HASH_DOC("Deletes fields of a hash; the key goes with the last field",
               "O(N) where N is the number of fields to be removed.", "key:key *field:string"),
      .keyflags = "RW delete"}},
    {"hexists",
     3,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read hash fast",
     cmd_hexists,
     {HASH_DOC("Says whether a field of a hash exists", "O(1)", "key:key field:string"),
      .keyflags = "RO"}},
    {"hlen",
     2,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read hash fast",
     cmd_hlen,
     {HASH_DOC("Returns the number of fields of a hash", "O(1)", "key:key"), .keyflags = "RO"}},
    {"hgetall",
     2,
     CMD_READONLY,
     1,
     1,
     1,
     "read hash slow",
     cmd_hgetall,
     {HASH_DOC("Returns every field and value of a hash", "O(N) where N is the size of the hash.",
               "key:key"),
      .keyflags = "RO access", .tips = "nondeterministic_output_order"}},
    {"hkeys",
     2,
     CMD_READONLY,
     1,
     1,
     1,
     "read hash slow",
     cmd_hkeys,
     {HASH_DOC("Returns every field of a hash", "O(N) where N is the size of the hash.", "key:key"),
      .keyflags = "RO access", .tips = "nondeterministic_output_order"}},
    {"hvals",
     2,
     CMD_READONLY,
     1,
     1,
     1,
     "read hash slow",
     cmd_hvals,
     {HASH_DOC("Returns every value of a hash", "O(N) where N is the size of the hash.", "key:key"),
      .keyflags = "RO access", .tips = "nondeterministic_output_order"}},
    {"hincrby",
     4,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hincrby,
     {HASH_DOC("Adds an integer to the value of a field of a hash", "O(1)",
               "key:key field:string increment:integer"),
      .keyflags = "RW access update"}},
    {"hincrbyfloat",
     4,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write hash fast",
     cmd_hincrbyfloat,
     {.summary = "Adds a floating point amount to the value of a field of a hash",
      .since = "2.6.0",
      .group = "hash",
      .complexity = "O(1)",
      .args = "key:key field:string increment:double",
      .keyflags = "RW access update"}},
    {"hstrlen",
     3,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read hash fast",
     cmd_hstrlen,
     {.summary = "Returns the length of the value of a field of a hash",
      .since = "3.2.0",
      .group = "hash",
      .complexity = "O(1)",
      .args = "key:key field:string",
      .keyflags = "RO"}},
};
const int cmd_hash_count = (int)(sizeof(cmd_hash_table) / sizeof(cmd_hash_table[0]));
