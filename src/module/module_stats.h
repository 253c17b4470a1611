/* module_stats.h - the daemon's limiter statistics inside Redis (module_stats.c): the counts
 * the handlers and the data types feed, INFO rlimit and RLIMIT.TOP. */
#ifndef RLIMITD_MODULE_STATS_H
#define RLIMITD_MODULE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/redismodule_api.h"

enum rl_lim { RL_LIM_THROTTLE = 0, RL_LIM_GCRA, RL_LIM_ISALLOWED, RL_LIM_THROTTLE_ALL,
              RL_LIM_LEASE, RL_LIM_COUNT };
/* Makes the LIMITER TOP sketch of size counters (load argument limiter-top-size). */
int rl_stats_init(uint32_t size);
/* Counts one limiter decision, and the key (its state key) when limited. near as the daemon:
 * allowed with at most 10% of the capacity left. The GCRA command calls it too. */
void rl_stats_count(enum rl_lim kind, const char *key, size_t len, int allowed, int near);
/* Limiter values alive in the server (created, loaded, freed). */
void rl_stats_values(int64_t delta);
void rl_info(RedisModuleInfoCtx *ctx, int for_crash_report);
int rl_cmd_top(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
