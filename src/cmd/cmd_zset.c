/* cmd_zset.c - the sorted set commands, with Redis 7.0's arguments, replies and error texts
 * (docs/COMMANDS.md, Sorted sets). Argument errors come before the key is looked at, as in
 * Redis; every handler opens its key once (ks_zset_open), replies, and closes it. A window log
 * of ISALLOWED reads as a sorted set and becomes one on the first Z write (keyspace.h). */
#include "cmd_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/util.h"
#include "rlimitd/zset.h"

#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_RANGE_FLOAT "ERR min or max is not a float"
#define ERR_RANGE_LEX "ERR min or max not valid string range item"
#define ERR_NAN "ERR resulting score is not a number (NaN)"
#define ERR_NOT_INT "ERR value is not an integer or out of range"

/* ZRANDMEMBER with a negative count repeats members; a reply this long is refused instead of
 * being built (Redis would build it, whatever its size). */
#define RANDMEMBER_MAX_REPEAT (1 << 24)

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

/* One end of a score range: "(" for exclusive. Redis reads it with strtod up to the first NUL,
 * so an empty argument is 0 and leading spaces are allowed; NaN is refused. */
static int parse_range_end(const char *p, double *d, int *ex)
{
    char *end;
    *ex = p[0] == '(';
    if (*ex)
        p++;
    if (util_parse_short_int_double(p, strlen(p), d) == 0)
        return 0;
    *d = strtod(p, &end);
    return end[0] != '\0' || isnan(*d) ? -1 : 0;
}

static int parse_score_range(struct cmd_ctx *x, int imin, int imax, struct zs_score_range *r)
{
    if (parse_range_end(x->argv[imin], &r->min, &r->minex) != 0 ||
        parse_range_end(x->argv[imax], &r->max, &r->maxex) != 0) {
        reply_error(x->out, ERR_RANGE_FLOAT);
        return -1;
    }
    return 0;
}

static int parse_lex_end(const char *p, size_t len, struct zs_lex_bound *b, int is_max)
{
    memset(b, 0, sizeof(*b));
    if (len == 0)
        return -1;
    switch (p[0]) {
    case '+':
    case '-':
        if (len != 1)
            return -1;
        b->inf = p[0] == '+' ? 1 : -1;
        (void)is_max;
        return 0;
    case '(':
    case '[':
        b->ex = p[0] == '(';
        b->p = p + 1;
        b->len = len - 1;
        return 0;
    default:
        return -1;
    }
}

static int parse_lex_range(struct cmd_ctx *x, int imin, int imax, struct zs_lex_bound *min,
                           struct zs_lex_bound *max)
{
    if (parse_lex_end(x->argv[imin], x->lens[imin], min, 0) != 0 ||
        parse_lex_end(x->argv[imax], x->lens[imax], max, 1) != 0) {
        reply_error(x->out, ERR_RANGE_LEX);
        return -1;
    }
    return 0;
}

/* ---- replies ---- */

static void reply_score(struct rbuf *out, double d)
{
    char b[40];
    int n = zs_format_score(b, d);
    reply_bulk(out, b, (size_t)n);
}

/* Emits n members from rank `first` (ascending ranks), going down if reverse, as an array of
 * members or of member, score pairs (RESP2 is flat). */
static void emit_ranks(struct rbuf *out, const struct zset *z, size_t first, size_t n,
                       int reverse, int withscores)
{
    reply_array(out, (int64_t)(withscores ? 2 * n : n));
    if (n == 0)
        return;
    struct zs_iter it;
    struct zs_item item;
    zs_iter_init(&it, z, first, reverse);
    for (size_t k = 0; k < n && zs_iter_next(&it, &item); k++) {
        reply_bulk(out, item.m, item.len);
        if (withscores)
            reply_score(out, item.score);
    }
}

/* Opens the command's key (argv[1]); on an error replies it and returns -1. */
static int open_key(struct cmd_ctx *x, int mode, size_t size_hint, size_t member_hint,
                    struct ks_zref *ref)
{
    int rc = ks_zset_open(x->env->ks, &x->keys[0], x->now, mode, size_hint, member_hint, ref);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return -1;
    }
    return 0;
}

static void close_key(struct cmd_ctx *x, struct ks_zref *ref)
{
    ks_zset_close(x->env->ks, &x->keys[0], ref);
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
    if (rc == ZS_NAN)
        reply_error(x->out, ERR_NAN);
    else
        reply_score(x->out, out);
}

/* ---- single-member reads and ZREM ---- */

static void cmd_zrem(struct cmd_ctx *x)
{
    struct ks_zref ref;
    if (open_key(x, KS_Z_WRITE, 0, 0, &ref) != 0)
        return;
    int64_t n = 0;
    for (int i = 2; ref.z != NULL && i < x->argc && zs_card(ref.z) > 0; i++)
        n += zs_del(&ref.z, x->argv[i], x->lens[i]);
    ref.changed = n > 0;
    close_key(x, &ref);
    reply_int(x->out, n);
}

static void cmd_zcard(struct cmd_ctx *x)
{
    struct ks_zref ref;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    reply_int(x->out, ref.z != NULL ? (int64_t)zs_card(ref.z) : 0);
    close_key(x, &ref);
}

static void cmd_zscore(struct cmd_ctx *x)
{
    struct ks_zref ref;
    double d;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    if (ref.z != NULL && zs_score(ref.z, x->argv[2], x->lens[2], &d))
        reply_score(x->out, d);
    else
        reply_nil(x->out);
    close_key(x, &ref);
}

static void cmd_zmscore(struct cmd_ctx *x)
{
    struct ks_zref ref;
    double d;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    reply_array(x->out, x->argc - 2);
    for (int i = 2; i < x->argc; i++) {
        if (ref.z != NULL && zs_score(ref.z, x->argv[i], x->lens[i], &d))
            reply_score(x->out, d);
        else
            reply_nil(x->out);
    }
    close_key(x, &ref);
}

static void zrank_generic(struct cmd_ctx *x, int reverse)
{
    struct ks_zref ref;
    size_t r;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    if (ref.z != NULL && zs_rank(ref.z, x->argv[2], x->lens[2], &r))
        reply_int(x->out, (int64_t)(reverse ? zs_card(ref.z) - 1 - r : r));
    else
        reply_nil(x->out);
    close_key(x, &ref);
}

static void cmd_zrank(struct cmd_ctx *x)
{
    zrank_generic(x, 0);
}

static void cmd_zrevrank(struct cmd_ctx *x)
{
    zrank_generic(x, 1);
}

/* ---- counts ---- */

static void cmd_zcount(struct cmd_ctx *x)
{
    struct zs_score_range r;
    struct ks_zref ref;
    size_t a = 0, e = 0;
    if (parse_score_range(x, 2, 3, &r) != 0 || open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    if (ref.z != NULL)
        zs_range_score(ref.z, &r, &a, &e);
    close_key(x, &ref);
    reply_int(x->out, (int64_t)(e - a));
}

static void cmd_zlexcount(struct cmd_ctx *x)
{
    struct zs_lex_bound min, max;
    struct ks_zref ref;
    size_t a = 0, e = 0;
    if (parse_lex_range(x, 2, 3, &min, &max) != 0 || open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    if (ref.z != NULL)
        zs_range_lex(ref.z, &min, &max, 0, &a, &e);
    close_key(x, &ref);
    reply_int(x->out, (int64_t)(e - a));
}

/* ---- ranges ---- */

enum range_type { RANGE_AUTO, RANGE_RANK, RANGE_SCORE, RANGE_LEX };
enum range_dir { DIR_AUTO, DIR_FORWARD, DIR_REVERSE };

/* Rank arguments as Redis reads them: negative counts from the end. Returns the ascending
 * inclusive range as [*lo, *hi) in ascending ranks, empty when out of the set. */
static void rank_range(int64_t start, int64_t end, size_t card, int reverse, size_t *lo,
                       size_t *hi)
{
    int64_t len = (int64_t)card;
    if (start < 0)
        start = len + start;
    if (end < 0)
        end = len + end;
    if (start < 0)
        start = 0;
    if (start > end || start >= len) {
        *lo = *hi = 0;
        return;
    }
    if (end >= len)
        end = len - 1;
    if (reverse) {
        *lo = (size_t)(len - 1 - end);
        *hi = (size_t)(len - start);
    } else {
        *lo = (size_t)start;
        *hi = (size_t)end + 1;
    }
}

/* ZRANGE and its older forms. key at argv[1], range at argv[2..3], options after; type and
 * dir are preset by the older forms (which then refuse BYSCORE/BYLEX/REV as syntax errors). */
static void zrange_generic(struct cmd_ctx *x, enum range_type type, enum range_dir dir)
{
    int withscores = 0;
    int64_t offset = 0, limit = -1;
    for (int j = 4; j < x->argc; j++) {
        int left = x->argc - j - 1;
        if (arg_is(x, j, "WITHSCORES")) {
            withscores = 1;
        } else if (arg_is(x, j, "LIMIT") && left >= 2) {
            if (arg_i64(x, j + 1, &offset) != 0 || arg_i64(x, j + 2, &limit) != 0)
                return;
            j += 2;
        } else if (dir == DIR_AUTO && arg_is(x, j, "REV")) {
            dir = DIR_REVERSE;
        } else if (type == RANGE_AUTO && arg_is(x, j, "BYLEX")) {
            type = RANGE_LEX;
        } else if (type == RANGE_AUTO && arg_is(x, j, "BYSCORE")) {
            type = RANGE_SCORE;
        } else {
            reply_syntax_error(x->out);
            return;
        }
    }
    if (dir == DIR_AUTO)
        dir = DIR_FORWARD;
    if (type == RANGE_AUTO)
        type = RANGE_RANK;
    /* Redis's quirk, kept: LIMIT with a count of -1 passes with a rank range. */
    if (limit != -1 && type == RANGE_RANK) {
        reply_error(x->out, "ERR syntax error, LIMIT is only supported in combination with "
                            "either BYSCORE or BYLEX");
        return;
    }
    if (withscores && type == RANGE_LEX) {
        reply_error(x->out, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    int reverse = dir == DIR_REVERSE;
    int imin = 2, imax = 3;
    if (reverse && type != RANGE_RANK) {
        imin = 3; /* given as max, min */
        imax = 2;
    }
    int64_t start = 0, end = 0;
    struct zs_score_range sr;
    struct zs_lex_bound lmin, lmax;
    if (type == RANGE_RANK) {
        if (arg_i64(x, imin, &start) != 0 || arg_i64(x, imax, &end) != 0)
            return;
    } else if (type == RANGE_SCORE) {
        if (parse_score_range(x, imin, imax, &sr) != 0)
            return;
    } else if (parse_lex_range(x, imin, imax, &lmin, &lmax) != 0) {
        return;
    }
    struct ks_zref ref;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    if (ref.z == NULL) {
        reply_array(x->out, 0);
        return;
    }
    size_t lo, hi, n;
    if (type == RANGE_RANK) {
        rank_range(start, end, zs_card(ref.z), reverse, &lo, &hi);
        n = hi - lo;
    } else {
        if (type == RANGE_SCORE)
            zs_range_score(ref.z, &sr, &lo, &hi);
        else
            zs_range_lex(ref.z, &lmin, &lmax, reverse, &lo, &hi);
        /* LIMIT: a negative offset yields nothing, a negative count everything after it. */
        size_t len = hi - lo;
        if (offset < 0 || (uint64_t)offset >= len) {
            n = 0;
        } else {
            n = len - (size_t)offset;
            if (limit >= 0 && (uint64_t)limit < n)
                n = (size_t)limit;
            if (reverse)
                hi -= (size_t)offset;
            else
                lo += (size_t)offset;
        }
    }
    emit_ranks(x->out, ref.z, reverse ? hi - 1 : lo, n, reverse, withscores);
    close_key(x, &ref);
}

static void cmd_zrange(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_AUTO, DIR_AUTO);
}

static void cmd_zrevrange(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_RANK, DIR_REVERSE);
}

static void cmd_zrangebyscore(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_SCORE, DIR_FORWARD);
}

static void cmd_zrevrangebyscore(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_SCORE, DIR_REVERSE);
}

static void cmd_zrangebylex(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_LEX, DIR_FORWARD);
}

static void cmd_zrevrangebylex(struct cmd_ctx *x)
{
    zrange_generic(x, RANGE_LEX, DIR_REVERSE);
}

/* ---- removals by range ---- */

static void zrem_range(struct cmd_ctx *x, enum range_type type)
{
    int64_t start = 0, end = 0;
    struct zs_score_range sr;
    struct zs_lex_bound lmin, lmax;
    if (type == RANGE_RANK) {
        if (arg_i64(x, 2, &start) != 0 || arg_i64(x, 3, &end) != 0)
            return;
    } else if (type == RANGE_SCORE) {
        if (parse_score_range(x, 2, 3, &sr) != 0)
            return;
    } else if (parse_lex_range(x, 2, 3, &lmin, &lmax) != 0) {
        return;
    }
    struct ks_zref ref;
    if (open_key(x, KS_Z_WRITE, 0, 0, &ref) != 0)
        return;
    size_t lo = 0, hi = 0;
    if (ref.z != NULL) {
        if (type == RANGE_RANK)
            rank_range(start, end, zs_card(ref.z), 0, &lo, &hi);
        else if (type == RANGE_SCORE)
            zs_range_score(ref.z, &sr, &lo, &hi);
        else
            zs_range_lex(ref.z, &lmin, &lmax, 0, &lo, &hi);
        zs_del_range(&ref.z, lo, hi);
    }
    ref.changed = hi > lo;
    close_key(x, &ref);
    reply_int(x->out, (int64_t)(hi - lo));
}

static void cmd_zremrangebyrank(struct cmd_ctx *x)
{
    zrem_range(x, RANGE_RANK);
}

static void cmd_zremrangebyscore(struct cmd_ctx *x)
{
    zrem_range(x, RANGE_SCORE);
}

static void cmd_zremrangebylex(struct cmd_ctx *x)
{
    zrem_range(x, RANGE_LEX);
}

/* ---- ZPOPMIN, ZPOPMAX ---- */

static void zpop(struct cmd_ctx *x, int max)
{
    int64_t count = 1;
    if (x->argc > 3) {
        reply_syntax_error(x->out);
        return;
    }
    if (x->argc == 3) {
        /* Redis 7.0 gives the one text for a non-integer and a negative count. */
        if (util_parse_i64(x->argv[2], x->lens[2], &count) != 0 || count < 0) {
            reply_error(x->out, "ERR value is out of range, must be positive");
            return;
        }
    }
    struct ks_zref ref;
    if (open_key(x, count == 0 ? KS_Z_READ : KS_Z_WRITE, 0, 0, &ref) != 0)
        return;
    if (ref.z == NULL || count == 0) {
        close_key(x, &ref);
        reply_array(x->out, 0);
        return;
    }
    size_t card = zs_card(ref.z);
    size_t n = (uint64_t)count < card ? (size_t)count : card;
    emit_ranks(x->out, ref.z, max ? card - 1 : 0, n, max, 1);
    if (max)
        zs_del_range(&ref.z, card - n, card);
    else
        zs_del_range(&ref.z, 0, n);
    ref.changed = n > 0;
    close_key(x, &ref);
}

static void cmd_zpopmin(struct cmd_ctx *x)
{
    zpop(x, 0);
}

static void cmd_zpopmax(struct cmd_ctx *x)
{
    zpop(x, 1);
}

/* ---- ZRANDMEMBER ---- */

static uint64_t rand_next(uint64_t *s)
{
    /* splitmix64: a per-call seed from the clock is enough for a random pick. */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void emit_at(struct rbuf *out, struct zs_iter *it, size_t rank, int withscores)
{
    struct zs_item item;
    zs_iter_seek(it, rank);
    if (zs_iter_next(it, &item)) {
        reply_bulk(out, item.m, item.len);
        if (withscores)
            reply_score(out, item.score);
    }
}

static void cmd_zrandmember(struct cmd_ctx *x)
{
    int64_t count = 0;
    int withscores = 0, with_count = x->argc >= 3;
    if (with_count) {
        if (arg_i64(x, 2, &count) != 0)
            return;
        if (count == INT64_MIN) {
            reply_error(x->out, "ERR value is out of range, value must between "
                                "-9223372036854775807 and 9223372036854775807");
            return;
        }
        if (x->argc > 4 || (x->argc == 4 && !arg_is(x, 3, "WITHSCORES"))) {
            reply_syntax_error(x->out);
            return;
        }
        withscores = x->argc == 4;
        /* Redis 7.0 refuses these before anything else (the reply would be too long). */
        if (withscores && count < -(INT64_MAX / 2)) {
            reply_error(x->out, "ERR value is out of range");
            return;
        }
    }
    struct ks_zref ref;
    if (open_key(x, KS_Z_READ, 0, 0, &ref) != 0)
        return;
    uint64_t seed = (uint64_t)x->now ^ (uint64_t)(uintptr_t)x->s;
    if (!with_count) {
        if (ref.z == NULL) {
            reply_nil(x->out);
        } else {
            struct zs_iter it;
            zs_iter_init(&it, ref.z, 0, 0);
            emit_at(x->out, &it, rand_next(&seed) % zs_card(ref.z), 0);
        }
        close_key(x, &ref);
        return;
    }
    if (ref.z == NULL || count == 0) {
        reply_array(x->out, 0);
        close_key(x, &ref);
        return;
    }
    size_t card = zs_card(ref.z);
    struct zs_iter it;
    zs_iter_init(&it, ref.z, 0, 0);
    int per = withscores ? 2 : 1;
    if (count < 0 || count == 1) {
        /* With repetition. */
        uint64_t n = count < 0 ? (uint64_t)-count : 1;
        if (n > RANDMEMBER_MAX_REPEAT) {
            close_key(x, &ref);
            reply_errorf(x->out, "ERR count is out of range, at most %d members with repetition",
                         RANDMEMBER_MAX_REPEAT);
            return;
        }
        reply_array(x->out, (int64_t)(n * (uint64_t)per));
        for (uint64_t k = 0; k < n; k++)
            emit_at(x->out, &it, rand_next(&seed) % card, withscores);
    } else if ((uint64_t)count >= card) {
        /* The whole set, highest first, as Redis 7.0 answers it. */
        emit_ranks(x->out, ref.z, card - 1, card, 1, withscores);
    } else {
        /* Distinct members: selection sampling over the ranks (Knuth's algorithm S), O(card). */
        size_t want = (size_t)count, seen = 0;
        reply_array(x->out, (int64_t)(want * (size_t)per));
        struct zs_item item;
        zs_iter_seek(&it, 0);
        while (want > 0 && zs_iter_next(&it, &item)) {
            if (rand_next(&seed) % (card - seen) < want) {
                reply_bulk(x->out, item.m, item.len);
                if (withscores)
                    reply_score(x->out, item.score);
                want--;
            }
            seen++;
        }
    }
    close_key(x, &ref);
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
    {"zcard", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zcard,
     {.summary = "Returns the number of members of a sorted set", .since = "1.2.0",
      .group = "sorted-set", .complexity = "O(1)", .args = "key:key", .keyflags = "RO"}},
    {"zcount", 4, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zcount,
     {.summary = "Counts the members of a sorted set within a score range", .since = "2.0.0",
      .group = "sorted-set", .complexity = "O(log(N))", .args = "key:key min:double max:double",
      .keyflags = "RO access"}},
    {"zlexcount", 4, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zlexcount,
     {.summary = "Counts the members of a sorted set within a lexicographical range",
      .since = "2.8.9", .group = "sorted-set", .complexity = "O(log(N))",
      .args = "key:key min:string max:string", .keyflags = "RO access"}},
    {"zscore", 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zscore,
     {.summary = "Returns the score of a member of a sorted set", .since = "1.2.0",
      .group = "sorted-set", .complexity = "O(1)", .args = "key:key member:string",
      .keyflags = "RO access"}},
    {"zmscore", -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zmscore,
     {.summary = "Returns the scores of several members of a sorted set", .since = "6.2.0",
      .group = "sorted-set", .complexity = "O(N), N the members asked for",
      .args = "key:key *member:string", .keyflags = "RO access"}},
    {"zrank", 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zrank,
     {.summary = "Returns the rank of a member in a sorted set, lowest score first",
      .since = "2.0.0", .group = "sorted-set", .complexity = "O(log(N))",
      .args = "key:key member:string", .keyflags = "RO access"}},
    {"zrevrank", 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "read sortedset fast", cmd_zrevrank,
     {.summary = "Returns the rank of a member in a sorted set, highest score first",
      .since = "2.0.0", .group = "sorted-set", .complexity = "O(log(N))",
      .args = "key:key member:string", .keyflags = "RO access"}},
    {"zrange", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrange,
     {.summary = "Returns members of a sorted set by rank, score or lexicographical range",
      .since = "1.2.0", .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key start:string stop:string ?sortby(byscore=BYSCORE bylex=BYLEX) ?rev=REV "
              "?offset_count{offset:integer count:integer}=LIMIT ?withscores=WITHSCORES",
      .keyflags = "RO access"}},
    {"zrangebyscore", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrangebyscore,
     {.summary = "Returns members of a sorted set within a score range", .since = "1.0.5",
      .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key min:double max:double ?withscores=WITHSCORES ?offset_count{offset:integer "
              "count:integer}=LIMIT", .keyflags = "RO access"}},
    {"zrevrangebyscore", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrevrangebyscore,
     {.summary = "Returns members of a sorted set within a score range, highest first",
      .since = "2.2.0", .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key max:double min:double ?withscores=WITHSCORES ?offset_count{offset:integer "
              "count:integer}=LIMIT", .keyflags = "RO access"}},
    {"zrevrange", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrevrange,
     {.summary = "Returns members of a sorted set by rank, highest first", .since = "1.2.0",
      .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key start:integer stop:integer ?withscores=WITHSCORES",
      .keyflags = "RO access"}},
    {"zrangebylex", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrangebylex,
     {.summary = "Returns members of a sorted set within a lexicographical range",
      .since = "2.8.9", .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key min:string max:string ?offset_count{offset:integer count:integer}=LIMIT",
      .keyflags = "RO access"}},
    {"zrevrangebylex", -4, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrevrangebylex,
     {.summary = "Returns members of a sorted set within a lexicographical range, highest first",
      .since = "2.8.9", .group = "sorted-set", .complexity = "O(log(N)+M), M the members returned",
      .args = "key:key max:string min:string ?offset_count{offset:integer count:integer}=LIMIT",
      .keyflags = "RO access"}},
    {"zremrangebyscore", 4, CMD_WRITE, 1, 1, 1, "write sortedset slow", cmd_zremrangebyscore,
     {.summary = "Removes the members of a sorted set within a score range", .since = "1.2.0",
      .group = "sorted-set", .complexity = "O(log(N)+M), M the members removed",
      .args = "key:key min:double max:double", .keyflags = "RW delete"}},
    {"zremrangebyrank", 4, CMD_WRITE, 1, 1, 1, "write sortedset slow", cmd_zremrangebyrank,
     {.summary = "Removes the members of a sorted set within a rank range", .since = "2.0.0",
      .group = "sorted-set", .complexity = "O(log(N)+M), M the members removed",
      .args = "key:key start:integer stop:integer", .keyflags = "RW delete"}},
    {"zremrangebylex", 4, CMD_WRITE, 1, 1, 1, "write sortedset slow", cmd_zremrangebylex,
     {.summary = "Removes the members of a sorted set within a lexicographical range",
      .since = "2.8.9", .group = "sorted-set", .complexity = "O(log(N)+M), M the members removed",
      .args = "key:key min:string max:string", .keyflags = "RW delete"}},
    {"zpopmin", -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write sortedset fast", cmd_zpopmin,
     {.summary = "Removes and returns the members with the lowest scores", .since = "5.0.0",
      .group = "sorted-set", .complexity = "O(log(N)*M), M the members popped",
      .args = "key:key ?count:integer", .keyflags = "RW access delete"}},
    {"zpopmax", -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write sortedset fast", cmd_zpopmax,
     {.summary = "Removes and returns the members with the highest scores", .since = "5.0.0",
      .group = "sorted-set", .complexity = "O(log(N)*M), M the members popped",
      .args = "key:key ?count:integer", .keyflags = "RW access delete"}},
    {"zrandmember", -2, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrandmember,
     {.summary = "Returns random members of a sorted set", .since = "6.2.0", .group = "sorted-set",
      .complexity = "O(N), N the set's size (with a count)",
      .args = "key:key ?options{count:integer ?withscores=WITHSCORES}", .keyflags = "RO access",
      .tips = "nondeterministic_output"}},
};
const int cmd_zset_count = (int)(sizeof(cmd_zset_table) / sizeof(cmd_zset_table[0]));
