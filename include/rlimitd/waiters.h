/* waiters.h - the requests that wait for capacity (the WAIT option of CL.THROTTLE, GCRA,
 * THROTTLE.ALL and LEASE.ACQUIRE; COMMANDS.md "Waiting for capacity"): one first-come
 * first-served queue per key, shared by every I/O thread (src/cmd/cmd_wait.c).
 *
 * The command layer parks a refused request here and answers nothing; the network layer
 * (src/net/blocked.c) holds the connection, runs the request again when its turn may have come
 * and at its timeout, and calls wait_leave when it has answered or the connection is gone.
 *
 * Only the head of a key's queue is ever run again, on its own connection's thread: when it
 * becomes the head (the one before it left), at the time the limiter said capacity returns,
 * and when a lease of the key is released. Other threads reach a waiter only under the
 * registry's lock, to link it into its home's inbox and wake the home (DESIGN.md "Waiting"). */
#ifndef RLIMITD_WAITERS_H
#define RLIMITD_WAITERS_H

#include <stdint.h>

#include "rlimitd/fifo.h"

struct wait_home;

struct waiter {
    /* Under the registry's lock. */
    struct fifo_link link;    /* in its key's queue (in: NULL once it has left) */
    struct waiter *poke_next; /* in its home's inbox, while poked */
    unsigned char poked;
    /* Its own thread's only. */
    struct wait_home *home;
    void *owner;        /* the network layer's record of the blocked connection */
    int64_t timeout_ms; /* WAIT's argument: 0 waits without a timeout */
    /* Set by the handler's run: 1 if it parked the request (answered nothing). */
    unsigned char parked;
    /* When the limiter admits the request, in ns from the run that parked it: -1 when only
     * another waiter's leaving (or a released lease) can change that (parked behind others). */
    int64_t retry_in_ns;
};

/* One per I/O thread: where other threads leave the waiters whose turn may have come. poke is
 * called with the registry's lock held (it must take no lock: uv_async_send). */
struct wait_home {
    struct waiter *inbox; /* under the registry's lock */
    int open;             /* 0 once the thread's loop is gone: no more pokes */
    void (*poke)(struct wait_home *h);
    void *ud;
};

void wait_home_init(struct wait_home *h, void (*poke)(struct wait_home *h), void *ud);
/* No poke reaches h after this returns. */
void wait_home_close(struct wait_home *h);
/* Takes one waiter from the home's inbox (to run again), or NULL when it is empty. */
struct waiter *wait_home_pop(struct wait_home *h);
/* The waiter leaves its queue (answered, timed out, its connection gone) and its home's inbox;
 * if it was the head, the next waiter becomes the head and is poked. Idempotent. */
void wait_leave(struct waiter *w);
/* Whether w is its queue's head (under the lock). */
int wait_is_head(struct waiter *w);
/* How many requests wait right now (INFO blocked_clients). */
int64_t wait_count(void);

#endif
