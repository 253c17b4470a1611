/* client_start.c - a connection's beginning: accepted, its address, the thread's list and the
 * registry, maxclients, reading. */
#include "client_start.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "rlimitd/alloc.h"
#include "client_info.h"

void client_accept(struct io_thread *t, uv_stream_t *listener, int is_unix)
{
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
    client_start(c, is_unix);
}

void client_start(struct client *c, int is_unix)
{
    struct io_thread *t = c->thread;
    struct net_shared *net = t->net;
    rbuf_init(&c->out);
    session_init(&c->session, atomic_fetch_add(&net->next_client_id, 1) + 1, &t->stats);
    c->session.authed = !atomic_load(&net->env->auth_required);
    c->session.wait_home = &t->wait_home; /* its requests may wait (blocked.c) */
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
            client_format_addr(&ss, c->addr_buf, sizeof(c->addr_buf));
        c->addr = c->addr_buf;
        uv_tcp_nodelay(&c->h.tcp, 1);
        int64_t ka = __atomic_load_n(&net->conf->tcp_keepalive, __ATOMIC_RELAXED);
        if (ka > 0)
            uv_tcp_keepalive(&c->h.tcp, 1, (unsigned)ka);
    }
    c->session.peer = c->addr;
    c->session.conn = c;
    c->session.conn_out = &c->out;

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
    client_publish(c);

    int64_t maxclients = __atomic_load_n(&net->conf->maxclients, __ATOMIC_RELAXED);
    if (n > maxclients) {
        stats_add(&t->stats.rejected_conns, 1);
        reply_error(&c->out, "ERR max number of clients reached");
        c->state = CLIENT_ACTIVE;
        client_flush(c);
        client_close_after_flush(c);
        return;
    }
    if (atomic_load(&net->stopping)) {
        client_close(c);
        return;
    }
    c->state = CLIENT_ACTIVE;
    client_start_reading(c);
}
