/* cmd_memory.c - MEMORY USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP (COMMANDS.md,
 * "MEMORY"): Redis 7.0's replies and errors, with rlimitd's own byte counts in them. Every figure
 * comes from what the keyspace's byte counter, the Lua engines, the connections and the C
 * library report; the fields of Redis features rlimitd does not have (replication, AOF,
 * functions, cluster) are 0 because those hold no memory here. */
#include "cmd_internal.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlimitd/script.h"
#include "rlimitd/stats.h"
#include "rlimitd/util.h"

/* The highest total.allocated seen: by the 100 ms sampler (memory_sample_peak) and by every
 * MEMORY STATS and DOCTOR. */
static _Atomic uint64_t peak_allocated;

static uint64_t note_peak(uint64_t used)
{
    uint64_t p = atomic_load_explicit(&peak_allocated, memory_order_relaxed);
    while (used > p &&
           !atomic_compare_exchange_weak_explicit(&peak_allocated, &p, used,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
    return used > p ? used : p;
}

void memory_sample_peak(struct cmd_env *env)
{
    note_peak(ks_used_memory(env->ks));
}

/* What MEMORY STATS and DOCTOR report, gathered once. */
struct mem_figures {
    uint64_t peak, total, clients, lua_caches, tables, overhead, keys, dataset, rss;
    uint64_t alloc_allocated, alloc_active;
};

static void gather(struct cmd_ctx *x, struct mem_figures *m)
{
    struct cmd_env *env = x->env;
    memset(m, 0, sizeof(*m));
    for (unsigned s = 0; s < ks_nshards(env->ks); s++) {
        ctx_lock_shard(x, s);
        m->tables += ks_shard_table_memory(env->ks, s);
        ctx_unlock_shard(x, s);
    }
    m->total = ks_used_memory(env->ks);
    m->peak = note_peak(m->total);
    for (int i = 0; i < env->nstats; i++)
        m->clients += stats_get(&env->stats[i]->clients_mem);
    m->lua_caches = script_cache_bytes();
    /* Redis's sum: start-up (0: rlimitd's byte counter starts empty), replication, clients,
     * AOF, the script caches and the hash tables. */
    m->overhead = m->clients + m->lua_caches + m->tables;
    m->keys = ks_key_count(env->ks);
    /* Entries and values: used memory less the connections, the tables and the Lua engines
     * (counted in it too). */
    uint64_t engines = script_engine_memory(), data = ks_data_memory(env->ks);
    m->dataset = data > m->tables + engines ? data - m->tables - engines : 0;
    m->rss = util_rss_bytes();
    struct mallinfo2 mi = mallinfo2();
    m->alloc_allocated = mi.uordblks + mi.hblkhd;
    m->alloc_active = mi.arena + mi.hblkhd;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b == 0 ? 0 : (double)(float)((double)a / (double)b);
}

static void field_int(struct rbuf *out, const char *name, int64_t v)
{
    reply_bulk_cstr(out, name);
    reply_int(out, v);
}

static void field_double(struct rbuf *out, const char *name, double v)
{
    reply_bulk_cstr(out, name);
    reply_double(out, v);
}

static void memory_stats(struct cmd_ctx *x)
{
    struct mem_figures m;
    gather(x, &m);
    struct rbuf *out = x->out;
    int dbs = m.keys > 0; /* Redis lists only the databases that hold keys */
    reply_map(out, 27 + dbs);
    field_int(out, "peak.allocated", (int64_t)m.peak);
    field_int(out, "total.allocated", (int64_t)m.total);
    field_int(out, "startup.allocated", 0);
    field_int(out, "replication.backlog", 0);
    field_int(out, "clients.slaves", 0);
    field_int(out, "clients.normal", (int64_t)m.clients);
    field_int(out, "cluster.links", 0);
    field_int(out, "aof.buffer", 0);
    field_int(out, "lua.caches", (int64_t)m.lua_caches);
    field_int(out, "functions.caches", 0);
    if (dbs) {
        reply_bulk_cstr(out, "db.0");
        reply_map(out, 3);
        /* Expiry times live in the entries: there is no second table for them. */
        field_int(out, "overhead.hashtable.main", (int64_t)m.tables);
        field_int(out, "overhead.hashtable.expires", 0);
        field_int(out, "overhead.hashtable.slot-to-keys", 0);
    }
    field_int(out, "overhead.total", (int64_t)m.overhead);
    field_int(out, "keys.count", (int64_t)m.keys);
    field_int(out, "keys.bytes-per-key", m.keys ? (int64_t)(m.total / m.keys) : 0);
    field_int(out, "dataset.bytes", (int64_t)m.dataset);
    field_double(out, "dataset.percentage", 100 * ratio(m.dataset, m.total));
    field_double(out, "peak.percentage", 100 * ratio(m.total, m.peak));
    /* The C library's view (mallinfo2): bytes in use, bytes its arenas and mappings hold, and
     * the process's resident set. */
    field_int(out, "allocator.allocated", (int64_t)m.alloc_allocated);
    field_int(out, "allocator.active", (int64_t)m.alloc_active);
    field_int(out, "allocator.resident", (int64_t)m.rss);
    field_double(out, "allocator-fragmentation.ratio", ratio(m.alloc_active, m.alloc_allocated));
    field_int(out, "allocator-fragmentation.bytes",
              (int64_t)m.alloc_active - (int64_t)m.alloc_allocated);
    field_double(out, "allocator-rss.ratio", ratio(m.rss, m.alloc_active));
    field_int(out, "allocator-rss.bytes", (int64_t)m.rss - (int64_t)m.alloc_active);
    /* allocator.resident is the process's RSS, so nothing lies between the two. */
    field_double(out, "rss-overhead.ratio", m.rss ? 1.0 : 0);
    field_int(out, "rss-overhead.bytes", 0);
    field_double(out, "fragmentation", ratio(m.rss, m.total));
    field_int(out, "fragmentation.bytes", (int64_t)m.rss - (int64_t)m.total);
}

/* MEMORY DOCTOR: rlimitd's own findings, as a verbatim text like Redis's. */
static void memory_doctor(struct cmd_ctx *x)
{
    struct mem_figures m;
    gather(x, &m);
    struct rbuf t;
    rbuf_init(&t);
    char line[256];
    int issues = 0;
    if (m.total < 5u * 1024 * 1024) {
        snprintf(line, sizeof(line),
                 "rlimitd holds %llu keys in %llu bytes: too little for a memory diagnosis to "
                 "mean anything.",
                 (unsigned long long)m.keys, (unsigned long long)m.total);
        rbuf_append(&t, line, strlen(line));
    } else {
        if (m.peak > m.total + m.total / 2) {
            snprintf(line, sizeof(line),
                     " * Peak memory: the peak (%llu bytes) is over 150%% of what is used now "
                     "(%llu bytes); the process's RSS may stay near the peak.\n",
                     (unsigned long long)m.peak, (unsigned long long)m.total);
            rbuf_append(&t, line, strlen(line));
            issues++;
        }
        if (m.rss > 10u * 1024 * 1024 && ratio(m.rss, m.total) > 1.4) {
            snprintf(line, sizeof(line),
                     " * Fragmentation: the RSS is %.2f times the memory in use; MEMORY PURGE "
                     "returns free pages to the kernel.\n",
                     ratio(m.rss, m.total));
            rbuf_append(&t, line, strlen(line));
            issues++;
        }
        if (m.clients > m.total / 2 && m.clients > 1024u * 1024) {
            snprintf(line, sizeof(line),
                     " * Clients: connections hold %llu bytes of buffers, over half the "
                     "keyspace's memory; see CLIENT LIST tot-mem.\n",
                     (unsigned long long)m.clients);
            rbuf_append(&t, line, strlen(line));
            issues++;
        }
        if (issues == 0) {
            const char *ok = "No memory problem found.";
            rbuf_append(&t, ok, strlen(ok));
        } else {
            static const char head[] = "Memory findings:\n\n";
            struct rbuf all;
            rbuf_init(&all);
            rbuf_append(&all, head, sizeof(head) - 1);
            rbuf_append(&all, t.p, t.len);
            rbuf_free(&t);
            t = all;
        }
    }
    reply_verbatim(x->out, "txt", t.p, t.len);
    rbuf_free(&t);
}

/* MEMORY MALLOC-STATS: the C library's own report (malloc_info, XML), as a verbatim text. */
static void memory_malloc_stats(struct cmd_ctx *x)
{
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    if (f == NULL || malloc_info(0, f) != 0) {
        if (f != NULL)
            fclose(f);
        free(p);
        reply_bulk_cstr(x->out, "Stats not supported for the current allocator");
        return;
    }
    fclose(f);
    reply_verbatim(x->out, "txt", p, n);
    free(p);
}

/* MEMORY USAGE key [SAMPLES count]: Redis checks the options before the key. SAMPLES is
 * accepted and has no effect: every figure here is exact (hv_bytes, lv_bytes and zs_bytes keep
 * their totals as values change), nothing is sampled. */
static void memory_usage(struct cmd_ctx *x)
{
    for (int i = 3; i < x->argc; i += 2) {
        if (!arg_is(x, i, "SAMPLES") || i + 1 >= x->argc) {
            reply_syntax_error(x->out);
            return;
        }
        int64_t samples;
        if (arg_i64(x, i + 1, &samples) != 0)
            return;
        if (samples < 0) {
            reply_syntax_error(x->out);
            return;
        }
    }
    struct ks_key k;
    ks_key_init(x->env->ks, &k, x->argv[2], x->lens[2]);
    unsigned shard = ks_shard(x->env->ks, &k);
    uint64_t bytes = 0;
    ctx_lock_shard(x, shard);
    int rc = ks_key_memory(x->env->ks, &k, x->now, &bytes);
    ctx_unlock_shard(x, shard);
    if (rc != KS_OK)
        reply_nil(x->out);
    else
        reply_int(x->out, (int64_t)bytes);
}

static const char *const memory_help[] = {
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR", "    Return memory problems reports.",
    "MALLOC-STATS", "    Return internal statistics report from the memory allocator.",
    "PURGE", "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS", "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP", "    Prints this help.",
    NULL,
};

/* Subcommands with a fixed arity (Redis 7.0's table: each takes no argument). */
static const struct {
    const char *name;
    void (*fn)(struct cmd_ctx *x);
} fixed[] = {
    {"stats", memory_stats},
    {"doctor", memory_doctor},
    {"malloc-stats", memory_malloc_stats},
};

static void cmd_memory(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "USAGE")) {
        if (x->argc < 3) {
            reply_subcmd_arity(x, "memory", "usage");
        } else {
            ks_notouch(1); /* MEMORY USAGE only looks at the key, as Redis's */
            memory_usage(x);
            ks_notouch(0);
        }
        return;
    }
    if (arg_is(x, 1, "PURGE") || arg_is(x, 1, "HELP")) {
        int purge = arg_is(x, 1, "PURGE");
        if (x->argc != 2) {
            reply_subcmd_arity(x, "memory", purge ? "purge" : "help");
        } else if (purge) {
            malloc_trim(0); /* gives free heap pages back to the kernel; never fails */
            reply_ok(x->out);
        } else {
            reply_help_lines(x->out, memory_help);
        }
        return;
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (!arg_is(x, 1, fixed[i].name))
            continue;
        if (x->argc != 2)
            reply_subcmd_arity(x, "memory", fixed[i].name);
        else
            fixed[i].fn(x);
        return;
    }
    reply_subcmd_unknown(x, "MEMORY");
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_memory_table[] = {
    /* CMD_ALLSHARDS: STATS and DOCTOR visit every shard, USAGE takes its key's shard itself. */
    {"memory", -2, CMD_READONLY | CMD_ALLSHARDS | CMD_NOSCRIPT, 0, 0, 0, "slow", cmd_memory,
     {.summary = "A container for memory diagnostics commands", .since = "4.0.0",
      .group = "server", .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
};
const int cmd_memory_count = (int)(sizeof(cmd_memory_table) / sizeof(cmd_memory_table[0]));
