/* blocked.c - a connection whose request waits for capacity (the WAIT option; DESIGN.md
 * "Waiting for capacity"): the request, copied, is run again on the connection's own thread
 * when its turn may have come, and once more at its timeout; then the commands pipelined
 * behind it run.
 *
 * Each blocked connection has one timer on its thread's loop, due at the earlier of its
 * timeout and, while it is the head of its key's queue, the time the limiter said capacity
 * returns. Other threads wake the thread through its wait home (a uv_async): when the waiter
 * before this one left, or a lease of the key was released. Nothing polls: a waiter runs again
 * only at those events. Timers are whole milliseconds of the loop's clock, rounded up, so a
 * request runs again at most about a millisecond after its capacity returns, never before. */
#include "blocked.h"

#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/waiters.h"

#define NS_PER_MS 1000000LL

struct blocked {
    uv_timer_t timer;
    struct client *c; /* NULL once the connection is gone: the timer is closing */
    struct waiter *w;
    uint64_t deadline_ms; /* the loop's clock; 0: no timeout (WAIT 0) */
    int argc;
    char **argv;
    size_t *lens;
};

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

static void on_timer(uv_timer_t *timer);

/* Sets b's timer for its next event: the timeout, or the limiter's time while at the head. */
static void arm(struct blocked *b)
{
    uv_loop_t *loop = b->timer.loop;
    uv_update_time(loop);
    uint64_t now = uv_now(loop), due = b->deadline_ms != 0 ? b->deadline_ms : UINT64_MAX;
    int64_t in = b->w->retry_in_ns;
    if (in >= 0 && in < INT64_MAX / 2) {
        /* The first loop millisecond at or after the exact moment (the loop's clock is
         * uv_hrtime's in whole ms, or a coarser reading of it that lags): a timer rounded from
         * the loop's truncated clock instead could fire up to a millisecond early, and the
         * request, refused again, would wait one more. At least one ms on: no timer of 0. */
        uint64_t at = (uv_hrtime() + (uint64_t)in + NS_PER_MS - 1) / NS_PER_MS;
        if (at <= now)
            at = now + 1;
        if (at < due)
            due = at;
    }
    if (due == UINT64_MAX)
        uv_timer_stop(&b->timer);
    else
        uv_timer_start(&b->timer, on_timer, due > now ? due - now : 0, 0);
}

/* The request has been answered (admitted, refused at its timeout, or an error): the connection
 * goes on with the commands behind it. */
static void unblock(struct blocked *b)
{
    struct client *c = b->c;
    drop_waiter(&c->session);
    c->blocked = NULL;
    b->c = NULL;
    uv_close((uv_handle_t *)&b->timer, free_blocked);
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
        arm(b);
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

static void on_timer(uv_timer_t *timer)
{
    struct blocked *b = timer->data;
    if (b->c == NULL || gone(b))
        return;
    thread_mark_work(b->c->thread);
    uv_update_time(timer->loop);
    if (b->deadline_ms != 0 && uv_now(timer->loop) >= b->deadline_ms)
        time_out(b);
    else if (wait_is_head(b->w))
        retry(b);
    else
        arm(b); /* parked behind others: only the timeout is due */
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
}

void blocked_thread_close(struct io_thread *t)
{
    wait_home_close(&t->wait_home);
    uv_close((uv_handle_t *)&t->wait_async, NULL);
}

int blocked_park(struct client *c, int argc, char **argv, const size_t *lens)
{
    struct waiter *w = c->session.waiter;
    if (w == NULL)
        return 0;
    struct blocked *b = xcalloc(1, sizeof(*b));
    b->c = c;
    b->w = w;
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
    uv_update_time(&c->thread->loop);
    if (w->timeout_ms > 0)
        b->deadline_ms = uv_now(&c->thread->loop) + (uint64_t)w->timeout_ms;
    c->blocked = b;
    c->state = CLIENT_BLOCKED;
    __atomic_fetch_or(&c->session.flags, SESSION_BLOCKED, __ATOMIC_RELAXED);
    arm(b);
    return 1;
}

void blocked_forget(struct client *c)
{
    struct blocked *b = c->blocked;
    drop_waiter(&c->session);
    if (b == NULL)
        return;
    c->blocked = NULL;
    b->c = NULL;
    uv_close((uv_handle_t *)&b->timer, free_blocked);
}
