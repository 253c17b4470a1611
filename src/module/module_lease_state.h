/* module_lease_state.h - the lease sets' module type (module_lease_state.c): the only code that
 * changes a lease set in Redis. */
#ifndef RLIMITD_MODULE_LEASE_STATE_H
#define RLIMITD_MODULE_LEASE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/lease.h"
#include "rlimitd/redismodule_api.h"

/* Registers the rlim-leas type; REDISMODULE_ERR if the server refuses. */
int rl_lease_type_create(RedisModuleCtx *ctx);

/* The key's lease set: 0 with *s (NULL for an empty key), or -1 when the key holds another
 * type (the caller replies WRONGTYPE). */
int rl_lease_get(RedisModuleKey *key, const struct lease_set **s);
/* The effects (a command on the primary, RLIMIT.LEASEPUT / LEASEDEL on a replica, in the same
 * order, so both end with the same bytes): drop the leases expired at now, then add or re-time
 * lease id (put) or remove it (del). The key expires with its last lease (ms, rounded up) and
 * goes when its last lease does. key must be empty or hold a lease set. */
void rl_lease_put(RedisModuleKey *key, int64_t now, int64_t id, int64_t expire);
/* Returns 1 if the lease was there. */
int rl_lease_del(RedisModuleKey *key, int64_t now, int64_t id);
/* RLIMIT.LEASESET (AOF rewrite): replaces the set with the packed one (lease_pack). 0, or -1
 * with *err when the bytes are not a valid set. */
int rl_lease_replace(RedisModuleKey *key, const char *packed, size_t len, const char **err);

#endif
