/* test_bench.c - the real redis-benchmark against the daemon: it must run to the end with no
 * error from the server, and the daemon must be fine afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(bench, .fini = it_fini, .timeout = 900);

/* Runs redis-benchmark (killed after 10 minutes) and checks exit 0 and a clean output. */
static char *bench(int port, const char *args)
{
    char *out;
    int st = it_run(&out, "timeout -s KILL 600 redis-benchmark -p %d %s", port, args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-benchmark %s: status 0x%x:\n%s", args,
              st, out);
    cr_assert(strstr(out, "ERR") == NULL, "redis-benchmark %s reported errors:\n%.3000s", args,
              out);
    /* It reads CONFIG GET save / appendonly first (SPEC 4). */
    cr_assert(strstr(out, "Could not fetch") == NULL, "redis-benchmark %s:\n%.3000s", args, out);
    return out;
}

Test(bench, ping_and_incr)
{
    struct it_daemon *d = it_start(NULL);
    char *out = bench(d->port, "-t ping,incr -n 20000 -q");
    cr_assert(strstr(out, "PING_INLINE: ") != NULL && strstr(out, "PING_MBULK: ") != NULL &&
                  strstr(out, "INCR: ") != NULL && strstr(out, "requests per second") != NULL,
              "unexpected output:\n%s", out);
    free(out);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    /* Without -r every INCR hits the one literal key. */
    IT_BULK(it_cmd(c, "GET counter:__rand_int__"), "20000");
    redisFree(c);
    it_stop(d);
}

Test(bench, cl_throttle_random_keys)
{
    struct it_daemon *d = it_start(NULL);
    char *out = bench(d->port, "-r 100000 -n 20000 CL.THROTTLE k:__rand_int__ 15 30 60");
    free(out);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    long long n = it_int(it_cmd(c, "DBSIZE"));
    cr_assert(n > 1000 && n <= 20000, "DBSIZE %lld after 20000 calls on random keys", n);
    IT_INTS(it_cmd(c, "CL.THROTTLE after 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    it_stop(d);
}

Test(bench, isallowed_random_users_and_pipelining)
{
    struct it_daemon *d = it_start(NULL);
    char *out = bench(d->port, "-r 1000 -n 20000 -P 16 -q ISALLOWED u:__rand_int__ a 60 10");
    free(out);
    out = bench(d->port, "-t ping,set,get,incr -n 20000 -P 32 -c 20 -q");
    free(out);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    long long n = it_int(it_cmd(c, "DBSIZE"));
    cr_assert(n > 100, "DBSIZE %lld", n);
    redisFree(c);
    it_stop(d);
}
