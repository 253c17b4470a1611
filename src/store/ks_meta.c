/* ks_meta.c - the access data of the LRU and LFU policies (ks_evict.c "Access data"): each
 * shard's uint16 array parallel to its slots, the LRU clock and Redis's LFU counter, and this
 * thread's random numbers. Calls ks_slab.c only, so the table (ks_table.c) may call it. */
#include "ks_internal.h"

#include <stdlib.h>
#include <time.h>

#include "rlimitd/alloc.h"

/* ---- a thread's random numbers (xorshift64*) ---- */

static _Thread_local uint64_t rng_state;
_Thread_local int meta_notouch;

void ks_notouch(int on)
{
    meta_notouch = on;
}

uint64_t rng_next(void)
{
    if (rng_state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        rng_state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)&ts ^ 1;
    }
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

int64_t meta_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- access data ---- */

uint16_t *meta_alloc(struct shard *sh, uint64_t nslots)
{
    uint16_t *m = xmalloc(nslots * sizeof(*m));
    uint16_t fresh = meta_fresh(sh->meta_kind, meta_now());
    for (uint64_t i = 0; i < nslots; i++)
        m[i] = fresh;
    mem_add(sh, m, 1);
    return m;
}

void meta_free(struct shard *sh, uint16_t *meta, uint64_t nslots)
{
    (void)nslots;
    shard_free(sh, meta);
}

/* Redis's LFUDecrAndReturn: the counter less one per lfu-decay-time minutes since the last decay.
 */
unsigned lfu_decayed(const struct keyspace *ks, uint16_t m, int64_t now)
{
    unsigned counter = m & 0xff;
    unsigned minutes = (unsigned)(((uint64_t)now / 60000000000u) & 0xff);
    unsigned elapsed = (minutes - (unsigned)(m >> 8)) & 0xff;
    int decay = atomic_load_explicit(&ks->lfu_decay_time, memory_order_relaxed);
    unsigned periods = decay > 0 ? elapsed / (unsigned)decay : 0;
    return periods > counter ? 0 : counter - periods;
}

/* Redis's updateLFU: decay, then LFULogIncr (the counter grows with probability
 * 1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1)), stamped with the minute now. */
uint16_t lfu_touch(const struct keyspace *ks, uint16_t m, int64_t now)
{
    unsigned counter = lfu_decayed(ks, m, now);
    if (counter < 255) {
        double r = (double)(rng_next() >> 11) / (double)(1ULL << 53);
        double base = counter > LFU_INIT_VAL ? (double)(counter - LFU_INIT_VAL) : 0.0;
        int factor = atomic_load_explicit(&ks->lfu_log_factor, memory_order_relaxed);
        if (r < 1.0 / (base * factor + 1))
            counter++;
    }
    return (uint16_t)((((uint64_t)now / 60000000000u) & 0xff) << 8 | counter);
}

static uint8_t kind_of(int policy)
{
    switch (policy) {
    case KS_POL_VOLATILE_LRU:
    case KS_POL_ALLKEYS_LRU:
        return META_LRU;
    case KS_POL_VOLATILE_LFU:
    case KS_POL_ALLKEYS_LFU:
        return META_LFU;
    default:
        return META_NONE;
    }
}

void meta_sync(const struct keyspace *ks, struct shard *sh)
{
    uint8_t kind = kind_of(atomic_load_explicit(&ks->policy, memory_order_relaxed));
    if (__builtin_expect(sh->meta_kind == kind, 1))
        return;
    if (sh->meta != NULL)
        meta_free(sh, sh->meta, sh->mask + 1);
    sh->meta = NULL;
    sh->meta_kind = kind;
    /* Every key starts as just accessed: nothing is known of the time before. */
    if (kind != META_NONE)
        sh->meta = meta_alloc(sh, sh->mask + 1);
}
