/* cmd.h - the command layer: one table of commands, the per-connection session state, and the
 * single entry point cmd_execute. Knows nothing of sockets or libuv: what it needs from above
 * (client registry, shutdown, saving) comes in through struct server_hooks. */
#ifndef RLIMITD_CMD_H
#define RLIMITD_CMD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/stats.h"

struct rbuf;
struct multi;
struct waiter;
struct wait_home;
struct pubsub_client;

/* Session flags */
#define SESSION_CLOSE_AFTER_REPLY 1u /* QUIT, protocol error, CLIENT KILL of self */
#define SESSION_IN_MULTI 2u
#define SESSION_MULTI_DIRTY 4u       /* a command was refused while queueing: EXEC aborts */
#define SESSION_MULTI_DENYOOM 8u     /* a queued command may grow memory: EXEC obeys maxmemory */
#define SESSION_BLOCKED 16u          /* a request waits for capacity (WAIT): CLIENT LIST flags=b */
#define SESSION_PUBSUB 32u           /* holds a subscription: RESP2 allows only the subscribe
                                      * commands, PING, QUIT and RESET (cmd_pubsub.c) */
#define SESSION_REPLY_OFF 64u        /* CLIENT REPLY OFF: no replies (pushes still go out) */
#define SESSION_REPLY_SKIP_NEXT 128u  /* CLIENT REPLY SKIP: the next command's reply is dropped */
#define SESSION_REPLY_SKIP 256u      /* the running command's reply is dropped */

struct exec_run;

/* Per-connection state the commands read and change. Owned by the connection (client.c). */
struct session {
    uint64_t id;
    unsigned flags;
    int authed;
    char *name;     /* CLIENT SETNAME, malloc'd or NULL */
    char *lib_name; /* CLIENT SETINFO LIB-NAME */
    char *lib_ver;  /* CLIENT SETINFO LIB-VER */
    struct multi *multi;  /* queued commands while SESSION_IN_MULTI */
    struct stats *stats;  /* the owning thread's counters */
    int64_t ctime_ns;     /* wall clock at connect */
    int64_t last_mono_ns; /* monotonic time of the last command (idle timeout, CLIENT LIST) */
    int last_cmd;         /* index in the command table, -1 before any */
    /* Which class of client-output-buffer-limit applies (enum conf_obuf_class): memset's 0 is
     * normal; the subscribe commands make it pubsub. The connection reads it between
     * commands. */
    int obuf_class;
    const char *peer;     /* "ip:port" of the client (owned by the connection), for SLOWLOG */
    size_t multi_mem;     /* bytes of the commands queued in MULTI (CLIENT LIST) */
    /* The part of multi_mem the connection last published into its thread's clients_mem
     * (which counts toward maxmemory); the owning thread's alone. 0 for a session without a
     * connection. */
    size_t multi_mem_counted;
    int multi_count;      /* commands queued in MULTI, -1 outside MULTI (CLIENT LIST) */
    struct watched *watched; /* WATCHed keys (cmd_tx.c), NULL when none */
    struct exec_run *exec; /* while EXEC runs its queue (cmd_shard_lock.h), else NULL */
    /* The RESP version of this connection's replies: 2, or 3 after HELLO 3 (RESET: 2 again).
     * cmd_execute copies it into the reply buffer before each command (reply.h); CLIENT LIST
     * reads it from other threads, hence the atomic accesses. */
    unsigned char resp;
    /* WAIT (rlimitd/waiters.h): the connection's thread's home, set by the network layer (NULL:
     * this session never blocks); the parked request while it waits; wait_off, set for the run
     * at its timeout, makes it answer as without WAIT. */
    unsigned char wait_off;
    struct wait_home *wait_home;
    struct waiter *waiter;
    /* Pub/Sub (cmd_pubsub.c): the subscriptions, created at the first subscribe command and
     * freed with the session (CLIENT LIST reads their counts from other threads); conn and
     * conn_out are what the network layer delivers messages through (NULL: nowhere). */
    struct pubsub_client *pubsub;
    void *conn;
    struct rbuf *conn_out;
};

/* Redis's classes of clients (CLIENT LIST TYPE, CLIENT KILL TYPE). rlimitd has neither
 * replicas nor a master: its connections are pubsub while they hold a subscription
 * (SESSION_PUBSUB, on RESP2 and RESP3 alike), normal otherwise. */
enum client_type {
    CLIENT_TYPE_ANY = -1,
    CLIENT_TYPE_NORMAL,
    CLIENT_TYPE_REPLICA,
    CLIENT_TYPE_PUBSUB,
    CLIENT_TYPE_MASTER,
};

/* Which connections CLIENT LIST / CLIENT KILL act on: those meeting every condition set. */
struct client_match {
    uint64_t id;           /* 0: any */
    const char *addr;      /* the peer's "ip:port" (or "path:0"), NULL: any */
    const char *laddr;     /* the local "ip:port" (or "path:0"), NULL: any */
    int type;              /* enum client_type */
    const struct session *skip; /* never this one (CLIENT KILL's SKIPME yes), NULL: none */
    /* CLIENT LIST ID: one line per id, in this order, repeats repeated, unknown ids skipped
     * (when nids > 0, id and the others are not looked at). */
    const uint64_t *ids;
    size_t nids;
};

/* Services of the layers above, provided by the network layer (src/net/hooks.c). Any may be
 * NULL (tests, fuzz). */
struct server_hooks {
    void *ud;
    /* CLIENT LIST / CLIENT INFO: append one Redis-format line per matching client. */
    void (*client_list)(void *ud, struct rbuf *out, const struct client_match *m);
    /* CLIENT KILL: close the matching clients. `me` (the caller) is never closed here: if it
     * matches, *me_matched is set and the caller closes it after its reply. Returns how many
     * matched, `me` included. */
    int (*client_kill)(void *ud, const struct client_match *m, const struct session *me,
                       int *me_matched);
    uint64_t (*connected_clients)(void *ud);
    /* SHUTDOWN: stop the loops after the current replies are flushed. save: 1 SAVE, 0 NOSAVE,
     * -1 default. Returns 0, or -1 with err set (e.g. the final save failed). */
    int (*shutdown)(void *ud, int save, char *err, size_t errlen);
    /* SAVE (background 0) / BGSAVE (1). Returns 0 or -1 with err set. */
    int (*save)(void *ud, int background, char *err, size_t errlen);
    /* After CONFIG SET changed live settings. */
    void (*config_changed)(void *ud);
    /* INFO persistence section (appended as "field:value\r\n" lines). */
    void (*info_persistence)(void *ud, struct rbuf *out);
    /* LASTSAVE: Unix time of the last successful snapshot. */
    int64_t (*lastsave)(void *ud);
    /* Called on a thread whose script has passed busy-reply-threshold, from inside the
     * script, every few ms: answers that thread's other connections through
     * cmd_execute_while_busy (DESIGN.md "Long scripts and BUSY"). */
    void (*busy_serve)(void *ud);
};

struct slowlog;
struct limiter_top;

/* State shared by every connection. */
struct cmd_env {
    struct keyspace *ks;
    struct conf *conf;            /* CONFIG SET writes under conf_lock */
    pthread_mutex_t conf_lock;
    _Atomic int auth_required;    /* requirepass is set: mirrors conf, read without the lock */
    pthread_mutex_t names_lock;   /* guards session name/lib fields, read by CLIENT LIST on
                                     other threads */
    struct server_hooks hooks;
    struct stats **stats;         /* one per I/O thread, for INFO */
    int nstats;
    int64_t start_ns;             /* wall clock at start (uptime) */
    int64_t start_mono_ns;
    char run_id[41];
    int64_t tcp_port;             /* the port actually listened on */
    const char *io_sched;         /* the I/O threads' scheduling class as applied, for INFO */
    struct slowlog *slowlog;
    struct stats *stats_base;     /* the sums at the last CONFIG RESETSTAT (cmd_info.c) */
    struct limiter_top *top;      /* LIMITER TOP's sketch (cmd_limiter.c) */
    /* Per shard: CLOCK_MONOTONIC ns since which a script holds it, 0 if none (cmd_script.c
     * sets it; the dispatcher answers BUSY past busy-reply-threshold instead of waiting). */
    _Atomic int64_t *script_since;
};

/* Sets up env fields that need it (lock, run_id, slowlog). ks, conf, stats are the caller's. */
void cmd_env_init(struct cmd_env *env, struct keyspace *ks, struct conf *conf);
void cmd_env_deinit(struct cmd_env *env);

/* Initialises / frees the session state (not the struct itself). */
void session_init(struct session *s, uint64_t id, struct stats *stats);
void session_deinit(struct session *s);
/* Frees what command execution keeps per thread (key arrays); call before a thread that ran
 * commands ends. */
void cmd_thread_exit(void);

/* At SIGTERM/SIGINT: asks every running script that has not written to stop, as SCRIPT KILL
 * would (cmd_script.c); one that wrote runs to its end. */
void cmd_scripts_stop_unwritten(void);
/* At a second SIGTERM/SIGINT: asks every running script to stop, as SHUTDOWN NOSAVE does. */
void cmd_scripts_stop_all(void);

/* Runs one command and appends its reply (or replies) to out. Reads the wall clock once.
 * argv[i] holds lens[i] bytes followed by a NUL. May set SESSION_CLOSE_AFTER_REPLY. */
void cmd_execute(struct cmd_env *env, struct session *s, int argc, char **argv,
                 const size_t *lens, struct rbuf *out);
/* cmd_execute for a connection served from inside a busy script on its own thread: only
 * SCRIPT KILL and the keyless commands Redis allows while busy run; everything else is
 * answered BUSY (a queued one marks the transaction, EXEC discards it). */
void cmd_execute_while_busy(struct cmd_env *env, struct session *s, int argc, char **argv,
                            const size_t *lens, struct rbuf *out);

/* Called every 100 ms by the server: samples the command counter so INFO can report
 * instantaneous_ops_per_sec. */
void info_sample_ops(struct cmd_env *env);

/* Appends the Prometheus text exposition of the counters (cmd_metrics.c, docs/COMMANDS.md
 * "Observability") to out. Thread safe: the metrics listener calls it from its own thread. */
void cmd_metrics(struct cmd_env *env, struct rbuf *out);

/* The command table, for COMMAND and stats. */
int cmd_count(void);
const char *cmd_name(int idx);

#endif
