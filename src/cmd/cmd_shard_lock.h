/* cmd_shard_lock.h - taking the shards a command touches, always in ascending order, and
 * answering BUSY instead of waiting past busy-reply-threshold for a script that holds one
 * (cmd_shard_lock.c; DESIGN.md "Keyspace: shards and locks", "Long scripts and BUSY"). */
#ifndef RLIMITD_CMD_SHARD_LOCK_H
#define RLIMITD_CMD_SHARD_LOCK_H

#include <stdint.h>

#include "cmd_internal.h"

/* Redis's reply to a command that would wait for a script past busy-reply-threshold. */
#define BUSY_TEXT                                                                                 \
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."

/* A set of shards, one bit each. */
struct shard_set {
    uint64_t w[SHARD_WORDS];
};

static inline void shard_set_add(struct shard_set *set, unsigned shard)
{
    set->w[shard / 64] |= 1ull << (shard % 64);
}

/* An EXEC running its queue (session.exec). A script in it reaching a key outside `set` adds
 * the key's shard to it (cmd_script_hold.c); when that shard cannot be taken in lock order and
 * nothing in the transaction has written yet, `rerun` asks EXEC to start again holding every
 * shard, as EVAL does for a script outside MULTI. */
struct exec_run {
    struct shard_set set; /* held until the transaction ends */
    int wrote;            /* a queued command or a script's call wrote */
    int rerun;
};

/* Locks (lock != 0) or unlocks every shard of the set, ascending. */
void lock_set(struct keyspace *ks, const struct shard_set *set, int lock);
/* Locks a shard for a command, or returns -1 (the caller answers BUSY) when a script has held
 * it past busy-reply-threshold. */
int lock_or_busy(struct cmd_env *env, unsigned shard);
/* Locks the set ascending; on BUSY releases what it took and returns -1. */
int lock_set_or_busy(struct cmd_env *env, const struct shard_set *set);
/* Whether a script has held some shard past busy-reply-threshold. */
int any_shard_busy(struct cmd_env *env);

#endif
