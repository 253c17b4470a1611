/* server_state.h - the state the files that run the daemon share (server.c, io_thread.c,
 * listeners.c, cron.c, hooks.c, sighup.c, thread_cpu.c). Not a public contract: only the network
 * layer includes it, and client.c never does (it sees struct net_shared alone). No .c file owns
 * this header: each of those files declares its own functions in its own header. */
#ifndef RLIMITD_SERVER_STATE_H
#define RLIMITD_SERVER_STATE_H

#include <stdint.h>
#include <uv.h>

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
    int spin_ok; /* busy polling allowed: fewer I/O threads than CPUs (thread_cpu.c) */
    struct persist *persist;
    const char *config_file;        /* re-read on SIGHUP; NULL without -c */
    int final_save;                 /* 0 after SHUTDOWN NOSAVE */
    _Atomic int signal_nosave;      /* a second SIGTERM/SIGINT: no final snapshot */
    int saved_before_stop;          /* SHUTDOWN saved before stopping the loops ... */
    uint64_t saved_dirty;           /* ... at this write count */
    int tcp_fds[CONF_MAX_THREADS][CONF_MAX_BIND]; /* per thread, per address: SO_REUSEPORT sockets */
    int ntcp;                       /* addresses bound */
    struct metrics_http *metrics;   /* metrics-port's listener, NULL when off */
    uv_signal_t sig_hup;            /* SIGHUP on thread 0's loop (sighup.c), closed at shutdown */
    /* Memory return (cron.c maybe_return_memory), thread 0's cron only. */
    uint64_t trim_freed; /* clients_freed summed at the last malloc_trim */
    uint64_t trim_ms;    /* loop time of the last malloc_trim */
    uint64_t trim_used;  /* the keyspace's used memory at its highest since the last trim */
    uint64_t trim_rss;   /* RSS right after the last malloc_trim */
};

#endif
