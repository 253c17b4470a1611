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
#include "module_wait.h"

#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"
#include "rlimitd/isallowed.h"
#include "rlimitd/wait.h"

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

/* WAIT timeout_ms after a GCRA command's own arguments (wait.h): 0 with *n the arguments
 * before it, or -1 once the timeout's error is replied. */
static int split_wait(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int min_argc,
                      int *n, int *has, int64_t *ms)
{
    *n = argc;
    *has = 0;
    *ms = 0;
    if (argc < min_argc + 2)
        return 0;
    size_t len[2];
    const char *p[2] = {RedisModule_StringPtrLen(argv[argc - 2], &len[0]),
                        RedisModule_StringPtrLen(argv[argc - 1], &len[1])};
    const char *err;
    if (!wait_is_option(p[0], len[0]))
        return 0;
    if (wait_parse_ms(p[1], len[1], ms, &err) != 0) {
        rl_reply_err(ctx, err);
        return -1;
    }
    *n = argc - 2;
    *has = 1;
    return 0;
}

/* What both GCRA commands do after parsing: a waiter queued behind others blocks undecided;
 * otherwise the step (a function of the key's state), and a refused request given WAIT parks
 * (its key closed, nothing stored), else finish_gcra answers. */
struct gcra_call {
    enum rl_lim lim;
    int has_wait;
    int64_t wait_ms;
    const struct gcra_limits *l;       /* CL.THROTTLE */
    const struct gcra_redis_args *a;   /* GCRA */
};

static int run_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run,
                    const struct gcra_call *g)
{
    if (g->has_wait && rl_wait_behind(ctx, argv, argc, run, argv[1], g->wait_ms))
        return REDISMODULE_OK;
    int has;
    int64_t tat;
    RedisModuleKey *key = rl_gcra_open(ctx, argv[1], &has, &tat);
    if (key == NULL)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    struct gcra_result r;
    const char *err;
    int rc = g->l != NULL ? gcra_step(g->l, rl_now_ns(), has, tat, &r, &err)
                          : gcra_redis_step(g->a, rl_now_ns(), has, tat, &r, &err);
    if (g->has_wait && rc == 0 && r.limited && r.wait_ns >= 0 &&
        rl_wait_park(ctx, argv, argc, run, argv[1], g->wait_ms, r.wait_ns)) {
        RedisModule_CloseKey(key); /* a refusal stores nothing */
        return REDISMODULE_OK;
    }
    return finish_gcra(ctx, key, argv[1], g->lim, rc, &r, err);
}

static int throttle_core(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                         struct rl_run *run)
{
    struct gcra_call g = {RL_LIM_THROTTLE, 0, 0, NULL, NULL};
    int n;
    if (split_wait(ctx, argv, argc, 5, &n, &g.has_wait, &g.wait_ms) != 0)
        return REDISMODULE_OK;
    if (n < 5 || n > 6)
        return rl_reply_arity(ctx, "cl.throttle");
    int64_t burst, count, period, quantity = 1;
    if (rl_arg_i64(ctx, argv[2], &burst) || rl_arg_i64(ctx, argv[3], &count) ||
        rl_arg_i64(ctx, argv[4], &period) || (n == 6 && rl_arg_i64(ctx, argv[5], &quantity)))
        return REDISMODULE_OK;
    struct gcra_limits l;
    const char *err;
    if (gcra_prepare(burst, count, period, quantity, &l, &err) != 0)
        return rl_reply_err(ctx, err);
    g.l = &l;
    return run_gcra(ctx, argv, argc, run, &g);
}

int rl_cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return rl_wait_call(ctx, argv, argc, throttle_core);
}

/* GCRA on the same string state as CL.THROTTLE (one state per key, as in the daemon), with
 * Redis's checks in Redis's order: arguments, the key's type, then overflow. */
static int gcra_core(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run)
{
    struct gcra_call g = {RL_LIM_GCRA, 0, 0, NULL, NULL};
    int n;
    if (split_wait(ctx, argv, argc, GCRA_REDIS_MIN_ARGC, &n, &g.has_wait, &g.wait_ms) != 0)
        return REDISMODULE_OK;
    if (n < GCRA_REDIS_MIN_ARGC || n > GCRA_REDIS_MAX_ARGC)
        return rl_reply_err(ctx, GCRA_REDIS_ERR_ARITY);
    const char *args[GCRA_REDIS_MAX_ARGC];
    size_t lens[GCRA_REDIS_MAX_ARGC];
    for (int i = 0; i < n; i++)
        args[i] = RedisModule_StringPtrLen(argv[i], &lens[i]);
    struct gcra_redis_args a;
    const char *err;
    if (gcra_redis_parse(n, args, lens, &a, &err) != 0)
        return rl_reply_err(ctx, err);
    g.a = &a;
    return run_gcra(ctx, argv, argc, run, &g);
}

int rl_cmd_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return rl_wait_call(ctx, argv, argc, gcra_core);
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
