/* pubsub.h - Pub/Sub: who is subscribed to what, and delivering published messages into the
 * subscribers' reply buffers on the I/O threads that own them (DESIGN.md "Pub/Sub").
 *
 * Every I/O thread attaches once (pubsub_thread_attach) and keeps its own table of its
 * connections' subscriptions. Only that thread changes its table, under the table's rwlock;
 * publishers on other threads read it under the read lock to count receivers and leave the
 * message in the thread's inbox (a lock-free list), then wake the thread, which delivers it to
 * the subscribers it has at that moment. A publisher delivers to its own thread's subscribers
 * at once. No lock is common to all publishers, and messages from one publisher reach every
 * subscriber in the order they were published. The wake-ups of a loop turn's publishes are sent
 * together at the turn's end (pubsub_flush_wakes).
 *
 * Lock order: a caller may hold keyspace shard locks when it publishes; a table's rwlock is
 * taken last and nothing is locked while it is held. */
#ifndef RLIMITD_PUBSUB_H
#define RLIMITD_PUBSUB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rlimitd/buf.h"

/* The three kinds of subscription, as Redis 7.0 has them. */
enum pubsub_kind {
    PUBSUB_CHANNEL = 0, /* SUBSCRIBE / PUBLISH */
    PUBSUB_PATTERN = 1, /* PSUBSCRIBE: a glob matched against PUBLISH's channel */
    PUBSUB_SHARD = 2,   /* SSUBSCRIBE / SPUBLISH: channels of their own, no patterns */
};
#define PUBSUB_KINDS 3

/* Sets up the registry for nthreads I/O threads (before they start) / frees it (after every
 * thread detached). Without pubsub_init, subscriptions are only counted per connection and
 * PUBLISH reaches nobody (unit tests, fuzz). */
void pubsub_init(int nthreads);
void pubsub_free(void);

/* On I/O thread `index` before it serves connections: from then on the thread's connections
 * may subscribe. wake(wake_ud) is called from any thread when messages wait in the thread's
 * inbox: the thread must then call pubsub_drain. kick(conn) is called on the thread after
 * frames were appended to a connection's reply buffer: the connection should write them. */
void pubsub_thread_attach(int index, void (*wake)(void *ud), void *wake_ud,
                          void (*kick)(void *conn));
/* At the thread's end, after its connections are gone: drops undelivered messages. */
void pubsub_thread_detach(void);

/* Wakes the threads this thread's publishes left messages for since the last call (a publish
 * on an attached thread leaves them unwoken: the loop calls this once per turn, before it
 * writes the turn's replies, so a publisher's reply never overtakes the wake-up). */
void pubsub_flush_wakes(void);

/* Delivers the messages waiting in this thread's inbox. Returns how many. */
size_t pubsub_drain(void);
/* Delivers the oldest waiting messages, about `budget` bytes of them, and returns whether more
 * wait: a thread woken for a long backlog writes it out in parts of that size, so each
 * subscriber's reply buffer stays small (reused, in cache) whatever the backlog. */
int pubsub_drain_some(size_t budget);
/* Whether messages wait for this thread (one relaxed load: call it before every command). */
int pubsub_pending(void);

/* One connection's subscriptions. Created and freed on the connection's own thread; out is the
 * connection's reply buffer, resp its RESP version (2 or 3, read at each delivery), conn what
 * kick is called with. */
struct pubsub_client;
struct pubsub_client *pubsub_client_new(void *conn, struct rbuf *out, const unsigned char *resp);
/* Unsubscribes from everything without replies (disconnect), and frees c (NULL is a no-op). */
void pubsub_client_free(struct pubsub_client *c);

/* Subscribes / unsubscribes c to the name. Returns 1 if that changed anything, 0 if c was
 * already (not) subscribed. Messages published before the call are delivered first. */
int pubsub_subscribe(struct pubsub_client *c, enum pubsub_kind k, const char *name, size_t len);
int pubsub_unsubscribe(struct pubsub_client *c, enum pubsub_kind k, const char *name,
                       size_t len);
/* The oldest subscription of kind k still held (for an UNSUBSCRIBE without arguments, which
 * drops them one at a time): 1 with *name (valid until it is unsubscribed) and *len, or 0. */
int pubsub_first(struct pubsub_client *c, enum pubsub_kind k, const char **name,
                 size_t *len);
/* How many subscriptions of kind k c holds; any thread may read it (CLIENT LIST). */
uint32_t pubsub_count(const struct pubsub_client *c, enum pubsub_kind k);
/* Whether c holds any subscription (NULL: no). */
int pubsub_subscribed(const struct pubsub_client *c);

/* Publishes msg on chan (kind PUBSUB_CHANNEL: channel and pattern subscribers; PUBSUB_SHARD:
 * shard channel subscribers) and returns the number of receivers on every thread. Safe on any
 * thread, with shard locks held. */
int64_t pubsub_publish(enum pubsub_kind k, const char *chan, size_t clen, const char *msg,
                       size_t mlen);

/* Whether any connection on any thread holds any subscription: a few relaxed loads, for
 * callers that would build a message (keyspace notifications) only to find nobody listens.
 * A subscription completed before the call is seen. */
int pubsub_any(void);

/* PUBSUB NUMSUB / SHARDNUMSUB: subscribers of one channel on every thread. */
int64_t pubsub_numsub(enum pubsub_kind k, const char *name, size_t len);
/* PUBSUB CHANNELS / SHARDCHANNELS / the distinct patterns: calls fn once per distinct name of
 * kind k that matches pat (Redis's glob; pat NULL: all). Returns how many. fn may be NULL. */
typedef void (*pubsub_name_fn)(void *ud, const char *name, size_t len);
int64_t pubsub_names(enum pubsub_kind k, const char *pat, size_t plen, pubsub_name_fn fn,
                     void *ud);

/* Figures for INFO and /metrics. */
struct pubsub_stats {
    uint64_t subscribers; /* connections holding at least one subscription */
    uint64_t published;   /* PUBLISH and SPUBLISH calls */
    uint64_t delivered;   /* frames delivered to subscribers */
};
void pubsub_get_stats(struct pubsub_stats *st);

#endif
