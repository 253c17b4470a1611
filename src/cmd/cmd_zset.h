/* cmd_zset.h - what the sorted-set command areas share (cmd_zset.c, cmd_zset_read.c,
 * cmd_zset_trim.c, cmd_zset_random.c): range arguments with Redis 7.0's error texts, score
 * replies, opening the command's key, rank arithmetic. Static inline, as they were inside one
 * file: a Z command pays no call across files for them. */
#ifndef RLIMITD_CMD_ZSET_H
#define RLIMITD_CMD_ZSET_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_internal.h"
#include "cmd_notify.h"
#include "rlimitd/util.h"
#include "rlimitd/zset.h"

#define ERR_RANGE_FLOAT "ERR min or max is not a float"
#define ERR_RANGE_LEX "ERR min or max not valid string range item"

/* ---- range arguments ---- */

/* One end of a score range: "(" for exclusive. Redis reads it with strtod up to the first NUL,
 * so an empty argument is 0 and leading spaces are allowed; NaN is refused. */
static inline int parse_range_end(const char *p, double *d, int *ex)
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

static inline int parse_score_range(struct cmd_ctx *x, int imin, int imax,
                                    struct zs_score_range *r)
{
    if (parse_range_end(x->argv[imin], &r->min, &r->minex) != 0 ||
        parse_range_end(x->argv[imax], &r->max, &r->maxex) != 0) {
        reply_error(x->out, ERR_RANGE_FLOAT);
        return -1;
    }
    return 0;
}

static inline int parse_lex_end(const char *p, size_t len, struct zs_lex_bound *b, int is_max)
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

static inline int parse_lex_range(struct cmd_ctx *x, int imin, int imax, struct zs_lex_bound *min,
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

/* A score as Redis's addReplyDouble writes it: "%.17g" text, a bulk string in RESP2, a double
 * in RESP3. */
static inline void reply_score(struct rbuf *out, double d)
{
    char b[40];
    int n = zs_format_score(b, d);
    reply_double_text(out, b, (size_t)n);
}

/* How members come with their scores: not at all; as (member, score) pairs (flat in RESP2,
 * two-element arrays in RESP3: ZRANGE ... WITHSCORES, ZPOPMIN with a count); or flat in both
 * protocols (ZPOPMIN/ZPOPMAX without a count, as Redis 7.0 answers it). */
enum scores { SCORES_NONE, SCORES_PAIRS, SCORES_FLAT };

/* The array header of n members, with their scores as `scores` says. */
static inline void reply_members(struct rbuf *out, size_t n, enum scores scores)
{
    if (scores == SCORES_PAIRS)
        reply_pairs(out, (int64_t)n);
    else
        reply_array(out, (int64_t)(scores == SCORES_FLAT ? 2 * n : n));
}

/* One member of reply_members, and its score unless SCORES_NONE. */
static inline void reply_member(struct rbuf *out, const struct zs_item *item, enum scores scores)
{
    if (scores == SCORES_PAIRS)
        reply_pair(out);
    reply_bulk(out, item->m, item->len);
    if (scores != SCORES_NONE)
        reply_score(out, item->score);
}

/* Emits n members from rank `first` (ascending ranks), going down if reverse. */
static inline void emit_ranks(struct rbuf *out, const struct zset *z, size_t first, size_t n,
                              int reverse, enum scores scores)
{
    reply_members(out, n, scores);
    if (n == 0)
        return;
    struct zs_iter it;
    struct zs_item item;
    zs_iter_init(&it, z, first, reverse);
    for (size_t k = 0; k < n && zs_iter_next(&it, &item); k++)
        reply_member(out, &item, scores);
}

/* ---- the key ---- */

/* Opens the command's key (argv[1]); on an error replies it and returns -1. */
static inline int open_key(struct cmd_ctx *x, int mode, size_t size_hint, size_t member_hint,
                           struct ks_zref *ref)
{
    int rc = ks_zset_open(x->env->ks, &x->keys[0], x->now, mode, size_hint, member_hint, ref);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return -1;
    }
    return 0;
}

/* open_key for a read command (KS_Z_READ): a missing key raises keymiss, as Redis's read
 * lookup does. */
static inline int open_key_read(struct cmd_ctx *x, struct ks_zref *ref)
{
    if (open_key(x, KS_Z_READ, 0, 0, ref) != 0)
        return -1;
    if (ref->z == NULL)
        notify_keymiss(&x->keys[0]);
    return 0;
}

static inline void close_key(struct cmd_ctx *x, struct ks_zref *ref)
{
    ks_zset_close(x->env->ks, &x->keys[0], ref);
}

/* ---- ranks ---- */

enum range_type { RANGE_AUTO, RANGE_RANK, RANGE_SCORE, RANGE_LEX };
enum range_dir { DIR_AUTO, DIR_FORWARD, DIR_REVERSE };

/* Rank arguments as Redis reads them: negative counts from the end. Returns the ascending
 * inclusive range as [*lo, *hi) in ascending ranks, empty when out of the set. */
static inline void rank_range(int64_t start, int64_t end, size_t card, int reverse, size_t *lo,
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

#endif
