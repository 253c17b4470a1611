/* test_observability.c - what operators see of the limiters (docs/COMMANDS.md "Observability"):
 * INFO limiter, LIMITER TOP, CONFIG RESETSTAT and metrics-port's GET /metrics, on the real
 * daemon. Expected figures come from the scripted workload itself: every limit in it has a
 * period of an hour, so no token comes back while the test runs, however slow the machine. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(observability, .fini = it_fini, .timeout = 300);

/* ---- HTTP ---- */

/* Sends a raw HTTP request to 127.0.0.1:port and returns everything the server sent until it
 * closed (malloc'd, NUL-terminated). */
static char *http_raw(int port, const char *request)
{
    int fd = it_raw_connect(port);
    struct it_io io;
    it_raw_exchange(fd, request, strlen(request), 10000, 1 << 24, 0, &io);
    close(fd);
    cr_assert(io.closed, "the metrics server did not close the connection");
    return io.data;
}

/* GET /metrics; asserts 200 and the Prometheus content type. Returns the body (malloc'd). */
static char *scrape(int port)
{
    char *resp = http_raw(port, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
    cr_assert(strncmp(resp, "HTTP/1.0 200", 12) == 0 || strncmp(resp, "HTTP/1.1 200", 12) == 0,
              "GET /metrics: %.200s", resp);
    cr_assert(strstr(resp, "text/plain; version=0.0.4") != NULL, "content type: %.400s", resp);
    char *body = strstr(resp, "\r\n\r\n");
    cr_assert(body != NULL);
    char *copy = strdup(body + 4);
    free(resp);
    return copy;
}

/* Runs promtool check metrics on text; asserts it passes. */
static void promtool_accepts(const struct it_daemon *d, const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/metrics.txt", d->dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    char *out = NULL;
    int st = it_run(&out, "promtool check metrics < '%s'", path);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "promtool check metrics:\n%s", out);
    free(out);
}

/* ---- helpers ---- */

static void expect_limiter(redisContext *c, long long ta, long long tl, long long ia, long long id,
                           long long near, long long keys)
{
    cr_expect_eq(it_info_int(c, "limiter", "throttle_allowed"), ta);
    cr_expect_eq(it_info_int(c, "limiter", "throttle_limited"), tl);
    cr_expect_eq(it_info_int(c, "limiter", "gcra_allowed"), 0);
    cr_expect_eq(it_info_int(c, "limiter", "gcra_limited"), 0);
    cr_expect_eq(it_info_int(c, "limiter", "isallowed_allowed"), ia);
    cr_expect_eq(it_info_int(c, "limiter", "isallowed_denied"), id);
    cr_expect_eq(it_info_int(c, "limiter", "near_limit"), near);
    cr_expect_eq(it_info_int(c, "limiter", "limiter_keys"), keys);
}

static void expect_metrics(const char *m, double ta, double tl, double ia, double id, double near,
                           double keys)
{
    cr_expect_eq(
        it_metric_sample(m, "rlimitd_requests_total{command=\"cl.throttle\",result=\"allowed\"}"),
        ta);
    cr_expect_eq(
        it_metric_sample(m, "rlimitd_requests_total{command=\"cl.throttle\",result=\"limited\"}"),
        tl);
    cr_expect_eq(it_metric_sample(m, "rlimitd_requests_total{command=\"gcra\",result=\"allowed\"}"),
                 0);
    cr_expect_eq(it_metric_sample(m, "rlimitd_requests_total{command=\"gcra\",result=\"limited\"}"),
                 0);
    cr_expect_eq(
        it_metric_sample(m, "rlimitd_requests_total{command=\"isallowed\",result=\"allowed\"}"),
        ia);
    cr_expect_eq(
        it_metric_sample(m, "rlimitd_requests_total{command=\"isallowed\",result=\"limited\"}"),
        id);
    cr_expect_eq(it_metric_sample(m, "rlimitd_near_limit_total"), near);
    cr_expect_eq(it_metric_sample(m, "rlimitd_limiter_keys"), keys);
}

/* ---- a scripted mix from several clients ---- */

#define CLIENTS 4

/* One client's script. Per client: CL.THROTTLE t:N (limit 5) 8 times = 5 allowed, 3 limited,
 * 1 near (remaining 0 <= 5/10); big:N (limit 100) 20 times = 20 allowed, none near (remaining
 * 99..80 > 10); ISALLOWED uN act (max 10) 12 times = 10 allowed, 2 denied, 2 near (9 and 10
 * in the window >= 90% of 10); in MULTI, m:N (limit 1) twice = 1 allowed and near, 1 limited;
 * and calls that fail validation, which count nowhere. */
static void *client_script(void *arg)
{
    int port = (int)(intptr_t)arg >> 8;
    int n = (int)(intptr_t)arg & 0xff;
    redisContext *c = it_connect(port);
    char key[32], user[32];
    snprintf(key, sizeof key, "t:%d", n);
    for (int i = 0; i < 8; i++)
        redisAppendCommand(c, "CL.THROTTLE %s 4 1 3600", key);
    snprintf(key, sizeof key, "big:%d", n);
    for (int i = 0; i < 20; i++)
        redisAppendCommand(c, "CL.THROTTLE %s 99 1 3600", key);
    snprintf(user, sizeof user, "u%d", n);
    for (int i = 0; i < 12; i++)
        redisAppendCommand(c, "ISALLOWED %s act 3600 10", user);
    snprintf(key, sizeof key, "m:%d", n);
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "CL.THROTTLE %s 0 1 3600", key);
    redisAppendCommand(c, "CL.THROTTLE %s 0 1 3600", key);
    redisAppendCommand(c, "EXEC");
    redisAppendCommand(c, "CL.THROTTLE %s -1 1 3600", key);
    redisAppendCommand(c, "ISALLOWED %s act 0 10", user);
    int limited = 0, errors = 0;
    for (int i = 0; i < 8 + 20 + 12 + 4 + 2; i++) {
        redisReply *r = NULL;
        cr_assert(redisGetReply(c, (void **)&r) == REDIS_OK);
        if (r->type == REDIS_REPLY_ERROR)
            errors++;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 5)
            limited += (int)r->element[0]->integer;
        freeReplyObject(r);
    }
    cr_expect_eq(limited, 3);
    cr_expect_eq(errors, 2);
    redisFree(c);
    return NULL;
}

Test(observability, counters_exact_across_clients_info_metrics_resetstat)
{
    int mport = it_free_port();
    char mp[16];
    snprintf(mp, sizeof mp, "%d", mport);
    struct it_daemon *d = it_start(IT_ARGS("--metrics-port", mp, "--slowlog-log-slower-than", "0"));
    redisContext *c = it_connect(d->port);
    expect_limiter(c, 0, 0, 0, 0, 0, 0);

    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&th[i], NULL, client_script, (void *)(intptr_t)((d->port << 8) | i));
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);

    /* 4 clients x (5 + 20 + 1 allowed, 3 + 1 limited; 10 allowed, 2 denied; 1 + 2 + 1 near). */
    expect_limiter(c, 104, 16, 40, 8, 16, 16);
    char *m = scrape(mport);
    expect_metrics(m, 104, 16, 40, 8, 16, 16);
    cr_expect_eq(it_metric_sample(m, "rlimitd_keys"), 16);
    cr_expect_eq(it_metric_sample(m, "rlimitd_commands_total{command=\"cl.throttle\"}"), 4 * 31);
    cr_expect_eq(it_metric_sample(m, "rlimitd_commands_total{command=\"isallowed\"}"), 4 * 13);
    cr_expect_geq(it_metric_sample(m, "rlimitd_connected_clients"), 1);
    cr_expect_gt(it_metric_sample(m, "rlimitd_used_memory_bytes"), 0);
    cr_expect_gt(it_metric_sample(m, "rlimitd_snapshot_last_success_timestamp_seconds"), 1.6e9);
    /* Below limiter-top-size everything is exact: t:N 3, hist:{uN}:act 2, m:N 1. */
    cr_expect_eq(it_metric_sample(m, "rlimitd_limited_top{key=\"t:0\"}"), 3);
    cr_expect_eq(it_metric_sample(m, "rlimitd_limited_top{key=\"hist:{u3}:act\"}"), 2);
    cr_expect_eq(it_metric_sample(m, "rlimitd_limited_top{key=\"m:0\"}"), 1);
    cr_expect_eq(it_metric_sample(m, "rlimitd_limited_top{key=\"m:1\"}"), 1);
    cr_expect(strstr(m, "key=\"m:2\"") == NULL, "only the top 10 are exposed");
    promtool_accepts(d, m);
    free(m);

    redisReply *r = it_cmd(c, "LIMITER TOP");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 10);
    const char *want[10] = {
        "t:0",           "t:1",           "t:2",           "t:3", "hist:{u0}:act",
        "hist:{u1}:act", "hist:{u2}:act", "hist:{u3}:act", "m:0", "m:1"};
    const long long wantn[10] = {3, 3, 3, 3, 2, 2, 2, 2, 1, 1};
    for (size_t i = 0; i < 10; i++) {
        redisReply *p = r->element[i];
        cr_assert(p->type == REDIS_REPLY_ARRAY && p->elements == 2);
        cr_expect_str_eq(p->element[0]->str, want[i]);
        cr_expect_eq(p->element[1]->type, REDIS_REPLY_INTEGER);
        cr_expect_eq(p->element[1]->integer, wantn[i]);
    }
    freeReplyObject(r);
    r = it_cmd(c, "LIMITER TOP COUNT 1000");
    cr_expect_eq(r->elements, 12);
    freeReplyObject(r);

    /* CONFIG RESETSTAT: the limiter counters, TOP, the command and error stats start over; the
     * keys stay, and so does the slow log, as in Redis. */
    long long slowlog = it_int(it_cmd(c, "SLOWLOG LEN"));
    cr_expect_gt(slowlog, 0);
    cr_expect_gt(it_info_int(c, "stats", "total_error_replies"), 0);
    IT_STATUS(it_cmd(c, "CONFIG RESETSTAT"), "OK");
    expect_limiter(c, 0, 0, 0, 0, 0, 16);
    cr_expect_eq(it_info_int(c, "stats", "total_error_replies"), 0);
    r = it_cmd(c, "INFO commandstats");
    cr_expect(strstr(r->str, "cmdstat_cl.throttle") == NULL, "%s", r->str);
    freeReplyObject(r);
    cr_expect_geq(it_int(it_cmd(c, "SLOWLOG LEN")), slowlog);
    r = it_cmd(c, "LIMITER TOP");
    cr_expect_eq(r->elements, 0);
    freeReplyObject(r);
    m = scrape(mport);
    expect_metrics(m, 0, 0, 0, 0, 0, 16);
    cr_expect_eq(it_metric_sample(m, "rlimitd_commands_total{command=\"cl.throttle\"}"), 0);
    free(m);
    IT_ERR(it_cmd(c, "CONFIG RESETSTAT now"),
           "ERR wrong number of arguments for 'config|resetstat' command");

    /* Counting goes on from 0. */
    r = it_cmd(c, "CL.THROTTLE t:0 4 1 3600");
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1);
    freeReplyObject(r);
    expect_limiter(c, 0, 1, 0, 0, 0, 16);
    redisFree(c);
    it_stop(d);
}

/* ---- LIMITER TOP on a skewed workload ---- */

struct skew_job {
    int port;
    const char *const *keys; /* one limited event each, in order */
    int n;
};

static void *skew_client(void *arg)
{
    struct skew_job *job = arg;
    redisContext *c = it_connect(job->port);
    for (int i = 0; i < job->n; i += 500) {
        int batch = job->n - i < 500 ? job->n - i : 500;
        for (int j = 0; j < batch; j++)
            redisAppendCommand(c, "CL.THROTTLE %s 0 1 3600", job->keys[i + j]);
        for (int j = 0; j < batch; j++) {
            redisReply *r = NULL;
            cr_assert(redisGetReply(c, (void **)&r) == REDIS_OK);
            cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5);
            freeReplyObject(r);
        }
    }
    redisFree(c);
    return NULL;
}

Test(observability, top_lists_heavy_keys_within_bound)
{
    enum { SINGLES = 10000, SIZE = 100 };
    struct it_daemon *d = it_start(IT_ARGS("--limiter-top-size", "100"));
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "CONFIG GET limiter-top-size");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_expect_str_eq(r->element[1]->str, "100");
    freeReplyObject(r);
    /* Every key's first call (burst 0) is allowed; each later one is limited. The heavy keys
     * get their allowed call first, then the limited events are interleaved: a seeded shuffle
     * of 500 x heavy:a, 300 x heavy:b, 200 x heavy:c and 10,000 singletons, each singleton as
     * an allowed + limited pair. */
    const char *heavy[3] = {"heavy:a", "heavy:b", "heavy:c"};
    const int times[3] = {500, 300, 200};
    for (int h = 0; h < 3; h++)
        freeReplyObject(it_cmd(c, "CL.THROTTLE %s 0 1 3600", heavy[h]));
    int nev = 500 + 300 + 200 + SINGLES;
    int *ev = malloc(sizeof(int) * (size_t)nev); /* -1..-3 heavy, >= 0 singleton */
    int k = 0;
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < times[h]; i++)
            ev[k++] = -1 - h;
    for (int i = 0; i < SINGLES; i++)
        ev[k++] = i;
    uint64_t seed = 20261125;
    for (int i = nev - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((seed >> 33) % (uint64_t)(i + 1));
        int t = ev[i];
        ev[i] = ev[j];
        ev[j] = t;
    }
    char(*names)[16] = malloc(sizeof(*names) * SINGLES);
    const char **keys = malloc(sizeof(char *) * (size_t)(nev + SINGLES));
    int nk = 0;
    for (int i = 0; i < nev; i++) {
        if (ev[i] < 0) {
            keys[nk++] = heavy[-ev[i] - 1];
        } else {
            snprintf(names[ev[i]], 16, "s:%d", ev[i]);
            keys[nk++] = names[ev[i]];
            keys[nk++] = names[ev[i]];
        }
    }
    /* Two connections (two I/O threads) take alternate halves of the sequence. */
    struct skew_job jobs[2] = {{d->port, keys, nk / 2}, {d->port, keys + nk / 2, nk - nk / 2}};
    if (keys[nk / 2 - 1] == keys[nk / 2]) /* keep a singleton's pair on one connection */
        jobs[0].n++, jobs[1].keys++, jobs[1].n--;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, skew_client, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);

    long long total = 500 + 300 + 200 + SINGLES;
    cr_expect_eq(it_info_int(c, "limiter", "throttle_limited"), total);
    cr_expect_eq(it_info_int(c, "limiter", "throttle_allowed"), 3 + SINGLES);
    r = it_cmd(c, "LIMITER TOP COUNT 3");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    for (int h = 0; h < 3; h++) {
        redisReply *p = r->element[h];
        cr_expect_str_eq(p->element[0]->str, heavy[h], "rank %d", h);
        long long got = p->element[1]->integer;
        /* The documented bound: never under the truth, over by at most N / size. */
        cr_expect_geq(got, times[h], "%s: %lld", heavy[h], got);
        cr_expect_leq(got, times[h] + total / SIZE, "%s: %lld", heavy[h], got);
    }
    freeReplyObject(r);
    r = it_cmd(c, "LIMITER TOP COUNT 1000");
    cr_expect_eq(r->elements, SIZE, "the sketch holds limiter-top-size keys");
    freeReplyObject(r);
    free(ev);
    free(names);
    free(keys);
    redisFree(c);
    it_stop(d);
}

/* ---- LIMITER's errors, COMMAND, configuration ---- */

Test(observability, limiter_command_errors_and_docs)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_ERR(it_cmd(c, "LIMITER"), "ERR wrong number of arguments for 'limiter' command");
    IT_ERR(it_cmd(c, "LIMITER NOPE"), "ERR unknown subcommand 'NOPE'. Try LIMITER HELP.");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT"), "ERR syntax error");
    IT_ERR(it_cmd(c, "LIMITER TOP LIMIT 5"), "ERR syntax error");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT 5 6"), "ERR syntax error");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT x"), "ERR value is not an integer or out of range");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT 0"), "ERR COUNT must be between 1 and 1000");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT 1001"), "ERR COUNT must be between 1 and 1000");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT -1"), "ERR COUNT must be between 1 and 1000");
    IT_ERR(it_cmd(c, "LIMITER TOP COUNT 99999999999999999999"),
           "ERR value is not an integer or out of range");
    redisReply *r = it_cmd(c, "LIMITER TOP count 1000");
    cr_expect_eq(r->type, REDIS_REPLY_ARRAY);
    cr_expect_eq(r->elements, 0);
    freeReplyObject(r);
    r = it_cmd(c, "LIMITER HELP");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_expect(strncmp(r->element[0]->str, "LIMITER <subcommand>", 20) == 0);
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND INFO limiter");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    cr_expect_str_eq(r->element[0]->element[0]->str, "limiter");
    cr_expect_eq(r->element[0]->element[1]->integer, -2);
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND DOCS limiter");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);
    r = it_cmd(c, "CONFIG HELP");
    int found = 0;
    for (size_t i = 0; i < r->elements; i++)
        found += strcmp(r->element[i]->str, "RESETSTAT") == 0;
    cr_expect_eq(found, 1);
    freeReplyObject(r);
    /* limiter-top-size: live, 10..100000; metrics-port only at start. */
    IT_STATUS(it_cmd(c, "CONFIG SET limiter-top-size 10"), "OK");
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET limiter-top-size 9"), "ERR CONFIG SET failed",
                "argument must be between 10 and 100000 inclusive");
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET limiter-top-size 100001"), "ERR CONFIG SET failed",
                "argument must be between 10 and 100000 inclusive");
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET metrics-port 9999"), "ERR CONFIG SET failed", "immutable");
    r = it_cmd(c, "CONFIG GET metrics-port");
    cr_expect_str_eq(r->element[1]->str, "0");
    freeReplyObject(r);
    /* A resized sketch starts empty and keeps working: 11 keys into 10 counters. */
    for (int i = 0; i < 11; i++) {
        freeReplyObject(it_cmd(c, "CL.THROTTLE k%d 0 1 3600", i));
        freeReplyObject(it_cmd(c, "CL.THROTTLE k%d 0 1 3600", i));
    }
    r = it_cmd(c, "LIMITER TOP COUNT 100");
    cr_expect_eq(r->elements, 10);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

/* ---- the HTTP side ---- */

Test(observability, metrics_http_paths_and_hostile_clients)
{
    int mport = it_free_port();
    char mp[16];
    snprintf(mp, sizeof mp, "%d", mport);
    struct it_daemon *d = it_start(IT_ARGS("--metrics-port", mp));
    redisContext *c = it_connect(d->port);

    char *resp = http_raw(mport, "GET /nope HTTP/1.0\r\n\r\n");
    cr_expect(strstr(resp, " 404 ") != NULL, "%.200s", resp);
    free(resp);
    resp = http_raw(mport, "GET /metrics/x HTTP/1.0\r\n\r\n");
    cr_expect(strstr(resp, " 404 ") != NULL, "%.200s", resp);
    free(resp);
    resp = http_raw(mport, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
    cr_expect(strstr(resp, " 405 ") != NULL, "%.200s", resp);
    free(resp);
    resp = http_raw(mport, "\x01\x02 garbage\r\n\r\n");
    cr_expect(strncmp(resp, "HTTP/1.", 7) != 0 || strstr(resp, " 400 ") != NULL, "%.200s", resp);
    free(resp);

    /* Slow clients: connections that send half a request and stall. The RESP side answers
     * meanwhile, and so does a scrape on a fresh connection. */
    int stalled[8];
    for (int i = 0; i < 8; i++) {
        stalled[i] = it_raw_connect(mport);
        it_raw_send(stalled[i], "GET /metr", 9);
    }
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisReply *r = it_cmd(c, "CL.THROTTLE k 0 1 3600");
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0);
    freeReplyObject(r);
    long long t0 = it_now_ms();
    char *m = scrape(mport);
    cr_expect_eq(
        it_metric_sample(m, "rlimitd_requests_total{command=\"cl.throttle\",result=\"allowed\"}"),
        1);
    free(m);
    cr_log_info("scrape with 8 stalled HTTP clients took %lld ms", it_now_ms() - t0);
    for (int i = 0; i < 8; i++)
        close(stalled[i]);

    /* Hostile keys: label escaping and invalid UTF-8 still give a valid exposition. */
    const char *keys[] = {"q\"uote", "back\\slash", "new\nline", "bad\xff\xfe utf8", "ok\xc3\xa9"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *argv[] = {"CL.THROTTLE", keys[i], "0", "1", "3600"};
        freeReplyObject(it_cmdargv(c, 5, argv));
        freeReplyObject(it_cmdargv(c, 5, argv));
    }
    m = scrape(mport);
    cr_expect(strstr(m, "key=\"q\\\"uote\"") != NULL, "%s", m);
    cr_expect(strstr(m, "key=\"back\\\\slash\"") != NULL, "%s", m);
    cr_expect(strstr(m, "key=\"new\\nline\"") != NULL, "%s", m);
    cr_expect(strstr(m, "key=\"bad\xef\xbf\xbd\xef\xbf\xbd utf8\"") != NULL, "%s", m);
    cr_expect(strstr(m, "key=\"ok\xc3\xa9\"") != NULL, "%s", m);
    promtool_accepts(d, m);
    free(m);
    redisFree(c);
    it_stop(d);
}

Test(observability, metrics_port_taken_fails_start)
{
    /* Something already listens on the metrics port: the start fails, as for the RESP port. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(0x7f000001);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char mp[16];
    snprintf(mp, sizeof mp, "%d", ntohs(a.sin_port));
    struct it_daemon *d = it_prepare();
    it_spawn(d, it_free_port(), IT_ARGS("--metrics-port", mp));
    cr_assert(it_wait_exit(d, 10000), "rlimitd started with its metrics port taken");
    cr_expect(WIFEXITED(d->status) && WEXITSTATUS(d->status) != 0);
    char *log = it_read_file(d->log);
    cr_expect(strstr(log, "Could not create metrics listening socket") != NULL, "%s", log);
    free(log);
    close(fd);
}

/* ---- the Grafana dashboard queries only metrics that exist ---- */

Test(observability, grafana_dashboard_metrics_exist)
{
    int mport = it_free_port();
    char mp[16];
    snprintf(mp, sizeof mp, "%d", mport);
    struct it_daemon *d = it_start(IT_ARGS("--metrics-port", mp));
    redisContext *c = it_connect(d->port);
    freeReplyObject(it_cmd(c, "CL.THROTTLE k 0 1 3600"));
    freeReplyObject(it_cmd(c, "CL.THROTTLE k 0 1 3600"));
    char *m = scrape(mport);
    char path[512];
    snprintf(path, sizeof path, "%s/contrib/grafana/rlimitd.json", it_source_root());
    char *json = it_read_file(path);
    cr_assert(json[0] == '{', "cannot read %s", path);
    int checked = 0;
    for (const char *p = strstr(json, "rlimitd_"); p != NULL; p = strstr(p, "rlimitd_")) {
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
        char name[128];
        cr_assert_lt(n, sizeof name);
        memcpy(name, p, n);
        name[n] = '\0';
        /* A sample line of that family: "name{" or "name ". */
        char a[140], b[140];
        snprintf(a, sizeof a, "\n%s{", name);
        snprintf(b, sizeof b, "\n%s ", name);
        cr_expect(strstr(m, a) != NULL || strstr(m, b) != NULL,
                  "the dashboard queries %s, which /metrics does not have", name);
        checked++;
        p += n;
    }
    cr_expect_geq(checked, 6, "the dashboard should query the limiter metrics");
    /* Every query parses as PromQL: promtool checks them as recording rules, with Grafana's
     * variables replaced by what Grafana would put there. */
    char *out = NULL;
    int st = it_run(
        &out,
        "python3 - '%s' '%s/rules.yml' <<'EOF'\n"
        "import json, sys\n"
        "d = json.load(open(sys.argv[1]))\n"
        "exprs = [t['expr'] for p in d['panels'] for t in p.get('targets', [])]\n"
        "exprs.append(d['templating']['list'][0]['query'].replace("
        "'label_values(rlimitd_keys, instance)', 'rlimitd_keys'))\n"
        "with open(sys.argv[2], 'w') as f:\n"
        "    f.write('groups:\\n- name: dashboard\\n  rules:\\n')\n"
        "    for i, e in enumerate(exprs):\n"
        "        e = e.replace('$__rate_interval', '5m').replace('$instance', '.*')\n"
        "        f.write('  - record: dashboard:q%%d\\n    expr: %%s\\n' %% (i, json.dumps(e)))\n"
        "EOF\n"
        "promtool check rules '%s/rules.yml'",
        path, d->dir, d->dir);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dashboard queries:\n%s", out);
    free(out);
    free(json);
    free(m);
    redisFree(c);
    it_stop(d);
}
