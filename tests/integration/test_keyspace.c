/* test_keyspace.c - the keyspace and string commands (COMMANDS.md): SET/GET, counters, expiry
 * options, TYPE, multi-key commands, SCAN, MULTI/EXEC. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(keyspace, .fini = it_fini, .timeout = 180);

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define NOTINT "ERR value is not an integer or out of range"

static long long ttl_of(redisContext *c, const char *cmd, const char *key)
{
    return it_int(it_cmd(c, "%s %s", cmd, key));
}

/* `cmd key` (TTL in s or PTTL in ms) must show an expiry of `set` units made by a command sent
 * at since_ms (it_now_ms() just before it): at most `set`, and at least `set` minus the time
 * measured since then, however slow the machine. */
static void check_ttl(redisContext *c, const char *cmd, const char *key, long long set,
                      long long since_ms, const char *what)
{
    long long t = ttl_of(c, cmd, key);
    long long elapsed = it_now_ms() - since_ms + 1;
    long long lo = cmd[0] == 'P' ? set - elapsed : (set * 1000 - elapsed) / 1000;
    cr_assert(t >= lo && t <= set, "%s %s %s: %lld, want [%lld, %lld] (%lld ms since it was set)",
              what, cmd, key, t, lo, set, elapsed);
}

Test(keyspace, set_and_get)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_NIL(it_cmd(c, "GET k"));
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    IT_BULK(it_cmd(c, "GET k"), "v");
    IT_STATUS(it_cmd(c, "SET k %s", "a longer value with spaces"), "OK");
    IT_BULK(it_cmd(c, "GET k"), "a longer value with spaces");
    IT_STATUS(it_cmd(c, "SET empty %s", ""), "OK");
    IT_BULK(it_cmd(c, "GET empty"), "");
    /* Binary-safe keys and values. */
    const char *argv[] = {"SET", "b\0k", "v\0\r\n1"};
    size_t lens[] = {3, 3, 5};
    redisReply *r = redisCommandArgv(c, 3, argv, lens);
    cr_assert(r != NULL);
    IT_STATUS(r, "OK");
    const char *gargv[] = {"GET", "b\0k"};
    r = redisCommandArgv(c, 2, gargv, lens);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && r->len == 5 &&
              memcmp(r->str, "v\0\r\n1", 5) == 0);
    freeReplyObject(r);
    IT_ERR(it_cmd(c, "GET"), "ERR wrong number of arguments for 'get' command");
    IT_ERR(it_cmd(c, "SET k"), "ERR wrong number of arguments for 'set' command");
    redisFree(c);
    it_stop(d);
}

Test(keyspace, set_options_ex_px_nx_xx)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET k v1 NX"), "OK");
    IT_NIL(it_cmd(c, "SET k v2 NX"));
    IT_BULK(it_cmd(c, "GET k"), "v1");
    IT_NIL(it_cmd(c, "SET absent v XX"));
    IT_INT(it_cmd(c, "EXISTS absent"), 0);
    IT_STATUS(it_cmd(c, "SET k v3 XX"), "OK");
    IT_BULK(it_cmd(c, "GET k"), "v3");
    IT_INT(it_cmd(c, "TTL k"), -1);

    long long since = it_now_ms();
    IT_STATUS(it_cmd(c, "SET e v EX 100"), "OK");
    check_ttl(c, "TTL", "e", 100, since, "after EX 100");
    since = it_now_ms();
    IT_STATUS(it_cmd(c, "SET p v PX 5000"), "OK");
    check_ttl(c, "PTTL", "p", 5000, since, "after PX 5000");
    /* Long enough that p2 cannot expire before the NX and XX below, however slow. */
    IT_STATUS(it_cmd(c, "set p2 v px 500000 nx"), "OK");
    IT_NIL(it_cmd(c, "SET p2 v PX 500000 NX"));
    since = it_now_ms();
    IT_STATUS(it_cmd(c, "SET p2 v2 EX 50 XX"), "OK");
    check_ttl(c, "TTL", "p2", 50, since, "after EX 50 XX");
    /* A plain SET discards the old TTL, as in Redis. */
    IT_STATUS(it_cmd(c, "SET e v"), "OK");
    IT_INT(it_cmd(c, "TTL e"), -1);

    /* Bad option combinations and values are errors and change nothing. */
    IT_ERR_LIKE(it_cmd(c, "SET k x NX XX"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x EX 10 PX 100"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x EX 0"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x EX -5"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x PX abc"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x EX"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SET k x BOGUS"), "ERR", NULL);
    IT_BULK(it_cmd(c, "GET k"), "v3");
    IT_INT(it_cmd(c, "TTL k"), -1);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, incr_decr_family)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_INT(it_cmd(c, "INCR n"), 2);
    IT_INT(it_cmd(c, "INCRBY n 10"), 12);
    IT_INT(it_cmd(c, "DECR n"), 11);
    IT_INT(it_cmd(c, "DECRBY n 15"), -4);
    IT_INT(it_cmd(c, "INCRBY n -6"), -10);
    IT_INT(it_cmd(c, "DECRBY n -3"), -7);
    IT_BULK(it_cmd(c, "GET n"), "-7");
    IT_INT(it_cmd(c, "DECR fresh"), -1);
    IT_INT(it_cmd(c, "INCRBY fresh2 5"), 5);
    /* A string that holds an integer is a counter. */
    IT_STATUS(it_cmd(c, "SET s 41"), "OK");
    IT_INT(it_cmd(c, "INCR s"), 42);
    IT_BULK(it_cmd(c, "GET s"), "42");
    /* INCR keeps the TTL: the fixed-window recipe depends on it. */
    long long since = it_now_ms();
    IT_STATUS(it_cmd(c, "SET w 5 EX 100"), "OK");
    IT_INT(it_cmd(c, "INCR w"), 6);
    check_ttl(c, "TTL", "w", 100, since, "after INCR");
    IT_ERR(it_cmd(c, "INCR"), "ERR wrong number of arguments for 'incr' command");
    IT_ERR(it_cmd(c, "INCRBY n"), "ERR wrong number of arguments for 'incrby' command");
    redisFree(c);
    it_stop(d);
}

Test(keyspace, incr_on_non_integer_string)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET s abc"), "OK");
    IT_ERR(it_cmd(c, "INCR s"), NOTINT);
    IT_ERR(it_cmd(c, "DECR s"), NOTINT);
    IT_ERR(it_cmd(c, "INCRBY s 1"), NOTINT);
    IT_ERR(it_cmd(c, "DECRBY s 1"), NOTINT);
    IT_BULK(it_cmd(c, "GET s"), "abc");
    static const char *const bad[] = {"1.5", " 1", "1 ", "", "0x1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        IT_STATUS(it_cmd(c, "SET b %s", bad[i]), "OK");
        it_check_err(it_cmd(c, "INCR b"), NOTINT, bad[i], (int)i);
    }
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_ERR(it_cmd(c, "INCRBY n abc"), NOTINT);
    IT_ERR(it_cmd(c, "DECRBY n 1.0"), NOTINT);
    IT_ERR(it_cmd(c, "INCRBY n 99999999999999999999"), NOTINT);
    /* Overflow is an error and leaves the value alone. */
    IT_STATUS(it_cmd(c, "SET max 9223372036854775807"), "OK");
    IT_ERR_LIKE(it_cmd(c, "INCR max"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "INCRBY max 1"), "ERR", NULL);
    IT_BULK(it_cmd(c, "GET max"), "9223372036854775807");
    IT_STATUS(it_cmd(c, "SET min -9223372036854775808"), "OK");
    IT_ERR_LIKE(it_cmd(c, "DECR min"), "ERR", NULL);
    IT_BULK(it_cmd(c, "GET min"), "-9223372036854775808");
    /* Counters and window logs are different kinds of value. */
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    IT_ERR(it_cmd(c, "INCR hist:{u}:a"), WRONGTYPE);
    IT_ERR(it_cmd(c, "GET hist:{u}:a"), WRONGTYPE);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, expire_options_nx_xx_gt_lt)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "EXPIRE missing 10"), 0);
    IT_INT(it_cmd(c, "PEXPIRE missing 10"), 0);
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    /* No TTL yet: XX and GT fail (no TTL counts as infinite), LT and NX succeed. */
    IT_INT(it_cmd(c, "EXPIRE k 100 XX"), 0);
    IT_INT(it_cmd(c, "EXPIRE k 100 GT"), 0);
    IT_INT(it_cmd(c, "TTL k"), -1);
    long long since = it_now_ms();
    IT_INT(it_cmd(c, "EXPIRE k 100 LT"), 1);
    check_ttl(c, "TTL", "k", 100, since, "after LT 100");
    IT_INT(it_cmd(c, "EXPIRE k 200 NX"), 0);
    IT_INT(it_cmd(c, "EXPIRE k 200 LT"), 0);
    IT_INT(it_cmd(c, "EXPIRE k 50 GT"), 0);
    check_ttl(c, "TTL", "k", 100, since, "after refused changes");
    since = it_now_ms();
    IT_INT(it_cmd(c, "EXPIRE k 200 GT"), 1);
    check_ttl(c, "TTL", "k", 200, since, "after GT 200");
    since = it_now_ms();
    IT_INT(it_cmd(c, "EXPIRE k 300 XX"), 1);
    check_ttl(c, "TTL", "k", 300, since, "after XX 300");
    since = it_now_ms();
    IT_INT(it_cmd(c, "EXPIRE k 150 lt"), 1);
    check_ttl(c, "TTL", "k", 150, since, "after LT 150");
    /* PEXPIRE in the same way, long enough that k cannot expire meanwhile however slow. */
    since = it_now_ms();
    IT_INT(it_cmd(c, "PEXPIRE k 500000"), 1);
    check_ttl(c, "PTTL", "k", 500000, since, "after PEXPIRE 500000");
    IT_INT(it_cmd(c, "PEXPIRE k 900000 GT"), 1);
    IT_INT(it_cmd(c, "PEXPIRE k 100000 GT"), 0);
    IT_INT(it_cmd(c, "PEXPIRE k 100000 NX"), 0);
    since = it_now_ms();
    IT_INT(it_cmd(c, "PEXPIRE k 800000 XX"), 1);
    check_ttl(c, "PTTL", "k", 800000, since, "after PEXPIRE 800000 XX");
    /* Incompatible options and bad numbers. */
    IT_ERR_LIKE(it_cmd(c, "EXPIRE k 10 NX XX"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "EXPIRE k 10 GT LT"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "EXPIRE k 10 BOGUS"), "ERR", NULL);
    IT_ERR(it_cmd(c, "EXPIRE k ten"), NOTINT);
    IT_ERR(it_cmd(c, "PEXPIRE k 1.5"), NOTINT);
    IT_ERR(it_cmd(c, "EXPIRE k"), "ERR wrong number of arguments for 'expire' command");
    check_ttl(c, "PTTL", "k", 800000, since, "after refused EXPIREs");
    /* A TTL of zero or less deletes the key. */
    IT_INT(it_cmd(c, "EXPIRE k 0"), 1);
    IT_INT(it_cmd(c, "EXISTS k"), 0);
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    IT_INT(it_cmd(c, "PEXPIRE k -1"), 1);
    IT_NIL(it_cmd(c, "GET k"));
    redisFree(c);
    it_stop(d);
}

Test(keyspace, persist_ttl_pttl)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "TTL missing"), -2);
    IT_INT(it_cmd(c, "PTTL missing"), -2);
    IT_INT(it_cmd(c, "PERSIST missing"), 0);
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    IT_INT(it_cmd(c, "TTL k"), -1);
    IT_INT(it_cmd(c, "PTTL k"), -1);
    IT_INT(it_cmd(c, "PERSIST k"), 0);
    IT_INT(it_cmd(c, "EXPIRE k 100"), 1);
    IT_INT(it_cmd(c, "PERSIST k"), 1);
    IT_INT(it_cmd(c, "TTL k"), -1);
    IT_INT(it_cmd(c, "PERSIST k"), 0);
    IT_BULK(it_cmd(c, "GET k"), "v");
    /* PERSIST works on counters; after it the fixed window never resets. */
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_INT(it_cmd(c, "EXPIRE n 10"), 1);
    IT_INT(it_cmd(c, "PERSIST n"), 1);
    IT_INT(it_cmd(c, "PTTL n"), -1);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, type_of_each_kind)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "TYPE missing"), "none");
    IT_STATUS(it_cmd(c, "SET s v"), "OK");
    IT_STATUS(it_cmd(c, "TYPE s"), "string");
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_STATUS(it_cmd(c, "TYPE n"), "string");
    IT_INTS(it_cmd(c, "CL.THROTTLE g 15 30 60"), 0, 16, 15, -1, 2);
    IT_STATUS(it_cmd(c, "TYPE g"), "string");
    IT_INT(it_cmd(c, "ISALLOWED u a 60 10"), 1);
    IT_STATUS(it_cmd(c, "TYPE hist:{u}:a"), "zset");
    redisFree(c);
    it_stop(d);
}

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Parses a reply that must be a decimal integer string. */
static long long bulk_ll(redisReply *r)
{
    cr_assert(r->type == REDIS_REPLY_STRING, "want a bulk string, got type %d", r->type);
    cr_assert(r->len > 0 && r->len < 21, "bad length %zu", r->len);
    for (size_t i = 0; i < r->len; i++)
        cr_assert(r->str[i] >= '0' && r->str[i] <= '9', "not a decimal string: %s", r->str);
    errno = 0;
    long long v = strtoll(r->str, NULL, 10);
    cr_assert(errno == 0);
    freeReplyObject(r);
    return v;
}

Test(keyspace, get_on_gcra_state_returns_tat_ns)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    struct it_limit g;
    it_limit_init(&g);
    long long before = realtime_ns();
    IT_THROTTLE(c, &g, "g", 15, 30, 60, 1, 0, 16, 15, -1, 2);
    long long after = realtime_ns();
    /* EI = 2 s: the first call stores TAT = now + 2 s, read at some instant in [before, after]. */
    long long tat = bulk_ll(it_cmd(c, "GET g"));
    cr_assert(tat >= before + 2000000000LL && tat <= after + 2000000000LL,
              "TAT %lld not in [%lld, %lld]", tat, before + 2000000000LL, after + 2000000000LL);
    /* The next call moves it by exactly one emission interval. */
    IT_THROTTLE(c, &g, "g", 15, 30, 60, 1, 0, 16, 14, -1, 4);
    long long tat2 = bulk_ll(it_cmd(c, "GET g"));
    cr_assert(tat2 == tat + 2000000000LL, "TAT %lld after the second call, want %lld", tat2,
              tat + 2000000000LL);
    /* A limited call leaves it alone. */
    IT_THROTTLE(c, &g, "g", 15, 30, 60, 16, 1, 16, 14, 4, 4);
    long long tat3 = bulk_ll(it_cmd(c, "GET g"));
    cr_assert(tat3 == tat2, "TAT changed by a limited call: %lld -> %lld", tat2, tat3);
    /* The key expires at its TAT, known exactly from GET: PTTL is TAT - now in whole ms
     * (rounded either way). */
    before = realtime_ns();
    long long pttl = it_int(it_cmd(c, "PTTL g"));
    after = realtime_ns();
    cr_assert(pttl >= (tat2 - after) / 1000000 - 1 && pttl <= (tat2 - before) / 1000000 + 1,
              "PTTL %lld, want TAT - now: [%lld, %lld]", pttl, (tat2 - after) / 1000000 - 1,
              (tat2 - before) / 1000000 + 1);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, exists_del_unlink_multi_key)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET a 1"), "OK");
    IT_STATUS(it_cmd(c, "SET b 2"), "OK");
    IT_INT(it_cmd(c, "INCR c"), 1);
    IT_INTS(it_cmd(c, "CL.THROTTLE g 15 30 60"), 0, 16, 15, -1, 2);
    IT_INT(it_cmd(c, "ISALLOWED u x 60 10"), 1);
    IT_INT(it_cmd(c, "EXISTS a b c d"), 3);
    IT_INT(it_cmd(c, "EXISTS a a a"), 3);
    IT_INT(it_cmd(c, "EXISTS g hist:{u}:x"), 2);
    IT_INT(it_cmd(c, "DBSIZE"), 5);
    IT_INT(it_cmd(c, "DEL a d a"), 1);
    IT_INT(it_cmd(c, "UNLINK b c d"), 2);
    IT_INT(it_cmd(c, "DEL g hist:{u}:x"), 2);
    IT_INT(it_cmd(c, "DEL a"), 0);
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    IT_ERR(it_cmd(c, "EXISTS"), "ERR wrong number of arguments for 'exists' command");
    IT_ERR(it_cmd(c, "DEL"), "ERR wrong number of arguments for 'del' command");
    IT_ERR(it_cmd(c, "UNLINK"), "ERR wrong number of arguments for 'unlink' command");
    redisFree(c);
    it_stop(d);
}

Test(keyspace, dbsize_and_flushall)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    for (int i = 0; i < 300; i++) {
        if (i % 3 == 0)
            cr_assert(redisAppendCommand(c, "SET s:%d v", i) == REDIS_OK);
        else if (i % 3 == 1)
            /* A TAT 120 s ahead: no key expires before DBSIZE, however slow the machine. */
            cr_assert(redisAppendCommand(c, "CL.THROTTLE g:%d 15 30 3600", i) == REDIS_OK);
        else
            cr_assert(redisAppendCommand(c, "ISALLOWED u%d a 60 10", i) == REDIS_OK);
    }
    for (int i = 0; i < 300; i++) {
        void *r;
        cr_assert(redisGetReply(c, &r) == REDIS_OK);
        cr_assert(((redisReply *)r)->type != REDIS_REPLY_ERROR, "reply %d: %s", i,
                  ((redisReply *)r)->str);
        freeReplyObject(r);
    }
    IT_INT(it_cmd(c, "DBSIZE"), 300);
    IT_STATUS(it_cmd(c, "FLUSHALL"), "OK");
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    IT_NIL(it_cmd(c, "GET s:0"));
    IT_INTS(it_cmd(c, "CL.THROTTLE g:1 15 30 60"), 0, 16, 15, -1, 2);
    IT_INT(it_cmd(c, "ISALLOWED u2 a 60 1"), 1);
    IT_INT(it_cmd(c, "DBSIZE"), 2);
    redisFree(c);
    it_stop(d);
}

/* Runs a full SCAN with extra arguments and marks the keys "<prefix><i>" seen in seen[0..n);
 * returns how many returned keys were not of that form (or out of range). */
static int scan_all(redisContext *c, const char *extra, const char *prefix, int *seen, int n)
{
    char cursor[32] = "0";
    int strangers = 0, rounds = 0;
    size_t plen = strlen(prefix);
    do {
        /* hiredis keeps a %s substitution as one argument: split extra ourselves. */
        char words[128];
        snprintf(words, sizeof(words), "%s", extra);
        const char *argv[16] = {"SCAN", cursor};
        int argc = 2;
        for (char *save = NULL, *w = strtok_r(words, " ", &save); w != NULL && argc < 16;
             w = strtok_r(NULL, " ", &save))
            argv[argc++] = w;
        redisReply *r = it_cmdargv(c, argc, argv);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "bad SCAN %s reply: %s", extra,
                  r->type == REDIS_REPLY_ERROR ? r->str : "not a 2-element array");
        cr_assert(r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len < 32,
                  "SCAN cursor must be a bulk string");
        cr_assert(r->element[1]->type == REDIS_REPLY_ARRAY, "SCAN keys must be an array");
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *k = r->element[1]->element[i];
            cr_assert(k->type == REDIS_REPLY_STRING);
            char *end;
            long idx = -1;
            if (k->len > plen && memcmp(k->str, prefix, plen) == 0) {
                idx = strtol(k->str + plen, &end, 10);
                if (*end != '\0')
                    idx = -1;
            }
            if (idx >= 0 && idx < n)
                seen[idx]++;
            else
                strangers++;
        }
        freeReplyObject(r);
        cr_assert(++rounds < 200000, "SCAN did not finish");
    } while (strcmp(cursor, "0") != 0);
    return strangers;
}

static void pipeline_ok(redisContext *c, int n)
{
    for (int i = 0; i < n; i++) {
        void *r;
        cr_assert(redisGetReply(c, &r) == REDIS_OK, "%s", c->errstr);
        cr_assert(((redisReply *)r)->type != REDIS_REPLY_ERROR, "%s", ((redisReply *)r)->str);
        freeReplyObject(r);
    }
}

Test(keyspace, scan_full_iteration_sees_every_key)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    enum { N = 5000 };
    for (int i = 0; i < N; i++)
        cr_assert(redisAppendCommand(c, "SET key:%d %d", i, i) == REDIS_OK);
    pipeline_ok(c, N);
    IT_INT(it_cmd(c, "DBSIZE"), N);
    static int seen[N];
    static const char *const variants[] = {"COUNT 100", "COUNT 1", "COUNT 10000", "MATCH *"};
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        memset(seen, 0, sizeof(seen));
        int strangers = scan_all(c, variants[v], "key:", seen, N);
        cr_assert(strangers == 0, "SCAN %s returned %d unknown keys", variants[v], strangers);
        for (int i = 0; i < N; i++)
            cr_assert(seen[i] >= 1, "SCAN %s never returned key:%d", variants[v], i);
    }
    /* Plain SCAN cursor without options. */
    memset(seen, 0, sizeof(seen));
    char cursor[32] = "0";
    int rounds = 0;
    do {
        redisReply *r = it_cmd(c, "SCAN %s", cursor);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++)
            seen[atoi(r->element[1]->element[i]->str + 4)]++;
        freeReplyObject(r);
        cr_assert(++rounds < 200000);
    } while (strcmp(cursor, "0") != 0);
    for (int i = 0; i < N; i++)
        cr_assert(seen[i] >= 1, "SCAN never returned key:%d", i);
    IT_ERR_LIKE(it_cmd(c, "SCAN notacursor"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SCAN 0 COUNT 0"), "ERR", NULL);
    IT_ERR_LIKE(it_cmd(c, "SCAN 0 BOGUS x"), "ERR", NULL);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, scan_match_and_type)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    enum { N = 2000, Z = 40, G = 30 };
    for (int i = 0; i < N; i++)
        cr_assert(redisAppendCommand(c, "SET key:%d v", i) == REDIS_OK);
    for (int i = 0; i < Z; i++)
        cr_assert(redisAppendCommand(c, "ISALLOWED %d act 60 10", i) == REDIS_OK);
    for (int i = 0; i < G; i++)
        /* TATs 120 s ahead: no key expires during the scans, however slow the machine. */
        cr_assert(redisAppendCommand(c, "CL.THROTTLE gcra:%d 15 30 3600", i) == REDIS_OK);
    pipeline_ok(c, N + Z + G);

    static int seen[N];
    /* MATCH key:1?: exactly key:10 .. key:19. */
    memset(seen, 0, sizeof(seen));
    int strangers = scan_all(c, "MATCH key:1? COUNT 50", "key:", seen, N);
    cr_assert(strangers == 0, "MATCH key:1? returned %d other keys", strangers);
    for (int i = 0; i < N; i++)
        cr_assert((seen[i] >= 1) == (i >= 10 && i <= 19), "MATCH key:1?: key:%d seen %d times", i,
                  seen[i]);
    /* MATCH gcra:*: exactly the GCRA keys. */
    memset(seen, 0, sizeof(seen));
    strangers = scan_all(c, "MATCH gcra:* COUNT 100", "gcra:", seen, G);
    cr_assert(strangers == 0, "MATCH gcra:* returned %d other keys", strangers);
    for (int i = 0; i < G; i++)
        cr_assert(seen[i] >= 1, "MATCH gcra:* missed gcra:%d", i);
    /* TYPE zset: exactly the window logs (hist:{i}:act). */
    int zseen[Z] = {0};
    redisReply *r;
    char cursor[32] = "0";
    int others = 0;
    do {
        r = it_cmd(c, "SCAN %s TYPE zset COUNT 100", cursor);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            int idx = -1, end = 0;
            const char *k = r->element[1]->element[i]->str;
            if (sscanf(k, "hist:{%d}:act%n", &idx, &end) == 1 && k[end] == '\0' && idx >= 0 &&
                idx < Z)
                zseen[idx]++;
            else
                others++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    cr_assert(others == 0, "SCAN TYPE zset returned %d keys that are not window logs", others);
    for (int i = 0; i < Z; i++)
        cr_assert(zseen[i] >= 1, "SCAN TYPE zset missed hist:{%d}:act", i);
    /* TYPE string: the plain strings and the GCRA state, no window log. */
    memset(seen, 0, sizeof(seen));
    strangers = scan_all(c, "TYPE string COUNT 100", "key:", seen, N);
    cr_assert(strangers == G, "SCAN TYPE string returned %d non-key: keys, want the %d GCRA keys",
              strangers, G);
    for (int i = 0; i < N; i++)
        cr_assert(seen[i] >= 1, "SCAN TYPE string missed key:%d", i);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, multi_exec_fixed_window)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long since = it_now_ms();
    for (long long n = 1; n <= 3; n++) {
        IT_STATUS(it_cmd(c, "MULTI"), "OK");
        IT_STATUS(it_cmd(c, "INCR fw"), "QUEUED");
        IT_STATUS(it_cmd(c, "EXPIRE fw 60 NX"), "QUEUED");
        /* The first window sets the TTL; later increments leave it. */
        IT_INTS(it_cmd(c, "EXEC"), n, n == 1 ? 1 : 0);
    }
    check_ttl(c, "TTL", "fw", 60, since, "the window's");
    /* A runtime error inside EXEC does not stop the other queued commands. */
    IT_STATUS(it_cmd(c, "SET s abc"), "OK");
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "INCR s"), "QUEUED");
    IT_STATUS(it_cmd(c, "INCR fw"), "QUEUED");
    redisReply *r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert(r->element[0]->type == REDIS_REPLY_ERROR && strcmp(r->element[0]->str, NOTINT) == 0);
    cr_assert(r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer == 4);
    freeReplyObject(r);
    /* An empty transaction. */
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 0);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, exec_abort_after_queued_error)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "INCR x"), "QUEUED");
    IT_ERR_LIKE(it_cmd(c, "NOSUCHCOMMAND a"), "ERR unknown command", NULL);
    IT_STATUS(it_cmd(c, "INCR x"), "QUEUED");
    IT_ERR_LIKE(it_cmd(c, "EXEC"), "EXECABORT", NULL);
    IT_INT(it_cmd(c, "EXISTS x"), 0);
    /* Same with an arity error. */
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "INCR x"), "QUEUED");
    IT_ERR(it_cmd(c, "INCR"), "ERR wrong number of arguments for 'incr' command");
    IT_ERR_LIKE(it_cmd(c, "EXEC"), "EXECABORT", NULL);
    IT_INT(it_cmd(c, "EXISTS x"), 0);
    /* The connection is out of MULTI afterwards. */
    IT_INT(it_cmd(c, "INCR x"), 1);
    IT_ERR_LIKE(it_cmd(c, "EXEC"), "ERR", NULL);
    redisFree(c);
    it_stop(d);
}

Test(keyspace, discard)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_ERR_LIKE(it_cmd(c, "DISCARD"), "ERR", NULL);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_ERR_LIKE(it_cmd(c, "MULTI"), "ERR", NULL);
    IT_STATUS(it_cmd(c, "INCR y"), "QUEUED");
    IT_STATUS(it_cmd(c, "SET z 1"), "QUEUED");
    IT_STATUS(it_cmd(c, "DISCARD"), "OK");
    IT_INT(it_cmd(c, "EXISTS y z"), 0);
    IT_ERR_LIKE(it_cmd(c, "EXEC"), "ERR", NULL);
    IT_INT(it_cmd(c, "INCR y"), 1);
    redisFree(c);
    it_stop(d);
}

/* Queued commands run back to back: no other client's command interleaves on their keys. Two
 * clients pipeline transactions of two INCRs on one key; each EXEC must see n, n+1. */
Test(keyspace, multi_exec_is_atomic_across_clients)
{
    struct it_daemon *d = it_start(NULL);
    enum { CLIENTS = 4, TX = 500 };
    redisContext *cs[CLIENTS];
    for (int k = 0; k < CLIENTS; k++)
        cs[k] = it_connect(d->port);
    for (int i = 0; i < TX; i++) {
        for (int k = 0; k < CLIENTS; k++) {
            redisAppendCommand(cs[k], "MULTI");
            redisAppendCommand(cs[k], "INCR atom");
            redisAppendCommand(cs[k], "INCR atom");
            redisAppendCommand(cs[k], "EXEC");
        }
    }
    /* Push every pipeline out before reading any reply, so the clients really overlap. */
    for (int k = 0; k < CLIENTS; k++) {
        int done = 0;
        while (!done)
            cr_assert(redisBufferWrite(cs[k], &done) == REDIS_OK, "%s", cs[k]->errstr);
    }
    for (int k = 0; k < CLIENTS; k++) {
        for (int i = 0; i < TX; i++) {
            void *r;
            for (int j = 0; j < 3; j++) {
                cr_assert(redisGetReply(cs[k], &r) == REDIS_OK);
                cr_assert(((redisReply *)r)->type == REDIS_REPLY_STATUS);
                freeReplyObject(r);
            }
            cr_assert(redisGetReply(cs[k], &r) == REDIS_OK);
            redisReply *e = r;
            cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 2);
            cr_assert(e->element[1]->integer == e->element[0]->integer + 1,
                      "transaction saw %lld then %lld: another client interleaved",
                      e->element[0]->integer, e->element[1]->integer);
            freeReplyObject(r);
        }
        redisFree(cs[k]);
    }
    redisContext *c = it_connect(d->port);
    IT_BULK(it_cmd(c, "GET atom"), "4000");
    redisFree(c);
    it_stop(d);
}

/* SCAN guarantees every key present for the whole iteration is returned, even while the table
 * grows (many inserts) or shrinks (many deletes) between calls. */
static void scan_while(redisContext *c, redisContext *writer, int grow, int stay_n, int *seen)
{
    char cursor[32] = "0";
    int rounds = 0, next = 0;
    do {
        redisReply *r = it_cmd(c, "SCAN %s COUNT 10", cursor);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const char *k = r->element[1]->element[i]->str;
            if (strncmp(k, "stay:", 5) == 0) {
                int idx = atoi(k + 5);
                cr_assert(idx >= 0 && idx < stay_n);
                seen[idx]++;
            }
        }
        freeReplyObject(r);
        /* Between SCAN calls, the other connection changes the table a lot. */
        if (next < 40) {
            for (int i = 0; i < 500; i++) {
                int k = next * 500 + i;
                if (grow)
                    redisAppendCommand(writer, "SET temp:%d v", k);
                else
                    redisAppendCommand(writer, "DEL temp:%d", k);
            }
            for (int i = 0; i < 500; i++) {
                void *w;
                cr_assert(redisGetReply(writer, &w) == REDIS_OK);
                freeReplyObject(w);
            }
            next++;
        }
        cr_assert(++rounds < 1000000, "SCAN did not finish");
    } while (strcmp(cursor, "0") != 0);
}

Test(keyspace, scan_survives_table_growth_and_shrink)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port), *w = it_connect(d->port);
    enum { STAY = 1000 };
    static int seen[STAY];
    for (int i = 0; i < STAY; i++)
        redisAppendCommand(c, "SET stay:%d v", i);
    pipeline_ok(c, STAY);
    scan_while(c, w, 1, STAY, seen);
    for (int i = 0; i < STAY; i++)
        cr_assert(seen[i] >= 1, "SCAN during growth never returned stay:%d", i);
    IT_INT(it_cmd(c, "DBSIZE"), STAY + 20000);
    memset(seen, 0, sizeof(seen));
    scan_while(c, w, 0, STAY, seen);
    for (int i = 0; i < STAY; i++)
        cr_assert(seen[i] >= 1, "SCAN during shrink never returned stay:%d", i);
    IT_INT(it_cmd(c, "DBSIZE"), STAY);
    redisFree(w);
    redisFree(c);
    it_stop(d);
}
