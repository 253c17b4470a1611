/* Unit tests of maxmemory-policy in the store (src/store/ks_evict.c): what each policy may delete,
 * that deleting GCRA state (no blob) brings used memory under the limit, the access data the
 * LRU and LFU policies keep, and that it costs nothing under the default policy. Single-threaded
 * (ks_evict takes its shards with trylock; nothing else holds them here); time is passed in, and
 * the LRU test's access times are those passed, so no clock is raced. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "rlimitd/keyspace.h"

#define SEC 1000000000LL
#define T0 (1800000000LL * SEC)

static struct keyspace *ks;
static const uint8_t seed[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
static char names[4096][24];

static void setup(void)
{
    ks = ks_create(4, seed);
    cr_assert_not_null(ks);
}

static void teardown(void)
{
    ks_destroy(&ks);
}

TestSuite(evict, .init = setup, .fini = teardown);

static struct ks_key key_of(const char *prefix, int i)
{
    snprintf(names[i], sizeof names[i], "%s:%d", prefix, i);
    struct ks_key k;
    ks_key_init(ks, &k, names[i], strlen(names[i]));
    return k;
}

/* ks_evict stops after about a millisecond when it made progress (Redis's EVICT_RUNNING): on a
 * busy machine one call may not be enough, so call it as commands would, until it is under the
 * limit or reports that it cannot get there. */
static int evict_until_done(int64_t now, uint64_t *evicted)
{
    int rc;
    uint64_t before;
    do { /* a call that deletes nothing and answers 0 found used memory under the limit */
        before = *evicted;
        rc = ks_evict(ks, 0, now, evicted);
    } while (rc == 0 && *evicted != before);
    return rc;
}

static int exists(const char *prefix, int i, int64_t now)
{
    struct ks_key k = key_of(prefix, i);
    return ks_get(ks, &k, now, NULL) != KS_NONE;
}

Test(evict, noeviction_deletes_nothing_and_reports_over)
{
    for (int i = 0; i < 100; i++) {
        struct ks_key k = key_of("a", i);
        cr_assert_eq(ks_set(ks, &k, T0, "value", 5, 0, 0), 1);
    }
    ks_set_maxmemory(ks, ks_used_memory(ks) / 2);
    uint64_t evicted = 0;
    cr_assert_eq(evict_until_done(T0, &evicted), -1);
    cr_assert_eq(evicted, 0);
    cr_assert_eq(ks_key_count(ks), 100);
}

/* GCRA state has no blob: only counting live entries lets deleting it lower used memory. */
Test(evict, allkeys_random_gets_gcra_keys_under_the_limit)
{
    for (int i = 0; i < 2000; i++) {
        struct ks_key k = key_of("g", i);
        cr_assert_eq(ks_gcra_write(ks, &k, T0, T0 + 3600 * SEC), KS_OK);
    }
    uint64_t used = ks_used_memory(ks);
    ks_set_maxmemory(ks, used - used / 4);
    ks_set_eviction(ks, KS_POL_ALLKEYS_RANDOM, 5, 10, 1);
    uint64_t evicted = 0;
    cr_assert_eq(evict_until_done(T0, &evicted), 0);
    cr_assert_leq(ks_used_memory(ks), used - used / 4);
    cr_assert_gt(evicted, 0);
    cr_assert_lt(evicted, 2000, "evicted %llu: far more than a quarter",
                 (unsigned long long)evicted);
    cr_assert_eq(ks_key_count(ks), 2000 - evicted);
}

Test(evict, volatile_policies_never_delete_persistent_keys_and_stop_when_none_left)
{
    static const int policies[] = {KS_POL_VOLATILE_TTL, KS_POL_VOLATILE_RANDOM, KS_POL_VOLATILE_LRU,
                                   KS_POL_VOLATILE_LFU};
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
        ks_set_maxmemory(ks, 0);
        for (unsigned s = 0; s < ks_nshards(ks); s++)
            ks_flush_shard(ks, s);
        ks_set_eviction(ks, policies[p], 5, 10, 1);
        for (int i = 0; i < 500; i++) {
            struct ks_key k = key_of("p", i);
            cr_assert_eq(ks_set(ks, &k, T0, "persistent-value", 16, 0, 0), 1);
        }
        for (int i = 0; i < 50; i++) {
            struct ks_key k = key_of("v", i);
            cr_assert_eq(ks_set(ks, &k, T0, "volatile-value!!", 16, T0 + (100 + i) * SEC, 0), 1);
        }
        ks_set_maxmemory(ks, ks_used_memory(ks) / 2); /* more than the volatile keys hold */
        uint64_t evicted = 0;
        cr_assert_eq(evict_until_done(T0, &evicted), -1, "policy %d", policies[p]);
        cr_assert_eq(evicted, 50, "policy %d evicted %llu", policies[p],
                     (unsigned long long)evicted);
        cr_assert_eq(ks_key_count(ks), 500);
        cr_assert_eq(ks_expires_count(ks), 0);
    }
}

Test(evict, volatile_ttl_deletes_the_nearest_expiries_first)
{
    ks_set_eviction(ks, KS_POL_VOLATILE_TTL, 5, 10, 1);
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = key_of("t", i);
        cr_assert_eq(ks_set(ks, &k, T0, "some value here", 15, T0 + (1000 + i) * SEC, 0), 1);
    }
    uint64_t used = ks_used_memory(ks);
    ks_set_maxmemory(ks, used - used / 5);
    uint64_t evicted = 0;
    cr_assert_eq(evict_until_done(T0, &evicted), 0);
    int low = 0;
    for (int i = 0; i < 1000; i++)
        if (!exists("t", i, T0) && i < 2 * (int)evicted)
            low++;
    cr_assert_geq(low, (int)evicted * 8 / 10, "%d of %llu in the nearest %llu", low,
                  (unsigned long long)evicted, (unsigned long long)(2 * evicted));
}

Test(evict, allkeys_lru_keeps_the_keys_accessed_last)
{
    ks_set_eviction(ks, KS_POL_ALLKEYS_LRU, 5, 10, 1);
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = key_of("l", i);
        cr_assert_eq(ks_set(ks, &k, T0, "some value here", 15, 0, 0), 1);
    }
    /* The last 200 are read an hour later: the others are idle for an hour by then. */
    for (int i = 800; i < 1000; i++)
        cr_assert(exists("l", i, T0 + 3600 * SEC));
    int64_t idle, freq;
    struct ks_key k0 = key_of("l", 0);
    cr_assert_eq(ks_access_info(ks, &k0, T0 + 3600 * SEC, &idle, &freq), 0);
    cr_assert_eq(idle, 3600);
    cr_assert_eq(freq, -1);
    uint64_t used = ks_used_memory(ks);
    ks_set_maxmemory(ks, used - used / 4);
    uint64_t evicted = 0;
    cr_assert_eq(evict_until_done(T0 + 3600 * SEC, &evicted), 0);
    for (int i = 800; i < 1000; i++)
        cr_assert(exists("l", i, T0 + 3600 * SEC), "recent key %d evicted", i);
}

Test(evict, lfu_counts_hits_log_probabilistically)
{
    ks_set_eviction(ks, KS_POL_ALLKEYS_LFU, 5, 10, 0); /* decay 0: the minute does not matter */
    struct ks_key k = key_of("f", 0);
    cr_assert_eq(ks_set(ks, &k, T0, "v", 1, 0, 0), 1);
    int64_t idle, freq;
    cr_assert_eq(ks_access_info(ks, &k, T0, &idle, &freq), 0);
    cr_assert_eq(freq, 5); /* Redis's LFU_INIT_VAL */
    cr_assert_eq(idle, -1);
    cr_assert(exists("f", 0, T0)); /* from 5 the first hit always counts */
    cr_assert_eq(ks_access_info(ks, &k, T0, &idle, &freq), 0);
    cr_assert_eq(freq, 6);
    for (int i = 0; i < 100000; i++)
        exists("f", 0, T0);
    cr_assert_eq(ks_access_info(ks, &k, T0, &idle, &freq), 0);
    /* With factor 10, 100k hits reach about 5 + sqrt(2 * 100000 / 10) = 146 (Redis's table:
     * 100K hits -> 143); a wide band, the draw is random. */
    cr_assert(freq > 100 && freq < 200, "freq %lld", (long long)freq);
}

Test(evict, default_policy_keeps_no_access_data)
{
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = key_of("d", i);
        cr_assert_eq(ks_set(ks, &k, T0, "1", 1, 0, 0), 1);
    }
    uint64_t before = ks_used_memory(ks);
    int64_t idle, freq;
    struct ks_key k = key_of("d", 1);
    cr_assert_eq(ks_access_info(ks, &k, T0, &idle, &freq), 0);
    cr_assert_eq(idle, -1);
    cr_assert_eq(freq, -1);
    /* An LRU policy adds 2 bytes per slot; leaving it gives them back. */
    ks_set_eviction(ks, KS_POL_ALLKEYS_LRU, 5, 10, 1);
    cr_assert_gt(ks_used_memory(ks), before);
    ks_set_eviction(ks, KS_POL_NOEVICTION, 5, 10, 1);
    cr_assert_eq(ks_used_memory(ks), before);
}

/* Memory counted outside the keyspace (ks_count_memory: the connections' buffers) is part of
 * used memory: growing it puts the keyspace over the limit and eviction deletes keys to make
 * room for it; the keys' own share (ks_data_memory) leaves it out. */
Test(evict, counted_memory_outside_the_keys_is_evicted_for)
{
    static _Atomic uint64_t clients[2];
    for (int i = 0; i < 1000; i++) {
        struct ks_key k = key_of("c", i);
        cr_assert_eq(ks_set(ks, &k, T0, "0123456789012345678901234567890123456789", 40, 0, 0),
                     1);
    }
    uint64_t data = ks_data_memory(ks);
    cr_assert_eq(ks_used_memory(ks), data);
    cr_assert_eq(ks_count_memory(ks, &clients[0]), 0);
    cr_assert_eq(ks_count_memory(ks, &clients[1]), 0);
    ks_set_maxmemory(ks, data + 1000);
    ks_set_eviction(ks, KS_POL_ALLKEYS_RANDOM, 5, 10, 1);
    uint64_t evicted = 0;
    cr_assert_eq(evict_until_done(T0, &evicted), 0);
    cr_assert_eq(evicted, 0, "under the limit: nothing to delete");
    atomic_store(&clients[0], data / 4);
    atomic_store(&clients[1], data / 4);
    cr_assert_eq(ks_used_memory(ks), data + 2 * (data / 4));
    cr_assert_eq(ks_data_memory(ks), data);
    cr_assert_eq(evict_until_done(T0, &evicted), 0);
    cr_assert_gt(evicted, 0);
    cr_assert_leq(ks_used_memory(ks), data + 1000);
    /* Eviction stops once used memory is at or under the limit, so the keys keep at most what
     * the counters leave of it (equality happens: every key here is the same size). */
    cr_assert_eq(ks_used_memory(ks), ks_data_memory(ks) + 2 * (data / 4));
    cr_assert_leq(ks_data_memory(ks), data + 1000 - 2 * (data / 4));
    ks_set_eviction(ks, KS_POL_NOEVICTION, 5, 10, 1);
    atomic_store(&clients[0], data);
    cr_assert_eq(ks_evict(ks, 0, T0, &evicted), -1, "over by the counters alone");
    atomic_store(&clients[0], 0);
    atomic_store(&clients[1], 0);
    cr_assert_eq(ks_evict(ks, 0, T0, &evicted), 0);
    for (int i = 0; i < KS_MAX_COUNTED - 2; i++)
        cr_assert_eq(ks_count_memory(ks, &clients[0]), 0);
    cr_assert_eq(ks_count_memory(ks, &clients[0]), -1, "past KS_MAX_COUNTED");
}
