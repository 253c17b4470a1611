/* test_throttle.c - CL.THROTTLE over the wire (SPEC 2). Every expected reply is a contract with
 * redis-cell's users, so replies are compared exactly. */
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

Test(throttle, worked_example_twenty_calls)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    for (int i = 0; i < 20; i++)
        check_row(it_cmd(c, "CL.THROTTLE user123 15 30 60 1"), worked_example[i], i + 1);
    redisFree(c);
    it_stop(d);
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

Test(throttle, quantity_defaults_to_one)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INTS(it_cmd(c, "CL.THROTTLE k 15 30 60"), 0, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE k 15 30 60 1"), 0, 16, 14, -1, 4);
    IT_INTS(it_cmd(c, "CL.THROTTLE k 15 30 60"), 0, 16, 13, -1, 6);
    /* Command names are case-insensitive (SPEC 1). */
    IT_INTS(it_cmd(c, "cl.throttle k 15 30 60"), 0, 16, 12, -1, 8);
    IT_INTS(it_cmd(c, "Cl.ThRoTtLe k 15 30 60"), 0, 16, 11, -1, 10);
    redisFree(c);
    it_stop(d);
}

Test(throttle, larger_quantity_consumes_several)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    /* inc = 5 EI = 10 s: remaining 16 - 5 = 11, reset 10. */
    IT_INTS(it_cmd(c, "CL.THROTTLE q 15 30 60 5"), 0, 16, 11, -1, 10);
    /* 11 more fit exactly, leaving 0; the next one is limited. */
    IT_INTS(it_cmd(c, "CL.THROTTLE q 15 30 60 11"), 0, 16, 0, -1, 32);
    IT_INTS(it_cmd(c, "CL.THROTTLE q 15 30 60 1"), 1, 16, 0, 2, 32);
    redisFree(c);
    it_stop(d);
}

Test(throttle, peek_on_absent_key_stores_nothing)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 0"), 0, 16, 16, -1, 0);
    IT_INT(it_cmd(c, "EXISTS p"), 0);
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 0"), 0, 16, 16, -1, 0);
    /* A peek after a real call shows the state and does not change it. */
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 1"), 0, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 0"), 0, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 0"), 0, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE p 15 30 60 1"), 0, 16, 14, -1, 4);
    redisFree(c);
    it_stop(d);
}

Test(throttle, quantity_over_limit_never_succeeds)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INTS(it_cmd(c, "CL.THROTTLE big 15 30 60 17"), 1, 16, 16, -1, 0);
    IT_INT(it_cmd(c, "EXISTS big"), 0);
    IT_INTS(it_cmd(c, "CL.THROTTLE big 15 30 60 1000"), 1, 16, 16, -1, 0);
    IT_INT(it_cmd(c, "EXISTS big"), 0);
    /* Exactly the limit fits. */
    IT_INTS(it_cmd(c, "CL.THROTTLE fit 15 30 60 16"), 0, 16, 0, -1, 32);
    /* With state present: retry stays -1 and the state is unchanged. */
    IT_INTS(it_cmd(c, "CL.THROTTLE big2 15 30 60 1"), 0, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE big2 15 30 60 17"), 1, 16, 15, -1, 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE big2 15 30 60 1"), 0, 16, 14, -1, 4);
    redisFree(c);
    it_stop(d);
}

Test(throttle, zero_burst_allows_one_per_interval)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    /* EI = DVT = 1 s. */
    IT_INTS(it_cmd(c, "CL.THROTTLE z 0 1 1"), 0, 1, 0, -1, 1);
    IT_INTS(it_cmd(c, "CL.THROTTLE z 0 1 1"), 1, 1, 0, 1, 1);
    /* The state expires at its TAT; afterwards the key is fresh again. */
    long long deadline = it_now_ms() + 10000;
    while (it_int(it_cmd(c, "EXISTS z")) != 0) {
        cr_assert(it_now_ms() < deadline, "GCRA state did not expire within 10 s");
        it_sleep_ms(20);
    }
    IT_INTS(it_cmd(c, "CL.THROTTLE z 0 1 1"), 0, 1, 0, -1, 1);
    redisFree(c);
    it_stop(d);
}

Test(throttle, keys_are_binary_safe)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *argv[] = {"CL.THROTTLE", "a\0b c", "15", "30", "60"};
    size_t lens[] = {11, 5, 2, 2, 2};
    redisReply *r = redisCommandArgv(c, 5, argv, lens);
    cr_assert(r != NULL);
    IT_INTS(r, 0, 16, 15, -1, 2);
    const char *argv2[] = {"CL.THROTTLE", "a\0b d", "15", "30", "60"};
    r = redisCommandArgv(c, 5, argv2, lens);
    cr_assert(r != NULL);
    IT_INTS(r, 0, 16, 15, -1, 2);
    r = redisCommandArgv(c, 5, argv, lens);
    cr_assert(r != NULL);
    IT_INTS(r, 0, 16, 14, -1, 4);
    IT_INT(it_cmd(c, "DBSIZE"), 2);
    redisFree(c);
    it_stop(d);
}

Test(throttle, wrong_number_of_arguments)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *want = "ERR wrong number of arguments for 'cl.throttle' command";
    IT_ERR(it_cmd(c, "CL.THROTTLE"), want);
    IT_ERR(it_cmd(c, "CL.THROTTLE k"), want);
    IT_ERR(it_cmd(c, "CL.THROTTLE k 15 30"), want);        /* 4 arguments */
    IT_ERR(it_cmd(c, "CL.THROTTLE k 15 30 60 1 1"), want); /* 7 arguments */
    IT_ERR(it_cmd(c, "CL.THROTTLE k 15 30 60 1 1 1"), want);
    IT_ERR(it_cmd(c, "cl.throttle k 15 30"), want);
    /* The connection stays usable after a command error. */
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    redisFree(c);
    it_stop(d);
}

Test(throttle, non_integer_arguments)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *want = "ERR value is not an integer or out of range";
    static const char *const bad[] = {"abc",
                                      "1.5",
                                      "",
                                      " 1",
                                      "1 ",
                                      "+-1",
                                      "0x10",
                                      "1e3",
                                      "99999999999999999999",
                                      "-99999999999999999999",
                                      "15a"};
    for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
        for (int pos = 2; pos <= 5; pos++) {
            const char *argv[6] = {"CL.THROTTLE", "k", "15", "30", "60", "1"};
            argv[pos] = bad[b];
            redisReply *r = it_cmdargv(c, 6, argv);
            char where[128];
            snprintf(where, sizeof(where), "argument %d = \"%s\"", pos, bad[b]);
            it_check_err(r, want, where, pos);
        }
    }
    IT_INT(it_cmd(c, "EXISTS k"), 0);
    redisFree(c);
    it_stop(d);
}

Test(throttle, out_of_range_arguments_name_the_argument)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k -1 30 60"), "ERR", "max_burst");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k -100 30 60 1"), "ERR", "max_burst");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 0 60"), "ERR", "count");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 -1 60"), "ERR", "count");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 30 0"), "ERR", "period");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 30 -60"), "ERR", "period");
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 30 60 -1"), "ERR", "quantity");
    /* Arithmetic redis-cell wraps around: EI < 1 ns, DVT or inc overflowing 64 bits. */
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 0 2000000000 1"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 9223372036854775806 1 60"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 1 60 9223372036854775807"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 15 1 9223372036854775807"), "ERR", NULL);
    IT_INT(it_cmd(c, "EXISTS k"), 0);
    /* Boundary values that are valid. */
    IT_INTS(it_cmd(c, "CL.THROTTLE k 0 1 1 0"), 0, 1, 1, -1, 0);
    IT_INT(it_cmd(c, "EXISTS k"), 0);
    redisFree(c);
    it_stop(d);
}

Test(throttle, wrongtype_on_isallowed_state)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 10"), 1);
    IT_ERR(it_cmd(c, "CL.THROTTLE hist:{u}:a 15 30 60"),
           "WRONGTYPE Operation against a key holding the wrong kind of value");
    IT_ERR(it_cmd(c, "CL.THROTTLE hist:{u}:a 15 30 60 0"),
           "WRONGTYPE Operation against a key holding the wrong kind of value");
    /* The window log is untouched. */
    IT_STATUS(it_cmd(c, "TYPE hist:{u}:a"), "zset");
    redisFree(c);
    it_stop(d);
}
