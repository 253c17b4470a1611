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

static void add_key_n(struct topk *t, int key, int times)
{
    char buf[16];
    snprintf(buf, sizeof buf, "k%d", key);
    for (int i = 0; i < times; i++)
        add_str(t, buf);
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

/* Adds that find their key leave the heap stale (topk.c): a takeover must still take the
 * counter with the smallest count now, not the one that was smallest when last sifted. */
Test(topk, takeover_takes_the_true_minimum)
{
    struct topk *t = make(10);
    for (int i = 0; i < 10; i++)
        add_key_n(t, i, 1);
    for (int i = 0; i < 10; i++)
        if (i != 7)
            add_key_n(t, i, 5 + i); /* every count but key 7's grows */
    add_key_n(t, 100, 1);           /* takes key 7's counter: count 2, error 1 */
    cr_expect_eq(topk_floor(t), 2);
    struct topk_item out[10];
    cr_assert_eq(topk_list(t, out, 10), 10);
    int seen100 = 0;
    for (int i = 0; i < 10; i++) {
        cr_expect(!(out[i].len == 2 && memcmp(out[i].key, "k7", 2) == 0), "k7 still listed");
        if (out[i].len == 4 && memcmp(out[i].key, "k100", 4) == 0) {
            seen100 = 1;
            cr_expect_eq(out[i].count, 2);
            cr_expect_eq(out[i].error, 1);
        }
    }
    cr_expect(seen100);
    /* And again, now that k100 and the others grew past key 0's count: key 0 goes. */
    add_key_n(t, 100, 50);
    for (int i = 1; i < 10; i++)
        if (i != 7)
            add_key_n(t, i, 50);
    add_key_n(t, 200, 1);
    cr_expect_eq(topk_floor(t), 7, "k200 took k0's 6 and added 1");
    cr_assert_eq(topk_list(t, out, 10), 10);
    for (int i = 0; i < 10; i++)
        cr_expect(!(out[i].len == 2 && memcmp(out[i].key, "k0", 2) == 0), "k0 still listed");
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

/* ---- merged sketches (topk_merge) ---- */

static struct topk *make_merged(uint32_t k)
{
    size_t n = topk_merged_bytes(k);
    cr_assert_gt(n, 0);
    struct topk *t = topk_merged_init(malloc(n), k);
    cr_assert_not_null(t);
    return t;
}

static void add_key(struct topk *t, int key)
{
    char buf[16];
    snprintf(buf, sizeof buf, "k%d", key);
    /* Every part must hash alike: the same seed here, the keyspace's hash in the daemon. */
    topk_add_hashed(t, buf, strlen(buf), topk_hash(seed, buf, strlen(buf)));
}

Test(topk_merge, exact_while_no_counter_taken)
{
    struct topk *a = make(10), *b = make(10);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j <= i; j++)
            add_key(j % 2 ? a : b, i); /* key i: i + 1 events split between the parts */
    cr_expect_eq(topk_floor(a), 0);
    cr_expect_eq(topk_floor(b), 0);
    struct topk *m = make_merged(20);
    cr_assert_eq(topk_merge(m, a), 0);
    cr_assert_eq(topk_merge(m, b), 0);
    cr_expect_eq(topk_total(m), 55);
    cr_expect_eq(topk_floor(m), 0);
    struct topk_item out[20];
    cr_assert_eq(topk_list(m, out, 20), 10);
    for (int i = 0; i < 10; i++) {
        char want[16];
        snprintf(want, sizeof want, "k%d", 9 - i);
        cr_expect(out[i].len == strlen(want) && memcmp(out[i].key, want, out[i].len) == 0,
                  "rank %d: %.*s", i, (int)out[i].len, out[i].key);
        cr_expect_eq(out[i].count, (uint64_t)(10 - i));
        cr_expect_eq(out[i].error, 0);
    }
    /* Merging is not adding: a merged sketch is no part, and a full one refuses new keys. */
    cr_expect_eq(topk_merge(m, m), -1);
    cr_expect_eq(topk_merge(a, b), -1);
    struct topk *small = make_merged(10);
    struct topk *c = make(10);
    add_key(c, 100);
    cr_expect_eq(topk_merge(small, b), 0); /* 10 keys: every counter */
    cr_expect_eq(topk_merge(small, c), -1);
    topk_clear(m);
    cr_expect_eq(topk_total(m), 0);
    cr_expect_eq(topk_list(m, out, 20), 0);
    free(a), free(b), free(c), free(m), free(small);
}

Test(topk_merge, floor_is_the_smallest_count_once_taken)
{
    struct topk *t = make(10);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 3; j++)
            add_key(t, i);
    cr_expect_eq(topk_floor(t), 0, "full, but nothing taken over: unlisted keys unseen");
    add_key(t, 99); /* takes a count-3 counter: 4 */
    cr_expect_eq(topk_floor(t), 3);
    topk_clear(t);
    cr_expect_eq(topk_floor(t), 0);
    free(t);
}

/* Merges the parts and checks the bounds topk.h states for merged sketches against the exact
 * counts: count - error <= true <= count, count - true <= floor sum <= N/k, and every key seen
 * more than N/k times among the k highest. */
static void check_merged(struct topk **parts, int nparts, const uint64_t *truth, int nkeys)
{
    uint32_t k = topk_size(parts[0]);
    struct topk *m = make_merged(k * (uint32_t)nparts);
    uint64_t floors = 0;
    for (int p = 0; p < nparts; p++) {
        cr_assert_eq(topk_merge(m, parts[p]), 0);
        cr_expect_leq(topk_floor(parts[p]) * k, topk_total(parts[p]), "a floor above N_t/k");
        floors += topk_floor(parts[p]);
    }
    uint64_t total = topk_total(m);
    cr_expect_eq(topk_floor(m), floors);
    struct topk_item *out = calloc(k, sizeof(*out));
    uint32_t n = topk_list(m, out, k);
    char *listed = calloc((size_t)nkeys, 1);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        cr_assert_lt(out[i].len, sizeof name);
        memcpy(name, out[i].key, out[i].len);
        name[out[i].len] = '\0';
        int key = atoi(name + 1);
        cr_assert(key >= 0 && key < nkeys);
        listed[key] = 1;
        cr_expect_leq(truth[key], out[i].count, "k%d under", key);
        cr_expect_geq(truth[key] + out[i].error, out[i].count, "k%d error too small", key);
        cr_expect_leq(out[i].count - truth[key], floors, "k%d over by more than the floors", key);
        cr_expect_leq((out[i].count - truth[key]) * k, total, "k%d over by more than N/k", key);
        cr_expect_leq(out[i].error * k, total, "error above N/k");
        if (i > 0)
            cr_expect_geq(out[i - 1].count, out[i].count, "not sorted at %u", i);
    }
    for (int key = 0; key < nkeys; key++)
        if (truth[key] * k > total)
            cr_expect(listed[key], "k%d seen %lu > N/k times but not among the top k", key,
                      (unsigned long)truth[key]);
    free(listed);
    free(out);
    free(m);
}

/* A Zipf-like stream spread over 1, 2, 3 and 16 parts, by turns and at random. */
Test(topk_merge, skewed_stream_split_bounds)
{
    enum { NKEYS = 20000, EVENTS = 200000, K = 100 };
    const int splits[] = {1, 2, 3, 16};
    for (int si = 0; si < 4; si++)
        for (int random_part = 0; random_part < 2; random_part++) {
            int np = splits[si];
            struct topk *parts[16];
            for (int p = 0; p < np; p++)
                parts[p] = make(K);
            uint64_t *truth = calloc(NKEYS, sizeof(*truth));
            uint64_t r = 88172645463325252ull + (uint64_t)si;
            for (int e = 0; e < EVENTS; e++) {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                double u = (double)(r >> 11) / 9007199254740992.0;
                int key = (int)((double)NKEYS * u * u * u * u);
                if (key >= NKEYS)
                    key = NKEYS - 1;
                int p = random_part ? (int)((r >> 3) % (uint64_t)np) : e % np;
                add_key(parts[p], key);
                truth[key]++;
            }
            check_merged(parts, np, truth, NKEYS);
            for (int p = 0; p < np; p++)
                free(parts[p]);
            free(truth);
        }
}

/* A key seen more than N/k times in all is seen more than N_t/k times in some part, so that
 * part lists it; but it may be under the threshold, and taken over, in every other part, where
 * the merge charges it that part's floor, as it does every other key. Here two keys get 90 of
 * 1000 events in each of three parts (under N_t/k = 100) and 160 in the fourth, 430 in all
 * against N/k = 400, among singletons that keep every floor high. */
Test(topk_merge, key_under_the_threshold_in_most_parts)
{
    enum { K = 10, NP = 4, PER = 1000, NKEYS = 2 + NP * PER };
    struct topk *parts[NP];
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    int single = 2;
    uint64_t r = 7;
    for (int p = 0; p < NP; p++) {
        parts[p] = make(K);
        int ev[PER];
        int heavy = p < NP - 1 ? 90 : 160;
        for (int e = 0; e < PER; e++)
            ev[e] = e < heavy ? 0 : e < 2 * heavy ? 1 : single++;
        for (int e = PER - 1; e > 0; e--) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int j = (int)((r >> 33) % (uint64_t)(e + 1));
            int t = ev[e];
            ev[e] = ev[j];
            ev[j] = t;
        }
        for (int e = 0; e < PER; e++) {
            add_key(parts[p], ev[e]);
            truth[ev[e]]++;
        }
    }
    cr_assert_eq(truth[0], 430);
    cr_assert_gt(truth[0] * K, (uint64_t)(NP * PER));
    for (int p = 0; p < NP; p++)
        cr_expect_gt(topk_floor(parts[p]), 0, "part %d never took a counter over", p);
    check_merged(parts, NP, truth, NKEYS);
    for (int p = 0; p < NP; p++)
        free(parts[p]);
    free(truth);
}

/* The shape split over two parts (two I/O threads): the three heavy keys come first,
 * in order, with the exact-count bound. */
Test(topk_merge, heavy_keys_among_singletons_two_parts)
{
    enum { NKEYS = 10003 };
    struct topk *parts[2] = {make(100), make(100)};
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    int left[3] = {500, 300, 200};
    int single = 3;
    uint64_t r = 12345;
    for (int e = 0; single < NKEYS || left[0] + left[1] + left[2] > 0; e++) {
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
        add_key(parts[(r >> 20) & 1], key);
        truth[key]++;
    }
    check_merged(parts, 2, truth, NKEYS);
    struct topk *m = make_merged(200);
    cr_assert_eq(topk_merge(m, parts[0]), 0);
    cr_assert_eq(topk_merge(m, parts[1]), 0);
    struct topk_item out[3];
    cr_assert_eq(topk_list(m, out, 3), 3);
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof want, "k%d", i);
        cr_expect(out[i].len == strlen(want) && memcmp(out[i].key, want, out[i].len) == 0,
                  "rank %d: %.*s", i, (int)out[i].len, out[i].key);
    }
    free(truth);
    free(m);
    free(parts[0]);
    free(parts[1]);
}

/* A key counted in a part and then taken over there still has those events: the merge must
 * charge it that part's floor, or its merged count falls under the truth. */
Test(topk_merge, taken_over_key_charged_the_floor)
{
    struct topk *a = make(10), *b = make(10);
    uint64_t truth[2000] = {0};
    for (int i = 0; i < 60; i++)
        add_key(a, 0);
    for (int s = 1; s < 2000; s++)
        add_key(a, s); /* floods a: key 0 is taken over */
    for (int i = 0; i < 500; i++)
        add_key(b, 0);
    truth[0] = 560;
    for (int s = 1; s < 2000; s++)
        truth[s] = 1;
    struct topk_item out[10];
    int in_a = 0;
    for (uint32_t i = 0, n = topk_list(a, out, 10); i < n; i++)
        in_a += out[i].len == 2 && memcmp(out[i].key, "k0", 2) == 0;
    cr_assert_eq(in_a, 0, "key 0 should have been taken over in a");
    struct topk *parts[2] = {a, b};
    check_merged(parts, 2, truth, 2000);
    free(a);
    free(b);
}
