/* cmd_internal.h - what the command handlers (cmd_*.c) share with the dispatcher's files
 * (cmd_dispatch.c, cmd_table.c, cmd_run.c, cmd_tx.c, ...). Not part of any public contract. */
#ifndef RLIMITD_CMD_INTERNAL_H
#define RLIMITD_CMD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/cmd.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"

/* The Redis version rlimitd answers as (INFO's redis_version, HELLO's version): clients and
 * tools gate features on it (redis-py and go-redis pick command shapes by it, redis_exporter
 * its metric set), and rlimitd answers COMMAND, HELLO and errors as Redis 7.0 does. Its own
 * version is INFO's rlimitd_version. */
#define REDIS_COMPAT_VERSION "7.0.0"

/* Command flags, shown by COMMAND as Redis's names. */
#define CMD_WRITE 0x1u
#define CMD_READONLY 0x2u
#define CMD_DENYOOM 0x4u
#define CMD_FAST 0x8u
#define CMD_NOAUTH 0x10u     /* runs before AUTH: AUTH, HELLO, QUIT, RESET */
#define CMD_NOQUEUE 0x20u    /* runs at once even inside MULTI (EXEC, DISCARD, MULTI, QUIT, RESET) */
#define CMD_ALLSHARDS 0x40u  /* visits the whole keyspace (takes shards itself, one at a time) */
#define CMD_ADMIN 0x80u
#define CMD_LOADING 0x100u
#define CMD_STALE 0x200u
#define CMD_NOSCRIPT 0x400u
#define CMD_KEYDERIVED 0x800u /* the state key is built from the arguments (ISALLOWED) */
#define CMD_NO_MULTI 0x1000u  /* refused inside MULTI: SAVE would wait on the shard locks EXEC
                               * holds; SHUTDOWN as Redis */
#define CMD_NUMKEYS 0x2000u   /* EVAL family: argv[2] counts the keys that follow it */
#define CMD_NUMKEYS_AT1 0x4000u /* with CMD_NUMKEYS: argv[1] counts them (THROTTLE.ALL) */
/* Denyoom in COMMAND, but the dispatcher's maxmemory gate lets it through: the limiters change
 * an existing key in place (never grow it) and the store refuses only a new key over maxmemory,
 * so a full server keeps answering for the limits it holds (CONFIG.md, maxmemory). */
#define CMD_OOM_NEW_KEY_ONLY 0x10000u
/* Runs on a RESP2 connection in the subscribed state (the subscribe commands, PING, QUIT,
 * RESET); any other command is refused there, as in Redis. */
#define CMD_PUBSUB_OK 0x20000u
#define CMD_PUBSUB 0x40000u /* a Pub/Sub command (COMMAND's "pubsub" flag) */

/* The argument that counts a CMD_NUMKEYS command's keys; the keys follow it. */
#define CMD_NUMKEYS_ARG(d) ((d)->flags & CMD_NUMKEYS_AT1 ? 1 : 2)

struct cmd_ctx {
    struct cmd_env *env;
    struct session *s;
    int argc;
    char **argv;
    const size_t *lens;
    struct ks_key *keys; /* the command's keys, hashed, in argument order */
    int nkeys;
    int64_t now;         /* the command's one wall-clock read, ns */
    struct rbuf *out;
    int all_locked;      /* inside EXEC with every shard held: handlers must not lock */
};

typedef void (*cmd_fn)(struct cmd_ctx *x);

/* Flags Redis shows in COMMAND that nothing in rlimitd acts on; they hold for rlimitd as well
 * (EXEC is never in the slow log, its queued commands are; QUIT and the like run while busy). */
/* A container (CLIENT, CONFIG, ...): Redis shows its flags and ACL categories on the
 * subcommands, so COMMAND shows none on the container but @slow. */
#define CMD_SHOW_CONTAINER 0x04000000u
/* Redis has subcommands of it but shows its flags on it (COMMAND): as for a container, its
 * entry's subcommand list is an array (RESP3; rlimitd lists none), not the empty set. */
#define CMD_SHOW_SUBCOMMANDS 0x02000000u
#define CMD_SHOW_NO_MANDATORY_KEYS 0x08000000u
#define CMD_SHOW_SKIP_MONITOR 0x10000000u
#define CMD_SHOW_NO_ASYNC_LOADING 0x20000000u
#define CMD_SHOW_SKIP_SLOWLOG 0x40000000u
#define CMD_SHOW_ALLOW_BUSY 0x80000000u

/* What COMMAND and COMMAND DOCS read, and the subcommands' arities (sub_arity), which the
 * dispatcher checks too. */
struct cmd_docs {
    const char *summary, *since, *group, *complexity;
    /* A compact argument list for COMMAND DOCS: items separated by spaces, each
     * [?][*]name[:type][=TOKEN][(...)|{...}]: ? optional, * multiple; a token without a type is a
     * pure token; (...) a oneof and {...} a block of nested items. Types are Redis's: key,
     * string, integer, double, pattern, unix-time. NULL: no arguments. */
    const char *args;
    /* Key-spec flags as Redis 7.0 shows them for the same command, space separated in Redis's
     * order (RO RW OW RM access update insert delete ...). NULL: derived from the row's flags.
     * Where the keys' flags differ (RENAME's source and destination), one spec per key
     * separated by '|': spec i begins at key first_key + i, the last covers the rest. */
    const char *keyflags;
    /* GETKEYSANDFLAGS: the flags Redis resolves "variable_flags" to when the command has no GET
     * argument (SET: OW update; with GET, keyflags less "variable_flags"). NULL: keyflags. */
    const char *resolved;
    const char *notes; /* key-spec notes, NULL for none */
    const char *tips;  /* space separated, NULL for none */
    unsigned extra;    /* CMD_SHOW_* */
    /* For a container whose subcommands have arities of their own (Redis's `cmd|sub`): the
     * lower-case subcommand argv[1] names when argc is wrong for it, else NULL. The
     * dispatcher refuses such a call where it checks the command's own arity (before the
     * subscribed-state and MULTI checks, as Redis does). NULL for the other commands. */
    const char *(*sub_arity)(int argc, char **argv, const size_t *lens);
};

/* One row per command: everything dispatch, COMMAND, COMMAND DOCS and INFO commandstats know of
 * it. Each area file (cmd_limit.c, cmd_key.c, ...) ends with its table of rows, beside its
 * static handlers; adding a command to an area is adding its handler and its row there. */
struct cmd_def {
    const char *name;  /* lower case, as COMMAND shows it */
    int arity;         /* Redis convention: n exact, -n at least n */
    unsigned flags;
    int first_key, last_key, step; /* Redis key positions; last -1 = the last argument */
    const char *acl;   /* ACL categories for COMMAND, space separated, without '@' */
    cmd_fn fn;
    struct cmd_docs doc;
};

/* The areas, in COMMAND's order; cmd_table.c joins their tables into one at the first lookup. */
#define CMD_AREAS(X)                                                                              \
    X(limit) X(throttle_all) X(lease) X(string) X(key) X(hash) X(list) X(server) X(slowlog) X(info)      \
    X(command) X(tx) X(limiter) X(zset) X(zset_read) X(zset_trim) X(zset_random) X(script) \
    X(pubsub) X(memory) X(object)
#define CMD_DECLARE_AREA(a)                                                                       \
    extern const struct cmd_def cmd_##a##_table[];                                                \
    extern const int cmd_##a##_count;
CMD_AREAS(CMD_DECLARE_AREA)
#undef CMD_DECLARE_AREA

/* The joined table (n rows, cmd_table.c). */
const struct cmd_def *cmd_table(int *n);

/* A running script's hold on the keyspace (cmd_script.c sets it up, cmd_from_script in
 * cmd_script_hold.c checks each redis.call against it). The dispatcher locked the shards of the
 * declared KEYS before EVAL's handler ran. A key the script did not declare (or ISALLOWED's
 * state key, derived from its arguments) may lie outside that set: cmd_from_script then takes
 * its shard too (blocking only for a shard above every held one, so lock order stays
 * ascending; otherwise trylock) and records it in `extra` for the handler to release. When
 * that trylock fails before the script wrote, the run is stopped (`rerun`) and EVAL runs it
 * again holding every shard (`all`). Inside EXEC the transaction's set plays that part: a
 * shard it holds is the script's to use, and one it lacks joins it (the same ascending rule,
 * else a wait of at most 10 ms) so that the transaction stays atomic to its end. */
#define SHARD_WORDS 64 /* 4096 shards at most (ks_create's limit) */
struct script_hold {
    struct cmd_ctx *x;      /* the EVAL: env, session, the one clock reading */
    struct ks_key *keys;    /* the declared KEYS, hashed */
    int nkeys;
    uint64_t held[SHARD_WORDS];  /* shards locked for the declared keys */
    /* Shards locked during the script, released after it; inside EXEC, shards the script
     * reached that the transaction holds (its set, which they may have joined), of which only
     * the BUSY markers are the script's to clear. */
    uint64_t extra[SHARD_WORDS];
    int nextra;             /* bits set in extra */
    int64_t started;        /* CLOCK_MONOTONIC ns at script_hold_init: the script's start */
    int max_held;           /* highest shard held, -1 for none */
    int read_only;          /* EVAL_RO or "#!lua flags=no-writes" */
    int wrote;              /* a write command ran */
    int oom_refuse;         /* over maxmemory at the start and no allow-oom: a denyoom call
                             * before the first write is refused (Redis's scriptVerifyOOM) */
    int all;                /* every shard is held (the run after a rerun request) */
    int rerun;              /* stopped: run again holding every shard */
};
void script_hold_init(struct script_hold *h, struct cmd_ctx *x, struct ks_key *keys, int n,
                      int all);
/* Clears the BUSY markers and releases the shards taken during the script (`extra`). */
void script_hold_release(struct script_hold *h);
/* redis.call and redis.pcall (script.h's script_call_fn, which EVAL hands the engine with its
 * struct script_hold as hold): runs one command for the script, its reply or Redis's error
 * text appended to out. */
void cmd_from_script(void *hold, int argc, char **argv, const size_t *lens, struct rbuf *out);

/* Whole-keyspace handlers take shards through these, so that inside EXEC (all shards already
 * held) they do not lock twice. */
void ctx_lock_shard(struct cmd_ctx *x, unsigned shard);
void ctx_unlock_shard(struct cmd_ctx *x, unsigned shard);

/* Argument helpers (cmd_helpers.c): parse argv[i] as a strict integer; on failure reply Redis's
 * error "ERR value is not an integer or out of range" and return -1. */
int arg_i64(struct cmd_ctx *x, int i, int64_t *out);
int arg_is(const struct cmd_ctx *x, int i, const char *lit);
void reply_syntax_error(struct rbuf *out);
/* Replies for KS_WRONGTYPE / KS_OOM / KS_NOTINT / KS_OVERFLOW. */
void reply_ks_error(struct rbuf *out, int rc);

/* Limiter decisions (cmd_limiter.c): counts one call of a limiter command into INFO limiter
 * and, when it was limited, its key (x->keys[0]) into LIMITER TOP. Every limiter handler calls
 * it once per decision; near = allowed with at most 10% of the capacity left (each command
 * defines it, docs/COMMANDS.md "Observability"). The caller holds the key's shard lock. */
void limiter_stats_count(struct cmd_ctx *x, enum stats_lim kind, int allowed, int near);
/* The same, with the key LIMITER TOP counts when limited (THROTTLE.ALL's refusing limit). */
void limiter_stats_count_key(struct cmd_ctx *x, enum stats_lim kind, int allowed, int near,
                             const struct ks_key *key);
/* The LIMITER TOP list, highest first: merges the I/O threads' sketches (cmd_limiter.c), then
 * calls fn for at most n keys (and at most limiter-top-size), holding no lock. */
typedef void (*limiter_top_fn)(void *ud, const char *key, size_t len, uint64_t count);
void limiter_top_each(struct cmd_env *env, uint32_t n, limiter_top_fn fn, void *ud);
void limiter_top_clear(struct cmd_env *env);
struct limiter_top *limiter_top_create(uint32_t size);
void limiter_top_destroy(struct limiter_top **tp);

/* A counter of struct stats (at offset) summed over the I/O threads (stats_sum), and that sum
 * minus its sum at the last CONFIG RESETSTAT (stats_total; cmd_stats.c); stats_reset makes every
 * such figure start again from 0, INFO errorstats included. */
uint64_t stats_sum(const struct cmd_env *env, size_t offset);
uint64_t stats_total(const struct cmd_env *env, size_t offset);
void stats_reset(struct cmd_env *env);

/* INFO errorstats (cmd_stats.c): the table of the error codes outside enum stats_err.
 * attach names the server whose per-thread counters hold the others (cmd_env_init; NULL at
 * deinit), count_other counts one error of such a code, reset is CONFIG RESETSTAT's, info
 * writes the section's lines. */
void errorstats_attach(const struct cmd_env *env);
void errorstats_count_other(const char *code, size_t len);
void errorstats_reset(void);
void errorstats_info(const struct cmd_env *env, struct rbuf *b);
#define STATS_TOTAL(env, field) stats_total((env), offsetof(struct stats, field))
#define STATS_LIM_OFF(field, k) (offsetof(struct stats, field) + (size_t)(k) * sizeof(uint64_t))
#define STATS_CMD_OFF(i, field)                                                                   \
    (offsetof(struct stats, cmd) + (size_t)(i) * sizeof(struct cmd_stats) +                        \
     offsetof(struct cmd_stats, field))

/* RESET's part in Pub/Sub (cmd_pubsub.c): every subscription dropped without replies. */
/* PUBSUB's subcommand checked as Redis does before the RESP2 subscribed state's refusal by
 * full name ("pubsub|numpat"): an unknown subcommand or a subcommand's wrong arity is that
 * error, written into buf (cap bytes) and returned; else NULL. */
const char *pubsub_subcmd_error(int argc, char **argv, const size_t *lens, char *buf,
                                size_t cap);
void session_pubsub_reset(struct session *s);

/* Transactions (cmd_tx.c). */
void multi_discard(struct session *s);
/* Drops every key the session WATCHes (UNWATCH, EXEC, DISCARD, RESET, disconnect); takes each
 * key's shard lock itself, so the caller holds none. */
void watch_release_all(struct session *s);

/* Replies for commands with subcommands (cmd_helpers.c), Redis's texts:
 * "ERR unknown subcommand '<argv[1]>'. Try <CMD> HELP." and
 * "ERR wrong number of arguments for '<cmd>|<sub>' command"; and a HELP reply, an array of
 * status lines from a NULL-terminated list. */
void reply_subcmd_unknown(struct cmd_ctx *x, const char *cmd);
void reply_subcmd_arity(struct cmd_ctx *x, const char *cmd, const char *sub);
void reply_help_lines(struct rbuf *out, const char *const *lines);

/* INFO's instantaneous_ops_per_sec (cmd_info.c): records (monotonic time, total commands).
 * The server calls it every 100 ms from one timer, and INFO reports the rate over about the
 * last two seconds of samples. INFO samples too, so without the timer the figure is the rate
 * since the previous INFO. Thread safe. */
void info_sample_ops(struct cmd_env *env);
/* MEMORY STATS' peak.allocated (cmd_memory.c): records used memory if it is the highest seen;
 * info_sample_ops calls it every 100 ms. Thread safe. */
void memory_sample_peak(struct cmd_env *env);

#endif
