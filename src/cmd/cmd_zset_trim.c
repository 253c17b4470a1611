/* cmd_zset_trim.c - the sorted set commands that remove by range or from an end:
 * ZREMRANGEBYSCORE (the rate-limit recipe's trim), ZREMRANGEBYRANK, ZREMRANGEBYLEX, ZPOPMIN,
 * ZPOPMAX (docs/COMMANDS.md, Sorted sets). */
#include "cmd_notify.h"
#include "cmd_zset.h"

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
    int emptied = hi > lo && (ref.z == NULL || zs_card(ref.z) == 0);
    close_key(x, &ref);
    if (hi > lo) {
        static const char *const events[] = {
            [RANGE_RANK] = "zremrangebyrank",
            [RANGE_SCORE] = "zremrangebyscore",
            [RANGE_LEX] = "zremrangebylex",
        };
        notify_key(NOTIFY_ZSET, events[type], &x->keys[0]);
    }
    if (emptied)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
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
    emit_ranks(x->out, ref.z, max ? card - 1 : 0, n, max,
               x->argc == 3 ? SCORES_PAIRS : SCORES_FLAT);
    if (max)
        zs_del_range(&ref.z, card - n, card);
    else
        zs_del_range(&ref.z, 0, n);
    ref.changed = n > 0;
    int emptied = n > 0 && (ref.z == NULL || zs_card(ref.z) == 0);
    close_key(x, &ref);
    if (n > 0)
        notify_key(NOTIFY_ZSET, max ? "zpopmax" : "zpopmin", &x->keys[0]);
    if (emptied)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
}

static void cmd_zpopmin(struct cmd_ctx *x)
{
    zpop(x, 0);
}

static void cmd_zpopmax(struct cmd_ctx *x)
{
    zpop(x, 1);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_zset_trim_table[] = {
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
};
const int cmd_zset_trim_count = (int)(sizeof(cmd_zset_trim_table) / sizeof(cmd_zset_trim_table[0]));
