/* test_topk.c - the space-saving sketch of LIMITER TOP (topk.h): exact while keys fit, and the
 * documented bounds (count - error <= true <= count, error <= N/k, every key seen more than N/k
 * times listed) on skewed and adversarial streams checked against exact counts. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/topk.h"

static const uint8_t seed[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static struct topk *make(uint32_t k)
{
    size_t n = topk_bytes(k);
    cr_assert_gt(n, 0);
    void *mem = malloc(n);
    cr_assert_not_null(mem);
    struct topk *t = topk_init(mem, k, seed);
    cr_assert_eq((void *)t, mem);
    return t;
}

static void add_str(struct topk *t, const char *s)
{
    topk_add(t, s, strlen(s));
}

Test(topk, size_range)
{
    cr_expect_eq(topk_bytes(TOPK_MIN_SIZE - 1), 0);
    cr_expect_eq(topk_bytes(TOPK_MAX_SIZE + 1), 0);
    cr_expect_gt(topk_bytes(TOPK_MIN_SIZE), 0);
    cr_expect_gt(topk_bytes(TOPK_MAX_SIZE), 0);
    char mem[64];
    cr_expect_null(topk_init(mem, 5, seed));
    cr_expect_null(topk_init(NULL, 100, seed));
}

Test(topk, exact_while_keys_fit)
{
    struct topk *t = make(10);
    struct topk_item out[20];
    cr_expect_eq(topk_list(t, out, 20), 0);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j <= i; j++) {
            char k[16];
            snprintf(k, sizeof k, "key%d", i);
            add_str(t, k);
        }
    cr_expect_eq(topk_total(t), 55);
    uint32_t n = topk_list(t, out, 20);
    cr_assert_eq(n, 10);
    for (uint32_t i = 0; i < n; i++) {
        char k[16];
        snprintf(k, sizeof k, "key%u", 9 - i);
        cr_expect_eq(out[i].len, strlen(k));
        cr_expect(memcmp(out[i].key, k, out[i].len) == 0, "rank %u: %.*s", i, (int)out[i].len,
                  out[i].key);
        cr_expect_eq(out[i].count, 10 - i);
        cr_expect_eq(out[i].error, 0);
    }
    /* A shorter list is the head of the longer one. */
    cr_expect_eq(topk_list(t, out, 3), 3);
    cr_expect_eq(out[0].count, 10);
    cr_expect_eq(out[2].count, 8);
    cr_expect_eq(topk_list(t, out, 0), 0);
    topk_clear(t);
    cr_expect_eq(topk_total(t), 0);
    cr_expect_eq(topk_list(t, out, 20), 0);
    free(t);
}

Test(topk, ties_order_by_key)
{
    struct topk *t = make(10);
    add_str(t, "b");
    add_str(t, "a");
    add_str(t, "ab");
    struct topk_item out[3];
    cr_assert_eq(topk_list(t, out, 3), 3);
    cr_expect(out[0].len == 1 && out[0].key[0] == 'a');
    cr_expect(out[1].len == 2 && memcmp(out[1].key, "ab", 2) == 0);
    cr_expect(out[2].len == 1 && out[2].key[0] == 'b');
    free(t);
}

/* Checks every documented bound against the exact counts truth[0..nkeys). */
static void check_bounds(const struct topk *t, const uint64_t *truth, int nkeys)
{
    uint32_t k = topk_size(t);
    uint64_t total = topk_total(t);
    struct topk_item *out = calloc(k, sizeof(*out));
    uint32_t n = topk_list(t, out, k);
    char *listed = calloc((size_t)nkeys, 1);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        cr_assert_lt(out[i].len, sizeof name);
        memcpy(name, out[i].key, out[i].len);
        name[out[i].len] = '\0';
        int key = atoi(name + 1); /* "k<number>" */
        cr_assert(key >= 0 && key < nkeys);
        listed[key] = 1;
        cr_expect_leq(truth[key], out[i].count, "k%d over: %lu > %lu", key,
                      (unsigned long)truth[key], (unsigned long)out[i].count);
        cr_expect_geq(truth[key] + out[i].error, out[i].count, "k%d error too small", key);
        cr_expect_leq(out[i].error * k, total, "error %lu above N/k", (unsigned long)out[i].error);
        if (i > 0)
            cr_expect_geq(out[i - 1].count, out[i].count, "not sorted at %u", i);
    }
    for (int key = 0; key < nkeys; key++)
        if (truth[key] * k > total)
            cr_expect(listed[key], "k%d seen %lu > N/k times but not listed", key,
                      (unsigned long)truth[key]);
    free(listed);
    free(out);
}

Test(topk, skewed_stream_bounds)
{
    enum { NKEYS = 20000, EVENTS = 200000 };
    struct topk *t = make(100);
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    uint64_t r = 88172645463325252ull;
    for (int e = 0; e < EVENTS; e++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        /* Roughly Zipfian: small keys far more often. */
        double u = (double)(r >> 11) / 9007199254740992.0;
        int key = (int)((double)NKEYS * u * u * u * u);
        if (key >= NKEYS)
            key = NKEYS - 1;
        char buf[16];
        snprintf(buf, sizeof buf, "k%d", key);
        add_str(t, buf);
        truth[key]++;
    }
    cr_expect_eq(topk_total(t), EVENTS);
    check_bounds(t, truth, NKEYS);
    free(truth);
    free(t);
}

/* The shape: three heavy keys interleaved with many keys seen once, sketch of 100. */
Test(topk, heavy_keys_among_singletons)
{
    enum { NKEYS = 10003 };
    struct topk *t = make(100);
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    int left[3] = {500, 300, 200};
    int single = 3;
    uint64_t r = 12345;
    while (single < NKEYS || left[0] + left[1] + left[2] > 0) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int pick = (int)((r >> 33) % 12);
        int key;
        if (pick < 3 && left[pick] > 0) {
            key = pick;
            left[pick]--;
        } else if (single < NKEYS) {
            key = single++;
        } else {
            continue;
        }
        char buf[16];
        snprintf(buf, sizeof buf, "k%d", key);
        add_str(t, buf);
        truth[key]++;
    }
    check_bounds(t, truth, NKEYS);
    struct topk_item out[3];
    cr_assert_eq(topk_list(t, out, 3), 3);
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof want, "k%d", i);
        cr_expect(out[i].len == strlen(want) && memcmp(out[i].key, want, out[i].len) == 0,
                  "rank %d: %.*s", i, (int)out[i].len, out[i].key);
    }
    free(truth);
    free(t);
}

/* Every event a new key: every counter is taken over again and again (table removals). */
Test(topk, all_distinct_churn)
{
    struct topk *t = make(10);
    for (int i = 0; i < 100000; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "k%d", i);
        add_str(t, buf);
    }
    /* One key now repeated must be found again every time, not inserted twice. */
    for (int i = 0; i < 50000; i++)
        add_str(t, "hot");
    struct topk_item out[10];
    cr_assert_eq(topk_list(t, out, 10), 10);
    cr_expect(out[0].len == 3 && memcmp(out[0].key, "hot", 3) == 0);
    cr_expect_geq(out[0].count, 50000);
    cr_expect_leq(out[0].count - out[0].error, 50000);
    int hot = 0;
    for (int i = 0; i < 10; i++)
        hot += out[i].len == 3 && memcmp(out[i].key, "hot", 3) == 0;
    cr_expect_eq(hot, 1);
    free(t);
}

Test(topk, long_keys)
{
    struct topk *t = make(10);
    char a[1000], b[1000];
    memset(a, 'x', sizeof a);
    memcpy(b, a, sizeof b);
    b[999] = 'y'; /* same first TOPK_KEY_MAX bytes, same length, different key */
    topk_add(t, a, sizeof a);
    topk_add(t, a, sizeof a);
    topk_add(t, b, sizeof b);
    topk_add(t, a, 500); /* a prefix of a: another key */
    struct topk_item out[10];
    cr_assert_eq(topk_list(t, out, 10), 3);
    cr_expect_eq(out[0].count, 2);
    cr_expect_eq(out[0].len, TOPK_KEY_MAX);
    cr_expect_eq(out[1].count, 1);
    cr_expect_eq(out[2].count, 1);
    free(t);
}
