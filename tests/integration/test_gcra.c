/* test_gcra.c - GCRA (COMMANDS.md, GCRA) on the real daemon, beyond the shared case table
 * (tests/cases/limiter_cases.c, which runs against rlimit.so too): the TAT and PTTL against the
 * clock, MULTI/EXEC, a snapshot restart, COMMAND's view of it, and Redis 7's float parser as the
 * oracle for the period argument. Expected times are derived from the clock read around each
 * call, never from the machine being fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(gcra, .fini = it_fini, .timeout = 300);

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long bulk_ll(redisReply *r)
{
    cr_assert(r->type == REDIS_REPLY_STRING, "want a bulk, got type %d (%s)", r->type,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long v = atoll(r->str);
    freeReplyObject(r);
    return v;
}

Test(gcra, tat_is_whole_microseconds_and_pttl_ends_at_it)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    /* EI = 2500 s / 1000 = 2.5 s (a whole number of µs, and long enough that the key, which
     * expires at its TAT, outlives the calls after it on a busy machine). The TAT is the
     * call's clock in µs plus one interval; reset_after is 2.5 s rounded up. */
    long long t0 = realtime_ns();
    IT_INTS(it_cmd(c, "GCRA k 5 1000 2500"), 0, 6, 5, -1, 3);
    long long t1 = realtime_ns();
    long long tat = bulk_ll(it_cmd(c, "GET k"));
    cr_expect_eq(tat % 1000, 0, "TAT %lld is not whole microseconds", tat);
    cr_expect(tat >= t0 / 1000 * 1000 + 2500000000LL && tat <= t1 / 1000 * 1000 + 2500000000LL,
              "TAT %lld outside [%lld, %lld] + 2.5 s", tat, t0, t1);
    /* TOKENS 5 moves it by five intervals exactly. */
    redisReply *r = it_cmd(c, "GCRA k 5 1000 2500 TOKENS 5");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5, "GCRA TOKENS 5: not 5 integers");
    cr_expect_eq(r->element[0]->integer, 0);
    cr_expect_eq(r->element[2]->integer, 0, "remaining");
    freeReplyObject(r);
    cr_expect_eq(bulk_ll(it_cmd(c, "GET k")), tat + 5 * 2500000000LL);
    tat += 5 * 2500000000LL;
    /* PTTL counts down to the TAT: between the clock readings around it. */
    long long p0 = realtime_ns();
    long long pttl = it_int(it_cmd(c, "PTTL k"));
    long long p1 = realtime_ns();
    cr_expect(pttl >= (tat - p1) / 1000000 - 1 && pttl <= (tat - p0) / 1000000 + 1,
              "PTTL %lld, TAT %lld ns, clock %lld..%lld", pttl, tat, p0, p1);
    /* A longer limit: TTL in seconds. */
    IT_INTS(it_cmd(c, "GCRA long 0 1 100"), 0, 1, 0, -1, 100);
    long long ttl = it_int(it_cmd(c, "TTL long"));
    cr_expect(ttl >= 98 && ttl <= 100, "TTL %lld", ttl);
    redisFree(c);
    it_stop(d);
}

Test(gcra, multi_exec)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "GCRA m 15 30 60"), "QUEUED");
    IT_STATUS(it_cmd(c, "CL.THROTTLE m 15 30 60"), "QUEUED");
    /* An argument error surfaces in EXEC's reply, as Redis's runtime errors do. */
    IT_STATUS(it_cmd(c, "GCRA m 15 30 60 TOKENS 0"), "QUEUED");
    IT_STATUS(it_cmd(c, "GCRA m 15 30 60 TOKENS 14"), "QUEUED");
    IT_STATUS(it_cmd(c, "GCRA m 15 30 60"), "QUEUED");
    IT_STATUS(it_cmd(c, "TYPE m"), "QUEUED");
    redisReply *r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 6, "EXEC: type %d", r->type);
    const long long rows[][5] = {
        {0, 16, 15, -1, 2}, {0, 16, 14, -1, 4}, {0}, {0, 16, 0, -1, 32}, {1, 16, 0, 2, 32}};
    for (int i = 0; i < 5; i++) {
        redisReply *e = r->element[i];
        r->element[i] = NULL;
        if (i == 2)
            IT_ERR(e, "ERR value is out of range, value must between 1 and 9223372036854775807");
        else
            it_check_ints(e, rows[i], 5, "EXEC element", i);
    }
    cr_expect(r->element[5]->type == REDIS_REPLY_STATUS && strcmp(r->element[5]->str, "string") == 0);
    freeReplyObject(r);
    /* A wrong arity is refused when queued, and the transaction aborts. */
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_ERR(it_cmd(c, "GCRA m 15 30"), "ERR wrong number of arguments for 'gcra' command");
    IT_ERR(it_cmd(c, "EXEC"), "EXECABORT Transaction discarded because of previous errors.");
    redisFree(c);
    it_stop(d);
}

Test(gcra, state_survives_a_snapshot_restart)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    /* EI 225 s: nothing drains during the test. One key written by GCRA, one by CL.THROTTLE. */
    IT_INTS(it_cmd(c, "GCRA g 15 16 3600 TOKENS 10"), 0, 16, 6, -1, 2250);
    IT_INTS(it_cmd(c, "CL.THROTTLE t 15 16 3600 10"), 0, 16, 6, -1, 2250);
    long long tat_g = bulk_ll(it_cmd(c, "GET g"));
    long long tat_t = bulk_ll(it_cmd(c, "GET t"));
    redisReply *r = redisCommand(c, "SHUTDOWN SAVE");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    cr_assert(it_wait_exit(d, 30000), "rlimitd did not exit after SHUTDOWN SAVE");
    cr_assert(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 0, "status 0x%x", d->status);
    it_spawn(d, it_free_port(), NULL);
    cr_assert(it_wait_ready(d, 10000), "rlimitd did not come back");
    c = it_connect(d->port);
    cr_expect_eq(bulk_ll(it_cmd(c, "GET g")), tat_g);
    cr_expect_eq(bulk_ll(it_cmd(c, "GET t")), tat_t);
    IT_STATUS(it_cmd(c, "TYPE g"), "string");
    /* Each command continues the other's state. */
    IT_INTS(it_cmd(c, "CL.THROTTLE g 15 16 3600 6"), 0, 16, 0, -1, 3600);
    IT_INTS(it_cmd(c, "GCRA t 15 16 3600 TOKENS 6"), 0, 16, 0, -1, 3600);
    IT_INTS(it_cmd(c, "GCRA g 15 16 3600"), 1, 16, 0, 225, 3600);
    redisFree(c);
    it_stop(d);
}

Test(gcra, command_info_and_getkeys)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "COMMAND INFO gcra");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    redisReply *e = r->element[0];
    cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 10, "entry type %d", e->type);
    cr_expect_str_eq(e->element[0]->str, "gcra");
    cr_expect_eq(e->element[1]->integer, -5);
    cr_expect_eq(e->element[3]->integer, 1);
    cr_expect_eq(e->element[4]->integer, 1);
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND GETKEYS GCRA user:7 1 2 3 TOKENS 4");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    cr_expect_str_eq(r->element[0]->str, "user:7");
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND DOCS gcra");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "DOCS type %d", r->type);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

/* ---- period: Redis 7's float parser as the oracle ---- */

/* ZADD parses its score as GCRA parses period (getDoubleFromObject), so the two servers must
 * agree on which strings are "not a valid float". */
static int zadd_says_float(redisContext *redis, const char *s, size_t len)
{
    const char *argv[] = {"ZADD", "z", s, "m"};
    const size_t lens[] = {4, 1, len, 1};
    redisReply *r = redisCommandArgv(redis, 4, argv, lens);
    cr_assert(r != NULL, "redis-server: %s", redis->errstr);
    int ok = r->type == REDIS_REPLY_INTEGER;
    cr_assert(ok || (r->type == REDIS_REPLY_ERROR &&
                     strcmp(r->str, "ERR value is not a valid float") == 0),
              "ZADD z '%.*s' m: unexpected reply %s", (int)len, s,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    return ok;
}

static int gcra_says_float(redisContext *c, const char *s, size_t len)
{
    const char *argv[] = {"GCRA", "fk", "1000000", "1", s};
    const size_t lens[] = {4, 2, 7, 1, len};
    redisReply *r = redisCommandArgv(c, 5, argv, lens);
    cr_assert(r != NULL, "rlimitd: %s", c->errstr);
    int ok = !(r->type == REDIS_REPLY_ERROR && strcmp(r->str, "ERR value is not a valid float") == 0);
    freeReplyObject(r);
    return ok;
}

/* ZADD flags that a generated string could spell; they are not scores there. Redis compares
 * them as C strings, so a NUL ends the word. */
static int is_zadd_flag(const char *s, size_t len)
{
    static const char *const flags[] = {"nx", "xx", "gt", "lt", "ch", "incr"};
    len = strnlen(s, len);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (len == strlen(flags[i]) && strncasecmp(s, flags[i], len) == 0)
            return 1;
    return 0;
}

Test(gcra, period_parses_as_redis_parses_floats)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    int rport = it_free_port();
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", rport);
    char rlog[512];
    snprintf(rlog, sizeof rlog, "%s/redis.log", d->dir);
    pid_t rpid = it_spawn_server(IT_ARGS("redis-server", "--port", portstr, "--bind", "127.0.0.1",
                                         "--save", "", "--appendonly", "no"),
                                 rlog, d->dir, NULL);
    redisContext *redis = NULL;
    for (int i = 0; i < 200 && redis == NULL; i++) {
        redis = it_try_connect(rport);
        if (redis == NULL)
            it_sleep_ms(50);
    }
    cr_assert_not_null(redis, "redis-server did not start");

    static const char *const fixed[] = {
        "1", "0.5", ".5", "5.", "+1", "-1", "1e3", "1E-6", "1e-400", "1e400", "inf", "-inf",
        "Infinity", "nan", "NaN", "-nan", "0x10", "0x1p-3", "0x", " 1", "1 ", "\t1", "", ".",
        "e1", "1e", "1e+", "--1", "+-1", "1.2.3", "4.9e-324", "2.2250738585072014e-308", "1_0",
        "00001", "1e0000000000000000000001",
    };
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("GCRA_FLOAT_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    srand(seed);
    static const char alphabet[] = "0123456789..eE+-xXpPinfINFaty \t";
    char buf[32];
    int agreed = 0;
    for (int i = 0; i < 3000; i++) {
        const char *s;
        size_t len;
        if (i < (int)(sizeof fixed / sizeof fixed[0])) {
            s = fixed[i];
            len = strlen(s);
        } else {
            len = 1 + (size_t)rand() % 12;
            for (size_t j = 0; j < len; j++)
                buf[j] = rand() % 16 == 0 ? '\0' : alphabet[rand() % (sizeof alphabet - 1)];
            /* Bias towards numbers: most strings start with a digit. */
            if (rand() % 2)
                buf[0] = (char)('0' + rand() % 10);
            s = buf;
        }
        if (is_zadd_flag(s, len))
            continue;
        int want = zadd_says_float(redis, s, len);
        int got = gcra_says_float(c, s, len);
        cr_assert_eq(got, want,
                     "seed %u (GCRA_FLOAT_SEED), case %d: period '%.*s' (%zu bytes): redis-server "
                     "says %s, rlimitd says %s",
                     seed, i, (int)len, s, len, want ? "float" : "not a float",
                     got ? "float" : "not a float");
        agreed++;
    }
    cr_log_info("seed %u: %d period strings classified alike", seed, agreed);
    redisReply *r = redisCommand(redis, "SHUTDOWN NOSAVE");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(redis);
    int st;
    waitpid(rpid, &st, 0);
    redisFree(c);
    it_stop(d);
}
