/* module_stats.c - the daemon's limiter statistics inside Redis: INFO rlimit (a module INFO
 * section) and RLIMIT.TOP [COUNT n] (Redis has no LIMITER command).
 *
 * Redis runs module commands on its main thread, so the counters and the sketch need no lock;
 * the value count is atomic only because a server may free values from a lazy-free thread.
 * Redis gives modules no CONFIG RESETSTAT hook: these figures count from the module's load. */
#include "module_stats.h"
#include "module_reply.h"

#include <stdio.h>
#include <string.h>

#include "rlimitd/topk.h"
#include "rlimitd/util.h"

#define TOP_DEFAULT 10
#define TOP_MAX 1000

static struct {
    unsigned long long allowed[RL_LIM_COUNT];
    unsigned long long limited[RL_LIM_COUNT];
    unsigned long long near;
} stats;
static int64_t values; /* atomic: limiter values alive */
static struct topk *top;

int rl_stats_init(uint32_t size)
{
    size_t bytes = topk_bytes(size);
    if (bytes == 0)
        return REDISMODULE_ERR;
    uint8_t seed[16];
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL || fread(seed, 1, sizeof seed, f) != sizeof seed)
        memset(seed, 0x5a, sizeof seed);
    if (f != NULL)
        fclose(f);
    /* Kept for the life of the process: a module with data types is never unloaded. */
    top = topk_init(RedisModule_Alloc(bytes), size, seed);
    return top != NULL ? REDISMODULE_OK : REDISMODULE_ERR;
}

void rl_stats_count(enum rl_lim kind, const char *key, size_t len, int allowed, int near)
{
    if (allowed) {
        stats.allowed[kind]++;
        stats.near += near != 0;
    } else {
        stats.limited[kind]++;
        if (top != NULL)
            topk_add(top, key, len);
    }
}

void rl_stats_values(int64_t delta)
{
    __atomic_add_fetch(&values, delta, __ATOMIC_RELAXED);
}

void rl_info(RedisModuleInfoCtx *ctx, int for_crash_report)
{
    (void)for_crash_report;
    int64_t v = __atomic_load_n(&values, __ATOMIC_RELAXED);
    /* Shown as "# rlimit_limiter" with rlimit_-prefixed fields, Redis's rule for modules. */
    RedisModule_InfoAddSection(ctx, "limiter");
    RedisModule_InfoAddFieldULongLong(ctx, "throttle_allowed", stats.allowed[RL_LIM_THROTTLE]);
    RedisModule_InfoAddFieldULongLong(ctx, "throttle_limited", stats.limited[RL_LIM_THROTTLE]);
    RedisModule_InfoAddFieldULongLong(ctx, "gcra_allowed", stats.allowed[RL_LIM_GCRA]);
    RedisModule_InfoAddFieldULongLong(ctx, "gcra_limited", stats.limited[RL_LIM_GCRA]);
    RedisModule_InfoAddFieldULongLong(ctx, "isallowed_allowed", stats.allowed[RL_LIM_ISALLOWED]);
    RedisModule_InfoAddFieldULongLong(ctx, "isallowed_denied", stats.limited[RL_LIM_ISALLOWED]);
    RedisModule_InfoAddFieldULongLong(ctx, "throttle_all_allowed",
                                      stats.allowed[RL_LIM_THROTTLE_ALL]);
    RedisModule_InfoAddFieldULongLong(ctx, "throttle_all_limited",
                                      stats.limited[RL_LIM_THROTTLE_ALL]);
    RedisModule_InfoAddFieldULongLong(ctx, "lease_acquired", stats.allowed[RL_LIM_LEASE]);
    RedisModule_InfoAddFieldULongLong(ctx, "lease_full", stats.limited[RL_LIM_LEASE]);
    RedisModule_InfoAddFieldULongLong(ctx, "near_limit", stats.near);
    RedisModule_InfoAddFieldULongLong(ctx, "limiter_keys", v > 0 ? (unsigned long long)v : 0);
}

/* RLIMIT.TOP [COUNT n]: LIMITER TOP's reply and errors. */
int rl_cmd_top(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    int64_t n = TOP_DEFAULT;
    size_t len;
    const char *opt = argc >= 2 ? RedisModule_StringPtrLen(argv[1], &len) : NULL;
    if (argc == 3 && util_eq_nocase(opt, len, "COUNT")) {
        if (rl_arg_i64(ctx, argv[2], &n))
            return REDISMODULE_OK;
        if (n < 1 || n > TOP_MAX)
            return rl_reply_err(ctx, "COUNT must be between 1 and 1000");
    } else if (argc != 1) {
        return rl_reply_err(ctx, "syntax error");
    }
    struct topk_item items[TOP_MAX];
    uint32_t got = top != NULL ? topk_list(top, items, (uint32_t)n) : 0;
    RedisModule_ReplyWithArray(ctx, got);
    for (uint32_t i = 0; i < got; i++) {
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithStringBuffer(ctx, items[i].key, items[i].len);
        RedisModule_ReplyWithLongLong(ctx, (long long)items[i].count);
    }
    return REDISMODULE_OK;
}
