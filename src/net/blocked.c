/* blocked.c - a connection whose request waits for capacity (the WAIT option; DESIGN.md
 * "Waiting for capacity"): the request, copied, is run again on the connection's own thread
 * when its turn may have come, and once more at its timeout; then the commands pipelined
 * behind it run.
 *
 * Two clocks per thread. A waiter's timeout is a libuv timer (whole milliseconds of the loop's
 * clock, rounded up: never early). The heads' retry times, when the limiter said capacity
 * returns, are a min-heap on one timerfd (CLOCK_MONOTONIC, uv_hrtime's clock, armed at the
 * earliest in absolute nanoseconds), because a request paced at the limit's rate should run
 * when its capacity returns and not up to two milliseconds later (a libuv timer's rounding and
 * the poll's millisecond timeout): at 200 requests a second that was a quarter of the rate.
 * Other threads wake the thread through its wait home (a uv_async): when the waiter before one
 * left, or a lease of its key was released. Nothing polls: a waiter runs again only at those
 * events. */
#include "blocked.h"

#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rlimitd/alloc.h"
#include "rlimitd/waiters.h"

#define NS_PER_MS 1000000LL

struct blocked {
    uv_timer_t timer; /* the timeout */
    struct client *c; /* NULL once the connection is gone: the timer is closing */
    struct waiter *w;
    uint64_t retry_at;    /* uv_hrtime ns, while in the thread's heap */
    size_t heap_at;       /* its index there, or SIZE_MAX */
    int argc;
    char **argv;
    size_t *lens;
};

/* The heads' retry times of one thread: a binary min-heap of blocked records on a timerfd. */
struct blocked_clock {
    int fd;
    uv_poll_t poll;
    struct blocked **heap;
    size_t n, cap;
    uint64_t armed; /* the absolute time the timerfd is set to, 0 when disarmed */
};

/* ---- the heap ---- */

static void heap_set(struct blocked_clock *k, size_t i, struct blocked *b)
{
    k->heap[i] = b;
    b->heap_at = i;
}

static void heap_up(struct blocked_clock *k, size_t i)
{
    struct blocked *b = k->heap[i];
    while (i > 0 && k->heap[(i - 1) / 2]->retry_at > b->retry_at) {
        heap_set(k, i, k->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(k, i, b);
}

static void heap_down(struct blocked_clock *k, size_t i)
{
    struct blocked *b = k->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint64_t best = b->retry_at;
        if (l < k->n && k->heap[l]->retry_at < best)
            m = l, best = k->heap[l]->retry_at;
        if (l + 1 < k->n && k->heap[l + 1]->retry_at < best)
            m = l + 1;
        if (m == i)
            break;
        heap_set(k, i, k->heap[m]);
        i = m;
    }
    heap_set(k, i, b);
}

static void heap_remove(struct blocked_clock *k, struct blocked *b)
{
    size_t i = b->heap_at;
    if (i == SIZE_MAX)
        return;
    b->heap_at = SIZE_MAX;
    struct blocked *last = k->heap[--k->n];
    if (i == k->n)
        return;
    heap_set(k, i, last);
    heap_up(k, i);
    heap_down(k, last->heap_at);
}

static void heap_put(struct blocked_clock *k, struct blocked *b)
{
    heap_remove(k, b);
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 16;
        k->heap = xrealloc(k->heap, sizeof(*k->heap) * k->cap);
    }
    heap_set(k, k->n++, b);
    heap_up(k, b->heap_at);
}

/* The timerfd set to the earliest retry time (or disarmed). */
static void clock_rearm(struct blocked_clock *k)
{
    uint64_t at = k->n > 0 ? k->heap[0]->retry_at : 0;
    if (at == k->armed)
        return;
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (at != 0) {
        its.it_value.tv_sec = (time_t)(at / 1000000000u);
        its.it_value.tv_nsec = (long)(at % 1000000000u);
    }
    timerfd_settime(k->fd, TFD_TIMER_ABSTIME, &its, NULL);
    k->armed = at;
}

/* ---- a blocked connection ---- */

static void free_blocked(uv_handle_t *h)
{
    struct blocked *b = h->data;
    for (int i = 0; i < b->argc; i++)
        free(b->argv[i]);
    free(b->argv);
    free(b->lens);
    free(b);
}

/* The session's waiter leaves its queue and is freed; the session no longer blocks. */
static void drop_waiter(struct session *s)
{
    if (s->waiter == NULL)
        return;
    wait_leave(s->waiter);
    free(s->waiter);
    s->waiter = NULL;
    __atomic_fetch_and(&s->flags, ~SESSION_BLOCKED, __ATOMIC_RELAXED);
}

static void on_timeout(uv_timer_t *timer);

/* After a run that parked b: its retry time (while at the head) into the thread's heap. */
static void arm_retry(struct blocked *b)
{
    struct blocked_clock *k = b->c->thread->wait_clock;
    int64_t in = b->w->retry_in_ns;
    if (in >= 0 && in < INT64_MAX / 2) {
        b->retry_at = uv_hrtime() + (uint64_t)(in > 0 ? in : 1);
        heap_put(k, b);
    } else {
        heap_remove(k, b);
    }
    clock_rearm(k);
}

/* Releases b's resources: out of the heap, its timer closed (freed in the close callback). */
static void release(struct blocked *b, struct io_thread *t)
{
    heap_remove(t->wait_clock, b);
    clock_rearm(t->wait_clock);
    b->c = NULL;
    uv_close((uv_handle_t *)&b->timer, free_blocked);
}

/* The request has been answered (admitted, refused at its timeout, or an error): the connection
 * goes on with the commands behind it. */
static void unblock(struct blocked *b)
{
    struct client *c = b->c;
    drop_waiter(&c->session);
    c->blocked = NULL;
    release(b, c->thread);
    c->state = CLIENT_ACTIVE;
    c->thread->resume(c);
}

static void run(struct blocked *b)
{
    struct client *c = b->c;
    cmd_execute(c->thread->net->env, &c->session, b->argc, b->argv, b->lens, &c->out);
}

/* Its turn may have come (it is the head): decided again; parked again, or answered. */
static void retry(struct blocked *b)
{
    b->w->parked = 0;
    run(b);
    if (b->w->parked)
        arm_retry(b);
    else
        unblock(b);
}

/* The timeout: out of the queue, then decided once more as without WAIT, which answers. */
static void time_out(struct blocked *b)
{
    struct session *s = &b->c->session;
    drop_waiter(s);
    s->wait_off = 1;
    run(b);
    s->wait_off = 0;
    unblock(b);
}

/* A connection that stopped being blocked otherwise (closing after a reply, shutting down):
 * its request only leaves the queue. */
static int gone(struct blocked *b)
{
    if (b->c != NULL && b->c->state == CLIENT_BLOCKED)
        return 0;
    if (b->c != NULL)
        blocked_forget(b->c);
    return 1;
}

static void on_timeout(uv_timer_t *timer)
{
    struct blocked *b = timer->data;
    if (b->c == NULL || gone(b))
        return;
    thread_mark_work(b->c->thread);
    time_out(b);
}

/* The timerfd: every head whose retry time has come is decided again, earliest first. */
static void on_clock(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    struct io_thread *t = h->data;
    struct blocked_clock *k = t->wait_clock;
    uint64_t expirations;
    if (read(k->fd, &expirations, sizeof expirations) < 0) {
        /* EAGAIN: woken early or already read; the heap says what is due. */
    }
    k->armed = 0;
    thread_mark_work(t);
    uint64_t now = uv_hrtime();
    while (k->n > 0 && k->heap[0]->retry_at <= now) {
        struct blocked *b = k->heap[0];
        heap_remove(k, b);
        if (b->c == NULL || gone(b))
            continue;
        retry(b);
    }
    clock_rearm(k);
}

static void on_poke(uv_async_t *a)
{
    struct io_thread *t = a->data;
    thread_mark_work(t);
    struct waiter *w;
    /* One at a time: running one may free another that was poked (its connection closed). */
    while ((w = wait_home_pop(&t->wait_home)) != NULL) {
        struct blocked *b = w->owner;
        if (b == NULL || b->c == NULL || gone(b))
            continue;
        retry(b);
    }
}

static void poke(struct wait_home *h)
{
    struct io_thread *t = h->ud;
    uv_async_send(&t->wait_async);
}

void blocked_thread_init(struct io_thread *t, void (*resume)(struct client *c))
{
    t->resume = resume;
    wait_home_init(&t->wait_home, poke, t);
    uv_async_init(&t->loop, &t->wait_async, on_poke);
    t->wait_async.data = t;
    uv_unref((uv_handle_t *)&t->wait_async);
    struct blocked_clock *k = xcalloc(1, sizeof(*k));
    k->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (k->fd < 0)
        abort(); /* only out of descriptors at start: nothing to serve without it */
    uv_poll_init(&t->loop, &k->poll, k->fd);
    k->poll.data = t;
    uv_poll_start(&k->poll, UV_READABLE, on_clock);
    uv_unref((uv_handle_t *)&k->poll);
    t->wait_clock = k;
}

static void on_clock_closed(uv_handle_t *h)
{
    struct io_thread *t = h->data;
    struct blocked_clock *k = t->wait_clock;
    close(k->fd);
    free(k->heap);
    free(k);
    t->wait_clock = NULL;
}

void blocked_thread_close(struct io_thread *t)
{
    wait_home_close(&t->wait_home);
    uv_close((uv_handle_t *)&t->wait_async, NULL);
    uv_close((uv_handle_t *)&t->wait_clock->poll, on_clock_closed);
}

int blocked_park(struct client *c, int argc, char **argv, const size_t *lens)
{
    struct waiter *w = c->session.waiter;
    if (w == NULL)
        return 0;
    struct blocked *b = xcalloc(1, sizeof(*b));
    b->c = c;
    b->w = w;
    b->heap_at = SIZE_MAX;
    b->argc = argc;
    b->argv = xmalloc(sizeof(char *) * (size_t)argc);
    b->lens = xmalloc(sizeof(size_t) * (size_t)argc);
    for (int i = 0; i < argc; i++) {
        b->argv[i] = xmalloc(lens[i] + 1);
        memcpy(b->argv[i], argv[i], lens[i]);
        b->argv[i][lens[i]] = '\0';
        b->lens[i] = lens[i];
    }
    w->owner = b;
    uv_timer_init(&c->thread->loop, &b->timer);
    b->timer.data = b;
    if (w->timeout_ms > 0) {
        uv_update_time(&c->thread->loop);
        /* +1: the loop's clock is truncated to the ms, so a timer of timeout_ms could fire up
         * to a millisecond before timeout_ms have passed. */
        uv_timer_start(&b->timer, on_timeout, (uint64_t)w->timeout_ms + 1, 0);
    }
    c->blocked = b;
    c->state = CLIENT_BLOCKED;
    __atomic_fetch_or(&c->session.flags, SESSION_BLOCKED, __ATOMIC_RELAXED);
    arm_retry(b);
    return 1;
}

void blocked_forget(struct client *c)
{
    struct blocked *b = c->blocked;
    drop_waiter(&c->session);
    if (b == NULL)
        return;
    c->blocked = NULL;
    release(b, c->thread);
}
