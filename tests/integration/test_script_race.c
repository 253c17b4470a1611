/* test_script_race.c - scripts under concurrency on the real daemon with 2 I/O threads: clients
 * running EVAL and EVALSHA (declared and undeclared keys, inside MULTI too) while another sends
 * SCRIPT FLUSH in a loop and another starts runaway scripts that a third stops with SCRIPT KILL
 * (issue 27). Every reply must be one the contract allows (a result, NOSCRIPT after a flush,
 * BUSY while a runaway script holds a thread), and every counter must equal the increments the
 * clients saw answered: nothing lost, nothing run twice. Counts, not timings, decide. The
 * build-tsan step of tests/run-all.sh runs it against the daemon under ThreadSanitizer. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(script_race, .fini = it_fini, .timeout = 900);

enum { WORKERS = 6, ROUNDS = 150, KILLS = 8 };

#define INCR_SCRIPT "return redis.call('incr', KEYS[1])"
#define UNDECLARED_SCRIPT "return redis.call('incr', 'race:undeclared')"
#define RUNAWAY_SCRIPT "local i = 0 while true do i = i + 1 end"

struct worker {
    int port, id;
    const char *sha;            /* SHA1 of INCR_SCRIPT */
    long long declared;         /* increments of race:k<id % 3> answered */
    long long undeclared;       /* of race:undeclared, outside and inside MULTI */
    long long in_multi;         /* of race:multi */
    char err[512];
};

static atomic_int workers_left;

static int busy(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
}

/* SCRIPT KILL stops every script past busy-reply-threshold, and under TSan a worker's short
 * script can pass it before its INCR: that script did not run. */
static int killed(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strstr(r->str, "Script killed by user") != NULL;
}

/* A reply the contract allows for an increment: its value (> 0), 0 for BUSY or a kill (not
 * run), or -1 with a->err set. */
static long long incr_reply(struct worker *a, redisReply *r, const char *what, int noscript_ok)
{
    long long v = -1;
    if (r == NULL)
        snprintf(a->err, sizeof a->err, "%s: no reply", what);
    else if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
        v = r->integer;
    else if (busy(r) || killed(r) || (noscript_ok && r->type == REDIS_REPLY_ERROR &&
                         strncmp(r->str, "NOSCRIPT", 8) == 0))
        v = 0;
    else
        snprintf(a->err, sizeof a->err, "%s: unexpected reply type %d: %s", what,
                 r ? r->type : -1, r && r->str ? r->str : "");
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* MULTI, a script on an undeclared key, INCR, EXEC. Counts only what an EXEC answered. */
static int transaction(struct worker *a, redisContext *c)
{
    redisReply *r = redisCommand(c, "MULTI");
    if (r == NULL || r->type != REDIS_REPLY_STATUS) {
        int ok = r != NULL && busy(r);
        if (!ok)
            snprintf(a->err, sizeof a->err, "MULTI: %s", r && r->str ? r->str : "no reply");
        if (r != NULL)
            freeReplyObject(r);
        return ok ? 0 : -1;
    }
    freeReplyObject(r);
    freeReplyObject(redisCommand(c, "EVAL %s 0", UNDECLARED_SCRIPT));
    freeReplyObject(redisCommand(c, "INCR race:multi"));
    r = redisCommand(c, "EXEC");
    if (r == NULL) {
        snprintf(a->err, sizeof a->err, "EXEC: no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_ARRAY) {
        if (r->elements != 2 ||
            (r->element[0]->type != REDIS_REPLY_INTEGER && !killed(r->element[0])) ||
            r->element[1]->type != REDIS_REPLY_INTEGER) {
            snprintf(a->err, sizeof a->err, "EXEC: %zu replies, first type %d: %s",
                     r->elements, r->elements ? r->element[0]->type : -1,
                     r->elements && r->element[0]->str ? r->element[0]->str : "");
            freeReplyObject(r);
            return -1;
        }
        a->undeclared += r->element[0]->type == REDIS_REPLY_INTEGER;
        a->in_multi++;
    } else if (r->type != REDIS_REPLY_ERROR ||
               (strncmp(r->str, "EXECABORT", 9) != 0 && !busy(r))) {
        snprintf(a->err, sizeof a->err, "EXEC: %s", r->str ? r->str : "?");
        freeReplyObject(r);
        return -1;
    } else if (busy(r)) {
        /* EXEC not run: still in MULTI. Leave it (DISCARD may meet BUSY too). */
        for (;;) {
            redisReply *dr = redisCommand(c, "DISCARD");
            int again = dr != NULL && busy(dr);
            if (dr != NULL)
                freeReplyObject(dr);
            if (!again)
                break;
        }
    }
    freeReplyObject(r);
    return 0;
}

static void *worker_main(void *p)
{
    struct worker *a = p;
    redisContext *c = redisConnect("127.0.0.1", a->port);
    if (c == NULL || c->err) {
        snprintf(a->err, sizeof a->err, "connect");
        goto out;
    }
    char key[32];
    snprintf(key, sizeof key, "race:k%d", a->id % 3);
    for (int i = 0; i < ROUNDS && a->err[0] == '\0'; i++) {
        long long v = incr_reply(a, redisCommand(c, "EVAL %s 1 %s", INCR_SCRIPT, key), "EVAL", 0);
        if (v < 0)
            break;
        a->declared += v > 0;
        v = incr_reply(a, redisCommand(c, "EVALSHA %s 1 %s", a->sha, key), "EVALSHA", 1);
        if (v < 0)
            break;
        a->declared += v > 0;
        v = incr_reply(a, redisCommand(c, "EVAL %s 0", UNDECLARED_SCRIPT), "undeclared", 0);
        if (v < 0)
            break;
        a->undeclared += v > 0;
        if (transaction(a, c) != 0)
            break;
    }
out:
    if (c != NULL)
        redisFree(c);
    atomic_fetch_sub(&workers_left, 1);
    return NULL;
}

struct flusher {
    int port, flushes;
    char err[256];
};

static void *flusher_main(void *p)
{
    struct flusher *f = p;
    redisContext *c = redisConnect("127.0.0.1", f->port);
    if (c == NULL || c->err) {
        snprintf(f->err, sizeof f->err, "connect");
        goto out;
    }
    while (atomic_load(&workers_left) > 0) {
        redisReply *r = redisCommand(c, f->flushes % 2 ? "SCRIPT FLUSH ASYNC" : "SCRIPT FLUSH");
        if (r == NULL || (r->type != REDIS_REPLY_STATUS && !busy(r))) {
            snprintf(f->err, sizeof f->err, "SCRIPT FLUSH: %s", r && r->str ? r->str : "?");
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        f->flushes++;
    }
out:
    if (c != NULL)
        redisFree(c);
    return NULL;
}

/* KILLS runaway scripts, each stopped by SCRIPT KILL from a second connection (which may land
 * on either thread: NOTBUSY until the script has passed busy-reply-threshold). An OK may have
 * stopped a slow worker script instead, so SCRIPT KILL is repeated until the runaway EVAL has
 * answered; the poll interval only paces the retries, no assertion depends on it. */
static void killer(int port)
{
    redisContext *runner = it_connect(port), *ctl = it_connect(port);
    for (int k = 0; k < KILLS; k++) {
        cr_assert_eq(redisAppendCommand(runner, "EVAL %s 0", RUNAWAY_SCRIPT), REDIS_OK);
        cr_assert_eq(redisBufferWrite(runner, &(int){0}), REDIS_OK);
        struct pollfd pfd = {.fd = runner->fd, .events = POLLIN};
        do {
            redisReply *r = it_cmd(ctl, "SCRIPT KILL");
            cr_assert(r->type == REDIS_REPLY_STATUS ||
                          (r->type == REDIS_REPLY_ERROR && (strncmp(r->str, "NOTBUSY", 7) == 0 ||
                                                            strncmp(r->str, "UNKILLABLE", 10) == 0)),
                      "SCRIPT KILL: %s", r->str);
            freeReplyObject(r);
        } while (poll(&pfd, 1, 50) == 0);
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(runner, (void **)&r), REDIS_OK, "runaway EVAL: %s",
                     runner->errstr);
        cr_assert(r->type == REDIS_REPLY_ERROR && killed(r), "runaway EVAL answered: %s",
                  r->str ? r->str : "?");
        freeReplyObject(r);
    }
    redisFree(runner);
    redisFree(ctl);
}

static long long get_int(redisContext *c, const char *key)
{
    redisReply *r = it_cmd(c, "GET %s", key);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    return v;
}

Test(script_race, eval_evalsha_flush_and_kill_from_many_connections)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "CONFIG SET busy-reply-threshold 20"), "OK");
    redisReply *r = it_cmd(c, "SCRIPT LOAD %s", INCR_SCRIPT);
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    char sha[41];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);

    struct worker w[WORKERS];
    struct flusher f = {.port = d->port};
    pthread_t th[WORKERS], fth;
    atomic_store(&workers_left, WORKERS);
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (struct worker){.port = d->port, .id = i, .sha = sha};
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    cr_assert_eq(pthread_create(&fth, NULL, flusher_main, &f), 0);
    killer(d->port);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    pthread_join(fth, NULL);

    long long declared[3] = {0}, undeclared = 0, in_multi = 0;
    for (int i = 0; i < WORKERS; i++) {
        cr_assert(w[i].err[0] == '\0', "worker %d: %s", i, w[i].err);
        declared[i % 3] += w[i].declared;
        undeclared += w[i].undeclared;
        in_multi += w[i].in_multi;
    }
    cr_assert(f.err[0] == '\0', "flusher: %s", f.err);
    cr_assert_gt(f.flushes, 0);
    for (int k = 0; k < 3; k++) {
        char key[32];
        snprintf(key, sizeof key, "race:k%d", k);
        cr_assert_eq(get_int(c, key), declared[k], "%s: the increments answered", key);
    }
    cr_assert_eq(get_int(c, "race:undeclared"), undeclared);
    cr_assert_eq(get_int(c, "race:multi"), in_multi);
    cr_assert_gt(in_multi, 0, "no transaction ran");
    redisFree(c);
    it_stop(d);
}
