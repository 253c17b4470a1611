/* module_cmds.c - CL.THROTTLE (COMMANDS.md, CL.THROTTLE), GCRA (COMMANDS.md, GCRA) and ISALLOWED (COMMANDS.md, ISALLOWED) inside
 * Redis/Valkey: the same validation, arithmetic and replies as the daemon (gcra.c, gcra_redis.c,
 * swlog.c, isallowed.c), on Redis keys.
 *
 * Replication carries effects, not commands: the primary decides with its own clock and
 * propagates what it stored (GCRA state as Redis's GCRA does, `SET key tat PXAT ms`; a window
 * log's RLIMIT.LOGPUSH, see module_effects.c), so replicas and AOF replay hold the primary's
 * exact state instead of recomputing with another clock. Limited calls and peeks store nothing
 * and so propagate nothing. */
#include "module_cmds.h"
#include "module_reply.h"
#include "module_state.h"
#include "module_stats.h"

#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"
#include "rlimitd/isallowed.h"

int64_t rl_window_max_count = ISALLOWED_DEFAULT_MAX_COUNT;

/* The five integers of both GCRA commands. */
static int reply_gcra(RedisModuleCtx *ctx, const struct gcra_result *r)
{
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, r->limited);
    RedisModule_ReplyWithLongLong(ctx, r->limit);
    RedisModule_ReplyWithLongLong(ctx, r->remaining);
    RedisModule_ReplyWithLongLong(ctx, r->retry_after);
    return RedisModule_ReplyWithLongLong(ctx, r->reset_after);
}

/* What both GCRA commands do after their step (rc, err: its result): on an error close the key
 * and reply it; else store and replicate the new TAT if the step said so, close the key, count
 * the call for INFO rlimit, reply. */
static int finish_gcra(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *name,
                       enum rl_lim lim, int rc, const struct gcra_result *r, const char *err)
{
    if (rc != 0) {
        RedisModule_CloseKey(key);
        return rl_reply_err(ctx, err);
    }
    if (r->store)
        rl_gcra_store_replicate(ctx, key, name, r->new_tat, lim == RL_LIM_GCRA);
    RedisModule_CloseKey(key);
    size_t klen;
    const char *kname = RedisModule_StringPtrLen(name, &klen);
    rl_stats_count(lim, kname, klen, !r->limited, r->remaining <= r->limit / 10);
    return reply_gcra(ctx, r);
}

int rl_cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 5 || argc > 6)
        return rl_reply_arity(ctx, "cl.throttle");
    int64_t burst, count, period, quantity = 1;
    if (rl_arg_i64(ctx, argv[2], &burst) || rl_arg_i64(ctx, argv[3], &count) ||
        rl_arg_i64(ctx, argv[4], &period) || (argc == 6 && rl_arg_i64(ctx, argv[5], &quantity)))
        return REDISMODULE_OK;

    struct gcra_limits l;
    const char *err;
    if (gcra_prepare(burst, count, period, quantity, &l, &err) != 0)
        return rl_reply_err(ctx, err);

    int has;
    int64_t tat;
    RedisModuleKey *key = rl_gcra_open(ctx, argv[1], &has, &tat);
    if (key == NULL)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    struct gcra_result r;
    int rc = gcra_step(&l, rl_now_ns(), has, tat, &r, &err);
    return finish_gcra(ctx, key, argv[1], RL_LIM_THROTTLE, rc, &r, err);
}

/* GCRA on the same string state as CL.THROTTLE (one state per key, as in the daemon), with
 * Redis's checks in Redis's order: arguments, the key's type, then overflow. */
int rl_cmd_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < GCRA_REDIS_MIN_ARGC || argc > GCRA_REDIS_MAX_ARGC)
        return rl_reply_err(ctx, GCRA_REDIS_ERR_ARITY);
    const char *args[GCRA_REDIS_MAX_ARGC];
    size_t lens[GCRA_REDIS_MAX_ARGC];
    for (int i = 0; i < argc; i++)
        args[i] = RedisModule_StringPtrLen(argv[i], &lens[i]);
    struct gcra_redis_args a;
    const char *err;
    if (gcra_redis_parse(argc, args, lens, &a, &err) != 0)
        return rl_reply_err(ctx, err);

    int has;
    int64_t tat;
    RedisModuleKey *key = rl_gcra_open(ctx, argv[1], &has, &tat);
    if (key == NULL)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    struct gcra_result r;
    int rc = gcra_redis_step(&a, rl_now_ns(), has, tat, &r, &err);
    return finish_gcra(ctx, key, argv[1], RL_LIM_GCRA, rc, &r, err);
}

/* In a cluster, clients route ISALLOWED by its first argument (the user) while the state lives
 * at hist:{user}:action. The two hash to the same slot exactly when the user is non-empty and
 * free of braces (then the user is the key's whole hash tag); otherwise the state would land in
 * a slot this node may not own and resharding would strand it. */
static int cluster_safe_user(const char *user, size_t len)
{
    return len > 0 && memchr(user, '{', len) == NULL && memchr(user, '}', len) == NULL;
}

int rl_cmd_isallowed(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 5)
        return rl_reply_arity(ctx, "isallowed");
    int64_t period, max_count, period_ms;
    if (rl_arg_i64(ctx, argv[3], &period) || rl_arg_i64(ctx, argv[4], &max_count))
        return REDISMODULE_OK;
    char err[128];
    if (isallowed_prepare(period, max_count, rl_window_max_count, &period_ms, err, sizeof err))
        return rl_reply_err(ctx, err);

    size_t ulen, alen;
    const char *user = RedisModule_StringPtrLen(argv[1], &ulen);
    const char *action = RedisModule_StringPtrLen(argv[2], &alen);
    if ((RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) &&
        !cluster_safe_user(user, ulen))
        return rl_reply_err(ctx, "in a cluster the ISALLOWED user must be non-empty and contain "
                                 "no '{' or '}' (it is the hash tag of hist:{user}:action)");

    size_t klen = isallowed_key_len(ulen, alen);
    char stackbuf[256];
    char *kbuf = klen <= sizeof stackbuf ? stackbuf : RedisModule_Alloc(klen);
    isallowed_key(kbuf, user, ulen, action, alen);
    RedisModuleString *name = RedisModule_CreateString(ctx, kbuf, klen);
    if (kbuf != stackbuf)
        RedisModule_Free(kbuf);

    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    enum rl_kind kind = rl_key_kind(key);
    if (kind != RL_EMPTY && kind != RL_WLOG) {
        RedisModule_CloseKey(key);
        RedisModule_FreeString(ctx, name);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    int64_t now_ms = rl_now_ns() / 1000000;
    int64_t cutoff = now_ms - period_ms, newest;
    int allowed = rl_wlog_push(key, cutoff, max_count, now_ms, period_ms, &newest);
    /* Allowed: the log holds exactly the window's attempts (the daemon's near_limit rule). */
    const struct swlog *log = rl_wlog_get(key);
    int64_t in_window = log != NULL ? log->len : 0;
    size_t nlen;
    const char *nstr = RedisModule_StringPtrLen(name, &nlen);
    rl_stats_count(RL_LIM_ISALLOWED, nstr, nlen, allowed, in_window * 10 >= max_count * 9);
    /* Every attempt is recorded (COMMANDS.md, ISALLOWED), so every call propagates: the replica applies the
     * same trim, keep and timestamp, and ends with the same log. */
    RedisModule_Replicate(ctx, "RLIMIT.LOGPUSH", "sllll", name, (long long)cutoff,
                          (long long)max_count, (long long)newest, (long long)period_ms);
    RedisModule_CloseKey(key);
    RedisModule_FreeString(ctx, name);
    return RedisModule_ReplyWithLongLong(ctx, allowed);
}
