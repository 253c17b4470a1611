/* module_internal.h - shared by the files of rlimit.so, the Redis/Valkey module that runs the
 * daemon's limiter core (gcra.c, swlog.c, isallowed.c) on Redis keys.
 *
 * Data flow: module_cmds.c (CL.THROTTLE, ISALLOWED: decide with the primary's clock) and
 * module_effects.c (RLIMIT.*: apply a decided effect, as replicas and AOF replay do) both change
 * state only through module_state.c, which owns the two data types and their persistence.
 *
 * Calls between the files go one way: module.c (load arguments, the command table) calls the
 * handlers; module_cmds.c and module_effects.c call module_state.c; module_cmds.c and
 * module_state.c call module_stats.c (counts); the handlers and module_stats.c call
 * module_reply.c; all of them call the module API (module_api.c) and nothing calls module.c. */
#ifndef RLIMITD_MODULE_INTERNAL_H
#define RLIMITD_MODULE_INTERNAL_H

#include <stdint.h>

#include "rlimitd/redismodule_api.h"
#include "rlimitd/swlog.h"
#include "rlimitd/util.h"

/* Set at load: the types by rl_types_create (module_state.c), the count by RedisModule_OnLoad
 * (module.c); the count is defined in module_cmds.c, whose ISALLOWED reads it. */
extern RedisModuleType *rl_gcra_type; /* TYPE shows "rlim-gcra" */
extern RedisModuleType *rl_wlog_type; /* TYPE shows "rlim-wlog" */
extern int64_t rl_window_max_count;   /* load argument window-max-count */

/* ---- module_state.c ---- */

/* Registers both data types; REDISMODULE_ERR if the server refuses. */
int rl_types_create(RedisModuleCtx *ctx);

/* The key's state kind: */
enum rl_kind { RL_EMPTY, RL_GCRA, RL_WLOG, RL_OTHER };
enum rl_kind rl_key_kind(RedisModuleKey *key);

/* GCRA state: the stored TAT (key must be RL_GCRA). */
int64_t rl_gcra_tat(RedisModuleKey *key);
/* Stores tat at key (RL_EMPTY or RL_GCRA) and expires the key at tat, rounded up to the ms. */
void rl_gcra_store(RedisModuleKey *key, int64_t tat_ns);

/* The log at key (RL_WLOG), or NULL for an empty key. */
struct swlog *rl_wlog_get(RedisModuleKey *key);
/* One attempt on the log at key (RL_EMPTY or RL_WLOG; created if empty): drops attempts at or
 * before cutoff_ms, keeps at most keep older ones, records ts_ms (or the newest timestamp if that
 * is later), sets the key's expiry to the newest timestamp + period_ms. Returns swlog_record's
 * decision (1: within keep) and the log's newest timestamp in *newest_ms. */
int rl_wlog_push(RedisModuleKey *key, int64_t cutoff_ms, int64_t keep, int64_t ts_ms,
                 int64_t period_ms, int64_t *newest_ms);
/* Replaces the state at key with the packed log (little-endian int64 ms, ascending). Returns 0,
 * or -1 with *err set when the bytes are not a valid log. The key keeps the expiry it had (an
 * AOF rewrite follows RLIMIT.LOGSET with PEXPIREAT anyway). */
int rl_wlog_replace(RedisModuleKey *key, const char *packed, size_t len, const char **err);

/* ---- module_cmds.c / module_effects.c: command handlers ---- */
int rl_cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_isallowed(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_settat(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_logpush(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_logset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* ---- module_stats.c: INFO rlimit and RLIMIT.TOP ---- */

enum rl_lim { RL_LIM_THROTTLE = 0, RL_LIM_GCRA, RL_LIM_ISALLOWED, RL_LIM_COUNT };
/* Makes the LIMITER TOP sketch of size counters (load argument limiter-top-size). */
int rl_stats_init(uint32_t size);
/* Counts one limiter decision, and the key (its state key) when limited. near as the daemon:
 * allowed with at most 10% of the capacity left. The GCRA command calls it too. */
void rl_stats_count(enum rl_lim kind, const char *key, size_t len, int allowed, int near);
/* Limiter values alive in the server (created, loaded, freed). */
void rl_stats_values(int64_t delta);
void rl_info(RedisModuleInfoCtx *ctx, int for_crash_report);
int rl_cmd_top(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* ---- module_reply.c: the shared error replies ---- */

/* Replies the daemon's arity error for cmd (lower case, as Redis 7 names commands). */
int rl_reply_arity(RedisModuleCtx *ctx, const char *cmd);
/* Replies "ERR <text>". */
int rl_reply_err(RedisModuleCtx *ctx, const char *text);

/* Parses arg as Redis's strict base-10 int64; on failure replies the daemon's error and returns
 * -1. Inline: CL.THROTTLE parses three or four arguments with it on every call. */
static inline int rl_arg_i64(RedisModuleCtx *ctx, RedisModuleString *arg, int64_t *out)
{
    size_t len;
    const char *s = RedisModule_StringPtrLen(arg, &len);
    if (util_parse_i64(s, len, out) != 0) {
        rl_reply_err(ctx, "value is not an integer or out of range");
        return -1;
    }
    return 0;
}

#endif
