/* client_info.c - a connection described as Redis describes one: the "ip:port" of an address,
 * and the CLIENT LIST line (CLIENT LIST, CLIENT INFO, the log line of an output limit). Reads a
 * connection, changes nothing, calls nothing of client.c. */
#include "client_info.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "rlimitd/pubsub.h"
#include "rlimitd/clock.h"

void client_format_addr(const struct sockaddr_storage *ss, char *out, size_t outlen)
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
    /* Redis's anetFormatAddr: an IPv6 address in brackets, "[::1]:6379". */
    snprintf(out, outlen, strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
}

/* The local address is not kept per connection: asked of the socket when listed (the caller
 * holds net_shared.lock, so the connection, and its fd, cannot be closed meanwhile). */
void client_local_addr(const struct client *c, char *out, size_t outlen)
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
        client_format_addr(&ss, out, outlen);
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
    client_local_addr(c, laddr, sizeof(laddr));
    char line[1280];
    /* The subscription counts are atomics of the session's pubsub_client, which lives as long
     * as the session (the caller holds the registry lock, so the connection is not freed). */
    const struct pubsub_client *ps = __atomic_load_n(&s->pubsub, __ATOMIC_ACQUIRE);
    char fl[4];
    size_t nfl = 0;
    if (flags & SESSION_PUBSUB)
        fl[nfl++] = 'P';
    if (flags & SESSION_IN_MULTI)
        fl[nfl++] = 'x';
    if (flags & SESSION_BLOCKED)
        fl[nfl++] = 'b';
    if (nfl == 0)
        fl[nfl++] = 'N';
    fl[nfl] = '\0';
    /* Redis 7's fields in Redis's order. */
    int n = snprintf(line, sizeof(line),
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 "
                     "sub=%u psub=%u ssub=%u multi=%d qbuf=%zu qbuf-free=%zu argv-mem=0 "
                     "multi-mem=%zu rbs=%zu rbp=%zu obl=%zu oll=%zu omem=%zu tot-mem=%zu "
                     "events=%s cmd=%s user=default redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
                     (unsigned long long)s->id, c->addr, laddr, c->fd,
                     s->name != NULL ? s->name : "", (long long)age, (long long)idle,
                     fl, pubsub_count(ps, PUBSUB_CHANNEL), pubsub_count(ps, PUBSUB_PATTERN),
                     pubsub_count(ps, PUBSUB_SHARD), multi,
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
