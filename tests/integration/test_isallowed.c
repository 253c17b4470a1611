/* test_isallowed.c - ISALLOWED, the sliding-window log (SPEC 3), over the wire. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(isallowed, .fini = it_fini, .timeout = 120);

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

Test(isallowed, allows_max_count_then_denies)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    for (int i = 0; i < 5; i++)
        IT_INT(it_cmd(c, "ISALLOWED alice login 60 5"), 1);
    for (int i = 0; i < 5; i++)
        IT_INT(it_cmd(c, "ISALLOWED alice login 60 5"), 0);
    /* Command names are case-insensitive. */
    IT_INT(it_cmd(c, "isallowed alice login 60 5"), 0);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, users_and_actions_are_separate)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED u1 a 60 1"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u1 a 60 1"), 0);
    IT_INT(it_cmd(c, "ISALLOWED u1 b 60 1"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u2 a 60 1"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u2 a 60 1"), 0);
    IT_INT(it_cmd(c, "DBSIZE"), 3);
    IT_INT(it_cmd(c, "EXISTS hist:{u1}:a hist:{u1}:b hist:{u2}:a hist:{u2}:b"), 3);
    redisFree(c);
    it_stop(d);
}

/* Two attempts in the same millisecond are two attempts (SPEC 3): a pipeline lands many calls
 * in one millisecond. */
Test(isallowed, same_millisecond_attempts_all_count)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    for (int i = 0; i < 50; i++)
        cr_assert(redisAppendCommand(c, "ISALLOWED fast x 60 20") == REDIS_OK);
    for (int i = 0; i < 50; i++) {
        void *r = NULL;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "%s", c->errstr);
        it_check_int(r, i < 20 ? 1 : 0, "pipelined ISALLOWED", i + 1);
    }
    redisFree(c);
    it_stop(d);
}

/* Every attempt counts, denied ones too: a denied attempt is recorded, which shows as the key's
 * expiry moving to `period` after it (SPEC 3: the key expires period seconds after its newest
 * attempt). Without recording, the PTTL could only go down. */
Test(isallowed, denied_attempts_are_recorded)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED bob pay 30 1"), 1);
    it_sleep_ms(300);
    long long p1 = it_int(it_cmd(c, "PTTL hist:{bob}:pay"));
    IT_INT(it_cmd(c, "ISALLOWED bob pay 30 1"), 0);
    long long p2 = it_int(it_cmd(c, "PTTL hist:{bob}:pay"));
    cr_assert(p1 > 0 && p2 > p1, "PTTL right after a denied attempt: %lld, just before: %lld", p2,
              p1);
    /* A client that keeps hammering stays blocked. */
    for (int i = 0; i < 20; i++)
        IT_INT(it_cmd(c, "ISALLOWED bob pay 30 1"), 0);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, state_key_visible_to_key_commands)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "EXISTS hist:{carol}:search"), 0);
    IT_INT(it_cmd(c, "ISALLOWED carol search 60 2"), 1);
    IT_INT(it_cmd(c, "EXISTS hist:{carol}:search"), 1);
    IT_STATUS(it_cmd(c, "TYPE hist:{carol}:search"), "zset");
    long long pttl = it_int(it_cmd(c, "PTTL hist:{carol}:search"));
    cr_assert(pttl > 50000 && pttl <= 60000, "PTTL %lld, want about 60000", pttl);
    long long ttl = it_int(it_cmd(c, "TTL hist:{carol}:search"));
    cr_assert(ttl > 50 && ttl <= 60, "TTL %lld, want about 60", ttl);
    IT_INT(it_cmd(c, "ISALLOWED carol search 60 2"), 1);
    IT_INT(it_cmd(c, "ISALLOWED carol search 60 2"), 0);
    /* DEL of the state key resets the window. */
    IT_INT(it_cmd(c, "DEL hist:{carol}:search"), 1);
    IT_INT(it_cmd(c, "EXISTS hist:{carol}:search"), 0);
    IT_INT(it_cmd(c, "ISALLOWED carol search 60 2"), 1);
    IT_INT(it_cmd(c, "UNLINK hist:{carol}:search"), 1);
    IT_INT(it_cmd(c, "ISALLOWED carol search 60 2"), 1);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, window_expires_after_period)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED dave x 1 2"), 1);
    IT_INT(it_cmd(c, "ISALLOWED dave x 1 2"), 1);
    IT_INT(it_cmd(c, "ISALLOWED dave x 1 2"), 0);
    /* Wait (without attempting, which would count) until the log has expired. */
    long long deadline = it_now_ms() + 10000;
    while (it_int(it_cmd(c, "EXISTS hist:{dave}:x")) != 0) {
        cr_assert(it_now_ms() < deadline, "window log did not expire within 10 s");
        it_sleep_ms(20);
    }
    IT_INT(it_cmd(c, "ISALLOWED dave x 1 2"), 1);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, max_count_zero_denies_everything)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED eve x 60 0"), 0);
    IT_INT(it_cmd(c, "ISALLOWED eve x 60 0"), 0);
    IT_INT(it_cmd(c, "EXISTS hist:{eve}:x"), 1);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, validation_errors)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *arity = "ERR wrong number of arguments for 'isallowed' command";
    IT_ERR(it_cmd(c, "ISALLOWED"), arity);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60"), arity);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 10 1"), arity);
    IT_ERR(it_cmd(c, "isallowed u"), arity);
    const char *notint = "ERR value is not an integer or out of range";
    IT_ERR(it_cmd(c, "ISALLOWED u a sixty 10"), notint);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 ten"), notint);
    IT_ERR(it_cmd(c, "ISALLOWED u a 1.5 10"), notint);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 1.5"), notint);
    IT_ERR(it_cmd(c, "ISALLOWED u a 99999999999999999999 10"), notint);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 99999999999999999999"), notint);
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a 0 10"), "ERR", "period");
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a -5 10"), "ERR", "period");
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a 60 -1"), "ERR", "max_count");
    /* The default window-max-count is 1,000,000. */
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a 60 1000001"), "ERR", "max_count");
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 1000000"), 1);
    redisFree(c);
    it_stop(d);
}

Test(isallowed, max_count_above_window_max_count_rejected)
{
    struct it_daemon *d = it_start(IT_ARGS("--window-max-count", "100"));
    redisContext *c = it_connect(d->port);
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a 60 101"), "ERR", "max_count");
    IT_INT(it_cmd(c, "EXISTS hist:{u}:a"), 0);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 100"), 1);
    /* window-max-count is live. */
    IT_STATUS(it_cmd(c, "CONFIG SET window-max-count 200"), "OK");
    IT_INT(it_cmd(c, "ISALLOWED u b 60 101"), 1);
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u b 60 201"), "ERR", "max_count");
    redisFree(c);
    it_stop(d);
}

Test(isallowed, wrongtype_when_key_holds_a_string)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET hist:{w}:a foo"), "OK");
    IT_ERR(it_cmd(c, "ISALLOWED w a 60 10"), WRONGTYPE);
    IT_BULK(it_cmd(c, "GET hist:{w}:a"), "foo");
    IT_INT(it_cmd(c, "INCR hist:{w}:n"), 1);
    IT_ERR(it_cmd(c, "ISALLOWED w n 60 10"), WRONGTYPE);
    IT_BULK(it_cmd(c, "GET hist:{w}:n"), "1");
    /* GCRA state is not a window log either. */
    IT_INTS(it_cmd(c, "CL.THROTTLE hist:{g}:a 15 30 60"), 0, 16, 15, -1, 2);
    IT_ERR(it_cmd(c, "ISALLOWED g a 60 10"), WRONGTYPE);
    IT_INTS(it_cmd(c, "CL.THROTTLE hist:{g}:a 15 30 60"), 0, 16, 14, -1, 4);
    redisFree(c);
    it_stop(d);
}

static long long used_memory(redisContext *c)
{
    redisReply *r = it_cmd(c, "INFO memory");
    cr_assert(r->type == REDIS_REPLY_STRING);
    const char *p = strstr(r->str, "used_memory:");
    cr_assert(p != NULL, "INFO memory lacks used_memory");
    long long v = atoll(p + 12);
    freeReplyObject(r);
    return v;
}

/* Only the newest max_count + 1 attempts are kept (SPEC 3): 100,000 attempts against a limit of
 * 2 must not grow the log (800 KB if every timestamp were kept). */
Test(isallowed, memory_is_bounded_by_max_count)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED m a 60 2"), 1);
    long long before = used_memory(c);
    enum { N = 100000, BATCH = 10000 };
    for (int b = 0; b < N; b += BATCH) {
        for (int i = 0; i < BATCH; i++)
            redisAppendCommand(c, "ISALLOWED m a 60 2");
        for (int i = 0; i < BATCH; i++) {
            void *r;
            cr_assert(redisGetReply(c, &r) == REDIS_OK);
            it_check_int(r, b + i == 0 ? 1 : 0, "ISALLOWED m a 60 2", b + i);
        }
    }
    long long after = used_memory(c);
    cr_assert(after - before < 64 * 1024, "used_memory grew from %lld to %lld", before, after);
    redisFree(c);
    it_stop(d);
}
