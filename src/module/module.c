/* module.c - rlimit.so's entry point: load arguments, data types, command table.
 *
 *   redis-server --loadmodule /path/rlimit.so [window-max-count N] [limiter-top-size N]
 *
 * Every command takes its key at argument 1 (ISALLOWED: the user, whose hash tag places the
 * state key), so COMMAND GETKEYS, cluster-aware clients and `redis-cli -c` route them.
 *
 * rlimit.so runs the daemon's limiter core (gcra.c, swlog.c, isallowed.c) on Redis keys. Data
 * flow: module_cmds.c (CL.THROTTLE, GCRA, ISALLOWED: decide with the primary's clock) and
 * module_effects.c (RLIMIT.*: apply a decided effect, as replicas and AOF replay do) both change
 * state only through module_state.c, which owns the two data types and their persistence.
 * Calls between the files go one way, and each file's header is included only by the files that
 * call it: this file calls the handlers; module_cmds.c and module_effects.c call module_state.c;
 * module_cmds.c and module_state.c call module_stats.c (counts); the handlers and
 * module_stats.c call module_reply.c; all of them call the module API (module_api.c), and
 * nothing calls this file. */
#include "module_cmds.h"
#include "module_effects.h"
#include "module_lease.h"
#include "module_lease_state.h"
#include "module_multi.h"
#include "module_state.h"
#include "module_stats.h"

#include <string.h>

#include "rlimitd/isallowed.h"
#include "rlimitd/topk.h"
#include "rlimitd/util.h"

static int parse_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                      int64_t *window_max_count, int64_t *top_size)
{
    for (int i = 0; i < argc; i += 2) {
        size_t len, vlen = 0;
        const char *name = RedisModule_StringPtrLen(argv[i], &len);
        const char *val = i + 1 < argc ? RedisModule_StringPtrLen(argv[i + 1], &vlen) : NULL;
        int64_t n;
        /* The daemon's window-max-count bounds (conf.c): 1 .. 100,000,000. */
        if (util_eq_nocase(name, len, "window-max-count") && val != NULL &&
            util_parse_i64(val, vlen, &n) == 0 && n >= 1 && n <= 100000000) {
            *window_max_count = n;
            continue;
        }
        /* The daemon's limiter-top-size bounds (topk.h). */
        if (util_eq_nocase(name, len, "limiter-top-size") && val != NULL &&
            util_parse_i64(val, vlen, &n) == 0 && n >= TOPK_MIN_SIZE && n <= TOPK_MAX_SIZE) {
            *top_size = n;
            continue;
        }
        RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING,
                        "rlimit: bad load argument '%.*s' (usage: window-max-count "
                        "<1..100000000> limiter-top-size <10..100000>)",
                        (int)len, name);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

struct rl_command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int arity; /* Redis's convention: N exactly, -N at least N (argv[0] counts) */
    const char *summary;
    int keyed; /* 1: the key is argument 1; 0: the command reports its keys (getkeys-api) */
};

static const struct rl_command commands[] = {
    {"cl.throttle", rl_cmd_throttle, "write deny-oom fast", -5,
     "GCRA rate limit: [limited, limit, remaining, retry_after, reset_after]", 1},
    {"throttle.all", rl_cmd_throttle_all, "write deny-oom getkeys-api", -8,
     "Several GCRA limits, one per key, taken from all or none: [limited, index, retry_after, "
     "[5 integers per limit]]", 0},
    {"isallowed", rl_cmd_isallowed, "write deny-oom fast", 5,
     "Sliding-window log: 1 if the attempt is within max_count in the last period", 1},
    {"rlimit.settat", rl_cmd_settat, "write deny-oom fast", 3,
     "Internal: sets GCRA state (replication and AOF)", 1},
    {"rlimit.logpush", rl_cmd_logpush, "write deny-oom fast", 6,
     "Internal: records one window-log attempt (replication and AOF)", 1},
    {"rlimit.logset", rl_cmd_logset, "write deny-oom", 3,
     "Internal: sets a whole window log (AOF rewrite)", 1},
    {"lease.acquire", rl_cmd_lease_acquire, "write deny-oom fast", -4,
     "Takes one of limit concurrent leases for ttl_ms: its id, or nil when all are held", 1},
    {"lease.release", rl_cmd_lease_release, "write fast", 3,
     "Gives a lease back: 1, or 0 when it was not held", 1},
    {"lease.renew", rl_cmd_lease_renew, "write fast", 4,
     "Moves a held lease's expiry to ttl_ms from now: 1, or 0 when it was not held", 1},
    {"lease.count", rl_cmd_lease_count, "readonly fast", 2, "The leases held on a key", 1},
    {"rlimit.leaseput", rl_cmd_leaseput, "write deny-oom fast", 5,
     "Internal: adds or re-times a lease (replication and AOF)", 1},
    {"rlimit.leasedel", rl_cmd_leasedel, "write fast", 4,
     "Internal: removes a lease (replication and AOF)", 1},
    {"rlimit.leaseset", rl_cmd_leaseset, "write deny-oom", 3,
     "Internal: sets a whole lease set (AOF rewrite)", 1},
};

/* GCRA is registered only where the server has no command of that name: Redis's own GCRA (its
 * unstable branch, 2026) answers there, on its own string state. COMMAND INFO answers one
 * element per name asked, an array for a command and a nil for none. */
static const struct rl_command gcra_command = {
    "gcra", rl_cmd_gcra, "write deny-oom fast", -5,
    "GCRA rate limit, Redis's syntax: [limited, capacity, remaining, retry_after, reset_after]",
    1};

static int server_has_command(RedisModuleCtx *ctx, const char *name)
{
    RedisModuleCallReply *r = RedisModule_Call(ctx, "COMMAND", "cc", "INFO", name);
    int has = 0;
    if (r != NULL && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY) {
        RedisModuleCallReply *e = RedisModule_CallReplyArrayElement(r, 0);
        has = e != NULL && RedisModule_CallReplyType(e) == REDISMODULE_REPLY_ARRAY;
    }
    if (r != NULL)
        RedisModule_FreeCallReply(r);
    return has;
}

/* Redis registers module commands with arity -1; giving the real arity makes Redis itself refuse
 * a wrong-arity call, before MULTI queues it (EXECABORT, as the daemon does). */
static int set_arity(RedisModuleCtx *ctx, const struct rl_command *c)
{
    static const RedisModuleCommandInfoVersion version = {.version = 1};
    RedisModuleCommandInfo info = {
        .version = &version,
        .summary = c->summary,
        .since = "0.1.0",
        .arity = c->arity,
    };
    RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, c->name);
    return cmd != NULL ? RedisModule_SetCommandInfo(cmd, &info) : REDISMODULE_ERR;
}

static int create_command(RedisModuleCtx *ctx, const struct rl_command *c)
{
    int k = c->keyed;
    if (RedisModule_CreateCommand(ctx, c->name, c->fn, c->flags, k, k, k) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    return set_arity(ctx, c);
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                               RedisModuleString **argv,
                                                               int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    /* Nothing global changes until the load is certain to succeed: a refused load must leave an
     * already-loaded copy of this library (same globals) working. */
    if (rm_api_load(ctx, "rlimit", 1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    int64_t window_max_count = ISALLOWED_DEFAULT_MAX_COUNT, top_size = 1000;
    if (parse_args(ctx, argv, argc, &window_max_count, &top_size) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    if (rl_types_create(ctx) != REDISMODULE_OK || rl_lease_type_create(ctx) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (create_command(ctx, &commands[i]) != REDISMODULE_OK)
            return REDISMODULE_ERR;
    if (server_has_command(ctx, gcra_command.name))
        RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_NOTICE,
                        "rlimit: the server has its own GCRA command; not registering ours");
    else if (create_command(ctx, &gcra_command) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    /* RLIMIT.TOP reads no key: no key positions, and it runs while loading or stale. */
    static const struct rl_command top_cmd = {"rlimit.top", rl_cmd_top, "readonly fast", -1,
                                              "The keys limited most often, as [key, count] "
                                              "pairs (LIMITER TOP)", 0};
    if (RedisModule_CreateCommand(ctx, top_cmd.name, top_cmd.fn, top_cmd.flags, 0, 0, 0) !=
            REDISMODULE_OK ||
        set_arity(ctx, &top_cmd) != REDISMODULE_OK ||
        RedisModule_RegisterInfoFunc(ctx, rl_info) != REDISMODULE_OK ||
        rl_stats_init((uint32_t)top_size) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    rl_window_max_count = window_max_count;
    return REDISMODULE_OK;
}
