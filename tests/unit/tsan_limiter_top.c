/* tsan_limiter_top.c - LIMITER TOP's per-thread sketches under ThreadSanitizer (Criterion's
 * runner does not start under TSan, so this is a plain program; tests/unit/meson.build builds
 * it only with -Db_sanitize=thread). Two writer threads record limited CL.THROTTLE calls as
 * two I/O threads, while the main thread reads LIMITER TOP, resizes the sketches (CONFIG SET
 * limiter-top-size) and empties them (CONFIG RESETSTAT); then, with no resets, the counts must
 * be exact. Exit status 0 on success; TSan reports a race and fails the run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/stats.h"

enum { WRITERS = 2, CALLS = 3000 };

static struct cmd_env env;
static struct stats st[WRITERS];
static int failures;

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

static void *writer(void *arg)
{
    int id = (int)(long)arg;
    struct session s;
    struct rbuf out;
    char line[128];
    session_init(&s, (uint64_t)(10 + id), &st[id]);
    rbuf_init(&out);
    for (int i = 0; i < CALLS; i++) {
        run(&s, &out, "CL.THROTTLE hot 0 1 3600");
        snprintf(line, sizeof line, "CL.THROTTLE k:%d:%d 0 1 3600", id, i % 50);
        run(&s, &out, line);
    }
    rbuf_free(&out);
    session_deinit(&s);
    return NULL;
}

static void phase(struct session *r, struct rbuf *out, int churn)
{
    pthread_t th[WRITERS];
    for (long i = 0; i < WRITERS; i++)
        pthread_create(&th[i], NULL, writer, (void *)i);
    for (int i = 0; i < 200; i++) {
        run(r, out, "LIMITER TOP COUNT 5");
        if (out->p[0] != '*') {
            fprintf(stderr, "LIMITER TOP: %s\n", out->p);
            failures++;
        }
        if (churn && i % 20 == 0)
            run(r, out,
                i % 40 ? "CONFIG SET limiter-top-size 10" : "CONFIG SET limiter-top-size 50");
        if (churn && i % 30 == 0)
            run(r, out, "CONFIG RESETSTAT");
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
}

int main(void)
{
    static const uint8_t seed[16] = {7};
    struct conf conf;
    conf_init(&conf);
    struct keyspace *ks = ks_create(4, seed);
    cmd_env_init(&env, ks, &conf);
    struct stats *stp[WRITERS] = {&st[0], &st[1]};
    env.stats = stp;
    env.nstats = WRITERS;
    struct session r;
    struct rbuf out;
    session_init(&r, 1, NULL);
    rbuf_init(&out);

    phase(&r, &out, 1);
    run(&r, &out, "FLUSHALL");
    run(&r, &out, "CONFIG SET limiter-top-size 1000");
    run(&r, &out, "CONFIG RESETSTAT");
    phase(&r, &out, 0);
    /* hot: every call but the first limited; k:<id>:<n>: 60 calls each, 59 limited. */
    run(&r, &out, "LIMITER TOP COUNT 1");
    char want[64];
    snprintf(want, sizeof want, "*1\r\n*2\r\n$3\r\nhot\r\n:%d\r\n", WRITERS * CALLS - 1);
    if (strcmp(out.p, want) != 0) {
        fprintf(stderr, "LIMITER TOP COUNT 1: %s, want %s\n", out.p, want);
        failures++;
    }
    run(&r, &out, "LIMITER TOP COUNT 1000");
    if (strncmp(out.p, "*101\r\n", 6) != 0) {
        fprintf(stderr, "LIMITER TOP COUNT 1000: %.20s, want 101 pairs\n", out.p);
        failures++;
    }
    rbuf_free(&out);
    session_deinit(&r);
    cmd_env_deinit(&env);
    ks_destroy(&ks);
    conf_free(&conf);
    printf("%s\n", failures ? "FAIL" : "ok");
    return failures != 0;
}
