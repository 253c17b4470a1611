/* lease.h - concurrency leases (COMMANDS.md, LEASE.*): "at most `limit` in flight" under one key,
 * with holders that may crash: every lease has an absolute expiry and frees its slot by itself.
 *
 *   LEASE.ACQUIRE key limit ttl_ms [WAIT timeout_ms]   -> id, or nil when full
 *   LEASE.RELEASE key id                               -> 1 released, 0 no such lease
 *   LEASE.RENEW key id ttl_ms                          -> 1 renewed, 0 no such lease
 *   LEASE.COUNT key                                    -> live leases
 *
 * Pure: the set's layout and every change to it, the argument rules. The caller owns the memory
 * (the daemon's keyspace, rlimit.so's module type) and reads the clock. Times are absolute wall
 * clock ns, as everywhere in the limiter. */
#ifndef RLIMITD_LEASE_H
#define RLIMITD_LEASE_H

#include <stddef.h>
#include <stdint.h>

/* The most leases one key may hand out, and the longest lease: 100 years in ms (as ISALLOWED's
 * longest period), so every expiry stays far from int64 ns overflow this century. */
#define LEASE_MAX_LIMIT 100000
#define LEASE_MAX_TTL_MS 3153600000000LL

/* One lease: its id and when it expires (ns since the epoch). */
struct lease {
    int64_t id;
    int64_t expire;
};

/* A key's leases, ids ascending (a new lease always takes an id above every earlier one), in
 * one allocation of lease_set_bytes(cap). last_id is the highest id handed out under the key
 * while the set has existed, so a new id is above every id its holders may still present. */
struct lease_set {
    uint32_t n, cap;
    int64_t last_id;
    struct lease l[];
};

size_t lease_set_bytes(uint32_t cap);
void lease_set_init(struct lease_set *s, uint32_t cap, int64_t last_id);
/* The capacity a set holding n leases should have to take one more: doubling from 4, at most
 * max(limit, n + 1). */
uint32_t lease_grow_cap(const struct lease_set *s, int64_t limit);

/* Drops the leases expired at now (expire <= now); returns how many went. */
uint32_t lease_purge(struct lease_set *s, int64_t now);
/* Live leases at now, without changing the set (LEASE.COUNT; a replica's read). */
uint32_t lease_count_live(const struct lease_set *s, int64_t now);
/* The id of a lease taken at now: its microseconds since the epoch, or last_id + 1 if that is
 * not above last_id (more than one lease a microsecond, or a clock stepped back): ids of a key
 * only grow, and a holder's id is never handed out again under it. */
int64_t lease_new_id(const struct lease_set *s, int64_t now);
/* Adds a lease (s->n < s->cap; id above every id in the set) or, for an id already in the set,
 * sets its expiry (the effect a replica applies). */
void lease_put(struct lease_set *s, int64_t id, int64_t expire);
/* The index of the lease with this id, or -1. */
int lease_find(const struct lease_set *s, int64_t id);
void lease_remove(struct lease_set *s, int index);
/* The earliest and the latest expiry of the set's leases (n >= 1). */
int64_t lease_min_expire(const struct lease_set *s);
int64_t lease_max_expire(const struct lease_set *s);

/* ---- arguments (error texts after "ERR ") ---- */

/* LEASE.ACQUIRE key limit ttl_ms [WAIT timeout_ms]: argv[0] the name. 0, or -1 with *err. */
struct lease_acquire_args {
    int64_t limit;
    int64_t ttl_ms;
    int has_wait;
    int64_t wait_ms;
};
int lease_acquire_parse(int argc, const char *const *argv, const size_t *lens,
                        struct lease_acquire_args *a, const char **err);
/* A lease id (LEASE.RELEASE, LEASE.RENEW): 0 and *id, or -1 with *err. */
int lease_parse_id(const char *s, size_t len, int64_t *id, const char **err);
/* A ttl_ms (LEASE.ACQUIRE, LEASE.RENEW): 0 and *ms, or -1 with *err. */
int lease_parse_ttl(const char *s, size_t len, int64_t *ms, const char **err);

#endif
