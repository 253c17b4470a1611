/* module_lease.h - LEASE.* and their effect commands inside Redis (module_lease.c). */
#ifndef RLIMITD_MODULE_LEASE_H
#define RLIMITD_MODULE_LEASE_H

#include "rlimitd/redismodule_api.h"

int rl_cmd_lease_acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_lease_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_lease_renew(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_lease_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
/* RLIMIT.LEASEPUT key now_ns id expire_ns, RLIMIT.LEASEDEL key now_ns id, RLIMIT.LEASESET key
 * packed: what replicas and the AOF apply (module_lease_state.h). */
int rl_cmd_leaseput(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_leasedel(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rl_cmd_leaseset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
