/* test_limiter_top.c - LIMITER TOP's per-thread sketches (cmd_limiter.c) under concurrency:
 * two "I/O threads" (sessions with their own struct stats) record limited CL.THROTTLE calls
 * while a third session with no thread reads LIMITER TOP and records into the shared part.
 * Readers see exact, never decreasing counts while every part holds its keys, and the merged
 * bounds of topk.h once counters are taken over. Also built with ThreadSanitizer (README). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/stats.h"

enum { WRITERS = 2, HEAVY_A = 1500, HEAVY_B = 700, SINGLES = 300, READS = 40 };

static struct conf conf;
static struct keyspace *ks;
static struct cmd_env env;
static struct stats st[WRITERS];
static struct stats *stp[WRITERS] = {&st[0], &st[1]};
static const uint8_t seed[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};

static void setup(void)
{
    conf_init(&conf);
    ks = ks_create(4, seed);
    cr_assert_not_null(ks);
    cmd_env_init(&env, ks, &conf);
    memset(st, 0, sizeof(st));
    env.stats = stp;
    env.nstats = WRITERS;
}

static void teardown(void)
{
    cmd_env_deinit(&env);
    ks_destroy(&ks);
    conf_free(&conf);
}

TestSuite(limiter_top, .init = setup, .fini = teardown);

/* Runs one command of space-separated words on session s; the reply is left in out. */
static void run(struct session *s, struct rbuf *out, const char *line)
{
    char buf[256];
    char *argv[8];
    size_t lens[8];
    int argc = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok != NULL && argc < 8;
         tok = strtok_r(NULL, " ", &save)) {
        argv[argc] = tok;
        lens[argc++] = strlen(tok);
    }
    out->len = 0;
    cmd_execute(&env, s, argc, argv, lens, out);
    rbuf_append(out, "", 1);
    out->len--;
}

/* The count LIMITER TOP's reply in out gives key, 0 if not listed; *n = pairs listed. */
static long long top_count(const struct rbuf *out, const char *key, long *n)
{
    const char *p = out->p;
    long pairs;
    cr_assert_eq(sscanf(p, "*%ld\r\n", &pairs), 1, "not an array: %.40s", p);
    *n = pairs;
    p = strchr(p, '\n') + 1;
    long long found = 0;
    for (long i = 0; i < pairs; i++) {
        long len;
        long long count;
        cr_assert(strncmp(p, "*2\r\n", 4) == 0, "pair %ld: %.40s", i, p);
        cr_assert_eq(sscanf(p + 4, "$%ld\r\n", &len), 1);
        p = strchr(p + 4, '\n') + 1;
        const char *k = p;
        p += len + 2;
        cr_assert_eq(sscanf(p, ":%lld\r\n", &count), 1);
        p = strchr(p, '\n') + 1;
        if ((size_t)len == strlen(key) && memcmp(k, key, (size_t)len) == 0)
            found = count;
    }
    return found;
}

struct writer {
    int id;
};

/* Each writer: its own singletons (one allowed, then one limited call each) and the two heavy
 * keys every writer shares, interleaved. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct session s;
    struct rbuf out;
    session_init(&s, (uint64_t)(10 + w->id), &st[w->id]);
    rbuf_init(&out);
    char line[128];
    for (int i = 0; i < HEAVY_A; i++) {
        run(&s, &out, "CL.THROTTLE heavy:a 0 1 3600");
        if (i < HEAVY_B)
            run(&s, &out, "CL.THROTTLE heavy:b 0 1 3600");
        if (i < SINGLES) {
            snprintf(line, sizeof line, "CL.THROTTLE s:%d:%d 0 1 3600", w->id, i);
            run(&s, &out, line);
            run(&s, &out, line);
        }
    }
    rbuf_free(&out);
    session_deinit(&s);
    return NULL;
}

/* The heavy keys' limited events: every writer's calls but the one first call of all. */
#define TRUE_A ((long long)WRITERS * HEAVY_A - 1)
#define TRUE_B ((long long)WRITERS * HEAVY_B - 1)

static void run_writers_and_read(int exact)
{
    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i].id = i;
        cr_assert_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    /* Meanwhile a session of no I/O thread reads, and records into the shared part. */
    struct session r;
    struct rbuf out;
    session_init(&r, 99, NULL);
    rbuf_init(&out);
    long long last_a = 0;
    for (int i = 0; i < READS; i++) {
        run(&r, &out, "CL.THROTTLE reader:key 0 1 3600");
        run(&r, &out, "LIMITER TOP COUNT 1000");
        long n;
        long long a = top_count(&out, "heavy:a", &n);
        if (exact) {
            cr_expect_geq(a, last_a, "heavy:a went from %lld down to %lld", last_a, a);
            cr_expect_leq(a, TRUE_A);
        }
        last_a = a;
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    rbuf_free(&out);
    session_deinit(&r);
}

Test(limiter_top, exact_while_every_part_holds_its_keys)
{
    run_writers_and_read(1);
    struct session r;
    struct rbuf out;
    session_init(&r, 100, NULL);
    rbuf_init(&out);
    run(&r, &out, "LIMITER TOP COUNT 1000");
    long n;
    cr_expect_eq(top_count(&out, "heavy:a", &n), TRUE_A);
    cr_expect_eq(top_count(&out, "heavy:b", &n), TRUE_B);
    cr_expect_eq(top_count(&out, "reader:key", &n), READS - 1);
    cr_expect_eq(top_count(&out, "s:1:7", &n), 1);
    cr_expect_eq(n, 3 + WRITERS * SINGLES, "every limited key listed once");
    /* CONFIG RESETSTAT empties every part. */
    run(&r, &out, "CONFIG RESETSTAT");
    run(&r, &out, "LIMITER TOP");
    cr_expect_str_eq(out.p, "*0\r\n");
    rbuf_free(&out);
    session_deinit(&r);
}

Test(limiter_top, merged_bounds_once_counters_are_taken_over)
{
    conf.limiter_top_size = 10;
    run_writers_and_read(0);
    struct session r;
    struct rbuf out;
    session_init(&r, 100, NULL);
    rbuf_init(&out);
    run(&r, &out, "LIMITER TOP COUNT 1000");
    long n;
    long long a = top_count(&out, "heavy:a", &n);
    long long b = top_count(&out, "heavy:b", &n);
    cr_expect_eq(n, 10, "at most limiter-top-size pairs");
    long long total = TRUE_A + TRUE_B + WRITERS * SINGLES + READS - 1;
    cr_expect(a >= TRUE_A && a <= TRUE_A + total / 10, "heavy:a %lld of %lld", a, TRUE_A);
    cr_expect(b >= TRUE_B && b <= TRUE_B + total / 10, "heavy:b %lld of %lld", b, TRUE_B);
    cr_expect(strstr(out.p, "heavy:a") < strstr(out.p, "heavy:b"), "heavy:a first");
    rbuf_free(&out);
    session_deinit(&r);
}
