/* client.c - one connection: reading through the thread's shared buffer, running commands in
 * slices that let the thread's other connections have their turn, writing the replies back with
 * as few syscalls as the pipeline allows, back-pressure and output limits, and closing.
 *
 * Everything here runs on the connection's own I/O thread; only `kill` (atomic) and the
 * registry links (net_shared.lock) are touched by others. */
#include <stdio.h>
#include "rlimitd/alloc.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rlimitd/clock.h"
#include "rlimitd/log.h"
#include "blocked.h"
#include "rlimitd/pubsub.h"
#include "client.h"
#include "client_info.h"

/* Fairness (DESIGN.md "Fairness"): a connection runs commands until it has SLICE_BYTES of new
 * replies (a slice), and the slices of one loop turn (from one poll to the next) take at most
 * TURN_BUDGET_NS together, whatever the number of connections with work; then the thread polls
 * again, so a request that arrived meanwhile waits about that long plus the writes of the turn.
 * The bytes bound what a turn's writes cost, and keep reply buffers small enough to be reused
 * rather than grown (a grown buffer is new pages to fault in and a copy); commands that reply
 * little are bounded by the budget alone, so a deep pipeline of them runs on as before while it
 * is alone. The clock is read only every SLICE_CHECK_CMDS commands or SLICE_CHECK_BYTES of
 * replies, so a batch of a few commands never reads it. */
#define SLICE_BYTES (64 * 1024)
#define TURN_BUDGET_NS (1000 * 1000)
#define SLICE_CHECK_CMDS 32
#define SLICE_CHECK_BYTES (16 * 1024)

/* The limits count what a connection holds past its first OBUF_UNCOUNTED bytes, as Redis's
 * count leaves out its 16 KiB static reply buffer: a limit set in Redis means the same here
 * (a limit of a few bytes does not close a client for an ordinary reply). */
#define OBUF_UNCOUNTED (16 * 1024)

/* What an unauthenticated connection may hold past those (Redis's fix for CVE-2025-21605): it
 * may only AUTH, and anything else answers an error, so one that sends commands without reading
 * their NOAUTH errors is closed rather than left to grow. */
#define UNAUTH_OUTPUT_LIMIT 1024

static void process(struct client *c);
static size_t client_memory(const struct client *c);
static size_t published_output_memory(const struct client *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

void client_start_reading(struct client *c)
{
    if (!c->reading && uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
        c->reading = 1;
}

static void stop_reading(struct client *c)
{
    if (c->reading) {
        uv_read_stop(&c->h.stream);
        c->reading = 0;
    }
}

static void on_close(uv_handle_t *h)
{
    struct client *c = h->data;
    struct io_thread *t = c->thread;
    struct net_shared *net = t->net;

    if (c->tprev != NULL)
        c->tprev->tnext = c->tnext;
    else
        t->clients = c->tnext;
    if (c->tnext != NULL)
        c->tnext->tprev = c->tprev;

    /* Shutting down: the last client gone ends the grace timer, so the loop can finish. Only
     * once the thread has handled the stop (t->stopped): before that the cron timer is not the
     * grace timer yet, and the wake-up handler closes it itself when no client is left. Closing
     * it here too (the SHUTDOWN client is closed before the wake-up runs) closed it twice. */
    if (atomic_load(&net->stopping) && t->stopped && t->clients == NULL &&
        !uv_is_closing((uv_handle_t *)&t->cron))
        uv_close((uv_handle_t *)&t->cron, NULL);
    /* libuv ran the write callback (UV_ECANCELED) before this one: inflight is gone. */
    stats_add(&t->stats.clients_freed, client_memory(c));
    session_deinit(&c->session);
    resp_deinit(&c->resp);
    rbuf_free(&c->out);
    free(c);
}

/* Takes c off its thread's ready list (a short list: the connections that used up a slice). */
static void ready_remove(struct client *c)
{
    struct io_thread *t = c->thread;
    struct client *prev = NULL;
    for (struct client *r = t->ready_head; r != NULL; prev = r, r = r->ready_next) {
        if (r != c)
            continue;
        if (prev != NULL)
            prev->ready_next = c->ready_next;
        else
            t->ready_head = c->ready_next;
        if (t->ready_tail == c)
            t->ready_tail = prev;
        break;
    }
    c->ready = 0;
    c->ready_next = NULL;
}

void client_close(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    c->state = CLIENT_CLOSING;
    blocked_forget(c); /* its request waits no more: the next in its queue goes */
    stop_reading(c);
    if (c->ready)
        ready_remove(c); /* the struct is freed before the list is walked again */
    /* Gone from CLIENT LIST and from the maxclients count at once, not a loop turn later. The
     * struct itself lives until the close callback. */
    struct net_shared *net = c->thread->net;
    pthread_mutex_lock(&net->lock);
    if (c->gprev != NULL)
        c->gprev->gnext = c->gnext;
    else
        net->registry = c->gnext;
    if (c->gnext != NULL)
        c->gnext->gprev = c->gprev;
    c->gprev = c->gnext = NULL;
    pthread_mutex_unlock(&net->lock);
    /* Out of mem_clients_normal with the count (publish does nothing from here on). */
    stats_add(&c->thread->stats.clients_mem,
              -(uint64_t)atomic_load_explicit(&c->tot_mem, memory_order_relaxed));
    stats_add(&c->thread->stats.clients_out_mem, -(uint64_t)published_output_memory(c));
    atomic_store_explicit(&c->tot_mem, 0, memory_order_relaxed);
    atomic_fetch_sub(&net->nclients, 1);
    uv_close(&c->h.handle, on_close);
}

static size_t inflight_len(const struct client *c)
{
    return c->inflight != NULL ? c->inflight->len : 0;
}

/* Replies the server holds for the connection: built and not yet offered to the kernel, and
 * the part of the last write the kernel did not take. What the limits measure, as Redis
 * measures its reply buffers. */
static size_t pending_output(const struct client *c)
{
    return c->out.len + inflight_len(c);
}

void client_close_after_flush(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    c->state = CLIENT_DRAINING;
    stop_reading(c);
    if (pending_output(c) == 0)
        client_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct client *c = h->data;
    char *p;
    size_t len;
    /* The thread's shared read buffer, or the connection's own while a command is incomplete:
     * reads cost no malloc (STYLE "U"). */
    resp_input_space(&c->resp, &p, &len);
    buf->base = p;
    buf->len = len;
}

static int64_t pause_limit(const struct client *c)
{
    return CONF_GET(c->thread->net->conf, client_output_pause_limit);
}

static int obuf_class(const struct client *c)
{
    unsigned k = (unsigned)c->session.obuf_class;
    return k < CONF_OBUF_CLASSES ? (int)k : CONF_OBUF_NORMAL;
}

static int unauthenticated(const struct client *c)
{
    return !c->session.authed &&
           atomic_load_explicit(&c->thread->net->env->auth_required, memory_order_relaxed);
}

/* The fewest unsent bytes at which output_limits_broken or the pause may act: the run of
 * commands compares against this alone. */
static size_t output_watch(const struct client *c)
{
    const struct conf *conf = c->thread->net->conf;
    int k = obuf_class(c);
    uint64_t w = (uint64_t)pause_limit(c) + 1;
    uint64_t hard = CONF_GET(conf, obuf[k].hard), soft = CONF_GET(conf, obuf[k].soft);
    uint64_t lim = hard != 0 && (soft == 0 || hard < soft) ? hard : soft;
    if (unauthenticated(c) && (lim == 0 || UNAUTH_OUTPUT_LIMIT + 1 < lim))
        lim = UNAUTH_OUTPUT_LIMIT + 1;
    if (lim != 0 && lim <= UINT64_MAX - OBUF_UNCOUNTED && lim + OBUF_UNCOUNTED < w)
        w = lim + OBUF_UNCOUNTED;
    return w > SIZE_MAX ? SIZE_MAX : (size_t)w;
}

/* Closes c as Redis does, with Redis's log line (the client's CLIENT LIST line inside), from a
 * command's reply (Redis: "scheduled to be closed ASAP") or from the cron ("closed"). */
static void close_over_limits(struct client *c, int from_cron)
{
    struct rbuf line;
    rbuf_init(&line);
    client_publish(c); /* the line shows the buffers as they are now */
    client_format(c, &line, (uint64_t)(clock_mono_ns() / 1000000));
    int n = (int)(line.len > 0 && line.p[line.len - 1] == '\n' ? line.len - 1 : line.len);
    log_warning("Client %.*s %s for overcoming of output buffer limits.", n,
                line.p != NULL ? line.p : "",
                from_cron ? "closed" : "scheduled to be closed ASAP");
    rbuf_free(&line);
    client_close(c);
}

/* Redis's rule for client-output-buffer-limit: with pend unsent bytes, counted past the first
 * OBUF_UNCOUNTED, at or over the class's hard limit, or at or over its soft limit continuously
 * for more than its seconds, the connection is closed; so it is over UNAUTH_OUTPUT_LIMIT before
 * AUTH. Keeps the soft limit's clock (a look under the soft limit resets it). Returns whether it
 * closed c. */
static int output_limits_broken(struct client *c, size_t pend, int from_cron)
{
    const struct conf *conf = c->thread->net->conf;
    int k = obuf_class(c);
    uint64_t hard = CONF_GET(conf, obuf[k].hard), soft = CONF_GET(conf, obuf[k].soft);
    uint64_t used = pend > OBUF_UNCOUNTED ? pend - OBUF_UNCOUNTED : 0;
    int over = unauthenticated(c) && used > UNAUTH_OUTPUT_LIMIT;
    if (hard != 0 && used >= hard)
        over = 1;
    if (soft != 0 && used >= soft) {
        uint64_t now = uv_now(&c->thread->loop) + 1;
        uint64_t secs = (uint64_t)CONF_GET(conf, obuf[k].soft_seconds);
        if (c->soft_since_ms == 0)
            c->soft_since_ms = now;
        else if (now - c->soft_since_ms > secs * 1000)
            over = 1;
    } else {
        c->soft_since_ms = 0;
    }
    if (over)
        close_over_limits(c, from_cron);
    return over;
}

void client_cron_output(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    size_t pend = pending_output(c);
    if (pend > 0 || c->soft_since_ms != 0)
        output_limits_broken(c, pend, 1);
}

/* After a write: the limits looked at with what the kernel did not take. Returns whether c is
 * still open. */
static int output_checked(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return 0;
    size_t pend = pending_output(c);
    if (pend == 0 && c->soft_since_ms == 0)
        return 1;
    if (pend < output_watch(c)) {
        c->soft_since_ms = 0; /* under every limit, so under the soft one */
        return 1;
    }
    return !output_limits_broken(c, pend, 0);
}

/* Reply buffers are the thread's: the connection being served borrows the spare one, and gives
 * a buffer back (or frees it) as soon as everything in it is with the kernel or in a write. */
static void out_borrow(struct client *c)
{
    struct io_thread *t = c->thread;
    if (c->out.p == NULL && t->spare_out.p != NULL) {
        c->out = t->spare_out;
        rbuf_init(&t->spare_out);
    }
}

/* The spare reply buffer a thread keeps: one big reply does not pin its size. */
#define SPARE_OUT_KEEP (64 * 1024)

/* What a subscriber keeps between its writes (as Redis keeps a 16 KiB buffer per client):
 * messages arrive again soon, and a buffer freed and allocated again per delivery, on many
 * subscribers at once, churns the allocator and the kernel's pages. */
#define SUBSCRIBER_OUT_KEEP (16 * 1024)
/* A flush's remainder from this size up is written from the reply buffer itself, taken over by
 * the write, instead of from a copy (client_write): copying it would cost more than the new
 * buffer the next replies start, and would hold the replies twice. */
#define WRITE_TAKE_OVER (1024 * 1024)

static void out_release(struct client *c)
{
    struct io_thread *t = c->thread;
    if (c->out.len != 0 || c->out.p == NULL)
        return;
    if (c->out.cap <= SUBSCRIBER_OUT_KEEP && c->state != CLIENT_CLOSING &&
        pubsub_subscribed(c->session.pubsub))
        return;
    if (t->spare_out.p == NULL && c->out.cap <= SPARE_OUT_KEEP)
        t->spare_out = c->out;
    else
        free(c->out.p);
    rbuf_init(&c->out);
}

/* Back-pressure released (the kernel took enough of the replies, in a write or at once): run the
 * commands that were left buffered, then read again. Returns whether it did. */
static int resume_if_drained(struct client *c)
{
    if (c->state != CLIENT_PAUSED || (int64_t)pending_output(c) > pause_limit(c) / 2)
        return 0;
    c->state = CLIENT_ACTIVE;
    process(c);
    return 1;
}

static void on_write(uv_write_t *req, int status)
{
    struct client_write *w = (struct client_write *)req;
    struct client *c = w->c;
    thread_mark_work(c->thread);
    c->inflight = NULL;
    free(w->owned);
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED && c->state != CLIENT_CLOSING)
            client_close(c);
        return;
    }
    if (c->state == CLIENT_CLOSING)
        return;
    client_flush(c);
    if (!output_checked(c))
        return;
    if (c->state == CLIENT_DRAINING) {
        if (pending_output(c) == 0)
            client_close(c);
        return;
    }
    if (!resume_if_drained(c))
        client_publish(c);
}

void client_protocol_error(struct client *c, const char *what)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "ERR Protocol error: %s", what);
    reply_error(&c->out, msg);
    stats_add(&c->thread->stats.errors[ERRSTAT_ERR], 1);
    log_verbose("Protocol error (%s) from client id=%llu addr=%s", what,
                (unsigned long long)c->session.id, c->addr);
    client_close_after_flush(c);
}

/* Hands the collected replies to the kernel: one uv_try_write for the whole batch; whatever
 * the socket does not take goes to a write of its own (the slow path: a full socket), copied,
 * or from WRITE_TAKE_OVER up in the reply buffer itself. */
void client_flush(struct client *c)
{
    if (c->inflight != NULL || c->state == CLIENT_CLOSING)
        return;
    if (c->out.len == 0) {
        out_release(c);
        return;
    }
    stats_add(&c->thread->stats.net_output_bytes, c->out.len);
    uv_buf_t b = {.base = c->out.p, .len = c->out.len};
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n == (int)c->out.len) {
        c->out.len = 0;
        out_release(c);
        if (c->state == CLIENT_DRAINING)
            client_close(c); /* the last reply (QUIT, protocol error) is out */
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        client_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    size_t left = c->out.len - done;
    struct client_write *w;
    if (left >= WRITE_TAKE_OVER) {
        /* Large: the write takes the buffer itself; the next replies start a new one. */
        w = xmalloc(sizeof(*w));
        w->owned = c->out.p;
        w->base = c->out.p + done;
        rbuf_init(&c->out);
    } else {
        w = xmalloc(sizeof(*w) + left);
        memcpy(w->data, c->out.p + done, left);
        w->owned = NULL;
        w->base = w->data;
        c->out.len = 0;
        out_release(c);
    }
    w->len = left;
    w->c = c;
    b.base = w->base; /* not uv_buf_init: its length is an unsigned int */
    b.len = left;
    if (uv_write(&w->req, &c->h.stream, &b, 1, on_write) != 0) {
        free(w->owned);
        free(w);
        client_close(c);
        return;
    }
    c->inflight = w;
}

/* Bytes this connection holds: what INFO's mem_clients_normal sums and CLIENT LIST's tot-mem
 * shows. The thread's shared buffers are not counted: they do not grow with connections. */
static size_t output_memory(const struct client *c)
{
    return c->out.cap + (c->inflight != NULL ? sizeof(*c->inflight) + c->inflight->len : 0);
}

/* output_memory as publish last counted it into the thread's clients_out_mem, from the CLIENT
 * LIST figures it published with it (rbs: out.cap; omem: the pending write's bytes, never 0
 * while one exists). */
static size_t published_output_memory(const struct client *c)
{
    size_t omem = atomic_load_explicit(&c->omem, memory_order_relaxed);
    return atomic_load_explicit(&c->rbs, memory_order_relaxed) +
           (omem > 0 ? sizeof(struct client_write) + omem : 0);
}

/* As Redis 7.0's tot-mem: the connection, its query buffer, its replies and its queued
 * transaction. */
static size_t client_memory(const struct client *c)
{
    return sizeof(*c) + resp_capacity(&c->resp) + output_memory(c) + c->session.multi_mem;
}

/* Publishes this connection's buffer figures for CLIENT LIST on other threads. obl goes last,
 * with release: a reader that loads it first (acquire) and sees this batch's value sees the
 * other figures of this batch too. */
void client_publish(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return; /* no longer listed nor counted */
    size_t in = resp_buffered(&c->resp), cap = resp_capacity(&c->resp);
    size_t mem = client_memory(c), omem = output_memory(c);
    c->session.multi_mem_counted = c->session.multi_mem; /* cmd_dispatch.c's oom_refused */
    size_t old = atomic_load_explicit(&c->tot_mem, memory_order_relaxed);
    size_t old_out = published_output_memory(c);
    atomic_store_explicit(&c->tot_mem, mem, memory_order_relaxed);
    atomic_store_explicit(&c->qbuf, in, memory_order_relaxed);
    atomic_store_explicit(&c->qbuf_free, cap > in ? cap - in : 0, memory_order_relaxed);
    atomic_store_explicit(&c->rbs, c->out.cap, memory_order_relaxed);
    atomic_store_explicit(&c->omem, c->inflight != NULL ? c->inflight->len : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&c->obl, c->out.len, memory_order_release);
    if (mem != old)
        stats_add(&c->thread->stats.clients_mem, (uint64_t)mem - (uint64_t)old);
    if (omem != old_out)
        stats_add(&c->thread->stats.clients_out_mem, (uint64_t)omem - (uint64_t)old_out);
}

/* Replies go out at the end of the loop turn, after every connection that was ready has been
 * served (as Redis writes in beforeSleep): the writes then follow each other closely, so the
 * peer is woken once per turn rather than once per connection. Waking a sleeping peer is the
 * dear part of a loopback write (a cross-CPU wake-up, inside write(2), billed to us). A turn
 * lasts as long as the ready connections' pipelines take to run, so no reply waits longer than
 * the turn that produced it. */
void client_queue_flush(struct client *c)
{
    if (c->queued || c->state == CLIENT_CLOSING)
        return;
    if (c->out.len == 0) {
        client_flush(c); /* nothing to send: gives the buffer back now */
        client_publish(c);
        return;
    }
    struct io_thread *t = c->thread;
    c->queued = 1;
    c->flush_next = t->flush_list;
    t->flush_list = c;
}

/* Writes what the thread's connections have queued. It runs twice per loop turn:
 * - in the check phase, after the poll's callbacks (reads, and writes the kernel finished),
 *   and before closing handles are freed, so every connection on the list is still allocated
 *   (a closed one is CLIENT_CLOSING);
 * - in the prepare phase, just before the poll: libuv runs write callbacks and timers before
 *   it, and what they queued must not wait for the poll to return (it may sleep). */
void client_pubsub_kick(void *conn)
{
    struct client *c = conn;
    if (c->state != CLIENT_CLOSING && c->thread->running != c)
        client_queue_flush(c); /* the running one queues itself after its commands */
}

void client_flush_queued(struct io_thread *t)
{
    pubsub_flush_wakes(); /* before the replies: a PUBLISH's reply follows its wake-up */
    while (t->flush_list != NULL) {
        struct client *c = t->flush_list;
        t->flush_list = c->flush_next;
        c->flush_next = NULL;
        c->queued = 0;
        client_flush(c);
        if (output_checked(c) && !resume_if_drained(c)) /* it queues c again */
            client_publish(c);
    }
}

/* What the slices of the current turn have taken so far (the count starts again each turn). */
static uint64_t turn_used(struct io_thread *t)
{
    if (t->budget_turn != t->turn) {
        t->budget_turn = t->turn;
        t->turn_used_ns = 0;
    }
    return t->turn_used_ns;
}

/* Whether the turn's budget is used, counting the slice that began at `began` (0: at this
 * look, which *began records). */
static int budget_spent(struct io_thread *t, uint64_t *began)
{
    uint64_t now = uv_hrtime();
    if (*began == 0)
        *began = now;
    return turn_used(t) + (now - *began) >= TURN_BUDGET_NS;
}

static void on_ready(uv_idle_t *h);

/* c used its slice with commands still buffered: they wait, with any input still in the
 * kernel, for the thread's next turn, where on_ready gives c another slice. */
static void yield_turn(struct client *c)
{
    struct io_thread *t = c->thread;
    stop_reading(c);
    if (c->ready)
        return;
    c->ready = 1;
    c->ready_next = NULL;
    if (t->ready_tail != NULL) {
        t->ready_tail->ready_next = c;
    } else {
        t->ready_head = c;
        uv_idle_start(&t->ready_idle, on_ready);
    }
    t->ready_tail = c;
}

/* The next turn: one more slice for each connection that was waiting when it began, in the
 * order they stopped (one that stops again goes to the back, for the turn after), as far as the
 * turn's budget goes. The idle phase comes before the prepare phase, which writes their replies
 * before the poll. */
static void on_ready(uv_idle_t *h)
{
    struct io_thread *t = h->data;
    thread_mark_work(t);
    size_t n = 0;
    for (struct client *r = t->ready_head; r != NULL; r = r->ready_next)
        n++;
    /* Popped one at a time, at most n: a connection closed meanwhile leaves the list. Once the
     * turn's budget is used, the rest wait for the next turn, first in line (at least one runs
     * each turn, so the list always moves). */
    for (size_t done = 0; done < n && t->ready_head != NULL; done++) {
        if (done > 0 && turn_used(t) >= TURN_BUDGET_NS)
            break;
        struct client *c = t->ready_head;
        t->ready_head = c->ready_next;
        if (t->ready_tail == c)
            t->ready_tail = NULL;
        c->ready_next = NULL;
        c->ready = 0;
        if (c->state == CLIENT_ACTIVE)
            process(c);
    }
    if (t->ready_head == NULL)
        uv_idle_stop(h);
}

/* Where the run of commands next looks up from its commands (an out.len): at the fewest unsent
 * bytes a limit or the pause may act on (watch), or a slice check's worth of replies on. */
static size_t look_at(const struct client *c, size_t watch)
{
    size_t infl = inflight_len(c);
    size_t limit_at = watch > infl ? watch - infl : 0;
    size_t slice_at = c->out.len + SLICE_CHECK_BYTES;
    return limit_at < slice_at ? limit_at : slice_at;
}

/* Runs the complete commands buffered, for one slice at most, settles the parser (an idle
 * connection holds no buffer) and queues the batch's replies for the end of the turn
 * (queue_flush). Between commands it looks, when the replies reach look_at's mark or every
 * SLICE_CHECK_CMDS commands, at the output limits, the pause and the slice. */
static void process(struct client *c)
{
    struct net_shared *net = c->thread->net;
    /* Messages published before these commands arrived are delivered before their replies. */
    if (pubsub_pending())
        pubsub_drain();
    out_borrow(c);
    size_t watch = output_watch(c);
    size_t mark = look_at(c, watch);
    size_t out0 = c->out.len;
    unsigned left = SLICE_CHECK_CMDS;
    uint64_t began = 0; /* this slice's start, read at its first look */
    while (c->state == CLIENT_ACTIVE) {
        if (c->out.len >= mark || left == 0) {
            size_t pend = pending_output(c);
            watch = output_watch(c); /* AUTH or SUBSCRIBE may have changed it */
            if (pend >= watch) {
                if (output_limits_broken(c, pend, 0))
                    break;
                if ((int64_t)pend > pause_limit(c)) {
                    /* Stop reading until the client takes its replies (DESIGN.md "Hot path"). */
                    c->state = CLIENT_PAUSED;
                    stop_reading(c);
                    break;
                }
            }
            if (c->out.len - out0 >= SLICE_BYTES || budget_spent(c->thread, &began)) {
                yield_turn(c);
                break;
            }
            mark = look_at(c, watch);
            left = SLICE_CHECK_CMDS;
        }
        left--;
        struct resp_cmd cmd;
        enum resp_status st = resp_next(&c->resp, &cmd);
        if (st == RESP_NEED_MORE)
            break;
        if (st == RESP_ERROR) {
            client_protocol_error(c, resp_error(&c->resp));
            break;
        }
        __atomic_store_n(&c->session.last_mono_ns, (int64_t)uv_now(&c->thread->loop) * 1000000,
                         __ATOMIC_RELAXED);
        c->thread->running = c; /* a busy script's serve leaves its input and replies alone */
        cmd_execute(net->env, &c->session, cmd.argc, cmd.argv, cmd.lens, &c->out);
        c->thread->running = NULL;
        /* The waiter test is blocked_park's own, made here so a command that parks nothing
         * makes no call. */
        if (c->session.waiter != NULL && blocked_park(c, cmd.argc, cmd.argv, cmd.lens))
            break; /* the commands behind it wait (blocked.c) */
        if (c->session.flags & SESSION_CLOSE_AFTER_REPLY)
            client_close_after_flush(c);
        else if (atomic_load_explicit(&c->kill, memory_order_relaxed) == CLIENT_KILL_NOW)
            client_close(c);
    }
    if (began != 0) /* only a batch long enough to be looked at reads the clock */
        c->thread->turn_used_ns = turn_used(c->thread) + (uv_hrtime() - began);
    if (c->state == CLIENT_CLOSING || c->state == CLIENT_DRAINING)
        resp_deinit(&c->resp); /* nothing more will be parsed */
    else
        resp_settle(&c->resp);
    /* Published before the replies go out too: a client that got them and asks CLIENT LIST on
     * another connection sees its query buffer as it is now. */
    client_publish(c);
    client_queue_flush(c);
    /* Reading again after a pause: resume_if_drained, once the replies are with the kernel;
     * after a slice: on_ready, once the buffered commands have run. */
    if ((c->state == CLIENT_ACTIVE || c->state == CLIENT_BLOCKED) && !c->reading && !c->ready)
        client_start_reading(c);
}

/* blocked.c's resume: the waiting request has been answered, the commands behind it run. */
void client_resume_unblocked(struct client *c)
{
    process(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct client *c = s->data;
    thread_mark_work(c->thread);
    if (nread == UV_ENOBUFS) {
        char what[96];
        snprintf(what, sizeof(what), "query buffer limit exceeded (client-query-buffer-limit %lld)",
                 (long long)CONF_GET(c->thread->net->conf, client_query_buffer_limit));
        resp_deinit(&c->resp);
        client_protocol_error(c, what);
        client_flush(c);
        return;
    }
    if (nread <= 0) {
        /* EAGAIN (0) or an error: nothing arrived, the shared buffer is free again. */
        resp_settle(&c->resp);
        if (nread < 0)
            client_close(c);
        return;
    }
    stats_add(&c->thread->stats.net_input_bytes, (uint64_t)nread);
    resp_input_commit(&c->resp, (size_t)nread);
    process(c);
}
