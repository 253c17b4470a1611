/* module_effects.c - the internal commands that carry decided state to replicas and into the
 * AOF. Each applies an effect exactly as given (no clock is read), so a replica or an AOF replay
 * ends with the primary's state byte for byte:
 *   RLIMIT.SETTAT  key tat_ns                          GCRA state; expires at tat (what
 *                                                      earlier versions propagated; GCRA
 *                                                      state now travels as SET ... PXAT)
 *   RLIMIT.LOGPUSH key cutoff_ms keep ts_ms period_ms  one window-log attempt (rl_wlog_push)
 *   RLIMIT.LOGSET  key packed-log                      a whole log (AOF rewrite)
 * They are ordinary write commands, so they are validated like user input: a bad argument gets
 * an error, never a crash or a corrupt value. */
#include "module_effects.h"
#include "module_reply.h"
#include "module_state.h"

#include <stdint.h>

#include "rlimitd/isallowed.h"

static RedisModuleKey *open_kind(RedisModuleCtx *ctx, RedisModuleString *name, enum rl_kind want)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    enum rl_kind kind = rl_key_kind(key);
    if (kind != RL_EMPTY && kind != want) {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return NULL;
    }
    return key;
}

int rl_cmd_settat(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return rl_reply_arity(ctx, "rlimit.settat");
    int64_t tat;
    if (rl_arg_i64(ctx, argv[2], &tat))
        return REDISMODULE_OK;
    if (tat < 1)
        return rl_reply_err(ctx, "invalid tat: must be >= 1 (ns since the epoch)");
    RedisModuleKey *key = open_kind(ctx, argv[1], RL_GCRA);
    if (key == NULL)
        return REDISMODULE_OK;
    int64_t old;
    if (rl_key_kind(key) == RL_GCRA && rl_gcra_tat(key, &old) != 0) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    rl_gcra_store(ctx, key, tat, 0);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int rl_cmd_logpush(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 6)
        return rl_reply_arity(ctx, "rlimit.logpush");
    int64_t cutoff, keep, ts, period_ms;
    if (rl_arg_i64(ctx, argv[2], &cutoff) || rl_arg_i64(ctx, argv[3], &keep) ||
        rl_arg_i64(ctx, argv[4], &ts) || rl_arg_i64(ctx, argv[5], &period_ms))
        return REDISMODULE_OK;
    /* No window-max-count check: the primary already applied its own, and a replica configured
     * lower must still follow it. keep + 1 must fit the ring's 32-bit size. */
    if (keep < 0 || keep >= (int64_t)UINT32_MAX - 1)
        return rl_reply_err(ctx, "invalid keep: must be between 0 and 4294967293");
    if (ts < 0 || ts > ISALLOWED_MAX_TS_MS)
        return rl_reply_err(ctx, "invalid ts: must be between 0 and 9223372036854 (ms since the "
                                 "epoch)");
    if (period_ms < 1 || period_ms > ISALLOWED_MAX_PERIOD_S * 1000)
        return rl_reply_err(ctx, "invalid period_ms: must be between 1 and 3153600000000");
    RedisModuleKey *key = open_kind(ctx, argv[1], RL_WLOG);
    if (key == NULL)
        return REDISMODULE_OK;
    int64_t newest;
    int within = rl_wlog_push(key, cutoff, keep, ts, period_ms, &newest);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, within);
}

int rl_cmd_logset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return rl_reply_arity(ctx, "rlimit.logset");
    size_t len;
    const char *packed = RedisModule_StringPtrLen(argv[2], &len);
    RedisModuleKey *key = open_kind(ctx, argv[1], RL_WLOG);
    if (key == NULL)
        return REDISMODULE_OK;
    const char *err;
    if (rl_wlog_replace(key, packed, len, &err) != 0) {
        RedisModule_CloseKey(key);
        return rl_reply_err(ctx, err);
    }
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}
