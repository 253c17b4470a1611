/* module_multi.c - THROTTLE.ALL (COMMANDS.md, THROTTLE.ALL) inside Redis: the daemon's parser
 * and decision (throttle_all.c) on Redis keys. Redis runs a command alone, so reading every
 * key, deciding and writing is atomic; in a cluster, Redis itself refuses keys in different
 * slots (CROSSSLOT) from the key positions this command reports. Each stored TAT is propagated
 * as its SET ... PXAT; Redis wraps a command's propagated writes in MULTI/EXEC, so replicas and
 * the AOF apply all of them or none. */
#include "module_multi.h"
#include "module_reply.h"
#include "module_state.h"
#include "module_stats.h"
#include "module_wait.h"

#include <stdio.h>

#include "rlimitd/throttle_all.h"

/* More arguments than any valid call has (2 + 32 keys + 32 LIMITs of 5 + WAIT n): the argument
 * arrays live on the stack up to this, in an allocation beyond (an invalid call, answered with
 * the daemon's error for the same arguments). */
#define ARGS_ON_STACK (THROTTLE_ALL_FIRST_KEY + 6 * THROTTLE_ALL_MAX_KEYS + 2)

static int keys_position(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    int64_t n;
    if (argc > 1 && rl_arg_i64_quiet(argv[1], &n) == 0 && n >= 1 &&
        n <= argc - THROTTLE_ALL_FIRST_KEY)
        for (int i = 0; i < (int)n; i++)
            RedisModule_KeyAtPos(ctx, THROTTLE_ALL_FIRST_KEY + i);
    return REDISMODULE_OK;
}

static int parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                 struct throttle_all_req *req)
{
    /* Zeroed: GCC 12 cannot see that the loop below fills what the parser reads. */
    const char *stack_p[ARGS_ON_STACK] = {0};
    size_t stack_len[ARGS_ON_STACK] = {0};
    const char **p = stack_p;
    size_t *len = stack_len;
    if (argc > ARGS_ON_STACK) {
        p = RedisModule_Alloc(sizeof(*p) * (size_t)argc);
        len = RedisModule_Alloc(sizeof(*len) * (size_t)argc);
    }
    for (int i = 0; i < argc; i++)
        p[i] = RedisModule_StringPtrLen(argv[i], &len[i]);
    char err[160];
    int rc = throttle_all_parse(argc, p, len, req, err, sizeof err);
    if (p != stack_p) {
        RedisModule_Free(p);
        RedisModule_Free(len);
    }
    if (rc != 0)
        rl_reply_err(ctx, err);
    return rc;
}

static void close_all(RedisModuleKey **keys, int n)
{
    for (int i = 0; i < n; i++)
        RedisModule_CloseKey(keys[i]);
}

static void reply_all(RedisModuleCtx *ctx, const struct throttle_all_result *res,
                      const struct gcra_result *per, int n)
{
    RedisModule_ReplyWithArray(ctx, 3 + n);
    RedisModule_ReplyWithLongLong(ctx, res->limited);
    RedisModule_ReplyWithLongLong(ctx, res->index);
    RedisModule_ReplyWithLongLong(ctx, res->retry_after);
    for (int i = 0; i < n; i++) {
        RedisModule_ReplyWithArray(ctx, 5);
        RedisModule_ReplyWithLongLong(ctx, per[i].limited);
        RedisModule_ReplyWithLongLong(ctx, per[i].limit);
        RedisModule_ReplyWithLongLong(ctx, per[i].remaining);
        RedisModule_ReplyWithLongLong(ctx, per[i].retry_after);
        RedisModule_ReplyWithLongLong(ctx, per[i].reset_after);
    }
}

/* A waiting THROTTLE.ALL queues on its first key, as in the daemon. */
static int throttle_all_core(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                             struct rl_run *run)
{
    struct throttle_all_req req;
    if (parse(ctx, argv, argc, &req) != 0)
        return REDISMODULE_OK;
    RedisModuleString *first = argv[THROTTLE_ALL_FIRST_KEY];
    if (req.has_wait && rl_wait_behind(ctx, argv, argc, run, first, req.wait_ms))
        return REDISMODULE_OK;
    RedisModuleKey *keys[THROTTLE_ALL_MAX_KEYS];
    int has[THROTTLE_ALL_MAX_KEYS];
    int64_t tat[THROTTLE_ALL_MAX_KEYS];
    for (int i = 0; i < req.n; i++) {
        keys[i] = rl_gcra_open(ctx, argv[THROTTLE_ALL_FIRST_KEY + i], &has[i], &tat[i]);
        if (keys[i] == NULL) {
            close_all(keys, i);
            return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        }
    }
    struct gcra_result per[THROTTLE_ALL_MAX_KEYS];
    struct throttle_all_result res;
    const char *why;
    int bad;
    if (throttle_all_decide(&req, rl_now_ns(), has, tat, per, &res, &why, &bad) != 0) {
        close_all(keys, req.n);
        char err[160];
        snprintf(err, sizeof err, "limit %d: %s", bad, why);
        return rl_reply_err(ctx, err);
    }
    if (res.limited && req.has_wait &&
        rl_wait_park(ctx, argv, argc, run, first, req.wait_ms, res.wait_ns)) {
        close_all(keys, req.n); /* a refusal stores nothing */
        return REDISMODULE_OK;
    }
    int near = 0;
    for (int i = 0; i < req.n; i++) {
        if (per[i].store)
            rl_gcra_store_replicate(ctx, keys[i], argv[THROTTLE_ALL_FIRST_KEY + i],
                                    per[i].new_tat, 0);
        near |= !res.limited && per[i].remaining <= per[i].limit / 10;
    }
    close_all(keys, req.n);
    size_t klen = 0;
    const char *kname =
        res.limited ? RedisModule_StringPtrLen(argv[THROTTLE_ALL_FIRST_KEY + res.index], &klen)
                    : "";
    rl_stats_count(RL_LIM_THROTTLE_ALL, kname, klen, !res.limited, near);
    reply_all(ctx, &res, per, req.n);
    return REDISMODULE_OK;
}

int rl_cmd_throttle_all(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (RedisModule_IsKeysPositionRequest(ctx))
        return keys_position(ctx, argv, argc);
    return rl_wait_call(ctx, argv, argc, throttle_all_core);
}
