/* Unit tests of the sharded keyspace: typed operations, lazy and active expiry, SCAN across
 * resizes, memory accounting, maxmemory. Time is passed explicitly, so no clock is involved. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/keyspace.h"

#define SEC 1000000000LL
#define MS 1000000LL
#define T0 (1800000000LL * SEC) /* an arbitrary wall-clock instant in 2027 */

static struct keyspace *ks;
static const uint8_t seed[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void setup(void)
{
    ks = ks_create(4, seed);
    cr_assert_not_null(ks);
}

static void teardown(void)
{
    ks_destroy(&ks);
    cr_assert_null(ks);
}

TestSuite(keyspace, .init = setup, .fini = teardown);

/* Single-threaded: no shard locks are needed here. */
static struct ks_key key(const char *s)
{
    struct ks_key k;
    ks_key_init(ks, &k, s, strlen(s));
    return k;
}

static struct ks_key keyn(char *buf, size_t cap, int i)
{
    int n = snprintf(buf, cap, "key:%d", i);
    struct ks_key k;
    ks_key_init(ks, &k, buf, (size_t)n);
    return k;
}

Test(keyspace, set_get_del)
{
    struct ks_key k = key("a");
    struct ks_value v;
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_NONE);
    cr_assert_eq(ks_set(ks, &k, T0, "42", 2, 0, 0), 1);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_INT);
    cr_assert_eq(v.i, 42);
    cr_assert_eq(ks_set(ks, &k, T0, "hello", 5, 0, 0), 1);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
    cr_assert_eq(v.len, 5);
    cr_assert_arr_eq(v.p, "hello", 5);
    cr_assert_eq(ks_key_count(ks), 1);
    cr_assert_eq(ks_del(ks, &k, T0), 1);
    cr_assert_eq(ks_del(ks, &k, T0), 0);
    cr_assert_eq(ks_key_count(ks), 0);
}

Test(keyspace, binary_keys_are_distinct)
{
    struct ks_key a, b;
    ks_key_init(ks, &a, "x\0y", 3);
    ks_key_init(ks, &b, "x\0z", 3);
    cr_assert_eq(ks_set(ks, &a, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(ks_get(ks, &b, T0, NULL), KS_NONE);
    cr_assert_eq(ks_get(ks, &a, T0, NULL), KS_INT);
}

Test(keyspace, set_nx_xx_keepttl)
{
    struct ks_key k = key("k");
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, KS_SET_XX), 0);
    cr_assert_eq(ks_get(ks, &k, T0, NULL), KS_NONE);
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, T0 + 10 * SEC, KS_SET_NX), 1);
    cr_assert_eq(ks_set(ks, &k, T0, "2", 1, 0, KS_SET_NX), 0);
    cr_assert_eq(ks_set(ks, &k, T0, "3", 1, 0, KS_SET_XX | KS_SET_KEEPTTL), 1);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 10 * SEC);
    cr_assert_eq(ks_set(ks, &k, T0, "4", 1, 0, 0), 1);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), -1);
    cr_assert_eq(ks_expires_count(ks), 0);
}

Test(keyspace, incrby_rules)
{
    struct ks_key k = key("c");
    int64_t v = 0;
    cr_assert_eq(ks_incrby(ks, &k, T0, 5, &v), KS_OK);
    cr_assert_eq(v, 5);
    cr_assert_eq(ks_incrby(ks, &k, T0, -7, &v), KS_OK);
    cr_assert_eq(v, -2);
    cr_assert_eq(ks_set(ks, &k, T0, "9223372036854775807", 19, 0, 0), 1);
    cr_assert_eq(ks_incrby(ks, &k, T0, 1, &v), KS_OVERFLOW);
    cr_assert_eq(ks_set(ks, &k, T0, "01", 2, 0, 0), 1); /* not canonical: a raw string */
    cr_assert_eq(ks_incrby(ks, &k, T0, 1, &v), KS_NOTINT);
}

Test(keyspace, lazy_expiry_hides_and_frees)
{
    struct ks_key k = key("e");
    cr_assert_eq(ks_set(ks, &k, T0, "v", 1, T0 + 100 * MS, 0), 1);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 100 * MS);
    cr_assert_eq(ks_expires_count(ks), 1);
    cr_assert_eq(ks_get(ks, &k, T0 + 99 * MS, NULL), KS_RAW);
    cr_assert_eq(ks_get(ks, &k, T0 + 100 * MS, NULL), KS_NONE);
    cr_assert_eq(ks_key_count(ks), 0);
    cr_assert_eq(ks_expires_count(ks), 0);
}

Test(keyspace, expire_flags)
{
    struct ks_key k = key("f");
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + SEC, 0), 0); /* absent */
    ks_set(ks, &k, T0, "1", 1, 0, 0);
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + SEC, KS_EXPIRE_XX), 0);
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + SEC, KS_EXPIRE_GT), 0); /* no TTL = infinite */
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 5 * SEC, KS_EXPIRE_LT), 1);
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 9 * SEC, KS_EXPIRE_NX), 0);
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 9 * SEC, KS_EXPIRE_GT), 1);
    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 7 * SEC, KS_EXPIRE_GT), 0);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 9 * SEC);
    cr_assert_eq(ks_persist(ks, &k, T0), 1);
    cr_assert_eq(ks_persist(ks, &k, T0), 0);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), -1);
    /* An expiry in the past deletes, as Redis does. */
    cr_assert_eq(ks_expire(ks, &k, T0, T0 - 1, 0), 1);
    cr_assert_eq(ks_get(ks, &k, T0, NULL), KS_NONE);
}

Test(keyspace, gcra_state_expires_at_tat)
{
    struct ks_key k = key("user123");
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    cr_assert_eq(gcra_prepare(15, 30, 60, 1, &l, &err), 0);
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    cr_assert_eq(r.remaining, 15);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 2 * SEC);
    struct ks_value v;
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_GCRA);
    cr_assert_eq(v.i, T0 + 2 * SEC);
    /* After the TAT the state is gone: the bucket is full again. */
    cr_assert_eq(ks_get(ks, &k, T0 + 2 * SEC, NULL), KS_NONE);
}

Test(keyspace, wrong_types)
{
    struct ks_key k = key("w");
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    int allowed;
    int64_t v;
    gcra_prepare(1, 1, 1, 1, &l, &err);
    ks_set(ks, &k, T0, "x", 1, 0, 0);
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_WRONGTYPE);
    cr_assert_eq(ks_swlog_apply(ks, &k, T0, 1000, 5, &allowed), KS_WRONGTYPE);
    ks_del(ks, &k, T0);
    cr_assert_eq(ks_swlog_apply(ks, &k, T0, 1000, 5, &allowed), KS_OK);
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_WRONGTYPE);
    cr_assert_eq(ks_incrby(ks, &k, T0, 1, &v), KS_WRONGTYPE);
    /* SET replaces any type, as in Redis. */
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(ks_get(ks, &k, T0, NULL), KS_INT);
}

Test(keyspace, swlog_counts_and_bounds_memory)
{
    struct ks_key k = key("hist:{u}:login");
    int allowed;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(ks_swlog_apply(ks, &k, T0 + i * MS, 60000, 3, &allowed), KS_OK);
        cr_assert_eq(allowed, 1, "attempt %d", i);
    }
    /* Denied attempts count too, and at most max_count + 1 are kept. */
    for (int i = 3; i < 1000; i++) {
        cr_assert_eq(ks_swlog_apply(ks, &k, T0 + i * MS, 60000, 3, &allowed), KS_OK);
        cr_assert_eq(allowed, 0);
    }
    struct ks_value v;
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_SWLOG);
    cr_assert_eq(v.i, 4);
    /* Expires a period after the newest attempt. */
    cr_assert_eq(ks_ttl_ns(ks, &k, T0 + 999 * MS), 60 * SEC);
    /* A minute after the last attempt, allowed again (the key has expired). */
    cr_assert_eq(ks_swlog_apply(ks, &k, T0 + 61 * SEC, 60000, 3, &allowed), KS_OK);
    cr_assert_eq(allowed, 1);
}

Test(keyspace, swlog_same_millisecond_attempts_are_distinct)
{
    struct ks_key k = key("hist:{u}:a");
    int allowed;
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed);
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed);
    cr_assert_eq(allowed, 1);
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed);
    cr_assert_eq(allowed, 0);
}

Test(keyspace, memory_returns_to_baseline)
{
    uint64_t base = ks_used_memory(ks);
    char buf[32];
    for (int i = 0; i < 20000; i++) {
        struct ks_key k = keyn(buf, sizeof(buf), i);
        int allowed;
        if (i % 2)
            ks_set(ks, &k, T0, "some string value", 17, 0, 0);
        else
            ks_swlog_apply(ks, &k, T0, 1000, 10, &allowed);
    }
    cr_assert_gt(ks_used_memory(ks), base + 20000 * 32);
    for (unsigned s = 0; s < ks_nshards(ks); s++)
        ks_flush_shard(ks, s);
    cr_assert_eq(ks_key_count(ks), 0);
    cr_assert_eq(ks_used_memory(ks), base);
}

Test(keyspace, maxmemory_refuses_new_keys_only)
{
    struct ks_key a = key("a"), b = key("b");
    int64_t v;
    cr_assert_eq(ks_incrby(ks, &a, T0, 1, &v), KS_OK);
    ks_set_maxmemory(ks, 1); /* already over */
    cr_assert_eq(ks_incrby(ks, &a, T0, 1, &v), KS_OK);
    cr_assert_eq(v, 2);
    cr_assert_eq(ks_incrby(ks, &b, T0, 1, &v), KS_OOM);
    cr_assert_eq(ks_set(ks, &b, T0, "1", 1, 0, 0), KS_OOM);
    ks_set_maxmemory(ks, 0);
    cr_assert_eq(ks_set(ks, &b, T0, "1", 1, 0, 0), 1);
}

Test(keyspace, active_expiry_reclaims_untouched_keys)
{
    char buf[32];
    for (int i = 0; i < 50000; i++) {
        struct ks_key k = keyn(buf, sizeof(buf), i);
        ks_set(ks, &k, T0, "1", 1, T0 + (i % 2 ? 100 * SEC : SEC), 0);
    }
    cr_assert_eq(ks_key_count(ks), 50000);
    size_t freed = 0;
    for (int round = 0; round < 1000 && ks_key_count(ks) > 25000; round++)
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            freed += ks_expire_cycle(ks, s, T0 + 2 * SEC, 64);
    cr_assert_eq(freed, 25000);
    cr_assert_eq(ks_key_count(ks), 25000);
    cr_assert_eq(ks_expires_count(ks), 25000);
}

struct seen {
    unsigned char *hit;
    int n;
};

static void mark(void *ud, const char *key, size_t len, enum ks_type type)
{
    (void)type;
    struct seen *s = ud;
    char tmp[32];
    cr_assert_lt(len, sizeof(tmp));
    memcpy(tmp, key, len);
    tmp[len] = '\0';
    int i = atoi(tmp + 4);
    cr_assert(i >= 0 && i < s->n);
    s->hit[i] = 1;
}

/* Keys present for the whole iteration are returned even when tables grow and shrink between
 * SCAN calls (the reverse-binary cursor). */
Test(keyspace, scan_survives_resizes)
{
    enum { N = 4000 };
    static unsigned char hit[2 * N];
    struct seen s = {hit, 2 * N};
    char buf[32];
    for (int i = 0; i < N; i++) {
        struct ks_key k = keyn(buf, sizeof(buf), i);
        ks_set(ks, &k, T0, "1", 1, 0, 0);
    }
    int added = N;
    for (unsigned sh = 0; sh < ks_nshards(ks); sh++) {
        uint64_t cur = 0;
        do {
            cur = ks_scan_shard(ks, sh, cur, 3, T0, mark, &s);
            /* Grow the tables while iterating. */
            for (int j = 0; j < 20 && added < 2 * N; j++, added++) {
                struct ks_key k = keyn(buf, sizeof(buf), added);
                ks_set(ks, &k, T0, "1", 1, 0, 0);
            }
        } while (cur != 0);
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(hit[i], 1, "key:%d not returned by SCAN", i);
}

Test(keyspace, type_names)
{
    cr_assert_str_eq(ks_type_name(KS_NONE), "none");
    cr_assert_str_eq(ks_type_name(KS_GCRA), "string");
    cr_assert_str_eq(ks_type_name(KS_INT), "string");
    cr_assert_str_eq(ks_type_name(KS_RAW), "string");
    cr_assert_str_eq(ks_type_name(KS_SWLOG), "zset");
}
