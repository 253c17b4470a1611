/* cmd_zset_read.c - the sorted set commands that read: ZCARD, ZSCORE, ZMSCORE, ZRANK,
 * ZREVRANK, ZCOUNT, ZLEXCOUNT, and ZRANGE with its older forms (docs/COMMANDS.md, Sorted sets).
 * Every range reduces to a rank interval and a cursor over it (docs/DESIGN.md "Sorted sets"). */
#include "cmd_zset.h"

/* ---- single-member reads ---- */

static void cmd_zcard(struct cmd_ctx *x)
{
    struct ks_zref ref;
    if (open_key_read(x, &ref) != 0)
        return;
    reply_int(x->out, ref.z != NULL ? (int64_t)zs_card(ref.z) : 0);
    close_key(x, &ref);
}

static void cmd_zscore(struct cmd_ctx *x)
{
    struct ks_zref ref;
    double d;
    if (open_key_read(x, &ref) != 0)
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
    if (open_key_read(x, &ref) != 0)
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
    if (open_key_read(x, &ref) != 0)
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
    if (parse_score_range(x, 2, 3, &r) != 0 || open_key_read(x, &ref) != 0)
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
    if (parse_lex_range(x, 2, 3, &min, &max) != 0 || open_key_read(x, &ref) != 0)
        return;
    if (ref.z != NULL)
        zs_range_lex(ref.z, &min, &max, 0, &a, &e);
    close_key(x, &ref);
    reply_int(x->out, (int64_t)(e - a));
}

/* ---- ranges ---- */

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
    if (open_key_read(x, &ref) != 0)
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
    emit_ranks(x->out, ref.z, reverse ? hi - 1 : lo, n, reverse,
               withscores ? SCORES_PAIRS : SCORES_NONE);
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

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_zset_read_table[] = {
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
};
const int cmd_zset_read_count = (int)(sizeof(cmd_zset_read_table) / sizeof(cmd_zset_read_table[0]));
