/* test_throttle.c - CL.THROTTLE over the wire (COMMANDS.md "CL.THROTTLE"): the worked example pipelined and through
 * redis-cli. The command's replies and errors are in the shared case table,
 * tests/cases/limiter_cases.c (test_limiter_cases.c), which also runs against the module.
 * Every expected reply is a contract with redis-cell's users: compared exactly whenever the calls
 * took less than the second the example allows, and always checked against the GCRA model
 * (tests/cases/limit_model.h) with the time measured around the calls, so a slow machine cannot
 * fail them and a wrong server cannot pass them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "../cases/limit_model.h"

TestSuite(throttle, .fini = it_fini, .timeout = 120);

/* COMMANDS.md "CL.THROTTLE" worked example: `CL.THROTTLE user123 15 30 60 1` twenty times in quick succession.
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

enum { CALLS = 20 };
#define QUICK_NS INT64_C(1000000000)

/* The twenty replies and the CLOCK_REALTIME bounds around each (ns). */
struct run {
    long long reply[CALLS][5];
    int64_t before[CALLS], after[CALLS];
};

/* Replays a run through a fresh model: 0 if every reply fits, else -1 with the first misfit. */
static int replay(const struct run *run, char *why, size_t len)
{
    struct lm_gcra k;
    lm_gcra_reset(&k);
    for (int i = 0; i < CALLS; i++) {
        char one[400];
        if (lm_gcra_check(&k, 15, 30, 60, 1, run->before[i], run->after[i], run->reply[i], one,
                          sizeof one) != 0) {
            snprintf(why, len, "call %d: %s", i + 1, one);
            return -1;
        }
    }
    return 0;
}

/* Every reply must fit the model; when the run took under a second, each must also be exactly
 * the worked example's. */
static void check_run(const struct run *run)
{
    char why[512];
    cr_assert(replay(run, why, sizeof why) == 0, "%s", why);
    if (run->after[CALLS - 1] - run->before[0] >= QUICK_NS) {
        cr_log_warn("the calls took %.3f s: checked by the model only",
                    (double)(run->after[CALLS - 1] - run->before[0]) / 1e9);
        return;
    }
    for (int i = 0; i < CALLS; i++)
        for (int j = 0; j < 5; j++)
            cr_assert_eq(run->reply[i][j], worked_example[i][j],
                         "worked example call %d field %d: got %lld, want %lld", i + 1, j,
                         run->reply[i][j], worked_example[i][j]);
}

static void store(struct run *run, int i, redisReply *r)
{
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5, "call %d: not a 5-array", i + 1);
    for (int j = 0; j < 5; j++) {
        cr_assert(r->element[j]->type == REDIS_REPLY_INTEGER, "call %d: not integers", i + 1);
        run->reply[i][j] = r->element[j]->integer;
    }
}

static void pipelined(int port, struct run *run)
{
    redisContext *c = it_connect(port);
    int64_t before = lm_now_ns();
    for (int i = 0; i < CALLS; i++)
        cr_assert(redisAppendCommand(c, "CL.THROTTLE user123 15 30 60 1") == REDIS_OK);
    for (int i = 0; i < CALLS; i++) {
        void *r = NULL;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "reply %d: %s", i + 1, c->errstr);
        run->before[i] = before;
        run->after[i] = lm_now_ns();
        store(run, i, r);
        freeReplyObject(r);
    }
    redisFree(c);
}

Test(throttle, worked_example_pipelined)
{
    struct it_daemon *d = it_start(NULL);
    struct run run;
    pipelined(d->port, &run);
    check_run(&run);
    it_stop(d);
}

/* The model is only worth its name if it fails a wrong server. From a real run, each mutation
 * below (what a broken daemon could answer) must be refused: an off-by-one in remaining, a
 * rounding error in reset_after or retry_after, a call let through, and a state lost after call
 * 8 (the fresh key's answer). The intervals are only narrow enough to tell every one of them
 * apart when the run was quick, which a pipelined run nearly always is. */
Test(throttle, the_model_refuses_wrong_replies)
{
    struct it_daemon *d = it_start(NULL);
    struct run run, bad;
    pipelined(d->port, &run);
    it_stop(d);
    char why[512];
    cr_assert(replay(&run, why, sizeof why) == 0, "%s", why);
    if (run.after[CALLS - 1] - run.before[0] >= QUICK_NS / 4) {
        cr_skip_test("the pipelined run took %.3f s, too slow to tell the mutations apart",
                     (double)(run.after[CALLS - 1] - run.before[0]) / 1e9);
    }
    static const struct {
        int call, field;
        long long delta;
        const char *what;
    } mutations[] = {
        {5, 2, +1, "remaining one too many"},
        {5, 2, -1, "remaining one too few"},
        {16, 2, +1, "remaining 1 at the end"},
        {3, 4, +1, "reset_after a second late"},
        {3, 4, -1, "reset_after a second early"},
        {17, 3, -1, "retry_after 1"},
        {17, 3, +1, "retry_after 3"},
        {17, 0, -1, "the 17th call allowed"},
        {12, 0, +1, "the 12th call limited"},
        {17, 4, -2, "reset_after 30 when limited"},
    };
    for (size_t m = 0; m < sizeof mutations / sizeof mutations[0]; m++) {
        bad = run;
        bad.reply[mutations[m].call - 1][mutations[m].field] += mutations[m].delta;
        cr_expect(replay(&bad, why, sizeof why) != 0, "the model accepted %s", mutations[m].what);
    }
    /* A state lost after call 8: call 9 answers as for a fresh key. */
    bad = run;
    memcpy(bad.reply[8], worked_example[0], sizeof bad.reply[8]);
    cr_expect(replay(&bad, why, sizeof why) != 0, "the model accepted a lost state");
}

/* redis-cli prints one integer per line when stdout is not a terminal. */
static void parse_rows(const char *out, struct run *run, int from, int n)
{
    const char *p = out;
    for (int i = from; i < from + n; i++)
        for (int j = 0; j < 5; j++) {
            char *end;
            run->reply[i][j] = strtoll(p, &end, 10);
            cr_assert(end != p && *end == '\n', "call %d: redis-cli printed:\n%s", i + 1, out);
            p = end + 1;
        }
    cr_assert(*p == '\0', "trailing output from redis-cli:\n%s", out);
}

Test(throttle, worked_example_via_redis_cli)
{
    struct it_daemon *d = it_start(NULL);
    struct run run;
    char *out;
    /* The first calls as command-line arguments, one redis-cli each. */
    enum { ARGV_CALLS = 3 };
    for (int i = 0; i < ARGV_CALLS; i++) {
        run.before[i] = lm_now_ns();
        int st = it_run(&out, "redis-cli -p %d CL.THROTTLE user123 15 30 60 1", d->port);
        run.after[i] = lm_now_ns();
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-cli status 0x%x: %s", st, out);
        parse_rows(out, &run, i, 1);
        free(out);
    }
    /* The rest through one redis-cli reading commands from its standard input: each of these
     * calls happened somewhere between the start and the end of that redis-cli. */
    int64_t before = lm_now_ns();
    int st = it_run(&out,
                    "for i in $(seq %d); do echo 'CL.THROTTLE user123 15 30 60 1'; done | "
                    "redis-cli -p %d",
                    CALLS - ARGV_CALLS, d->port);
    int64_t after = lm_now_ns();
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-cli status 0x%x: %s", st, out);
    parse_rows(out, &run, ARGV_CALLS, CALLS - ARGV_CALLS);
    for (int i = ARGV_CALLS; i < CALLS; i++) {
        run.before[i] = before;
        run.after[i] = after;
    }
    free(out);
    check_run(&run);
    it_stop(d);
}
