/* module_effects.h - the commands that apply a decided effect (module_effects.c), as replicas
 * and AOF replay run them: RLIMIT.SETTAT, RLIMIT.LOGPUSH, RLIMIT.LOGSET. */
#ifndef RLIMITD_MODULE_EFFECTS_H
#define RLIMITD_MODULE_EFFECTS_H

#include "rlimitd/redismodule_api.h"

int rl_cmd_settat(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_logpush(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_logset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
