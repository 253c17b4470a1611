/* test_pubsub.c - Pub/Sub on the real daemon across I/O threads (DESIGN.md "Pub/Sub"): every
 * message of several concurrent publishers reaches every subscriber, whichever thread each
 * connection landed on, in each publisher's order, and PUBLISH counts the receivers of every
 * thread; a subscriber that does not read is closed by the pubsub class of
 * client-output-buffer-limit while the publisher and the other subscribers go on. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(pubsub, .fini = it_fini, .timeout = 600);

#define SUBSCRIBERS 8
#define PUBLISHERS 4
#define MESSAGES 2000

struct publisher {
    int port, id;
    long long wrong_count; /* PUBLISH replies that were not SUBSCRIBERS */
    char err[128];
};

/* Publishes MESSAGES messages "<id>:<seq>" on "ord", pipelined 100 at a time. */
static void *publish_run(void *arg)
{
    struct publisher *p = arg;
    redisContext *c = redisConnect("127.0.0.1", p->port);
    if (c == NULL || c->err) {
        snprintf(p->err, sizeof(p->err), "connect failed");
        return NULL;
    }
    for (int base = 0; base < MESSAGES; base += 100) {
        for (int i = base; i < base + 100; i++)
            redisAppendCommand(c, "PUBLISH ord %d:%d", p->id, i);
        for (int i = base; i < base + 100; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) {
                snprintf(p->err, sizeof(p->err), "no reply to PUBLISH %d", i);
                redisFree(c);
                return NULL;
            }
            if (r->type != REDIS_REPLY_INTEGER || r->integer != SUBSCRIBERS)
                p->wrong_count++;
            freeReplyObject(r);
        }
    }
    redisFree(c);
    return NULL;
}

Test(pubsub, every_message_in_publisher_order_across_threads)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    redisContext *subs[SUBSCRIBERS];
    for (int i = 0; i < SUBSCRIBERS; i++) {
        subs[i] = it_connect(d->port);
        redisReply *r = it_cmd(subs[i], "SUBSCRIBE ord");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(r->element[2]->integer, 1);
        freeReplyObject(r);
    }
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "PUBSUB NUMSUB ord");
    cr_assert_eq(r->element[1]->integer, SUBSCRIBERS);
    freeReplyObject(r);

    pthread_t tids[PUBLISHERS];
    struct publisher pubs[PUBLISHERS];
    for (int i = 0; i < PUBLISHERS; i++) {
        pubs[i] = (struct publisher){.port = d->port, .id = i};
        pthread_create(&tids[i], NULL, publish_run, &pubs[i]);
    }
    /* The subscribers read while the publishers run: each sees each publisher's sequence
     * 0, 1, 2, ... with nothing missing, repeated or reordered. */
    for (int s = 0; s < SUBSCRIBERS; s++) {
        int next[PUBLISHERS] = {0};
        for (int n = 0; n < PUBLISHERS * MESSAGES; n++) {
            redisReply *m = NULL;
            cr_assert_eq(redisGetReply(subs[s], (void **)&m), REDIS_OK,
                         "subscriber %d: message %d did not arrive", s, n);
            cr_assert_eq(m->type, REDIS_REPLY_ARRAY);
            cr_assert_eq(m->elements, 3);
            cr_assert_str_eq(m->element[0]->str, "message");
            int id, seq;
            cr_assert_eq(sscanf(m->element[2]->str, "%d:%d", &id, &seq), 2);
            cr_assert(id >= 0 && id < PUBLISHERS);
            cr_assert_eq(seq, next[id], "subscriber %d got %d:%d, expected %d:%d", s, id, seq, id,
                         next[id]);
            next[id]++;
            freeReplyObject(m);
        }
    }
    for (int i = 0; i < PUBLISHERS; i++) {
        pthread_join(tids[i], NULL);
        cr_assert_str_eq(pubs[i].err, "", "publisher %d: %s", i, pubs[i].err);
        cr_assert_eq(pubs[i].wrong_count, 0, "publisher %d: %lld replies did not count %d", i,
                     pubs[i].wrong_count, SUBSCRIBERS);
    }
    /* The counters agree: every message to every subscriber. */
    cr_assert_geq(it_info_int(c, "stats", "pubsub_channels"), 1);
    for (int i = 0; i < SUBSCRIBERS; i++)
        redisFree(subs[i]);
    redisFree(c);
    it_stop(d); /* asserts a clean exit and log */
}

/* A subscriber with a small receive buffer that never reads. */
static int lazy_subscriber(int port)
{
    int fd = it_raw_connect(port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    const char sub[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nslow\r\n";
    it_raw_send(fd, sub, sizeof(sub) - 1);
    redisReply *r[1];
    cr_assert_eq(it_raw_read_replies(fd, 1, r), 1);
    freeReplyObject(r[0]);
    return fd;
}

Test(pubsub, slow_subscriber_is_closed_by_the_pubsub_limit_publisher_goes_on)
{
    struct it_daemon *d = it_start(
        IT_ARGS("--threads", "2", "--client-output-buffer-limit", "pubsub 256kb 128kb 60"));
    int lazy = lazy_subscriber(d->port);
    redisContext *fast = it_connect(d->port);
    freeReplyObject(it_cmd(fast, "SUBSCRIBE slow"));
    redisContext *pub = it_connect(d->port);
    char payload[8192];
    memset(payload, 'x', sizeof(payload));
    /* 8 MB in all: far past the hard limit plus whatever the sockets hold. The fast subscriber
     * reads as it goes; the publisher's every call returns. */
    int published = 0, closed_at = -1;
    for (int i = 0; i < 1000; i++) {
        redisReply *r = it_cmd(pub, "PUBLISH slow %b", payload, sizeof(payload));
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        cr_assert(r->integer == 1 || r->integer == 2, "PUBLISH answered %lld", r->integer);
        if (r->integer == 1 && closed_at < 0)
            closed_at = i;
        freeReplyObject(r);
        published++;
        redisReply *m = NULL;
        cr_assert_eq(redisGetReply(fast, (void **)&m), REDIS_OK);
        cr_assert_eq(m->element[2]->len, sizeof(payload));
        freeReplyObject(m);
    }
    cr_assert_eq(published, 1000);
    cr_assert_geq(closed_at, 0, "the subscriber that does not read was never dropped");
    /* Once closed it stays gone: NUMSUB counts only the reader. */
    redisReply *r = it_cmd(pub, "PUBSUB NUMSUB slow");
    cr_assert_eq(r->element[1]->integer, 1);
    freeReplyObject(r);
    char *log = it_read_file(d->log);
    cr_assert(strstr(log, "for overcoming of output buffer limits") != NULL, "log: %s", log);
    cr_assert(strstr(log, "flags=P") != NULL, "the closed client's line shows it subscribed");
    free(log);
    close(lazy);
    redisFree(fast);
    redisFree(pub);
    it_stop(d); /* asserts a clean exit and log */
}

/* A subscriber's connection closing drops its subscriptions at once, on whichever thread. */
Test(pubsub, disconnect_unsubscribes)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    redisContext *c = it_connect(d->port);
    for (int round = 0; round < 20; round++) {
        redisContext *s = it_connect(d->port);
        freeReplyObject(it_cmd(s, "SUBSCRIBE a b"));
        freeReplyObject(it_cmd(s, "PSUBSCRIBE p*"));
        freeReplyObject(it_cmd(s, "SSUBSCRIBE sh"));
        IT_INT(it_cmd(c, "PUBLISH a x"), 1);
        IT_INT(it_cmd(c, "PUBLISH pq x"), 1);
        redisFree(s);
        /* The close is seen by the server soon; wait for it without a clock in the check. */
        long long n = -1;
        for (int tries = 0; tries < 1000 && n != 0; tries++) {
            redisReply *r = it_cmd(c, "PUBSUB NUMPAT");
            n = r->integer;
            freeReplyObject(r);
            if (n != 0)
                usleep(10 * 1000);
        }
        cr_assert_eq(n, 0);
        IT_INT(it_cmd(c, "PUBLISH a x"), 0);
        IT_INT(it_cmd(c, "SPUBLISH sh x"), 0);
    }
    redisFree(c);
    it_stop(d); /* asserts a clean exit and log */
}

/* GET /metrics on port; the body (malloc'd). */
static char *scrape(int port)
{
    int fd = it_raw_connect(port);
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    struct it_io io;
    it_raw_exchange(fd, req, sizeof(req) - 1, 10000, 1 << 24, 0, &io);
    close(fd);
    char *body = strstr(io.data, "\r\n\r\n");
    cr_assert(body != NULL, "GET /metrics: %.200s", io.data);
    char *copy = strdup(body + 4);
    free(io.data);
    return copy;
}

/* What operators see: INFO's counts of distinct names, CLIENT LIST's sub/psub/ssub and flag P,
 * and /metrics' subscribers, channels and message counters, over connections on both threads. */
Test(pubsub, info_client_list_and_metrics)
{
    int mport = it_free_port();
    char mp[16];
    snprintf(mp, sizeof mp, "%d", mport);
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2", "--metrics-port", mp));
    redisContext *a = it_connect(d->port), *b = it_connect(d->port), *c = it_connect(d->port);
    freeReplyObject(it_cmd(a, "CLIENT SETNAME subA"));
    redisReply *r = it_cmd(a, "SUBSCRIBE x y");
    freeReplyObject(r);
    redisGetReply(a, (void **)&r); /* the second notification */
    freeReplyObject(r);
    freeReplyObject(it_cmd(a, "PSUBSCRIBE p*"));
    freeReplyObject(it_cmd(a, "SSUBSCRIBE s"));
    r = it_cmd(b, "SUBSCRIBE y z");
    freeReplyObject(r);
    redisGetReply(b, (void **)&r);
    freeReplyObject(r);
    freeReplyObject(it_cmd(b, "PSUBSCRIBE p*"));

    cr_assert_eq(it_info_int(c, "stats", "pubsub_channels"), 3); /* x y z */
    cr_assert_eq(it_info_int(c, "stats", "pubsub_patterns"), 1); /* p* twice */
    cr_assert_eq(it_info_int(c, "stats", "pubsubshard_channels"), 1);
    r = it_cmd(c, "CLIENT LIST");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    const char *line = strstr(r->str, "name=subA");
    cr_assert(line != NULL, "%s", r->str);
    cr_assert(strstr(line, "flags=P db=0 sub=2 psub=1 ssub=1 ") != NULL, "%s", r->str);
    freeReplyObject(r);
    r = it_cmd(c, "CLIENT INFO");
    cr_assert(strstr(r->str, "flags=N db=0 sub=0 psub=0 ssub=0 ") != NULL, "%s", r->str);
    freeReplyObject(r);

    IT_INT(it_cmd(c, "PUBLISH y m"), 2);
    IT_INT(it_cmd(c, "PUBLISH px m"), 2);
    IT_INT(it_cmd(c, "SPUBLISH s m"), 1);
    /* Delivery is counted before the frames are written: once the subscribers hold all five,
     * the counter has them (a thread other than the publisher's delivers in its own time). */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(redisGetReply(a, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(redisGetReply(b, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    char *m = scrape(mport);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_subscribers"), 2);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_channels{kind=\"channel\"}"), 3);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_channels{kind=\"pattern\"}"), 1);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_channels{kind=\"shard\"}"), 1);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_published_total"), 3);
    cr_assert_eq(it_metric_sample(m, "rlimitd_pubsub_delivered_total"), 5);
    free(m);

    /* RESET leaves the subscribed state and every subscription. */
    freeReplyObject(it_cmd(a, "RESET"));
    cr_assert_eq(it_info_int(c, "stats", "pubsub_channels"), 2);
    cr_assert_eq(it_info_int(c, "stats", "pubsubshard_channels"), 0);
    IT_INT(it_cmd(c, "PUBLISH x m"), 0);
    redisFree(a);
    redisFree(b);
    redisFree(c);
    it_stop(d); /* asserts a clean exit and log */
}

/* The names of the CLIENT LIST lines of c's `CLIENT LIST <args>`, in order, space separated. */
static void listed_names(redisContext *c, const char *args, char *out, size_t outlen)
{
    char cmd[160]; /* the words of args as arguments of their own (no '%' in them) */
    snprintf(cmd, sizeof cmd, "CLIENT LIST %s", args);
    redisReply *r = it_cmd(c, cmd);
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "CLIENT LIST %s: %s", args, r->str);
    out[0] = '\0';
    size_t used = 0;
    for (const char *p = r->str; (p = strstr(p, " name=")) != NULL; p++) {
        size_t n = strcspn(p + 6, " \n");
        cr_assert(used + n + 2 < outlen);
        if (used > 0)
            out[used++] = ' ';
        memcpy(out + used, p + 6, n);
        used += n;
        out[used] = '\0';
    }
    freeReplyObject(r);
}

/* A killed connection answers nothing more: its next command finds the connection closed. */
static void assert_closed(redisContext *c, const char *who)
{
    redisReply *r = redisCommand(c, "PING");
    cr_assert(r == NULL && c->err != 0, "%s was not closed", who);
}

/* Sends cmds (inline commands) and a PING on a raw RESP3 connection and reads up to its +PONG
 * (the connection's replies and pushes before it are dropped); 0 if the peer closed first. */
static int raw3_run(int fd, const char *cmds)
{
    char req[256];
    snprintf(req, sizeof req, "%sPING\r\n", cmds);
    it_raw_send(fd, req, strlen(req));
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t k = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
        if (k <= 0)
            return 0;
        have += (size_t)k;
        buf[have] = '\0';
        if (strstr(buf, "+PONG\r\n") != NULL)
            return 1;
        if (have > sizeof(buf) / 2) { /* keep the tail, where +PONG will be */
            memmove(buf, buf + have - 16, 16);
            have = 16;
        }
    }
}

/* A connection is of Redis's pubsub class while it holds a subscription, on RESP2 and RESP3
 * alike: CLIENT LIST TYPE and CLIENT KILL TYPE find it by that class, with the other filters
 * and SKIPME; CLIENT LIST ID lists given ids in the given order, also thousands of them. */
Test(pubsub, client_list_and_kill_by_type)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2", "--proto-max-args", "100000"));
    /* One after the other, each answered before the next connects: the ids are in this order
     * (the two threads accept connections that arrive together in either order). */
    redisContext *a = it_connect(d->port);
    freeReplyObject(it_cmd(a, "CLIENT SETNAME a"));
    redisContext *n = it_connect(d->port);
    freeReplyObject(it_cmd(n, "CLIENT SETNAME n"));
    redisContext *s2 = it_connect(d->port);
    freeReplyObject(it_cmd(s2, "CLIENT SETNAME s2"));
    int s3 = it_raw_connect(d->port); /* RESP3: this hiredis reads RESP2 only */
    cr_assert(raw3_run(s3, "HELLO 3\r\nCLIENT SETNAME s3\r\nPSUBSCRIBE p*\r\n"));
    freeReplyObject(it_cmd(s2, "SUBSCRIBE x"));
    char names[256];
    listed_names(a, "", names, sizeof names);
    cr_assert_str_eq(names, "a n s2 s3"); /* oldest first, as Redis lists them */
    listed_names(a, "TYPE pubsub", names, sizeof names);
    cr_assert_str_eq(names, "s2 s3");
    listed_names(a, "type NORMAL", names, sizeof names);
    cr_assert_str_eq(names, "a n");
    const char *none[] = {"TYPE master", "TYPE replica", "TYPE slave"};
    for (int i = 0; i < 3; i++) {
        listed_names(a, none[i], names, sizeof names);
        cr_assert_str_eq(names, "", "%s listed %s", none[i], names);
    }
    IT_ERR(it_cmd(a, "CLIENT LIST TYPE nope"), "ERR Unknown client type 'nope'");
    IT_ERR(it_cmd(a, "CLIENT LIST TYPE normal ID 1"), "ERR syntax error");
    IT_ERR(it_cmd(a, "CLIENT KILL TYPE nope"), "ERR Unknown client type 'nope'");

    long long ida = it_int(it_cmd(a, "CLIENT ID")), idn = it_int(it_cmd(n, "CLIENT ID"));
    char args[128];
    snprintf(args, sizeof args, "ID %lld 0 999999 %lld -4 %lld", idn, ida, idn);
    listed_names(a, args, names, sizeof names);
    cr_assert_str_eq(names, "n a n");
    IT_ERR(it_cmd(a, "CLIENT LIST ID %lld x", ida), "ERR Invalid client ID");
    /* 20,000 ids (proto-max-args raised), one in a thousand a connection's. */
    enum { IDS = 20000 };
    const char **argv = malloc((IDS + 3) * sizeof(*argv));
    char(*num)[24] = malloc(IDS * sizeof(*num));
    argv[0] = "CLIENT";
    argv[1] = "LIST";
    argv[2] = "ID";
    for (int i = 0; i < IDS; i++) {
        snprintf(num[i], sizeof num[i], "%lld", i % 1000 == 7 ? ida : 1000000 + (long long)i);
        argv[i + 3] = num[i];
    }
    redisReply *r = it_cmdargv(a, IDS + 3, argv);
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%d %s", r->type, r->str);
    int lines = 0;
    for (const char *p = r->str; (p = strstr(p, " name=a ")) != NULL; p++)
        lines++;
    cr_assert_eq(lines, IDS / 1000, "%d lines of a", lines);
    freeReplyObject(r);
    free(argv);
    free(num);

    /* Unsubscribed, s3 (RESP3) is normal again. */
    cr_assert(raw3_run(s3, "PUNSUBSCRIBE\r\n"));
    listed_names(a, "TYPE pubsub", names, sizeof names);
    cr_assert_str_eq(names, "s2");
    /* Filters combine: the pubsub one at n's address is nobody. */
    redisReply *info = it_cmd(n, "CLIENT INFO");
    char addr[64];
    const char *p = strstr(info->str, "addr=");
    cr_assert(p != NULL);
    snprintf(addr, sizeof addr, "%.*s", (int)strcspn(p + 5, " "), p + 5);
    freeReplyObject(info);
    IT_INT(it_cmd(a, "CLIENT KILL TYPE pubsub ADDR %s", addr), 0);
    IT_INT(it_cmd(a, "CLIENT KILL TYPE pubsub USER default"), 1);
    assert_closed(s2, "the pubsub connection");
    IT_INT(it_cmd(a, "CLIENT KILL TYPE pubsub"), 0); /* gone, not counted twice */
    /* SKIPME yes (the default) spares the caller; the other normal ones go. */
    IT_INT(it_cmd(a, "CLIENT KILL TYPE normal"), 2);
    assert_closed(n, "n");
    cr_assert(!raw3_run(s3, ""), "s3 was not closed");
    listed_names(a, "", names, sizeof names);
    cr_assert_str_eq(names, "a");
    /* SKIPME no: the caller too, after its reply. */
    IT_INT(it_cmd(a, "CLIENT KILL TYPE normal SKIPME no"), 1);
    assert_closed(a, "the caller");
    redisFree(a);
    redisFree(n);
    redisFree(s2);
    close(s3);
    it_stop(d);
}
