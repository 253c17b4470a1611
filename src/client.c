/* client.c - one connection: reading into the parser's buffer, running commands, writing the
 * replies back with as few syscalls as the pipeline allows, back-pressure, and closing.
 *
 * Everything here runs on the connection's own I/O thread; only `kill` (atomic) and the
 * registry links (registry_lock) are touched by others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rlimitd/clock.h"
#include "rlimitd/log.h"
#include "server_internal.h"

static void process(struct client *c);
static void flush(struct client *c);
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
    struct server *srv = c->thread->srv;

    if (c->tprev != NULL)
        c->tprev->tnext = c->tnext;
    else
        c->thread->clients = c->tnext;
    if (c->tnext != NULL)
        c->tnext->tprev = c->tprev;

    /* Shutting down: the last client gone ends the grace timer, so the loop can finish. Only
     * once the thread has handled the stop (t->stopped): before that the cron timer is not the
     * grace timer yet, and the wake-up handler closes it itself when no client is left. Closing
     * it here too (the SHUTDOWN client is closed before the wake-up runs) closed it twice. */
    if (atomic_load(&srv->stopping) && c->thread->stopped && c->thread->clients == NULL &&
        !uv_is_closing((uv_handle_t *)&c->thread->cron))
        uv_close((uv_handle_t *)&c->thread->cron, NULL);
    session_deinit(&c->session);
    resp_destroy(&c->resp);
    rbuf_free(&c->out);
    rbuf_free(&c->inflight);
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
    struct server *srv = c->thread->srv;
    pthread_mutex_lock(&srv->registry_lock);
    if (c->gprev != NULL)
        c->gprev->gnext = c->gnext;
    else
        srv->registry = c->gnext;
    if (c->gnext != NULL)
        c->gnext->gprev = c->gprev;
    c->gprev = c->gnext = NULL;
    pthread_mutex_unlock(&srv->registry_lock);
    atomic_fetch_sub(&srv->nclients, 1);
    uv_close(&c->h.handle, on_close);
}

void client_close_after_flush(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    c->state = CLIENT_DRAINING;
    stop_reading(c);
    if (!c->writing && c->out.len == 0)
        client_close(c);
}

static struct resp_limits current_limits(struct server *srv)
{
    struct resp_limits lim;
    pthread_mutex_lock(&srv->env.conf_lock);
    lim.query_buf = (size_t)srv->conf->client_query_buffer_limit;
    lim.max_bulk = (size_t)srv->conf->proto_max_bulk_len;
    lim.max_args = (size_t)srv->conf->proto_max_args;
    pthread_mutex_unlock(&srv->env.conf_lock);
    return lim;
}

/* Applies a new configuration generation (limits) to the client. */
static void client_refresh_config(struct client *c)
{
    struct resp_limits lim = current_limits(c->thread->srv);
    resp_set_limits(c->resp, &lim);
    c->config_gen = c->thread->config_gen;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct client *c = h->data;
    char *p;
    size_t len;
    /* The parser's own buffer: reads cost no malloc (STYLE "U"). */
    resp_input_space(c->resp, &p, &len);
    buf->base = p;
    buf->len = len;
}

static size_t pending_output(const struct client *c)
{
    return c->out.len + c->inflight.len;
}

static int64_t output_limit(const struct client *c)
{
    return __atomic_load_n(&c->thread->srv->conf->client_output_buffer_limit, __ATOMIC_RELAXED);
}

static void on_write(uv_write_t *req, int status)
{
    struct client *c = req->data;
    thread_mark_work(c->thread);
    c->writing = 0;
    c->inflight.len = 0;
    if (status < 0) {
        if (status != UV_ECANCELED && c->state != CLIENT_CLOSING)
            client_close(c);
        return;
    }
    if (c->state == CLIENT_CLOSING)
        return;
    flush(c);
    if (c->state == CLIENT_DRAINING) {
        if (!c->writing && c->out.len == 0)
            client_close(c);
        return;
    }
    /* Back-pressure released: run the commands that were left buffered, then read again. */
    if (c->state == CLIENT_PAUSED && (int64_t)pending_output(c) <= output_limit(c) / 2) {
        c->state = CLIENT_ACTIVE;
        process(c);
    }
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
 * the socket does not take goes to uv_write from the inflight buffer. */
static void flush(struct client *c)
{
    if (c->writing || c->out.len == 0 || c->state == CLIENT_CLOSING)
        return;
    stats_add(&c->thread->stats.net_output_bytes, c->out.len);
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n == (int)c->out.len) {
        c->out.len = 0;
        if (c->state == CLIENT_DRAINING)
            client_close(c); /* the last reply (QUIT, protocol error) is out */
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        client_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    /* Swap buffers: the unsent tail becomes inflight, the old inflight buffer is reused. */
    struct rbuf tmp = c->inflight;
    c->inflight = c->out;
    c->out = tmp;
    c->out.len = 0;
    if (done > 0) {
        memmove(c->inflight.p, c->inflight.p + done, c->inflight.len - done);
        c->inflight.len -= done;
    }
    b = uv_buf_init(c->inflight.p, (unsigned)c->inflight.len);
    c->wreq.data = c;
    if (uv_write(&c->wreq, &c->h.stream, &b, 1, on_write) != 0) {
        client_close(c);
        return;
    }
    c->writing = 1;
}

/* Publishes this connection's buffer figures for CLIENT LIST on other threads. */
static void publish(struct client *c)
{
    size_t in = resp_buffered(c->resp), cap = resp_capacity(c->resp);
    atomic_store_explicit(&c->qbuf, in, memory_order_relaxed);
    atomic_store_explicit(&c->qbuf_free, cap > in ? cap - in : 0, memory_order_relaxed);
    atomic_store_explicit(&c->rbs, c->out.cap, memory_order_relaxed);
    atomic_store_explicit(&c->obl, c->out.len, memory_order_relaxed);
    atomic_store_explicit(&c->oll, (size_t)(c->writing ? 1 : 0), memory_order_relaxed);
    atomic_store_explicit(&c->omem, c->inflight.len, memory_order_relaxed);
    atomic_store_explicit(&c->tot_mem,
                          sizeof(*c) + resp_memory(c->resp) + c->out.cap + c->inflight.cap,
                          memory_order_relaxed);
}

/* Runs every complete command buffered, then flushes once. */
static void process(struct client *c)
{
    struct server *srv = c->thread->srv;
    if (c->config_gen != c->thread->config_gen)
        client_refresh_config(c);
    while (c->state == CLIENT_ACTIVE) {
        if ((int64_t)pending_output(c) > output_limit(c)) {
            /* Stop reading until the client takes its replies (DESIGN.md "Hot path"). */
            c->state = CLIENT_PAUSED;
            stop_reading(c);
            break;
        }
        struct resp_cmd cmd;
        enum resp_status st = resp_next(c->resp, &cmd);
        if (st == RESP_NEED_MORE)
            break;
        if (st == RESP_ERROR) {
            protocol_error(c, resp_error(c->resp));
            break;
        }
        __atomic_store_n(&c->session.last_mono_ns, (int64_t)uv_now(&c->thread->loop) * 1000000,
                         __ATOMIC_RELAXED);
        cmd_execute(&srv->env, &c->session, cmd.argc, cmd.argv, cmd.lens, &c->out);
        if (c->session.flags & SESSION_CLOSE_AFTER_REPLY)
            client_close_after_flush(c);
        else if (atomic_load_explicit(&c->kill, memory_order_relaxed))
            client_close(c);
    }
    flush(c);
    publish(c);
    /* Reading again after a pause was released in on_write. */
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
                 (long long)CONF_GET(c->thread->srv->conf, client_query_buffer_limit));
        protocol_error(c, what);
        flush(c);
        return;
    }
    if (nread < 0) {
        client_close(c);
        return;
    }
    if (nread == 0)
        return;
    stats_add(&c->thread->stats.net_input_bytes, (uint64_t)nread);
    resp_input_commit(c->resp, (size_t)nread);
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

void client_accept(struct io_thread *t, uv_stream_t *listener, int is_unix)
{
    struct server *srv = t->srv;
    struct client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
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
    rbuf_init(&c->inflight);
    session_init(&c->session, atomic_fetch_add(&srv->next_client_id, 1) + 1, &t->stats);
    c->session.authed = !atomic_load(&srv->env.auth_required);
    c->config_gen = t->config_gen;
    struct resp_limits lim = current_limits(srv);
    c->resp = resp_create(&lim);
    uv_fileno(&c->h.handle, &c->fd);
    c->session.peer = c->addr;

    if (is_unix) {
        size_t len = sizeof(c->laddr);
        if (uv_pipe_getsockname(&c->h.pipe, c->laddr, &len) != 0)
            c->laddr[0] = '\0';
        snprintf(c->addr, sizeof(c->addr), "%s:0", c->laddr);
    } else {
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0)
            format_addr(&ss, c->addr, sizeof(c->addr));
        len = sizeof(ss);
        if (uv_tcp_getsockname(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0)
            format_addr(&ss, c->laddr, sizeof(c->laddr));
        uv_tcp_nodelay(&c->h.tcp, 1);
        int64_t ka = __atomic_load_n(&srv->conf->tcp_keepalive, __ATOMIC_RELAXED);
        if (ka > 0)
            uv_tcp_keepalive(&c->h.tcp, 1, (unsigned)ka);
    }

    /* Lists first, so that every exit below goes through on_close. */
    c->tnext = t->clients;
    if (t->clients != NULL)
        t->clients->tprev = c;
    t->clients = c;
    pthread_mutex_lock(&srv->registry_lock);
    c->gnext = srv->registry;
    if (srv->registry != NULL)
        srv->registry->gprev = c;
    srv->registry = c;
    pthread_mutex_unlock(&srv->registry_lock);
    int64_t n = atomic_fetch_add(&srv->nclients, 1) + 1;
    stats_add(&t->stats.connections, 1);

    int64_t maxclients = __atomic_load_n(&srv->conf->maxclients, __ATOMIC_RELAXED);
    if (n > maxclients) {
        stats_add(&t->stats.rejected_conns, 1);
        reply_error(&c->out, "ERR max number of clients reached");
        c->state = CLIENT_ACTIVE;
        flush(c);
        client_close_after_flush(c);
        return;
    }
    if (atomic_load(&srv->stopping)) {
        client_close(c);
        return;
    }
    c->state = CLIENT_ACTIVE;
    publish(c);
    start_reading(c);
}

void client_format(const struct client *c, struct rbuf *out, uint64_t now_mono_ms)
{
    const struct session *s = &c->session;
    int64_t last = __atomic_load_n(&s->last_mono_ns, __ATOMIC_RELAXED) / 1000000;
    int64_t idle = last > 0 && (int64_t)now_mono_ms > last ? ((int64_t)now_mono_ms - last) / 1000
                                                           : 0;
    int64_t age = (clock_now_ns() - s->ctime_ns) / 1000000000;
    int last_cmd = __atomic_load_n(&s->last_cmd, __ATOMIC_RELAXED);
    const char *cmd = last_cmd >= 0 ? cmd_name(last_cmd) : "NULL";
    unsigned flags = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);
    int multi = __atomic_load_n(&s->multi_count, __ATOMIC_RELAXED);
    size_t multi_mem = __atomic_load_n(&s->multi_mem, __ATOMIC_RELAXED);
    size_t oll = atomic_load_explicit(&c->oll, memory_order_relaxed);
    char line[1280];
    /* Redis 7's fields in Redis's order; we have no pub/sub, so those counts are really 0. */
    int n = snprintf(line, sizeof(line),
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 "
                     "sub=0 psub=0 ssub=0 multi=%d qbuf=%zu qbuf-free=%zu argv-mem=0 "
                     "multi-mem=%zu rbs=%zu rbp=%zu obl=%zu oll=%zu omem=%zu tot-mem=%zu "
                     "events=%s cmd=%s user=default redir=-1 resp=2 lib-name=%s lib-ver=%s\n",
                     (unsigned long long)s->id, c->addr, c->laddr, c->fd,
                     s->name != NULL ? s->name : "", (long long)age, (long long)idle,
                     (flags & SESSION_IN_MULTI) ? "x" : "N", multi,
                     atomic_load_explicit(&c->qbuf, memory_order_relaxed),
                     atomic_load_explicit(&c->qbuf_free, memory_order_relaxed), multi_mem,
                     atomic_load_explicit(&c->rbs, memory_order_relaxed),
                     atomic_load_explicit(&c->rbs, memory_order_relaxed),
                     atomic_load_explicit(&c->obl, memory_order_relaxed), oll,
                     atomic_load_explicit(&c->omem, memory_order_relaxed),
                     atomic_load_explicit(&c->tot_mem, memory_order_relaxed),
                     oll ? "rw" : "r", cmd, s->lib_name != NULL ? s->lib_name : "",
                     s->lib_ver != NULL ? s->lib_ver : "");
    if (n > 0)
        rbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
