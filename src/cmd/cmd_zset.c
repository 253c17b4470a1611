/* cmd_zset.c - the sorted set commands that write by member: ZADD, ZINCRBY, ZREM, with Redis
 * 7.0's arguments, replies and error texts (docs/COMMANDS.md, Sorted sets). The other areas of
 * sorted sets: reads and ranges (cmd_zset_read.c), removals by range and pops (cmd_zset_trim.c),
 * ZRANDMEMBER (cmd_zset_random.c); what they share is in cmd_zset.h. Everywhere argument errors
 * come before the key is looked at, as in Redis; every handler opens its key once
 * (ks_zset_open), replies, and closes it. A window log of ISALLOWED reads as a sorted set and
 * becomes one on the first Z write (keyspace.h). */
#include "cmd_notify.h"
#include "cmd_zset.h"

#include <ctype.h>
#include <errno.h>

#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_NAN "ERR resulting score is not a number (NaN)"

/* ---- arguments ---- */

/* A score argument, as Redis's string2d: the whole argument is a strtod number (so "inf",
 * "-inf", "1e3" and hex floats), no leading space, no overflow, not NaN. */
static int parse_score(const char *p, size_t len, double *out)
{
    if (len == 0 || isspace((unsigned char)p[0]))
        return -1;
    if (util_parse_short_int_double(p, len, out) == 0)
        return 0;
    errno = 0;
    char *end;
    double d = strtod(p, &end);
    if ((size_t)(end - p) != len || isnan(d) ||
        (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO)))
        return -1;
    *out = d;
    return 0;
}

/* ---- ZADD, ZINCRBY ---- */

static void zadd_generic(struct cmd_ctx *x, unsigned flags, int ch)
{
    int i = 2;
    for (; i < x->argc && x->lens[i] <= 4; i++) { /* no option is longer */
        if (arg_is(x, i, "NX"))
            flags |= ZS_NX;
        else if (arg_is(x, i, "XX"))
            flags |= ZS_XX;
        else if (arg_is(x, i, "GT"))
            flags |= ZS_GT;
        else if (arg_is(x, i, "LT"))
            flags |= ZS_LT;
        else if (arg_is(x, i, "CH"))
            ch = 1;
        else if (arg_is(x, i, "INCR"))
            flags |= ZS_INCR;
        else
            break;
    }
    int elements = x->argc - i;
    if (elements % 2 != 0 || elements == 0) {
        reply_syntax_error(x->out);
        return;
    }
    elements /= 2;
    if ((flags & ZS_NX) && (flags & ZS_XX)) {
        reply_error(x->out, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if (((flags & ZS_NX) && (flags & (ZS_GT | ZS_LT))) ||
        ((flags & ZS_GT) && (flags & ZS_LT))) {
        reply_error(x->out, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if ((flags & ZS_INCR) && elements > 1) {
        reply_error(x->out, "ERR INCR option supports a single increment-element pair");
        return;
    }
    double first = 0; /* the first pair's score, kept: most calls add one pair */
    for (int j = 0; j < elements; j++) {
        double d;
        if (parse_score(x->argv[i + 2 * j], x->lens[i + 2 * j], &d) != 0) {
            reply_error(x->out, ERR_NOT_FLOAT);
            return;
        }
        if (j == 0)
            first = d;
    }
    /* A new set starts packed whatever the pairs, as in Redis 7.0 (observable: a -0 score added
     * while packed reads back as "0", one added to a big set as "-0"). */
    struct ks_zref ref;
    if (open_key(x, KS_Z_CREATE, 0, 0, &ref) != 0)
        return;
    int64_t added = 0, updated = 0, processed = 0;
    double score = 0;
    if (ref.slot >= 0 || !(flags & ZS_XX)) {
        for (int j = 0; j < elements; j++) {
            int a = i + 2 * j;
            double d, out;
            int skipped;
            if (j == 0)
                d = first;
            else
                parse_score(x->argv[a], x->lens[a], &d);
            int rc = zs_add(&ref.z, x->argv[a + 1], x->lens[a + 1], d, flags, &out, &skipped);
            if (rc == ZS_NAN) {
                ref.changed = added + updated > 0;
                close_key(x, &ref);
                if (ref.changed) /* Redis raises it for the pairs before the NaN too */
                    notify_key(NOTIFY_ZSET, (flags & ZS_INCR) ? "zincr" : "zadd", &x->keys[0]);
                reply_error(x->out, ERR_NAN);
                return;
            }
            added += rc == ZS_ADDED;
            updated += rc == ZS_UPDATED;
            processed += !skipped;
            score = out;
        }
    }
    ref.changed = added + updated > 0;
    close_key(x, &ref);
    if (ref.changed)
        notify_key(NOTIFY_ZSET, (flags & ZS_INCR) ? "zincr" : "zadd", &x->keys[0]);
    if (flags & ZS_INCR) {
        if (processed)
            reply_score(x->out, score);
        else
            reply_nil(x->out);
    } else {
        reply_int(x->out, ch ? added + updated : added);
    }
}

static void cmd_zadd(struct cmd_ctx *x)
{
    zadd_generic(x, 0, 0);
}

static void cmd_zincrby(struct cmd_ctx *x)
{
    double d;
    if (parse_score(x->argv[2], x->lens[2], &d) != 0) {
        reply_error(x->out, ERR_NOT_FLOAT);
        return;
    }
    struct ks_zref ref;
    if (open_key(x, KS_Z_CREATE, 0, 0, &ref) != 0)
        return;
    double out;
    int skipped;
    int rc = zs_add(&ref.z, x->argv[3], x->lens[3], d, ZS_INCR, &out, &skipped);
    ref.changed = rc == ZS_ADDED || rc == ZS_UPDATED;
    close_key(x, &ref);
    if (ref.changed)
        notify_key(NOTIFY_ZSET, "zincr", &x->keys[0]);
    if (rc == ZS_NAN)
        reply_error(x->out, ERR_NAN);
    else
        reply_score(x->out, out);
}

/* ---- ZREM ---- */

static void cmd_zrem(struct cmd_ctx *x)
{
    struct ks_zref ref;
    if (open_key(x, KS_Z_WRITE, 0, 0, &ref) != 0)
        return;
    int64_t n = 0;
    for (int i = 2; ref.z != NULL && i < x->argc && zs_card(ref.z) > 0; i++)
        n += zs_del(&ref.z, x->argv[i], x->lens[i]);
    ref.changed = n > 0;
    int emptied = n > 0 && (ref.z == NULL || zs_card(ref.z) == 0);
    close_key(x, &ref);
    if (n > 0)
        notify_key(NOTIFY_ZSET, "zrem", &x->keys[0]);
    if (emptied)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
    reply_int(x->out, n);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_zset_table[] = {
    {"zadd", -4, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write sortedset fast", cmd_zadd,
     {.summary = "Adds members with scores to a sorted set, or updates their scores",
      .since = "1.2.0", .group = "sorted-set",
      .complexity = "O(log(N)) per member added, N the size of the set",
      .args = "key:key ?condition(nx=NX xx=XX) ?comparison(gt=GT lt=LT) ?change=CH "
              "?increment=INCR *score_member{score:double member:string}",
      .keyflags = "RW update"}},
    {"zincrby", 4, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write sortedset fast", cmd_zincrby,
     {.summary = "Adds an increment to the score of a member of a sorted set", .since = "1.2.0",
      .group = "sorted-set", .complexity = "O(log(N))",
      .args = "key:key increment:integer member:string", .keyflags = "RW access update"}},
    {"zrem", -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write sortedset fast", cmd_zrem,
     {.summary = "Removes members from a sorted set", .since = "1.2.0", .group = "sorted-set",
      .complexity = "O(M*log(N)), M the members removed", .args = "key:key *member:string",
      .keyflags = "RW delete"}},
};
const int cmd_zset_count = (int)(sizeof(cmd_zset_table) / sizeof(cmd_zset_table[0]));
