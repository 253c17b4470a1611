/* module_multi.h - THROTTLE.ALL inside Redis (module_multi.c). */
#ifndef RLIMITD_MODULE_MULTI_H
#define RLIMITD_MODULE_MULTI_H

#include "rlimitd/redismodule_api.h"

/* THROTTLE.ALL; also answers Redis's key-position requests (the command is registered with
 * getkeys-api: its keys are counted by argv[1]), which is how Redis Cluster routes it and
 * answers CROSSSLOT for keys in different slots. */
int rl_cmd_throttle_all(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
