/* test_wait.c - the WAIT option (COMMANDS.md, "Waiting for capacity") on the real daemon with 2
 * I/O threads: CL.THROTTLE, GCRA, THROTTLE.ALL and LEASE.ACQUIRE answer when the request has been
 * admitted, or at the timeout as without WAIT; first come first served per key; never inside
 * MULTI or a script; the commands pipelined behind a waiting one wait; a closed or killed waiter
 * is forgotten; hostile timeouts; thousands of waiters.
 *
 * Every expectation comes from the replies and from CLOCK_REALTIME read around the calls (the
 * limit model of tests/cases, and "never before" bounds: a request admitted by waiting was
 * answered no earlier than the moment the limiter's arithmetic allows). Nothing assumes the
 * machine is fast: a late answer only widens the intervals; where order matters the test waits
 * for the server to say (INFO blocked_clients) rather than sleeping. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(wait, .fini = it_fini, .timeout = 900);

#define MS 1000000LL

/* ---- each command's waiting against a model ---- */

/* CL.THROTTLE k 0 5 1: one every 200 ms. Six requests with WAIT in a row are all admitted, each
 * reply is what the GCRA model gives at some time inside its call, and request i is answered no
 * earlier than (i - 1) * 200 ms after the first was sent. */
Test(wait, throttle_admits_at_the_limiters_rate)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    struct lm_gcra m;
    lm_gcra_reset(&m);
    int64_t first = 0;
    for (int i = 0; i < 6; i++) {
        int64_t before = lm_now_ns();
        long long v[5];
        it_five(it_cmd(c, "CL.THROTTLE k 0 5 1 1 WAIT 10000"), v);
        int64_t after = lm_now_ns();
        if (i == 0)
            first = before;
        char why[512];
        cr_assert(lm_gcra_check(&m, 0, 5, 1, 1, before, after, v, why, sizeof why) == 0,
                  "request %d: %s", i, why);
        cr_assert_eq(v[0], 0, "request %d refused although it waited", i);
        cr_assert_geq(after, first + i * 200 * MS, "request %d admitted early", i);
    }
    redisFree(c);
    it_stop(d);
}

/* The timeout: a key with nothing left for a minute answers its limited reply, as without WAIT,
 * no earlier than the timeout; retry_after then is what the model says. */
Test(wait, throttle_timeout_answers_limited)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    struct lm_gcra m;
    lm_gcra_reset(&m);
    const char *cmds[] = {"CL.THROTTLE k 0 1 60 1", "CL.THROTTLE k 0 1 60 1 WAIT 150"};
    for (int i = 0; i < 2; i++) {
        int64_t before = lm_now_ns();
        long long v[5];
        it_five(it_cmd(c, cmds[i]), v);
        int64_t after = lm_now_ns();
        char why[512];
        cr_assert(lm_gcra_check(&m, 0, 1, 60, 1, before, after, v, why, sizeof why) == 0, "%s: %s",
                  cmds[i], why);
        cr_assert_eq(v[0], i, "%s", cmds[i]);
        if (i == 1)
            cr_assert_geq(after - before, 150 * MS, "limited before its timeout");
    }
    /* A request no capacity can ever admit (quantity over the limit) answers at once, even
     * WAIT 0 (without a timeout): the test would hang otherwise. */
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE q 0 1 60 5 WAIT 0"), v);
    cr_assert(v[0] == 1 && v[3] == -1, "quantity over the limit: [%lld .. %lld]", v[0], v[3]);
    redisFree(c);
    it_stop(d);
}

/* GCRA g 0 5 1 (Redis's argument order: max_burst 0, 5 per 1 s): request i is answered no
 * earlier than i * 200 ms after the first was sent (burst 0: one at a time). */
Test(wait, gcra_admits_at_the_limiters_rate)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    int64_t first = 0;
    for (int i = 0; i < 5; i++) {
        int64_t before = lm_now_ns();
        long long v[5];
        it_five(it_cmd(c, "GCRA g 0 5 1 WAIT 10000"), v);
        int64_t after = lm_now_ns();
        if (i == 0)
            first = before;
        cr_assert_eq(v[0], 0, "request %d refused although it waited", i);
        cr_assert_geq(after, first + i * 200 * MS, "request %d admitted early", i);
    }
    /* With TOKENS and a timeout shorter than the refill: the limited reply at the timeout. */
    long long v[5];
    it_five(it_cmd(c, "GCRA g2 0 1 60 TOKENS 1 WAIT 100"), v);
    cr_assert_eq(v[0], 0, "a new key has room");
    int64_t before = lm_now_ns();
    it_five(it_cmd(c, "GCRA g2 0 1 60 TOKENS 1 WAIT 100"), v);
    cr_assert_eq(v[0], 1, "1 per minute: the second must time out");
    cr_assert_geq(lm_now_ns() - before, 100 * MS);
    redisFree(c);
    it_stop(d);
}

/* THROTTLE.ALL waits until every limit admits, then takes from all of them at once. */
Test(wait, throttle_all_waits_for_every_limit)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long v[5];
    int64_t taken = lm_now_ns();
    it_five(it_cmd(c, "CL.THROTTLE a 0 5 1 1"), v); /* a: next one in 200 ms */
    cr_assert_eq(v[0], 0);
    redisReply *r = it_cmd(c, "THROTTLE.ALL 2 a b LIMIT 0 5 1 1 LIMIT 9 100 1 1 WAIT 10000");
    int64_t after = lm_now_ns();
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    cr_assert_eq(r->element[0]->integer, 0, "refused although it waited");
    cr_assert_eq(r->element[1]->integer, -1);
    cr_assert_geq(after, taken + 200 * MS, "admitted before a's capacity returned");
    /* b was taken once: 10 allowed, 9 left after this one (an hour would refill it: 100/s,
     * so read the remaining as at most 9 and at least 9 minus nothing taken since). */
    cr_assert_leq(r->element[4]->element[2]->integer, 9);
    freeReplyObject(r);
    /* Never admissible (quantity 3 over a limit of 1): answered at once. */
    r = it_cmd(c, "THROTTLE.ALL 1 z LIMIT 0 1 60 3 WAIT 0");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1 &&
              r->element[2]->integer == -1);
    freeReplyObject(r);
    /* The timeout: limited, naming the refusing limit, no earlier than the timeout. */
    it_five(it_cmd(c, "CL.THROTTLE h 0 1 3600 1"), v);
    int64_t before = lm_now_ns();
    r = it_cmd(c, "THROTTLE.ALL 2 y h LIMIT 5 1 1 1 LIMIT 0 1 3600 1 WAIT 120");
    cr_assert_geq(lm_now_ns() - before, 120 * MS);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1 &&
              r->element[1]->integer == 1);
    freeReplyObject(r);
    /* Nothing was taken from y by the refused call: a peek shows it full. */
    it_five(it_cmd(c, "CL.THROTTLE y 5 1 1 0"), v);
    cr_assert_eq(v[2], 6, "y lost capacity to a refused THROTTLE.ALL");
    redisFree(c);
    it_stop(d);
}

struct releaser {
    int port;
    char id[64];
    int delay_ms;
    int64_t sent; /* CLOCK_REALTIME just before the release was sent */
};

static void *release_later(void *p)
{
    struct releaser *rl = p;
    redisContext *c = it_try_connect(rl->port);
    it_sleep_ms(rl->delay_ms);
    rl->sent = lm_now_ns();
    redisReply *r = redisCommand(c, "LEASE.RELEASE L %s", rl->id);
    freeReplyObject(r);
    redisFree(c);
    return NULL;
}

/* LEASE.ACQUIRE WAIT: a release hands the slot to the waiter (answered after the release was
 * sent, long before its timeout); an expiry does too; a full pool answers nil at the timeout. */
Test(wait, lease_waits_for_release_and_expiry)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "LEASE.ACQUIRE L 1 3600000");
    cr_assert(r->type == REDIS_REPLY_STRING);
    struct releaser rl = {d->port, "", 100, 0};
    snprintf(rl.id, sizeof rl.id, "%s", r->str);
    freeReplyObject(r);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &rl), 0);
    int64_t before = lm_now_ns();
    r = it_cmd(c, "LEASE.ACQUIRE L 1 3600000 WAIT 60000");
    int64_t after = lm_now_ns();
    pthread_join(th, NULL);
    cr_assert(r->type == REDIS_REPLY_STRING, "want a lease id after the release");
    cr_assert_geq(after, rl.sent, "the waiter had the slot before it was released");
    cr_assert_lt(after - before, 60000 * MS, "woken by its timeout, not by the release");
    freeReplyObject(r);
    /* The pool is full again (the waiter holds the slot for an hour): nil at the timeout. */
    before = lm_now_ns();
    IT_NIL(it_cmd(c, "LEASE.ACQUIRE L 1 3600000 WAIT 100"));
    cr_assert_geq(lm_now_ns() - before, 100 * MS);
    /* Expiry: a lease of 300 ms frees its slot by itself; the waiter has it then, not before. */
    int64_t took = lm_now_ns();
    r = it_cmd(c, "LEASE.ACQUIRE E 1 300");
    cr_assert(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = it_cmd(c, "LEASE.ACQUIRE E 1 300 WAIT 60000");
    after = lm_now_ns();
    cr_assert(r->type == REDIS_REPLY_STRING, "want a lease once the first expired");
    cr_assert_geq(after, took + 300 * MS, "a lease handed out before the first expired");
    freeReplyObject(r);
    IT_INT(it_cmd(c, "LEASE.COUNT E"), 1);
    redisFree(c);
    it_stop(d);
}

/* ---- BLPOP's rules: MULTI and scripts never block; pipelined commands wait behind ---- */

Test(wait, multi_and_scripts_never_block)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE k 0 1 3600"), v);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "CL.THROTTLE k 0 1 3600 1 WAIT 0"), "QUEUED");
    IT_STATUS(it_cmd(c, "LEASE.ACQUIRE L 0 1000 WAIT 0"), "QUEUED");
    redisReply *r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_eq(r->element[0]->element[0]->integer, 1, "limited, answered at once");
    freeReplyObject(r);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "LEASE.ACQUIRE M 1 3600000"), "QUEUED");
    IT_STATUS(it_cmd(c, "LEASE.ACQUIRE M 1 3600000 WAIT 0"), "QUEUED");
    r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert(r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = it_cmd(c, "EVAL %s 1 k",
               "return redis.call('CL.THROTTLE', KEYS[1], 0, 1, 3600, 1, 'WAIT', 0)");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1);
    freeReplyObject(r);
    r = it_cmd(c, "EVAL %s 1 M", "return redis.call('LEASE.ACQUIRE', KEYS[1], 1, 1000, 'WAIT', 0)");
    cr_assert_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    redisFree(c);
    it_stop(d);
}

/* A waiting request's later commands (pipelined in the same write) are answered after it, in
 * order; another connection is served meanwhile; CLIENT LIST shows flags=b. */
Test(wait, pipelined_commands_wait_behind)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "LEASE.ACQUIRE P 1 3600000");
    char id[64];
    snprintf(id, sizeof id, "%s", r->str);
    freeReplyObject(r);
    int fd = it_raw_connect(d->port);
    const char req[] = "LEASE.ACQUIRE P 1 3600000 WAIT 0\r\nPING\r\nINCR n\r\n";
    it_raw_send(fd, req, sizeof req - 1);
    it_await_blocked(c, 1);
    /* The INCR behind the waiting request has not run. */
    IT_NIL(it_cmd(c, "GET n"));
    r = it_cmd(c, "CLIENT LIST");
    cr_assert(r->type == REDIS_REPLY_STRING && strstr(r->str, "flags=b") != NULL &&
                  strstr(r->str, "cmd=lease.acquire") != NULL,
              "CLIENT LIST: %s", r->str);
    freeReplyObject(r);
    IT_INT(it_cmd(c, "LEASE.RELEASE P %s", id), 1);
    redisReply *out[3];
    cr_assert_eq(it_raw_read_replies(fd, 3, out), 3);
    cr_assert_eq(out[0]->type, REDIS_REPLY_STRING, "the lease id first");
    cr_assert(out[1]->type == REDIS_REPLY_STATUS && strcmp(out[1]->str, "PONG") == 0);
    cr_assert(out[2]->type == REDIS_REPLY_INTEGER && out[2]->integer == 1);
    for (int i = 0; i < 3; i++)
        freeReplyObject(out[i]);
    close(fd);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    redisFree(c);
    it_stop(d);
}

/* ---- first come first served; closed and killed waiters are forgotten ---- */

/* Twelve connections (spread by the kernel over both threads) wait on a pool of one, each sent
 * once the one before it is known to wait. Connections 3 and 7 close, 5 is killed; each release
 * then hands the slot to the oldest waiter left, in the order they came. */
Test(wait, fifo_order_and_forgotten_waiters)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "LEASE.ACQUIRE F 1 3600000");
    char held[64];
    snprintf(held, sizeof held, "%s", r->str);
    freeReplyObject(r);
    enum { N = 12 };
    int fd[N];
    long long id[N];
    it_queue_waiters(c, d->port, "LEASE.ACQUIRE F 1 3600000 WAIT 0\r\n", N, fd, id);
    close(fd[3]);
    close(fd[7]);
    IT_INT(it_cmd(c, "CLIENT KILL ID %lld", id[5]), 1);
    it_await_blocked(c, N - 3);
    for (int i = 0; i < N; i++) {
        if (i == 3 || i == 5 || i == 7)
            continue;
        IT_INT(it_cmd(c, "LEASE.RELEASE F %s", held), 1);
        redisReply *o;
        cr_assert_eq(it_raw_read_replies(fd[i], 1, &o), 1, "waiter %d not served in turn", i);
        cr_assert_eq(o->type, REDIS_REPLY_STRING);
        snprintf(held, sizeof held, "%s", o->str);
        freeReplyObject(o);
        IT_INT(it_cmd(c, "LEASE.COUNT F"), 1);
    }
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    for (int i = 0; i < N; i++)
        if (i != 3 && i != 7)
            close(fd[i]);
    redisFree(c);
    it_stop(d);
}

/* ---- hostile input ---- */

Test(wait, hostile_timeouts)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *bad[][2] = {
        {"-1", "ERR timeout is negative"},
        {"-9223372036854775808", "ERR timeout is negative"},
        {"1000000000001", "ERR timeout is out of range"},
        {"9223372036854775807", "ERR timeout is out of range"},
        {"99999999999999999999", "ERR timeout is not an integer or out of range"},
        {"1.5", "ERR timeout is not an integer or out of range"},
        {"abc", "ERR timeout is not an integer or out of range"},
        {"", "ERR timeout is not an integer or out of range"},
        {" 1", "ERR timeout is not an integer or out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *cl[] = {"CL.THROTTLE", "k", "0", "1", "1", "1", "WAIT", bad[i][0]};
        IT_ERR(it_cmdargv(c, 8, cl), bad[i][1]);
        const char *g[] = {"GCRA", "g", "0", "1", "1", "WAIT", bad[i][0]};
        IT_ERR(it_cmdargv(c, 7, g), bad[i][1]);
        const char *all[] = {"THROTTLE.ALL", "1",      "t", "LIMIT", "0", "1", "1", "1",
                             "WAIT",         bad[i][0]};
        IT_ERR(it_cmdargv(c, 10, all), bad[i][1]);
        const char *l[] = {"LEASE.ACQUIRE", "L", "1", "1000", "WAIT", bad[i][0]};
        IT_ERR(it_cmdargv(c, 6, l), bad[i][1]);
    }
    /* WAIT without its timeout is an argument like any other: CL.THROTTLE's quantity. */
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 0 1 1 WAIT"), "ERR", NULL);
    IT_ERR(it_cmd(c, "CL.THROTTLE k 0 1 1 1 2 WAIT 5"),
           "ERR wrong number of arguments for 'cl.throttle' command");
    /* Nothing was taken or stored by a refused command. */
    IT_INT(it_cmd(c, "EXISTS k g t L"), 0);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    IT_STATUS(it_cmd(c, "SET sentinel v"), "OK");
    it_assert_healthy(d, c, "sentinel", "v");
    redisFree(c);
    it_stop(d);
}

/* 900 connections wait at once: 450 on one key, 450 on keys of their own; all are counted,
 * then all close; the daemon forgets them and keeps serving (ASan: nothing leaks). */
Test(wait, many_waiters_on_one_key_and_many_keys)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    enum { N = 900 };
    static int fd[N];
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE one 0 1 3600"), v);
    char req[128];
    for (int i = 0; i < N; i++) {
        fd[i] = it_raw_connect(d->port);
        int n;
        if (i % 2 == 0) {
            n = snprintf(req, sizeof req, "CL.THROTTLE one 0 1 3600 1 WAIT 0\r\n");
        } else {
            it_five(it_cmd(c, "CL.THROTTLE own%d 0 1 3600", i), v);
            n = snprintf(req, sizeof req, "CL.THROTTLE own%d 0 1 3600 1 WAIT %d\r\n", i,
                         i % 4 == 1 ? 0 : 3600000);
        }
        it_raw_send(fd[i], req, (size_t)n);
    }
    it_await_blocked(c, N);
    for (int i = 0; i < N; i++)
        close(fd[i]);
    it_await_blocked(c, 0);
    /* The queues are gone: a new waiter on "one" is the head and times out alone. */
    it_five(it_cmd(c, "CL.THROTTLE one 0 1 3600 1 WAIT 20"), v);
    cr_assert_eq(v[0], 1);
    IT_STATUS(it_cmd(c, "SET sentinel v"), "OK");
    it_assert_healthy(d, c, "sentinel", "v");
    redisFree(c);
    it_stop(d);
}

/* ---- 50 clients on 2 threads ---- */

enum { CLIENTS = 50, EACH = 4 };

struct pacer {
    int port;
    int admitted;
    int64_t first_sent, last_answered;
    char err[256];
};

/* Every client asks EACH times with WAIT 0 (no timeout): nothing is lost, so every request is
 * answered admitted. */
static void *paced_client(void *p)
{
    struct pacer *a = p;
    redisContext *c = it_try_connect(a->port);
    if (c == NULL) {
        snprintf(a->err, sizeof a->err, "connect");
        return NULL;
    }
    a->first_sent = lm_now_ns();
    for (int i = 0; i < EACH && a->err[0] == '\0'; i++) {
        redisReply *r = redisCommand(c, "CL.THROTTLE paced 4 100 1 1 WAIT 0");
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 5)
            snprintf(a->err, sizeof a->err, "request %d: bad reply", i);
        else if (r->element[0]->integer != 0 || r->element[2]->integer < 0)
            snprintf(a->err, sizeof a->err, "request %d: limited %lld remaining %lld", i,
                     r->element[0]->integer, r->element[2]->integer);
        else
            a->admitted++;
        freeReplyObject(r);
    }
    a->last_answered = lm_now_ns();
    redisFree(c);
    return NULL;
}

/* 200 requests on 100 a second, burst 5: all admitted, none lost, and the last is answered no
 * earlier than the limit allows: (200 - 5) emission intervals of 10 ms after the first was
 * sent. */
Test(wait, fifty_clients_paced_never_over_the_limit)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static struct pacer a[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].port = d->port;
        cr_assert_eq(pthread_create(&th[i], NULL, paced_client, &a[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    int64_t first = INT64_MAX, last = 0;
    int admitted = 0;
    for (int i = 0; i < CLIENTS; i++) {
        cr_assert(a[i].err[0] == '\0', "client %d: %s", i, a[i].err);
        admitted += a[i].admitted;
        if (a[i].first_sent < first)
            first = a[i].first_sent;
        if (a[i].last_answered > last)
            last = a[i].last_answered;
    }
    cr_assert_eq(admitted, CLIENTS * EACH);
    cr_assert_geq(last - first, (CLIENTS * EACH - 5) * 10 * MS, "over the limit: %lld ms",
                  (long long)((last - first) / MS));
    redisContext *c = it_connect(d->port);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    redisFree(c);
    it_stop(d);
}

enum { POOL = 3 };
static atomic_int holding, most_held;

struct worker {
    int port;
    int jobs;
    char err[256];
};

/* A worker takes a lease (waiting without a timeout), holds it a moment, gives it back. The
 * test's count of holders is between a grant's reply and its release's send, inside the time
 * the server holds the lease: it can never exceed what the server lets be held. */
static void *worker(void *p)
{
    struct worker *w = p;
    redisContext *c = it_try_connect(w->port);
    if (c == NULL) {
        snprintf(w->err, sizeof w->err, "connect");
        return NULL;
    }
    for (int i = 0; i < EACH && w->err[0] == '\0'; i++) {
        redisReply *r = redisCommand(c, "LEASE.ACQUIRE pool %d 60000 WAIT 0", POOL);
        if (r == NULL || r->type != REDIS_REPLY_STRING) {
            snprintf(w->err, sizeof w->err, "acquire %d: no lease", i);
            freeReplyObject(r);
            break;
        }
        int now = atomic_fetch_add(&holding, 1) + 1;
        int seen = atomic_load(&most_held);
        while (now > seen && !atomic_compare_exchange_weak(&most_held, &seen, now))
            ;
        usleep(1000);
        atomic_fetch_sub(&holding, 1);
        redisReply *rel = redisCommand(c, "LEASE.RELEASE pool %s", r->str);
        if (rel == NULL || rel->type != REDIS_REPLY_INTEGER || rel->integer != 1)
            snprintf(w->err, sizeof w->err, "release %d: not 1", i);
        freeReplyObject(rel);
        freeReplyObject(r);
        w->jobs++;
    }
    redisFree(c);
    return NULL;
}

Test(wait, fifty_workers_leases_never_over_the_pool)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static struct worker w[CLIENTS];
    pthread_t th[CLIENTS];
    atomic_store(&holding, 0);
    atomic_store(&most_held, 0);
    for (int i = 0; i < CLIENTS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].port = d->port;
        cr_assert_eq(pthread_create(&th[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    int jobs = 0;
    for (int i = 0; i < CLIENTS; i++) {
        cr_assert(w[i].err[0] == '\0', "worker %d: %s", i, w[i].err);
        jobs += w[i].jobs;
    }
    cr_assert_eq(jobs, CLIENTS * EACH, "jobs lost");
    cr_assert_leq(atomic_load(&most_held), POOL, "%d held at once", atomic_load(&most_held));
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "LEASE.COUNT pool"), 0);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    redisFree(c);
    it_stop(d);
}

/* SHUTDOWN while requests wait: the waiting connections are closed (they see the end of the
 * stream, never a reply), the daemon exits 0 with a clean log (under ASan: nothing leaked). */
Test(wait, shutdown_with_waiters)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE s 0 1 3600"), v);
    redisReply *r = it_cmd(c, "LEASE.ACQUIRE L 1 3600000");
    freeReplyObject(r);
    enum { N = 6 };
    int fd[N];
    for (int i = 0; i < N; i++) {
        fd[i] = it_raw_connect(d->port);
        const char *req = i % 2 ? "LEASE.ACQUIRE L 1 3600000 WAIT 0\r\n"
                                : "CL.THROTTLE s 0 1 3600 1 WAIT 600000\r\n";
        it_raw_send(fd[i], req, strlen(req));
    }
    it_await_blocked(c, N);
    redisFree(c);
    it_stop(d);
    for (int i = 0; i < N; i++) {
        struct it_io io;
        it_raw_exchange(fd[i], "", 0, 5000, 1024, 0, &io);
        cr_assert(io.closed && io.len == 0, "waiter %d: %zu bytes, closed %d", i, io.len,
                  io.closed);
        free(io.data);
        close(fd[i]);
    }
}
