/* module_reply.h - the error replies every command of rlimit.so shares (module_reply.c),
 * and, inline beside them, rl_arg_i64 and the clock every deciding command reads. */
#ifndef RLIMITD_MODULE_REPLY_H
#define RLIMITD_MODULE_REPLY_H

#include <stdint.h>
#include <time.h>

#include "rlimitd/redismodule_api.h"
#include "rlimitd/util.h"

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

/* rl_arg_i64 without the reply: 0, or -1 when arg is not an integer. */
static inline int rl_arg_i64_quiet(RedisModuleString *arg, int64_t *out)
{
    size_t len;
    const char *s = RedisModule_StringPtrLen(arg, &len);
    return util_parse_i64(s, len, out);
}

/* COMMANDS.md, CL.THROTTLE: the wall clock in ns, read once per command. */
static inline int64_t rl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
