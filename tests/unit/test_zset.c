/* test_zset.c - the sorted set data structure (src/zset.c), against a plain sorted array model
 * driven by a seeded random stream, in both encodings and across the packed -> big conversion. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/zset.h"

struct ment {
    double s;
    char m[80];
    size_t len;
};

struct model {
    struct ment *e;
    size_t n, cap;
};

static int ment_cmp(const void *a, const void *b)
{
    const struct ment *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    size_t l = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->m, y->m, l);
    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static int64_t model_find(const struct model *md, const char *m, size_t len)
{
    for (size_t i = 0; i < md->n; i++)
        if (md->e[i].len == len && memcmp(md->e[i].m, m, len) == 0)
            return (int64_t)i;
    return -1;
}

static void model_set(struct model *md, const char *m, size_t len, double s)
{
    int64_t i = model_find(md, m, len);
    if (i < 0) {
        if (md->n == md->cap) {
            md->cap = md->cap ? md->cap * 2 : 64;
            md->e = realloc(md->e, md->cap * sizeof(*md->e));
        }
        i = (int64_t)md->n++;
        memcpy(md->e[i].m, m, len);
        md->e[i].len = len;
    }
    md->e[i].s = s;
    qsort(md->e, md->n, sizeof(*md->e), ment_cmp);
}

static void model_del(struct model *md, size_t i)
{
    memmove(&md->e[i], &md->e[i + 1], (md->n - i - 1) * sizeof(*md->e));
    md->n--;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Members: mostly integers equal to their score (the recipe's shape), some names, some long. */
static void random_member(char *m, size_t *len, double *s, uint64_t space)
{
    uint64_t k = rnd() % space;
    switch (rnd() % 4) {
    case 0:
    case 1:
        *s = (double)(1700000000000ll + (int64_t)k);
        *len = (size_t)sprintf(m, "%lld", (long long)(1700000000000ll + (int64_t)k));
        break;
    case 2:
        *s = (double)(rnd() % 50) / 4.0 - 3;
        *len = (size_t)sprintf(m, "m%llu", (unsigned long long)k);
        break;
    default:
        *s = (double)(rnd() % 7);
        if (rnd() % 8 == 0 && space > 100) /* longer than ZS_PACK_MAX_MEMBER: converts */
            *len = (size_t)sprintf(m, "long-member-%060llu", (unsigned long long)(k % 5));
        else
            *len = (size_t)sprintf(m, "n%llu", (unsigned long long)(k % 9));
        break;
    }
}

static void check_same(const struct zset *z, const struct model *md)
{
    cr_assert_eq(zs_check(z), 0, "invariants broken: %d", zs_check(z));
    cr_assert_eq(zs_card(z), md->n);
    struct zs_iter it;
    struct zs_item item;
    zs_iter_init(&it, z, 0, 0);
    for (size_t i = 0; i < md->n; i++) {
        cr_assert(zs_iter_next(&it, &item));
        cr_assert_eq(item.len, md->e[i].len);
        cr_assert(memcmp(item.m, md->e[i].m, item.len) == 0);
        cr_assert(item.score == md->e[i].s);
    }
    cr_assert_not(zs_iter_next(&it, &item));
    if (md->n > 0) {
        zs_iter_init(&it, z, md->n - 1, 1);
        for (size_t i = md->n; i-- > 0;) {
            cr_assert(zs_iter_next(&it, &item));
            cr_assert(item.score == md->e[i].s);
        }
        cr_assert_not(zs_iter_next(&it, &item));
    }
}

static void run_stream(uint64_t seed, uint64_t space, int ops)
{
    rng = seed;
    struct zset *z = zs_new(0, 0);
    struct model md = {0};
    for (int op = 0; op < ops; op++) {
        char m[80];
        size_t len;
        double s, out;
        int skipped;
        random_member(m, &len, &s, space);
        uint64_t what = rnd() % 10;
        if (what < 5) {
            int rc = zs_add(&z, m, len, s, 0, &out, &skipped);
            int had = model_find(&md, m, len) >= 0;
            cr_assert_eq(rc == ZS_ADDED, !had);
            model_set(&md, m, len, s == 0 ? 0 : s);
        } else if (what < 7) {
            int64_t i = model_find(&md, m, len);
            cr_assert_eq(zs_del(&z, m, len), i >= 0);
            if (i >= 0)
                model_del(&md, (size_t)i);
        } else if (what == 7) {
            struct zs_score_range r = {s - 2, s + 2, (int)(rnd() & 1), (int)(rnd() & 1)};
            size_t a, e, ea = 0, ee = 0;
            zs_range_score(z, &r, &a, &e);
            while (ea < md.n && (r.minex ? md.e[ea].s <= r.min : md.e[ea].s < r.min))
                ea++;
            ee = ea;
            while (ee < md.n && (r.maxex ? md.e[ee].s < r.max : md.e[ee].s <= r.max))
                ee++;
            cr_assert_eq(a, ea);
            cr_assert_eq(e, ee);
            if (rnd() % 4 == 0) {
                zs_del_range(&z, a, e);
                for (size_t k = a; k < e; k++)
                    model_del(&md, a);
            }
        } else if (what == 8) {
            int64_t i = model_find(&md, m, len);
            size_t r;
            cr_assert_eq(zs_rank(z, m, len, &r), i >= 0);
            if (i >= 0)
                cr_assert_eq(r, (size_t)i);
            double sc;
            cr_assert_eq(zs_score(z, m, len, &sc), i >= 0);
        } else {
            int rc = zs_add(&z, m, len, 1.5, ZS_INCR, &out, &skipped);
            int64_t i = model_find(&md, m, len);
            double want = (i >= 0 ? md.e[i].s : 0) + 1.5;
            cr_assert_eq(rc, i >= 0 ? ZS_UPDATED : ZS_ADDED);
            cr_assert(out == want);
            model_set(&md, m, len, want);
        }
        if (op % 97 == 0 || md.n < 140)
            check_same(z, &md);
    }
    check_same(z, &md);
    /* A copy is equal and independent. */
    struct zset *c = zs_dup(z);
    check_same(c, &md);
    zs_free(c);
    zs_free(z);
    free(md.e);
}

Test(zset, small_sets_match_the_model)
{
    for (uint64_t seed = 1; seed <= 20; seed++)
        run_stream(seed * 7919, 60, 1500);
}

Test(zset, big_sets_match_the_model)
{
    run_stream(424242, 3000, 20000);
}

Test(zset, recipe_shape_stays_packed_and_small)
{
    struct zset *z = zs_new(0, 0);
    double out;
    int skipped;
    for (int i = 0; i < 10; i++) {
        char m[24];
        int64_t t = 1700000000123ll + i * 997;
        int n = sprintf(m, "%lld", (long long)t);
        cr_assert_eq(zs_add(&z, m, (size_t)n, (double)t, 0, &out, &skipped), ZS_ADDED);
    }
    cr_assert(zs_is_packed(z));
    /* 8-byte header + 1 + 7 for the first + 9 * (1 + 2) deltas. */
    cr_assert_leq(zs_bytes(z), 56, "%zu bytes", zs_bytes(z));
    zs_free(z);
}

Test(zset, options_follow_redis)
{
    struct zset *z = zs_new(0, 0);
    double out;
    int skipped;
    cr_assert_eq(zs_add(&z, "a", 1, 1, ZS_XX, &out, &skipped), ZS_NOP);
    cr_assert(skipped);
    cr_assert_eq(zs_card(z), 0);
    cr_assert_eq(zs_add(&z, "a", 1, 5, 0, &out, &skipped), ZS_ADDED);
    cr_assert_eq(zs_add(&z, "a", 1, 4, ZS_GT, &out, &skipped), ZS_NOP);
    cr_assert(skipped && out == 5);
    cr_assert_eq(zs_add(&z, "a", 1, 6, ZS_GT, &out, &skipped), ZS_UPDATED);
    cr_assert_eq(zs_add(&z, "a", 1, 6, 0, &out, &skipped), ZS_NOP);
    cr_assert_not(skipped);
    cr_assert_eq(zs_add(&z, "a", 1, 1, ZS_NX, &out, &skipped), ZS_NOP);
    cr_assert_eq(zs_add(&z, "a", 1, INFINITY, 0, &out, &skipped), ZS_UPDATED);
    cr_assert_eq(zs_add(&z, "a", 1, -INFINITY, ZS_INCR, &out, &skipped), ZS_NAN);
    cr_assert_eq(zs_add(&z, "b", 1, -0.0, 0, &out, &skipped), ZS_ADDED);
    cr_assert(signbit(out), "the score as given is what ZADD INCR answers");
    cr_assert(zs_score(z, "b", 1, &out));
    cr_assert_not(signbit(out), "a packed set stores -0 as 0");
    zs_free(z);
    z = zs_new(1000, 0);
    cr_assert_not(zs_is_packed(z));
    cr_assert_eq(zs_add(&z, "b", 1, -0.0, 0, &out, &skipped), ZS_ADDED);
    cr_assert(zs_score(z, "b", 1, &out));
    cr_assert(signbit(out), "a big set keeps -0");
    zs_free(z);
}

Test(zset, lex_ranges)
{
    struct zset *z = zs_new(0, 0);
    double out;
    int skipped;
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        zs_add(&z, names[i], 1, 0, 0, &out, &skipped);
    struct zs_lex_bound lo = {"b", 1, 0, 0}, hi = {"d", 1, 0, 1};
    size_t a, e;
    zs_range_lex(z, &lo, &hi, 0, &a, &e);
    cr_assert_eq(a, 1);
    cr_assert_eq(e, 3);
    struct zs_lex_bound minus = {NULL, 0, -1, 0}, plus = {NULL, 0, 1, 0};
    zs_range_lex(z, &minus, &plus, 0, &a, &e);
    cr_assert_eq(e - a, 5);
    zs_range_lex(z, &plus, &minus, 0, &a, &e);
    cr_assert_eq(e - a, 0);
    zs_free(z);
}

Test(zset, score_format_is_redis_7_0s)
{
    char b[40];
    zs_format_score(b, 0.1);
    cr_assert_str_eq(b, "0.10000000000000001");
    zs_format_score(b, 1e20);
    cr_assert_str_eq(b, "1e+20");
    zs_format_score(b, 1.5e-7);
    cr_assert_str_eq(b, "1.4999999999999999e-07");
    zs_format_score(b, -INFINITY);
    cr_assert_str_eq(b, "-inf");
    zs_format_score(b, 16);
    cr_assert_str_eq(b, "16");
}
