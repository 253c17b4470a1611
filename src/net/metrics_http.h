/* metrics_http.h - the metrics-port listener (metrics_http.c), started by listeners.c and
 * stopped by server.c. */
#ifndef RLIMITD_METRICS_HTTP_H
#define RLIMITD_METRICS_HTTP_H

#include "rlimitd/cmd.h"

/* metrics_http.c: serves GET /metrics (cmd_metrics) on the listening sockets fds, which it
 * owns from then on (closed by metrics_http_stop, or at once on failure). NULL on failure. */
struct metrics_http;
struct metrics_http *metrics_http_start(struct cmd_env *env, const int *fds, int nfds);
void metrics_http_stop(struct metrics_http **mp);

#endif
