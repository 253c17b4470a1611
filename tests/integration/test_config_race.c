/* test_config_race.c - CONFIG SET of every live directive, round after round, while several
 * connections on both I/O threads send traffic that reads those settings. Any build checks that
 * the daemon keeps answering and that every live directive is in the table below; the build-tsan
 * step of tests/run-all.sh runs it with the daemon under ThreadSanitizer, where a setting read
 * without conf_lock or CONF_GET (conf.h) is a report in the log and fails it_stop. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(config_race, .fini = it_fini, .timeout = 600);

/* Every directive CONFIG SET accepts, with values to alternate between. The values keep the
 * traffic working (maxclients above the connections, no short timeout) except that maxmemory
 * and requirepass briefly refuse some of its commands, which the traffic tolerates. */
static const struct {
    const char *name;
    const char *values[3];
} live[] = {
    {"busy-poll-us", {"0", "50", "200"}},
    {"maxclients", {"1000", "10000", "500"}},
    {"timeout", {"0", "3600", "0"}},
    {"tcp-keepalive", {"300", "0", "60"}},
    {"requirepass", {"", "", ""}}, /* set and cleared by set_round itself */
    {"maxmemory", {"0", "1000", "0"}},
    {"maxmemory-policy", {"allkeys-lru", "allkeys-lfu", "noeviction"}},
    {"maxmemory-samples", {"5", "10", "5"}},
    {"lfu-log-factor", {"10", "0", "10"}},
    {"lfu-decay-time", {"1", "0", "1"}},
    {"save-interval", {"0", "3600", "0"}},
    {"loglevel", {"notice", "warning", "notice"}},
    {"window-max-count", {"1000000", "1000", "100000"}},
    /* In this order a new query limit never falls below the bulk limit of the round before. */
    {"proto-max-bulk-len", {"512kb", "64kb", "1mb"}},
    {"client-query-buffer-limit", {"1mb", "1mb", "2mb"}},
    {"proto-max-args", {"1024", "64", "4096"}},
    {"client-output-pause-limit", {"1mb", "64kb", "16mb"}},
    {"client-output-buffer-limit",
     {"normal 0 0 0", "normal 64mb 32mb 1 pubsub 1mb 1kb 0", "normal 0 0 0 pubsub 32mb 8mb 60"}},
    {"slowlog-log-slower-than", {"10000", "0", "-1"}},
    {"slowlog-max-len", {"128", "4", "1000"}},
    {"limiter-top-size", {"1000", "10", "100"}},
    {"busy-reply-threshold", {"5000", "100", "60000"}},
    {"lua-time-limit", {"5000", "200", "5000"}},
    {"save", {"", "", ""}},
    {"appendonly", {"no", "no", "no"}},
    {"databases", {"1", "1", "1"}},
    /* Redis's encoding tunables: accepted and reported, read by nothing in rlimitd yet. */
    {"hash-max-listpack-entries", {"512", "0", "1000"}},
    {"hash-max-ziplist-entries", {"512", "16", "1000"}},
    {"hash-max-listpack-value", {"64", "0", "1kb"}},
    {"hash-max-ziplist-value", {"64", "16", "1kb"}},
    {"zset-max-listpack-entries", {"128", "0", "1000"}},
    {"zset-max-ziplist-entries", {"128", "16", "1000"}},
    {"zset-max-listpack-value", {"64", "0", "1kb"}},
    {"zset-max-ziplist-value", {"64", "16", "1kb"}},
    {"list-max-listpack-size", {"-2", "-5", "128"}},
    {"list-max-ziplist-size", {"-2", "-1", "128"}},
    {"list-compress-depth", {"0", "1", "0"}},
    {"set-max-intset-entries", {"512", "0", "10000"}},
    {"notify-keyspace-events", {"", "KEA", "KEAnr"}},
};
#define NLIVE (sizeof live / sizeof live[0])

enum { TRAFFIC_THREADS = 4, CONNS_PER_THREAD = 2, ROUNDS = 60 };

static atomic_int stop;
static atomic_int running; /* traffic threads not yet ended */
static atomic_long traffic_calls;

struct traffic_arg {
    int port, id;
    char err[256];
};

/* Sends a mix that reads the live settings: the query and bulk limits (every command), the
 * window ceiling (ISALLOWED), maxmemory (new keys), the slow log, INFO and CONFIG GET, CLIENT
 * LIST. Error replies are expected now and then (OOM, NOAUTH); a lost connection is a failure. */
static void *traffic(void *p)
{
    struct traffic_arg *a = p;
    redisContext *cs[CONNS_PER_THREAD];
    for (int i = 0; i < CONNS_PER_THREAD; i++) {
        cs[i] = redisConnect("127.0.0.1", a->port);
        if (cs[i] == NULL || cs[i]->err) {
            snprintf(a->err, sizeof a->err, "connect: %s", cs[i] ? cs[i]->errstr : "no memory");
            atomic_fetch_sub(&running, 1);
            return NULL;
        }
    }
    char big[4096];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (long n = 0; !atomic_load(&stop); n++) {
        redisContext *c = cs[n % CONNS_PER_THREAD];
        redisAppendCommand(c, "CL.THROTTLE t%d:%ld 15 30 60", a->id, n % 50);
        redisAppendCommand(c, "ISALLOWED u%d a%ld 60 100", a->id, n % 10);
        redisAppendCommand(c, "SET s%d:%ld %s", a->id, n % 20, big);
        redisAppendCommand(c, "INCR c%d", a->id);
        redisAppendCommand(c, "GET s%d:%ld", a->id, n % 20);
        redisAppendCommand(c, n % 10 == 0 ? "INFO" : "PING");
        redisAppendCommand(c, n % 10 == 5 ? "CLIENT LIST" : "SLOWLOG GET 2");
        redisAppendCommand(c, "CONFIG GET maxclients");
        for (int i = 0; i < 8; i++) {
            void *r = NULL;
            if (redisGetReply(c, &r) != REDIS_OK) {
                snprintf(a->err, sizeof a->err, "connection %d lost: %s", a->id, c->errstr);
                goto out;
            }
            freeReplyObject(r);
        }
        atomic_fetch_add(&traffic_calls, 8);
    }
out:
    for (int i = 0; i < CONNS_PER_THREAD; i++)
        redisFree(cs[i]);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

static void set_ok(redisContext *c, const char *name, const char *value)
{
    redisReply *r = it_cmd(c, "CONFIG SET %s %s", name, value);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "CONFIG SET %s '%s': %s",
              name, value, r->str ? r->str : "(no text)");
    freeReplyObject(r);
}

/* One round: every directive once, with the round's value. */
static void set_round(redisContext *c, int round)
{
    for (size_t i = 0; i < NLIVE; i++) {
        if (strcmp(live[i].name, "requirepass") == 0) {
            /* The connection that sets a password stays authenticated (as in Redis); AUTH
             * anyway, so the round works either way, and clear it again at once. */
            set_ok(c, "requirepass", "race-secret");
            freeReplyObject(it_cmd(c, "AUTH race-secret"));
            set_ok(c, "requirepass", ""); /* hiredis sends an empty %s as an empty argument */
            continue;
        }
        const char *v = live[i].values[round % 3];
        set_ok(c, live[i].name, v);
    }
}

Test(config_race, config_set_while_traffic_flows)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    redisContext *c = it_connect(d->port);

    /* The table must name every directive CONFIG SET accepts: setting each to its own value is
     * accepted exactly for the live ones. */
    redisReply *all = it_cmd(c, "CONFIG GET *");
    cr_assert(all->type == REDIS_REPLY_ARRAY && all->elements % 2 == 0);
    for (size_t i = 0; i + 1 < all->elements; i += 2) {
        const char *name = all->element[i]->str, *value = all->element[i + 1]->str;
        redisReply *r = it_cmd(c, "CONFIG SET %s %s", name, value);
        int accepted = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (strcmp(name, "bind") == 0 || !accepted)
            continue;
        size_t k = 0;
        while (k < NLIVE && strcmp(live[k].name, name) != 0)
            k++;
        cr_assert(k < NLIVE, "live directive %s is missing from this test's table", name);
    }
    freeReplyObject(all);

    pthread_t th[TRAFFIC_THREADS];
    static struct traffic_arg args[TRAFFIC_THREADS];
    atomic_store(&stop, 0);
    atomic_store(&running, TRAFFIC_THREADS);
    for (int i = 0; i < TRAFFIC_THREADS; i++) {
        args[i] = (struct traffic_arg){.port = d->port, .id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, traffic, &args[i]), 0);
    }
    for (int round = 0; round < ROUNDS; round++) {
        set_round(c, round);
        /* Let some traffic through between rounds, however slow the machine (while any traffic
         * thread is still running: a lost connection ends them, reported below). */
        long seen = atomic_load(&traffic_calls);
        while (atomic_load(&traffic_calls) < seen + 16 * TRAFFIC_THREADS &&
               atomic_load(&running) > 0)
            it_sleep_ms(1);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < TRAFFIC_THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < TRAFFIC_THREADS; i++)
        cr_assert(args[i].err[0] == '\0', "traffic thread %d: %s", i, args[i].err);

    /* Back to the defaults: the daemon still answers correctly. */
    set_round(c, 0);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_INTS(it_cmd(c, "CL.THROTTLE after-race 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    /* it_stop checks the exit status and the log for sanitizer reports (ThreadSanitizer's). */
    it_stop(d);
}
