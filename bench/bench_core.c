/* bench_core.c - the limiter core without the network: GCRA math, window log, keyspace.
 *
 *   ninja -C build-bench bench/bench_core && ./build-bench/bench/bench_core [KEYS]
 *
 * Prints ns/op and ops/s for each step of a CL.THROTTLE, GCRA or ISALLOWED call below the
 * protocol: gcra_prepare + gcra_step and GCRA's gcra_redis_parse + gcra_redis_step (pure
 * arithmetic), hashing a 14-byte key, and the keyspace operations with KEYS distinct 14-byte
 * keys (default 1,000,000) touched in random order, the shard lock taken and released around
 * each as cmd_run.c does. Regressions in the core show here without socket or scheduler noise.
 * Single-threaded; numbers are per core.
 *
 * The clock is synthetic: it starts at the wall clock and advances 100 ns per operation, so a
 * run is reproducible and no key expires while it is measured. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/swlog.h"

#define KEY_LEN 14
#define STEP_NS 100

/* Defeats dead-code elimination of results we do not otherwise use. */
static volatile int64_t sink;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void report(const char *what, long ops, double secs)
{
    printf("%-46s %10ld ops %8.1f ns/op %12.0f ops/s\n", what, ops, secs * 1e9 / (double)ops,
           (double)ops / secs);
    fflush(stdout);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* n distinct keys stored back to back in a random order: walking them touches the keyspace at
 * random while the key bytes themselves stream in sequentially, as a request's key sits in the
 * (hot) input buffer. */
struct keys {
    long n;
    char *bytes;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "bench_core: out of memory\n");
        exit(1);
    }
    return p;
}

static void keys_make(struct keys *k, long n, char prefix)
{
    char tmp[KEY_LEN + 8];
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    long *order = xmalloc((size_t)n * sizeof(long));
    for (long i = 0; i < n; i++)
        order[i] = i;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(xorshift(&seed) % (uint64_t)(i + 1));
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    k->n = n;
    k->bytes = xmalloc((size_t)n * KEY_LEN);
    for (long i = 0; i < n; i++) {
        snprintf(tmp, sizeof(tmp), "%c:%012ld", prefix, order[i]);
        memcpy(k->bytes + i * KEY_LEN, tmp, KEY_LEN);
    }
    free(order);
}

static void keys_free(struct keys *k)
{
    free(k->bytes);
}

static const char *key_at(const struct keys *k, long i)
{
    return k->bytes + (i % k->n) * KEY_LEN;
}

static struct keyspace *new_keyspace(void)
{
    uint8_t seed[16];
    for (int i = 0; i < 16; i++)
        seed[i] = (uint8_t)(i * 37 + 11);
    struct keyspace *ks = ks_create(8, seed); /* 256 shards, as the daemon */
    if (ks == NULL) {
        fprintf(stderr, "bench_core: ks_create failed\n");
        exit(1);
    }
    return ks;
}

/* CL.THROTTLE k 15 30 60: validate and derive the limits, then one GCRA decision. */
static void bench_gcra_step(long ops, int64_t now)
{
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;
    int64_t tat = now, acc = 0;
    double t0 = mono_s();
    for (long i = 0; i < ops; i++) {
        if (gcra_prepare(15, 30, 60, 1, &l, &err) != 0)
            abort();
        now += STEP_NS;
        if (gcra_step(&l, now, 1, tat, &r, &err) != 0)
            abort();
        if (r.store)
            tat = r.new_tat;
        acc += r.remaining + r.reset_after;
    }
    report("gcra_prepare + gcra_step", ops, mono_s() - t0);
    sink = acc;
}

/* GCRA k 15 30 60: parse the argument strings (CL.THROTTLE's line above parses no strings; the
 * daemon's arg_i64 does that before it) and one decision with Redis's arithmetic. */
static void bench_gcra_redis_step(long ops, int64_t now)
{
    static const char *const argv[] = {"GCRA", "k:000000000001", "15", "30", "60"};
    static const size_t lens[] = {4, 14, 2, 2, 2};
    struct gcra_redis_args a;
    struct gcra_result r;
    const char *err;
    int64_t tat = now, acc = 0;
    double t0 = mono_s();
    for (long i = 0; i < ops; i++) {
        if (gcra_redis_parse(5, argv, lens, &a, &err) != 0)
            abort();
        now += STEP_NS;
        if (gcra_redis_step(&a, now, 1, tat, &r, &err) != 0)
            abort();
        if (r.store)
            tat = r.new_tat;
        acc += r.remaining + r.reset_after;
    }
    report("gcra_redis_parse + gcra_redis_step", ops, mono_s() - t0);
    sink = acc;
}

static void bench_hash(const struct keyspace *ks, const struct keys *k, long ops)
{
    struct ks_key key;
    uint64_t acc = 0;
    double t0 = mono_s();
    for (long i = 0; i < ops; i++) {
        ks_key_init(ks, &key, key_at(k, i), KEY_LEN);
        acc += key.hash;
    }
    report("ks_key_init (SipHash-1-3, 14 bytes)", ops, mono_s() - t0);
    sink = (int64_t)acc;
}

/* Inserts every key once (SET k 1): the table grows from empty. */
static void bench_set_insert(struct keyspace *ks, const struct keys *k, int64_t now)
{
    struct ks_key key;
    double t0 = mono_s();
    for (long i = 0; i < k->n; i++) {
        ks_key_init(ks, &key, key_at(k, i), KEY_LEN);
        unsigned sh = ks_shard(ks, &key);
        ks_lock(ks, sh);
        if (ks_set(ks, &key, now, "1", 1, 0, 0) != 1)
            abort();
        ks_unlock(ks, sh);
    }
    char what[64];
    snprintf(what, sizeof(what), "ks_set insert (%ld new keys)", k->n);
    report(what, k->n, mono_s() - t0);
}

static void bench_get(struct keyspace *ks, const struct keys *k, long ops, int64_t now,
                      const char *what)
{
    struct ks_key key;
    struct ks_value v;
    int64_t acc = 0;
    double t0 = mono_s();
    for (long i = 0; i < ops; i++) {
        ks_key_init(ks, &key, key_at(k, i), KEY_LEN);
        unsigned sh = ks_shard(ks, &key);
        ks_lock(ks, sh);
        acc += ks_get(ks, &key, now, &v);
        ks_unlock(ks, sh);
    }
    report(what, ops, mono_s() - t0);
    sink = acc;
}

/* CL.THROTTLE on random keys of a keyspace already holding each of them. */
static void bench_gcra_apply(const struct keys *k, long ops, int64_t now)
{
    struct keyspace *ks = new_keyspace();
    struct gcra_limits l;
    struct gcra_result r;
    struct ks_key key;
    const char *err;
    int64_t acc = 0;
    if (gcra_prepare(15, 30, 60, 1, &l, &err) != 0)
        abort();
    for (long pass = 0; pass < 2; pass++) {
        double t0 = mono_s();
        long n = pass == 0 ? k->n : ops;
        for (long i = 0; i < n; i++) {
            ks_key_init(ks, &key, key_at(k, i), KEY_LEN);
            unsigned sh = ks_shard(ks, &key);
            now += STEP_NS;
            ks_lock(ks, sh);
            if (ks_gcra_apply(ks, &key, now, &l, &r, &err) != KS_OK)
                abort();
            ks_unlock(ks, sh);
            acc += r.remaining;
        }
        char what[80];
        snprintf(what, sizeof(what), "ks_gcra_apply %s (%ld keys)",
                 pass == 0 ? "first call, insert" : "warm", k->n);
        report(what, n, mono_s() - t0);
    }
    sink = acc;
    ks_destroy(&ks);
}

/* ISALLOWED u a 60 10 on random keys: the first pass creates each log, later passes fill the
 * rings up to max_count + 1 = 11 timestamps and then keep them full. */
static void bench_swlog_apply(const struct keys *k, long ops, int64_t now)
{
    struct keyspace *ks = new_keyspace();
    struct ks_key key;
    int64_t acc = 0;
    for (long pass = 0; pass < 2; pass++) {
        double t0 = mono_s();
        long n = pass == 0 ? k->n : ops;
        for (long i = 0; i < n; i++) {
            int allowed;
            ks_key_init(ks, &key, key_at(k, i), KEY_LEN);
            unsigned sh = ks_shard(ks, &key);
            now += STEP_NS;
            ks_lock(ks, sh);
            if (ks_swlog_apply(ks, &key, now, 60000, 10, &allowed, NULL) != KS_OK)
                abort();
            ks_unlock(ks, sh);
            acc += allowed;
        }
        char what[80];
        snprintf(what, sizeof(what), "ks_swlog_apply %s (%ld keys)",
                 pass == 0 ? "first call, insert" : "warm", k->n);
        report(what, n, mono_s() - t0);
    }
    sink = acc;
    ks_destroy(&ks);
}

/* The window log alone: trim + record on one ring of 11 slots. */
static void bench_swlog_ring(long ops, int64_t now)
{
    uint64_t mem[(sizeof(struct swlog) + 11 * sizeof(int64_t)) / 8 + 1];
    struct swlog *log = (struct swlog *)mem;
    int64_t acc = 0;
    swlog_init(log, 11);
    int64_t now_ms = now / 1000000;
    double t0 = mono_s();
    for (long i = 0; i < ops; i++) {
        now_ms += (i & 7) == 0; /* about 8 attempts per ms */
        swlog_trim(log, now_ms, 60000);
        acc += swlog_record(log, now_ms, 10);
    }
    report("swlog_trim + swlog_record (full ring of 11)", ops, mono_s() - t0);
    sink = acc;
}

int main(int argc, char **argv)
{
    long nkeys = 1000000;
    if (argc > 1) {
        char *end;
        nkeys = strtol(argv[1], &end, 10);
        if (argc > 2 || *end != '\0' || nkeys < 1000 || nkeys > 100000000) {
            fprintf(stderr, "usage: bench_core [KEYS (1000..100000000, default 1000000)]\n");
            return 2;
        }
    }
    long ops = nkeys < 2000000 ? 2000000 : nkeys;
    int64_t now = wall_ns();
    struct keys k, hot, miss;
    keys_make(&k, nkeys, 'k');
    keys_make(&hot, nkeys < 100000 ? nkeys : 100000, 'h');
    keys_make(&miss, nkeys, 'm');

    printf("bench_core: %ld keys of %d bytes, %ld timed ops per line, clock +%d ns per op\n",
           nkeys, KEY_LEN, ops, STEP_NS);
    bench_gcra_step(ops * 5, now);
    bench_gcra_redis_step(ops * 5, now);
    bench_swlog_ring(ops * 5, now);

    struct keyspace *ks = new_keyspace();
    bench_hash(ks, &k, ops * 5);
    bench_set_insert(ks, &k, now);
    char what[80];
    snprintf(what, sizeof(what), "ks_get hit, random order (%ld keys)", nkeys);
    bench_get(ks, &k, ops, now, what);
    snprintf(what, sizeof(what), "ks_get miss (%ld keys)", nkeys);
    bench_get(ks, &miss, ops, now, what);
    printf("keyspace used_memory after %ld SETs: %.1f bytes/key\n", nkeys,
           (double)ks_used_memory(ks) / (double)nkeys);
    ks_destroy(&ks);

    bench_gcra_apply(&hot, ops, now);
    bench_gcra_apply(&k, ops, now);
    bench_swlog_apply(&hot, ops, now);
    bench_swlog_apply(&k, ops, now);

    keys_free(&k);
    keys_free(&hot);
    keys_free(&miss);
    return 0;
}
