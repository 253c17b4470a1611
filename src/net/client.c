/* client.c - one connection: reading through the thread's shared buffer, running commands,
 * writing the replies back with as few syscalls as the pipeline allows, back-pressure, and
 * closing.
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
#include "client.h"

static void process(struct client *c);
static void flush(struct client *c);
static void publish(struct client *c);
static size_t client_memory(const struct client *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void start_reading(struct client *c)
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

void client_close(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    c->state = CLIENT_CLOSING;
    stop_reading(c);
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
    atomic_store_explicit(&c->tot_mem, 0, memory_order_relaxed);
    atomic_fetch_sub(&net->nclients, 1);
    uv_close(&c->h.handle, on_close);
}

static size_t pending_output(const struct client *c)
{
    return c->out.len + (c->inflight != NULL ? c->inflight->len : 0);
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

static int64_t output_limit(const struct client *c)
{
    return __atomic_load_n(&c->thread->net->conf->client_output_buffer_limit, __ATOMIC_RELAXED);
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

static void out_release(struct client *c)
{
    struct io_thread *t = c->thread;
    if (c->out.len != 0 || c->out.p == NULL)
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
    if (c->state != CLIENT_PAUSED || (int64_t)pending_output(c) > output_limit(c) / 2)
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
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED && c->state != CLIENT_CLOSING)
            client_close(c);
        return;
    }
    if (c->state == CLIENT_CLOSING)
        return;
    flush(c);
    if (c->state == CLIENT_DRAINING) {
        if (pending_output(c) == 0)
            client_close(c);
        return;
    }
    if (!resume_if_drained(c))
        publish(c);
}

static void protocol_error(struct client *c, const char *what)
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
 * the socket does not take is copied into a write of its own (the slow path: a full socket). */
static void flush(struct client *c)
{
    if (c->inflight != NULL || c->state == CLIENT_CLOSING)
        return;
    if (c->out.len == 0) {
        out_release(c);
        return;
    }
    stats_add(&c->thread->stats.net_output_bytes, c->out.len);
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
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
    struct client_write *w = xmalloc(sizeof(*w) + left);
    memcpy(w->data, c->out.p + done, left);
    w->len = left;
    w->c = c;
    c->out.len = 0;
    out_release(c);
    b = uv_buf_init(w->data, (unsigned)left);
    if (uv_write(&w->req, &c->h.stream, &b, 1, on_write) != 0) {
        free(w);
        client_close(c);
        return;
    }
    c->inflight = w;
}

/* Bytes this connection holds: what INFO's mem_clients_normal sums and CLIENT LIST's tot-mem
 * shows. The thread's shared buffers are not counted: they do not grow with connections. */
static size_t client_memory(const struct client *c)
{
    return sizeof(*c) + resp_capacity(&c->resp) + c->out.cap +
           (c->inflight != NULL ? sizeof(*c->inflight) + c->inflight->len : 0);
}

/* Publishes this connection's buffer figures for CLIENT LIST on other threads. obl goes last,
 * with release: a reader that loads it first (acquire) and sees this batch's value sees the
 * other figures of this batch too. */
static void publish(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return; /* no longer listed nor counted */
    size_t in = resp_buffered(&c->resp), cap = resp_capacity(&c->resp);
    size_t mem = client_memory(c);
    size_t old = atomic_load_explicit(&c->tot_mem, memory_order_relaxed);
    atomic_store_explicit(&c->tot_mem, mem, memory_order_relaxed);
    atomic_store_explicit(&c->qbuf, in, memory_order_relaxed);
    atomic_store_explicit(&c->qbuf_free, cap > in ? cap - in : 0, memory_order_relaxed);
    atomic_store_explicit(&c->rbs, c->out.cap, memory_order_relaxed);
    atomic_store_explicit(&c->omem, c->inflight != NULL ? c->inflight->len : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&c->obl, c->out.len, memory_order_release);
    if (mem != old)
        stats_add(&c->thread->stats.clients_mem, (uint64_t)mem - (uint64_t)old);
}

/* Replies go out at the end of the loop turn, after every connection that was ready has been
 * served (as Redis writes in beforeSleep): the writes then follow each other closely, so the
 * peer is woken once per turn rather than once per connection. Waking a sleeping peer is the
 * dear part of a loopback write (a cross-CPU wake-up, inside write(2), billed to us). A turn
 * lasts as long as the ready connections' pipelines take to run, so no reply waits longer than
 * the turn that produced it. */
static void queue_flush(struct client *c)
{
    if (c->queued || c->state == CLIENT_CLOSING)
        return;
    if (c->out.len == 0) {
        flush(c); /* nothing to send: gives the buffer back now */
        publish(c);
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
static void flush_queued(struct io_thread *t)
{
    while (t->flush_list != NULL) {
        struct client *c = t->flush_list;
        t->flush_list = c->flush_next;
        c->flush_next = NULL;
        c->queued = 0;
        flush(c);
        if (!resume_if_drained(c)) /* it queues c again */
            publish(c);
    }
}

static void on_flush_check(uv_check_t *h)
{
    flush_queued(h->data);
}

static void on_flush_prepare(uv_prepare_t *h)
{
    flush_queued(h->data);
}

/* Runs every complete command buffered, settles the parser (an idle connection holds no
 * buffer) and queues the batch's replies for the end of the turn (queue_flush). */
static void process(struct client *c)
{
    struct net_shared *net = c->thread->net;
    out_borrow(c);
    while (c->state == CLIENT_ACTIVE) {
        if ((int64_t)pending_output(c) > output_limit(c)) {
            /* Stop reading until the client takes its replies (DESIGN.md "Hot path"). */
            c->state = CLIENT_PAUSED;
            stop_reading(c);
            break;
        }
        struct resp_cmd cmd;
        enum resp_status st = resp_next(&c->resp, &cmd);
        if (st == RESP_NEED_MORE)
            break;
        if (st == RESP_ERROR) {
            protocol_error(c, resp_error(&c->resp));
            break;
        }
        __atomic_store_n(&c->session.last_mono_ns, (int64_t)uv_now(&c->thread->loop) * 1000000,
                         __ATOMIC_RELAXED);
        cmd_execute(net->env, &c->session, cmd.argc, cmd.argv, cmd.lens, &c->out);
        if (c->session.flags & SESSION_CLOSE_AFTER_REPLY)
            client_close_after_flush(c);
        else if (atomic_load_explicit(&c->kill, memory_order_relaxed))
            client_close(c);
    }
    if (c->state == CLIENT_CLOSING || c->state == CLIENT_DRAINING)
        resp_deinit(&c->resp); /* nothing more will be parsed */
    else
        resp_settle(&c->resp);
    /* Published before the replies go out too: a client that got them and asks CLIENT LIST on
     * another connection sees its query buffer as it is now. */
    publish(c);
    queue_flush(c);
    /* Reading again after a pause: resume_if_drained, once the replies are with the kernel. */
    if (c->state == CLIENT_ACTIVE && !c->reading)
        start_reading(c);
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
        protocol_error(c, what);
        flush(c);
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

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, host, sizeof(host));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, host, sizeof(host));
        port = ntohs(a->sin6_port);
    }
    snprintf(out, outlen, "%s:%d", host, port);
}

static struct resp_limits current_limits(struct net_shared *net)
{
    struct resp_limits lim;
    pthread_mutex_lock(&net->env->conf_lock);
    lim.query_buf = (size_t)net->conf->client_query_buffer_limit;
    lim.max_bulk = (size_t)net->conf->proto_max_bulk_len;
    lim.max_args = (size_t)net->conf->proto_max_args;
    pthread_mutex_unlock(&net->env->conf_lock);
    return lim;
}

void client_thread_init(struct io_thread *t)
{
    struct resp_limits lim = current_limits(t->net);
    resp_shared_init(&t->resp, &lim);
    rbuf_init(&t->spare_out);
    t->flush_list = NULL;
    uv_check_init(&t->loop, &t->flush_check);
    t->flush_check.data = t;
    uv_check_start(&t->flush_check, on_flush_check);
    uv_prepare_init(&t->loop, &t->flush_prepare);
    t->flush_prepare.data = t;
    uv_prepare_start(&t->flush_prepare, on_flush_prepare);
    /* Neither keeps the loop alive by itself. */
    uv_unref((uv_handle_t *)&t->flush_check);
    uv_unref((uv_handle_t *)&t->flush_prepare);
}

void client_thread_config(struct io_thread *t)
{
    struct resp_limits lim = current_limits(t->net);
    resp_shared_set_limits(&t->resp, &lim);
}

void client_thread_close_handles(struct io_thread *t)
{
    uv_close((uv_handle_t *)&t->flush_check, NULL);
    uv_close((uv_handle_t *)&t->flush_prepare, NULL);
}

void client_thread_deinit(struct io_thread *t)
{
    resp_shared_deinit(&t->resp);
    rbuf_free(&t->spare_out);
}

void client_accept(struct io_thread *t, uv_stream_t *listener, int is_unix)
{
    struct net_shared *net = t->net;
    struct client *c = xcalloc(1, sizeof(*c));
    c->thread = t;
    c->h.handle.data = c;
    if (is_unix)
        uv_pipe_init(&t->loop, &c->h.pipe, 0);
    else
        uv_tcp_init(&t->loop, &c->h.tcp);
    if (uv_accept(listener, &c->h.stream) != 0) {
        uv_close(&c->h.handle, (uv_close_cb)free);
        return;
    }
    rbuf_init(&c->out);
    session_init(&c->session, atomic_fetch_add(&net->next_client_id, 1) + 1, &t->stats);
    c->session.authed = !atomic_load(&net->env->auth_required);
    resp_init(&c->resp, &t->resp);
    uv_fileno(&c->h.handle, &c->fd);
    c->is_unix = (unsigned char)is_unix;

    if (is_unix) {
        /* Every unix client of a thread has the same address: formatted once. */
        if (t->unix_addr[0] == '\0') {
            char path[sizeof(t->unix_addr) - 2];
            size_t len = sizeof(path);
            if (uv_pipe_getsockname(&c->h.pipe, path, &len) != 0)
                path[0] = '\0';
            snprintf(t->unix_addr, sizeof(t->unix_addr), "%s:0", path);
        }
        c->addr = t->unix_addr;
    } else {
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        c->addr_buf[0] = '\0';
        if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0)
            format_addr(&ss, c->addr_buf, sizeof(c->addr_buf));
        c->addr = c->addr_buf;
        uv_tcp_nodelay(&c->h.tcp, 1);
        int64_t ka = __atomic_load_n(&net->conf->tcp_keepalive, __ATOMIC_RELAXED);
        if (ka > 0)
            uv_tcp_keepalive(&c->h.tcp, 1, (unsigned)ka);
    }
    c->session.peer = c->addr;

    /* Lists first, so that every exit below goes through on_close. */
    c->tnext = t->clients;
    if (t->clients != NULL)
        t->clients->tprev = c;
    t->clients = c;
    pthread_mutex_lock(&net->lock);
    c->gnext = net->registry;
    if (net->registry != NULL)
        net->registry->gprev = c;
    net->registry = c;
    pthread_mutex_unlock(&net->lock);
    int64_t n = atomic_fetch_add(&net->nclients, 1) + 1;
    stats_add(&t->stats.connections, 1);
    publish(c);

    int64_t maxclients = __atomic_load_n(&net->conf->maxclients, __ATOMIC_RELAXED);
    if (n > maxclients) {
        stats_add(&t->stats.rejected_conns, 1);
        reply_error(&c->out, "ERR max number of clients reached");
        c->state = CLIENT_ACTIVE;
        flush(c);
        client_close_after_flush(c);
        return;
    }
    if (atomic_load(&net->stopping)) {
        client_close(c);
        return;
    }
    c->state = CLIENT_ACTIVE;
    start_reading(c);
}

/* The local address is not kept per connection: asked of the socket when listed (the caller
 * holds net_shared.lock, so the connection, and its fd, cannot be closed meanwhile). */
static void local_addr(const struct client *c, char *out, size_t outlen)
{
    if (c->is_unix) {
        size_t n = strlen(c->addr);
        snprintf(out, outlen, "%.*s", (int)(n >= 2 ? n - 2 : 0), c->addr); /* without ":0" */
        return;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    out[0] = '\0';
    if (getsockname(c->fd, (struct sockaddr *)&ss, &len) == 0)
        format_addr(&ss, out, outlen);
}

void client_format(const struct client *c, struct rbuf *out, uint64_t now_mono_ms)
{
    const struct session *s = &c->session;
    size_t obl = atomic_load_explicit(&c->obl, memory_order_acquire); /* first: see publish */
    int64_t last = __atomic_load_n(&s->last_mono_ns, __ATOMIC_RELAXED) / 1000000;
    int64_t idle = last > 0 && (int64_t)now_mono_ms > last ? ((int64_t)now_mono_ms - last) / 1000
                                                           : 0;
    int64_t age = (clock_now_ns() - s->ctime_ns) / 1000000000;
    int last_cmd = __atomic_load_n(&s->last_cmd, __ATOMIC_RELAXED);
    const char *cmd = last_cmd >= 0 ? cmd_name(last_cmd) : "NULL";
    unsigned flags = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);
    int multi = __atomic_load_n(&s->multi_count, __ATOMIC_RELAXED);
    size_t multi_mem = __atomic_load_n(&s->multi_mem, __ATOMIC_RELAXED);
    size_t omem = atomic_load_explicit(&c->omem, memory_order_relaxed);
    size_t oll = omem > 0 ? 1 : 0; /* one pending write at most */
    char laddr[112];
    local_addr(c, laddr, sizeof(laddr));
    char line[1280];
    /* Redis 7's fields in Redis's order; we have no pub/sub, so those counts are really 0. */
    int n = snprintf(line, sizeof(line),
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 "
                     "sub=0 psub=0 ssub=0 multi=%d qbuf=%zu qbuf-free=%zu argv-mem=0 "
                     "multi-mem=%zu rbs=%zu rbp=%zu obl=%zu oll=%zu omem=%zu tot-mem=%zu "
                     "events=%s cmd=%s user=default redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
                     (unsigned long long)s->id, c->addr, laddr, c->fd,
                     s->name != NULL ? s->name : "", (long long)age, (long long)idle,
                     (flags & SESSION_IN_MULTI) ? "x" : "N", multi,
                     atomic_load_explicit(&c->qbuf, memory_order_relaxed),
                     atomic_load_explicit(&c->qbuf_free, memory_order_relaxed), multi_mem,
                     atomic_load_explicit(&c->rbs, memory_order_relaxed),
                     atomic_load_explicit(&c->rbs, memory_order_relaxed),
                     obl, oll, omem,
                     atomic_load_explicit(&c->tot_mem, memory_order_relaxed),
                     oll ? "rw" : "r", cmd, (int)__atomic_load_n(&s->resp, __ATOMIC_RELAXED),
                     s->lib_name != NULL ? s->lib_name : "",
                     s->lib_ver != NULL ? s->lib_ver : "");
    if (n > 0)
        rbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
