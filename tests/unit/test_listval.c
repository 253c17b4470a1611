/* test_listval.c - the list value (src/store/listval.c) against a plain array model driven by a
 * seeded random stream: one block, the deque of blocks, and the conversions both ways. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/keyspace.h"
#include "rlimitd/listval.h"

struct str {
    char *p;
    size_t len;
};

struct model {
    struct str *e;
    size_t n, cap;
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Elements of every encoding: small and 13-digit integers, integer look-alikes that are not
 * canonical, short, 300-byte and 5000-byte strings, the empty string. */
static void gen(char *buf, size_t *len)
{
    switch (rnd() % 10) {
    case 0:
        *len = (size_t)sprintf(buf, "%d", (int)(rnd() % 5));
        break;
    case 1:
        *len = (size_t)sprintf(buf, "%lld", 1700000000000LL + (long long)(rnd() % 1000));
        break;
    case 2:
        *len = (size_t)sprintf(buf, "%lld", -(long long)(rnd() % 300));
        break;
    case 3: {
        static const char *odd[] = {
            "007", "-0", "+1", "9223372036854775808", "-9223372036854775808", "9223372036854775807",
            "-",   "1 "};
        const char *s = odd[rnd() % 8];
        *len = strlen(s);
        memcpy(buf, s, *len);
        break;
    }
    case 4:
        *len = 0;
        break;
    case 5:
        *len = 300;
        memset(buf, 'a' + (int)(rnd() % 3), *len);
        break;
    case 6:
        if (rnd() % 4 == 0) {
            *len = rnd() % 8 == 0 ? 66000 : 5000;
            memset(buf, 'z', *len);
            break;
        }
        /* fall through */
    default:
        *len = (size_t)sprintf(buf, "e%d", (int)(rnd() % 6));
        break;
    }
}

static void m_insert(struct model *m, size_t idx, const char *s, size_t len)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->e = realloc(m->e, m->cap * sizeof(*m->e));
    }
    memmove(m->e + idx + 1, m->e + idx, (m->n - idx) * sizeof(*m->e));
    m->e[idx].p = malloc(len + 1);
    memcpy(m->e[idx].p, s, len);
    m->e[idx].len = len;
    m->n++;
}

static void m_remove(struct model *m, size_t idx, size_t k)
{
    for (size_t i = idx; i < idx + k; i++)
        free(m->e[i].p);
    memmove(m->e + idx, m->e + idx + k, (m->n - idx - k) * sizeof(*m->e));
    m->n -= k;
}

static int m_eq(const struct str *a, const char *s, size_t len)
{
    return a->len == len && memcmp(a->p, s, len) == 0;
}

static size_t m_rem(struct model *m, const char *s, size_t len, int64_t count)
{
    size_t removed = 0, limit = count == 0 ? SIZE_MAX : (size_t)(count < 0 ? -count : count);
    if (count >= 0) {
        for (size_t i = 0; i < m->n && removed < limit;)
            if (m_eq(&m->e[i], s, len)) {
                m_remove(m, i, 1);
                removed++;
            } else {
                i++;
            }
    } else {
        for (size_t i = m->n; i-- > 0 && removed < limit;)
            if (m_eq(&m->e[i], s, len)) {
                m_remove(m, i, 1);
                removed++;
            }
    }
    return removed;
}

static void check(const struct listval *l, const struct model *m, uint64_t seed, int step)
{
    cr_assert_eq(lv_count(l), m->n, "seed %llu step %d: count", (unsigned long long)seed, step);
    struct lv_elem e;
    struct lv_iter it;
    size_t i = 0;
    lv_iter_init(&it, l, 0, 0);
    while (lv_next(&it, &e)) {
        cr_assert(i < m->n && m_eq(&m->e[i], e.p, e.len), "seed %llu step %d: forward %zu",
                  (unsigned long long)seed, step, i);
        i++;
    }
    cr_assert_eq(i, m->n);
    if (m->n == 0)
        return;
    lv_iter_init(&it, l, m->n - 1, 1);
    i = m->n;
    while (lv_next(&it, &e)) {
        i--;
        cr_assert(m_eq(&m->e[i], e.p, e.len), "seed %llu step %d: reverse %zu",
                  (unsigned long long)seed, step, i);
    }
    cr_assert_eq(i, 0);
    for (int t = 0; t < 4; t++) {
        size_t j = rnd() % m->n;
        lv_get(l, j, &e);
        cr_assert(m_eq(&m->e[j], e.p, e.len), "seed %llu step %d: get %zu",
                  (unsigned long long)seed, step, j);
    }
    /* An iterator from the middle, both ways. */
    size_t start = rnd() % m->n;
    lv_iter_init(&it, l, start, 0);
    cr_assert(lv_next(&it, &e) && m_eq(&m->e[start], e.p, e.len));
    lv_iter_init(&it, l, start, 1);
    cr_assert(lv_next(&it, &e) && m_eq(&m->e[start], e.p, e.len));
}

static void run(uint64_t seed, int steps, size_t grow_to)
{
    rng_state = seed * 2654435761u + 1;
    struct model m = {0};
    struct listval *l = lv_new();
    static char buf[70000];
    size_t len;
    int saw_big = 0, saw_repack = 0;
    for (int step = 0; step < steps; step++) {
        int op = (int)(rnd() % 100);
        /* Bias toward growth until grow_to, then toward shrinking. */
        int grow = m.n < grow_to;
        if (op < (grow ? 55 : 25)) {
            gen(buf, &len);
            size_t idx = rnd() % 3 == 0 ? 0 : rnd() % 3 == 0 ? m.n : rnd() % (m.n + 1);
            lv_insert(&l, idx, buf, len);
            m_insert(&m, idx, buf, len);
        } else if (op < 75 && m.n > 0) {
            size_t idx = rnd() % m.n, k = 1 + rnd() % (rnd() % 8 == 0 ? m.n - idx : 3);
            if (k > m.n - idx)
                k = m.n - idx;
            lv_remove(&l, idx, k);
            m_remove(&m, idx, k);
        } else if (op < 85 && m.n > 0) {
            size_t idx = rnd() % m.n;
            gen(buf, &len);
            lv_set(&l, idx, buf, len);
            m_remove(&m, idx, 1);
            m_insert(&m, idx, buf, len);
        } else if (op < 95) {
            gen(buf, &len);
            int64_t count = (int64_t)(rnd() % 7) - 3;
            size_t a = lv_rem(&l, buf, len, count), b = m_rem(&m, buf, len, count);
            cr_assert_eq(a, b, "seed %llu step %d: rem", (unsigned long long)seed, step);
        } else {
            struct listval *c = lv_clone(l);
            lv_free(l);
            l = c;
        }
        if (!lv_is_packed(l))
            saw_big = 1;
        else if (saw_big)
            saw_repack = 1;
        cr_assert(lv_bytes(l) > 0);
        check(l, &m, seed, step);
    }
    if (grow_to > LV_NODE_MAX_COUNT * 2)
        cr_assert(saw_big, "seed %llu never became a deque", (unsigned long long)seed);
    (void)saw_repack;
    lv_free(l);
    m_remove(&m, 0, m.n);
    free(m.e);
}

Test(listval, small_lists_against_model)
{
    for (uint64_t seed = 1; seed <= 40; seed++)
        run(seed, 400, 20);
}

Test(listval, big_lists_against_model)
{
    for (uint64_t seed = 100; seed <= 110; seed++)
        run(seed, 3000, 1500);
}

Test(listval, integers_come_back_as_written)
{
    static const char *v[] = {"0",
                              "-1",
                              "127",
                              "128",
                              "-128",
                              "-129",
                              "1700000000123",
                              "9223372036854775807",
                              "-9223372036854775808",
                              "007",
                              "-0",
                              "+5",
                              "1e3",
                              "12345678901234567890",
                              " 1",
                              "",
                              "549755813887",
                              "549755813888",
                              "-549755813888",
                              "-549755813889",
                              "17592186044415",
                              "17592186044416",
                              "-17592186044416",
                              "-17592186044417",
                              "140737488355327",
                              "140737488355328"};
    size_t n = sizeof(v) / sizeof(v[0]);
    struct listval *l = lv_new();
    for (size_t i = 0; i < n; i++)
        lv_insert(&l, lv_count(l), v[i], strlen(v[i]));
    for (size_t i = 0; i < n; i++) {
        struct lv_elem e;
        lv_get(l, i, &e);
        cr_assert(e.len == strlen(v[i]) && memcmp(e.p, v[i], e.len) == 0, "%s", v[i]);
    }
    /* "007" is not the integer 7, and 7 is not "007". */
    cr_assert_eq(lv_rem(&l, "7", 1, 0), 0);
    cr_assert_eq(lv_rem(&l, "007", 3, 0), 1);
    cr_assert_eq(lv_rem(&l, "-1", 2, 0), 1);
    lv_free(l);
}

Test(listval, moving_window_stays_one_small_block)
{
    /* LPUSH ts + LTRIM 0 9: ten 13-digit timestamps take 6 bytes each. */
    struct listval *l = lv_new();
    char buf[32];
    for (int i = 0; i < 1000; i++) {
        int len = sprintf(buf, "%lld", 1700000000000LL + i);
        lv_insert(&l, 0, buf, (size_t)len);
        if (lv_count(l) > 10)
            lv_remove(&l, 10, lv_count(l) - 10);
    }
    cr_assert(lv_is_packed(l));
    cr_assert_eq(lv_count(l), 10);
    /* Eleven elements (after the push, before the trim) fit the same malloc block as ten. */
    cr_assert_leq(lv_bytes(l), 72, "%zu bytes", lv_bytes(l));
    struct lv_elem e;
    lv_get(l, 0, &e);
    cr_assert(e.len == 13 && memcmp(e.p, "1700000000999", 13) == 0);
    lv_free(l);
}

Test(listval, elements_past_64k)
{
    size_t big = 70000;
    char *s = malloc(big);
    memset(s, 'q', big);
    struct listval *l = lv_new();
    lv_insert(&l, 0, s, big);
    cr_assert(lv_is_packed(l));
    lv_insert(&l, 1, "a", 1);
    lv_insert(&l, 0, s, 65535 - 5);
    lv_insert(&l, 0, "b", 1);
    cr_assert_eq(lv_count(l), 4);
    struct lv_elem e;
    lv_get(l, 2, &e);
    cr_assert(e.len == big && memcmp(e.p, s, big) == 0);
    lv_get(l, 1, &e);
    cr_assert_eq(e.len, 65530);
    cr_assert_eq(lv_rem(&l, "a", 1, 0), 1);
    lv_remove(&l, 1, 1);
    lv_get(l, 1, &e);
    cr_assert(e.len == big && memcmp(e.p, s, big) == 0);
    lv_remove(&l, 0, 1);
    cr_assert(lv_is_packed(l));
    lv_get(l, 0, &e);
    cr_assert(e.len == big && memcmp(e.p, s, big) == 0);
    struct listval *c = lv_clone(l);
    lv_set(&c, 0, "z", 1);
    lv_get(c, 0, &e);
    cr_assert(e.len == 1 && e.p[0] == 'z');
    lv_free(c);
    lv_free(l);
    free(s);
}

Test(listval, a_million_pushes_and_pops_at_both_ends)
{
    struct listval *l = lv_new();
    char buf[32];
    for (int i = 0; i < 1000000; i++) {
        int len = sprintf(buf, "%d", i);
        lv_insert(&l, i % 2 ? lv_count(l) : 0, buf, (size_t)len);
    }
    cr_assert_eq(lv_count(l), 1000000);
    cr_assert(!lv_is_packed(l));
    struct lv_elem e;
    lv_get(l, 0, &e);
    cr_assert(e.len == 6 && memcmp(e.p, "999998", 6) == 0);
    lv_get(l, 999999, &e);
    cr_assert(e.len == 6 && memcmp(e.p, "999999", 6) == 0);
    /* Memory: at most a few bytes above the encoded size per element. */
    cr_assert_leq(lv_bytes(l), 1000000 * 8, "%zu", lv_bytes(l));
    while (lv_count(l) > 0) {
        lv_remove(&l, 0, 1);
        if (lv_count(l) > 0)
            lv_remove(&l, lv_count(l) - 1, 1);
    }
    cr_assert_eq(lv_count(l), 0);
    cr_assert(lv_is_packed(l));
    lv_free(l);
}

/* Memory accounting through the keyspace: whatever a list goes through (growth into a deque,
 * splits, merges, repacking, LREM, rewrites), deleting it brings used memory back exactly to
 * where it was, so the per-block byte counts never drift. */
Test(listval, keyspace_accounting_returns_to_zero)
{
    static const uint8_t seed[16] = {1, 2, 3};
    struct keyspace *ks = ks_create(2, seed);
    uint64_t base = ks_used_memory(ks);
    rng_state = 99;
    char buf[70000];
    size_t len;
    for (int key = 0; key < 8; key++) {
        char name[16];
        struct ks_key k;
        snprintf(name, sizeof(name), "list%d", key);
        ks_key_init(ks, &k, name, strlen(name));
        unsigned shard = ks_shard(ks, &k);
        for (int step = 0; step < 600; step++) {
            struct ks_lref r;
            ks_lock(ks, shard);
            cr_assert_eq(ks_list_open(ks, &k, 1, KS_H_CREATE, &r), KS_OK);
            size_t n = lv_count(r.l);
            int op = (int)(rnd() % 10);
            if (op < 5 || n == 0) {
                for (int i = 0; i < 1 + (int)(rnd() % 40); i++) {
                    gen(buf, &len);
                    lv_insert(&r.l, rnd() % (lv_count(r.l) + 1), buf, len);
                }
            } else if (op < 7) {
                size_t idx = rnd() % n;
                lv_remove(&r.l, idx, 1 + rnd() % (n - idx));
            } else if (op < 9) {
                gen(buf, &len);
                lv_rem(&r.l, buf, len, (int64_t)(rnd() % 5) - 2);
            } else {
                gen(buf, &len);
                lv_set(&r.l, rnd() % n, buf, len);
            }
            ks_list_close(ks, &k, &r, 1);
            ks_unlock(ks, shard);
        }
        ks_lock(ks, shard);
        ks_del(ks, &k, 1);
        /* The emptied shard's slabs go back at the idle sweep (ks_expire_cycle). */
        for (int r = 0; r < KS_IDLE_SWEEPS; r++)
            ks_expire_cycle(ks, shard, 1, 64);
        ks_unlock(ks, shard);
        cr_assert_eq(ks_used_memory(ks), base, "after list%d", key);
    }
    ks_destroy(&ks);
}
