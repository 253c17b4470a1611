/* zset_read.c - sorted sets (zset.h): what reads them without a change: a member's score and
 * rank, the ranks of a score or lex range, cursors, and zs_check. Calls nothing in zset.c (it
 * reads the member hash's seed, zs_member_seed); the layouts and the decoding it shares with the
 * writes are in zset_internal.h. */
#include "zset_internal.h"

#include <math.h>
#include <stdio.h>

/* ---- packed: scores in order ---- */

/* The score of the entry at *q, moving *q past it; prev is the last tag-0 value before it. */
static double pnext_score(const uint8_t **q, int64_t *prev)
{
    if (*(*q)++ == 0) {
        *prev += unzigzag(get_varint(q));
        return (double)*prev;
    }
    double d;
    memcpy(&d, *q, 8);
    *q += 8;
    uint8_t len = *(*q)++;
    *q += len;
    return d;
}

/* ---- big: walks by rank ---- */

/* The node of 0-based rank r (r < n). */
static struct znode *sl_at(const struct zbig *b, size_t r)
{
    size_t want = r + 1, traversed = 0;
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        while (x->lv[i].fwd != NULL && traversed + x->lv[i].span <= want) {
            traversed += x->lv[i].span;
            x = x->lv[i].fwd;
        }
        if (traversed == want)
            return x;
    }
    return NULL;
}

/* Members before the first one for which stop(x) holds, stop being monotone in set order. */
typedef int (*stop_fn)(const struct znode *x, const void *arg);

static size_t sl_count_before(const struct zbig *b, stop_fn stop, const void *arg)
{
    size_t traversed = 0;
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        while (x->lv[i].fwd != NULL && !stop(x->lv[i].fwd, arg)) {
            traversed += x->lv[i].span;
            x = x->lv[i].fwd;
        }
    }
    return traversed;
}

/* ---- public: lookups ---- */

/* Finds member m: in a big set its node (*node), in a packed one its index (*idx, *node NULL);
 * *score either way. 0 when m is not a member. */
static int locate(const struct zset *z, const char *m, size_t len, const struct znode **node,
                  int64_t *idx, double *score)
{
    if (z->kind == KIND_BIG) {
        const struct zbig *b = (const struct zbig *)z;
        int64_t i = hfind(b, m, len);
        if (i < 0)
            return 0;
        *node = b->tab[i];
        *score = b->tab[i]->score;
        return 1;
    }
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 0);
    struct pkey k;
    pkey_of(&k, m, len);
    int64_t i = pfind(&v, &k);
    if (i < 0)
        return 0;
    *node = NULL;
    *idx = i;
    *score = v.s[i];
    return 1;
}

int zs_score(const struct zset *z, const char *m, size_t len, double *score)
{
    const struct znode *t;
    int64_t i;
    return locate(z, m, len, &t, &i, score);
}

int zs_rank(const struct zset *z, const char *m, size_t len, size_t *rank)
{
    const struct znode *t;
    int64_t i;
    double score;
    if (!locate(z, m, len, &t, &i, &score))
        return 0;
    if (t == NULL) {
        *rank = (size_t)i;
        return 1;
    }
    struct znode *update[MAX_LEVEL];
    size_t r[MAX_LEVEL];
    sl_path((const struct zbig *)z, t->score, node_member(t), t->len, update, r);
    *rank = r[0]; /* members before it */
    return 1;
}

/* ---- public: ranges ---- */

static int score_gt_min(const struct znode *x, const void *arg)
{
    const struct zs_score_range *r = arg;
    return r->minex ? x->score > r->min : x->score >= r->min;
}

static int score_gt_max(const struct znode *x, const void *arg)
{
    const struct zs_score_range *r = arg;
    return r->maxex ? x->score >= r->max : x->score > r->max;
}

void zs_range_score(const struct zset *z, const struct zs_score_range *r, size_t *start,
                    size_t *end)
{
    size_t a, e;
    if (z->kind == KIND_BIG) {
        a = sl_count_before((const struct zbig *)z, score_gt_min, r);
        e = sl_count_before((const struct zbig *)z, score_gt_max, r);
    } else {
        /* Scores only, read in order from the block: a is the first above min, e the first
         * from there above max. */
        const uint8_t *q = pdata(z);
        int64_t prev = 0;
        struct znode probe;
        size_t i = 0;
        for (; i < z->n; i++) {
            probe.score = pnext_score(&q, &prev);
            if (score_gt_min(&probe, r))
                break;
        }
        a = i;
        for (; i < z->n; i++) {
            if (i > a)
                probe.score = pnext_score(&q, &prev);
            if (score_gt_max(&probe, r))
                break;
        }
        e = i;
    }
    *start = a;
    *end = e > a ? e : a;
}

/* Member vs a lex bound: <0, 0, >0 (a "-" bound is below everything, "+" above). */
static int lex_cmp(const char *m, size_t len, const struct zs_lex_bound *b)
{
    if (b->inf < 0)
        return 1;
    if (b->inf > 0)
        return -1;
    return cmp_member(m, len, b->p, b->len);
}

static int lex_gte_min(const char *m, size_t len, const struct zs_lex_bound *min)
{
    int c = lex_cmp(m, len, min);
    return min->ex ? c > 0 : c >= 0;
}

static int lex_lte_max(const char *m, size_t len, const struct zs_lex_bound *max)
{
    int c = lex_cmp(m, len, max);
    return max->ex ? c < 0 : c <= 0;
}

static int node_gte_min(const struct znode *x, const void *arg)
{
    return lex_gte_min(node_member(x), x->len, arg);
}

static int node_gt_max(const struct znode *x, const void *arg)
{
    return !lex_lte_max(node_member(x), x->len, arg);
}

/* Whether min <= max as bounds (an empty range otherwise), as Redis checks before searching. */
static int lex_range_nonempty(const struct zs_lex_bound *min, const struct zs_lex_bound *max)
{
    if (min->inf > 0 || max->inf < 0)
        return 0;
    if (min->inf < 0 || max->inf > 0)
        return 1;
    int c = cmp_member(min->p, min->len, max->p, max->len);
    return c < 0 || (c == 0 && !min->ex && !max->ex);
}

void zs_range_lex(const struct zset *z, const struct zs_lex_bound *min,
                  const struct zs_lex_bound *max, int reverse, size_t *start, size_t *end)
{
    size_t a = 0, e = 0;
    if (!lex_range_nonempty(min, max) || zcard(z) == 0) {
        *start = *end = 0;
        return;
    }
    if (z->kind == KIND_BIG) {
        /* Redis checks the ends first here too (zslIsInLexRange). */
        const struct zbig *b = (const struct zbig *)z;
        if (!node_gte_min(b->tail, min) || node_gt_max(b->head->lv[0].fwd, max)) {
            *start = *end = 0;
            return;
        }
        a = sl_count_before((const struct zbig *)z, node_gte_min, min);
        e = sl_count_before((const struct zbig *)z, node_gt_max, max);
        *start = a;
        *end = e > a ? e : a;
        return;
    }
    /* listpack's walk, step for step: the ends are checked first, then the scan starts from
     * the side the reply starts from and stops at the first member out of the range. */
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 1);
    uint32_t n = v.n;
    if (!lex_gte_min(v.m[n - 1], v.len[n - 1], min) || !lex_lte_max(v.m[0], v.len[0], max)) {
        *start = *end = 0;
        return;
    }
    if (!reverse) {
        while (a < n && !lex_gte_min(v.m[a], v.len[a], min))
            a++;
        e = a;
        while (e < n && lex_lte_max(v.m[e], v.len[e], max))
            e++;
    } else {
        e = n;
        while (e > 0 && !lex_lte_max(v.m[e - 1], v.len[e - 1], max))
            e--;
        a = e;
        while (a > 0 && lex_gte_min(v.m[a - 1], v.len[a - 1], min))
            a--;
    }
    *start = a;
    *end = e > a ? e : a;
}

/* ---- public: cursors ---- */

void zs_iter_seek(struct zs_iter *it, size_t rank)
{
    it->rank = rank;
    if (it->z->kind == KIND_BIG) {
        const struct zbig *b = (const struct zbig *)it->z;
        it->node = rank < b->n ? sl_at(b, rank) : NULL;
    }
}

void zs_iter_init(struct zs_iter *it, const struct zset *z, size_t rank, int reverse)
{
    it->z = z;
    it->reverse = reverse;
    it->n = 0;
    if (z->kind == KIND_PACKED) {
        struct pview v = {0, it->s, it->m, it->len, it->ib, NULL, NULL};
        pdecode(z, &v, 1);
        it->n = v.n;
    }
    zs_iter_seek(it, rank);
}

int zs_iter_next(struct zs_iter *it, struct zs_item *out)
{
    if (it->z->kind == KIND_PACKED) {
        if (it->rank >= it->n)
            return 0;
        out->m = it->m[it->rank];
        out->len = it->len[it->rank];
        out->score = it->s[it->rank];
        it->rank = it->reverse ? it->rank - 1 : it->rank + 1; /* wraps to SIZE_MAX: the end */
        return 1;
    }
    const struct znode *x = it->node;
    if (x == NULL)
        return 0;
    out->m = node_member(x);
    out->len = x->len;
    out->score = x->score;
    it->node = it->reverse ? x->back : x->lv[0].fwd;
    it->rank = it->reverse ? it->rank - 1 : it->rank + 1;
    return 1;
}

/* ---- public: score text ---- */

int zs_format_score(char *buf, double d)
{
    if (isinf(d))
        return sprintf(buf, "%s", d > 0 ? "inf" : "-inf");
    return snprintf(buf, 32, "%.17g", d);
}

/* ---- checks ---- */

int zs_check(const struct zset *z)
{
    if (z->kind == KIND_PACKED) {
        struct pbuf buf;
        struct pview v;
        pview_on(&v, &buf);
        pdecode(z, &v, 1);
        for (uint32_t i = 0; i < v.n; i++) {
            if (isnan(v.s[i]))
                return -1;
            if (i > 0 && cmp_entry(v.s[i - 1], v.m[i - 1], v.len[i - 1], v.s[i], v.m[i],
                                   v.len[i]) >= 0)
                return -2;
        }
        return v.n <= ZS_PACK_MAX_ENTRIES ? 0 : -3;
    }
    const struct zbig *b = (const struct zbig *)z;
    size_t n = 0, indexed = 0;
    const struct znode *prev = NULL;
    for (const struct znode *x = b->head->lv[0].fwd; x != NULL; x = x->lv[0].fwd) {
        if (x->back != prev || isnan(x->score))
            return -4;
        if (prev != NULL && cmp_entry(prev->score, node_member(prev), prev->len, x->score,
                                      node_member(x), x->len) >= 0)
            return -5;
        int64_t s = hfind(b, node_member(x), x->len);
        if (s < 0 || b->tab[s] != x)
            return -6;
        prev = x;
        n++;
    }
    if (n != b->n || b->tail != prev)
        return -7;
    for (size_t i = 0; i <= b->mask; i++)
        indexed += b->tab[i] != NULL;
    if (indexed != n)
        return -8;
    /* Spans: on every level, the span of a link is the rank difference of its ends. */
    for (int l = 0; l < b->level; l++) {
        size_t rank = 0;
        for (const struct znode *x = b->head; x->lv[l].fwd != NULL; x = x->lv[l].fwd) {
            const struct znode *y = x->lv[l].fwd;
            size_t r;
            if (!zs_rank(z, node_member(y), y->len, &r) || r + 1 != rank + x->lv[l].span)
                return -9;
            rank = r + 1;
        }
    }
    return 0;
}
