/* test_throttle.c - CL.THROTTLE over the wire (SPEC 2): the worked example pipelined and through
 * redis-cli. The command's replies and errors are in the shared case table,
 * tests/cases/limiter_cases.c (test_limiter_cases.c), which also runs against the module.
 * Every expected reply is a contract with redis-cell's users, so replies are compared exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(throttle, .fini = it_fini, .timeout = 120);

/* SPEC 2 worked example: `CL.THROTTLE user123 15 30 60 1` twenty times in quick succession.
 * EI = 2 s, DVT = 32 s: call i (1..16) is allowed with remaining 16 - i and reset 2i seconds;
 * calls 17..20 are limited, retry 2 s, reset 32 s. Retry and reset are rounded up at ms
 * granularity, so they stay exact while the twenty calls take less than a second. */
static const long long worked_example[20][5] = {
    {0, 16, 15, -1, 2},  {0, 16, 14, -1, 4},  {0, 16, 13, -1, 6}, {0, 16, 12, -1, 8},
    {0, 16, 11, -1, 10}, {0, 16, 10, -1, 12}, {0, 16, 9, -1, 14}, {0, 16, 8, -1, 16},
    {0, 16, 7, -1, 18},  {0, 16, 6, -1, 20},  {0, 16, 5, -1, 22}, {0, 16, 4, -1, 24},
    {0, 16, 3, -1, 26},  {0, 16, 2, -1, 28},  {0, 16, 1, -1, 30}, {0, 16, 0, -1, 32},
    {1, 16, 0, 2, 32},   {1, 16, 0, 2, 32},   {1, 16, 0, 2, 32},  {1, 16, 0, 2, 32},
};

static void check_row(redisReply *r, const long long *want, int call)
{
    char where[64];
    snprintf(where, sizeof(where), "worked example call %d", call);
    it_check_ints(r, want, 5, where, call);
}

Test(throttle, worked_example_pipelined)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    for (int i = 0; i < 20; i++)
        cr_assert(redisAppendCommand(c, "CL.THROTTLE user123 15 30 60 1") == REDIS_OK);
    for (int i = 0; i < 20; i++) {
        void *r = NULL;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "reply %d: %s", i + 1, c->errstr);
        check_row(r, worked_example[i], i + 1);
    }
    redisFree(c);
    it_stop(d);
}

/* redis-cli prints one integer per line when stdout is not a terminal. */
static void row_text(char *buf, size_t len, const long long *w)
{
    snprintf(buf, len, "%lld\n%lld\n%lld\n%lld\n%lld\n", w[0], w[1], w[2], w[3], w[4]);
}

Test(throttle, worked_example_via_redis_cli)
{
    struct it_daemon *d = it_start(NULL);
    char *out;
    char want[2048];
    /* The first calls as command-line arguments, one redis-cli each. */
    enum { ARGV_CALLS = 3 };
    for (int i = 0; i < ARGV_CALLS; i++) {
        int st = it_run(&out, "redis-cli -p %d CL.THROTTLE user123 15 30 60 1", d->port);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-cli status 0x%x: %s", st, out);
        row_text(want, sizeof(want), worked_example[i]);
        cr_assert_str_eq(out, want, "call %d: redis-cli printed:\n%s", i + 1, out);
        free(out);
    }
    /* The rest through one redis-cli reading commands from its standard input, so the twenty
     * calls stay well within the second the example's rounding allows. */
    size_t off = 0;
    for (int i = ARGV_CALLS; i < 20; i++) {
        row_text(want + off, sizeof(want) - off, worked_example[i]);
        off = strlen(want);
    }
    int st = it_run(&out,
                    "for i in $(seq %d); do echo 'CL.THROTTLE user123 15 30 60 1'; done | "
                    "redis-cli -p %d",
                    20 - ARGV_CALLS, d->port);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-cli status 0x%x: %s", st, out);
    cr_assert_str_eq(out, want, "calls %d..20: redis-cli printed:\n%s", ARGV_CALLS + 1, out);
    free(out);
    it_stop(d);
}

