/* test_module_wait.c - the WAIT option in rlimit.so on Debian's real redis-server (COMMANDS.md,
 * "Waiting for capacity"): the same rules as the daemon's it_wait, through Redis's blocked
 * clients. Expectations come from the replies and CLOCK_REALTIME read around the calls; where
 * order matters the test waits for Redis to say (INFO blocked_clients). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../integration/harness.h"
#include "redis_harness.h"

TestSuite(module_wait, .fini = rs_fini, .timeout = 300);

#define MS 1000000LL

/* CL.THROTTLE and GCRA at 5 a second, burst 0: every request with WAIT is admitted, request i
 * no earlier than i * 200 ms after the first was sent, each reply what the GCRA model gives at
 * some time inside its call; in database 3, whose keys the waiting decision must use. */
Test(module_wait, throttle_and_gcra_admit_at_the_limiters_rate)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    IT_STATUS(it_cmd(c, "SELECT 3"), "OK");
    struct lm_gcra m;
    lm_gcra_reset(&m);
    int64_t first = 0;
    for (int i = 0; i < 5; i++) {
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
    IT_INT(it_cmd(c, "EXISTS k"), 1);
    IT_STATUS(it_cmd(c, "SELECT 0"), "OK");
    IT_INT(it_cmd(c, "EXISTS k"), 0);
    for (int i = 0; i < 4; i++) {
        int64_t before = lm_now_ns();
        long long v[5];
        it_five(it_cmd(c, "GCRA g 0 5 1 WAIT 10000"), v);
        if (i == 0)
            first = before;
        cr_assert_eq(v[0], 0);
        cr_assert_geq(lm_now_ns(), first + i * 200 * MS, "GCRA request %d admitted early", i);
    }
    /* The timeout answers the limited reply, no earlier than the timeout. */
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE h 0 1 3600"), v);
    int64_t before = lm_now_ns();
    it_five(it_cmd(c, "CL.THROTTLE h 0 1 3600 1 WAIT 120"), v);
    cr_assert_eq(v[0], 1);
    cr_assert_geq(lm_now_ns() - before, 120 * MS);
    /* Never admissible: at once, even without a timeout. */
    it_five(it_cmd(c, "CL.THROTTLE q 0 1 60 5 WAIT 0"), v);
    cr_assert(v[0] == 1 && v[3] == -1);
    redisReply *r = it_cmd(c, "THROTTLE.ALL 2 {t}a {t}b LIMIT 0 5 1 1 LIMIT 0 5 1 1 WAIT 5000");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0);
    freeReplyObject(r);
    before = lm_now_ns();
    r = it_cmd(c, "THROTTLE.ALL 2 {t}a {t}b LIMIT 0 5 1 1 LIMIT 0 5 1 1 WAIT 5000");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0);
    cr_assert_geq(lm_now_ns(), before + 150 * MS, "THROTTLE.ALL admitted early");
    freeReplyObject(r);
    redisFree(c);
    rs_stop(s);
}

/* MULTI and Lua never block: the refusal is answered at once (a block would hang the test). */
Test(module_wait, multi_and_scripts_never_block)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE k 0 1 3600"), v);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "CL.THROTTLE k 0 1 3600 1 WAIT 0"), "QUEUED");
    IT_STATUS(it_cmd(c, "LEASE.ACQUIRE M 1 3600000"), "QUEUED");
    IT_STATUS(it_cmd(c, "LEASE.ACQUIRE M 1 3600000 WAIT 0"), "QUEUED");
    redisReply *r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    cr_assert_eq(r->element[0]->element[0]->integer, 1);
    cr_assert_eq(r->element[2]->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = it_cmd(c, "EVAL %s 1 k",
               "return redis.call('CL.THROTTLE', KEYS[1], 0, 1, 3600, 1, "
               "'WAIT', 0)");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1);
    freeReplyObject(r);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    redisFree(c);
    rs_stop(s);
}

/* A pool of one; ten waiters in order; 3 closes, 5 is killed; each release hands the slot to
 * the oldest waiter left. A lease of 300 ms frees its slot by itself. A replica holds the
 * primary's leases exactly: the grants made from the module's timer are replicated too. */
Test(module_wait, lease_fifo_release_expiry_and_replication)
{
    const char *const primary_args[] = {"--repl-diskless-sync-delay", "0", NULL};
    struct rs_server *p = rs_start(NULL, primary_args);
    struct rs_server *rp = rs_start(NULL, NULL);
    redisContext *c = it_connect(p->port);
    redisContext *rc = it_connect(rp->port);
    IT_STATUS(it_cmd(rc, "REPLICAOF 127.0.0.1 %d", p->port), "OK");
    redisReply *r = it_cmd(c, "LEASE.ACQUIRE F 1 3600000");
    char held[64];
    snprintf(held, sizeof held, "%s", r->str);
    freeReplyObject(r);
    enum { N = 10 };
    int fd[N];
    long long id[N];
    it_queue_waiters(c, p->port, "LEASE.ACQUIRE F 1 3600000 WAIT 0\r\n", N, fd, id);
    close(fd[3]);
    IT_INT(it_cmd(c, "CLIENT KILL ID %lld", id[5]), 1);
    it_await_blocked(c, N - 2);
    for (int i = 0; i < N; i++) {
        if (i == 3 || i == 5)
            continue;
        IT_INT(it_cmd(c, "LEASE.RELEASE F %s", held), 1);
        redisReply *o;
        cr_assert_eq(it_raw_read_replies(fd[i], 1, &o), 1, "waiter %d not served in turn", i);
        cr_assert_eq(o->type, REDIS_REPLY_STRING);
        snprintf(held, sizeof held, "%s", o->str);
        freeReplyObject(o);
        IT_INT(it_cmd(c, "LEASE.COUNT F"), 1);
    }
    for (int i = 0; i < N; i++)
        if (i != 3)
            close(fd[i]);
    cr_assert_eq(it_info_int(c, "clients", "blocked_clients"), 0);
    int64_t took = lm_now_ns();
    r = it_cmd(c, "LEASE.ACQUIRE E 1 300");
    freeReplyObject(r);
    r = it_cmd(c, "LEASE.ACQUIRE E 1 300 WAIT 60000");
    cr_assert(r->type == REDIS_REPLY_STRING, "want a lease once the first expired");
    cr_assert_geq(lm_now_ns(), took + 300 * MS, "handed out before the first expired");
    freeReplyObject(r);
    int64_t before = lm_now_ns();
    IT_NIL(it_cmd(c, "LEASE.ACQUIRE F 1 3600000 WAIT 100"));
    cr_assert_geq(lm_now_ns() - before, 100 * MS);
    IT_INT(it_cmd(c, "WAIT 1 20000"), 1);
    r = it_cmd(c, "DEBUG DIGEST-VALUE F");
    redisReply *rr = it_cmd(rc, "DEBUG DIGEST-VALUE F");
    cr_assert(r->type == REDIS_REPLY_ARRAY && rr->type == REDIS_REPLY_ARRAY);
    cr_assert_str_eq(rr->element[0]->str, r->element[0]->str, "replica's leases differ");
    freeReplyObject(r);
    freeReplyObject(rr);
    redisFree(c);
    redisFree(rc);
    rs_stop(rp);
    rs_stop(p);
}

/* Hostile timeouts answer Redis's texts; 300 waiters on one key and on keys of their own close
 * at once and Redis forgets them all (the sanitizer build checks the module frees them). */
Test(module_wait, hostile_timeouts_and_many_waiters)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    IT_ERR(it_cmd(c, "CL.THROTTLE k 0 1 1 1 WAIT -1"), "ERR timeout is negative");
    IT_ERR(it_cmd(c, "GCRA k 0 1 1 WAIT 1000000000001"), "ERR timeout is out of range");
    IT_ERR(it_cmd(c, "THROTTLE.ALL 1 k LIMIT 0 1 1 1 WAIT x"),
           "ERR timeout is not an integer or out of range");
    IT_ERR(it_cmd(c, "LEASE.ACQUIRE L 1 1000 WAIT 1.5"),
           "ERR timeout is not an integer or out of range");
    IT_INT(it_cmd(c, "EXISTS k L"), 0);
    enum { N = 300 };
    static int fd[N];
    long long v[5];
    it_five(it_cmd(c, "CL.THROTTLE one 0 1 3600"), v);
    char req[128];
    for (int i = 0; i < N; i++) {
        fd[i] = it_raw_connect(s->port);
        int n;
        if (i % 2 == 0) {
            n = snprintf(req, sizeof req, "CL.THROTTLE one 0 1 3600 1 WAIT 0\r\n");
        } else {
            it_five(it_cmd(c, "CL.THROTTLE own%d 0 1 3600", i), v);
            n = snprintf(req, sizeof req, "CL.THROTTLE own%d 0 1 3600 1 WAIT 3600000\r\n", i);
        }
        it_raw_send(fd[i], req, (size_t)n);
    }
    it_await_blocked(c, N);
    for (int i = 0; i < N; i++)
        close(fd[i]);
    it_await_blocked(c, 0);
    it_five(it_cmd(c, "CL.THROTTLE one 0 1 3600 1 WAIT 20"), v);
    cr_assert_eq(v[0], 1);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    rs_stop(s);
}
