/* test_module.c - what only rlimit.so has, on Debian's real redis-server (issue 6): state that
 * survives RDB and AOF restarts exactly, replicas that hold the primary's bytes (effects are
 * replicated, not commands), internal commands that validate like user input, load arguments,
 * and hostile input that must never crash the host server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <criterion/criterion.h>

#include "../integration/harness.h"
#include "redis_harness.h"

TestSuite(module, .fini = rs_fini, .timeout = 180);

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* Whole-dataset digest: every key, value and expiry (DEBUG DIGEST). */
static char *digest(redisContext *c)
{
    redisReply *r = it_cmd(c, "DEBUG DIGEST");
    cr_assert(r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING, "DEBUG DIGEST: %s",
              r->str);
    char *d = strdup(r->str);
    freeReplyObject(r);
    cr_assert(strcmp(d, "0000000000000000000000000000000000000000") != 0, "empty dataset");
    return d;
}

static void run_pipeline(redisContext *c, int n, const char *cmd)
{
    for (int i = 0; i < n; i++)
        cr_assert(redisAppendCommand(c, cmd) == REDIS_OK);
    for (int i = 0; i < n; i++) {
        void *r = NULL;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "%s: %s", cmd, c->errstr);
        cr_assert(((redisReply *)r)->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
                  ((redisReply *)r)->str);
        freeReplyObject(r);
    }
}

/* A mix of state: GCRA keys, small logs, and one log of 1,001 timestamps. */
static void traffic(redisContext *c)
{
    char cmd[128];
    for (int i = 0; i < 50; i++) {
        snprintf(cmd, sizeof cmd, "CL.THROTTLE g%d 15 30 3600 %d", i, 1 + i % 3);
        run_pipeline(c, 1 + i % 4, cmd);
        snprintf(cmd, sizeof cmd, "GCRA r%d 15 30 3600 TOKENS %d", i, 1 + i % 4);
        run_pipeline(c, 1 + i % 3, cmd);
        snprintf(cmd, sizeof cmd, "ISALLOWED u%d act 3600 %d", i, i % 5);
        run_pipeline(c, 1 + i % 7, cmd);
    }
    run_pipeline(c, 1500, "ISALLOWED big act 3600 1000");
}

Test(module, rdb_save_and_restart_keep_state_exactly)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    traffic(c);
    char *before = digest(c);
    /* DEBUG RELOAD saves an RDB and loads it back in place. */
    IT_STATUS(it_cmd(c, "DEBUG RELOAD"), "OK");
    char *reloaded = digest(c);
    cr_assert_str_eq(reloaded, before, "DEBUG RELOAD changed the dataset");
    /* And a real restart from the file on disk. */
    IT_STATUS(it_cmd(c, "SAVE"), "OK");
    redisFree(c);
    rs_shutdown(s);
    rs_restart(s, NULL, NULL);
    c = it_connect(s->port);
    char *restarted = digest(c);
    cr_assert_str_eq(restarted, before, "restart from the RDB changed the dataset");
    /* The restored state keeps deciding: u4 (max_count 4) was called 5 times, so it is full. */
    IT_INT(it_cmd(c, "ISALLOWED u4 act 3600 4"), 0);
    free(before);
    free(reloaded);
    free(restarted);
    redisFree(c);
    rs_stop(s);
}

static void wait_no_rewrite(redisContext *c)
{
    long long deadline = it_now_ms() + 20000;
    while (it_info_int(c, "persistence", "aof_rewrite_in_progress") != 0 ||
           it_info_int(c, "persistence", "aof_rewrite_scheduled") != 0) {
        cr_assert(it_now_ms() < deadline, "AOF rewrite did not finish");
        it_sleep_ms(20);
    }
}

Test(module, aof_replays_effects_to_the_same_state)
{
    /* No RDB preamble: the rewrite goes through the module's aof_rewrite callbacks. */
    const char *const aof[] = {"--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                               "--appendfsync", "always", NULL};
    struct rs_server *s = rs_start(NULL, aof);
    redisContext *c = it_connect(s->port);
    traffic(c);
    IT_STATUS(it_cmd(c, "BGREWRITEAOF"), "Background append only file rewriting started");
    wait_no_rewrite(c);
    /* More traffic after the rewrite lands in the incremental file as effects. */
    traffic(c);
    char *before = digest(c);
    redisFree(c);
    rs_shutdown(s);

    /* Effects, not commands: the AOF holds GCRA state as SET ... PXAT, window logs as RLIMIT.*
     * and never the deciding commands. */
    char *out;
    int st = it_run(&out, "cat '%s'/appendonlydir/*.aof | tr -d '\\r' | grep -c -x -i "
                          "-e RLIMIT.LOGPUSH -e RLIMIT.LOGSET",
                    s->dir);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && atoi(out) > 100,
              "AOF lacks RLIMIT effects: %s", out);
    free(out);
    st = it_run(&out, "cat '%s'/appendonlydir/*.aof | tr -d '\\r' | grep -c -x -i PXAT",
                s->dir);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && atoi(out) > 100,
              "AOF lacks GCRA state as SET ... PXAT: %s", out);
    free(out);
    st = it_run(&out, "cat '%s'/appendonlydir/*.aof | tr -d '\\r' | grep -c -x -i "
                      "-e CL.THROTTLE -e ISALLOWED -e GCRA",
                s->dir);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "AOF holds commands: %s", out);
    free(out);

    rs_restart(s, NULL, aof);
    c = it_connect(s->port);
    char *after = digest(c);
    cr_assert_str_eq(after, before, "AOF replay changed the dataset");
    free(before);
    free(after);
    redisFree(c);
    rs_stop(s);
}

static void wait_link_up(redisContext *replica)
{
    long long deadline = it_now_ms() + 20000;
    for (;;) {
        redisReply *r = it_cmd(replica, "INFO replication");
        int up = strstr(r->str, "master_link_status:up") != NULL;
        freeReplyObject(r);
        if (up)
            return;
        cr_assert(it_now_ms() < deadline, "replica did not connect");
        it_sleep_ms(50);
    }
}

Test(module, replica_holds_the_primary_state_exactly)
{
    /* No replication pings during the test, so the offset moves only for real writes. */
    const char *const primary_args[] = {"--repl-diskless-sync-delay", "0",
                                        "--repl-ping-replica-period", "60", NULL};
    struct rs_server *p = rs_start(NULL, primary_args);
    struct rs_server *r = rs_start(NULL, NULL);
    redisContext *pc = it_connect(p->port);
    redisContext *rc = it_connect(r->port);
    IT_STATUS(it_cmd(rc, "REPLICAOF 127.0.0.1 %d", p->port), "OK");
    wait_link_up(rc);
    traffic(pc);
    IT_INT(it_cmd(pc, "WAIT 1 10000"), 1);
    char *pd = digest(pc), *rd = digest(rc);
    cr_assert_str_eq(rd, pd, "replica diverged from its primary");
    free(pd);
    free(rd);

    /* Limited calls and peeks store nothing, so they propagate nothing. */
    /* lim's replies are checked against the GCRA model; the exact ones while under a second. */
    struct it_limit lim;
    it_limit_init(&lim);
    IT_THROTTLE(pc, &lim, "lim", 0, 1, 3600, 1, 0, 1, 0, -1, 3600);
    IT_INT(it_cmd(pc, "WAIT 1 10000"), 1);
    long long off = it_info_int(pc, "replication", "master_repl_offset");
    IT_THROTTLE(pc, &lim, "lim", 0, 1, 3600, 1, 1, 1, 0, 3600, 3600);
    IT_THROTTLE(pc, &lim, "lim", 0, 1, 3600, 0, 0, 1, 0, -1, 3600);
    IT_INTS(it_cmd(pc, "CL.THROTTLE fresh 5 1 60 0"), 0, 6, 6, -1, 0);
    cr_assert_eq(it_info_int(pc, "replication", "master_repl_offset"), off,
                 "a limited call or a peek was propagated");
    /* An allowed call is, as an effect. */
    IT_INTS(it_cmd(pc, "CL.THROTTLE lim2 0 1 3600"), 0, 1, 0, -1, 3600);
    cr_assert_gt(it_info_int(pc, "replication", "master_repl_offset"), off);
    IT_INT(it_cmd(pc, "WAIT 1 10000"), 1);
    pd = digest(pc);
    rd = digest(rc);
    cr_assert_str_eq(rd, pd, "replica diverged after the limited calls");
    /* The replica refuses writes of its own (Redis's read-only replica). */
    IT_ERR_LIKE(it_cmd(rc, "CL.THROTTLE x 1 1 1"), "READONLY", NULL);
    free(pd);
    free(rd);
    redisFree(pc);
    redisFree(rc);
    rs_stop(r);
    rs_stop(p);
}

/* Packs ascending ms timestamps as RLIMIT.LOGSET wants them (little-endian int64). */
static size_t pack(char *buf, const long long *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            buf[i * 8 + (size_t)b] = (char)((unsigned long long)ts[i] >> (8 * b));
    return n * 8;
}

static redisReply *logset(redisContext *c, const char *key, const char *blob, size_t len)
{
    const char *argv[] = {"RLIMIT.LOGSET", key, blob};
    size_t lens[] = {13, strlen(key), len};
    redisReply *r = redisCommandArgv(c, 3, argv, lens);
    cr_assert(r != NULL, "%s", c->errstr);
    return r;
}

Test(module, internal_commands_validate_like_user_input)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    const char *notint = "ERR value is not an integer or out of range";
    IT_ERR(it_cmd(c, "RLIMIT.SETTAT k"), "ERR wrong number of arguments for 'rlimit.settat' command");
    IT_ERR(it_cmd(c, "RLIMIT.SETTAT k abc"), notint);
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.SETTAT k 0"), "ERR invalid tat", NULL);
    IT_ERR(it_cmd(c, "RLIMIT.LOGPUSH k 1 2 3"),
           "ERR wrong number of arguments for 'rlimit.logpush' command");
    IT_ERR(it_cmd(c, "RLIMIT.LOGPUSH k x 1 1 1"), notint);
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.LOGPUSH k 0 -1 1 1000"), "ERR invalid keep", NULL);
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.LOGPUSH k 0 4294967294 1 1000"), "ERR invalid keep", NULL);
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.LOGPUSH k 0 1 -1 1000"), "ERR invalid ts", NULL);
    /* A timestamp so late that adding the period would overflow. */
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.LOGPUSH k 0 1 9223372036855 1000"), "ERR invalid ts", NULL);
    IT_ERR_LIKE(it_cmd(c, "RLIMIT.LOGPUSH k 0 1 1 0"), "ERR invalid period_ms", NULL);
    char blob[64];
    long long desc[] = {2000, 1000};
    IT_ERR_LIKE(logset(c, "hist:{x}:a", blob, pack(blob, desc, 2)), "ERR", "ascending");
    long long neg[] = {-5};
    IT_ERR_LIKE(logset(c, "hist:{x}:a", blob, pack(blob, neg, 1)), "ERR", "ascending");
    long long late[] = {1000, 9223372036855LL};
    IT_ERR_LIKE(logset(c, "hist:{x}:a", blob, pack(blob, late, 2)), "ERR", "between 0 and");
    IT_ERR_LIKE(logset(c, "hist:{x}:a", "1234567", 7), "ERR", "8-byte");
    IT_ERR_LIKE(logset(c, "hist:{x}:a", "", 0), "ERR", "8-byte");
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    /* Wrong types are refused, never overwritten. */
    IT_STATUS(it_cmd(c, "SET str v"), "OK");
    IT_ERR(it_cmd(c, "RLIMIT.SETTAT str 5"), WRONGTYPE);
    IT_ERR(it_cmd(c, "RLIMIT.LOGPUSH str 0 1 1 1000"), WRONGTYPE);
    long long one[] = {1};
    IT_ERR(logset(c, "str", blob, pack(blob, one, 1)), WRONGTYPE);
    IT_BULK(it_cmd(c, "GET str"), "v");

    /* A valid log set by LOGSET decides like one built by ISALLOWED: two attempts in the window
     * and max_count 2, so the third is denied. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    long long two[] = {now - 2000, now - 1000};
    IT_STATUS(logset(c, "hist:{x}:a", blob, pack(blob, two, 2)), "OK");
    IT_INT(it_cmd(c, "ISALLOWED x a 60 2"), 0);
    /* Replacing a log keeps the key's expiry (setting a module value alone would clear it). */
    IT_STATUS(logset(c, "hist:{x}:a", blob, pack(blob, two, 2)), "OK");
    long long pttl = it_int(it_cmd(c, "PTTL hist:{x}:a"));
    cr_assert(pttl > 50000 && pttl <= 60000, "PTTL after RLIMIT.LOGSET: %lld", pttl);
    /* RLIMIT.SETTAT makes GCRA state that CL.THROTTLE reads: a TAT 32 s ahead is a full bucket
     * for the worked example's limits. */
    long long tat = ((long long)ts.tv_sec + 40) * 1000000000LL;
    IT_STATUS(it_cmd(c, "RLIMIT.SETTAT g %lld", tat), "OK");
    redisReply *r = it_cmd(c, "CL.THROTTLE g 15 30 60");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1,
              "a full bucket set by RLIMIT.SETTAT was not limited");
    freeReplyObject(r);
    redisFree(c);
    rs_stop(s);
}

Test(module, hostile_input_never_crashes_the_server)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    IT_INT(it_cmd(c, "LPUSH l a"), 1);
    IT_ERR(it_cmd(c, "CL.THROTTLE l 15 30 60"), WRONGTYPE);
    IT_INT(it_cmd(c, "HSET hist:{h}:a f v"), 1);
    IT_ERR(it_cmd(c, "ISALLOWED h a 60 5"), WRONGTYPE);
    IT_INT(it_cmd(c, "SADD hist:{s}:a m"), 1);
    IT_ERR(it_cmd(c, "ISALLOWED s a 60 5"), WRONGTYPE);
    IT_INT(it_cmd(c, "ZADD z 1 m"), 1);
    IT_ERR(it_cmd(c, "CL.THROTTLE z 15 30 60"), WRONGTYPE);
    /* Non-UTF-8 bytes everywhere (redis-cell aborts Redis on these). */
    const char *argv[] = {"CL.THROTTLE", "\xff\xfe\x00k", "\xc3\x28", "\xa0\xa1", "\xf0\x28\x8c\x28"};
    size_t lens[] = {11, 4, 2, 2, 4};
    redisReply *r = redisCommandArgv(c, 5, argv, lens);
    IT_ERR(r, "ERR value is not an integer or out of range");
    const char *argv2[] = {"ISALLOWED", "\xff\x00", "\x80\x81", "60", "3"};
    size_t lens2[] = {9, 2, 2, 2, 1};
    r = redisCommandArgv(c, 5, argv2, lens2);
    IT_INT(r, 1);
    /* Huge and negative numbers at every position. */
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k 9223372036854775807 9223372036854775807 "
                          "9223372036854775807 9223372036854775807"),
                "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "CL.THROTTLE k -9223372036854775808 1 1"), "ERR", "max_burst");
    IT_ERR_LIKE(it_cmd(c, "ISALLOWED u a 9223372036854775807 1"), "ERR", "period");
    /* The bound on kept attempts holds: 100,000 attempts under max_count 2 keep 3 timestamps. */
    run_pipeline(c, 100000, "ISALLOWED m a 60 2");
    long long mem = it_int(it_cmd(c, "MEMORY USAGE hist:{m}:a"));
    cr_assert(mem > 0 && mem < 200, "MEMORY USAGE of a 3-timestamp log: %lld", mem);
    /* Still serving, state intact. */
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_BULK(it_cmd(c, "LINDEX l 0"), "a");
    redisFree(c);
    rs_stop(s);
}

Test(module, load_arguments)
{
    struct rs_server *s = rs_start("window-max-count 100", NULL);
    redisContext *c = it_connect(s->port);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 101"),
           "ERR invalid max_count: must be between 0 and 100 (window-max-count)");
    IT_INT(it_cmd(c, "ISALLOWED u a 60 100"), 1);
    redisFree(c);
    rs_stop(s);

    static const char *const bad[] = {"bogus 1", "window-max-count", "window-max-count 0",
                                      "window-max-count 100000001", "window-max-count x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct rs_server *failed = NULL;
        cr_assert_null(rs_try_start(bad[i], NULL, &failed), "loaded with \"%s\"", bad[i]);
        char *log = it_read_file(failed->log);
        cr_assert(strstr(log, "bad load argument") != NULL, "\"%s\": log lacks the reason:\n%s",
                  bad[i], log);
        free(log);
        rs_stop(failed);
    }
}

/* GCRA is the module's only where the server has no GCRA: a server that has one (Redis's own, or
 * here GET renamed to GCRA, which Debian's 7.0 lets us stage) keeps it. */
Test(module, gcra_registered_only_where_the_server_has_none)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    redisReply *r = it_cmd(c, "COMMAND INFO gcra");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              r->element[0]->type == REDIS_REPLY_ARRAY);
    cr_expect_eq(r->element[0]->element[1]->integer, -5, "GCRA's arity");
    freeReplyObject(r);
    IT_INTS(it_cmd(c, "GCRA k 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    rs_stop(s);

    s = rs_start(NULL, IT_ARGS("--rename-command", "GET", "GCRA"));
    c = it_connect(s->port);
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    IT_BULK(it_cmd(c, "GCRA k"), "v");
    IT_INTS(it_cmd(c, "CL.THROTTLE t 15 30 60"), 0, 16, 15, -1, 2);
    char *log = it_read_file(s->log);
    cr_expect(strstr(log, "has its own GCRA command") != NULL, "log lacks the notice:\n%s", log);
    free(log);
    redisFree(c);
    rs_stop(s);
}

Test(module, a_second_load_is_refused_and_the_first_keeps_working)
{
    const char *const extra[] = {"--enable-module-command", "yes", NULL};
    struct rs_server *s = rs_start(NULL, extra);
    redisContext *c = it_connect(s->port);
    IT_INTS(it_cmd(c, "CL.THROTTLE a 15 30 60"), 0, 16, 15, -1, 2);
    IT_ERR_LIKE(it_cmd(c, "MODULE LOAD %s window-max-count 5", getenv("RLIMIT_MODULE")), "ERR",
                NULL);
    /* Nothing of the refused load took effect: the ceiling, the types, the state. */
    IT_INT(it_cmd(c, "ISALLOWED u a 60 6"), 1);
    IT_INTS(it_cmd(c, "CL.THROTTLE a 15 30 60"), 0, 16, 14, -1, 4);
    IT_INTS(it_cmd(c, "CL.THROTTLE b 15 30 60"), 0, 16, 15, -1, 2);
    IT_STATUS(it_cmd(c, "TYPE b"), "string");
    IT_STATUS(it_cmd(c, "TYPE hist:{u}:a"), "rlim-wlog");
    IT_STATUS(it_cmd(c, "SAVE"), "OK");
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    rs_stop(s);
}

/* Redis's DUMP checksum: CRC-64/Jones (reflected polynomial 0x95ac9329ac4bc9b5, init 0). */
static unsigned long long crc64(const unsigned char *p, size_t n)
{
    unsigned long long crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = crc & 1 ? (crc >> 1) ^ 0x95ac9329ac4bc9b5ULL : crc >> 1;
    }
    return crc;
}

/* Redis's module type id: the 9-character name, 6 bits a character, then the 10-bit encoding
 * version (what RDB and DUMP payloads name a module type by). */
static unsigned long long module_type_id(const char *name, int encver)
{
    const char *set = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned long long id = 0;
    for (int i = 0; i < 9; i++)
        id = id << 6 | (unsigned long long)(strchr(set, name[i]) - set);
    return id << 10 | (unsigned long long)encver;
}

/* Appends Redis's 64-bit length encoding (0x81 and 8 bytes big-endian). */
static size_t put_len64(unsigned char *p, unsigned long long v)
{
    p[0] = 0x81;
    for (int b = 0; b < 8; b++)
        p[1 + b] = (unsigned char)(v >> (8 * (7 - b)));
    return 9;
}

/* Ends a DUMP payload: RDB version 10 (Redis 7.0) and the checksum of everything before. */
static size_t seal_dump(unsigned char *buf, size_t n)
{
    buf[n++] = 10;
    buf[n++] = 0;
    unsigned long long crc = crc64(buf, n);
    for (int b = 0; b < 8; b++)
        buf[n++] = (unsigned char)(crc >> (8 * b));
    return n;
}

Test(module, a_corrupt_restore_payload_is_an_error_not_a_crash)
{
    cr_assert_eq(crc64((const unsigned char *)"123456789", 9), 0xe9c6d914c4b8d9caULL,
                 "crc64 check value");
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    redisReply *d = it_cmd(c, "DUMP hist:{u}:a");
    cr_assert(d->type == REDIS_REPLY_STRING && d->len > 20, "DUMP hist:{u}:a");
    unsigned char buf[256];
    size_t n = d->len;
    cr_assert(n <= sizeof buf);
    memcpy(buf, d->str, n);
    freeReplyObject(d);
    /* The valid payload restores. */
    redisReply *r = redisCommand(c, "RESTORE hist:{v}:a 0 %b", buf, n);
    IT_STATUS(r, "OK");
    /* Corrupt the value's first opcode (after the type byte and the 64-bit module id: the
     * log's "string" marker becomes "unsigned") and fix the checksum, so only the module's
     * loader can tell. Without I/O-error handling Redis would panic here. */
    cr_assert(buf[0] == 7 && buf[1] == 0x81 && buf[10] == 5, "unexpected DUMP layout");
    buf[10] = 2;
    n = seal_dump(buf, n - 10);
    r = redisCommand(c, "RESTORE hist:{w}:a 0 %b", buf, n);
    cr_assert(r != NULL, "the server went away: %s", c->errstr);
    IT_ERR_LIKE(r, "ERR", NULL);
    IT_INT(it_cmd(c, "EXISTS hist:{w}:a"), 0);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_INT(it_cmd(c, "ISALLOWED v a 60 5"), 1);
    redisFree(c);
    rs_stop(s);
}

/* GCRA state of the earlier rlim-gcra type (an RDB or a DUMP from before it became a string)
 * still loads, decides, and becomes a string at its next write. */
Test(module, earlier_rlim_gcra_values_still_load)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* A TAT 32 s ahead: the worked example's bucket is empty. */
    long long tat = ((long long)ts.tv_sec + 32) * 1000000000LL;
    unsigned char buf[64];
    size_t n = 0;
    buf[n++] = 7; /* a module value */
    n += put_len64(buf + n, module_type_id("rlim-gcra", 0));
    buf[n++] = 2; /* an unsigned integer: the TAT */
    n += put_len64(buf + n, (unsigned long long)tat);
    buf[n++] = 0; /* end of the value */
    n = seal_dump(buf, n);
    IT_STATUS(redisCommand(c, "RESTORE old 0 %b", buf, n), "OK");
    IT_STATUS(it_cmd(c, "TYPE old"), "rlim-gcra");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 1);
    redisReply *r = it_cmd(c, "CL.THROTTLE old 15 30 60");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1,
              "the restored full bucket was not limited");
    freeReplyObject(r);
    /* A GCRA call that fits (a bigger burst) writes it back as a string. */
    IT_INTS(it_cmd(c, "GCRA old 31 30 60"), 0, 32, 15, -1, 34);
    IT_STATUS(it_cmd(c, "TYPE old"), "string");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 0);
    redisFree(c);
    rs_stop(s);
}

/* INFO rlimit and RLIMIT.TOP (docs/COMMANDS.md "Observability"): the daemon's figures and
 * reply shapes inside Redis. Every period is an hour, so nothing refills during the test. */
Test(module, info_rlimit_and_top)
{
    struct rs_server *s = rs_start("limiter-top-size 10", NULL);
    redisContext *c = it_connect(s->port);
    /* t (limit 5) 8 times: 5 allowed, 3 limited, 1 near; ISALLOWED max 10, 12 times: 10
     * allowed, 2 denied, 2 near; w (limit 1) twice: 1 allowed and near, 1 limited. */
    run_pipeline(c, 8, "CL.THROTTLE t 4 1 3600");
    run_pipeline(c, 12, "ISALLOWED u act 3600 10");
    run_pipeline(c, 2, "CL.THROTTLE w 0 1 3600");
    IT_ERR(it_cmd(c, "CL.THROTTLE t -1 1 3600"), "ERR invalid max_burst: must be >= 0");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_throttle_allowed"), 6);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_throttle_limited"), 4);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_gcra_allowed"), 0);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_gcra_limited"), 0);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_isallowed_allowed"), 10);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_isallowed_denied"), 2);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_near_limit"), 4);
    /* The module's own values: the window log (GCRA state is a Redis string). */
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 1);

    redisReply *r = it_cmd(c, "RLIMIT.TOP");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3, "RLIMIT.TOP: %zu", r->elements);
    const char *want[3] = {"t", "hist:{u}:act", "w"};
    const long long n[3] = {3, 2, 1};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r->element[i]->elements, 2);
        cr_expect_str_eq(r->element[i]->element[0]->str, want[i]);
        cr_expect_eq(r->element[i]->element[1]->integer, n[i]);
    }
    freeReplyObject(r);
    r = it_cmd(c, "RLIMIT.TOP COUNT 1");
    cr_expect_eq(r->elements, 1);
    freeReplyObject(r);
    IT_ERR(it_cmd(c, "RLIMIT.TOP COUNT 0"), "ERR COUNT must be between 1 and 1000");
    IT_ERR(it_cmd(c, "RLIMIT.TOP COUNT 1001"), "ERR COUNT must be between 1 and 1000");
    IT_ERR(it_cmd(c, "RLIMIT.TOP COUNT x"), "ERR value is not an integer or out of range");
    IT_ERR(it_cmd(c, "RLIMIT.TOP LIMIT 1"), "ERR syntax error");

    /* limiter_keys follows the keys: deletion, expiry-free overwrite, restart from RDB. */
    IT_INT(it_cmd(c, "ISALLOWED v act 3600 10"), 1);
    IT_INT(it_cmd(c, "ISALLOWED w act 3600 10"), 1);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 3);
    IT_INT(it_cmd(c, "DEL hist:{w}:act"), 1);
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 2);
    IT_STATUS(it_cmd(c, "SET hist:{v}:act x"), "OK");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 1);
    IT_STATUS(it_cmd(c, "DEBUG RELOAD"), "OK");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 1);
    IT_STATUS(it_cmd(c, "FLUSHALL"), "OK");
    cr_expect_eq(it_info_int(c, "rlimit", "rlimit_limiter_keys"), 0);
    /* The sketch is bounded: 30 keys limited once into 10 counters. */
    for (int i = 0; i < 30; i++) {
        freeReplyObject(it_cmd(c, "CL.THROTTLE k%d 0 1 3600", i));
        freeReplyObject(it_cmd(c, "CL.THROTTLE k%d 0 1 3600", i));
    }
    r = it_cmd(c, "RLIMIT.TOP COUNT 1000");
    cr_expect_eq(r->elements, 10);
    freeReplyObject(r);
    redisFree(c);
    rs_stop(s);

    struct rs_server *failed = NULL;
    cr_assert_null(rs_try_start("limiter-top-size 9", NULL, &failed));
    rs_stop(failed);
}
