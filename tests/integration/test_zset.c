/* test_zset.c - sorted sets on the real daemon (docs/COMMANDS.md, Sorted sets): types and
 * WRONGTYPE both ways, emptied sets, expiry, MULTI/EXEC, snapshots across a restart, the
 * ISALLOWED window log seen and written as a sorted set, maxmemory, hostile input. Reply
 * texts are checked against Redis 7.0 by tests/diff; here the daemon's own rules are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(zset, .fini = it_fini, .timeout = 300);

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define OOM "OOM command not allowed when used memory > 'maxmemory'."

/* An array reply's elements as one space-separated string (for compact comparisons). */
static char *joined(redisReply *r)
{
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "want an array, got type %d",
              r ? r->type : -1);
    size_t n = 1;
    for (size_t i = 0; i < r->elements; i++)
        n += r->element[i]->len + 1;
    char *s = calloc(1, n);
    for (size_t i = 0; i < r->elements; i++) {
        cr_assert(r->element[i]->type == REDIS_REPLY_STRING);
        if (i > 0)
            strcat(s, " ");
        strncat(s, r->element[i]->str, r->element[i]->len);
    }
    freeReplyObject(r);
    return s;
}

/* Every key SCAN ... TYPE t returns, sorted, space-separated. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *scan_type(redisContext *c, const char *t)
{
    char *keys[64];
    size_t n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = it_cmd(c, "SCAN %s COUNT 1000 TYPE %s", cursor, t);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements && n < 64; i++)
            keys[n++] = strdup(r->element[1]->element[i]->str);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    qsort(keys, n, sizeof(*keys), cmp_str);
    char *out = calloc(1, 64 * 64);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(out, " ");
        strncat(out, keys[i], 60);
        free(keys[i]);
    }
    return out;
}

#define IT_JOINED(r, want)                                                                     \
    do {                                                                                       \
        char *got_ = joined(r);                                                                \
        cr_assert_str_eq(got_, (want));                                                        \
        free(got_);                                                                            \
    } while (0)

static const char *const z_reads[] = {
    "ZCARD %s", "ZCOUNT %s -inf +inf", "ZLEXCOUNT %s - +", "ZSCORE %s m", "ZMSCORE %s m n",
    "ZRANK %s m", "ZREVRANK %s m", "ZRANGE %s 0 -1", "ZRANGE %s -inf +inf BYSCORE",
    "ZRANGE %s - + BYLEX", "ZRANGEBYSCORE %s -inf +inf", "ZREVRANGEBYSCORE %s +inf -inf",
    "ZREVRANGE %s 0 -1", "ZRANGEBYLEX %s - +", "ZREVRANGEBYLEX %s + -", "ZRANDMEMBER %s",
    "ZRANDMEMBER %s 2", NULL,
};

static const char *const z_writes[] = {
    "ZADD %s 1 m", "ZINCRBY %s 1 m", "ZREM %s m", "ZREMRANGEBYSCORE %s 5 6",
    "ZREMRANGEBYRANK %s 5 6", "ZREMRANGEBYLEX %s [x [y", "ZPOPMIN %s", "ZPOPMAX %s 2", NULL,
};

Test(zset, wrongtype_both_ways_and_type)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET s v"), "OK");
    IT_INT(it_cmd(c, "INCR n"), 1);
    IT_INTS(it_cmd(c, "CL.THROTTLE g 15 30 60"), 0, 16, 15, -1, 2);
    const char *strings[] = {"s", "n", "g"};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; z_reads[i] != NULL; i++)
            IT_ERR(it_cmd(c, z_reads[i], strings[k]), WRONGTYPE);
        for (int i = 0; z_writes[i] != NULL; i++)
            IT_ERR(it_cmd(c, z_writes[i], strings[k]), WRONGTYPE);
    }
    IT_BULK(it_cmd(c, "GET s"), "v");
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b"), 2);
    IT_STATUS(it_cmd(c, "TYPE z"), "zset");
    IT_ERR(it_cmd(c, "GET z"), WRONGTYPE);
    IT_ERR(it_cmd(c, "INCR z"), WRONGTYPE);
    IT_ERR(it_cmd(c, "INCRBY z 2"), WRONGTYPE);
    IT_ERR(it_cmd(c, "CL.THROTTLE z 15 30 60"), WRONGTYPE);
    /* ISALLOWED's state key is derived: make one that holds an ordinary string. */
    IT_STATUS(it_cmd(c, "SET hist:{u}:a x"), "OK");
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 5"), WRONGTYPE);
    IT_INT(it_cmd(c, "ZCARD z"), 2);
    /* SET replaces any type, as in Redis. */
    IT_STATUS(it_cmd(c, "SET z plain"), "OK");
    IT_STATUS(it_cmd(c, "TYPE z"), "string");
    IT_INT(it_cmd(c, "ZADD z2 1 a"), 1);
    IT_INT(it_cmd(c, "ISALLOWED w a 60 5"), 1);
    /* SCAN TYPE zset finds sorted sets and window logs, nothing else. */
    char *keys = scan_type(c, "zset");
    cr_assert_str_eq(keys, "hist:{w}:a z2");
    free(keys);
    keys = scan_type(c, "string");
    cr_assert_str_eq(keys, "g hist:{u}:a n s z");
    free(keys);
    redisFree(c);
    it_stop(d);
}

Test(zset, an_emptied_set_is_deleted)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b 3 c"), 3);
    IT_INT(it_cmd(c, "ZREM z a b c x"), 3);
    IT_INT(it_cmd(c, "EXISTS z"), 0);
    IT_STATUS(it_cmd(c, "TYPE z"), "none");
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b"), 2);
    IT_JOINED(it_cmd(c, "ZPOPMIN z 5"), "a 1 b 2");
    IT_INT(it_cmd(c, "EXISTS z"), 0);
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b"), 2);
    IT_INT(it_cmd(c, "ZREMRANGEBYSCORE z -inf +inf"), 2);
    IT_INT(it_cmd(c, "EXISTS z"), 0);
    IT_INT(it_cmd(c, "ZADD z 1 a"), 1);
    IT_INT(it_cmd(c, "ZREMRANGEBYRANK z 0 -1"), 1);
    IT_INT(it_cmd(c, "DBSIZE"), 0);
    /* XX on an absent key creates nothing. */
    IT_INT(it_cmd(c, "ZADD z XX 1 a"), 0);
    IT_NIL(it_cmd(c, "ZADD z XX INCR 1 a"));
    IT_INT(it_cmd(c, "EXISTS z"), 0);
    /* DEL, and a big set (skip list) emptied the same way. */
    for (int i = 0; i < 300; i++)
        IT_INT(it_cmd(c, "ZADD big %d m%d", i, i), 1);
    IT_INT(it_cmd(c, "ZREMRANGEBYRANK big 0 149"), 150);
    IT_INT(it_cmd(c, "ZCARD big"), 150);
    IT_INT(it_cmd(c, "ZREMRANGEBYSCORE big 150 +inf"), 150);
    IT_INT(it_cmd(c, "EXISTS big"), 0);
    IT_INT(it_cmd(c, "ZADD big 1 a"), 1);
    IT_INT(it_cmd(c, "DEL big"), 1);
    redisFree(c);
    it_stop(d);
}

Test(zset, expiry)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b"), 2);
    IT_INT(it_cmd(c, "PEXPIRE z 100"), 1);
    long long pttl = it_int(it_cmd(c, "PTTL z"));
    cr_assert(pttl > 0 && pttl <= 100, "pttl %lld", pttl);
    /* A write keeps the expiry, as Redis's ZADD does. */
    IT_INT(it_cmd(c, "ZADD z 3 c"), 1);
    cr_assert_gt(it_int(it_cmd(c, "PTTL z")), 0);
    long long deadline = it_now_ms() + 20000;
    while (it_int(it_cmd(c, "EXISTS z")) == 1 && it_now_ms() < deadline)
        it_sleep_ms(20);
    IT_INT(it_cmd(c, "ZCARD z"), 0);
    IT_NIL(it_cmd(c, "ZSCORE z a"));
    IT_STATUS(it_cmd(c, "TYPE z"), "none");
    /* An expiry in the past deletes at once; PERSIST removes it. */
    IT_INT(it_cmd(c, "ZADD y 1 a"), 1);
    IT_INT(it_cmd(c, "PEXPIRE y 100000"), 1);
    IT_INT(it_cmd(c, "PERSIST y"), 1);
    IT_INT(it_cmd(c, "TTL y"), -1);
    IT_INT(it_cmd(c, "EXPIRE y -1"), 1);
    IT_INT(it_cmd(c, "EXISTS y"), 0);
    redisFree(c);
    it_stop(d);
}

Test(zset, inside_multi_exec)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "ZADD z 1 a 2 b"), "QUEUED");
    IT_STATUS(it_cmd(c, "ZINCRBY z 2.5 a"), "QUEUED");
    IT_STATUS(it_cmd(c, "ZADD z nan a"), "QUEUED"); /* a runtime error inside EXEC */
    IT_STATUS(it_cmd(c, "ZRANGE z 0 -1 WITHSCORES"), "QUEUED");
    IT_STATUS(it_cmd(c, "ZPOPMAX z"), "QUEUED");
    redisReply *r = it_cmd(c, "EXEC");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    cr_assert(r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 2);
    cr_assert_str_eq(r->element[1]->str, "3.5");
    cr_assert(r->element[2]->type == REDIS_REPLY_ERROR);
    cr_assert_str_eq(r->element[2]->str, "ERR value is not a valid float");
    cr_assert(r->element[3]->elements == 4);
    cr_assert_str_eq(r->element[3]->element[0]->str, "b");
    cr_assert_str_eq(r->element[3]->element[3]->str, "3.5");
    cr_assert_str_eq(r->element[4]->element[0]->str, "a");
    freeReplyObject(r);
    /* An arity error while queueing aborts the transaction. */
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_ERR(it_cmd(c, "ZADD z 1"), "ERR wrong number of arguments for 'zadd' command");
    IT_ERR(it_cmd(c, "EXEC"), "EXECABORT Transaction discarded because of previous errors.");
    IT_INT(it_cmd(c, "ZCARD z"), 1);
    redisFree(c);
    it_stop(d);
}

/* The members and scores of key, as one string, for before/after comparisons. */
static char *dump_zset(redisContext *c, const char *key)
{
    return joined(it_cmd(c, "ZRANGE %s 0 -1 WITHSCORES", key));
}

Test(zset, snapshots_keep_sets_exactly)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ZADD small 0.1 a -inf b inf c 1e20 d -0 e 1.5e-7 f"), 6);
    for (int i = 0; i < 2000; i++)
        redisAppendCommand(c, "ZADD big %d.25 member:%d", i % 97, i);
    for (int i = 0; i < 2000; i++) {
        void *r;
        cr_assert(redisGetReply(c, &r) == REDIS_OK);
        freeReplyObject(r);
    }
    IT_INT(it_cmd(c, "ZADD big -0 negzero"), 1);
    long long now = it_now_ms();
    (void)now;
    IT_INT(it_cmd(c, "ZADD recipe 1700000000123 1700000000123 1700000000456 1700000000456"), 2);
    IT_INT(it_cmd(c, "PEXPIRE recipe 3600000"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u a 3600 5"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u a 3600 5"), 1);
    char *small = dump_zset(c, "small"), *big = dump_zset(c, "big"),
         *recipe = dump_zset(c, "recipe"), *log = dump_zset(c, "hist:{u}:a");
    IT_STATUS(it_cmd(c, "SAVE"), "OK");
    redisReply *r = redisCommand(c, "SHUTDOWN NOSAVE");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    cr_assert(it_wait_exit(d, 20000), "daemon did not stop");
    it_spawn(d, it_free_port(), NULL);
    cr_assert(it_wait_ready(d, 20000), "daemon did not come back");
    c = it_connect(d->port);
    char *small2 = dump_zset(c, "small"), *big2 = dump_zset(c, "big"),
         *recipe2 = dump_zset(c, "recipe"), *log2 = dump_zset(c, "hist:{u}:a");
    cr_assert_str_eq(small2, small);
    cr_assert_str_eq(big2, big);
    cr_assert_str_eq(recipe2, recipe);
    cr_assert_str_eq(log2, log);
    IT_INT(it_cmd(c, "ZCARD big"), 2001);
    IT_BULK(it_cmd(c, "ZSCORE big negzero"), "-0");
    cr_assert_gt(it_int(it_cmd(c, "PTTL recipe")), 0);
    IT_STATUS(it_cmd(c, "TYPE hist:{u}:a"), "zset");
    /* The window log is still one: ISALLOWED goes on counting it. */
    IT_INT(it_cmd(c, "ISALLOWED u a 3600 3"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u a 3600 3"), 0);
    free(small);
    free(big);
    free(recipe);
    free(log);
    free(small2);
    free(big2);
    free(recipe2);
    free(log2);
    redisFree(c);
    it_stop(d);
}

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Checks that every member of the window log key is "<ms>" or "<ms>-<k>" with its score ms in
 * [lo, hi], k counting the earlier attempts of the same ms, in ascending order. Returns the
 * number of members. */
static size_t check_log_members(redisContext *c, const char *key, long long lo, long long hi)
{
    redisReply *r = it_cmd(c, "ZRANGE %s 0 -1 WITHSCORES", key);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0);
    long long prev = -1, dup = 0;
    for (size_t i = 0; i < r->elements; i += 2) {
        const char *m = r->element[i]->str;
        long long score = atoll(r->element[i + 1]->str);
        cr_assert(score >= lo && score <= hi, "score %lld outside [%lld, %lld]", score, lo, hi);
        /* The suffix grows within one millisecond; the oldest of a burst may have been
         * dropped (max_count + 1 kept), so a run need not start at "-0". */
        char base[32];
        int blen = snprintf(base, sizeof(base), "%lld", score);
        long long k = 0;
        cr_assert(strncmp(m, base, (size_t)blen) == 0, "member %s, score %lld", m, score);
        if (m[blen] == '-')
            k = atoll(m + blen + 1);
        else
            cr_assert_eq(m[blen], '\0', "member %s", m);
        cr_assert(score != prev || k > dup, "member %s out of order", m);
        dup = k;
        IT_BULK(it_cmd(c, "ZSCORE %s %s", key, m), r->element[i + 1]->str);
        IT_INT(it_cmd(c, "ZRANK %s %s", key, m), (long long)(i / 2));
        prev = score;
    }
    size_t n = r->elements / 2;
    freeReplyObject(r);
    return n;
}

Test(zset, the_window_log_reads_as_a_sorted_set)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long before = wall_ms();
    for (int i = 0; i < 5; i++)
        IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 0);
    long long after = wall_ms();
    IT_STATUS(it_cmd(c, "TYPE hist:{u}:a"), "zset");
    IT_INT(it_cmd(c, "ZCARD hist:{u}:a"), 6);
    cr_assert_eq(check_log_members(c, "hist:{u}:a", before, after), 6);
    IT_INT(it_cmd(c, "ZCOUNT hist:{u}:a %lld %lld", before, after), 6);
    IT_INT(it_cmd(c, "ZCOUNT hist:{u}:a -inf (%lld", before), 0);
    IT_INT(it_cmd(c, "ZLEXCOUNT hist:{u}:a - +"), 6);
    for (int i = 0; z_reads[i] != NULL; i++) {
        redisReply *r = it_cmd(c, z_reads[i], "hist:{u}:a");
        cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", z_reads[i], r->str);
        freeReplyObject(r);
    }
    /* Reads leave it a window log: ISALLOWED goes on (the oldest is dropped past max + 1). */
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 0);
    IT_INT(it_cmd(c, "ZCARD hist:{u}:a"), 6);
    long long ttl = it_int(it_cmd(c, "PTTL hist:{u}:a"));
    cr_assert(ttl > 0 && ttl <= 60000);
    /* A Z write turns it into an ordinary sorted set with the same members, expiry kept. */
    IT_INT(it_cmd(c, "ZADD hist:{u}:a 1 old"), 1);
    IT_INT(it_cmd(c, "ZCARD hist:{u}:a"), 7);
    IT_JOINED(it_cmd(c, "ZRANGE hist:{u}:a 0 0"), "old");
    cr_assert_gt(it_int(it_cmd(c, "PTTL hist:{u}:a")), 0);
    /* ISALLOWED applies the recipe to it: "old" leaves the window, 6 + 1 > 5: denied, and
     * max_count + 1 = 6 are kept. */
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 0);
    IT_INT(it_cmd(c, "ZCARD hist:{u}:a"), 6);
    IT_NIL(it_cmd(c, "ZSCORE hist:{u}:a old"));
    cr_assert_eq(check_log_members(c, "hist:{u}:a", before, wall_ms()), 6);
    /* Emptied: gone; the next ISALLOWED starts a fresh log. */
    IT_INT(it_cmd(c, "ZREMRANGEBYRANK hist:{u}:a 0 -1"), 6);
    IT_INT(it_cmd(c, "EXISTS hist:{u}:a"), 0);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    /* Every Z write on a window log works (none answers WRONGTYPE). */
    for (int i = 0; z_writes[i] != NULL; i++) {
        IT_INT(it_cmd(c, "DEL hist:{w}:a"), i == 0 ? 0 : 1);
        for (int k = 0; k < 3; k++)
            IT_INT(it_cmd(c, "ISALLOWED w a 60 5"), 1);
        redisReply *r = it_cmd(c, z_writes[i], "hist:{w}:a");
        cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", z_writes[i], r->str);
        freeReplyObject(r);
        IT_STATUS(it_cmd(c, "TYPE hist:{w}:a"), "zset");
        IT_INT(it_cmd(c, "ISALLOWED w a 60 5"), 1);
    }
    redisFree(c);
    it_stop(d);
}

Test(zset, isallowed_on_an_ordinary_sorted_set)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long now = wall_ms();
    IT_INT(it_cmd(c, "ZADD hist:{v}:a %lld stale %lld r1 %lld r2", now - 120000, now - 2000,
                  now - 1000),
           3);
    IT_INT(it_cmd(c, "ISALLOWED v a 60 3"), 1); /* stale dropped, r1 r2 + this = 3 */
    IT_INT(it_cmd(c, "ZCARD hist:{v}:a"), 3);
    IT_NIL(it_cmd(c, "ZSCORE hist:{v}:a stale"));
    long long ttl = it_int(it_cmd(c, "PTTL hist:{v}:a"));
    cr_assert(ttl > 0 && ttl <= 60000, "pttl %lld", ttl);
    IT_INT(it_cmd(c, "ISALLOWED v a 60 3"), 0); /* 4 > 3 */
    IT_INT(it_cmd(c, "ZCARD hist:{v}:a"), 4);
    IT_INT(it_cmd(c, "ISALLOWED v a 60 3"), 0);
    IT_INT(it_cmd(c, "ZCARD hist:{v}:a"), 4); /* max_count + 1 kept: r1 dropped */
    IT_NIL(it_cmd(c, "ZSCORE hist:{v}:a r1"));
    IT_STATUS(it_cmd(c, "TYPE hist:{v}:a"), "zset");
    redisFree(c);
    it_stop(d);
}

Test(zset, maxmemory_refuses_additions_only)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "ZADD z 1 a 2 b 3 c"), 3);
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 1000"), "OK");
    IT_ERR(it_cmd(c, "ZADD new 1 a"), OOM);
    IT_ERR(it_cmd(c, "ZADD z 4 d"), OOM);
    IT_ERR(it_cmd(c, "ZINCRBY z 1 a"), OOM);
    IT_INT(it_cmd(c, "EXISTS new"), 0);
    IT_INT(it_cmd(c, "ZCARD z"), 3);
    IT_INT(it_cmd(c, "ZREM z a"), 1);
    IT_JOINED(it_cmd(c, "ZPOPMIN z"), "b 2");
    IT_INT(it_cmd(c, "ZREMRANGEBYSCORE z -inf +inf"), 1);
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 0"), "OK");
    IT_INT(it_cmd(c, "ZADD z 4 d"), 1);
    /* A set grown until maxmemory: -OOM, the daemon stays up and the set readable. */
    long long used = it_info_int(c, "memory", "used_memory");
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory %lld", used + 4 * 1024 * 1024), "OK");
    int oom = 0;
    for (int round = 0; round < 2000 && !oom; round++) {
        for (int i = 0; i < 100; i++)
            redisAppendCommand(c, "ZADD grow %d member-%d-%d", i, round, i);
        for (int i = 0; i < 100; i++) {
            redisReply *r;
            cr_assert(redisGetReply(c, (void **)&r) == REDIS_OK);
            if (r->type == REDIS_REPLY_ERROR) {
                cr_assert_str_eq(r->str, OOM);
                oom = 1;
            }
            freeReplyObject(r);
        }
    }
    cr_assert(oom, "never reached maxmemory");
    cr_assert_gt(it_int(it_cmd(c, "ZCARD grow")), 1000);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    it_stop(d);
}

Test(zset, hostile_input)
{
    struct it_daemon *d = it_start(IT_ARGS("--proto-max-args", "2000002",
                                           "--client-query-buffer-limit", "256mb"));
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET sentinel ok"), "OK");
    /* One ZADD of 1M members. */
    enum { N = 1000000 };
    const char **argv = malloc(sizeof(*argv) * (2 * N + 2));
    size_t *lens = malloc(sizeof(*lens) * (2 * N + 2));
    char *text = malloc((size_t)N * 24);
    argv[0] = "ZADD";
    argv[1] = "huge";
    lens[0] = 4;
    lens[1] = 4;
    for (int i = 0; i < N; i++) {
        char *p = text + (size_t)i * 24;
        int n = snprintf(p, 24, "%d", i);
        argv[2 + 2 * i] = p;
        lens[2 + 2 * i] = (size_t)n;
        argv[3 + 2 * i] = p; /* member == score, the recipe's shape */
        lens[3 + 2 * i] = (size_t)n;
    }
    redisReply *r = redisCommandArgv(c, 2 * N + 2, argv, lens);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == N, "%s",
              r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    free(argv);
    free(lens);
    free(text);
    IT_INT(it_cmd(c, "ZCARD huge"), N);
    IT_INT(it_cmd(c, "ZRANK huge 999999"), N - 1);
    IT_INT(it_cmd(c, "ZCOUNT huge 1000 (2000"), 1000);
    IT_JOINED(it_cmd(c, "ZRANGEBYSCORE huge 500000 +inf LIMIT 0 3"), "500000 500001 500002");
    /* Huge and negative indexes, LIMIT with negative numbers. */
    IT_JOINED(it_cmd(c, "ZRANGE huge -9223372036854775808 1"), "0 1");
    IT_JOINED(it_cmd(c, "ZRANGE huge 999998 9223372036854775807"), "999998 999999");
    IT_JOINED(it_cmd(c, "ZRANGE huge 9223372036854775807 -9223372036854775808"), "");
    IT_JOINED(it_cmd(c, "ZRANGEBYSCORE huge -inf +inf LIMIT -1 5"), "");
    IT_JOINED(it_cmd(c, "ZREVRANGEBYSCORE huge +inf -inf LIMIT 999998 -1"), "1 0");
    IT_ERR(it_cmd(c, "ZRANGE huge 0 1 LIMIT 0 1"),
           "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or "
           "BYLEX");
    IT_ERR_LIKE(it_cmd(c, "ZRANDMEMBER huge -100000000"), "ERR", "out of range");
    IT_ERR(it_cmd(c, "ZRANDMEMBER huge -9223372036854775808"),
           "ERR value is out of range, value must between -9223372036854775807 and "
           "9223372036854775807");
    IT_INT(it_cmd(c, "ZREMRANGEBYRANK huge 0 -500001"), 500000);
    IT_INT(it_cmd(c, "ZCARD huge"), 500000);
    /* Scores: NaN refused, and an increment that would make one. */
    IT_ERR(it_cmd(c, "ZADD z nan a"), "ERR value is not a valid float");
    IT_ERR(it_cmd(c, "ZADD z 1e400 a"), "ERR value is not a valid float");
    IT_INT(it_cmd(c, "ZADD z inf a"), 1);
    IT_ERR(it_cmd(c, "ZINCRBY z -inf a"), "ERR resulting score is not a number (NaN)");
    IT_ERR(it_cmd(c, "ZADD z INCR -inf a"), "ERR resulting score is not a number (NaN)");
    IT_BULK(it_cmd(c, "ZSCORE z a"), "inf");
    IT_ERR(it_cmd(c, "ZRANGEBYSCORE z (nan 1"), "ERR min or max is not a float");
    IT_ERR(it_cmd(c, "ZRANGEBYLEX z a b"), "ERR min or max not valid string range item");
    /* A 500 KB member (past the packed limit: the set converts); 512 MB are refused by the
     * protocol layer's proto-max-bulk-len before any command runs. */
    size_t blen = 500 * 1000;
    char *big = malloc(blen);
    memset(big, 'm', blen);
    r = it_cmd(c, "ZADD z 5 %b", big, blen);
    IT_INT(r, 1);
    r = it_cmd(c, "ZSCORE z %b", big, blen);
    IT_BULK(r, "5");
    free(big);
    IT_INT(it_cmd(c, "ZCARD z"), 2);
    it_assert_healthy(d, c, "sentinel", "ok");
    redisFree(c);
    it_stop(d);
}

Test(zset, command_info_and_stats)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "COMMAND INFO zadd zrange zrandmember");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    redisReply *e = r->element[0];
    cr_assert_str_eq(e->element[0]->str, "zadd");
    cr_assert_eq(e->element[1]->integer, -4);
    cr_assert_eq(e->element[2]->elements, 3); /* write denyoom fast */
    cr_assert_str_eq(e->element[2]->element[1]->str, "denyoom");
    cr_assert_str_eq(e->element[6]->element[1]->str, "@sortedset");
    cr_assert_str_eq(r->element[2]->element[7]->element[0]->str, "nondeterministic_output");
    freeReplyObject(r);
    IT_INT(it_cmd(c, "ZADD z 1 a"), 1);
    IT_INT(it_cmd(c, "ZCARD z"), 1);
    r = it_cmd(c, "INFO commandstats");
    cr_assert(strstr(r->str, "cmdstat_zadd:calls=1,") != NULL, "%s", r->str);
    cr_assert(strstr(r->str, "cmdstat_zcard:calls=1,") != NULL);
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND DOCS zrange");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}
