/* Unit tests of the sharded keyspace: typed operations, lazy and active expiry, SCAN across
 * resizes, memory accounting, maxmemory. Time is passed explicitly, so no clock is involved. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/keyspace.h"
#include "rlimitd/swlog.h"
#include "rlimitd/zset.h"

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

/* KS_IDLE_SWEEPS rounds of active expiry over every shard: an emptied shard's slabs go back
 * on the last one (ks_expire_cycle). */
static void sweep_idle(int64_t now)
{
    for (int r = 0; r < KS_IDLE_SWEEPS; r++)
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            ks_expire_cycle(ks, s, now, 64);
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
    cr_assert_eq(ks_swlog_apply(ks, &k, T0, 1000, 5, &allowed, NULL), KS_WRONGTYPE);
    ks_del(ks, &k, T0);
    cr_assert_eq(ks_swlog_apply(ks, &k, T0, 1000, 5, &allowed, NULL), KS_OK);
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
        cr_assert_eq(ks_swlog_apply(ks, &k, T0 + i * MS, 60000, 3, &allowed, NULL), KS_OK);
        cr_assert_eq(allowed, 1, "attempt %d", i);
    }
    /* Denied attempts count too, and at most max_count + 1 are kept. */
    for (int i = 3; i < 1000; i++) {
        cr_assert_eq(ks_swlog_apply(ks, &k, T0 + i * MS, 60000, 3, &allowed, NULL), KS_OK);
        cr_assert_eq(allowed, 0);
    }
    struct ks_value v;
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_SWLOG);
    cr_assert_eq(v.i, 4);
    /* Expires a period after the newest attempt. */
    cr_assert_eq(ks_ttl_ns(ks, &k, T0 + 999 * MS), 60 * SEC);
    /* A minute after the last attempt, allowed again (the key has expired). */
    cr_assert_eq(ks_swlog_apply(ks, &k, T0 + 61 * SEC, 60000, 3, &allowed, NULL), KS_OK);
    cr_assert_eq(allowed, 1);
}

Test(keyspace, swlog_same_millisecond_attempts_are_distinct)
{
    struct ks_key k = key("hist:{u}:a");
    int allowed;
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed, NULL);
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed, NULL);
    cr_assert_eq(allowed, 1);
    ks_swlog_apply(ks, &k, T0, 1000, 2, &allowed, NULL);
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
            ks_swlog_apply(ks, &k, T0, 1000, 10, &allowed, NULL);
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

/* ---- open addressing and slab entries ---- */

static struct ks_key keyfmt(char *buf, size_t cap, const char *fmt, int i)
{
    int n = snprintf(buf, cap, fmt, i);
    struct ks_key k;
    ks_key_init(ks, &k, buf, (size_t)n);
    return k;
}

/* A freed entry is reused by the next entry of its size: deleting half the keys and adding as
 * many new ones of the same length costs no memory. */
Test(keyspace, slab_reuse_after_delete)
{
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    char buf[32];
    cr_assert_eq(gcra_prepare(15, 30, 600, 1, &l, &err), 0);
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = keyfmt(buf, sizeof(buf), "k:%012d", i);
        cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    }
    uint64_t full = ks_used_memory(ks);
    for (int i = 0; i < 1000; i += 2) {
        struct ks_key k = keyfmt(buf, sizeof(buf), "k:%012d", i);
        cr_assert_eq(ks_del(ks, &k, T0), 1);
    }
    cr_assert_eq(ks_key_count(ks), 500);
    /* The same keys again: same shards, so each shard's free list covers them. */
    for (int i = 0; i < 1000; i += 2) {
        struct ks_key k = keyfmt(buf, sizeof(buf), "k:%012d", i);
        cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    }
    cr_assert_eq(ks_key_count(ks), 1000);
    cr_assert_eq(ks_used_memory(ks), full);
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = keyfmt(buf, sizeof(buf), "k:%012d", i);
        cr_assert_eq(ks_get(ks, &k, T0, NULL), KS_GCRA, "k:%d lost", i);
    }
}

/* A GCRA entry stores no expiry (it is the TAT); EXPIRE and PERSIST give it one or take it away,
 * which moves the entry, and the next CL.THROTTLE puts the expiry back at the TAT. */
Test(keyspace, gcra_shape_changes_on_expire_persist)
{
    struct ks_key k = key("k:000000000042");
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    struct ks_value v;
    cr_assert_eq(gcra_prepare(15, 30, 60, 1, &l, &err), 0);
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    int64_t tat = T0 + 2 * SEC;
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 2 * SEC);
    cr_assert_eq(ks_expires_count(ks), 1);

    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 100 * SEC, 0), 1);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 100 * SEC);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_GCRA);
    cr_assert_eq(v.i, tat);
    cr_assert_eq(ks_expires_count(ks), 1);
    /* Still there after the TAT: the explicit expiry rules now. */
    cr_assert_eq(ks_get(ks, &k, T0 + 50 * SEC, &v), KS_GCRA);

    cr_assert_eq(ks_persist(ks, &k, T0), 1);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), -1);
    cr_assert_eq(ks_expires_count(ks), 0);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_GCRA);
    cr_assert_eq(v.i, tat);
    /* Moving back and forth reuses the two entries' places: no growth. */
    uint64_t mem = ks_used_memory(ks);
    for (int round = 0; round < 100; round++) {
        cr_assert_eq(ks_expire(ks, &k, T0, T0 + 100 * SEC, 0), 1);
        cr_assert_eq(ks_persist(ks, &k, T0), 1);
    }
    cr_assert_eq(ks_used_memory(ks), mem);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_GCRA);
    cr_assert_eq(v.i, tat);

    cr_assert_eq(ks_expire(ks, &k, T0, tat, 0), 1); /* exactly the TAT: implied again */
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 2 * SEC);
    cr_assert_eq(ks_expires_count(ks), 1);

    cr_assert_eq(ks_expire(ks, &k, T0, T0 + 9 * SEC, 0), 1);
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 4 * SEC); /* back at the new TAT */
    cr_assert_eq(ks_expires_count(ks), 1);
    cr_assert_eq(ks_get(ks, &k, T0 + 4 * SEC, NULL), KS_NONE);
    cr_assert_eq(ks_expires_count(ks), 0);
    cr_assert_eq(ks_key_count(ks), 0);

    /* SET with KEEPTTL over GCRA state keeps the TAT as the expiry of the string. */
    cr_assert_eq(ks_gcra_apply(ks, &k, T0, &l, &r, &err), KS_OK);
    cr_assert_eq(ks_set(ks, &k, T0, "7", 1, 0, KS_SET_KEEPTTL), 1);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_INT);
    cr_assert_eq(v.i, 7);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), 2 * SEC);
    cr_assert_eq(ks_expires_count(ks), 1);
}

struct found {
    const char *want;
    size_t len;
    int hits;
};

static void find_key(void *ud, const char *key, size_t len, enum ks_type type)
{
    (void)type;
    struct found *f = ud;
    if (len == f->len && memcmp(key, f->want, len) == 0)
        f->hits++;
}

static void dump_find(void *ud, const struct ks_record *r)
{
    find_key(ud, r->key, r->klen, r->type);
}

/* Key lengths around the 1-byte length field's limit (255 = a 4-byte length follows) and
 * around the largest slab class, up to a large-entry block. */
Test(keyspace, key_lengths)
{
    static const size_t lens[] = {0, 1, 254, 255, 256, 70000};
    uint64_t base = ks_used_memory(ks);
    char *buf = malloc(70000);
    cr_assert_not_null(buf);
    for (size_t n = 0; n < sizeof(lens) / sizeof(lens[0]); n++) {
        size_t len = lens[n];
        for (size_t j = 0; j < len; j++)
            buf[j] = (char)('a' + (j * 7 + len) % 26);
        struct ks_key k;
        ks_key_init(ks, &k, buf, len);
        struct ks_value v;
        cr_assert_eq(ks_set(ks, &k, T0, "12", 2, 0, 0), 1, "len %zu", len);
        cr_assert_eq(ks_get(ks, &k, T0, &v), KS_INT, "len %zu", len);
        cr_assert_eq(v.i, 12);
        cr_assert_eq(ks_expire(ks, &k, T0, T0 + SEC, 0), 1);
        cr_assert_eq(ks_ttl_ns(ks, &k, T0), SEC, "len %zu", len);
        cr_assert_eq(ks_set(ks, &k, T0, "text", 4, 0, KS_SET_KEEPTTL), 1);
        cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
        cr_assert_arr_eq(v.p, "text", 4);
        cr_assert_eq(ks_persist(ks, &k, T0), 1);
        cr_assert_eq(ks_ttl_ns(ks, &k, T0), -1);

        struct found f = {buf, len, 0};
        for (unsigned s = 0; s < ks_nshards(ks); s++) {
            uint64_t cur = 0;
            do
                cur = ks_scan_shard(ks, s, cur, 10, T0, find_key, &f);
            while (cur != 0);
        }
        cr_assert_eq(f.hits, 1, "len %zu scanned %d times", len, f.hits);
        f.hits = 0;
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            ks_dump_shard(ks, s, T0, dump_find, &f);
        cr_assert_eq(f.hits, 1, "len %zu dumped %d times", len, f.hits);

        /* A one-byte change is another key. */
        if (len > 0) {
            buf[len - 1] ^= 1;
            struct ks_key other;
            ks_key_init(ks, &other, buf, len);
            cr_assert_eq(ks_get(ks, &other, T0, NULL), KS_NONE);
            buf[len - 1] ^= 1;
        }
        cr_assert_eq(ks_del(ks, &k, T0), 1);
        cr_assert_eq(ks_get(ks, &k, T0, NULL), KS_NONE);
        cr_assert_eq(ks_key_count(ks), 0);
    }
    /* Restore takes every length back. */
    for (size_t n = 0; n < sizeof(lens) / sizeof(lens[0]); n++) {
        struct ks_record r = {0};
        r.type = KS_GCRA;
        r.key = buf;
        r.klen = lens[n];
        r.i = T0 + 5 * SEC;
        r.expire = r.i;
        memset(buf, 'x', lens[n]);
        cr_assert_eq(ks_restore(ks, &r, T0), 1);
        struct ks_key k;
        ks_key_init(ks, &k, buf, lens[n]);
        cr_assert_eq(ks_ttl_ns(ks, &k, T0), 5 * SEC);
    }
    cr_assert_eq(ks_key_count(ks), 6);
    for (unsigned s = 0; s < ks_nshards(ks); s++)
        ks_flush_shard(ks, s);
    cr_assert_eq(ks_used_memory(ks), base);
    free(buf);
}

/* ---- a randomized check of insert, backward-shift delete, expiry and resizes against a plain
 * array model (fixed seed, so a failure reproduces) ---- */

enum { MODEL_KEYS = 3000 };

struct model_key {
    int present;
    int gcra;
    int64_t val;
    int64_t expire;
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
    /* xorshift64*: a fixed, portable sequence. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static struct ks_key model_key(char *buf, size_t cap, int i)
{
    /* Varied lengths, so several size classes (with and without an expiry field) mix. */
    int n = snprintf(buf, cap, "m:%d:%.*s", i, i % 40, "0123456789012345678901234567890123456789");
    struct ks_key k;
    ks_key_init(ks, &k, buf, (size_t)n);
    return k;
}

static int model_live(const struct model_key *m, int64_t now)
{
    return m->present && (m->expire == 0 || m->expire > now);
}

struct scan_hits {
    unsigned char *hit;
};

static void model_mark(void *ud, const char *key, size_t len, enum ks_type type)
{
    (void)type;
    struct scan_hits *s = ud;
    char tmp[64];
    cr_assert_lt(len, sizeof(tmp));
    memcpy(tmp, key, len);
    tmp[len] = '\0';
    int i = atoi(tmp + 2);
    cr_assert(i >= 0 && i < MODEL_KEYS);
    s->hit[i] = 1;
}

static void model_check(struct model_key *m, int64_t now)
{
    char buf[64];
    uint64_t live = 0, with_exp = 0;
    for (int i = 0; i < MODEL_KEYS; i++) {
        struct ks_key k = model_key(buf, sizeof(buf), i);
        struct ks_value v;
        enum ks_type t = ks_get(ks, &k, now, &v);
        if (!model_live(&m[i], now)) {
            cr_assert_eq(t, KS_NONE, "key %d should be absent", i);
            m[i].present = 0;
            continue;
        }
        cr_assert_eq(t, m[i].gcra ? KS_GCRA : KS_INT, "key %d type %d", i, t);
        cr_assert_eq(v.i, m[i].val, "key %d value", i);
        int64_t ttl = ks_ttl_ns(ks, &k, now);
        cr_assert_eq(ttl, m[i].expire ? m[i].expire - now : -1, "key %d ttl", i);
        live++;
        with_exp += m[i].expire != 0;
    }
    cr_assert_eq(ks_key_count(ks), live);
    cr_assert_eq(ks_expires_count(ks), with_exp);
    /* A full SCAN returns every live key. */
    static unsigned char hit[MODEL_KEYS];
    memset(hit, 0, sizeof(hit));
    struct scan_hits s = {hit};
    for (unsigned sh = 0; sh < ks_nshards(ks); sh++) {
        uint64_t cur = 0;
        do
            cur = ks_scan_shard(ks, sh, cur, 7, now, model_mark, &s);
        while (cur != 0);
    }
    for (int i = 0; i < MODEL_KEYS; i++)
        cr_assert_eq(hit[i], model_live(&m[i], now), "scan and key %d disagree", i);
}

Test(keyspace, random_ops_match_model)
{
    static struct model_key m[MODEL_KEYS];
    memset(m, 0, sizeof(m));
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    char buf[64];
    cr_assert_eq(gcra_prepare(5, 10, 1, 1, &l, &err), 0);
    int64_t now = T0;
    uint64_t base = ks_used_memory(ks);
    for (int step = 0; step < 300000; step++) {
        /* Phases: fill up (tables grow), drain (tables shrink and compact), churn. */
        int phase = (step / 50000) % 3;
        int i = (int)(rng() % MODEL_KEYS);
        struct ks_key k = model_key(buf, sizeof(buf), i);
        unsigned op = (unsigned)(rng() % 100);
        int del_pct = phase == 0 ? 5 : phase == 1 ? 70 : 30;
        if (!model_live(&m[i], now))
            m[i].present = 0;
        if ((int)op < del_pct) {
            cr_assert_eq(ks_del(ks, &k, now), m[i].present, "del %d step %d", i, step);
            m[i].present = 0;
        } else if (op < 80) {
            int rc = ks_gcra_apply(ks, &k, now, &l, &r, &err);
            if (m[i].present && !m[i].gcra) {
                cr_assert_eq(rc, KS_WRONGTYPE);
                continue;
            }
            cr_assert_eq(rc, KS_OK);
            if (r.store) {
                m[i].present = 1;
                m[i].gcra = 1;
                m[i].val = r.new_tat;
                m[i].expire = r.new_tat;
            }
        } else if (op < 88) {
            int64_t n = (int64_t)(rng() % 1000);
            char num[24];
            int len = snprintf(num, sizeof(num), "%lld", (long long)n);
            int64_t at = rng() % 2 ? now + (int64_t)(rng() % 3000) * MS + 1 : 0;
            cr_assert_eq(ks_set(ks, &k, now, num, (size_t)len, at, 0), 1);
            m[i] = (struct model_key){1, 0, n, at};
        } else if (op < 94) {
            int64_t at = now + (int64_t)(rng() % 5000) * MS - 500 * MS;
            int rc = ks_expire(ks, &k, now, at, 0);
            cr_assert_eq(rc, m[i].present, "expire %d", i);
            if (m[i].present) {
                if (at <= now)
                    m[i].present = 0;
                else
                    m[i].expire = at;
            }
        } else if (op < 97) {
            int rc = ks_persist(ks, &k, now);
            cr_assert_eq(rc, m[i].present && m[i].expire != 0, "persist %d", i);
            if (m[i].present)
                m[i].expire = 0;
        } else {
            now += (int64_t)(rng() % 50) * MS;
            for (unsigned s = 0; s < ks_nshards(ks); s++)
                ks_expire_cycle(ks, s, now, 16);
        }
        if (step % 25000 == 24999)
            model_check(m, now);
    }
    model_check(m, now);
    for (int i = 0; i < MODEL_KEYS; i++) {
        struct ks_key k = model_key(buf, sizeof(buf), i);
        ks_del(ks, &k, now);
    }
    cr_assert_eq(ks_key_count(ks), 0);
    cr_assert_eq(ks_expires_count(ks), 0);
    /* Deleting everything shrinks every table back and compacts the slabs away (an emptied
     * shard's last slab at the sweep). */
    sweep_idle(now);
    cr_assert_eq(ks_used_memory(ks), base);
}

/* ---- sliced dumps (ks_dump_begin / ks_dump_slice): keys that exist for the whole dump are
 * handed out exactly once whatever happens between slices: deletions (backward shifts),
 * insertions, EXPIRE/PERSIST (entries move between size classes), doubling and halving ---- */

enum { SLICE_KEYS = 4000 };

struct slice_seen {
    unsigned char count[2 * SLICE_KEYS];
};

static void slice_mark(void *ud, const struct ks_record *r)
{
    struct slice_seen *s = ud;
    char tmp[32];
    cr_assert_lt(r->klen, sizeof(tmp));
    memcpy(tmp, r->key, r->klen);
    tmp[r->klen] = '\0';
    int i = atoi(tmp + 4);
    cr_assert(i >= 0 && i < 2 * SLICE_KEYS);
    s->count[i]++;
}

Test(keyspace, sliced_dump_hands_out_each_key_once)
{
    char buf[32];
    static struct slice_seen seen;
    static unsigned char deleted[2 * SLICE_KEYS];
    for (int round = 0; round < 3; round++) {
        memset(&seen, 0, sizeof(seen));
        memset(deleted, 0, sizeof(deleted));
        for (int i = 0; i < SLICE_KEYS; i++) {
            struct ks_key k = keyn(buf, sizeof(buf), i);
            cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
        }
        unsigned n = ks_nshards(ks);
        for (unsigned s = 0; s < n; s++)
            ks_dump_begin(ks, s);
        uint64_t dumped = 0;
        int done_all = 0, step = 0;
        while (!done_all) {
            done_all = 1;
            for (unsigned s = 0; s < n; s++)
                if (!ks_dump_slice(ks, s, T0, 3, slice_mark, &seen, &dumped))
                    done_all = 0;
            /* Between slices: churn. Round 0 deletes, round 1 grows the tables (new keys),
             * round 2 deletes most keys so the tables halve and compact. */
            for (int j = 0; j < 40; j++, step++) {
                int i = (int)(rng() % SLICE_KEYS);
                struct ks_key k = keyn(buf, sizeof(buf), i);
                if (round == 0 || round == 2) {
                    if (ks_del(ks, &k, T0))
                        deleted[i] = 1;
                } else {
                    int fresh = SLICE_KEYS + step % SLICE_KEYS;
                    struct ks_key nk = keyn(buf, sizeof(buf), fresh);
                    ks_set(ks, &nk, T0, "2", 1, 0, 0);
                    k = keyn(buf, sizeof(buf), i);
                    /* A shape change moves the entry: EXPIRE adds the expiry field. */
                    ks_expire(ks, &k, T0, T0 + 100 * SEC, 0);
                }
            }
            if (round == 2) {
                for (int i = 0; i < SLICE_KEYS; i += 2) {
                    struct ks_key k = keyn(buf, sizeof(buf), i);
                    if (ks_del(ks, &k, T0))
                        deleted[i] = 1;
                }
            }
        }
        uint64_t sum = 0;
        for (int i = 0; i < SLICE_KEYS; i++) {
            cr_assert_leq(seen.count[i], 1, "round %d: key %d dumped %d times", round, i,
                          seen.count[i]);
            if (!deleted[i])
                cr_assert_eq(seen.count[i], 1, "round %d: key %d missed", round, i);
            sum += seen.count[i];
        }
        for (int i = SLICE_KEYS; i < 2 * SLICE_KEYS; i++)
            cr_assert_eq(seen.count[i], 0, "round %d: key %d created during the dump", round, i);
        cr_assert_eq(sum, dumped);
        /* A second dump right after sees exactly the keys there are. */
        memset(&seen, 0, sizeof(seen));
        dumped = 0;
        for (unsigned s = 0; s < n; s++)
            dumped += ks_dump_shard(ks, s, T0, slice_mark, &seen);
        cr_assert_eq(dumped, ks_key_count(ks));
        for (unsigned s = 0; s < n; s++)
            ks_flush_shard(ks, s);
    }
}

/* A FLUSHALL in the middle of a sliced dump ends it. */
Test(keyspace, sliced_dump_survives_flush)
{
    char buf[32];
    static struct slice_seen seen;
    memset(&seen, 0, sizeof(seen));
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = keyn(buf, sizeof(buf), i);
        ks_set(ks, &k, T0, "1", 1, 0, 0);
    }
    uint64_t dumped = 0;
    ks_dump_begin(ks, 0);
    ks_dump_slice(ks, 0, T0, 4, slice_mark, &seen, &dumped);
    ks_flush_shard(ks, 0);
    cr_assert_eq(ks_dump_slice(ks, 0, T0, 4, slice_mark, &seen, &dumped), 1);
    ks_dump_begin(ks, 0); /* a new dump can start */
    cr_assert_eq(ks_dump_slice(ks, 0, T0, 4, slice_mark, &seen, &dumped), 1);
}

/* ---- bulk loading: the keyspace ks_bulk_add + ks_bulk_end build answers like the one
 * ks_restore builds, duplicates included (the later record wins) ---- */

static void bulk_compare(struct keyspace *a, struct keyspace *b, int nkeys, int64_t now)
{
    char buf[32];
    for (int i = 0; i < nkeys; i++) {
        int n = snprintf(buf, sizeof(buf), "key:%d", i);
        struct ks_key ka, kb;
        ks_key_init(a, &ka, buf, (size_t)n);
        ks_key_init(b, &kb, buf, (size_t)n);
        struct ks_value va, vb;
        enum ks_type ta = ks_get(a, &ka, now, &va), tb = ks_get(b, &kb, now, &vb);
        cr_assert_eq(ta, tb, "key %d type", i);
        if (ta == KS_NONE)
            continue;
        cr_assert_eq(va.i, vb.i, "key %d value", i);
        cr_assert_eq(ks_ttl_ns(a, &ka, now), ks_ttl_ns(b, &kb, now), "key %d ttl", i);
    }
    cr_assert_eq(ks_key_count(a), ks_key_count(b));
    cr_assert_eq(ks_expires_count(a), ks_expires_count(b));
}

Test(keyspace, bulk_load_matches_restore)
{
    /* Enough keys for several tables sizes, with wrap-around at the end of tables. */
    enum { NK = 20000 };
    struct keyspace *ref = ks_create(4, seed);
    cr_assert_eq(ks_bulk_begin(ks), 0);
    char buf[32];
    int64_t ts[12];
    int added = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < NK; i++) {
            if (pass == 1 && i % 7 != 0)
                continue; /* every 7th key again: a duplicate, which must replace */
            int n = snprintf(buf, sizeof(buf), "key:%d", i);
            struct ks_record r = {0};
            r.key = buf;
            r.klen = (size_t)n;
            switch ((i + pass) % 4) {
            case 0:
                r.type = KS_GCRA;
                r.i = T0 + (i + pass) * MS;
                r.expire = r.i;
                break;
            case 1:
                r.type = KS_INT;
                r.i = i * 10 + pass;
                r.expire = i % 3 ? 0 : T0 + SEC;
                break;
            case 2:
                r.type = KS_RAW;
                r.p = "a string value";
                r.len = 14;
                r.expire = i % 5 == 0 ? T0 - SEC : 0; /* expired: skipped */
                break;
            default:
                r.type = KS_SWLOG;
                r.nts = (uint32_t)(1 + i % 12);
                for (uint32_t j = 0; j < r.nts; j++)
                    ts[j] = T0 / MS - 1000 + (int64_t)j * 10;
                r.ts = ts;
                r.expire = T0 + 60 * SEC;
                break;
            }
            int want = ks_restore(ref, &r, T0);
            cr_assert_eq(ks_bulk_add(ks, &r, T0), want, "key %d pass %d", i, pass);
            added += want > 0;
        }
    }
    ks_bulk_end(ks);
    bulk_compare(ks, ref, NK, T0);
    cr_assert_eq(ks_bulk_begin(ks), -1, "not empty any more");
    /* The tables work as tables: everything can be deleted again. */
    for (int i = 0; i < NK; i++) {
        struct ks_key k = keyn(buf, sizeof(buf), i);
        struct ks_key kr;
        ks_key_init(ref, &kr, k.p, k.len);
        cr_assert_eq(ks_del(ks, &k, T0), ks_del(ref, &kr, T0), "key %d", i);
    }
    cr_assert_eq(ks_key_count(ks), 0);
    ks_destroy(&ref);
    (void)added;
}

/* ---- window logs kept as 32-bit offsets (struct cring) or, when they do not fit, as a plain
 * struct swlog: the decisions are those of swlog.c on a plain log in every case ---- */

Test(keyspace, window_log_representations_decide_alike)
{
    char buf[32];
    /* max_count 10 (a cring), 100 (too many slots for one), and a clock that jumps 60 days
     * forward and back (a span too wide for 32-bit offsets). */
    const int64_t maxes[] = {10, 100, 10};
    for (int c = 0; c < 3; c++) {
        struct ks_key k = keyn(buf, sizeof(buf), 1000 + c);
        size_t cap = 128;
        struct swlog *ref = malloc(swlog_bytes((uint32_t)cap));
        swlog_init(ref, (uint32_t)cap);
        int64_t now = T0;
        for (int step = 0; step < 400; step++) {
            now += (int64_t)(rng() % 400) * MS;
            if (c == 2 && step == 150)
                now += 60LL * 86400 * SEC;
            if (c == 2 && step == 151)
                now -= 60LL * 86400 * SEC;
            int64_t period = 5000;
            int allowed;
            cr_assert_eq(ks_swlog_apply(ks, &k, now, period, maxes[c], &allowed, NULL), KS_OK);
            swlog_trim(ref, now / MS, period);
            int want = swlog_record(ref, now / MS, maxes[c]);
            cr_assert_eq(allowed, want, "case %d step %d", c, step);
            struct ks_value v;
            cr_assert_eq(ks_get(ks, &k, now, &v), KS_SWLOG);
            cr_assert_eq(v.i, ref->len, "case %d step %d", c, step);
        }
        free(ref);
    }
}

/* INFO limiter_keys: entries of GCRA or window-log type, through every way a key comes and goes
 * or changes type. */
Test(keyspace, limiter_key_count_follows_types)
{
    struct gcra_limits l;
    const char *err;
    struct gcra_result r;
    int allowed;
    int64_t in_window = -1;
    cr_assert_eq(gcra_prepare(0, 1, 60, 1, &l, &err), 0);
    struct ks_key g = key("g"), w = key("w"), s = key("s");
    cr_expect_eq(ks_limiter_key_count(ks), 0);
    cr_assert_eq(ks_gcra_apply(ks, &g, T0, &l, &r, &err), KS_OK);
    cr_assert_eq(ks_swlog_apply(ks, &w, T0, 60000, 3, &allowed, &in_window), KS_OK);
    cr_expect_eq(in_window, 1);
    cr_assert_eq(ks_swlog_apply(ks, &w, T0 + MS, 60000, 3, &allowed, &in_window), KS_OK);
    cr_expect_eq(in_window, 2);
    cr_assert_eq(ks_set(ks, &s, T0, "1", 1, 0, 0), 1);
    cr_expect_eq(ks_limiter_key_count(ks), 2);
    cr_expect_eq(ks_key_count(ks), 3);
    /* SET over limiter state turns it into a string. */
    cr_assert_eq(ks_set(ks, &g, T0, "x", 1, 0, 0), 1);
    cr_expect_eq(ks_limiter_key_count(ks), 1);
    cr_assert_eq(ks_del(ks, &w, T0), 1);
    cr_expect_eq(ks_limiter_key_count(ks), 0);
    /* Expiry: the GCRA key goes at its TAT. */
    struct ks_key e = key("e");
    cr_assert_eq(ks_gcra_apply(ks, &e, T0, &l, &r, &err), KS_OK);
    cr_expect_eq(ks_limiter_key_count(ks), 1);
    cr_expect_eq(ks_get(ks, &e, T0 + 3600 * SEC, NULL), KS_NONE);
    cr_expect_eq(ks_limiter_key_count(ks), 0);
    /* Restore over a string, then flush. */
    struct ks_record rec = {.type = KS_GCRA, .key = "s", .klen = 1, .expire = T0 + SEC,
                            .i = T0 + SEC};
    cr_assert_eq(ks_restore(ks, &rec, T0), 1);
    cr_expect_eq(ks_limiter_key_count(ks), 1);
    for (unsigned sh = 0; sh < ks_nshards(ks); sh++)
        ks_flush_shard(ks, sh);
    cr_expect_eq(ks_limiter_key_count(ks), 0);
}

/* ---- sorted sets ---- */

static void zadd(struct ks_key *k, int64_t now, const char *m, double score)
{
    struct ks_zref ref;
    double out;
    int skipped;
    cr_assert_eq(ks_zset_open(ks, k, now, KS_Z_CREATE, 0, 0, &ref), KS_OK);
    zs_add(&ref.z, m, strlen(m), score, 0, &out, &skipped);
    ks_zset_close(ks, k, &ref);
}

/* Used memory follows a set as it grows, converts and goes, back to where it started. */
Test(keyspace, sorted_set_memory_is_accounted_and_returned)
{
    int64_t now = 1800000000LL * 1000000000LL;
    uint64_t base = ks_used_memory(ks);
    struct ks_key k;
    ks_key_init(ks, &k, "z", 1);
    zadd(&k, now, "a", 1);
    uint64_t one = ks_used_memory(ks);
    cr_assert_gt(one, base);
    for (int i = 0; i < 5000; i++) {
        char m[32];
        snprintf(m, sizeof(m), "member-%d", i);
        zadd(&k, now, m, i);
    }
    cr_assert_gt(ks_used_memory(ks), one + 5000 * 16);
    cr_assert_eq(ks_get(ks, &k, now, NULL), KS_ZSET);
    cr_assert_eq(ks_del(ks, &k, now), 1);
    sweep_idle(now);
    cr_assert_eq(ks_used_memory(ks), base);
    /* A window log converted by a Z write, then emptied: deleted, memory back. */
    struct ks_key w;
    ks_key_init(ks, &w, "hist:{u}:a", 10);
    int allowed;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ks_swlog_apply(ks, &w, now + i * 1000000LL, 60000, 5, &allowed, NULL),
                     KS_OK);
    struct ks_zref ref;
    cr_assert_eq(ks_zset_open(ks, &w, now, KS_Z_READ, 0, 0, &ref), KS_OK);
    cr_assert(ref.temp && zs_card(ref.z) == 3);
    ks_zset_close(ks, &w, &ref);
    cr_assert_eq(ks_get(ks, &w, now, NULL), KS_SWLOG, "a read leaves the log a log");
    cr_assert_eq(ks_zset_open(ks, &w, now, KS_Z_WRITE, 0, 0, &ref), KS_OK);
    cr_assert_not(ref.temp);
    cr_assert_eq(zs_card(ref.z), 3);
    zs_del_range(&ref.z, 0, 3);
    ks_zset_close(ks, &w, &ref);
    cr_assert_eq(ks_get(ks, &w, now, NULL), KS_NONE);
    sweep_idle(now);
    cr_assert_eq(ks_used_memory(ks), base);
    /* Strings and GCRA state are the wrong type. */
    struct ks_key s;
    ks_key_init(ks, &s, "s", 1);
    cr_assert_eq(ks_set(ks, &s, now, "v", 1, 0, 0), 1);
    cr_assert_eq(ks_zset_open(ks, &s, now, KS_Z_READ, 0, 0, &ref), KS_WRONGTYPE);
    cr_assert_eq(ks_zset_open(ks, &s, now, KS_Z_CREATE, 0, 0, &ref), KS_WRONGTYPE);
    /* Over maxmemory a write that may add is refused, a removal is not. */
    zadd(&k, now, "a", 1);
    ks_set_maxmemory(ks, 1);
    cr_assert_eq(ks_zset_open(ks, &k, now, KS_Z_CREATE, 0, 0, &ref), KS_OOM);
    cr_assert_eq(ks_zset_open(ks, &k, now, KS_Z_WRITE, 0, 0, &ref), KS_OK);
    ks_zset_close(ks, &k, &ref);
    ks_set_maxmemory(ks, 0);
}

/* ---- hashes: in the entry (compact) or on the heap, against a model ---- */

#define HM_KEYS 6
#define HM_FIELDS 140 /* past 128 fields (the bound set below) a hash becomes a table */

struct hmodel {
    int present;
    char v[HM_FIELDS][80];
    size_t vlen[HM_FIELDS];
    int has[HM_FIELDS];
    int n;
};

static void hm_value(char *v, size_t *len)
{
    int r = rand() % 5;
    if (r == 0)
        *len = (size_t)snprintf(v, 80, "%lld", (long long)rand() * rand() - RAND_MAX);
    else if (r == 1)
        *len = (size_t)snprintf(v, 80, "17640000%05d", rand() % 100000); /* a 13-digit ms */
    else if (r == 2)
        *len = (size_t)snprintf(v, 80, "%d", rand() % 100);
    else if (r == 3)
        *len = (size_t)snprintf(v, 80, "0%d", rand() % 100); /* not canonical: text */
    else {
        *len = (size_t)(rand() % (rand() % 20 == 0 ? 70 : 12)); /* > 64: a table */
        for (size_t i = 0; i < *len; i++)
            v[i] = (char)('a' + rand() % 26);
    }
}

static int inline_seen, heap_seen; /* hashes hm_check found in their entry, on the heap */

static void hm_check(const struct ks_key *k, const struct hmodel *m, int64_t now)
{
    struct ks_value v;
    if (!m->present) {
        cr_assert_eq(ks_get(ks, k, now, &v), KS_NONE);
        return;
    }
    cr_assert_eq(ks_get(ks, k, now, &v), KS_HASH);
    cr_assert_eq(v.i, m->n, "count %lld, model %d", (long long)v.i, m->n);
    unsigned char c[HV_COMPACT_MAX];
    size_t cn = ks_hash_peek_inline(ks, k, now, c);
    for (int f = 0; cn > 0 && f < HM_FIELDS; f++) { /* HMGET's read in place */
        char name[16], num[HV_NUM_BYTES];
        int nl = snprintf(name, sizeof(name), "f%d", f);
        const char *val;
        size_t vlen;
        cr_assert_eq(hv_compact_get(c, cn, name, (size_t)nl, &val, &vlen, num), m->has[f]);
        if (m->has[f])
            cr_assert(vlen == m->vlen[f] && memcmp(val, m->v[f], vlen) == 0);
    }
    inline_seen += cn > 0;
    heap_seen += cn == 0;
    struct ks_href r;
    cr_assert_eq(ks_hash_open(ks, k, now, KS_H_READ, &r), KS_OK);
    for (int f = 0; f < HM_FIELDS; f++) {
        char name[16];
        int nl = snprintf(name, sizeof(name), "f%d", f);
        const char *val;
        size_t vlen;
        int got = hv_get(r.h, name, (size_t)nl, &val, &vlen);
        cr_assert_eq(got, m->has[f], "field %s", name);
        if (got) {
            cr_assert_eq(vlen, m->vlen[f]);
            cr_assert(memcmp(val, m->v[f], vlen) == 0);
        }
    }
}

static int bulk_restore; /* restore_into: through ks_bulk_add instead of ks_restore */

static void restore_into(void *ud, const struct ks_record *r)
{
    if (bulk_restore)
        cr_assert_eq(ks_bulk_add(ud, r, T0), 1);
    else
        cr_assert_eq(ks_restore(ud, r, T0), 1);
}

Test(keyspace, hashes_in_entries_and_on_heap_match_model)
{
    srand(99);
    static const int64_t entries = 128, value = 64;
    hv_watch_limits(&entries, &value);
    uint64_t base = ks_used_memory(ks);
    static struct hmodel m[HM_KEYS];
    memset(m, 0, sizeof(m));
    char names[HM_KEYS][300];
    struct ks_key keys[HM_KEYS];
    for (int i = 0; i < HM_KEYS; i++) {
        /* short keys, and ones too long for anything but a tiny hash to fit the entry */
        size_t len = i < 3 ? (size_t)snprintf(names[i], 300, "tb:%d", i) : (size_t)(200 + 20 * i);
        if (i >= 3) {
            memset(names[i], 'k', len);
            names[i][0] = (char)('0' + i);
        }
        ks_key_init(ks, &keys[i], names[i], len);
    }
    int64_t now = T0;
    for (int step = 0; step < 20000; step++) {
        int i = rand() % HM_KEYS;
        struct ks_key *k = &keys[i];
        int op = rand() % 20;
        if (op < 9) { /* HSET of 1-3 pairs, mostly on few fields (small hashes) */
            int spread = rand() % 10 == 0 ? HM_FIELDS : 4;
            int np = 1 + rand() % 3;
            char *argv[6];
            size_t lens[6];
            char fbuf[3][16], vbuf[3][80];
            for (int p = 0; p < np; p++) {
                int f = rand() % spread;
                lens[2 * p] = (size_t)snprintf(fbuf[p], 16, "f%d", f);
                hm_value(vbuf[p], &lens[2 * p + 1]);
                argv[2 * p] = fbuf[p];
                argv[2 * p + 1] = vbuf[p];
            }
            if (!ks_hash_update_inline(ks, k, now, np, argv, lens)) {
                struct ks_href r;
                cr_assert_eq(ks_hash_open(ks, k, now, KS_H_CREATE, &r), KS_OK);
                for (int p = 0; p < np; p++)
                    hv_set(&r.h, argv[2 * p], lens[2 * p], argv[2 * p + 1], lens[2 * p + 1]);
                ks_hash_close(ks, k, &r, 1);
            }
            for (int p = 0; p < np; p++) {
                int f = atoi(fbuf[p] + 1);
                m[i].n += !m[i].has[f];
                m[i].has[f] = 1;
                memcpy(m[i].v[f], vbuf[p], lens[2 * p + 1]);
                m[i].vlen[f] = lens[2 * p + 1];
            }
            m[i].present = 1;
        } else if (op < 13) { /* HDEL */
            struct ks_href r;
            cr_assert_eq(ks_hash_open(ks, k, now, KS_H_WRITE, &r), KS_OK);
            int f = rand() % (rand() % 3 == 0 ? HM_FIELDS : 4);
            char name[16];
            int nl = snprintf(name, sizeof(name), "f%d", f);
            int d = r.h != NULL && hv_del(&r.h, name, (size_t)nl);
            cr_assert_eq(d, m[i].has[f]);
            ks_hash_close(ks, k, &r, d);
            if (d) {
                m[i].has[f] = 0;
                if (--m[i].n == 0)
                    m[i].present = 0;
            }
        } else if (op < 15) { /* EXPIRE far out / PERSIST: the entry changes shape */
            if (rand() % 2)
                ks_expire(ks, k, now, now + 1000 * SEC, 0);
            else
                ks_persist(ks, k, now);
        } else if (op < 17) { /* RENAME to another of the keys (a short name or a long one) */
            int j = rand() % HM_KEYS;
            int rc = ks_rename(ks, k, &keys[j], now, 0);
            cr_assert_eq(rc, m[i].present ? 1 : KS_NOKEY);
            if (m[i].present && i != j) {
                m[j] = m[i];
                m[i].present = 0;
                m[i].n = 0;
                memset(m[i].has, 0, sizeof(m[i].has));
            }
        } else if (op < 18) { /* SET over it */
            cr_assert_eq(ks_set(ks, k, now, "x", 1, 0, 0), 1);
            ks_del(ks, k, now);
            memset(&m[i], 0, sizeof(m[i]));
        } else { /* HGET-style reads of every key */
            for (int j = 0; j < HM_KEYS; j++)
                hm_check(&keys[j], &m[j], now);
        }
        if (step % 500 == 0) {
            /* A snapshot round trip into a second keyspace holds the same hashes. */
            struct keyspace *saved = ks;
            struct keyspace *copy = ks_create(4, seed);
            bulk_restore = step % 1000 == 0;
            if (bulk_restore)
                cr_assert_eq(ks_bulk_begin(copy), 0);
            for (unsigned s = 0; s < ks_nshards(saved); s++)
                ks_dump_shard(saved, s, now, restore_into, copy);
            if (bulk_restore)
                ks_bulk_end(copy);
            ks = copy;
            for (int j = 0; j < HM_KEYS; j++)
                hm_check(&keys[j], &m[j], now);
            ks_destroy(&copy);
            ks = saved;
        }
    }
    for (int j = 0; j < HM_KEYS; j++)
        hm_check(&keys[j], &m[j], now);
    for (int j = 0; j < HM_KEYS; j++)
        ks_del(ks, &keys[j], now);
    sweep_idle(now);
    cr_assert_eq(ks_used_memory(ks), base, "every byte given back");
    cr_assert(inline_seen > 1000 && heap_seen > 1000, "%d in entries, %d on the heap", inline_seen,
              heap_seen);
}

/* Deleting a shard's last key keeps the shard's slabs (and their index arrays, which used memory
 * counts): a key created and deleted in a loop maps nothing anew. The active-expiry sweep gives
 * them back once KS_IDLE_SWEEPS sweeps in a row found the shard empty with nothing allocated
 * between; a shard holding a key keeps them whatever the sweeps. */
Test(keyspace, emptied_shard_releases_slabs_at_the_sweep_not_on_delete)
{
    uint64_t base = ks_used_memory(ks);
    struct ks_key k = key("pool:{jobs}");
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(ks_del(ks, &k, T0), 1);
    uint64_t parked = ks_used_memory(ks);
    cr_assert_gt(parked, base, "the emptied shard still holds its slab");
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
        cr_assert_eq(ks_del(ks, &k, T0), 1);
        cr_assert_eq(ks_used_memory(ks), parked, "round %d mapped or freed something", i);
    }
    /* One sweep short of the rule, then an allocation: the count starts again. */
    for (int r = 0; r < KS_IDLE_SWEEPS - 1; r++)
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            ks_expire_cycle(ks, s, T0, 64);
    cr_assert_eq(ks_used_memory(ks), parked);
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(ks_del(ks, &k, T0), 1);
    for (int r = 0; r < KS_IDLE_SWEEPS - 1; r++)
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            ks_expire_cycle(ks, s, T0, 64);
    cr_assert_eq(ks_used_memory(ks), parked, "an allocation restarts the count");
    for (unsigned s = 0; s < ks_nshards(ks); s++)
        ks_expire_cycle(ks, s, T0, 64);
    cr_assert_eq(ks_used_memory(ks), base, "released on the sweep that completed the count");
    /* A shard that holds a key keeps its slab through any number of sweeps. */
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    uint64_t one = ks_used_memory(ks);
    sweep_idle(T0);
    sweep_idle(T0);
    cr_assert_eq(ks_used_memory(ks), one);
    struct ks_value v;
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_INT);
    cr_assert_eq(v.i, 1);
}

/* APPEND grows a string in its own block with room to spare (ks_append), so a string built by
 * many small appends moves O(log n) times, not on every append (moving it every time left the
 * heap mostly holes under allkeys-lfu). Its bytes, its expiry and the byte counter stay right. */
Test(keyspace, append_grows_in_place_with_room)
{
    uint64_t base = ks_used_memory(ks);
    struct ks_key k = key("log:{a}");
    char start[100];
    memset(start, 's', sizeof(start));
    cr_assert_eq(ks_set(ks, &k, T0, start, sizeof(start), T0 + 3600 * SEC, 0), 1);
    int64_t ttl = ks_ttl_ns(ks, &k, T0);
    struct ks_value v;
    const char *last = NULL;
    int moves = 0;
    size_t len = sizeof(start), n = 0;
    for (int i = 0; i < 20000; i++) {
        char c = (char)('a' + i % 26);
        cr_assert_eq(ks_append(ks, &k, T0, &c, 1, &n), KS_OK);
        cr_assert_eq(n, ++len);
        cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
        if (v.p != last)
            moves++;
        last = v.p;
    }
    cr_assert_lt(moves, 20, "moved %d times in 20000 appends", moves);
    cr_assert_eq(v.len, len);
    cr_assert_arr_eq(v.p, start, sizeof(start));
    for (size_t i = 0; i < 20000; i++)
        cr_assert_eq(v.p[sizeof(start) + i], (char)('a' + i % 26), "byte %zu", i);
    cr_assert_eq(ks_ttl_ns(ks, &k, T0), ttl, "the expiry is kept");
    /* The room counts in used memory (as Redis counts an sds's free space) and goes with it. */
    cr_assert_geq(ks_used_memory(ks) - base, len);
    cr_assert_eq(ks_del(ks, &k, T0), 1);
    sweep_idle(T0);
    cr_assert_eq(ks_used_memory(ks), base, "every byte given back");
}

/* A short result is stored as SET would store it: a canonical integer becomes KS_INT again (so
 * INCR works on it), anything else a string; an absent key or another type is the caller's. */
Test(keyspace, append_short_results_as_set_stores_them)
{
    struct ks_key k = key("n"), h = key("g");
    struct ks_value v;
    size_t n = 0;
    cr_assert_eq(ks_append(ks, &k, T0, "1", 1, &n), KS_NOKEY);
    cr_assert_eq(ks_set(ks, &k, T0, "-", 1, 0, 0), 1);
    cr_assert_eq(ks_append(ks, &k, T0, "12", 2, &n), KS_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_INT);
    cr_assert_eq(v.i, -12);
    cr_assert_eq(ks_append(ks, &k, T0, "x", 1, &n), KS_OK);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
    cr_assert_arr_eq(v.p, "-12x", 4);
    /* 20 digits: past int64, so a string; 21 and more take the growing path. */
    cr_assert_eq(ks_set(ks, &k, T0, "1234567890", 10, 0, 0), 1);
    cr_assert_eq(ks_append(ks, &k, T0, "1234567890", 10, &n), KS_OK);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
    cr_assert_arr_eq(v.p, "12345678901234567890", 20);
    cr_assert_eq(ks_append(ks, &k, T0, "1", 1, &n), KS_OK);
    cr_assert_eq(n, 21);
    cr_assert_eq(ks_get(ks, &k, T0, &v), KS_RAW);
    cr_assert_arr_eq(v.p, "123456789012345678901", 21);
    cr_assert_eq(ks_gcra_write(ks, &h, T0, T0 + SEC), KS_OK);
    cr_assert_eq(ks_append(ks, &h, T0, "1", 1, &n), KS_WRONGTYPE, "a limiter's state is not");
}
