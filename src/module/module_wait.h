/* module_wait.h - the WAIT option inside Redis (module_wait.c; COMMANDS.md, "Waiting for
 * capacity"): Redis's blocked-client API, one FIFO queue per key, a module timer for the head. */
#ifndef RLIMITD_MODULE_WAIT_H
#define RLIMITD_MODULE_WAIT_H

#include <stdint.h>

#include "rlimitd/redismodule_api.h"

struct rl_waiter;

/* A command's core: decides, and replies unless it parked the request (rl_wait_behind,
 * rl_wait_park). The waiter's run: run->w is the waiter being decided again (NULL for a first
 * run), run->no_wait makes WAIT answer as absent (the run at the timeout). */
struct rl_run;
typedef int (*rl_core_fn)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                          struct rl_run *run);
struct rl_run {
    rl_core_fn core;
    struct rl_waiter *w;
    int no_wait;
    int parked; /* set by rl_wait_behind / rl_wait_park */
};

/* Runs a command's core for a client's call (first run). */
int rl_wait_call(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, rl_core_fn core);
/* First run with WAIT: if others wait on key, the client blocks at the back of the queue
 * undecided. Returns 1 if it did (the core replies nothing). */
int rl_wait_behind(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run,
                   RedisModuleString *key, int64_t timeout_ms);
/* Refused with WAIT: wait_ns is the limiter's time until it would pass (-1 never). Parks the
 * request (a first run blocks the client) and returns 1, or 0 when the refusal is answered. */
int rl_wait_park(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run,
                 RedisModuleString *key, int64_t timeout_ms, int64_t wait_ns);
/* Capacity came back under key (LEASE.RELEASE): its head is decided again. */
void rl_wait_notify(RedisModuleCtx *ctx, RedisModuleString *key);

#endif
