/* cmd_shard_lock.c - taking the shards a command touches (cmd_shard_lock.h): ascending order
 * everywhere, so that no two commands wait on each other; a shard a script holds is waited for
 * only until busy-reply-threshold, then the command is answered BUSY. */
#include "cmd_shard_lock.h"

#include <stdatomic.h>
#include <stdint.h>

#include "rlimitd/clock.h"

/* Ascending order everywhere: two commands locking overlapping sets cannot deadlock. */
void lock_set(struct keyspace *ks, const struct shard_set *set, int lock)
{
    unsigned words = (ks_nshards(ks) + 63) / 64;
    _Static_assert(sizeof(set->w) / sizeof(set->w[0]) == SHARD_WORDS, "shard set size");
    for (unsigned w = 0; w < words; w++) {
        uint64_t bits = set->w[w];
        while (bits != 0) {
            unsigned shard = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (lock)
                ks_lock(ks, shard);
            else
                ks_unlock(ks, shard);
        }
    }
}

/* Locks a shard for a command, unless a script has held it past busy-reply-threshold: then
 * -1 (the caller answers BUSY) instead of waiting for the script. A free shard is taken at once;
 * a held one without a script marker is waited for in 10 ms slices, looking at the marker
 * again between them. */
int lock_or_busy(struct cmd_env *env, unsigned shard)
{
    for (;;) {
        int64_t since = env->script_since == NULL
                            ? 0
                            : atomic_load_explicit(&env->script_since[shard],
                                                   memory_order_relaxed);
        if (since == 0) {
            if (env->script_since == NULL) {
                ks_lock(env->ks, shard);
                return 0;
            }
            if (ks_trylock(env->ks, shard) == 0)
                return 0;
            /* Held: perhaps by a script that has locked the shard but not yet set its marker.
             * Wait in short slices, so that a marker set meanwhile is seen and BUSY answered
             * past the threshold instead of waiting for the whole script. */
            if (ks_timedlock(env->ks, shard, clock_mono_ns() + 10 * 1000000) == 0)
                return 0;
            continue;
        }
        int64_t ms = __atomic_load_n(&env->conf->busy_reply_threshold, __ATOMIC_RELAXED);
        int64_t deadline = since + ms * 1000000;
        if (clock_mono_ns() >= deadline)
            return ks_trylock(env->ks, shard);
        if (ks_timedlock(env->ks, shard, deadline) == 0)
            return 0;
        /* Timed out: the same script is now busy, or another took the shard: look again. */
    }
}

/* Locks the set ascending; on BUSY releases what it took and returns -1. */
int lock_set_or_busy(struct cmd_env *env, const struct shard_set *set)
{
    unsigned words = (ks_nshards(env->ks) + 63) / 64;
    for (unsigned w = 0; w < words; w++) {
        uint64_t bits = set->w[w];
        while (bits != 0) {
            unsigned shard = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (lock_or_busy(env, shard) != 0) {
                struct shard_set taken = {{0}};
                for (unsigned v = 0; v < w; v++)
                    taken.w[v] = set->w[v];
                taken.w[w] = set->w[w] & ((1ull << (shard % 64)) - 1);
                lock_set(env->ks, &taken, 0);
                return -1;
            }
        }
    }
    return 0;
}

/* Whether a script has held some shard past busy-reply-threshold: a whole-keyspace command
 * then answers BUSY rather than start and wait on that shard. */
int any_shard_busy(struct cmd_env *env)
{
    if (env->script_since == NULL)
        return 0;
    int64_t ms = __atomic_load_n(&env->conf->busy_reply_threshold, __ATOMIC_RELAXED);
    int64_t now = clock_mono_ns();
    for (unsigned i = 0; i < ks_nshards(env->ks); i++) {
        int64_t since = atomic_load_explicit(&env->script_since[i], memory_order_relaxed);
        if (since != 0 && now - since >= ms * 1000000)
            return 1;
    }
    return 0;
}

void ctx_lock_shard(struct cmd_ctx *x, unsigned shard)
{
    if (!x->all_locked)
        ks_lock(x->env->ks, shard);
}

void ctx_unlock_shard(struct cmd_ctx *x, unsigned shard)
{
    if (!x->all_locked)
        ks_unlock(x->env->ks, shard);
}
