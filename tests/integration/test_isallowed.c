/* test_isallowed.c - ISALLOWED, the sliding-window log (COMMANDS.md "ISALLOWED"), over the wire: what only the
 * daemon has (pipelining, its window-max-count setting, its memory). The command's replies and
 * errors are in the shared case table, tests/cases/limiter_cases.c (test_limiter_cases.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(isallowed, .fini = it_fini, .timeout = 120);

/* Two attempts in the same millisecond are two attempts (COMMANDS.md "ISALLOWED"): a pipeline lands many calls
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

static long long used_memory(redisContext *c)
{
    return it_info_int(c, "memory", "used_memory");
}

/* Only the newest max_count + 1 attempts are kept (COMMANDS.md "ISALLOWED"): 100,000 attempts against a limit of
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
