/* metrics_http.c - metrics-port: HTTP GET /metrics in the Prometheus text format, served by
 * libmicrohttpd (Debian's libmicrohttpd12).
 *
 * One libmicrohttpd daemon per bound address, each with its own internal polling thread, on a
 * listening socket opened here like the RESP ones (same `bind` list, optional '-' addresses
 * skipped). The RESP loops never touch these sockets: a slow, idle or malformed HTTP client
 * costs one of at most METRICS_MAX_CONNS connection slots on the metrics thread until
 * METRICS_TIMEOUT_S closes it, and nothing else. A scrape reads the counters (relaxed atomics)
 * and takes LIMITER TOP's mutex once (cmd_metrics). Paths other than /metrics answer 404,
 * methods other than GET and HEAD 405. */
#include <errno.h>
#include "rlimitd/alloc.h"
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlimitd/log.h"
#include "metrics_http.h"

#define METRICS_MAX_CONNS 32u
#define METRICS_TIMEOUT_S 10u
#define METRICS_MEMORY_LIMIT (32u * 1024u) /* request headers per connection */

struct metrics_http {
    struct MHD_Daemon *d[CONF_MAX_BIND];
    int n;
};

static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned status, const char *text,
                                   size_t len, int must_free, const char *ctype)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)text, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        if (must_free)
            free((void *)text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    static int first_call_seen;
    struct cmd_env *env = cls;
    (void)version;
    (void)upload_data;
    /* The first call only announces the headers; a body (none expected) is discarded. */
    if (*req_cls == NULL) {
        *req_cls = &first_call_seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    static const char plain[] = "text/plain; charset=utf-8";
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        static const char msg[] = "method not allowed\n";
        return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, msg, sizeof(msg) - 1, 0, plain);
    }
    if (strcmp(url, "/metrics") != 0) {
        static const char msg[] = "not found: the metrics are at /metrics\n";
        return answer_text(conn, MHD_HTTP_NOT_FOUND, msg, sizeof(msg) - 1, 0, plain);
    }
    struct rbuf b;
    rbuf_init(&b);
    cmd_metrics(env, &b);
    /* The buffer goes to libmicrohttpd, which frees it with free(). */
    char *text = b.p != NULL ? b.p : strdup("");
    if (text == NULL)
        abort();
    return answer_text(conn, MHD_HTTP_OK, text, b.len, 1,
                       "text/plain; version=0.0.4; charset=utf-8");
}

struct metrics_http *metrics_http_start(struct cmd_env *env, const int *fds, int nfds)
{
    struct metrics_http *m = xcalloc(1, sizeof(*m));
    for (int i = 0; i < nfds && i < CONF_MAX_BIND; i++) {
        struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, on_request, env,
            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fds[i], MHD_OPTION_CONNECTION_LIMIT,
            METRICS_MAX_CONNS, MHD_OPTION_CONNECTION_TIMEOUT, METRICS_TIMEOUT_S,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_MEMORY_LIMIT, MHD_OPTION_END);
        if (d == NULL) {
            log_warning("Could not start the metrics listener");
            for (int j = i; j < nfds; j++)
                close(fds[j]);
            metrics_http_stop(&m);
            return NULL;
        }
        m->d[m->n++] = d;
    }
    return m;
}

void metrics_http_stop(struct metrics_http **mp)
{
    struct metrics_http *m = *mp;
    if (m == NULL)
        return;
    /* Stops the thread and closes the listening socket and every connection. */
    for (int i = 0; i < m->n; i++)
        MHD_stop_daemon(m->d[i]);
    free(m);
    *mp = NULL;
}
