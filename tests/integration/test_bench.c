/* test_bench.c - the real redis-benchmark against the daemon: it must run to the end with no
 * error from the server, and the daemon must be fine afterwards. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
    /* It reads CONFIG GET save / appendonly first (COMMANDS.md). */
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
    /* EI = 2880 s: no key can expire before DBSIZE (the suite's timeout is 900 s), however slow
     * the benchmark runs. 20000 draws from 100000 keys hit about 18100 distinct ones. */
    char *out = bench(d->port, "-r 100000 -n 20000 CL.THROTTLE k:__rand_int__ 15 30 86400");
    free(out);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    long long n = it_int(it_cmd(c, "DBSIZE"));
    cr_assert(n > 17000 && n <= 20000, "DBSIZE %lld after 20000 calls on random keys", n);
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

/* The daemon's CPU time (user + system, all threads) in milliseconds, from /proc. */
static long long cpu_ms(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    long long ut = it_proc_stat_field(path, 14), st = it_proc_stat_field(path, 15);
    cr_assert(ut >= 0 && st >= 0, "cannot read %s", path);
    return (ut + st) * 1000 / sysconf(_SC_CLK_TCK);
}

/* CONFIG GET of one directive: its value. */
static void check_config(redisContext *c, const char *name, const char *want)
{
    redisReply *r = it_cmd(c, "CONFIG GET %s", name);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "CONFIG GET %s", name);
    cr_assert_str_eq(r->element[1]->str, want, "CONFIG GET %s", name);
    freeReplyObject(r);
}

/* busy-poll-us (busypoll.h): with a CPU to spare, a thread kept busy by 50 clients polls without
 * sleeping, an idle daemon sleeps (a spin left running would burn a whole CPU second per second
 * here), and busy-poll-us 0 turns it off at run time. */
Test(bench, busy_poll_spins_only_under_load)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "1"));
    redisContext *c = it_connect(d->port);
    check_config(c, "busy-poll-us", "50");
    /* Pipelined, so that the server rather than redis-benchmark is the busy side even when
     * other tests share the machine's CPUs. */
    char *out =
        bench(d->port, "-c 50 -P 16 -r 100000 -n 400000 CL.THROTTLE k:__rand_int__ 15 30 60");
    free(out);
    long long spins = it_info_int(c, "stats", "busy_poll_spins");
    cpu_set_t cpus;
    cr_assert_eq(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
    if (CPU_COUNT(&cpus) < 2) {
        /* One I/O thread and no CPU to spare: busy polling stays off (thread_cpu.c). */
        cr_assert_eq(spins, 0, "spun on a single CPU");
        redisFree(c);
        it_stop(d);
        return;
    }
    cr_assert_gt(spins, 0, "a thread answering 50 pipelining clients never polled busily");

    /* Idle now: the daemon may use a little CPU for its cron, not a spin's whole CPU. Measured
     * against the wall time that actually passed (a loaded machine sleeps longer than asked). */
    long long t0 = it_now_ms(), before = cpu_ms(d->pid);
    usleep(1000 * 1000);
    long long used = cpu_ms(d->pid) - before, wall = it_now_ms() - t0;
    cr_assert_lt(used * 10, wall * 3, "the idle daemon used %lld ms of CPU in %lld ms", used, wall);

    /* Counted after CONFIG SET: the turn that answered an INFO may itself start a spin. */
    IT_STATUS(it_cmd(c, "CONFIG SET busy-poll-us 0"), "OK");
    spins = it_info_int(c, "stats", "busy_poll_spins");
    out = bench(d->port, "-c 50 -P 16 -r 100000 -n 400000 CL.THROTTLE k:__rand_int__ 15 30 60");
    free(out);
    cr_assert_eq(it_info_int(c, "stats", "busy_poll_spins"), spins, "busy-poll-us 0 still spun");

    /* And back on: the same load spins again. */
    IT_STATUS(it_cmd(c, "CONFIG SET busy-poll-us 50"), "OK");
    out = bench(d->port, "-c 50 -P 16 -r 100000 -n 400000 CL.THROTTLE k:__rand_int__ 15 30 60");
    free(out);
    cr_assert_gt(it_info_int(c, "stats", "busy_poll_spins"), spins,
                 "busy-poll-us 50 again: no spin");
    IT_STATUS(it_cmd(c, "CONFIG SET busy-poll-us 0"), "OK");

    IT_ERR_LIKE(it_cmd(c, "CONFIG SET busy-poll-us 10001"), "ERR", "busy-poll-us");
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET busy-poll-us -1"), "ERR", "busy-poll-us");
    check_config(c, "busy-poll-us", "0");
    redisFree(c);
    it_stop(d);
}
