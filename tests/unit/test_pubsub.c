/* test_pubsub.c - the Pub/Sub layer (src/pubsub) without the network: frames in both protocols,
 * subscription bookkeeping at scale (insertion order, removal in any order), patterns as
 * Redis's stringmatchlen, and delivery to a second thread through its inbox. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "rlimitd/buf.h"
#include "rlimitd/pubsub.h"

static int kicks;
static void kick(void *conn)
{
    (void)conn;
    kicks++;
}

static _Atomic int wakes;
static void wake(void *ud)
{
    (void)ud;
    atomic_fetch_add(&wakes, 1);
}

static void setup(void)
{
    pubsub_init(2);
    pubsub_thread_attach(0, wake, NULL, kick);
    kicks = 0;
    atomic_store(&wakes, 0);
}

static void teardown(void)
{
    pubsub_thread_detach();
    pubsub_free();
}

TestSuite(pubsub, .init = setup, .fini = teardown);

struct conn {
    struct rbuf out;
    unsigned char resp;
    struct pubsub_client *ps;
};

static void conn_open(struct conn *c, unsigned char resp)
{
    rbuf_init(&c->out);
    c->resp = resp;
    c->ps = pubsub_client_new(c, &c->out, &c->resp);
}

static void conn_close(struct conn *c)
{
    pubsub_client_free(c->ps);
    rbuf_free(&c->out);
}

static void expect_out(struct conn *c, const char *want)
{
    cr_assert_eq(c->out.len, strlen(want), "got %zu bytes: %.*s", c->out.len, (int)c->out.len,
                 c->out.p);
    cr_assert(memcmp(c->out.p, want, c->out.len) == 0, "got %.*s", (int)c->out.len, c->out.p);
    c->out.len = 0;
}

Test(pubsub, frames_in_both_protocols_channel_then_patterns)
{
    struct conn a, b;
    conn_open(&a, 2);
    conn_open(&b, 3);
    cr_assert_eq(pubsub_any(), 0);
    cr_assert_eq(pubsub_subscribe(a.ps, PUBSUB_CHANNEL, "news", 4), 1);
    cr_assert_eq(pubsub_any(), 1);
    cr_assert_eq(pubsub_subscribe(a.ps, PUBSUB_CHANNEL, "news", 4), 0);
    cr_assert_eq(pubsub_subscribe(a.ps, PUBSUB_PATTERN, "n*", 2), 1);
    cr_assert_eq(pubsub_subscribe(b.ps, PUBSUB_PATTERN, "n[a-z]ws", 8), 1);
    cr_assert_eq(pubsub_subscribe(b.ps, PUBSUB_SHARD, "news", 4), 1);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "news", 4, "hi", 2), 3);
    expect_out(&a, "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
                   "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    expect_out(&b, ">4\r\n$8\r\npmessage\r\n$8\r\nn[a-z]ws\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    /* Shard channels are their own namespace, and patterns do not see them. */
    cr_assert_eq(pubsub_publish(PUBSUB_SHARD, "news", 4, "x", 1), 1);
    expect_out(&b, ">3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$1\r\nx\r\n");
    cr_assert_eq(a.out.len, 0);
    cr_assert_eq(kicks, 4);
    cr_assert_eq(pubsub_numsub(PUBSUB_CHANNEL, "news", 4), 1);
    cr_assert_eq(pubsub_numsub(PUBSUB_SHARD, "news", 4), 1);
    cr_assert_eq(pubsub_names(PUBSUB_PATTERN, NULL, 0, NULL, NULL), 2);
    conn_close(&a);
    conn_close(&b);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "news", 4, "hi", 2), 0);
    cr_assert_eq(pubsub_names(PUBSUB_PATTERN, NULL, 0, NULL, NULL), 0);
    cr_assert_eq(pubsub_any(), 0);
}

Test(pubsub, empty_channel_matches_only_the_empty_pattern)
{
    struct conn a;
    conn_open(&a, 2);
    pubsub_subscribe(a.ps, PUBSUB_PATTERN, "*", 1);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "", 0, "m", 1), 0);
    pubsub_subscribe(a.ps, PUBSUB_PATTERN, "", 0);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "", 0, "m", 1), 1);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "x", 1, "m", 1), 1); /* "*" only */
    /* Escapes and ranges. */
    pubsub_subscribe(a.ps, PUBSUB_PATTERN, "a\\*b", 4);
    pubsub_subscribe(a.ps, PUBSUB_PATTERN, "h[^e]llo", 8);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "a*b", 3, "m", 1), 2);  /* "*" and a\*b */
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "axb", 3, "m", 1), 1);  /* "*" only */
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "hallo", 5, "m", 1), 2);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "hello", 5, "m", 1), 1);
    conn_close(&a);
}

/* 20000 subscriptions on one connection, dropped in a scrambled order half-way, then the
 * rest one at a time oldest first (what UNSUBSCRIBE without arguments does). */
Test(pubsub, many_subscriptions_keep_their_order)
{
    enum { N = 20000 };
    struct conn a;
    conn_open(&a, 2);
    char name[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(name, sizeof(name), "ch:%d", i);
        cr_assert_eq(pubsub_subscribe(a.ps, PUBSUB_CHANNEL, name, (size_t)n), 1);
    }
    cr_assert_eq(pubsub_count(a.ps, PUBSUB_CHANNEL), N);
    cr_assert_eq(pubsub_names(PUBSUB_CHANNEL, "ch:1999?", 8, NULL, NULL), 10);
    for (int i = 0; i < N / 2; i++) {
        int k = (int)(((long long)i * 7919) % N);
        int n = snprintf(name, sizeof(name), "ch:%d", k);
        pubsub_unsubscribe(a.ps, PUBSUB_CHANNEL, name, (size_t)n);
    }
    uint32_t left = pubsub_count(a.ps, PUBSUB_CHANNEL);
    cr_assert_eq(pubsub_names(PUBSUB_CHANNEL, NULL, 0, NULL, NULL), left);
    int last = -1;
    const char *p;
    size_t len;
    while (pubsub_first(a.ps, PUBSUB_CHANNEL, &p, &len)) {
        int k = atoi(p + 3);
        cr_assert_gt(k, last, "oldest first: %d after %d", k, last);
        last = k;
        char copy[32];
        memcpy(copy, p, len);
        cr_assert_eq(pubsub_unsubscribe(a.ps, PUBSUB_CHANNEL, copy, len), 1);
        cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, copy, len, "m", 1), 0);
        left--;
    }
    cr_assert_eq(left, 0);
    cr_assert_eq(pubsub_names(PUBSUB_CHANNEL, NULL, 0, NULL, NULL), 0);
    conn_close(&a);
}

/* Thread 1 attaches, subscribes, then waits; the test's thread publishes: the message waits
 * in thread 1's inbox until pubsub_flush_wakes wakes it, and thread 1 delivers it. */
static struct conn remote;
static pthread_barrier_t bar;
static int remote_pending;
static size_t remote_drained;
static char remote_got[256];

static void *remote_thread(void *arg)
{
    (void)arg;
    pubsub_thread_attach(1, wake, NULL, kick);
    conn_open(&remote, 3);
    pubsub_subscribe(remote.ps, PUBSUB_CHANNEL, "far", 3);
    pthread_barrier_wait(&bar); /* subscribed */
    pthread_barrier_wait(&bar); /* published */
    /* Checked by the test's thread: Criterion's asserts end a test from its own thread only. */
    remote_pending = pubsub_pending();
    remote_drained = pubsub_drain();
    snprintf(remote_got, sizeof(remote_got), "%.*s", (int)remote.out.len, remote.out.p);
    conn_close(&remote);
    pubsub_thread_detach();
    return NULL;
}

Test(pubsub, another_threads_subscriber_gets_it_through_the_inbox)
{
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t tid;
    pthread_create(&tid, NULL, remote_thread, NULL);
    pthread_barrier_wait(&bar);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "far", 3, "one", 3), 1);
    cr_assert_eq(pubsub_publish(PUBSUB_CHANNEL, "far", 3, "two", 3), 1);
    cr_assert_eq(atomic_load(&wakes), 0, "woken only at the turn's end");
    pubsub_flush_wakes();
    cr_assert_eq(atomic_load(&wakes), 1, "one wake-up for both messages");
    pthread_barrier_wait(&bar);
    pthread_join(tid, NULL);
    pthread_barrier_destroy(&bar);
    cr_assert_eq(remote_pending, 1);
    cr_assert_eq(remote_drained, 2);
    cr_assert_str_eq(remote_got, ">3\r\n$7\r\nmessage\r\n$3\r\nfar\r\n$3\r\none\r\n"
                                 ">3\r\n$7\r\nmessage\r\n$3\r\nfar\r\n$3\r\ntwo\r\n");
}
