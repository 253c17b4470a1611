/* busy_serve.c - a thread whose script has passed busy-reply-threshold still answers its other
 * connections (DESIGN.md "Long scripts and BUSY").
 *
 * The thread's loop cannot run while the script does: the script runs inside the read
 * callback of the connection that sent it, and a libuv loop is not reentrant. So the script's
 * count hook calls busy_serve every few ms, and busy_serve does by hand, without the loop,
 * what a turn would do for every other connection: it writes the replies queued before the
 * script began, accepts new connections from the thread's listening sockets (accept4, then
 * adopted into the loop: they are read by the loop once the script ends), and reads and parses
 * what the connections sent. Their commands run through cmd_execute_while_busy, which runs only
 * SCRIPT KILL and the keyless commands Redis allows while busy (SHUTDOWN, MULTI, DISCARD, AUTH,
 * HELLO, QUIT, RESET, UNWATCH) and answers everything else BUSY, as Redis's
 * processEventsWhileBlocked does.
 *
 * Invariants: no libuv callback runs from here (only calls libuv documents as usable inside
 * callbacks: uv_try_write, uv_write, uv_close, uv_*_open, uv_read_start); the running
 * connection (t->running) is never touched, so its parsed arguments and pipelined input stay as
 * they are; the other connections parse into busy_resp, never into the thread's shared parser
 * buffer that holds the running command's arguments, and are settled before busy_serve
 * returns. A connection with a write pending is not read (its replies stay in order). */
#include "busy_serve.h"
#include "client_thread.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_start.h"
#include "rlimitd/alloc.h"

/* New connections taken per serve and listener: the rest wait in the backlog for the next. */
#define BUSY_ACCEPT_MAX 64

static _Thread_local struct io_thread *tl_thread;

void busy_serve_thread(struct io_thread *t)
{
    tl_thread = t;
}

/* Writes the replies queued for the end of this loop turn, except the running connection's
 * (kept queued: its command is not done). */
static void flush_others(struct io_thread *t, struct client *keep)
{
    int keep_queued = keep != NULL && keep->queued;
    if (keep_queued) {
        struct client **pp = &t->flush_list;
        while (*pp != keep)
            pp = &(*pp)->flush_next;
        *pp = keep->flush_next;
        keep->flush_next = NULL;
        keep->queued = 0;
    }
    client_flush_queued(t);
    if (keep_queued)
        client_queue_flush(keep);
}

/* A connection accept4(2)ed here becomes a client of the loop (read by it once the script
 * ends, and by serve_client meanwhile). */
static void adopt(struct io_thread *t, int fd, int is_unix)
{
    struct client *c = xcalloc(1, sizeof(*c));
    c->thread = t;
    c->h.handle.data = c;
    int rc;
    if (is_unix) {
        uv_pipe_init(&t->loop, &c->h.pipe, 0);
        rc = uv_pipe_open(&c->h.pipe, fd);
    } else {
        uv_tcp_init(&t->loop, &c->h.tcp);
        rc = uv_tcp_open(&c->h.tcp, fd);
    }
    if (rc != 0) {
        close(fd);
        uv_close(&c->h.handle, (uv_close_cb)free);
        return;
    }
    client_start(c, is_unix);
}

static void accept_new(struct io_thread *t, uv_handle_t *listener, int is_unix)
{
    int lfd;
    if (uv_fileno(listener, &lfd) != 0 || uv_is_closing(listener))
        return;
    for (int i = 0; i < BUSY_ACCEPT_MAX; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or an error the loop's own accept will see again */
        adopt(t, fd, is_unix);
    }
}

/* Reads what c sent and answers it in restricted mode. */
static void serve_client(struct io_thread *t, struct client *c)
{
    struct net_shared *net = t->net;
    struct resp_shared *home = c->resp.sh;
    c->resp.sh = &t->busy_resp;
    /* One read per serve: the next serve, a few ms on, reads on. */
    int eof = 0;
    char *p;
    size_t len;
    resp_input_space(&c->resp, &p, &len);
    if (c->reading && len > 0) { /* 0: the query buffer limit, which resp_next reports below */
        ssize_t n = recv(c->fd, p, len, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            eof = 1;
        else if (n > 0) {
            stats_add(&t->stats.net_input_bytes, (uint64_t)n);
            resp_input_commit(&c->resp, (size_t)n);
        }
    }
    while (!eof && c->state == CLIENT_ACTIVE) {
        struct resp_cmd cmd;
        enum resp_status st = resp_next(&c->resp, &cmd);
        if (st == RESP_NEED_MORE)
            break;
        if (st == RESP_ERROR) {
            client_protocol_error(c, resp_error(&c->resp));
            break;
        }
        cmd_execute_while_busy(net->env, &c->session, cmd.argc, cmd.argv, cmd.lens, &c->out);
        if (c->session.flags & SESSION_CLOSE_AFTER_REPLY)
            client_close_after_flush(c);
    }
    if (eof || c->state == CLIENT_CLOSING || c->state == CLIENT_DRAINING)
        resp_deinit(&c->resp);
    else
        resp_settle(&c->resp);
    c->resp.sh = home;
    if (eof) {
        client_close(c);
        return;
    }
    client_publish(c);
    client_flush(c);
}

void busy_serve_thread_end(struct io_thread *t)
{
    if (t->busy_resp_ready)
        resp_shared_deinit(&t->busy_resp);
    t->busy_resp_ready = 0;
    free(t->busy_pfd);
    free(t->busy_cl);
    t->busy_pfd = NULL;
    t->busy_cl = NULL;
    t->busy_cap = 0;
}

void busy_serve(void *ud)
{
    (void)ud;
    struct io_thread *t = tl_thread;
    if (t == NULL || t->in_busy_serve)
        return;
    t->in_busy_serve = 1;
    struct client *running = t->running;
    flush_others(t, running);

    struct resp_limits lim = client_limits(t->net);
    if (!t->busy_resp_ready) {
        resp_shared_init(&t->busy_resp, &lim);
        t->busy_resp_ready = 1;
    } else {
        resp_shared_set_limits(&t->busy_resp, &lim);
    }

    if (!t->stopped && !atomic_load(&t->net->stopping)) {
        for (int i = 0; i < t->nlisteners; i++)
            accept_new(t, (uv_handle_t *)&t->listeners[i], 0);
        if (t->has_unix)
            accept_new(t, (uv_handle_t *)&t->unix_listener, 1);
    }

    /* One poll over the connections that may be read: idle ones cost no read each. */
    size_t n = 0;
    for (struct client *c = t->clients; c != NULL; c = c->tnext)
        n++;
    if (n > t->busy_cap) {
        t->busy_cap = n * 2;
        t->busy_pfd = xrealloc(t->busy_pfd, t->busy_cap * sizeof(*t->busy_pfd));
        t->busy_cl = xrealloc(t->busy_cl, t->busy_cap * sizeof(*t->busy_cl));
    }
    /* Connections that are reading, and those whose commands wait for the next loop turn (a
     * slice ended: `ready`, not reading; their commands are complete in their own buffer). */
    size_t k = 0;
    for (struct client *c = t->clients; c != NULL; c = c->tnext) {
        if (c == running || c->state != CLIENT_ACTIVE || c->inflight != NULL ||
            (!c->reading && !c->ready))
            continue;
        t->busy_pfd[k] = (struct pollfd){.fd = c->reading ? c->fd : -1, .events = POLLIN};
        t->busy_cl[k++] = c;
    }
    if (k > 0)
        poll(t->busy_pfd, (nfds_t)k, 0);
    /* The list is not walked again: a connection closed here is only marked CLOSING (its
     * memory goes in the close callback, after the script), so busy_cl stays valid. */
    for (size_t i = 0; i < k; i++) {
        struct client *c = t->busy_cl[i];
        if ((t->busy_pfd[i].revents != 0 || c->ready) && c->state == CLIENT_ACTIVE)
            serve_client(t, c);
    }
    t->in_busy_serve = 0;
}
