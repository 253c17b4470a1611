/* listeners.c - the listening sockets: SO_REUSEPORT TCP sockets, one per I/O thread and address,
 * bound before any loop runs; thread 0's unix socket; metrics-port's plain sockets
 * (DESIGN.md "Threads"). An accepted connection goes to client.c on the thread that accepted it. */
#include "listeners.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_start.h"
#include "rlimitd/log.h"

#define BACKLOG 511

/* Opens one listening socket on addr:port. With reuseport (the normal case) every thread can
 * have its own and the kernel spreads connections; without it (the probe) the bind fails if
 * anything already listens there. Returns the fd, or -errno. */
static int open_listener(const char *addr, int port, int reuseport)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    int family;
    if (strchr(addr, ':') != NULL) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (uv_ip6_addr(addr, port, a) != 0)
            return -EINVAL;
        family = AF_INET6;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (uv_ip4_addr(strcmp(addr, "*") == 0 ? "0.0.0.0" : addr, port, a) != 0)
            return -EINVAL;
        family = AF_INET;
        len = sizeof(*a);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, BACKLOG) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Binds every address for every thread before any loop runs, so a taken port fails the start.
 * Returns 0 or -1 (logged). */
int listeners_bind(struct server *srv)
{
    struct conf *c = srv->conf;
    srv->ntcp = 0;
    if (c->port == 0)
        return 0;
    for (int b = 0; b < c->nbind; b++) {
        const char *addr = c->bind[b];
        int optional = addr[0] == '-';
        if (optional)
            addr++;
        int ok = 1;
        /* SO_REUSEPORT would let a second rlimitd (same user) join this port and split the
         * traffic, silently doubling every limit. A plain bind first fails if anything listens
         * there already; the window between its close and our binds is microseconds at start. */
        int probe = open_listener(addr, (int)c->port, 0);
        if (probe >= 0) {
            close(probe);
        } else if (!(optional && (probe == -EADDRNOTAVAIL || probe == -EAFNOSUPPORT))) {
            log_warning("Could not create server TCP listening socket %s:%lld: %s", addr,
                        (long long)c->port, strerror(-probe));
            return -1;
        }
        for (int t = 0; t < srv->nthreads; t++) {
            int fd = open_listener(addr, (int)c->port, 1);
            if (fd < 0) {
                for (int u = 0; u < t; u++)
                    close(srv->tcp_fds[u][srv->ntcp]);
                if (optional && (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT)) {
                    log_notice("Skipping optional bind address %s: %s", addr, strerror(-fd));
                    ok = 0;
                    break;
                }
                log_warning("Could not create server TCP listening socket %s:%lld: %s", addr,
                            (long long)c->port, strerror(-fd));
                return -1;
            }
            srv->tcp_fds[t][srv->ntcp] = fd;
        }
        if (ok) {
            log_notice("Listening on %s:%lld", addr, (long long)c->port);
            srv->ntcp++;
            /* Issue 4's protected default: loopback is safe, anything else wants a password. */
            int loopback = strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
            if (!loopback && (c->requirepass == NULL || c->requirepass[0] == '\0'))
                log_warning("WARNING: listening on %s:%lld, which is not a loopback address, "
                            "with no requirepass set: anyone who can reach this address can use "
                            "and reset every limit. Set requirepass, or bind 127.0.0.1.",
                            addr, (long long)c->port);
        }
    }
    if (srv->ntcp == 0 && (c->unixsocket == NULL || c->unixsocket[0] == '\0')) {
        log_warning("No address could be bound");
        return -1;
    }
    return 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct io_thread *t = listener->data;
    if (status < 0) {
        log_warning("Accepting a connection failed: %s", uv_strerror(status));
        return;
    }
    thread_mark_work(t);
    client_accept(t, listener, listener->type == UV_NAMED_PIPE);
}

int listeners_open(struct io_thread *t)
{
    struct server *srv = t->srv;
    for (int i = 0; i < srv->ntcp; i++) {
        uv_tcp_t *l = &t->listeners[i];
        uv_tcp_init(&t->loop, l);
        l->data = t;
        int rc = uv_tcp_open(l, srv->tcp_fds[t->index][i]);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)l, BACKLOG, on_connection);
        if (rc != 0) {
            log_warning("Listening failed: %s", uv_strerror(rc));
            return -1;
        }
        t->nlisteners++;
    }
    const char *path = srv->conf->unixsocket;
    if (t->index == 0 && path != NULL && path[0] != '\0') {
        uv_pipe_init(&t->loop, &t->unix_listener, 0);
        t->unix_listener.data = t;
        unlink(path); /* a stale socket from a crash would make bind fail */
        int rc = uv_pipe_bind(&t->unix_listener, path);
        if (rc == 0 && srv->conf->unixsocketperm != 0)
            chmod(path, (mode_t)srv->conf->unixsocketperm);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&t->unix_listener, BACKLOG, on_connection);
        if (rc != 0) {
            log_warning("Opening Unix socket %s failed: %s", path, uv_strerror(rc));
            return -1;
        }
        t->has_unix = 1;
        log_notice("Listening on unix socket %s", path);
    }
    return 0;
}

void listeners_close(struct io_thread *t)
{
    for (int i = 0; i < t->nlisteners; i++)
        if (!uv_is_closing((uv_handle_t *)&t->listeners[i]))
            uv_close((uv_handle_t *)&t->listeners[i], NULL);
    if (t->has_unix && !uv_is_closing((uv_handle_t *)&t->unix_listener))
        uv_close((uv_handle_t *)&t->unix_listener, NULL);
}

/* metrics-port: one plain (not SO_REUSEPORT) socket per bind address, so a port something
 * else listens on fails the start, as the RESP port does. Returns 0 or -1 (logged). */
int listeners_start_metrics(struct server *srv)
{
    struct conf *c = srv->conf;
    if (c->metrics_port == 0)
        return 0;
    int fds[CONF_MAX_BIND];
    int n = 0;
    for (int b = 0; b < c->nbind; b++) {
        const char *addr = c->bind[b];
        int optional = addr[0] == '-';
        if (optional)
            addr++;
        int fd = open_listener(addr, (int)c->metrics_port, 0);
        if (fd < 0 && optional && (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT))
            continue;
        if (fd < 0) {
            log_warning("Could not create metrics listening socket %s:%lld: %s", addr,
                        (long long)c->metrics_port, strerror(-fd));
            for (int i = 0; i < n; i++)
                close(fds[i]);
            return -1;
        }
        fds[n++] = fd;
        log_notice("Metrics on http://%s%s%s:%lld/metrics", strchr(addr, ':') ? "[" : "", addr,
                   strchr(addr, ':') ? "]" : "", (long long)c->metrics_port);
    }
    if (n == 0) {
        log_warning("No address could be bound for metrics-port");
        return -1;
    }
    srv->metrics = metrics_http_start(&srv->env, fds, n);
    return srv->metrics != NULL ? 0 : -1;
}
