/* pubsub.c - the subscription tables of the I/O threads, publishing into them, and delivering
 * published messages to subscribers (pubsub.h, DESIGN.md "Pub/Sub").
 *
 * Invariants:
 * - A thread's table (struct pubsub_thread.tab) changes only on its own thread, under its
 *   wrlock; that thread reads it without the lock, any other thread under the rdlock.
 * - A publisher on another thread counts a table's receivers and pushes the message into the
 *   thread's inbox under the same rdlock. The owner drains its inbox under its wrlock before
 *   every change of its table, so a message is delivered to exactly the subscribers it was
 *   counted for.
 * - Frames are appended to a connection's reply buffer only on the connection's own thread. */
#include "rlimitd/pubsub.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/util.h"
#include "ps_map.h"

/* The connections subscribed to one name on one thread, in the order they subscribed. */
struct ps_subs {
    struct pubsub_client **v;
    uint32_t n, cap;
};

/* A message waiting in a thread's inbox: channel bytes, then message bytes. */
struct ps_msg {
    struct ps_msg *next;
    size_t clen, mlen;
    unsigned char kind;
    char data[];
};

struct pubsub_thread {
    pthread_rwlock_t lock;
    struct ps_map tab[PUBSUB_KINDS]; /* name -> struct ps_subs * */
    _Atomic(struct ps_msg *) inbox;  /* newest first */
    /* Taken from the inbox, not delivered yet (owner-only): what a bounded drain left for the
     * next one, oldest first. Counted like the inbox: delivered before any change of tab. */
    struct ps_msg *fifo, *fifo_tail;
    _Atomic uint64_t pairs;          /* (name, connection) subscriptions in tab */
    _Atomic uint64_t subscribers;    /* connections with at least one subscription */
    _Atomic uint64_t published, delivered;
    _Atomic int attached;
    /* Threads this one left messages for and has not woken yet (owner-only; bit i: thread
     * i). Woken once per loop turn, by pubsub_flush_wakes, so a pipeline of PUBLISHes costs
     * the other thread one wake-up and one write per subscriber, not one per message. */
    uint32_t wake_due;
    void (*wake)(void *ud);
    void *wake_ud;
    void (*kick)(void *conn);
} __attribute__((aligned(64)));

struct pubsub_client {
    struct pubsub_thread *t; /* NULL: counted here only (no registry on this thread) */
    void *conn;
    struct rbuf *out;
    const unsigned char *resp;
    struct ps_map names[PUBSUB_KINDS]; /* what this connection is subscribed to */
    _Atomic uint32_t n[PUBSUB_KINDS];
};

static struct pubsub_thread *threads;
static int nthreads;
static _Atomic uint64_t published_elsewhere; /* PUBLISH from a thread not attached */
static _Thread_local struct pubsub_thread *tl_self;
/* The frame of one message, encoded once per (message, pattern) into the thread's scratch
 * buffer with RESP2's '*' and copied to every subscriber (a RESP3 one gets '>' in its place:
 * the rest of the bytes are the same). */
static _Thread_local struct rbuf tl_frame;

static void take_inbox(struct pubsub_thread *t);

void pubsub_init(int n)
{
    ps_map_seed();
    nthreads = n;
    threads = aligned_alloc(64, sizeof(*threads) * (size_t)n);
    if (threads == NULL)
        alloc_fail(sizeof(*threads) * (size_t)n);
    memset(threads, 0, sizeof(*threads) * (size_t)n);
    /* Writers first: a thread's own subscribe must not wait behind a steady stream of other
     * threads' publishes (no reader takes the lock twice, so this cannot deadlock). */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    for (int i = 0; i < n; i++)
        pthread_rwlock_init(&threads[i].lock, &attr);
    pthread_rwlockattr_destroy(&attr);
}

void pubsub_free(void)
{
    for (int i = 0; i < nthreads; i++) {
        for (int k = 0; k < PUBSUB_KINDS; k++)
            ps_map_free(&threads[i].tab[k]);
        pthread_rwlock_destroy(&threads[i].lock);
    }
    free(threads);
    threads = NULL;
    nthreads = 0;
}

void pubsub_thread_attach(int index, void (*wake)(void *ud), void *wake_ud,
                          void (*kick)(void *conn))
{
    if (threads == NULL || index < 0 || index >= nthreads)
        return;
    struct pubsub_thread *t = &threads[index];
    t->wake = wake;
    t->wake_ud = wake_ud;
    t->kick = kick;
    tl_self = t;
    atomic_store(&t->attached, 1);
}

void pubsub_thread_detach(void)
{
    struct pubsub_thread *t = tl_self;
    if (t == NULL)
        return;
    pthread_rwlock_wrlock(&t->lock);
    atomic_store(&t->attached, 0);
    take_inbox(t);
    struct ps_msg *m = t->fifo;
    t->fifo = t->fifo_tail = NULL;
    pthread_rwlock_unlock(&t->lock);
    while (m != NULL) {
        struct ps_msg *next = m->next;
        free(m);
        m = next;
    }
    rbuf_free(&tl_frame);
    tl_self = NULL;
}

/* Redis's stringmatchlen: util_glob_match's glob, except that an empty string matches only the
 * empty pattern (Redis's loop never starts on it, so not even "*" matches the channel ""). */
static int match(const char *pat, size_t plen, const char *s, size_t slen)
{
    if (slen == 0)
        return plen == 0;
    return util_glob_match(pat, plen, s, slen, 0);
}

/* ---- frames ---- */

static void put_bulk(struct rbuf *b, const char *p, size_t n)
{
    char *w = rbuf_room(b, n + 32);
    size_t at = 0;
    w[at++] = '$';
    at += util_fmt_i64(w + at, (int64_t)n);
    w[at++] = '\r';
    w[at++] = '\n';
    memcpy(w + at, p, n);
    at += n;
    w[at++] = '\r';
    w[at++] = '\n';
    b->len += at;
}

#define APPEND_LIT(b, lit) rbuf_append((b), lit, sizeof(lit) - 1)

/* message / smessage (pat NULL) or pmessage. */
static void encode(struct rbuf *f, unsigned char kind, const char *pat, size_t plen,
                   const char *chan, size_t clen, const char *msg, size_t mlen)
{
    f->len = 0;
    if (pat != NULL) {
        APPEND_LIT(f, "*4\r\n$8\r\npmessage\r\n");
        put_bulk(f, pat, plen);
    } else if (kind == PUBSUB_SHARD) {
        APPEND_LIT(f, "*3\r\n$8\r\nsmessage\r\n");
    } else {
        APPEND_LIT(f, "*3\r\n$7\r\nmessage\r\n");
    }
    put_bulk(f, chan, clen);
    put_bulk(f, msg, mlen);
}

/* The first frame into an empty reply buffer: room for a pipeline's worth of small messages in
 * one allocation (within malloc's per-thread cache) rather than doublings from 256 bytes. */
#define FIRST_ROOM 1024

static void emit(struct pubsub_thread *t, struct pubsub_client *c, const struct rbuf *f)
{
    struct rbuf *b = c->out;
    if (b->cap == 0 && f->len < FIRST_ROOM)
        rbuf_reserve(b, FIRST_ROOM);
    char *w = rbuf_room(b, f->len);
    memcpy(w, f->p, f->len);
    if (*c->resp == 3)
        w[0] = '>';
    b->len += f->len;
    if (t->kick != NULL)
        t->kick(c->conn);
}

/* A scratch frame that grew for a big message is not kept. */
static void frame_trim(void)
{
    if (tl_frame.cap > 64 * 1024)
        rbuf_free(&tl_frame);
}

/* Delivers to t's subscribers (deliver) or only counts them; the caller is t's own thread, or
 * holds t's rdlock and does not deliver. Channel subscribers first, then each matching pattern's,
 * as Redis does. */
static int64_t reach(struct pubsub_thread *t, unsigned char kind, const char *chan, size_t clen,
                     const char *msg, size_t mlen, int deliver)
{
    int64_t n = 0;
    struct ps_ent *e = ps_map_get(&t->tab[kind], chan, clen);
    if (e != NULL) {
        struct ps_subs *s = e->val;
        if (deliver) {
            encode(&tl_frame, kind, NULL, 0, chan, clen, msg, mlen);
            for (uint32_t i = 0; i < s->n; i++)
                emit(t, s->v[i], &tl_frame);
        }
        n += s->n;
    }
    if (kind == PUBSUB_CHANNEL) {
        struct ps_map *pm = &t->tab[PUBSUB_PATTERN];
        for (uint32_t i = 0; i < pm->nents && pm->count > 0; i++) {
            struct ps_ent *p = &pm->ents[i];
            if (p->key == NULL || !match(p->key, p->len, chan, clen))
                continue;
            struct ps_subs *s = p->val;
            if (deliver) {
                encode(&tl_frame, kind, p->key, p->len, chan, clen, msg, mlen);
                for (uint32_t j = 0; j < s->n; j++)
                    emit(t, s->v[j], &tl_frame);
            }
            n += s->n;
        }
    }
    if (deliver && n > 0) {
        atomic_fetch_add_explicit(&t->delivered, (uint64_t)n, memory_order_relaxed);
        frame_trim();
    }
    return n;
}

/* Leaves a copy of the message in t's inbox (caller holds t's rdlock). Returns whether the
 * inbox was empty: then t must be woken (otherwise a wake-up is already due). */
static int push(struct pubsub_thread *t, unsigned char kind, const char *chan, size_t clen,
                const char *msg, size_t mlen)
{
    struct ps_msg *m = xmalloc(sizeof(*m) + clen + mlen);
    m->clen = clen;
    m->mlen = mlen;
    m->kind = kind;
    memcpy(m->data, chan, clen);
    memcpy(m->data + clen, msg, mlen);
    /* The old head is kept in a local: once the exchange succeeds, m belongs to t's thread,
     * which may take, deliver and free it at once (m->next must not be read again here). */
    struct ps_msg *head = atomic_load_explicit(&t->inbox, memory_order_relaxed);
    do
        m->next = head;
    while (!atomic_compare_exchange_weak_explicit(&t->inbox, &head, m, memory_order_release,
                                                  memory_order_relaxed));
    return head == NULL;
}

int64_t pubsub_publish(enum pubsub_kind k, const char *chan, size_t clen, const char *msg,
                       size_t mlen)
{
    struct pubsub_thread *self = tl_self;
    unsigned char kind = k == PUBSUB_SHARD ? PUBSUB_SHARD : PUBSUB_CHANNEL;
    if (self != NULL)
        atomic_fetch_add_explicit(&self->published, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&published_elsewhere, 1, memory_order_relaxed);
    int64_t total = 0;
    for (int i = 0; i < nthreads; i++) {
        struct pubsub_thread *t = &threads[i];
        if (t == self) {
            if (atomic_load_explicit(&t->pairs, memory_order_relaxed) != 0)
                total += reach(t, kind, chan, clen, msg, mlen, 1);
            continue;
        }
        /* A subscription completed before this publish began is seen here (its count was
         * raised before the wrlock that added it was released). */
        if (atomic_load_explicit(&t->pairs, memory_order_acquire) == 0)
            continue;
        /* Woken under the lock: once pubsub_thread_detach has taken the wrlock, no publisher
         * touches the thread's wake-up any more (its loop is closing). */
        pthread_rwlock_rdlock(&t->lock);
        if (atomic_load_explicit(&t->attached, memory_order_relaxed)) {
            int64_t n = reach(t, kind, chan, clen, msg, mlen, 0);
            if (n > 0 && push(t, kind, chan, clen, msg, mlen)) {
                if (self != NULL)
                    self->wake_due |= 1u << i;
                else
                    t->wake(t->wake_ud);
            }
            total += n;
        }
        pthread_rwlock_unlock(&t->lock);
    }
    return total;
}

void pubsub_flush_wakes(void)
{
    struct pubsub_thread *self = tl_self;
    if (self == NULL || self->wake_due == 0)
        return;
    uint32_t due = self->wake_due;
    self->wake_due = 0;
    for (int i = 0; i < nthreads; i++) {
        if (!(due & (1u << i)))
            continue;
        struct pubsub_thread *t = &threads[i];
        pthread_rwlock_rdlock(&t->lock);
        if (atomic_load_explicit(&t->attached, memory_order_relaxed))
            t->wake(t->wake_ud);
        pthread_rwlock_unlock(&t->lock);
    }
}

/* Moves t's inbox to the end of its fifo, oldest first (the inbox is newest first). */
static void take_inbox(struct pubsub_thread *t)
{
    struct ps_msg *m = atomic_exchange_explicit(&t->inbox, NULL, memory_order_acquire);
    if (m == NULL)
        return;
    struct ps_msg *head = NULL, *tail = m;
    while (m != NULL) {
        struct ps_msg *next = m->next;
        m->next = head;
        head = m;
        m = next;
    }
    if (t->fifo_tail != NULL)
        t->fifo_tail->next = head;
    else
        t->fifo = head;
    t->fifo_tail = tail;
}

/* Delivers what waits for t, oldest first, until about `budget` bytes of messages are
 * delivered (SIZE_MAX: everything). On t's thread. Returns how many messages. */
static size_t drain_upto(struct pubsub_thread *t, size_t budget)
{
    take_inbox(t);
    size_t n = 0, bytes = 0;
    while (t->fifo != NULL && bytes < budget) {
        struct ps_msg *m = t->fifo;
        t->fifo = m->next;
        if (t->fifo == NULL)
            t->fifo_tail = NULL;
        reach(t, m->kind, m->data, m->clen, m->data + m->clen, m->mlen, 1);
        bytes += m->clen + m->mlen + 32;
        free(m);
        n++;
    }
    return n;
}

static size_t drain(struct pubsub_thread *t)
{
    return drain_upto(t, SIZE_MAX);
}

size_t pubsub_drain(void)
{
    struct pubsub_thread *t = tl_self;
    if (t == NULL || !pubsub_pending())
        return 0;
    return drain(t);
}

int pubsub_drain_some(size_t budget)
{
    struct pubsub_thread *t = tl_self;
    if (t == NULL || !pubsub_pending())
        return 0;
    drain_upto(t, budget);
    return pubsub_pending();
}

int pubsub_pending(void)
{
    struct pubsub_thread *t = tl_self;
    return t != NULL &&
           (t->fifo != NULL || atomic_load_explicit(&t->inbox, memory_order_relaxed) != NULL);
}

/* ---- one connection's subscriptions ---- */

struct pubsub_client *pubsub_client_new(void *conn, struct rbuf *out, const unsigned char *resp)
{
    struct pubsub_client *c = xcalloc(1, sizeof(*c));
    c->t = out != NULL ? tl_self : NULL; /* nowhere to deliver: counted here only */
    c->conn = conn;
    c->out = out;
    c->resp = resp;
    for (int k = 0; k < PUBSUB_KINDS; k++)
        ps_map_init(&c->names[k]);
    return c;
}

static uint32_t total_of(const struct pubsub_client *c)
{
    uint32_t n = 0;
    for (int k = 0; k < PUBSUB_KINDS; k++)
        n += atomic_load_explicit(&c->n[k], memory_order_relaxed);
    return n;
}

/* Adds c under name in its thread's table; t's wrlock held, inbox drained. */
static void table_add(struct pubsub_thread *t, struct pubsub_client *c, int k, const char *name,
                      size_t len)
{
    struct ps_ent *e = ps_map_get(&t->tab[k], name, len);
    struct ps_subs *s = e != NULL ? e->val : NULL;
    if (s == NULL) {
        s = xcalloc(1, sizeof(*s));
        ps_map_add(&t->tab[k], name, len, s);
    }
    if (s->n == s->cap) {
        s->cap = s->cap == 0 ? 4 : s->cap * 2;
        s->v = xrealloc(s->v, sizeof(*s->v) * s->cap);
    }
    s->v[s->n++] = c;
    atomic_fetch_add_explicit(&t->pairs, 1, memory_order_release);
}

static void table_del(struct pubsub_thread *t, struct pubsub_client *c, int k, const char *name,
                      size_t len)
{
    struct ps_ent *e = ps_map_get(&t->tab[k], name, len);
    if (e == NULL)
        return;
    struct ps_subs *s = e->val;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->v[i] != c)
            continue;
        memmove(&s->v[i], &s->v[i + 1], sizeof(*s->v) * (s->n - i - 1));
        s->n--;
        atomic_fetch_sub_explicit(&t->pairs, 1, memory_order_relaxed);
        break;
    }
    if (s->n == 0) {
        ps_map_del(&t->tab[k], name, len, NULL);
        free(s->v);
        free(s);
    }
}

int pubsub_subscribe(struct pubsub_client *c, enum pubsub_kind k, const char *name, size_t len)
{
    if (ps_map_get(&c->names[k], name, len) != NULL)
        return 0;
    uint32_t before = total_of(c);
    ps_map_add(&c->names[k], name, len, NULL);
    atomic_fetch_add_explicit(&c->n[k], 1, memory_order_relaxed);
    struct pubsub_thread *t = c->t;
    if (t != NULL) {
        pthread_rwlock_wrlock(&t->lock);
        drain(t);
        table_add(t, c, k, name, len);
        pthread_rwlock_unlock(&t->lock);
        if (before == 0)
            atomic_fetch_add_explicit(&t->subscribers, 1, memory_order_relaxed);
    }
    return 1;
}

int pubsub_unsubscribe(struct pubsub_client *c, enum pubsub_kind k, const char *name,
                       size_t len)
{
    if (ps_map_get(&c->names[k], name, len) == NULL)
        return 0;
    struct pubsub_thread *t = c->t;
    if (t != NULL) {
        pthread_rwlock_wrlock(&t->lock);
        drain(t);
        table_del(t, c, k, name, len);
        pthread_rwlock_unlock(&t->lock);
    }
    ps_map_del(&c->names[k], name, len, NULL);
    atomic_fetch_sub_explicit(&c->n[k], 1, memory_order_relaxed);
    if (t != NULL && total_of(c) == 0)
        atomic_fetch_sub_explicit(&t->subscribers, 1, memory_order_relaxed);
    return 1;
}

int pubsub_first(struct pubsub_client *c, enum pubsub_kind k, const char **name, size_t *len)
{
    struct ps_ent *e = ps_map_first(&c->names[k]);
    if (e == NULL)
        return 0;
    *name = e->key;
    *len = e->len;
    return 1;
}

uint32_t pubsub_count(const struct pubsub_client *c, enum pubsub_kind k)
{
    return c != NULL ? atomic_load_explicit(&c->n[k], memory_order_relaxed) : 0;
}

int pubsub_subscribed(const struct pubsub_client *c)
{
    return c != NULL && total_of(c) > 0;
}

void pubsub_client_free(struct pubsub_client *c)
{
    if (c == NULL)
        return;
    struct pubsub_thread *t = c->t;
    if (t != NULL && total_of(c) > 0) {
        pthread_rwlock_wrlock(&t->lock);
        drain(t);
        for (int k = 0; k < PUBSUB_KINDS; k++) {
            struct ps_map *m = &c->names[k];
            for (uint32_t i = 0; i < m->nents; i++)
                if (m->ents[i].key != NULL)
                    table_del(t, c, k, m->ents[i].key, m->ents[i].len);
        }
        pthread_rwlock_unlock(&t->lock);
        atomic_fetch_sub_explicit(&t->subscribers, 1, memory_order_relaxed);
    }
    for (int k = 0; k < PUBSUB_KINDS; k++)
        ps_map_free(&c->names[k]);
    free(c);
}

/* ---- PUBSUB, INFO ---- */

int pubsub_any(void)
{
    for (int i = 0; i < nthreads; i++)
        if (atomic_load_explicit(&threads[i].pairs, memory_order_acquire) != 0)
            return 1;
    return 0;
}

int64_t pubsub_numsub(enum pubsub_kind k, const char *name, size_t len)
{
    int64_t n = 0;
    for (int i = 0; i < nthreads; i++) {
        struct pubsub_thread *t = &threads[i];
        pthread_rwlock_rdlock(&t->lock);
        struct ps_ent *e = ps_map_get(&t->tab[k], name, len);
        if (e != NULL)
            n += ((struct ps_subs *)e->val)->n;
        pthread_rwlock_unlock(&t->lock);
    }
    return n;
}

int64_t pubsub_names(enum pubsub_kind k, const char *pat, size_t plen, pubsub_name_fn fn,
                     void *ud)
{
    struct ps_map seen;
    ps_map_init(&seen);
    int64_t n = 0;
    for (int i = 0; i < nthreads; i++) {
        struct pubsub_thread *t = &threads[i];
        pthread_rwlock_rdlock(&t->lock);
        struct ps_map *m = &t->tab[k];
        for (uint32_t j = 0; j < m->nents; j++) {
            struct ps_ent *e = &m->ents[j];
            if (e->key == NULL || (pat != NULL && !match(pat, plen, e->key, e->len)))
                continue;
            if (nthreads > 1) {
                if (ps_map_get(&seen, e->key, e->len) != NULL)
                    continue;
                ps_map_add(&seen, e->key, e->len, NULL);
            }
            if (fn != NULL)
                fn(ud, e->key, e->len);
            n++;
        }
        pthread_rwlock_unlock(&t->lock);
    }
    ps_map_free(&seen);
    return n;
}

void pubsub_get_stats(struct pubsub_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->published = atomic_load_explicit(&published_elsewhere, memory_order_relaxed);
    for (int i = 0; i < nthreads; i++) {
        struct pubsub_thread *t = &threads[i];
        st->subscribers += atomic_load_explicit(&t->subscribers, memory_order_relaxed);
        st->published += atomic_load_explicit(&t->published, memory_order_relaxed);
        st->delivered += atomic_load_explicit(&t->delivered, memory_order_relaxed);
    }
}
