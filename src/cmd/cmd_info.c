/* cmd_info.c - INFO [section ...] (COMMANDS.md).
 *
 * Monitoring tools (redis_exporter, redis-cli --stat, client libraries checking the version)
 * parse INFO by Redis's field names, so rlimitd uses those names and Redis's layout: one bulk
 * string of "# Title\r\n" followed by "field:value\r\n" lines per section, with a blank line
 * between sections. Fields that mean nothing here (replication offsets, AOF state) are given
 * the values a Redis without replicas and persistence shows, because tools expect them to be
 * present; fields rlimitd cannot measure honestly are left out rather than invented.
 *
 * INFO never fails: an unknown section adds nothing, so "INFO nonsense" is an empty bulk, as
 * in Redis. Sections always come in Redis's order, whatever order they were asked in. */
#include "cmd_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "rlimitd/clock.h"
#include "rlimitd/pubsub.h"
#include "rlimitd/script.h"
#include "rlimitd/util.h"
#include "rlimitd/waiters.h"
#include "rlimitd_version.h"


/* ---- instantaneous_ops_per_sec ----
 *
 * A ring of (monotonic time, total commands) samples, taken every 100 ms by the server's
 * timer (info_sample_ops) and whenever INFO runs. The rate is measured from the oldest sample
 * of the last two seconds to now, so it follows the load within about 1.6 s, like Redis's
 * 16 x 100 ms average. Without the timer it is the rate since the previous INFO. One static
 * ring serves the process's one cmd_env; a different env (tests) starts it over. */

#define OPS_SAMPLES 16
#define OPS_MIN_GAP_NS 90000000LL /* INFO in a burst must not push the timer's samples out */
#define OPS_WINDOW_NS 2000000000LL

struct ops_sample {
    int64_t t;
    uint64_t cmds;
};

static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ops_sample ops_ring[OPS_SAMPLES];
static int ops_len, ops_next;
static const struct cmd_env *ops_env;

/* Offsets of a counter in struct stats, for stats_sum. */
#define SUM(env, field) stats_sum((env), offsetof(struct stats, field))
#define TOTAL(env, field) stats_total((env), offsetof(struct stats, field))
#define CMD_OFF(i, field)                                                                          \
    (offsetof(struct stats, cmd) + (size_t)(i) * sizeof(struct cmd_stats) +                        \
     offsetof(struct cmd_stats, field))
#define ERR_OFF(e) (offsetof(struct stats, errors) + (size_t)(e) * sizeof(_Atomic uint64_t))

/* Caller holds ops_lock. */
static void ops_push(const struct cmd_env *env, int64_t t, uint64_t cmds)
{
    if (ops_env != env) {
        ops_env = env;
        ops_len = 0;
        ops_next = 0;
    }
    if (ops_len > 0) {
        const struct ops_sample *last = &ops_ring[(ops_next + OPS_SAMPLES - 1) % OPS_SAMPLES];
        if (t - last->t < OPS_MIN_GAP_NS)
            return;
    }
    ops_ring[ops_next] = (struct ops_sample){t, cmds};
    ops_next = (ops_next + 1) % OPS_SAMPLES;
    if (ops_len < OPS_SAMPLES)
        ops_len++;
}

void info_sample_ops(struct cmd_env *env)
{
    int64_t t = clock_mono_ns();
    uint64_t cmds = SUM(env, commands);
    pthread_mutex_lock(&ops_lock);
    ops_push(env, t, cmds);
    pthread_mutex_unlock(&ops_lock);
    memory_sample_peak(env);
}

static uint64_t ops_per_sec(const struct cmd_env *env)
{
    int64_t now = clock_mono_ns();
    uint64_t cmds = SUM(env, commands);
    uint64_t rate = 0;
    pthread_mutex_lock(&ops_lock);
    if (ops_env == env && ops_len > 0) {
        /* Oldest sample inside the window, else the newest one. */
        int newest = (ops_next + OPS_SAMPLES - 1) % OPS_SAMPLES;
        const struct ops_sample *base = &ops_ring[newest];
        for (int k = ops_len; k >= 1; k--) {
            const struct ops_sample *s = &ops_ring[(ops_next + OPS_SAMPLES - k) % OPS_SAMPLES];
            if (now - s->t <= OPS_WINDOW_NS) {
                base = s;
                break;
            }
        }
        int64_t dt = now - base->t;
        if (dt > 0 && cmds >= base->cmds)
            rate = (uint64_t)((double)(cmds - base->cmds) * 1e9 / (double)dt + 0.5);
    }
    ops_push(env, now, cmds);
    pthread_mutex_unlock(&ops_lock);
    return rate;
}

/* ---- formatting ---- */

static void add(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends one formatted line (fmt without the CRLF). */
static void add(struct rbuf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line))
        n = (int)sizeof(line) - 1;
    rbuf_append(b, line, (size_t)n);
    rbuf_append(b, "\r\n", 2);
}

/* Redis's human-readable sizes: 1023B, 1.50K, 12.00M ... */
static void human(char *buf, size_t cap, uint64_t n)
{
    static const char units[] = "KMGTP";
    if (n < 1024) {
        snprintf(buf, cap, "%" PRIu64 "B", n);
        return;
    }
    double d = (double)n / 1024;
    int u = 0;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.2f%c", d, units[u]);
}

/* ---- sections ---- */

struct info {
    struct cmd_ctx *x;
    struct cmd_env *env;
    struct rbuf *b;
};

static void sec_server(struct info *in)
{
    struct cmd_env *env = in->env;
    struct utsname u;
    if (uname(&u) != 0)
        memset(&u, 0, sizeof(u));
    pthread_mutex_lock(&env->conf_lock);
    int64_t supervised = env->conf->supervised;
    pthread_mutex_unlock(&env->conf_lock);
    static const char *const sup[] = {"no", "systemd", "auto"};
    int64_t up = (clock_mono_ns() - env->start_mono_ns) / 1000000000;
    if (up < 0)
        up = 0;
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';

    add(in->b, "redis_version:%s", REDIS_COMPAT_VERSION);
    add(in->b, "rlimitd_version:%s", RLIMITD_VERSION);
    add(in->b, "redis_git_sha1:00000000");
    add(in->b, "redis_git_dirty:0");
    add(in->b, "redis_mode:standalone");
    add(in->b, "os:%s %s %s", u.sysname, u.release, u.machine);
    add(in->b, "arch_bits:%d", (int)(sizeof(void *) * 8));
    add(in->b, "multiplexing_api:epoll");
    add(in->b, "process_id:%ld", (long)getpid());
    add(in->b, "process_supervised:%s",
        supervised >= 0 && supervised <= 2 ? sup[supervised] : "no");
    add(in->b, "run_id:%s", env->run_id);
    add(in->b, "tcp_port:%" PRId64, env->tcp_port);
    add(in->b, "io_sched_policy:%s", env->io_sched);
    add(in->b, "server_time_usec:%" PRId64, in->x->now / 1000);
    add(in->b, "uptime_in_seconds:%" PRId64, up);
    add(in->b, "uptime_in_days:%" PRId64, up / 86400);
    add(in->b, "hz:10");
    add(in->b, "configured_hz:10");
    add(in->b, "executable:%s", exe);
}

static void sec_clients(struct info *in)
{
    struct cmd_env *env = in->env;
    uint64_t clients = 0;
    if (env->hooks.connected_clients != NULL)
        clients = env->hooks.connected_clients(env->hooks.ud);
    pthread_mutex_lock(&env->conf_lock);
    int64_t maxclients = env->conf->maxclients;
    pthread_mutex_unlock(&env->conf_lock);
    add(in->b, "connected_clients:%" PRIu64, clients);
    add(in->b, "cluster_connections:0");
    add(in->b, "maxclients:%" PRId64, maxclients);
    add(in->b, "blocked_clients:%" PRId64, wait_count());
    add(in->b, "tracking_clients:0");
}

/* conf_get's visitor for one directive: its value into ud (32 bytes, room for any policy). */
static void policy_visit(void *ud, const char *name, const char *value)
{
    (void)name;
    snprintf(ud, 32, "%s", value);
}

static void sec_memory(struct info *in)
{
    struct cmd_env *env = in->env;
    uint64_t used = ks_used_memory(env->ks);
    uint64_t rss = util_rss_bytes();
    char policy[32] = "";
    pthread_mutex_lock(&env->conf_lock);
    int64_t maxmemory = env->conf->maxmemory;
    conf_get(env->conf, "maxmemory-policy", policy_visit, policy);
    pthread_mutex_unlock(&env->conf_lock);
    char h[32];
    add(in->b, "used_memory:%" PRIu64, used);
    human(h, sizeof(h), used);
    add(in->b, "used_memory_human:%s", h);
    add(in->b, "used_memory_rss:%" PRIu64, rss);
    human(h, sizeof(h), rss);
    add(in->b, "used_memory_rss_human:%s", h);
    /* What the connections hold (CLIENT LIST tot-mem summed over the I/O threads). */
    uint64_t clients_mem = 0;
    for (int i = 0; i < env->nstats; i++)
        clients_mem += stats_get(&env->stats[i]->clients_mem);
    add(in->b, "mem_clients_normal:%" PRIu64, clients_mem);
    uint64_t lua = script_engine_memory();
    add(in->b, "used_memory_lua:%" PRIu64, lua);
    human(h, sizeof(h), lua);
    add(in->b, "used_memory_lua_human:%s", h);
    add(in->b, "used_memory_scripts_eval:%" PRIu64, script_cache_bytes());
    add(in->b, "number_of_cached_scripts:%" PRIu64, script_cache_count());
    add(in->b, "maxmemory:%" PRId64, maxmemory);
    human(h, sizeof(h), maxmemory > 0 ? (uint64_t)maxmemory : 0);
    add(in->b, "maxmemory_human:%s", h);
    add(in->b, "maxmemory_policy:%s", policy);
    add(in->b, "mem_allocator:libc");
}

static void sec_persistence(struct info *in)
{
    struct cmd_env *env = in->env;
    /* The snapshot is loaded before the port opens (SNAPSHOT.md): a client never sees loading. */
    add(in->b, "loading:0");
    add(in->b, "async_loading:0");
    if (env->hooks.info_persistence != NULL) {
        env->hooks.info_persistence(env->hooks.ud, in->b);
        return;
    }
    add(in->b, "rdb_changes_since_last_save:0");
    add(in->b, "rdb_bgsave_in_progress:0");
    add(in->b, "rdb_last_save_time:%" PRId64, env->start_ns / 1000000000);
    add(in->b, "rdb_last_bgsave_status:ok");
    add(in->b, "rdb_last_bgsave_time_sec:-1");
    add(in->b, "rdb_current_bgsave_time_sec:-1");
    add(in->b, "aof_enabled:0");
    add(in->b, "aof_rewrite_in_progress:0");
    add(in->b, "aof_rewrite_scheduled:0");
    add(in->b, "aof_last_rewrite_time_sec:-1");
    add(in->b, "aof_current_rewrite_time_sec:-1");
    add(in->b, "aof_last_bgrewrite_status:ok");
    add(in->b, "aof_last_write_status:ok");
}

static void sec_stats(struct info *in)
{
    struct cmd_env *env = in->env;
    uint64_t errors = 0;
    for (int e = 0; e < ERRSTAT_COUNT; e++)
        errors += stats_total(env, ERR_OFF(e));
    add(in->b, "total_connections_received:%" PRIu64, TOTAL(env, connections));
    add(in->b, "total_commands_processed:%" PRIu64, TOTAL(env, commands));
    add(in->b, "instantaneous_ops_per_sec:%" PRIu64, ops_per_sec(env));
    add(in->b, "total_net_input_bytes:%" PRIu64, TOTAL(env, net_input_bytes));
    add(in->b, "total_net_output_bytes:%" PRIu64, TOTAL(env, net_output_bytes));
    add(in->b, "rejected_connections:%" PRIu64, TOTAL(env, rejected_conns));
    add(in->b, "expired_keys:%" PRIu64, TOTAL(env, expired_keys));
    add(in->b, "evicted_keys:%" PRIu64, TOTAL(env, evicted_keys));
    add(in->b, "total_error_replies:%" PRIu64, errors);
    add(in->b, "busy_poll_spins:%" PRIu64, TOTAL(env, busy_poll_spins));
    add(in->b, "busy_poll_backoffs:%" PRIu64, TOTAL(env, busy_poll_backoffs));
    /* Distinct channels and patterns with a subscriber on any thread, as Redis counts them. */
    add(in->b, "pubsub_channels:%" PRId64, pubsub_names(PUBSUB_CHANNEL, NULL, 0, NULL, NULL));
    add(in->b, "pubsub_patterns:%" PRId64, pubsub_names(PUBSUB_PATTERN, NULL, 0, NULL, NULL));
    add(in->b, "pubsubshard_channels:%" PRId64, pubsub_names(PUBSUB_SHARD, NULL, 0, NULL, NULL));
}

static void sec_replication(struct info *in)
{
    add(in->b, "role:master");
    add(in->b, "connected_slaves:0");
    add(in->b, "master_failover_state:no-failover");
    add(in->b, "master_repl_offset:0");
    add(in->b, "second_repl_offset:-1");
    add(in->b, "repl_backlog_active:0");
}

static void sec_cpu(struct info *in)
{
    struct rusage self, children;
    if (getrusage(RUSAGE_SELF, &self) != 0)
        memset(&self, 0, sizeof(self));
    if (getrusage(RUSAGE_CHILDREN, &children) != 0)
        memset(&children, 0, sizeof(children));
    add(in->b, "used_cpu_sys:%ld.%06ld", (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec);
    add(in->b, "used_cpu_user:%ld.%06ld", (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec);
    add(in->b, "used_cpu_sys_children:%ld.%06ld", (long)children.ru_stime.tv_sec,
        (long)children.ru_stime.tv_usec);
    add(in->b, "used_cpu_user_children:%ld.%06ld", (long)children.ru_utime.tv_sec,
        (long)children.ru_utime.tv_usec);
}

static void sec_modules(struct info *in)
{
    (void)in; /* no modules: Redis still shows the header */
}

static void sec_commandstats(struct info *in)
{
    struct cmd_env *env = in->env;
    int n = cmd_count();
    for (int i = 0; i < n && i < STATS_MAX_CMDS; i++) {
        uint64_t calls = stats_total(env, CMD_OFF(i, calls));
        uint64_t usec = stats_total(env, CMD_OFF(i, usec));
        uint64_t rejected = stats_total(env, CMD_OFF(i, rejected_calls));
        uint64_t failed = stats_total(env, CMD_OFF(i, failed_calls));
        if (calls == 0 && rejected == 0 && failed == 0)
            continue;
        /* Module-style names keep their dot: cmdstat_cl.throttle, as Redis shows redis-cell. */
        add(in->b,
            "cmdstat_%s:calls=%" PRIu64 ",usec=%" PRIu64 ",usec_per_call=%.2f,"
            "rejected_calls=%" PRIu64 ",failed_calls=%" PRIu64,
            cmd_name(i), calls, usec, calls ? (double)usec / (double)calls : 0.0, rejected, failed);
    }
}

static void sec_errorstats(struct info *in)
{
    errorstats_info(in->env, in->b);
}

static void sec_cluster(struct info *in)
{
    add(in->b, "cluster_enabled:0");
}

static void sec_keyspace(struct info *in)
{
    uint64_t keys = ks_key_count(in->env->ks);
    /* Redis prints a db line only for a non-empty database. rlimitd keeps no TTL average. */
    if (keys > 0)
        add(in->b, "db0:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0", keys,
            ks_expires_count(in->env->ks));
}

/* rlimitd's own section: the limiters' decisions (cmd_limiter.c), since the start or the last
 * CONFIG RESETSTAT; limiter_keys is the keys holding CL.THROTTLE, ISALLOWED or lease state now. */
static void sec_limiter(struct info *in)
{
    struct cmd_env *env = in->env;
    static const char *const names[LIM_COUNT] = {"throttle", "gcra", "isallowed",
                                                 "throttle_all", "lease"};
    for (int k = 0; k < LIM_COUNT; k++) {
        /* A lease is acquired, or the set is full (the reply is nil). */
        const char *limited = k == LIM_ISALLOWED ? "denied" : k == LIM_LEASE ? "full" : "limited";
        add(in->b, "%s_%s:%" PRIu64, names[k], k == LIM_LEASE ? "acquired" : "allowed",
            stats_total(env, STATS_LIM_OFF(lim_allowed, k)));
        add(in->b, "%s_%s:%" PRIu64, names[k], limited,
            stats_total(env, STATS_LIM_OFF(lim_limited, k)));
    }
    add(in->b, "near_limit:%" PRIu64, TOTAL(env, near_limit));
    add(in->b, "limiter_keys:%" PRIu64, ks_limiter_key_count(env->ks));
}

#define IN_DEFAULT 1
#define IN_ALL 2

static const struct {
    const char *name;
    const char *title;
    void (*fn)(struct info *in);
    int in;
} sections[] = {
    {"server", "Server", sec_server, IN_DEFAULT | IN_ALL},
    {"clients", "Clients", sec_clients, IN_DEFAULT | IN_ALL},
    {"memory", "Memory", sec_memory, IN_DEFAULT | IN_ALL},
    {"persistence", "Persistence", sec_persistence, IN_DEFAULT | IN_ALL},
    {"stats", "Stats", sec_stats, IN_DEFAULT | IN_ALL},
    {"replication", "Replication", sec_replication, IN_DEFAULT | IN_ALL},
    {"cpu", "CPU", sec_cpu, IN_DEFAULT | IN_ALL},
    {"modules", "Modules", sec_modules, IN_DEFAULT | IN_ALL},
    {"commandstats", "Commandstats", sec_commandstats, IN_ALL},
    {"errorstats", "Errorstats", sec_errorstats, IN_DEFAULT | IN_ALL},
    {"cluster", "Cluster", sec_cluster, IN_DEFAULT | IN_ALL},
    {"keyspace", "Keyspace", sec_keyspace, IN_DEFAULT | IN_ALL},
    {"limiter", "Limiter", sec_limiter, IN_DEFAULT | IN_ALL},
};

#define NSECTIONS ((int)(sizeof(sections) / sizeof(sections[0])))

/* Which sections an argument names, as a bit per row of sections[]. */
static unsigned pick(const char *arg, size_t len)
{
    unsigned mask = 0;
    if (util_eq_nocase(arg, len, "all") || util_eq_nocase(arg, len, "everything")) {
        for (int i = 0; i < NSECTIONS; i++)
            mask |= (sections[i].in & IN_ALL) ? 1u << i : 0;
    } else if (util_eq_nocase(arg, len, "default")) {
        for (int i = 0; i < NSECTIONS; i++)
            mask |= (sections[i].in & IN_DEFAULT) ? 1u << i : 0;
    } else if (util_eq_nocase(arg, len, "module_list")) {
        mask = pick("modules", 7);
    } else {
        for (int i = 0; i < NSECTIONS; i++)
            if (util_eq_nocase(arg, len, sections[i].name))
                mask |= 1u << i;
    }
    return mask;
}

static void cmd_info(struct cmd_ctx *x)
{
    unsigned mask = 0;
    if (x->argc == 1)
        mask = pick("default", 7);
    for (int i = 1; i < x->argc; i++)
        mask |= pick(x->argv[i], x->lens[i]);

    struct rbuf b;
    rbuf_init(&b);
    struct info in = {x, x->env, &b};
    int emitted = 0;
    for (int i = 0; i < NSECTIONS; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (emitted++)
            rbuf_append(&b, "\r\n", 2);
        add(&b, "# %s", sections[i].title);
        sections[i].fn(&in);
    }
    reply_verbatim(x->out, "txt", b.p != NULL ? b.p : "", b.len);
    rbuf_free(&b);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_info_table[] = {
    {"info", -1, CMD_LOADING | CMD_STALE, 0, 0, 0, "slow dangerous", cmd_info,
     {.summary = "Returns information and statistics about the server", .since = "1.0.0",
      .group = "server", .complexity = "O(1)", .args = "?*section:string",
      .tips = "nondeterministic_output request_policy:all_shards response_policy:special"}},
};
const int cmd_info_count = (int)(sizeof(cmd_info_table) / sizeof(cmd_info_table[0]));
