/* module_state.h - the module's two data types (module_state.c): the only functions that
 * change a limiter value, and the key kinds the handlers check first. */
#ifndef RLIMITD_MODULE_STATE_H
#define RLIMITD_MODULE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/redismodule_api.h"
#include "rlimitd/swlog.h"

/* Registers the data types; REDISMODULE_ERR if the server refuses. */
int rl_types_create(RedisModuleCtx *ctx);

/* The key's state kind: RL_GCRA is any string (GCRA state is a Redis string; rl_gcra_tat says
 * whether it holds a TAT) and the earlier rlim-gcra type. */
enum rl_kind { RL_EMPTY, RL_GCRA, RL_WLOG, RL_OTHER };
enum rl_kind rl_key_kind(RedisModuleKey *key);

/* GCRA state (key RL_GCRA): 0 and the stored TAT (gcra.h, "the stored TAT"), or -1 when the
 * string holds something else (the caller replies WRONGTYPE). */
int rl_gcra_tat(RedisModuleKey *key, int64_t *tat);
/* Stores the TAT at key (RL_EMPTY or RL_GCRA) as a string and expires the key at it in whole
 * ms: rounded down (floor_ms: GCRA, as Redis) or up (CL.THROTTLE). Returns that expiry (ms
 * since the epoch), for SET ... PXAT. */
int64_t rl_gcra_store(RedisModuleCtx *ctx, RedisModuleKey *key, int64_t tat, int floor_ms);
/* rl_gcra_store, then the effect propagated as Redis's GCRA propagates it: SET name tat PXAT
 * ms (replicas and the AOF get the primary's bytes and expiry). */
void rl_gcra_store_replicate(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *name,
                             int64_t tat, int floor_ms);
/* The key opened for writing when it is empty (*has 0) or holds GCRA state (*has 1, its TAT
 * in *tat); NULL, the key closed, when it holds anything else (the caller replies WRONGTYPE). */
RedisModuleKey *rl_gcra_open(RedisModuleCtx *ctx, RedisModuleString *name, int *has,
                             int64_t *tat);

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

#endif
