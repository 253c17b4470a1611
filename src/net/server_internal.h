/* server_internal.h - what server.c (loops, listeners, timers, shutdown) and client.c (one
 * connection) share. Not a public contract: only the daemon's network layer includes it. */
#ifndef RLIMITD_SERVER_INTERNAL_H
#define RLIMITD_SERVER_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "rlimitd/busypoll.h"
#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/persist.h"
#include "rlimitd/reply.h"
#include "rlimitd/resp.h"
#include "rlimitd/stats.h"

struct server;

/* One I/O thread: its own loop, listeners and clients (DESIGN.md "Threads"). */
struct io_thread {
    int index;
    struct server *srv;
    pthread_t tid;
    uv_loop_t loop;
    uv_async_t wakeup; /* shutdown and CLIENT KILL requests from other threads */
    uv_timer_t cron;   /* active expiry, idle timeouts */
    /* Busy polling (busypoll.h): the prepare and check handles bracket every poll; the idle
     * handle, while started, makes the poll return at once instead of sleeping. */
    uv_prepare_t before_poll;
    uv_check_t after_poll;
    uv_idle_t spin;
    struct busypoll busypoll;
    int schedstat_fd; /* /proc/thread-self/schedstat of this thread, or -1 */
    uv_tcp_t listeners[CONF_MAX_BIND];
    int nlisteners;
    uv_pipe_t unix_listener;
    int has_unix;
    struct client *clients; /* this thread's connections (thread-local list) */
    /* Per-thread halves of every connection's buffers (DESIGN.md "Connections"): the read
     * buffer and argument vectors, and a reply buffer lent to the connection being served. */
    struct resp_shared resp;
    struct rbuf spare_out;
    char unix_addr[112];   /* "path:0" of this thread's unix socket clients, set at accept */
    unsigned expire_shard;  /* next of this thread's shards to sweep */
    unsigned config_gen;    /* last configuration generation applied */
    int stopped;            /* shutdown handled: listeners and timers are closing */
    struct stats stats;
};

/* Connection states, as memcached names them: what the connection is waiting for. */
enum client_state {
    CLIENT_ACTIVE = 0, /* reading and answering */
    CLIENT_PAUSED,     /* not reading: pending output over client-output-buffer-limit */
    CLIENT_DRAINING,   /* not reading: flushing the last replies, then close */
    CLIENT_CLOSING,    /* uv_close called; freed in the close callback */
};

/* A write the kernel did not take at once: the unsent bytes, owned by the uv_write. */
struct client_write {
    uv_write_t req;
    struct client *c;
    size_t len;
    char data[];
};

/* One connection. An idle one owns nothing but this struct (DESIGN.md "Connections"): its
 * parser keeps bytes only for an incomplete command, `out` holds a buffer only while replies are
 * being produced or wait behind a write, and `inflight` exists only while a write is pending. */
struct client {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    struct io_thread *thread;
    struct session session;
    struct resp resp;
    struct rbuf out;                 /* replies not yet handed to the kernel */
    struct client_write *inflight;   /* the pending uv_write, or NULL */
    struct client *tprev, *tnext;    /* thread list */
    struct client *gprev, *gnext;    /* server registry (under registry_lock) */
    const char *addr;                /* peer "ip:port" (addr_buf), or the thread's unix_addr */
    /* CLIENT LIST figures, written by the owning thread after each batch, read by any thread. */
    _Atomic size_t qbuf, qbuf_free, rbs, obl, omem, tot_mem;
    int fd;
    unsigned char state;             /* enum client_state */
    unsigned char reading;           /* uv_read_start is in effect */
    unsigned char is_unix;
    _Atomic unsigned char kill;      /* set by CLIENT KILL from any thread */
    char addr_buf[INET6_ADDRSTRLEN + 8];
};

struct server {
    struct conf *conf;
    struct keyspace *ks;
    struct cmd_env env;
    int nthreads;
    struct io_thread *threads;
    _Atomic uint64_t next_client_id;
    _Atomic int64_t nclients;
    _Atomic unsigned config_gen;
    pthread_mutex_t registry_lock; /* guards the gprev/gnext list and session names */
    struct client *registry;
    _Atomic int stopping;
    int spin_ok; /* busy polling allowed: fewer I/O threads than CPUs (server.c spin_allowed) */
    struct persist *persist;
    const char *config_file;        /* re-read on SIGHUP; NULL without -c */
    int final_save;                 /* 0 after SHUTDOWN NOSAVE */
    _Atomic int signal_nosave;      /* a second SIGTERM/SIGINT: no final snapshot */
    int saved_before_stop;          /* SHUTDOWN saved before stopping the loops ... */
    uint64_t saved_dirty;           /* ... at this write count */
    int tcp_fds[16][CONF_MAX_BIND]; /* per thread, per address: SO_REUSEPORT sockets */
    int ntcp;                       /* addresses bound */
    struct metrics_http *metrics;   /* metrics-port's listener, NULL when off */
    /* Memory return (server.c maybe_return_memory), thread 0's cron only. */
    uint64_t trim_freed; /* clients_freed summed at the last malloc_trim */
    uint64_t trim_ms;    /* loop time of the last malloc_trim */
};

/* server.c: a client callback ran in this loop turn (busy-poll accounting). */
static inline void thread_mark_work(struct io_thread *t)
{
    if (!busypoll_turn_has_work(&t->busypoll))
        busypoll_work(&t->busypoll, uv_hrtime());
}

/* server.c: a listening TCP socket on addr:port (SO_REUSEPORT if reuseport). fd or -errno. */
int server_open_listener(const char *addr, int port, int reuseport);

/* metrics_http.c: serves GET /metrics (cmd_metrics) on the listening sockets fds, which it
 * owns from then on (closed by metrics_http_stop, or at once on failure). NULL on failure. */
struct metrics_http;
struct metrics_http *metrics_http_start(struct cmd_env *env, const int *fds, int nfds);
void metrics_http_stop(struct metrics_http **mp);

/* client.c */
/* The thread's shared parser and reply buffers: before its first accept, after a CONFIG SET
 * (limits), after its last close. */
void client_thread_init(struct io_thread *t);
void client_thread_config(struct io_thread *t);
void client_thread_deinit(struct io_thread *t);
void client_accept(struct io_thread *t, uv_stream_t *listener, int is_unix);
/* Closes the client once its pending replies are written. */
void client_close_after_flush(struct client *c);
/* Closes the client now (pending output dropped). */
void client_close(struct client *c);
/* CLIENT LIST line of c appended to out (caller holds registry_lock). */
void client_format(const struct client *c, struct rbuf *out, uint64_t now_mono_ms);

#endif
