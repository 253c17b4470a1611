/* test_snap.c - SNAPSHOT.md: the snapshot file (snap.h, docs/SNAPSHOT.md) and its loading (persist.h).
 *
 * Round trips: a keyspace holding every kind of state (GCRA TATs, counters, raw strings, window
 * logs) with and without expiries is written through snap_writer_* the way persist.c does, read
 * back with snap_read into a fresh keyspace, and compared record by record. Time is a fake clock
 * (T0) passed explicitly, so "expired on write" and "expired on load" are exact.
 *
 * Refusals: every region of a small file of known layout is damaged in turn (a flipped byte, a
 * truncation, a structure error under a recomputed checksum); each read must fail with
 * "path: offset N: reason", call back nothing, and leave the file byte-identical.
 *
 * Writer failures: a missing directory, a directory that is a file, a read-only filesystem, a
 * full filesystem (a 64 KiB tmpfs, root only: skipped otherwise). */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "rlimitd/clock.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/lease.h"
#include "rlimitd/persist.h"
#include "rlimitd/reply.h"
#include "rlimitd/snap.h"
#include "rlimitd/swlog.h"
#include "rlimitd/zset.h"

#define SEC 1000000000LL
#define MS 1000000LL
#define T0 (1800000000LL * SEC) /* an arbitrary wall-clock instant in 2027 */
#define SAVE_AT (T0 + 2 * SEC)
#define LOAD_LATE (T0 + 6 * SEC)

static const uint8_t seed[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
static char tmpdir[256];
static char path[512];
static char mnt[512];
static int mounted;
static struct keyspace *ks;

/* ---- files ---- */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/rlimitd-test-snap-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(path, sizeof(path), "%s/dump.snap", tmpdir);
    ks = ks_create(4, seed);
    cr_assert_not_null(ks);
    clock_set_fake(T0);
}

static void teardown(void)
{
    if (mounted) {
        umount2(mnt, MNT_DETACH);
        mounted = 0;
    }
    ks_destroy(&ks);
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    clock_set_fake(0);
}

TestSuite(snap, .init = setup, .fini = teardown);

static unsigned char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "cannot open %s: %s", p, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *p, const void *buf, size_t len)
{
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "cannot create %s: %s", p, strerror(errno));
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* Names in d other than "." and "..", joined by spaces (to see leftover temporary files). */
static void listing(const char *d, char *out, size_t cap)
{
    DIR *dp = opendir(d);
    cr_assert_not_null(dp, "opendir %s: %s", d, strerror(errno));
    out[0] = '\0';
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s", n ? " " : "", e->d_name);
    }
    closedir(dp);
}

/* Open file descriptors of this process. */
static int open_fds(void)
{
    DIR *dp = opendir("/proc/self/fd");
    cr_assert_not_null(dp);
    int n = 0;
    while (readdir(dp) != NULL)
        n++;
    closedir(dp);
    return n;
}

/* Free blocks of the filesystem holding p. */
static unsigned long long free_blocks(const char *p)
{
    struct statvfs sv;
    cr_assert_eq(statvfs(p, &sv), 0);
    return (unsigned long long)sv.f_bfree;
}

/* Mounts a tmpfs of `opts` on tmpdir/mnt; skips the test when that is not possible. */
static void mount_tmpfs(const char *opts)
{
    if (geteuid() != 0)
        cr_skip("not root: cannot mount a tmpfs");
    snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
    cr_assert_eq(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0)
        cr_skip("mount -t tmpfs -o %s failed: %s", opts, strerror(errno));
    mounted = 1;
}

/* ---- saving and loading as persist.c does ---- */

static void encode_cb(void *ud, const struct ks_record *r)
{
    snap_encode(ud, r);
}

/* Writes k as it is at `now` to d/file, shard by shard. Returns the commit's result; *count is
 * the number of records written. */
static int save_ks(struct keyspace *k, const char *d, const char *file, int64_t now,
                   uint64_t *count, char *err, size_t errlen)
{
    struct snap_writer *w = snap_writer_open(d, file, now, err, errlen);
    if (w == NULL)
        return -2;
    struct rbuf buf;
    rbuf_init(&buf);
    *count = 0;
    for (unsigned s = 0; s < ks_nshards(k); s++) {
        buf.len = 0;
        uint64_t n = ks_dump_shard(k, s, now, encode_cb, &buf);
        *count += n;
        if (snap_writer_write(w, buf.p, buf.len, n, err, errlen) != 0) {
            rbuf_free(&buf);
            snap_writer_abort(w);
            return -1;
        }
    }
    rbuf_free(&buf);
    return snap_writer_commit(w, err, errlen);
}

struct loader {
    struct keyspace *ks;
    int64_t now;
    uint64_t calls, stored, skipped;
    uint64_t fail_at; /* return -1 on this call (1-based); 0 = never */
};

static int load_cb(void *ud, const struct ks_record *r)
{
    struct loader *l = ud;
    l->calls++;
    if (l->fail_at != 0 && l->calls == l->fail_at)
        return -1;
    if (l->ks == NULL)
        return 0;
    int rc = ks_restore(l->ks, r, l->now);
    if (rc < 0)
        return -1;
    if (rc == 0)
        l->skipped++;
    else
        l->stored++;
    return 0;
}

/* ---- comparing keyspaces ---- */

struct rec {
    enum ks_type type;
    char *key;
    size_t klen;
    int64_t expire, i;
    char *p;
    size_t len;
    int64_t *ts;
    uint32_t nts;
};

struct recs {
    struct rec *v;
    size_t n, cap;
};

static char *dup_bytes(const void *p, size_t n)
{
    char *d = malloc(n + 1);
    cr_assert_not_null(d);
    if (n > 0)
        memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

static void collect_cb(void *ud, const struct ks_record *r)
{
    struct recs *rs = ud;
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 64;
        rs->v = realloc(rs->v, rs->cap * sizeof(*rs->v));
        cr_assert_not_null(rs->v);
    }
    struct rec *x = &rs->v[rs->n++];
    memset(x, 0, sizeof(*x));
    x->type = r->type;
    x->key = dup_bytes(r->key, r->klen);
    x->klen = r->klen;
    x->expire = r->expire;
    x->i = r->i;
    if (r->type == KS_RAW) {
        x->p = dup_bytes(r->p, r->len);
        x->len = r->len;
    } else if (r->type == KS_SWLOG) {
        x->nts = r->log->len;
        x->ts = calloc(x->nts + 1, sizeof(*x->ts));
        cr_assert_not_null(x->ts);
        for (uint32_t i = 0; i < x->nts; i++)
            x->ts[i] = swlog_at(r->log, i);
        x->i = 0;
    } else if (r->type == KS_LEASE) {
        /* Compared as numbers: the highest id, then each lease's id and expiry. */
        x->nts = 1 + 2 * r->leases->n;
        x->ts = calloc(x->nts, sizeof(*x->ts));
        cr_assert_not_null(x->ts);
        x->ts[0] = r->leases->last_id;
        for (uint32_t i = 0; i < r->leases->n; i++) {
            x->ts[1 + 2 * i] = r->leases->l[i].id;
            x->ts[2 + 2 * i] = r->leases->l[i].expire;
        }
    }
}

static int rec_cmp(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return x->klen < y->klen ? -1 : x->klen > y->klen;
}

/* Every live record of k at now, sorted by key. */
static struct recs collect(struct keyspace *k, int64_t now)
{
    struct recs rs = {0};
    for (unsigned s = 0; s < ks_nshards(k); s++)
        ks_dump_shard(k, s, now, collect_cb, &rs);
    if (rs.n > 0)
        qsort(rs.v, rs.n, sizeof(*rs.v), rec_cmp);
    return rs;
}

static void recs_free(struct recs *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].key);
        free(rs->v[i].p);
        free(rs->v[i].ts);
    }
    free(rs->v);
    memset(rs, 0, sizeof(*rs));
}

static void expect_same(const struct recs *a, const struct recs *b)
{
    cr_assert_eq(a->n, b->n, "record counts differ: %zu vs %zu", a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct rec *x = &a->v[i], *y = &b->v[i];
        cr_assert_eq(x->klen, y->klen, "key %zu: lengths %zu vs %zu", i, x->klen, y->klen);
        cr_assert_arr_eq(x->key, y->key, x->klen, "key %zu differs", i);
        cr_expect_eq(x->type, y->type, "key %.40s: type %d vs %d", x->key, x->type, y->type);
        cr_expect_eq(x->expire, y->expire, "key %.40s: expiry %lld vs %lld", x->key,
                     (long long)x->expire, (long long)y->expire);
        cr_expect_eq(x->i, y->i, "key %.40s: value %lld vs %lld", x->key, (long long)x->i,
                     (long long)y->i);
        cr_assert_eq(x->len, y->len, "key %.40s: string lengths %zu vs %zu", x->key, x->len,
                     y->len);
        if (x->len > 0)
            cr_expect_arr_eq(x->p, y->p, x->len, "key %.40s: string bytes differ", x->key);
        cr_assert_eq(x->nts, y->nts, "key %.40s: %u vs %u timestamps", x->key, x->nts, y->nts);
        for (uint32_t t = 0; t < x->nts; t++)
            cr_expect_eq(x->ts[t], y->ts[t], "key %.40s: timestamp %u: %lld vs %lld", x->key, t,
                         (long long)x->ts[t], (long long)y->ts[t]);
    }
}

/* ---- building a keyspace with every kind of state ---- */

static struct ks_key kk(struct keyspace *k, const char *p, size_t len)
{
    struct ks_key key;
    ks_key_init(k, &key, p, len);
    return key;
}

static void throttle(struct keyspace *k, const char *key, int64_t burst, int64_t count,
                     int64_t period, int64_t qty, int64_t now, int times)
{
    struct gcra_limits l;
    const char *why = NULL;
    cr_assert_eq(gcra_prepare(burst, count, period, qty, &l, &why), 0, "%s", why);
    struct ks_key kx = kk(k, key, strlen(key));
    for (int i = 0; i < times; i++) {
        struct gcra_result r;
        cr_assert_eq(ks_gcra_apply(k, &kx, now, &l, &r, &why), KS_OK);
    }
}

static void isallowed(struct keyspace *k, const char *key, int64_t now, int64_t period_ms,
                      int64_t max_count)
{
    struct ks_key kx = kk(k, key, strlen(key));
    int allowed;
    cr_assert_eq(ks_swlog_apply(k, &kx, now, period_ms, max_count, &allowed, NULL), KS_OK);
}

static void set(struct keyspace *k, const char *key, size_t klen, const char *val, size_t vlen,
                int64_t expire_at)
{
    struct ks_key kx = kk(k, key, klen);
    cr_assert_eq(ks_set(k, &kx, T0, val, vlen, expire_at, 0), 1);
}

#define BIG_RAW 70000 /* a three-byte varint length */
#define BULK 3000

static char long_key[300];
static char big_raw[BIG_RAW];
static const char bin_key[] = "bin\0key\xff\x80";
static const char bin_val[] = "\0\r\n\xff\x01 value";

/* Keys that are live at SAVE_AT: 15 named + BULK. Expired by SAVE_AT (skipped on write): 3.
 * Expiring in (SAVE_AT, LOAD_LATE] (skipped on load): 3. */
#define LIVE_AT_SAVE (17 + BULK)
#define EXPIRED_AT_SAVE 3
#define EXPIRING_BEFORE_LOAD 3

static void populate(struct keyspace *k)
{
    /* GCRA: COMMANDS.md, CL.THROTTLE example, exhausted: TAT = T0 + 32 s, expiring then. */
    throttle(k, "user123", 15, 30, 60, 1, T0, 16);
    throttle(k, "short", 0, 1, 1, 1, T0, 1);                  /* expires T0 + 1 s: not written */
    throttle(k, "mid", 0, 1, 4, 1, T0, 1);                    /* T0 + 4 s: written, not loaded */
    throttle(k, "hourly", 99, 100, 3600, 7, T0 - 5 * SEC, 3); /* TAT far ahead */
    /* GCRA's TAT past 2262, kept in microseconds (negative), without expiry. */
    struct gcra_redis_args ga = {2, 1, 999999999999.0, 1};
    struct gcra_result gr;
    const char *gerr;
    struct ks_key fk = kk(k, "far", 3);
    cr_assert_eq(ks_gcra_redis_apply(k, &fk, T0, &ga, &gr, &gerr), KS_OK);
    cr_assert(gr.store && gr.new_tat < 0);
    /* Counters. */
    struct ks_key c = kk(k, "counter", 7);
    int64_t out;
    cr_assert_eq(ks_incrby(k, &c, T0, 41, &out), KS_OK);
    cr_assert_eq(ks_incrby(k, &c, T0, 1, &out), KS_OK);
    cr_assert_eq(out, 42);
    set(k, "min", 3, "-9223372036854775808", 20, 0);
    set(k, "max", 3, "9223372036854775807", 19, T0 + 3600 * SEC + 123456789);
    set(k, "ttl3", 4, "5", 1, T0 + 3 * SEC); /* written, not loaded */
    set(k, "gone", 4, "1", 1, T0 + SEC);     /* not written */
    memset(long_key, 'k', sizeof(long_key));
    set(k, long_key, sizeof(long_key), "300", 3, 0);
    /* Raw strings: empty key, empty value, binary key and value, a big value. */
    set(k, "", 0, "the empty key", 13, 0);
    set(k, "empty", 5, "", 0, T0 + 100 * SEC);
    set(k, bin_key, sizeof(bin_key) - 1, bin_val, sizeof(bin_val) - 1, T0 + 50 * SEC);
    for (size_t i = 0; i < sizeof(big_raw); i++)
        big_raw[i] = (char)(i * 7 + i / 256);
    set(k, "big", 3, big_raw, sizeof(big_raw), 0);
    set(k, "soon", 4, "x", 1, T0 + 5 * SEC); /* written, not loaded */
    /* Window logs: deltas of every varint width, two attempts in the same millisecond. */
    static const int64_t at_ms[] = {0, 0, 1, 128, 255, 16384, 16384 + 16383, 2100000, 2100001};
    for (size_t i = 0; i < sizeof(at_ms) / sizeof(at_ms[0]); i++)
        isallowed(k, "hist:{alice}:login", T0 - 2200 * SEC + at_ms[i] * MS + 17, 7200 * 1000, 1000);
    for (int i = 0; i < 10; i++) /* only max_count + 1 = 3 are kept */
        isallowed(k, "hist:{bob}:x", T0 - (10 - i) * 100 * MS, 60 * 1000, 2);
    isallowed(k, "hist:{eve}:y", T0, 1000, 5); /* expires T0 + 1 s: not written */
    /* Leases: three held, one released, the last expiring an hour on. */
    struct ks_key pk = kk(k, "pool", 4);
    struct ks_lease_out lo;
    int64_t first = 0;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ks_lease_acquire(k, &pk, T0 + i * MS, 10, (i + 1) * 900 * SEC, &lo), KS_OK);
        cr_assert_neq(lo.id, 0);
        first = i == 0 ? lo.id : first;
    }
    cr_assert_eq(ks_lease_release(k, &pk, T0 + 5 * MS, first, &lo), KS_OK);
    cr_assert_eq(lo.done, 1);
    /* Enough keys for every shard, TATs all different. */
    for (int i = 0; i < BULK; i++) {
        char key[32];
        snprintf(key, sizeof(key), "bulk:%d", i);
        throttle(k, key, 1000, 10, 3600, 1 + i % 50, T0 - i * MS, 1 + i % 3);
    }
}

/* ---- round trips ---- */

Test(snap, round_trip_every_kind_of_state)
{
    populate(ks);
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    cr_expect_eq(written, LIVE_AT_SAVE);

    struct keyspace *fresh = ks_create(6, seed); /* another shard count: nothing depends on it */
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(l.calls, LIVE_AT_SAVE);
    cr_expect_eq(l.stored, LIVE_AT_SAVE);
    cr_expect_eq(l.skipped, 0);
    cr_expect_eq(ks_key_count(fresh), LIVE_AT_SAVE);

    struct recs a = collect(ks, SAVE_AT), b = collect(fresh, SAVE_AT);
    cr_assert_eq(a.n, LIVE_AT_SAVE);
    expect_same(&a, &b);
    recs_free(&a);
    recs_free(&b);

    /* A few values by name, so that the comparison above is not comparing two empty sets. */
    struct ks_value v;
    struct ks_key k = kk(fresh, "user123", 7);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_GCRA);
    cr_expect_eq(v.i, T0 + 32 * SEC);
    cr_expect_eq(ks_ttl_ns(fresh, &k, SAVE_AT), 30 * SEC);
    k = kk(fresh, "far", 3);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_GCRA);
    cr_expect_eq(v.i, -(T0 / 1000 + 999999999999000064LL));
    cr_expect_eq(ks_ttl_ns(fresh, &k, SAVE_AT), -1);
    k = kk(fresh, "pool", 4);
    int64_t live;
    cr_assert_eq(ks_lease_count(fresh, &k, SAVE_AT, &live), KS_OK);
    cr_expect_eq(live, 3);
    cr_expect_eq(ks_ttl_ns(fresh, &k, SAVE_AT), T0 + 3 * MS + 3600 * SEC - SAVE_AT);
    k = kk(fresh, "counter", 7);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_INT);
    cr_expect_eq(v.i, 42);
    cr_expect_eq(ks_ttl_ns(fresh, &k, SAVE_AT), -1);
    k = kk(fresh, "min", 3);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_INT);
    cr_expect_eq(v.i, INT64_MIN);
    k = kk(fresh, "max", 3);
    cr_expect_eq(ks_ttl_ns(fresh, &k, SAVE_AT), 3598 * SEC + 123456789);
    k = kk(fresh, "big", 3);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_RAW);
    cr_assert_eq(v.len, BIG_RAW);
    cr_expect_arr_eq(v.p, big_raw, BIG_RAW);
    k = kk(fresh, bin_key, sizeof(bin_key) - 1);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_RAW);
    cr_assert_eq(v.len, sizeof(bin_val) - 1);
    cr_expect_arr_eq(v.p, bin_val, v.len);
    k = kk(fresh, "", 0);
    cr_expect_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_RAW);
    k = kk(fresh, "empty", 5);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_RAW);
    cr_expect_eq(v.len, 0);
    k = kk(fresh, "hist:{alice}:login", 18);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_SWLOG);
    cr_expect_eq(v.i, 9);
    k = kk(fresh, "hist:{bob}:x", 12);
    cr_assert_eq(ks_get(fresh, &k, SAVE_AT, &v), KS_SWLOG);
    cr_expect_eq(v.i, 3);

    /* The restored limit is still exhausted: COMMANDS.md, CL.THROTTLE `1 16 0 2 32` shifted by the second that
     * passed (one call refilled at T0 + 2 s, so look at T0 + 1 s). */
    struct gcra_limits lim;
    const char *why;
    struct gcra_result r;
    cr_assert_eq(gcra_prepare(15, 30, 60, 1, &lim, &why), 0);
    k = kk(fresh, "user123", 7);
    cr_assert_eq(ks_gcra_apply(fresh, &k, T0 + SEC, &lim, &r, &why), KS_OK);
    cr_expect_eq(r.limited, 1);
    cr_expect_eq(r.retry_after, 1);
    cr_expect_eq(r.reset_after, 31);
    ks_destroy(&fresh);
}

/* Times are absolute: a restart half an hour later allows exactly half an hour of refill. */
Test(snap, refill_after_a_restart_is_the_elapsed_time)
{
    throttle(ks, "hourly", 59, 60, 3600, 1, T0, 60); /* one call a minute, all 60 used */
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", T0, &n, err, sizeof(err)), 0, "%s", err);
    int64_t later = T0 + 1800 * SEC;
    struct keyspace *fresh = ks_create(4, seed);
    struct loader l = {fresh, later, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 0, "%s", err);
    struct gcra_limits lim;
    const char *why;
    struct gcra_result r;
    cr_assert_eq(gcra_prepare(59, 60, 3600, 1, &lim, &why), 0);
    struct ks_key k = kk(fresh, "hourly", 6);
    for (int i = 1; i <= 30; i++) {
        cr_assert_eq(ks_gcra_apply(fresh, &k, later, &lim, &r, &why), KS_OK);
        cr_expect_eq(r.limited, 0, "call %d of the 30 refilled was limited", i);
    }
    cr_assert_eq(ks_gcra_apply(fresh, &k, later, &lim, &r, &why), KS_OK);
    cr_expect_eq(r.limited, 1, "a 31st call after 30 minutes was allowed");
    cr_expect_eq(r.retry_after, 60);
    ks_destroy(&fresh);
}

Test(snap, window_log_timestamps_are_exact)
{
    populate(ks);
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    struct keyspace *fresh = ks_create(2, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 0, "%s", err);
    struct recs b = collect(fresh, SAVE_AT);
    const struct rec *alice = NULL, *bob = NULL;
    for (size_t i = 0; i < b.n; i++) {
        if (b.v[i].klen == 18 && memcmp(b.v[i].key, "hist:{alice}:login", 18) == 0)
            alice = &b.v[i];
        if (b.v[i].klen == 12 && memcmp(b.v[i].key, "hist:{bob}:x", 12) == 0)
            bob = &b.v[i];
    }
    cr_assert_not_null(alice);
    cr_assert_not_null(bob);
    static const int64_t at_ms[] = {0, 0, 1, 128, 255, 16384, 16384 + 16383, 2100000, 2100001};
    int64_t base_ms = (T0 - 2200 * SEC + 17) / MS;
    cr_assert_eq(alice->nts, 9);
    for (uint32_t i = 0; i < 9; i++)
        cr_expect_eq(alice->ts[i], base_ms + at_ms[i], "alice %u", i);
    cr_expect_eq(alice->expire, (base_ms + 2100001 + 7200 * 1000) * MS);
    cr_assert_eq(bob->nts, 3);
    for (uint32_t i = 0; i < 3; i++)
        cr_expect_eq(bob->ts[i], (T0 - (3 - (int64_t)i) * 100 * MS) / MS, "bob %u", i);
    cr_expect_eq(bob->expire, T0 - 100 * MS + 60 * SEC);
    recs_free(&b);
    ks_destroy(&fresh);
}

Test(snap, expired_state_is_skipped_on_write)
{
    populate(ks);
    /* Nothing has reclaimed them: skipping them is the writer's doing. */
    cr_assert_eq(ks_key_count(ks), LIVE_AT_SAVE + EXPIRED_AT_SAVE);
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    struct snap_info info;
    cr_assert_eq(snap_read(path, NULL, NULL, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.records, LIVE_AT_SAVE);
    /* GCRA: user123, mid, hourly, far + bulk; short expired. Counters: counter, min, max, ttl3,
     * long key; gone expired. Strings: "", empty, bin, big, soon. Logs: alice, bob; eve gone. */
    cr_expect_eq(info.by_type[KS_GCRA], 4 + BULK);
    cr_expect_eq(info.by_type[KS_INT], 5);
    cr_expect_eq(info.by_type[KS_RAW], 5);
    cr_expect_eq(info.by_type[KS_SWLOG], 2);
    cr_expect_eq(info.by_type[KS_LEASE], 1);
    cr_expect_eq(info.leases, 3);
    cr_expect_eq(info.timestamps, 9 + 3);
    cr_expect_eq(info.version, SNAP_VERSION);
    cr_expect_eq(info.created_ns, SAVE_AT);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(info.bytes, (uint64_t)st.st_size);
    /* The three expired keys are nowhere in the file. */
    size_t len;
    unsigned char *buf = slurp(path, &len);
    cr_expect_null(memmem(buf, len, "short", 5));
    cr_expect_null(memmem(buf, len, "gone", 4));
    cr_expect_null(memmem(buf, len, "hist:{eve}", 10));
    cr_expect_not_null(memmem(buf, len, "hist:{bob}", 10));
    free(buf);
}

Test(snap, expired_state_is_skipped_on_load)
{
    populate(ks);
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    struct keyspace *fresh = ks_create(4, seed);
    struct loader l = {fresh, LOAD_LATE, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(l.calls, LIVE_AT_SAVE);
    cr_expect_eq(l.skipped, EXPIRING_BEFORE_LOAD);
    cr_expect_eq(l.stored, LIVE_AT_SAVE - EXPIRING_BEFORE_LOAD);
    /* Skipped means not stored at all, not stored-and-hidden. */
    cr_expect_eq(ks_key_count(fresh), LIVE_AT_SAVE - EXPIRING_BEFORE_LOAD);
    static const char *const gone[] = {"mid", "ttl3", "soon", "short", "gone", "hist:{eve}:y"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        struct ks_key k = kk(fresh, gone[i], strlen(gone[i]));
        cr_expect_eq(ks_get(fresh, &k, LOAD_LATE, NULL), KS_NONE, "%s was loaded", gone[i]);
    }
    struct recs a = collect(ks, LOAD_LATE), b = collect(fresh, LOAD_LATE);
    cr_assert_eq(a.n, LIVE_AT_SAVE - EXPIRING_BEFORE_LOAD);
    expect_same(&a, &b);
    recs_free(&a);
    recs_free(&b);
    ks_destroy(&fresh);
}

Test(snap, empty_keyspace_round_trip)
{
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", T0, &n, err, sizeof(err)), 0, "%s", err);
    struct snap_info info;
    struct loader l = {NULL, T0, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.records, 0);
    cr_expect_eq(l.calls, 0);
    cr_expect_eq(info.bytes, 32 + 1 + 8 + 8, "header, end marker, count, checksum");
}

/* The byte layout of docs/SNAPSHOT.md, checked on one record of each kind. */
Test(snap, encoding_matches_the_documented_layout)
{
    struct rbuf b;
    rbuf_init(&b);
    struct ks_record r = {
        .type = KS_GCRA, .key = "g", .klen = 1, .expire = 0x0102030405060708, .i = -2};
    snap_encode(&b, &r);
    static const unsigned char gcra[] = {1, 1,    'g',  8,    7,    6,    5,    4,    3,   2,
                                         1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(b.len, sizeof(gcra));
    cr_expect_arr_eq(b.p, gcra, sizeof(gcra));

    b.len = 0;
    char key[200];
    memset(key, 'a', sizeof(key));
    r = (struct ks_record){.type = KS_RAW, .key = key, .klen = 200, .p = "xy", .len = 2};
    snap_encode(&b, &r);
    cr_assert_eq(b.len, 1 + 2 + 200 + 8 + 1 + 2);
    cr_expect_eq((unsigned char)b.p[0], 3);
    cr_expect_eq((unsigned char)b.p[1], 0xc8); /* 200 = 0x48 | 0x80, then 1 */
    cr_expect_eq((unsigned char)b.p[2], 0x01);
    cr_expect_eq((unsigned char)b.p[203 + 8], 2);
    cr_expect_arr_eq(b.p + 203 + 9, "xy", 2);

    b.len = 0;
    struct swlog *log = malloc(swlog_bytes(4));
    cr_assert_not_null(log);
    swlog_init(log, 4);
    swlog_record(log, 1000, 3);
    swlog_record(log, 1000, 3);
    swlog_record(log, 1300, 3);
    r = (struct ks_record){.type = KS_SWLOG, .key = "w", .klen = 1, .expire = 5, .log = log};
    snap_encode(&b, &r);
    static const unsigned char wl[] = {4,    1,    'w', 5, 0, 0, 0, 0, 0, 0,    0,   3,
                                       0xe8, 0x03, 0,   0, 0, 0, 0, 0, 0, 0xac, 0x02};
    cr_assert_eq(b.len, sizeof(wl));
    cr_expect_arr_eq(b.p, wl, sizeof(wl));
    free(log);
    rbuf_free(&b);
}

/* SAVE and loading through persist.c, with the fake clock deciding what has expired. */
Test(snap, persist_save_and_load_use_the_clock)
{
    populate(ks);
    struct conf conf;
    conf_init(&conf);
    char *words[1] = {tmpdir};
    char err[512] = "";
    cr_assert_eq(conf_set(&conf, "dir", 1, (const char *const *)words, 0, err, sizeof(err)), 0,
                 "%s", err);
    words[0] = "dump.snap";
    cr_assert_eq(conf_set(&conf, "dbfilename", 1, (const char *const *)words, 0, err, sizeof(err)),
                 0);
    clock_set_fake(SAVE_AT);
    struct persist *p = persist_create(ks, &conf);
    cr_assert_eq(persist_save(p, 0, 1, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(persist_lastsave(p), SAVE_AT / SEC);
    persist_destroy(&p);
    cr_assert_null(p);

    clock_set_fake(LOAD_LATE);
    struct keyspace *fresh = ks_create(4, seed);
    p = persist_create(fresh, &conf);
    cr_assert_eq(persist_load(p, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(ks_key_count(fresh), LIVE_AT_SAVE - EXPIRING_BEFORE_LOAD);
    cr_expect_eq(persist_lastsave(p), SAVE_AT / SEC, "LASTSAVE is the snapshot's creation");
    struct recs a = collect(ks, LOAD_LATE), b = collect(fresh, LOAD_LATE);
    expect_same(&a, &b);
    recs_free(&a);
    recs_free(&b);
    persist_destroy(&p);

    /* A background save, then a corrupt file refused by persist_load with path and offset. */
    clock_set_fake(SAVE_AT);
    p = persist_create(ks, &conf);
    cr_assert_eq(persist_save(p, 1, 2, err, sizeof(err)), 0, "%s", err);
    persist_wait(p);
    persist_destroy(&p);
    struct snap_info info;
    cr_assert_eq(snap_read(path, NULL, NULL, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.records, LIVE_AT_SAVE);
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, "X", 1, 40), 1);
    close(fd);
    ks_destroy(&fresh);
    fresh = ks_create(4, seed);
    p = persist_create(fresh, &conf);
    err[0] = '\0';
    cr_expect_eq(persist_load(p, err, sizeof(err)), -1);
    cr_expect_not_null(strstr(err, path), "%s", err);
    cr_expect_not_null(strstr(err, "offset"), "%s", err);
    cr_expect_eq(ks_key_count(fresh), 0, "a refused file loads nothing");
    persist_destroy(&p);
    ks_destroy(&fresh);
    conf_free(&conf);
}

/* ---- a small file of known layout, and its damaged variants ---- */

struct layout {
    size_t gcra, gcra_key, gcra_expiry, gcra_value;
    size_t ctr, raw, raw_bytes;
    size_t wl, wl_count, wl_first, wl_delta;
    size_t marker, count, checksum, size;
};

/* Writes a file of four records (GCRA "g", counter "c", string "s", window log "w" with three
 * timestamps) to path and returns its bytes; *L gets the offsets of its fields. */
static unsigned char *small_file(struct layout *L, size_t *len)
{
    char err[512] = "";
    struct snap_writer *w = snap_writer_open(tmpdir, "dump.snap", T0, err, sizeof(err));
    cr_assert_not_null(w, "%s", err);
    struct swlog *log = malloc(swlog_bytes(4));
    cr_assert_not_null(log);
    swlog_init(log, 4);
    swlog_record(log, T0 / MS - 500, 3);
    swlog_record(log, T0 / MS - 400, 3);
    swlog_record(log, T0 / MS, 3);
    const struct ks_record recs[4] = {
        {.type = KS_GCRA, .key = "g", .klen = 1, .expire = T0 + 32 * SEC, .i = T0 + 32 * SEC},
        {.type = KS_INT, .key = "c", .klen = 1, .i = 42},
        {.type = KS_RAW, .key = "s", .klen = 1, .expire = T0 + SEC, .p = "hi", .len = 2},
        {.type = KS_SWLOG, .key = "w", .klen = 1, .expire = T0 + 60 * SEC, .log = log},
    };
    size_t at = 32, starts[4];
    struct rbuf b;
    rbuf_init(&b);
    for (int i = 0; i < 4; i++) {
        b.len = 0;
        snap_encode(&b, &recs[i]);
        starts[i] = at;
        at += b.len;
        cr_assert_eq(snap_writer_write(w, b.p, b.len, 1, err, sizeof(err)), 0, "%s", err);
    }
    rbuf_free(&b);
    free(log);
    cr_assert_eq(snap_writer_commit(w, err, sizeof(err)), 0, "%s", err);
    L->gcra = starts[0];
    L->gcra_key = L->gcra + 2;
    L->gcra_expiry = L->gcra + 3;
    L->gcra_value = L->gcra + 11;
    L->ctr = starts[1];
    L->raw = starts[2];
    L->raw_bytes = L->raw + 12;
    L->wl = starts[3];
    L->wl_count = L->wl + 11;
    L->wl_first = L->wl + 12;
    L->wl_delta = L->wl + 20; /* 100: one byte; then 400: two */
    L->marker = at;
    L->count = at + 1;
    L->checksum = at + 9;
    L->size = at + 17;
    unsigned char *buf = slurp(path, len);
    cr_assert_eq(*len, L->size);
    cr_assert_eq(L->size, 32 + 19 + 19 + 14 + 23 + 17, "the layout of docs/SNAPSHOT.md");
    cr_assert_arr_eq(buf, "RLIMSNAP\x05\0\0\0\0\0\0\0", 16);
    cr_assert_eq(buf[L->marker], 0xff);
    cr_assert_eq(buf[L->count], 4);
    cr_assert_eq(buf[L->wl_delta], 100);
    return buf;
}

static void rechecksum(unsigned char *buf, size_t len)
{
    uint64_t h = XXH3_64bits(buf, len - 8);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + (size_t)i] = (unsigned char)(h >> (8 * i));
}

/* Writes bytes to path, expects snap_read to refuse it with "path: offset N: ..." (N <= len)
 * containing `want` (if not NULL) without calling back, and the file to be unchanged. */
static void expect_refused(const unsigned char *bytes, size_t len, const char *want,
                           const char *what)
{
    spit(path, bytes, len);
    char err[512] = "";
    struct loader l = {NULL, T0, 0, 0, 0, 0};
    int rc = snap_read(path, load_cb, &l, NULL, err, sizeof(err));
    cr_assert_eq(rc, -1, "%s: accepted (rc %d)", what, rc);
    cr_expect_eq(l.calls, 0, "%s: %llu records handed over before the refusal", what,
                 (unsigned long long)l.calls);
    size_t plen = strlen(path);
    cr_expect(strncmp(err, path, plen) == 0 && strncmp(err + plen, ": offset ", 9) == 0,
              "%s: message does not start with 'path: offset ': %s", what, err);
    unsigned long long off = ~0ull;
    cr_expect(sscanf(err + plen, ": offset %llu:", &off) == 1 && off <= len,
              "%s: bad offset in: %s", what, err);
    if (want != NULL)
        cr_expect_not_null(strstr(err, want), "%s: '%s' not in: %s", what, want, err);
    size_t after_len;
    unsigned char *after = slurp(path, &after_len);
    cr_assert_eq(after_len, len, "%s: the file changed size", what);
    if (len > 0)
        cr_assert_arr_eq(after, bytes, len, "%s: the file changed", what);
    free(after);
}

Test(snap, a_flipped_byte_in_any_region_is_refused)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    const struct {
        const char *region;
        size_t off;
        const char *want;
    } cases[] = {
        {"magic", 0, "magic"},
        {"magic end", 7, "magic"},
        /* bit 0 of 5 gives 4, an older version the checksum refuses; the other bits give
         * versions this reader does not know */
        {"version", 8, NULL},
        {"version high byte", 11, "unsupported format version"},
        {"flags", 12, "flags"},
        {"created", 16, NULL},
        {"created high byte", 23, NULL},
        {"reserved", 24, NULL},
        {"gcra type", L.gcra, NULL},
        {"key length", L.gcra + 1, NULL},
        {"key", L.gcra_key, NULL},
        {"expiry", L.gcra_expiry, NULL},
        {"expiry high byte", L.gcra_expiry + 7, NULL},
        {"gcra value", L.gcra_value, NULL},
        {"counter value", L.ctr + 11, NULL},
        {"string length", L.raw + 11, NULL},
        {"string bytes", L.raw_bytes, NULL},
        {"window-log count", L.wl_count, NULL},
        {"window-log first timestamp", L.wl_first, NULL},
        {"window-log delta", L.wl_delta, NULL},
        {"window-log two-byte delta", L.wl_delta + 1, NULL},
        {"end marker", L.marker, NULL},
        {"record count", L.count, NULL},
        {"record count high byte", L.count + 7, NULL},
        {"checksum", L.checksum, "checksum"},
        {"checksum last byte", L.size - 1, "checksum"},
    };
    unsigned char *buf = malloc(len);
    cr_assert_not_null(buf);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(buf, orig, len);
            buf[cases[i].off] ^= (unsigned char)(1u << bit);
            char what[96];
            snprintf(what, sizeof(what), "%s (offset %zu, bit %d)", cases[i].region, cases[i].off,
                     bit);
            expect_refused(buf, len, cases[i].want, what);
        }
    }
    /* And every other byte, bit 0. */
    for (size_t off = 0; off < len; off++) {
        memcpy(buf, orig, len);
        buf[off] ^= 1;
        char what[64];
        snprintf(what, sizeof(what), "byte %zu flipped", off);
        expect_refused(buf, len, NULL, what);
    }
    free(buf);
    free(orig);
}

Test(snap, truncation_at_every_offset_is_refused)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    for (size_t n = 0; n < len; n++) {
        char what[64];
        snprintf(what, sizeof(what), "truncated to %zu bytes", n);
        expect_refused(orig, n, NULL, what);
    }
    free(orig);
}

Test(snap, a_byte_appended_is_refused)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    unsigned char *buf = malloc(len + 1);
    cr_assert_not_null(buf);
    memcpy(buf, orig, len);
    buf[len] = 0;
    expect_refused(buf, len + 1, NULL, "one byte appended");
    free(buf);
    free(orig);
}

Test(snap, wrong_magic_is_refused)
{
    struct layout L;
    size_t len;
    unsigned char *buf = small_file(&L, &len);
    memcpy(buf, "REDIS001", 8);
    rechecksum(buf, len);
    expect_refused(buf, len, "magic", "an RDB-like magic with a valid checksum");
    memset(buf, 0, len);
    expect_refused(buf, len, "offset 0", "all zeros");
    free(buf);
}

Test(snap, future_version_is_refused)
{
    struct layout L;
    size_t len;
    unsigned char *buf = small_file(&L, &len);
    buf[8] = SNAP_VERSION + 1;
    rechecksum(buf, len);
    expect_refused(buf, len, "unsupported format version", "the next version, valid checksum");
    cr_assert_eq(buf[8], SNAP_VERSION + 1);
    buf[8] = 0;
    rechecksum(buf, len);
    expect_refused(buf, len, "unsupported format version", "version 0, valid checksum");
    buf[8] = 1;
    buf[14] = 1; /* flags bit 16 */
    rechecksum(buf, len);
    expect_refused(buf, len, "offset 12", "unknown flags, valid checksum");
    free(buf);
}

Test(snap, empty_file_is_refused)
{
    expect_refused((const unsigned char *)"", 0, "offset 0", "empty file");
    expect_refused((const unsigned char *)"RLIMSNAP", 8, "offset 0", "magic only");
}

Test(snap, missing_file_returns_1)
{
    char err[512] = "";
    struct snap_info info;
    cr_expect_eq(snap_read(path, NULL, NULL, &info, err, sizeof(err)), 1);
    struct loader l = {NULL, T0, 0, 0, 0, 0};
    cr_expect_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 1);
    cr_expect_eq(l.calls, 0);
    struct stat st;
    cr_expect_neq(stat(path, &st), 0, "reading created the file");
}

Test(snap, unreadable_path_is_an_error_not_missing)
{
    /* A directory where the file should be: open succeeds (O_RDONLY), mmap cannot. */
    cr_assert_eq(mkdir(path, 0755), 0);
    char err[512] = "";
    cr_expect_eq(snap_read(path, NULL, NULL, NULL, err, sizeof(err)), -1);
    cr_expect_not_null(strstr(err, path), "%s", err);
}

/* Structure errors that a checksum cannot catch (the checksum is recomputed after the damage):
 * the parser itself must refuse them, before handing over any record. */
Test(snap, structure_errors_under_a_valid_checksum_are_refused)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    unsigned char *buf = malloc(len + 16);
    cr_assert_not_null(buf);
    const struct {
        const char *what;
        size_t off;
        unsigned char val;
    } cases[] = {
        {"record type 0", L.gcra, 0},
        {"record type 5", L.ctr, 5},
        {"record type 0xfe", L.wl, 0xfe},
        {"key length past the end", L.gcra + 1, 0x7f},
        {"key length, unterminated varint", L.raw + 1, 0xff},
        {"string length past the end", L.raw + 11, 0x7f},
        {"window log of 0 timestamps", L.wl_count, 0},
        {"window log of 100 timestamps", L.wl_count, 100},
        {"record count 3", L.count, 3},
        {"record count 5", L.count, 5},
        {"record count 2^56 + 4", L.count + 7, 1},
        {"end marker replaced by a type", L.marker, 1},
        {"end marker replaced by 0", L.marker, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(buf, orig, len);
        buf[cases[i].off] = cases[i].val;
        rechecksum(buf, len);
        expect_refused(buf, len, NULL, cases[i].what);
    }
    /* A stray byte between the end marker and the count. */
    memcpy(buf, orig, L.count);
    buf[L.count] = 0;
    memcpy(buf + L.count + 1, orig + L.count, len - L.count);
    rechecksum(buf, len + 1);
    expect_refused(buf, len + 1, NULL, "a byte after the end marker");
    /* Bytes between the end marker and the count. */
    memcpy(buf, orig, len);
    memmove(buf + L.count + 11, buf + L.count, 16);
    static const unsigned char extra[11] = {2, 1, 'z', 0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(buf + L.count, extra, sizeof(extra));
    rechecksum(buf, len + 11);
    expect_refused(buf, len + 11, NULL, "11 bytes after the end marker");
    /* A window-log delta that overflows int64. */
    size_t n = 0;
    memcpy(buf, orig, L.wl_delta);
    n = L.wl_delta;
    buf[L.wl_count] = 2;
    for (int i = 0; i < 9; i++)
        buf[n++] = 0xff;
    buf[n++] = 0x01; /* 2^64 - 1 */
    memcpy(buf + n, orig + L.marker, len - L.marker);
    n += len - L.marker;
    rechecksum(buf, n);
    expect_refused(buf, n, NULL, "window-log delta past INT64_MAX");
    free(buf);
    free(orig);
}

/* "Reads and verifies path completely before the first callback": damage in the last record
 * must stop the load before the first record reaches the keyspace. */
Test(snap, nothing_is_handed_over_before_the_whole_file_is_verified)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    unsigned char *buf = malloc(len);
    cr_assert_not_null(buf);
    static const unsigned char counts[] = {4, 12, 50}; /* 4: reads into the trailer */
    for (size_t i = 0; i < sizeof(counts); i++) {
        memcpy(buf, orig, len);
        buf[L.wl_count] = counts[i];
        rechecksum(buf, len);
        char what[64];
        snprintf(what, sizeof(what), "last record claims %u timestamps", counts[i]);
        expect_refused(buf, len, NULL, what);
    }
    free(buf);
    free(orig);
}

Test(snap, a_refused_record_stops_the_read_with_its_offset)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    free(orig);
    char err[512] = "";
    struct loader l = {NULL, T0, 0, 0, 0, 3};
    cr_expect_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), -1);
    cr_expect_eq(l.calls, 3);
    char want[600];
    snprintf(want, sizeof(want), "%s: offset %zu: ", path, L.raw);
    cr_expect(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'", err, want);
}

/* ---- the writer ---- */

Test(snap, commit_leaves_only_the_snapshot)
{
    char err[512] = "", names[1024];
    uint64_t n;
    populate(ks);
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    listing(tmpdir, names, sizeof(names));
    cr_expect_str_eq(names, "dump.snap");
    /* A second save replaces it. */
    struct ks_key k = kk(ks, "new", 3);
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    listing(tmpdir, names, sizeof(names));
    cr_expect_str_eq(names, "dump.snap");
    struct snap_info info;
    cr_assert_eq(snap_read(path, NULL, NULL, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.records, LIVE_AT_SAVE + 1);
}

Test(snap, abort_keeps_the_previous_snapshot)
{
    struct layout L;
    size_t len;
    unsigned char *orig = small_file(&L, &len);
    char err[512] = "", names[1024];
    struct snap_writer *w = snap_writer_open(tmpdir, "dump.snap", T0, err, sizeof(err));
    cr_assert_not_null(w, "%s", err);
    cr_assert_eq(
        snap_writer_write(w, "\x02\x01x\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 19, 1, err, sizeof(err)),
        0);
    snap_writer_abort(w);
    listing(tmpdir, names, sizeof(names));
    cr_expect_str_eq(names, "dump.snap");
    size_t after_len;
    unsigned char *after = slurp(path, &after_len);
    cr_assert_eq(after_len, len);
    cr_expect_arr_eq(after, orig, len);
    free(after);
    free(orig);
}

Test(snap, writer_open_fails_on_a_missing_directory)
{
    char d[600], err[512] = "";
    snprintf(d, sizeof(d), "%s/no/such/dir", tmpdir);
    struct snap_writer *w = snap_writer_open(d, "dump.snap", T0, err, sizeof(err));
    cr_expect_null(w);
    cr_expect_not_null(strstr(err, d), "path missing: %s", err);
    cr_expect_not_null(strstr(err, "No such file"), "reason missing: %s", err);
}

Test(snap, writer_open_fails_when_the_directory_is_a_file)
{
    char d[600], err[512] = "";
    snprintf(d, sizeof(d), "%s/file", tmpdir);
    spit(d, "x", 1);
    struct snap_writer *w = snap_writer_open(d, "dump.snap", T0, err, sizeof(err));
    cr_expect_null(w);
    cr_expect_not_null(strstr(err, d), "path missing: %s", err);
    cr_expect_not_null(strstr(err, "Not a directory"), "reason missing: %s", err);
}

Test(snap, writer_open_fails_on_a_read_only_filesystem)
{
    mount_tmpfs("size=64k");
    char err[512] = "";
    /* A snapshot in place first: it must survive. */
    uint64_t n;
    struct ks_key k = kk(ks, "a", 1);
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(save_ks(ks, mnt, "dump.snap", T0, &n, err, sizeof(err)), 0, "%s", err);
    char p[600];
    snprintf(p, sizeof(p), "%s/dump.snap", mnt);
    size_t len;
    unsigned char *before = slurp(p, &len);
    if (mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=64k") != 0)
        cr_skip("remount read-only failed: %s", strerror(errno));
    struct snap_writer *w = snap_writer_open(mnt, "dump.snap", T0, err, sizeof(err));
    cr_expect_null(w);
    cr_expect_not_null(strstr(err, mnt), "path missing: %s", err);
    cr_expect_not_null(strstr(err, "Read-only"), "reason missing: %s", err);
    if (w != NULL)
        snap_writer_abort(w);
    size_t after_len;
    unsigned char *after = slurp(p, &after_len);
    cr_assert_eq(after_len, len);
    cr_expect_arr_eq(after, before, len);
    free(after);
    free(before);
}

/* Fills ks with count 100-byte strings. */
static void fill(struct keyspace *k, int count)
{
    char val[100];
    memset(val, 'v', sizeof(val));
    for (int i = 0; i < count; i++) {
        char key[32];
        int n = snprintf(key, sizeof(key), "fill:%08d", i);
        struct ks_key kx = kk(k, key, (size_t)n);
        cr_assert_eq(ks_set(k, &kx, T0, val, sizeof(val), 0, 0), 1);
    }
}

/* A previous snapshot on a 64 KiB tmpfs, then a save too big for it: `keys` 100-byte strings.
 * Below 1 MiB the write buffer only reaches the disk in commit; above, in snap_writer_write. */
static void save_into_full_fs(int keys)
{
    mount_tmpfs("size=64k");
    char err[512] = "", names[1024], p[600];
    uint64_t n;
    struct ks_key k = kk(ks, "a", 1);
    cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    cr_assert_eq(save_ks(ks, mnt, "dump.snap", T0, &n, err, sizeof(err)), 0, "%s", err);
    snprintf(p, sizeof(p), "%s/dump.snap", mnt);
    size_t len;
    unsigned char *before = slurp(p, &len);

    fill(ks, keys);
    err[0] = '\0';
    int fds = open_fds();
    unsigned long long blocks = free_blocks(mnt);
    int rc = save_ks(ks, mnt, "dump.snap", T0, &n, err, sizeof(err));
    cr_expect_eq(rc, -1, "a %d-key save into 64 KiB succeeded", keys);
    cr_expect_not_null(strstr(err, mnt), "path missing: %s", err);
    cr_expect_not_null(strstr(err, "No space left"), "reason missing: %s", err);
    listing(mnt, names, sizeof(names));
    cr_expect_str_eq(names, "dump.snap", "a temporary file was left behind");
    /* Unlinked is not enough: an fd still open on it keeps its blocks allocated. */
    cr_expect_eq(open_fds(), fds, "the failed save leaked %d file descriptor(s)", open_fds() - fds);
    cr_expect_eq(free_blocks(mnt), blocks, "the failed save's blocks were not freed (%llu of %llu)",
                 free_blocks(mnt), blocks);
    size_t after_len;
    unsigned char *after = slurp(p, &after_len);
    cr_assert_eq(after_len, len, "the previous snapshot changed size");
    cr_expect_arr_eq(after, before, len, "the previous snapshot changed");
    cr_expect_eq(snap_read(p, NULL, NULL, NULL, err, sizeof(err)), 0, "%s", err);
    free(after);
    free(before);
}

Test(snap, commit_into_a_full_filesystem_fails_and_keeps_the_old_snapshot)
{
    save_into_full_fs(2000); /* ~230 KB: fails in commit */
}

Test(snap, write_into_a_full_filesystem_fails_and_keeps_the_old_snapshot)
{
    save_into_full_fs(20000); /* ~2.3 MB: fails in snap_writer_write */
}

Test(snap, many_keys_round_trip_through_the_write_buffer)
{
    /* Several MiB: the writer's buffer fills and drains mid-record many times. */
    char val[200];
    memset(val, 'q', sizeof(val));
    for (int i = 0; i < 60000; i++) {
        char key[32];
        int n = snprintf(key, sizeof(key), "k%d", i);
        struct ks_key kx = kk(ks, key, (size_t)n);
        cr_assert_eq(ks_set(ks, &kx, T0, val, 1 + (size_t)(i % 199), T0 + (i + 1) * SEC, 0), 1);
    }
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", T0, &n, err, sizeof(err)), 0, "%s", err);
    struct keyspace *fresh = ks_create(8, seed);
    struct loader l = {fresh, T0, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_gt(info.bytes, 4u << 20);
    cr_expect_eq(l.stored, 60000);
    struct recs a = collect(ks, T0), b = collect(fresh, T0);
    expect_same(&a, &b);
    recs_free(&a);
    recs_free(&b);
    ks_destroy(&fresh);
}

/* ---- sorted sets (format version 2) ---- */

static void zput(struct keyspace *k, const char *key, const char *m, size_t mlen, double score)
{
    struct ks_key kx = kk(k, key, strlen(key));
    struct ks_zref ref;
    double out;
    int skipped;
    cr_assert_eq(ks_zset_open(k, &kx, T0, KS_Z_CREATE, 0, 0, &ref), KS_OK);
    cr_assert_neq(zs_add(&ref.z, m, mlen, score, 0, &out, &skipped), ZS_NAN);
    ks_zset_close(k, &kx, &ref);
}

/* Both sets hold the same members with bit-identical scores, in the same order. */
static void expect_same_zset(struct keyspace *a, struct keyspace *b, const char *key)
{
    struct ks_key ka = kk(a, key, strlen(key)), kb = kk(b, key, strlen(key));
    struct ks_zref ra, rb;
    cr_assert_eq(ks_zset_open(a, &ka, SAVE_AT, KS_Z_READ, 0, 0, &ra), KS_OK);
    cr_assert_eq(ks_zset_open(b, &kb, SAVE_AT, KS_Z_READ, 0, 0, &rb), KS_OK);
    cr_assert_not_null(ra.z, "%s missing before the save", key);
    cr_assert_not_null(rb.z, "%s missing after the load", key);
    cr_assert_eq(zs_card(ra.z), zs_card(rb.z));
    struct zs_iter *ia = malloc(sizeof(*ia)), *ib = malloc(sizeof(*ib));
    struct zs_item x, y;
    zs_iter_init(ia, ra.z, 0, 0);
    zs_iter_init(ib, rb.z, 0, 0);
    while (zs_iter_next(ia, &x)) {
        cr_assert(zs_iter_next(ib, &y));
        cr_assert_eq(x.len, y.len);
        cr_assert_arr_eq(x.m, y.m, x.len);
        cr_assert_eq(memcmp(&x.score, &y.score, 8), 0, "%s: score bits differ", key);
    }
    cr_assert_not(zs_iter_next(ib, &y));
    free(ia);
    free(ib);
    ks_zset_close(a, &ka, &ra);
    ks_zset_close(b, &kb, &rb);
}

static void populate_zsets(struct keyspace *k)
{
    zput(k, "z:small", "a", 1, 0.1);
    zput(k, "z:small", "\0bin\r\n", 6, -INFINITY);
    zput(k, "z:small", "top", 3, INFINITY);
    zput(k, "z:small", "", 0, 1e20);
    zput(k, "z:recipe", "1800000000123", 13, 1800000000123.0);
    zput(k, "z:recipe", "1800000000456", 13, 1800000000456.0);
    for (int i = 0; i < 1000; i++) {
        char m[32];
        int n = snprintf(m, sizeof(m), "member-%d", i);
        zput(k, "z:big", m, (size_t)n, (double)(i % 37) - 0.5);
    }
    zput(k, "z:big", "negzero", 7, -0.0); /* kept as -0 by a big set */
    struct ks_key kx = kk(k, "z:recipe", 8);
    cr_assert_eq(ks_expire(k, &kx, T0, T0 + 60 * SEC, 0), 1);
}

Test(snap, sorted_sets_round_trip_exactly)
{
    populate_zsets(ks);
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    cr_expect_eq(written, 3);
    struct keyspace *fresh = ks_create(4, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.version, SNAP_VERSION);
    cr_expect_eq(info.by_type[KS_ZSET], 3);
    cr_expect_eq(info.zmembers, 4 + 2 + 1001);
    expect_same_zset(ks, fresh, "z:small");
    expect_same_zset(ks, fresh, "z:recipe");
    expect_same_zset(ks, fresh, "z:big");
    struct ks_key kx = kk(fresh, "z:recipe", 8);
    cr_expect_eq(ks_ttl_ns(fresh, &kx, SAVE_AT), 58 * SEC);
    /* Expired on load: skipped. */
    struct keyspace *late = ks_create(4, seed);
    struct loader l2 = {late, T0 + 61 * SEC, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l2, NULL, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(l2.skipped, 1);
    cr_expect_eq(ks_key_count(late), 2);
    ks_destroy(&late);
    ks_destroy(&fresh);
}

/* A file of format version 1 (no sorted sets) is read as before. */
Test(snap, version_1_files_still_load)
{
    populate(ks);
    struct ks_key pool = kk(ks, "pool", 4);
    cr_assert_eq(ks_del(ks, &pool, SAVE_AT), 1); /* lease sets came with version 5 */
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    cr_assert_eq(buf[8], SNAP_VERSION);
    buf[8] = 1;
    rechecksum(buf, len);
    spit(path, buf, len);
    free(buf);
    struct keyspace *fresh = ks_create(6, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.version, 1);
    struct recs a = collect(ks, SAVE_AT), b = collect(fresh, SAVE_AT);
    expect_same(&a, &b);
    recs_free(&a);
    recs_free(&b);
    ks_destroy(&fresh);
}

Test(snap, a_sorted_set_in_a_version_1_file_is_refused)
{
    populate_zsets(ks);
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    buf[8] = 1;
    rechecksum(buf, len);
    expect_refused(buf, len, "unknown record type 5", "a sorted set under version 1");
    free(buf);
}

/* Lease sets came with version 5: a version-4 file holding one is refused; a version-4 file
 * without one, and a GCRA TAT in microseconds (a negative value, which version 4 could not
 * hold but also did not refuse), load. */
Test(snap, a_lease_set_in_a_version_4_file_is_refused)
{
    struct ks_key pool = kk(ks, "pool", 4);
    struct ks_lease_out lo;
    cr_assert_eq(ks_lease_acquire(ks, &pool, SAVE_AT, 3, 60 * SEC, &lo), KS_OK);
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    cr_assert_eq(buf[8], 5);
    buf[8] = 4;
    rechecksum(buf, len);
    expect_refused(buf, len, "unknown record type 8", "a lease set under version 4");
    free(buf);
    /* Without it, version 4 loads. */
    cr_assert_eq(ks_del(ks, &pool, SAVE_AT), 1);
    struct ks_key g = kk(ks, "g", 1);
    struct gcra_limits lim;
    struct gcra_result r;
    const char *why;
    cr_assert_eq(gcra_prepare(1, 1, 60, 1, &lim, &why), 0);
    cr_assert_eq(ks_gcra_apply(ks, &g, SAVE_AT, &lim, &r, &why), KS_OK);
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    buf = slurp(path, &len);
    buf[8] = 4;
    rechecksum(buf, len);
    spit(path, buf, len);
    free(buf);
    struct keyspace *fresh = ks_create(4, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(ks_key_count(fresh), 1);
    ks_destroy(&fresh);
}

/* A lease set's record is checked: ids ascending, none above the highest handed out. */
Test(snap, a_lease_set_with_ids_out_of_order_is_refused)
{
    struct ks_key pool = kk(ks, "pool", 4);
    struct ks_lease_out lo;
    int64_t ids[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ks_lease_acquire(ks, &pool, SAVE_AT + i * 1000, 3, 60 * SEC, &lo), KS_OK);
        ids[i] = lo.id;
    }
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    /* The record: type, key length, "pool", expiry, count, highest id, then (id, expiry) pairs.
     * Swap the two ids. */
    unsigned char want[8];
    for (int b = 0; b < 8; b++)
        want[b] = (unsigned char)((uint64_t)ids[0] >> (8 * b));
    unsigned char *first = memmem(buf, len, want, 8);
    cr_assert_not_null(first);
    for (int b = 0; b < 8; b++) {
        first[b] = (unsigned char)((uint64_t)ids[1] >> (8 * b));
        first[16 + b] = (unsigned char)((uint64_t)ids[0] >> (8 * b));
    }
    rechecksum(buf, len);
    expect_refused(buf, len, "lease ids not ascending", "lease ids swapped");
    free(buf);
}

/* Hashes (format version 3): a hash survives a save and load, packed and as a table; a version-2
 * file holding one is refused, a version-2 file without one loads. */
static void put_hash(struct keyspace *k, const char *key, int fields, size_t vlen)
{
    struct ks_key kk;
    struct ks_href r;
    ks_key_init(k, &kk, key, strlen(key));
    unsigned shard = ks_shard(k, &kk);
    ks_lock(k, shard);
    cr_assert_eq(ks_hash_open(k, &kk, SAVE_AT, KS_H_CREATE, &r), KS_OK);
    char f[32], v[256];
    memset(v, 'v', sizeof(v));
    for (int i = 0; i < fields; i++) {
        snprintf(f, sizeof(f), "f%d", i);
        hv_set(&r.h, f, strlen(f), v, vlen);
    }
    ks_hash_close(k, &kk, &r, 1);
    ks_unlock(k, shard);
}

Test(snap, hashes_round_trip_and_need_version_3)
{
    put_hash(ks, "small", 3, 5);
    put_hash(ks, "many", 500, 5);
    put_hash(ks, "long", 2, 200);
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    struct keyspace *fresh = ks_create(6, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.by_type[KS_HASH], 3);
    const char *names[] = {"small", "many", "long"};
    size_t counts[] = {3, 500, 2};
    for (int i = 0; i < 3; i++) {
        struct ks_key kk;
        struct ks_href r;
        ks_key_init(fresh, &kk, names[i], strlen(names[i]));
        cr_assert_eq(ks_hash_open(fresh, &kk, SAVE_AT, KS_H_READ, &r), KS_OK);
        cr_assert_not_null(r.h, "%s", names[i]);
        cr_expect_eq(hv_count(r.h), counts[i], "%s", names[i]);
        const char *v;
        size_t vlen;
        cr_expect_eq(hv_get(r.h, "f1", 2, &v, &vlen), 1);
        cr_expect_eq(vlen, i == 2 ? 200u : 5u);
    }
    ks_destroy(&fresh);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    buf[8] = 2;
    rechecksum(buf, len);
    expect_refused(buf, len, "unknown record type 6", "a hash under version 2");
    free(buf);
}

/* Lists (format version 4): one block, a deque of blocks, integer and binary elements survive a
 * save and load in order; a version-3 file holding one is refused, and a list record whose
 * lengths run past the file is refused. */
static void put_list(struct keyspace *k, const char *key, int n, const char *prefix)
{
    struct ks_key kk;
    struct ks_lref r;
    ks_key_init(k, &kk, key, strlen(key));
    unsigned shard = ks_shard(k, &kk);
    ks_lock(k, shard);
    cr_assert_eq(ks_list_open(k, &kk, SAVE_AT, KS_H_CREATE, &r), KS_OK);
    char e[64];
    for (int i = 0; i < n; i++) {
        int len = snprintf(e, sizeof(e), "%s%d", prefix, i);
        lv_insert(&r.l, lv_count(r.l), e, (size_t)len);
    }
    ks_list_close(k, &kk, &r, 1);
    ks_unlock(k, shard);
}

Test(snap, lists_round_trip_and_need_version_4)
{
    put_list(ks, "window", 10, "17000000000");
    put_list(ks, "long", 5000, "e");
    put_list(ks, "odd", 3, "\x00\xff-0");
    char err[512] = "";
    uint64_t written;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &written, err, sizeof(err)), 0, "%s",
                 err);
    struct keyspace *fresh = ks_create(6, seed);
    struct loader l = {fresh, SAVE_AT, 0, 0, 0, 0};
    struct snap_info info;
    cr_assert_eq(snap_read(path, load_cb, &l, &info, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(info.by_type[KS_LIST], 3);
    const char *names[] = {"window", "long", "odd"};
    const char *prefix[] = {"17000000000", "e", "\x00\xff-0"};
    size_t counts[] = {10, 5000, 3};
    for (int i = 0; i < 3; i++) {
        struct ks_key kk;
        struct ks_lref r;
        ks_key_init(fresh, &kk, names[i], strlen(names[i]));
        cr_assert_eq(ks_list_open(fresh, &kk, SAVE_AT, KS_H_READ, &r), KS_OK);
        cr_assert_not_null(r.l, "%s", names[i]);
        cr_expect_eq(lv_count(r.l), counts[i], "%s", names[i]);
        for (size_t j = 0; j < counts[i]; j += 97) {
            char want[64];
            struct lv_elem e;
            int len = snprintf(want, sizeof(want), "%s%zu", prefix[i], j);
            lv_get(r.l, j, &e);
            cr_expect(e.len == (size_t)len && memcmp(e.p, want, e.len) == 0, "%s[%zu]",
                      names[i], j);
        }
    }
    ks_destroy(&fresh);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    buf[8] = 3;
    rechecksum(buf, len);
    expect_refused(buf, len, "unknown record type 7", "a list under version 3");
    free(buf);

    /* An element length past the end of the file. */
    struct snap_writer *w = snap_writer_open(tmpdir, "dump.snap", T0, err, sizeof(err));
    cr_assert_not_null(w, "%s", err);
    unsigned char rec[] = {7, 1, 'l', 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'a', 100, 'b'};
    cr_assert_eq(snap_writer_write(w, rec, sizeof(rec), 1, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(snap_writer_commit(w, err, sizeof(err)), 0, "%s", err);
    buf = slurp(path, &len);
    expect_refused(buf, len, "bad list element length", "an element past the end");
    free(buf);
}

/* Hand-made sorted-set records that break the format's rules, under a valid checksum. */
static void expect_zset_record_refused(const unsigned char *value, size_t vlen, const char *want)
{
    char err[512] = "";
    struct snap_writer *w = snap_writer_open(tmpdir, "dump.snap", T0, err, sizeof(err));
    cr_assert_not_null(w, "%s", err);
    unsigned char rec[256] = {5, 1, 'z', 0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(rec + 11, value, vlen);
    cr_assert_eq(snap_writer_write(w, rec, 11 + vlen, 1, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(snap_writer_commit(w, err, sizeof(err)), 0, "%s", err);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    expect_refused(buf, len, want, want);
    free(buf);
}

Test(snap, sorted_set_structure_errors_are_refused)
{
    double one = 1, nan = NAN;
    unsigned char v[64];
    /* count 0 */
    v[0] = 0;
    expect_zset_record_refused(v, 1, "bad sorted set length");
    /* "b" then "a" at the same score: out of order */
    v[0] = 2;
    v[1] = 1;
    v[2] = 'b';
    memcpy(v + 3, &one, 8);
    v[11] = 1;
    v[12] = 'a';
    memcpy(v + 13, &one, 8);
    expect_zset_record_refused(v, 21, "out of order");
    /* a duplicate member */
    v[12] = 'b';
    expect_zset_record_refused(v, 21, "out of order");
    /* a NaN score */
    v[0] = 1;
    memcpy(v + 3, &nan, 8);
    expect_zset_record_refused(v, 11, "NaN");
    /* a member length past the end */
    v[1] = 100;
    expect_zset_record_refused(v, 11, "member length");
}

/* Expiries past the year 2262 (expiry stamps in ms, keyspace.h) come back exactly, are not
 * taken for past ones on load, and keep their order for GT/LT. */
Test(snap, far_expiry_stamps_round_trip)
{
    static const int64_t ms[] = {KS_STAMP_NS_MS_MAX, KS_STAMP_NS_MS_MAX + 1, 99999999999000LL,
                                 INT64_MAX - 1, INT64_MAX};
    enum { N = sizeof(ms) / sizeof(ms[0]) };
    char key[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(key[i], sizeof(key[i]), "far%d", i);
        set(ks, key[i], strlen(key[i]), "v", 1, ks_stamp_from_ms(ms[i]));
    }
    char err[512] = "";
    uint64_t n;
    cr_assert_eq(save_ks(ks, tmpdir, "dump.snap", SAVE_AT, &n, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(n, N);
    struct keyspace *fresh = ks_create(4, seed);
    struct loader l = {fresh, LOAD_LATE, 0, 0, 0, 0};
    cr_assert_eq(snap_read(path, load_cb, &l, NULL, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(l.stored, N);
    for (int i = 0; i < N; i++) {
        struct ks_key k = kk(fresh, key[i], strlen(key[i]));
        int64_t at = 0;
        cr_assert_eq(ks_expiry(fresh, &k, LOAD_LATE, &at), 1, "%s", key[i]);
        cr_expect_eq(ks_stamp_ms(at), ms[i], "%s: %lld ms", key[i], (long long)ks_stamp_ms(at));
        cr_expect_eq(ks_ttl_ns(fresh, &k, LOAD_LATE),
                     i == 0 ? KS_STAMP_NS_MS_MAX * 1000000 - LOAD_LATE : INT64_MAX);
        if (i > 0) {
            /* GT by the earlier one refuses, LT by it takes it: the order is the ms order. */
            int64_t before = ks_stamp_from_ms(ms[i - 1]);
            cr_expect_eq(ks_expire(fresh, &k, LOAD_LATE, before, KS_EXPIRE_GT), 0);
            cr_expect_eq(ks_expire(fresh, &k, LOAD_LATE, before, KS_EXPIRE_LT), 1);
            cr_assert_eq(ks_expiry(fresh, &k, LOAD_LATE, &at), 1);
            cr_expect_eq(ks_stamp_ms(at), ms[i - 1]);
        }
    }
    ks_destroy(&fresh);
}
