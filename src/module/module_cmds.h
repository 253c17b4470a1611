/* module_cmds.h - the commands that decide (module_cmds.c): CL.THROTTLE, GCRA, ISALLOWED. */
#ifndef RLIMITD_MODULE_CMDS_H
#define RLIMITD_MODULE_CMDS_H

#include <stdint.h>

#include "rlimitd/redismodule_api.h"

/* The load argument window-max-count: ISALLOWED's bound on max_count. RedisModule_OnLoad
 * (module.c) sets it once the load is certain. */
extern int64_t rl_window_max_count;

int rl_cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_isallowed(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
