/* client.h - one connection (client.c) and the I/O thread it lives on. The network layer's
 * calls point at client.c: the files that run the daemon (server.c, io_thread.c, listeners.c,
 * cron.c, hooks.c) own the threads, listeners and shutdown and call into client.c; client.c
 * knows only struct net_shared, never struct server. */
#ifndef RLIMITD_CLIENT_H
#define RLIMITD_CLIENT_H

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "rlimitd/busypoll.h"
#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/reply.h"
#include "rlimitd/resp.h"
#include "rlimitd/stats.h"
#include "rlimitd/waiters.h"

/* What all connections share, whichever thread serves them: set up by server.c before the
 * threads start. The registry (CLIENT LIST, CLIENT KILL) is the list of every open connection. */
struct net_shared {
    struct conf *conf;
    struct cmd_env *env;
    pthread_mutex_t lock;   /* guards the registry list and session names */
    struct client *registry;
    _Atomic int64_t nclients; /* open connections, for maxclients */
    _Atomic uint64_t next_client_id;
    _Atomic int stopping;   /* shutdown begun: new connections are refused */
};

struct server;

/* One I/O thread: its own loop, listeners and clients (DESIGN.md "Threads"). */
struct io_thread {
    int index;
    struct server *srv;       /* opaque here: server_state.h defines it */
    struct net_shared *net;   /* what the thread's connections share with every other one */
    pthread_t tid;
    uv_loop_t loop;
    uv_async_t wakeup; /* shutdown and CLIENT KILL requests from other threads */
    uv_async_t pubsub_wake; /* messages published on other threads wait in the inbox */
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
    /* Connections with replies to write at the end of this loop turn (client.c, "flush"). */
    struct client *flush_list;
    /* The connection whose command runs now (a script may be running in it). */
    struct client *running;
    /* Waiting for capacity (blocked.c): where other threads leave this thread's waiters whose
     * turn may have come, the wake-up they send, and how an answered waiter's connection goes
     * on with its commands (client.c). */
    struct wait_home wait_home;
    uv_async_t wait_async;
    void (*resume)(struct client *c);
    struct blocked_clock *wait_clock; /* the heads' retry times (blocked.c) */
    /* Serving the other connections from inside a busy script (busy_serve.c): a parser's
     * shared part of their own (the thread's holds the running command's arguments), the
     * poll set, and a guard against serving from inside a serve. */
    struct resp_shared busy_resp;
    int busy_resp_ready;
    struct pollfd *busy_pfd;
    struct client **busy_cl;
    size_t busy_cap;
    int in_busy_serve;
    uv_prepare_t flush_prepare;
    uv_check_t flush_check;
    /* Fairness (DESIGN.md "Fairness"): connections that used up their slice of a loop turn with
     * commands still buffered, in the order they stopped; the idle handle, started while the
     * list is not empty, runs them again in the next turn and keeps the poll from sleeping. */
    struct client *ready_head, *ready_tail;
    uv_idle_t ready_idle;
    unsigned turn;          /* loop turns so far (a turn ends in the prepare phase, before the poll) */
    unsigned budget_turn;   /* the turn turn_used_ns counts for */
    uint64_t turn_used_ns;  /* time connections' slices took in that turn */
    char unix_addr[112];   /* "path:0" of this thread's unix socket clients, set at accept */
    unsigned expire_shard;  /* next of this thread's shards to sweep */
    unsigned config_gen;    /* last configuration generation applied */
    int stopped;            /* shutdown handled: listeners and timers are closing */
    struct stats stats;
};

/* Connection states, as memcached names them: what the connection is waiting for. */
enum client_state {
    CLIENT_ACTIVE = 0, /* reading and answering */
    CLIENT_PAUSED,     /* not reading: pending output over client-output-pause-limit */
    CLIENT_DRAINING,   /* not reading: flushing the last replies, then close */
    CLIENT_CLOSING,    /* uv_close called; freed in the close callback */
    CLIENT_BLOCKED,    /* a request waits for capacity (blocked.c): reading (to see a close),
                        * running nothing until it is answered */
};

/* A write the kernel did not take at once: the unsent bytes, owned by the uv_write. */
/* The part of a flush the kernel did not take, written in the background. Its bytes are a copy in
 * data[], or, for a large remainder, the connection's own reply buffer taken over (owned, with
 * the bytes at base): a reply of gigabytes (a script's) is never held twice. */
struct client_write {
    uv_write_t req;
    struct client *c;
    size_t len;
    char *base;  /* the bytes to write: data, or inside owned */
    char *owned; /* a reply buffer taken over (freed with the write), or NULL */
    char data[];
};

/* One connection. An idle one owns nothing but this struct (DESIGN.md "Connections"): its
 * parser keeps bytes only for an incomplete command, `out` holds a buffer only while replies are
 * being produced or wait behind a write, and `inflight` exists only while a write is pending. */
/* struct client's kill: 0, or killed by another connection (its thread closes it at its next
 * look), or killed by its own CLIENT KILL (closed once that reply is out, SESSION_CLOSE_AFTER_REPLY).
 * Either way it is gone for CLIENT LIST and a second CLIENT KILL. */
#define CLIENT_KILL_NOW 1
#define CLIENT_KILL_SELF 2

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
    struct blocked *blocked;         /* the request it waits on (blocked.c), or NULL */
    struct client *tprev, *tnext;    /* thread list */
    struct client *flush_next;       /* thread's flush_list, valid while `queued` */
    struct client *ready_next;       /* thread's ready list, valid while `ready` */
    struct client *gprev, *gnext;    /* registry list (under net_shared.lock) */
    const char *addr;                /* peer "ip:port" (addr_buf), or the thread's unix_addr */
    /* CLIENT LIST figures, written by the owning thread after each batch, read by any thread. */
    _Atomic size_t qbuf, qbuf_free, rbs, obl, omem, tot_mem;
    /* When the unsent replies went over the soft limit of client-output-buffer-limit (the
     * loop's clock, ms, plus 1), or 0 while under it. */
    uint64_t soft_since_ms;
    int fd;
    unsigned char state;             /* enum client_state */
    unsigned char reading;           /* uv_read_start is in effect */
    unsigned char is_unix;
    unsigned char queued;            /* on the thread's flush_list */
    unsigned char ready;             /* on the thread's ready list (has commands to run) */
    _Atomic unsigned char kill;      /* CLIENT_KILL_*: set by CLIENT KILL from any thread */
    char addr_buf[INET6_ADDRSTRLEN + 8];
};

/* A client callback ran in this loop turn (busy-poll accounting). */
static inline void thread_mark_work(struct io_thread *t)
{
    if (!busypoll_turn_has_work(&t->busypoll))
        busypoll_work(&t->busypoll, uv_hrtime());
}

/* client.c */
/* Starts reading c's input (a no-op while it reads). */
void client_start_reading(struct client *c);
/* A connection blocked on WAIT runs again (blocked.c calls it through blocked_thread_init). */
void client_resume_unblocked(struct client *c);
/* Pub/Sub wrote frames into c's reply buffer (pubsub.h's kick): they go out with the turn's
 * replies. */
void client_pubsub_kick(void *conn);
/* Hands the collected replies to the kernel now. */
void client_flush(struct client *c);
/* Publishes the connection's buffer figures for CLIENT LIST. */
void client_publish(struct client *c);
/* Answers the protocol error and closes after the reply. */
void client_protocol_error(struct client *c, const char *what);
/* Queues the connection's replies for the end of the loop turn / writes the queued ones. */
void client_queue_flush(struct client *c);
void client_flush_queued(struct io_thread *t);
/* Closes the client once its pending replies are written. */
void client_close_after_flush(struct client *c);
/* Closes the client now (pending output dropped). */
void client_close(struct client *c);
/* The cron's look at a connection's unsent replies: closes it if they have been over its
 * soft limit for too long (client-output-buffer-limit), as Redis's clientsCron does. */
void client_cron_output(struct client *c);

#endif
