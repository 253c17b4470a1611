/* module.c - rlimit.so's entry point: load arguments, data types, command table.
 *
 *   redis-server --loadmodule /path/rlimit.so [window-max-count N]
 *
 * Every command takes its key at argument 1 (ISALLOWED: the user, whose hash tag places the
 * state key), so COMMAND GETKEYS, cluster-aware clients and `redis-cli -c` route them. */
#include "module_internal.h"

#include <string.h>

#include "rlimitd/isallowed.h"
#include "rlimitd/util.h"

int64_t rl_window_max_count = ISALLOWED_DEFAULT_MAX_COUNT;

static int parse_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    for (int i = 0; i < argc; i += 2) {
        size_t len, vlen = 0;
        const char *name = RedisModule_StringPtrLen(argv[i], &len);
        const char *val = i + 1 < argc ? RedisModule_StringPtrLen(argv[i + 1], &vlen) : NULL;
        int64_t n;
        /* The daemon's window-max-count bounds (conf.c): 1 .. 100,000,000. */
        if (util_eq_nocase(name, len, "window-max-count") && val != NULL &&
            util_parse_i64(val, vlen, &n) == 0 && n >= 1 && n <= 100000000) {
            rl_window_max_count = n;
            continue;
        }
        RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING,
                        "rlimit: bad load argument '%.*s' (usage: window-max-count "
                        "<1..100000000>)",
                        (int)len, name);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

struct rl_command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
};

static const struct rl_command commands[] = {
    {"cl.throttle", rl_cmd_throttle, "write deny-oom fast"},
    {"isallowed", rl_cmd_isallowed, "write deny-oom fast"},
    {"rlimit.settat", rl_cmd_settat, "write deny-oom fast"},
    {"rlimit.logpush", rl_cmd_logpush, "write deny-oom fast"},
    {"rlimit.logset", rl_cmd_logset, "write deny-oom"},
};

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                               RedisModuleString **argv,
                                                               int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (rm_api_load(ctx, "rlimit", 1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (parse_args(ctx, argv, argc) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (rl_types_create(ctx) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (RedisModule_CreateCommand(ctx, commands[i].name, commands[i].fn, commands[i].flags, 1,
                                      1, 1) != REDISMODULE_OK)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
