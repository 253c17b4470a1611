/* module_reply.c - the error replies every command of rlimit.so shares, in the daemon's words
 * (rl_arg_i64, inline in module_reply.h, uses them too). Calls nothing of the module but the
 * Redis module API: the command files call down to it. */
#include "module_reply.h"

#include <stdio.h>

int rl_reply_err(RedisModuleCtx *ctx, const char *text)
{
    char buf[256];
    snprintf(buf, sizeof buf, "ERR %s", text);
    return RedisModule_ReplyWithError(ctx, buf);
}

int rl_reply_arity(RedisModuleCtx *ctx, const char *cmd)
{
    /* Redis checks the registered arity (module.c) before a client's call reaches a handler, but
     * not when it replays an AOF: there a damaged file could hand a handler too few arguments,
     * so every handler checks again. Redis's own WrongArity echoes the name as typed; the daemon
     * (like Redis 7 for built-in commands) names it in lower case, and the two answer alike. */
    char buf[128];
    snprintf(buf, sizeof buf, "wrong number of arguments for '%s' command", cmd);
    return rl_reply_err(ctx, buf);
}
