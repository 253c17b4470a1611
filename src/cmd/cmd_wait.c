/* cmd_wait.c - the registry of requests waiting for capacity (rlimitd/waiters.h, cmd_wait.h):
 * one FIFO queue per key, found by the key's hash, shared by every I/O thread under one lock.
 *
 * The lock is a leaf (DESIGN.md, lock order): taken with shard locks held (a handler parking or
 * notifying), or alone (a connection leaving), and nothing is locked while holding it; the
 * home's poke (uv_async_send) takes no lock. A queue exists while it holds a waiter. */
#include "cmd_wait.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/waiters.h"

#define NBUCKETS 4096u

struct wait_queue {
    struct wait_queue *next; /* in its bucket */
    struct fifo waiters;
    uint64_t hash;
    size_t len;
    char key[];
};

static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wait_queue *buckets[NBUCKETS];
static _Atomic int64_t nwaiting;

static struct waiter *head_of(const struct wait_queue *q)
{
    return FIFO_ENTRY(q->waiters.head, struct waiter, link);
}

static struct wait_queue **slot_of(const struct ks_key *key)
{
    struct wait_queue **p = &buckets[key->hash & (NBUCKETS - 1)];
    while (*p != NULL && ((*p)->hash != key->hash || (*p)->len != key->len ||
                          memcmp((*p)->key, key->p, key->len) != 0))
        p = &(*p)->next;
    return p;
}

/* Under the lock: w's home runs it again soon. */
static void poke(struct waiter *w)
{
    struct wait_home *h = w->home;
    if (w->poked || !h->open)
        return;
    w->poked = 1;
    w->poke_next = h->inbox;
    h->inbox = w;
    h->poke(h);
}

void wait_home_init(struct wait_home *h, void (*pk)(struct wait_home *h), void *ud)
{
    h->inbox = NULL;
    h->open = 1;
    h->poke = pk;
    h->ud = ud;
}

void wait_home_close(struct wait_home *h)
{
    pthread_mutex_lock(&wait_lock);
    h->open = 0;
    for (struct waiter *w = h->inbox; w != NULL; w = w->poke_next)
        w->poked = 0;
    h->inbox = NULL;
    pthread_mutex_unlock(&wait_lock);
}

struct waiter *wait_home_pop(struct wait_home *h)
{
    pthread_mutex_lock(&wait_lock);
    struct waiter *w = h->inbox;
    if (w != NULL) {
        h->inbox = w->poke_next;
        w->poke_next = NULL;
        w->poked = 0;
    }
    pthread_mutex_unlock(&wait_lock);
    return w;
}

/* Under the lock: w out of its home's inbox (a short list: the pokes of one loop turn). */
static void unpoke(struct waiter *w)
{
    if (!w->poked)
        return;
    for (struct waiter **p = &w->home->inbox; *p != NULL; p = &(*p)->poke_next)
        if (*p == w) {
            *p = w->poke_next;
            break;
        }
    w->poked = 0;
    w->poke_next = NULL;
}

void wait_leave(struct waiter *w)
{
    pthread_mutex_lock(&wait_lock);
    unpoke(w);
    struct fifo *in = w->link.in;
    int was_head = fifo_unlink(&w->link);
    if (was_head >= 0) {
        struct wait_queue *q = FIFO_ENTRY(in, struct wait_queue, waiters);
        nwaiting--;
        if (fifo_is_empty(&q->waiters)) {
            struct ks_key k = {q->key, q->len, q->hash};
            struct wait_queue **p = slot_of(&k);
            *p = q->next;
            free(q);
        } else if (was_head) {
            poke(head_of(q));
        }
    }
    pthread_mutex_unlock(&wait_lock);
}

int wait_is_head(struct waiter *w)
{
    pthread_mutex_lock(&wait_lock);
    int head = fifo_is_head(&w->link);
    pthread_mutex_unlock(&wait_lock);
    return head;
}

int64_t wait_count(void)
{
    return nwaiting;
}

int wait_may(const struct cmd_ctx *x)
{
    return x->s != NULL && x->s->wait_home != NULL && !x->all_locked && !x->s->wait_off;
}

/* Under the lock: a new waiter for the session at the back of key's queue. */
static struct waiter *join(struct cmd_ctx *x, const struct ks_key *key, int64_t timeout_ms)
{
    struct wait_queue **p = slot_of(key);
    if (*p == NULL) {
        struct wait_queue *q = xmalloc(sizeof(*q) + key->len);
        q->next = NULL;
        fifo_init(&q->waiters);
        q->hash = key->hash;
        q->len = key->len;
        memcpy(q->key, key->p, key->len);
        *p = q;
    }
    struct wait_queue *q = *p;
    struct waiter *w = xcalloc(1, sizeof(*w));
    w->home = x->s->wait_home;
    w->timeout_ms = timeout_ms;
    fifo_push(&q->waiters, &w->link);
    nwaiting++;
    x->s->waiter = w;
    return w;
}

int wait_behind(struct cmd_ctx *x, const struct ks_key *key, int64_t timeout_ms)
{
    if (x->s->waiter != NULL)
        return 0; /* the head, run again */
    pthread_mutex_lock(&wait_lock);
    int queued = *slot_of(key) != NULL;
    if (queued) {
        struct waiter *w = join(x, key, timeout_ms);
        w->parked = 1;
        w->retry_in_ns = -1;
    }
    pthread_mutex_unlock(&wait_lock);
    return queued;
}

int wait_park(struct cmd_ctx *x, const struct ks_key *key, int64_t timeout_ms, int64_t wait_ns)
{
    if (wait_ns < 0)
        return 0;
    struct waiter *w = x->s->waiter;
    pthread_mutex_lock(&wait_lock);
    if (w == NULL)
        w = join(x, key, timeout_ms);
    w->parked = 1;
    /* Only the head is decided (wait_behind): its time is the limiter's. */
    w->retry_in_ns = fifo_is_head(&w->link) ? wait_ns : -1;
    pthread_mutex_unlock(&wait_lock);
    return 1;
}

void wait_notify(const struct ks_key *key)
{
    pthread_mutex_lock(&wait_lock);
    struct wait_queue *q = *slot_of(key);
    if (q != NULL)
        poke(head_of(q));
    pthread_mutex_unlock(&wait_lock);
}
