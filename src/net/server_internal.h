/* server_internal.h - the server's own state (server.c).
 * Not a public contract: only the daemon's network layer includes it. */
#ifndef RLIMITD_SERVER_INTERNAL_H
#define RLIMITD_SERVER_INTERNAL_H

#include <stdint.h>

#include "client.h"
#include "metrics_http.h"
#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/persist.h"

struct server {
    struct conf *conf;
    struct keyspace *ks;
    struct cmd_env env;
    struct net_shared net; /* conf and env point at the two above */
    int nthreads;
    struct io_thread *threads;
    _Atomic unsigned config_gen;
    int spin_ok; /* busy polling allowed: fewer I/O threads than CPUs (server.c spin_allowed) */
    struct persist *persist;
    const char *config_file;        /* re-read on SIGHUP; NULL without -c */
    int final_save;                 /* 0 after SHUTDOWN NOSAVE */
    _Atomic int signal_nosave;      /* a second SIGTERM/SIGINT: no final snapshot */
    int saved_before_stop;          /* SHUTDOWN saved before stopping the loops ... */
    uint64_t saved_dirty;           /* ... at this write count */
    int tcp_fds[CONF_MAX_THREADS][CONF_MAX_BIND]; /* per thread, per address: SO_REUSEPORT sockets */
    int ntcp;                       /* addresses bound */
    struct metrics_http *metrics;   /* metrics-port's listener, NULL when off */
    /* Memory return (server.c maybe_return_memory), thread 0's cron only. */
    uint64_t trim_freed; /* clients_freed summed at the last malloc_trim */
    uint64_t trim_ms;    /* loop time of the last malloc_trim */
};

/* server.c: a listening TCP socket on addr:port (SO_REUSEPORT if reuseport). fd or -errno. */
int server_open_listener(const char *addr, int port, int reuseport);

#endif
