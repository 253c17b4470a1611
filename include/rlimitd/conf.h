/* conf.h - configuration: defaults, redis.conf-style files, --name value overrides, CONFIG GET/SET.
 *
 * Every directive is one row of a table in conf.c (name, type, default, min, max, live-settable),
 * so parsing, validation, CONFIG GET, CONFIG SET and the documented defaults cannot drift apart. */
#ifndef RLIMITD_CONF_H
#define RLIMITD_CONF_H

#include <stddef.h>
#include <stdint.h>

#define CONF_MAX_BIND 16
#define CONF_MAX_THREADS 16 /* upper bound of `threads`, and of what conf_resolve picks */

enum conf_supervised { SUPERVISED_NO = 0, SUPERVISED_SYSTEMD, SUPERVISED_AUTO };
enum conf_io_sched { IO_SCHED_AUTO = 0, IO_SCHED_NORMAL, IO_SCHED_BATCH };

/* The client classes of client-output-buffer-limit, in Redis's order (CONFIG GET lists them so).
 * A connection's class is its session's `obuf_class` (cmd.h): normal unless something makes it
 * otherwise (SUBSCRIBE will make it pubsub; rlimitd has no replicas, so that class is accepted
 * and shown for Redis's tools but no connection is ever in it). */
enum conf_obuf_class {
    CONF_OBUF_NORMAL = 0,
    CONF_OBUF_REPLICA, /* "slave" in CONFIG GET, "replica" or "slave" when set */
    CONF_OBUF_PUBSUB,
    CONF_OBUF_CLASSES
};

/* One class's limits, in bytes of replies the server holds for a connection: past `hard`, or
 * past `soft` for more than `soft_seconds` in a row, the connection is closed; 0 = no limit. */
struct conf_obuf_limit {
    uint64_t hard, soft;
    int64_t soft_seconds;
};

struct conf {
    char *bind[CONF_MAX_BIND]; /* addresses; a leading '-' marks one that may be unavailable */
    int nbind;
    int64_t port;              /* 0 disables TCP */
    char *unixsocket;          /* NULL or "" = none */
    int64_t unixsocketperm;    /* octal in the file, e.g. 700 */
    int64_t threads;           /* 0 = online CPUs capped at CONF_MAX_THREADS (conf_resolve) */
    int64_t busy_poll_us;      /* spin this long after work while busy; 0 = never (busypoll.h) */
    int64_t io_sched_policy;   /* enum conf_io_sched: the I/O threads' scheduling class */
    int64_t maxclients;
    int64_t timeout;           /* seconds idle before a client is closed; 0 = never */
    int64_t tcp_keepalive;     /* seconds; 0 = off */
    char *requirepass;         /* NULL or "" = no AUTH needed */
    int64_t maxmemory;         /* bytes; 0 = no limit */
    int64_t maxmemory_policy;  /* enum ks_policy (CONFIG.md, maxmemory-policy) */
    int64_t maxmemory_samples; /* keys sampled per shard and eviction round */
    int64_t lfu_log_factor;
    int64_t lfu_decay_time;    /* minutes */
    char *dir;
    char *dbfilename;
    int64_t save_interval;     /* seconds; 0 = off */
    int64_t loglevel;          /* enum log_level */
    char *logfile;             /* "" = stderr */
    char *pidfile;             /* "" = none */
    int64_t supervised;        /* enum conf_supervised */
    int64_t window_max_count;
    int64_t client_query_buffer_limit;
    int64_t proto_max_bulk_len;
    int64_t proto_max_args;
    int64_t client_output_pause_limit;  /* pending output bytes before a client stops being read */
    struct conf_obuf_limit obuf[CONF_OBUF_CLASSES]; /* client-output-buffer-limit */
    int64_t slowlog_log_slower_than;    /* microseconds; -1 disables */
    int64_t slowlog_max_len;
    int64_t limiter_top_size;           /* counters of LIMITER TOP's sketch (topk.h) */
    int64_t metrics_port;               /* HTTP /metrics port; 0 = off */
    int64_t busy_reply_threshold;       /* ms a script runs before its shards answer BUSY */
    /* Redis's encoding tunables: kept, validated and reported as Redis does, so that tools and
     * Redis's own tests that set them work; rlimitd's structures do not switch encodings on
     * them (COMMANDS.md, CONFIG). */
    int64_t hash_max_listpack_entries;
    int64_t hash_max_listpack_value;
    int64_t zset_max_listpack_entries;
    int64_t zset_max_listpack_value;
    int64_t list_max_listpack_size;
    int64_t list_compress_depth;
    int64_t set_max_intset_entries;
    int64_t notify_keyspace_events; /* NOTIFY_* classes (below); 0 = no keyspace events */
};

/* notify-keyspace-events: Redis 7.0's classes with its bit values and letters (CONFIG.md), and
 * rlimitd's own `r` for the limiter commands' events. NOTIFY_ALL (`A`) is Redis's: it leaves
 * out `m`, `n` and `r`, so every value Redis accepts reads back from CONFIG GET as on Redis. */
#define NOTIFY_KEYSPACE (1 << 0) /* K: __keyspace@0__:<key> <event> */
#define NOTIFY_KEYEVENT (1 << 1) /* E: __keyevent@0__:<event> <key> */
#define NOTIFY_GENERIC (1 << 2)  /* g: DEL, EXPIRE, RENAME, ... */
#define NOTIFY_STRING (1 << 3)   /* $ */
#define NOTIFY_LIST (1 << 4)     /* l */
#define NOTIFY_SET (1 << 5)      /* s (rlimitd has no sets: accepted, never raised) */
#define NOTIFY_HASH (1 << 6)     /* h */
#define NOTIFY_ZSET (1 << 7)     /* z */
#define NOTIFY_EXPIRED (1 << 8)  /* x */
#define NOTIFY_EVICTED (1 << 9)  /* e */
#define NOTIFY_STREAM (1 << 10)  /* t (no streams: accepted, never raised) */
#define NOTIFY_KEY_MISS (1 << 11) /* m: not in A */
#define NOTIFY_MODULE (1 << 13)  /* d (no modules: accepted, never raised) */
#define NOTIFY_NEW (1 << 14)     /* n: a key created; not in A */
#define NOTIFY_LIMITER (1 << 15) /* r: rlimitd's limiter commands (CL.THROTTLE, ...); not in A */
#define NOTIFY_ALL                                                                            \
    (NOTIFY_GENERIC | NOTIFY_STRING | NOTIFY_LIST | NOTIFY_SET | NOTIFY_HASH | NOTIFY_ZSET |     \
     NOTIFY_EXPIRED | NOTIFY_EVICTED | NOTIFY_STREAM | NOTIFY_MODULE)

/* Thread safety. CONFIG SET changes a live directive with conf_set while holding the command
 * layer's conf_lock (struct cmd_env). A live numeric field is an independent int64 scalar: conf_set
 * stores it with a relaxed atomic store, and a thread that reads it without conf_lock must use
 * CONF_GET (a relaxed atomic load); under conf_lock a plain read is fine. The fields of `obuf`
 * are such scalars each (a reader may see one class's hard limit from before a CONFIG SET and
 * its soft one from after: each is a valid setting on its own). A string field
 * (requirepass) is freed and replaced by conf_set, so it is read only under conf_lock. Fields that
 * are not live are written only before the I/O threads start. */
#define CONF_GET(c, field) __atomic_load_n(&(c)->field, __ATOMIC_RELAXED)

/* Fills *c with the defaults. Every string field is then a malloc'd string, never NULL (an unset
 * one is ""); conf_free releases them. */
void conf_init(struct conf *c);
/* Frees the strings owned by *c and NULLs them; calling it twice is harmless. */
void conf_free(struct conf *c);
/* *dst becomes a deep copy of *src (its own strings; conf_free it). The caller keeps src from
 * changing meanwhile (conf_lock). */
void conf_copy(struct conf *dst, const struct conf *src);

/* Reads a file. Returns 0, or -1 with err holding "file:line: reason" (the reason is one of the
 * conf_set texts below, or "unbalanced quotes", "too many arguments", "NUL byte in line"), or
 * "file: strerror" when the file cannot be read. Later lines override earlier ones; a repeated
 * `bind` replaces the list. On failure *c may hold part of the file: conf_free it. */
int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen);

/* Applies one directive: name (case-insensitive) and its argument words, e.g. "bind"
 * {"127.0.0.1", "::1"}; a bind word may itself hold several space-separated addresses, so
 * `CONFIG SET bind "a b"` and `--bind "a b"` work. Used for the file, for "--name value"
 * overrides and for CONFIG SET (live != 0 refuses directives that cannot change at run time;
 * it also means the value comes from CONFIG SET, which matters for client-output-buffer-limit:
 * its one string is split at single spaces, as Redis splits it). Checks between directives are
 * conf_check's, so a CONFIG SET of several must apply them all to a copy (conf_copy), then
 * conf_check the copy.
 * Returns 0, or -1 with *c unchanged and err (may be NULL) holding the reason alone: no "ERR", no
 * file or line, so the caller adds its own frame. The reasons are:
 *   unknown directive 'NAME'
 *   wrong number of arguments for 'NAME' (expected 1, got N)
 *   wrong number of arguments for 'bind' (expected 1..16 addresses, got N)
 *   invalid value for 'NAME': 'VALUE' (WHY)     e.g. (must be 0..65535), (not an integer);
 *                                                with live, Redis 7.0's sentence alone instead:
 *                                                "argument must be between 0 and 65535
 *                                                inclusive", "argument couldn't be parsed into
 *                                                an integer", "argument must be a memory value",
 *                                                "argument must be 'yes' or 'no'", "argument(s)
 *                                                must be one of the following: a, b"
 *   can't set immutable config                  (live only; Redis's words, so the command layer
 *                                                can answer "ERR CONFIG SET failed (possibly
 *                                                related to argument 'NAME') - " + err)
 *   client-output-buffer-limit: Redis 7.0's sentences, "Wrong number of arguments in buffer
 *   limit configuration.", "Invalid client class specified in buffer limit configuration.",
 *   "Error in hard, soft or soft_seconds setting in buffer limit configuration."
 * The pseudo-directives `save` and `appendonly` only accept "" and "no" (a no-op).
 * Not thread safe: CONFIG SET must hold a lock that readers of the string fields also take. */
int conf_set(struct conf *c, const char *name, int argc, const char *const *argv, int live,
             char *err, size_t errlen);
/* CONFIG SET's first pass, as Redis 7.0's (every name is judged before any value): 1 if name is
 * a directive CONFIG SET may change, 0 if it is one it may not, -1 if there is none. */
int conf_settable(const char *name);
/* The directive's own name (lower case; an alias such as lua-time-limit is a directive of its
 * own, as in Redis 7.0), or NULL: what two spellings of one directive have in common. */
const char *conf_row_name(const char *name);

/* Checks that hold between directives, after the file and the overrides are applied (the file
 * alone cannot be judged: an override may fix it): proto-max-bulk-len must not exceed
 * client-query-buffer-limit, and something must be listened on (port or unixsocket).
 * Returns 0, or -1 with the reason in err. */
int conf_check(const struct conf *c, char *err, size_t errlen);

/* Fills in derived defaults (threads 0 -> online CPUs, capped at CONF_MAX_THREADS). */
void conf_resolve(struct conf *c);

/* CONFIG GET: calls cb(name, value) for every directive whose name matches the glob pattern
 * (case-insensitive), in table order, with the value formatted as CONFIG GET shows it: numbers
 * and memory in plain decimal, enums by name, unixsocketperm in octal digits, bind as a
 * space-separated list, and the pseudo-directives save "" and appendonly "no" last. value is
 * only valid during the call. A pattern without * ? or [ is a name, as in Redis 7.0: matched
 * exactly (case-insensitive) and passed to cb as the caller spelled it. */
typedef void (*conf_visit_fn)(void *ud, const char *name, const char *value);
void conf_get(const struct conf *c, const char *pattern, conf_visit_fn cb, void *ud);

#endif
