/* test_concurrency.c - issue 31's limits under concurrency, on the real daemon with 2 I/O threads
 * and 50 clients, each on its own connection and thread: THROTTLE.ALL over keys on different
 * shards admits exactly what the limits allow and never takes from some limits without the
 * others. Every period is an hour or more, so nothing refills while the test runs and the
 * expected counts follow from the limits alone, whatever the machine's speed. The build-tsan
 * step of tests/run-all.sh runs it against the daemon under ThreadSanitizer. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(concurrency, .fini = it_fini, .timeout = 600);

enum { CLIENTS = 50 };

struct client_arg {
    int port, id;
    int admitted;
    char err[256];
};

static void *run_clients(void *(*fn)(void *), struct client_arg *args, int port)
{
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        args[i].port = port;
        args[i].id = i;
        args[i].admitted = 0;
        args[i].err[0] = '\0';
        cr_assert_eq(pthread_create(&th[i], NULL, fn, &args[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < CLIENTS; i++)
        cr_assert(args[i].err[0] == '\0', "client %d: %s", i, args[i].err);
    return NULL;
}

static redisContext *connect_or_fail(struct client_arg *a)
{
    redisContext *c = redisConnect("127.0.0.1", a->port);
    if (c == NULL || c->err) {
        snprintf(a->err, sizeof a->err, "connect: %s", c ? c->errstr : "no memory");
        redisFree(c);
        return NULL;
    }
    return c;
}

/* ---- THROTTLE.ALL ---- */

/* Client i takes one from three limits at once: its own (3 an hour), its team's (team i % 5,
 * 15 an hour) and the organisation's (60 an hour). Keys without a common hash tag: their shards
 * differ, so each call locks several shards. */
#define ORG_LIMIT 60
#define TEAM_LIMIT 15
#define OWN_LIMIT 3
#define TEAMS 5
#define ATTEMPTS 20

static void *throttle_all_client(void *p)
{
    struct client_arg *a = p;
    redisContext *c = connect_or_fail(a);
    if (c == NULL)
        return NULL;
    for (int n = 0; n < ATTEMPTS; n++) {
        redisReply *r = redisCommand(c, "THROTTLE.ALL 3 own:%d team:%d org LIMIT %d 1 3600 1 "
                                        "LIMIT %d 1 3600 1 LIMIT %d 1 3600 1",
                                     a->id, a->id % TEAMS, OWN_LIMIT - 1, TEAM_LIMIT - 1,
                                     ORG_LIMIT - 1);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 6) {
            snprintf(a->err, sizeof a->err, "attempt %d: %s", n,
                     r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
            freeReplyObject(r);
            break;
        }
        long long limited = r->element[0]->integer, index = r->element[1]->integer;
        /* The refusing limit is one that refuses on its own. */
        if (limited && (index < 0 || index > 2 || r->element[3 + index]->element[0]->integer != 1))
            snprintf(a->err, sizeof a->err, "attempt %d: refused by limit %lld, which admits",
                     n, index);
        if (!limited)
            a->admitted++;
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

/* What a peek (quantity 0) says is left of a limit. */
static long long remaining(redisContext *c, const char *key, int limit)
{
    redisReply *r = it_cmd(c, "CL.THROTTLE %s %d 1 3600 0", key, limit - 1);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5, "peek %s", key);
    long long n = r->element[2]->integer;
    freeReplyObject(r);
    return n;
}

Test(concurrency, throttle_all_admits_exactly_and_all_or_nothing)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static struct client_arg args[CLIENTS];
    run_clients(throttle_all_client, args, d->port);

    /* Every team can reach its 15 (10 clients x 3), so together they would take 75: the
     * organisation's 60 binds. A client stops being admitted only when its own 3, its team's
     * 15 or the organisation's 60 is used up, and each tries 20 times, so exactly 60 pass. */
    int total = 0, team[TEAMS] = {0};
    for (int i = 0; i < CLIENTS; i++) {
        cr_expect_leq(args[i].admitted, OWN_LIMIT, "client %d admitted %d", i, args[i].admitted);
        total += args[i].admitted;
        team[i % TEAMS] += args[i].admitted;
    }
    cr_expect_eq(total, ORG_LIMIT, "admitted %d in all, the organisation allows %d", total,
                 ORG_LIMIT);
    redisContext *c = it_connect(d->port);
    cr_expect_eq(remaining(c, "org", ORG_LIMIT), ORG_LIMIT - total);
    /* All or nothing: a refusal took nothing from the limits that would have admitted, so
     * each limit holds exactly what the admitted calls took from it. */
    for (int t = 0; t < TEAMS; t++) {
        char key[32];
        snprintf(key, sizeof key, "team:%d", t);
        cr_expect_leq(team[t], TEAM_LIMIT);
        cr_expect_eq(remaining(c, key, TEAM_LIMIT), TEAM_LIMIT - team[t], "team %d", t);
    }
    for (int i = 0; i < CLIENTS; i++) {
        char key[32];
        snprintf(key, sizeof key, "own:%d", i);
        cr_expect_eq(remaining(c, key, OWN_LIMIT), OWN_LIMIT - args[i].admitted, "client %d", i);
    }
    cr_expect_eq(it_info_int(c, "limiter", "throttle_all_allowed"), ORG_LIMIT);
    cr_expect_eq(it_info_int(c, "limiter", "throttle_all_limited"),
                 CLIENTS * ATTEMPTS - ORG_LIMIT);
    redisFree(c);
    it_stop(d);
}

/* ---- LEASE ---- */

/* Client i acquires from a pool of POOL leases an hour long, ATTEMPTS times, releasing every
 * second lease it gets; a lease it keeps stands for a holder that crashed and never releases.
 * Nothing expires during the test, so the count the pool ends with follows from the calls. */
#define POOL 7

static void *lease_client(void *p)
{
    struct client_arg *a = p;
    redisContext *c = connect_or_fail(a);
    if (c == NULL)
        return NULL;
    for (int n = 0; n < ATTEMPTS && a->err[0] == '\0'; n++) {
        redisReply *r = redisCommand(c, "LEASE.ACQUIRE pool %d 3600000", POOL);
        if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
            snprintf(a->err, sizeof a->err, "acquire %d: %s", n,
                     r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        } else if (r->type == REDIS_REPLY_STRING && a->admitted++ % 2 == 0) {
            redisReply *rel = redisCommand(c, "LEASE.RELEASE pool %s", r->str);
            if (rel == NULL || rel->type != REDIS_REPLY_INTEGER || rel->integer != 1)
                snprintf(a->err, sizeof a->err, "release %d: not 1", n);
            freeReplyObject(rel);
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

Test(concurrency, leases_never_above_the_limit)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static struct client_arg args[CLIENTS];
    run_clients(lease_client, args, d->port);
    /* Kept leases (odd-numbered acquires) are never released, so the pool fills and stays
     * full: exactly POOL are held, whatever the interleaving, and no acquire ever saw more. */
    int kept = 0;
    for (int i = 0; i < CLIENTS; i++)
        kept += args[i].admitted / 2;
    redisContext *c = it_connect(d->port);
    cr_expect_eq(kept, POOL, "leases kept by the clients: %d", kept);
    IT_INT(it_cmd(c, "LEASE.COUNT pool"), POOL);
    IT_NIL(it_cmd(c, "LEASE.ACQUIRE pool %d 3600000", POOL));
    /* A full pool with WAIT: nil at the timeout, never before it (the leases last an hour). */
    long long t0 = it_now_ms();
    IT_NIL(it_cmd(c, "LEASE.ACQUIRE pool %d 3600000 WAIT 30", POOL));
    cr_expect_geq(it_now_ms() - t0, 30, "answered before its timeout");
    /* WAIT with capacity left answers at once, as without it. */
    redisReply *all = it_cmd(c, "THROTTLE.ALL 1 t LIMIT 1 1 1 1 WAIT 0");
    cr_expect(all->type == REDIS_REPLY_ARRAY && all->elements == 4 &&
              all->element[0]->integer == 0, "THROTTLE.ALL with room and WAIT 0 not admitted");
    freeReplyObject(all);
    IT_INT(it_cmd(c, "LEASE.COUNT pool"), POOL);
    redisFree(c);
    it_stop(d);
}
