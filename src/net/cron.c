/* cron.c - each I/O thread's 100 ms timer: active expiry over the thread's shards, idle timeouts,
 * output buffer soft limits, CLIENT KILL left pending; on thread 0 memory return, INFO's ops samples and the persistence
 * tick. */
#include "cron.h"

#include <malloc.h>

#include "rlimitd/clock.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/log.h"
#include "rlimitd/util.h"

#define CRON_MS 100
#define EXPIRE_BUCKETS_PER_SHARD 64

/* Memory return (DESIGN.md "Connections", "Memory layout"): glibc keeps freed chunks in its
 * arenas and gives nothing back on its own (jemalloc, Redis's allocator, returns pages a few
 * seconds after they fell out of use), so after a connection storm has closed, or FLUSHALL /
 * mass deletes / expiry emptied the keyspace, the process would stay at its peak RSS (a 64 MB
 * keyspace filled and flushed left 128 MB). malloc_trim hands every arena's free pages back to
 * the kernel, at most every TRIM_INTERVAL_MS (it walks the arenas' free lists), when one of:
 *  - closed connections have freed TRIM_AFTER_BYTES since the last trim;
 *  - the keyspace's used memory has fallen TRIM_AFTER_KEYSPACE_BYTES below its highest since;
 *  - churn at a steady size: RSS has grown TRIM_AFTER_KEYSPACE_BYTES past what the last trim
 *    left and exceeds used memory by TRIM_AFTER_KEYSPACE_BYTES plus an eighth. Under eviction
 *    used memory stays at maxmemory while the values deleted leave free chunks that later
 *    values of other sizes do not fill (an LFU policy keeps the values that grow and deletes
 *    small ones), so without this RSS climbs far above used memory. The growth condition keeps
 *    memory a trim cannot return (the slabs' free slots, pages partly in use) from causing a
 *    trim every interval. */
#define TRIM_AFTER_BYTES (1024 * 1024)
#define TRIM_AFTER_KEYSPACE_BYTES (8 * 1024 * 1024)
#define TRIM_INTERVAL_MS 500

static int rss_over_used(const struct server *srv, uint64_t used)
{
    uint64_t rss = util_rss_bytes();
    return rss >= srv->trim_rss + TRIM_AFTER_KEYSPACE_BYTES &&
           rss > used + used / 8 + TRIM_AFTER_KEYSPACE_BYTES;
}

static void maybe_return_memory(struct server *srv, uint64_t mono_ms)
{
    uint64_t freed = 0;
    for (int i = 0; i < srv->nthreads; i++)
        freed += stats_get(&srv->threads[i].stats.clients_freed);
    uint64_t used = ks_used_memory(srv->ks);
    if (used > srv->trim_used)
        srv->trim_used = used;
    if (mono_ms - srv->trim_ms < TRIM_INTERVAL_MS)
        return;
    if (freed - srv->trim_freed < TRIM_AFTER_BYTES &&
        srv->trim_used - used < TRIM_AFTER_KEYSPACE_BYTES && !rss_over_used(srv, used))
        return;
    malloc_trim(0);
    srv->trim_freed = freed;
    srv->trim_used = used;
    srv->trim_ms = mono_ms;
    srv->trim_rss = util_rss_bytes();
}

uint64_t server_dirty_total(struct server *srv)
{
    uint64_t n = 0;
    for (int i = 0; i < srv->nthreads; i++)
        n += stats_get(&srv->threads[i].stats.dirty);
    return n;
}

static void on_cron(uv_timer_t *timer)
{
    struct io_thread *t = timer->data;
    struct server *srv = t->srv;
    int64_t now = clock_now_ns();

    /* Active expiry over this thread's shards (shard i belongs to thread i mod N). */
    unsigned nshards = ks_nshards(srv->ks);
    for (unsigned s = (unsigned)t->index; s < nshards; s += (unsigned)srv->nthreads) {
        /* A busy shard is skipped this round (lazy expiry still applies to its keys): its
         * holder may be a script running for seconds, and this thread's clients must not
         * wait for it. */
        if (ks_trylock(srv->ks, s) != 0)
            continue;
        size_t freed = ks_expire_cycle(srv->ks, s, now, EXPIRE_BUCKETS_PER_SHARD);
        ks_unlock(srv->ks, s);
        if (freed > 0)
            stats_add(&t->stats.expired_keys, freed);
    }

    /* Idle clients (COMMANDS.md, Wire protocol: `timeout`). */
    int64_t timeout = __atomic_load_n(&srv->conf->timeout, __ATOMIC_RELAXED);
    uint64_t mono_ms = uv_now(&t->loop);
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        if (atomic_load_explicit(&c->kill, memory_order_relaxed) == CLIENT_KILL_NOW) {
            client_close(c);
            continue;
        }
        if (timeout > 0 && c->state == CLIENT_ACTIVE && !(c->session.flags & SESSION_IN_MULTI)) {
            int64_t last = c->session.last_mono_ns / 1000000;
            if ((int64_t)mono_ms - last > timeout * 1000) {
                log_verbose("Closing idle client id=%llu", (unsigned long long)c->session.id);
                client_close(c);
                continue;
            }
        }
        /* A client that stopped reading produces no more replies (it is paused), so only
         * here can its soft limit's time run out. */
        client_cron_output(c);
    }
    if (t->index == 0) {
        maybe_return_memory(srv, mono_ms);
        info_sample_ops(&srv->env);
        if (srv->persist != NULL)
            persist_tick(srv->persist, server_dirty_total(srv));
    }
}

void cron_start(struct io_thread *t)
{
    uv_timer_start(&t->cron, on_cron, CRON_MS, CRON_MS);
}
