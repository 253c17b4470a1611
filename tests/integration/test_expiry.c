/* test_expiry.c - expired state is invisible at once and reclaimed in the background (COMMANDS.md,
 * DESIGN.md "Expiry"). Only deadlines here, no timing assertions. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(expiry, .fini = it_fini, .timeout = 240);

Test(expiry, expired_keys_are_invisible)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET s v PX 100"), "OK");
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_INT(it_cmd(c, "PEXPIRE n 100"), 1);
    IT_INTS(it_cmd(c, "CL.THROTTLE g 0 10 1"), 0, 1, 0, -1, 1); /* TAT = now + 100 ms */
    IT_STATUS(it_cmd(c, "SET keep v"), "OK");
    it_sleep_ms(300);
    IT_NIL(it_cmd(c, "GET s"));
    IT_INT(it_cmd(c, "EXISTS s n g"), 0);
    IT_INT(it_cmd(c, "TTL s"), -2);
    IT_INT(it_cmd(c, "PTTL n"), -2);
    IT_STATUS(it_cmd(c, "TYPE g"), "none");
    /* An expired counter starts again from zero. */
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_INT(it_cmd(c, "TTL n"), -1);
    IT_BULK(it_cmd(c, "GET keep"), "v");
    redisFree(c);
    it_stop(d);
}

/* 100,000 keys with PX 200, never touched again: the active sweep must free them. DBSIZE
 * counts what has not been reclaimed yet, so it has to reach 0 by itself. */
Test(expiry, active_sweep_reclaims_untouched_keys)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    enum { N = 100000, BATCH = 5000 };
    for (int base = 0; base < N; base += BATCH) {
        for (int i = base; i < base + BATCH; i++)
            cr_assert(redisAppendCommand(c, "SET sweep:%d v PX 200", i) == REDIS_OK);
        for (int i = base; i < base + BATCH; i++) {
            void *r;
            cr_assert(redisGetReply(c, &r) == REDIS_OK, "%s", c->errstr);
            it_check_status(r, "OK", "SET PX 200 pipeline", i);
        }
    }
    IT_STATUS(it_cmd(c, "SET keep v"), "OK");
    it_sleep_ms(3000);
    long long deadline = it_now_ms() + 60000, n; /* a bound for a starved machine */
    while ((n = it_int(it_cmd(c, "DBSIZE"))) != 1) {
        cr_assert(n >= 1, "DBSIZE %lld: the unexpired key is gone", n);
        cr_assert(it_now_ms() < deadline, "DBSIZE still %lld 63 s after the keys expired", n);
        it_sleep_ms(100);
    }
    IT_BULK(it_cmd(c, "GET keep"), "v");
    /* And the INFO view agrees. */
    redisReply *r = it_cmd(c, "INFO keyspace");
    cr_assert(r->type == REDIS_REPLY_STRING);
    cr_assert(strstr(r->str, "db0:keys=1,") != NULL, "INFO keyspace: %s", r->str);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

Test(expiry, window_logs_and_gcra_state_are_swept)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    enum { N = 10000 };
    for (int i = 0; i < N; i++) {
        cr_assert(redisAppendCommand(c, "ISALLOWED u%d a 1 5", i) == REDIS_OK);
        cr_assert(redisAppendCommand(c, "CL.THROTTLE g%d 0 1 1", i) == REDIS_OK);
    }
    for (int i = 0; i < 2 * N; i++) {
        void *r;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "%s", c->errstr);
        cr_assert(((redisReply *)r)->type != REDIS_REPLY_ERROR, "%s", ((redisReply *)r)->str);
        freeReplyObject(r);
    }
    long long deadline = it_now_ms() + 60000, n; /* a bound for a starved machine */
    while ((n = it_int(it_cmd(c, "DBSIZE"))) != 0) {
        cr_assert(it_now_ms() < deadline, "DBSIZE still %lld after 60 s", n);
        it_sleep_ms(100);
    }
    redisFree(c);
    it_stop(d);
}
