/* conf.c - the directive table and everything driven by it (CONFIG.md).
 *
 * Each directive is one row of `table` below: its name, how its value is spelled, where it
 * lives in struct conf, its default (written as it would be in the file), its range, whether
 * CONFIG SET may change it, and a line of help. conf_init applies the defaults through the same
 * parser as the file, so a default that does not parse or is out of range aborts at the first
 * start instead of shipping. The file loader, "--name value" overrides, CONFIG GET and CONFIG
 * SET all walk this one table, so they cannot disagree about a name, a unit or a limit.
 *
 * Values are checked completely before *c is touched: a failed conf_set leaves *c as it was,
 * which CONFIG SET relies on. */
#include "rlimitd/conf.h"
#include "rlimitd/alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>

#include "conf_kevents.h"
#include "conf_obuf.h"
#include "rlimitd/log.h"
#include "rlimitd/util.h"

enum dtype {
    T_INT,      /* base-10 integer */
    T_MEMORY,   /* bytes, or with a unit: 1k 1kb 1m 1mb 1g 1gb */
    T_BOOL,     /* yes | no */
    T_STRING,   /* any bytes but NUL */
    T_ENUM,     /* one of names[], stored as its index */
    T_OCTAL,    /* a file mode in octal digits, e.g. 700 */
    T_BIND,     /* 1..CONF_MAX_BIND numeric addresses, each optionally prefixed by '-' */
    T_DURATION, /* a number of `unit_ms` units, or with a unit: 100ms 30s 5m 1h */
    T_OBUF,     /* client-output-buffer-limit's class groups (conf_obuf.c) */
    T_KEVENTS,  /* notify-keyspace-events' class letters (conf_kevents.c) */
};

#define F_LIVE 0x1u     /* CONFIG SET may change it */
#define F_CONST 0x2u    /* pseudo-directive without storage: only its default is accepted */
#define F_NONEMPTY 0x4u /* a string that must not be empty */

#define KB INT64_C(1024)
#define MB (KB * 1024)
#define GB (MB * 1024)

struct directive {
    const char *name;
    enum dtype type;
    unsigned flags;
    size_t off;               /* of the int64_t or char * in struct conf (T_BIND: of bind[]) */
    const char *def;          /* default, spelled as in the file */
    int64_t min, max;         /* numeric types; T_BIND: address count */
    const char *const *names; /* T_ENUM */
    int64_t unit_ms;          /* T_DURATION: milliseconds per stored unit */
    const char *(*check)(const char *v); /* T_STRING: extra validation, returns why or NULL */
    void (*apply)(const struct conf *c); /* after a live change, for state kept outside *c */
    const char *help;
};

static const char *const loglevel_names[] = {"debug", "verbose", "notice", "warning", NULL};
static const char *const supervised_names[] = {"no", "systemd", "auto", NULL};
static const char *const io_sched_names[] = {"auto", "normal", "batch", NULL};
/* In enum ks_policy's order, which is the order Redis lists them in its error. */
static const char *const policy_names[] = {"volatile-lru", "volatile-lfu", "volatile-random",
                                           "volatile-ttl", "allkeys-lru", "allkeys-lfu",
                                           "allkeys-random", "noeviction", NULL};

/* The enum tables are indexed by these values. */
_Static_assert(LOG_DEBUG == 0 && LOG_VERBOSE == 1 && LOG_NOTICE == 2 && LOG_WARNING == 3,
               "loglevel_names follows enum log_level");
_Static_assert(SUPERVISED_NO == 0 && SUPERVISED_SYSTEMD == 1 && SUPERVISED_AUTO == 2,
               "supervised_names follows enum conf_supervised");
_Static_assert(IO_SCHED_AUTO == 0 && IO_SCHED_NORMAL == 1 && IO_SCHED_BATCH == 2,
               "io_sched_names follows enum conf_io_sched");

static const char *check_unixsocket(const char *v)
{
    /* bind(2) would fail at start with a less helpful message. */
    if (strlen(v) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return "longer than a unix socket path may be";
    return NULL;
}

static const char *check_dbfilename(const char *v)
{
    /* As Redis: the snapshot lives in `dir`, so a path here would be ambiguous. */
    if (strchr(v, '/'))
        return "must be a file name, not a path; use 'dir' for the directory";
    return NULL;
}

static void apply_loglevel(const struct conf *c)
{
    log_set_level((enum log_level)c->loglevel);
}

/* Rows as one-line brace initialisers, which clang-format would spread over three lines. */
/* clang-format off */
#define ROW(n, t, fl, field, d, lo, hi, h) \
    {n, t, fl, offsetof(struct conf, field), d, lo, hi, NULL, 0, NULL, NULL, h}
#define INT(n, fl, field, d, lo, hi, h) ROW(n, T_INT, fl, field, d, lo, hi, h)
#define MEM(n, fl, field, d, lo, hi, h) ROW(n, T_MEMORY, fl, field, d, lo, hi, h)
#define OCT(n, fl, field, d, lo, hi, h) ROW(n, T_OCTAL, fl, field, d, lo, hi, h)
#define SECS(n, fl, field, d, lo, hi, h) \
    {n, T_DURATION, fl, offsetof(struct conf, field), d, lo, hi, NULL, 1000, NULL, NULL, h}
#define STR(n, fl, field, d, chk, h) \
    {n, T_STRING, fl, offsetof(struct conf, field), d, 0, 0, NULL, 0, chk, NULL, h}
#define ENUM(n, fl, field, d, nm, ap, h) \
    {n, T_ENUM, fl, offsetof(struct conf, field), d, 0, 0, nm, 0, NULL, ap, h}
/* Rows without storage, answered so that tools written for Redis find what they look for. */
#define PSEUDO(n, t, d, h) {n, t, F_LIVE | F_CONST, 0, d, 0, 1, NULL, 0, NULL, NULL, h}
/* clang-format on */

static const struct directive table[] = {
    {"bind", T_BIND, 0, offsetof(struct conf, bind), "127.0.0.1 -::1", 1, CONF_MAX_BIND, NULL, 0,
     NULL, NULL, "addresses to listen on; a leading '-' skips one that is unavailable"},
    INT("port", 0, port, "7379", 0, 65535, "TCP port; 0 disables TCP"),
    STR("unixsocket", 0, unixsocket, "", check_unixsocket, "unix socket path; empty = none"),
    OCT("unixsocketperm", 0, unixsocketperm, "0", 0, 0777, "unix socket mode; 0 = umask's"),
    INT("threads", 0, threads, "0", 0, CONF_MAX_THREADS, "I/O threads; 0 = online CPUs"),
    INT("busy-poll-us", F_LIVE, busy_poll_us, "50", 0, 10000,
        "while an I/O thread is at least half busy, poll this long after its last work "
        "before sleeping; 0 = always sleep"),
    ENUM("io-sched-policy", 0, io_sched_policy, "auto", io_sched_names, NULL,
         "I/O threads' scheduling: normal, batch (no preempting on wake-up), auto (batch when "
         "the I/O threads are at least as many as the CPUs)"),
    INT("maxclients", F_LIVE, maxclients, "10000", 1, 1000000, "most clients connected at once"),
    SECS("timeout", F_LIVE, timeout, "0", 0, INT_MAX, "close clients idle this long; 0 = never"),
    /* Linux refuses a TCP_KEEPIDLE above 32767 s, so a larger value could never be applied. */
    SECS("tcp-keepalive", F_LIVE, tcp_keepalive, "300", 0, 32767, "TCP keepalive; 0 = off"),
    STR("requirepass", F_LIVE, requirepass, "", NULL, "password for AUTH; empty = none"),
    MEM("maxmemory", F_LIVE, maxmemory, "0", 0, INT64_MAX, "refuse new keys above; 0 = none"),
    ENUM("maxmemory-policy", F_LIVE, maxmemory_policy, "noeviction", policy_names, NULL,
         "which keys are deleted over maxmemory: noeviction, allkeys-/volatile-lru, -lfu, "
         "-random, volatile-ttl"),
    INT("maxmemory-samples", F_LIVE, maxmemory_samples, "5", 1, INT_MAX,
        "keys sampled per shard and eviction round (more: closer to exact, slower)"),
    INT("lfu-log-factor", F_LIVE, lfu_log_factor, "10", 0, INT_MAX,
        "how slowly the LFU counter grows with hits"),
    INT("lfu-decay-time", F_LIVE, lfu_decay_time, "1", 0, INT_MAX,
        "minutes for the LFU counter to drop by one; 0 = never"),
    STR("dir", F_NONEMPTY, dir, ".", NULL, "working directory; the snapshot is written here"),
    STR("dbfilename", F_NONEMPTY, dbfilename, "rlimitd.snap", check_dbfilename,
        "snapshot file name inside dir"),
    SECS("save-interval", F_LIVE, save_interval, "60", 0, INT_MAX,
         "snapshot every this many seconds; 0 = off"),
    ENUM("loglevel", F_LIVE, loglevel, "notice", loglevel_names, apply_loglevel,
         "least severe level logged"),
    STR("logfile", 0, logfile, "", NULL, "log file; empty = stderr"),
    STR("pidfile", 0, pidfile, "", NULL, "file to write the pid to; empty = none"),
    ENUM("supervised", 0, supervised, "no", supervised_names, NULL,
         "notify systemd of readiness: no, systemd, auto (if NOTIFY_SOCKET is set)"),
    INT("window-max-count", F_LIVE, window_max_count, "1000000", 1, 100000000,
        "largest ISALLOWED max_count"),
    MEM("client-query-buffer-limit", F_LIVE, client_query_buffer_limit, "1mb", KB, GB,
        "largest unparsed input per client (a whole command must fit)"),
    MEM("proto-max-bulk-len", F_LIVE, proto_max_bulk_len, "512kb", 1, 512 * MB,
        "largest single argument; must not exceed client-query-buffer-limit"),
    INT("proto-max-args", F_LIVE, proto_max_args, "1024", 1, 4194304,
        "most arguments in one command"),
    MEM("client-output-pause-limit", F_LIVE, client_output_pause_limit, "256kb", KB, INT64_MAX,
        "unsent replies at which a client stops being read until it has read them"),
    ROW("client-output-buffer-limit", T_OBUF, F_LIVE, obuf,
        "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60", 0, 0,
        "<class> <hard> <soft> <soft-seconds>...: unsent replies past hard, or past soft for "
        "longer than soft-seconds, close the client; 0 = no limit"),
    INT("busy-reply-threshold", F_LIVE, busy_reply_threshold, "5000", 0, INT64_MAX / 1000000,
        "ms a script may run before commands on its keys get -BUSY and SCRIPT KILL may stop it"),
    INT("lua-time-limit", F_LIVE, busy_reply_threshold, "5000", 0, INT64_MAX / 1000000,
        "the old name of busy-reply-threshold (the same setting)"),
    INT("slowlog-log-slower-than", F_LIVE, slowlog_log_slower_than, "10000", -1, INT64_MAX,
        "log commands slower than this many microseconds; -1 = off"),
    INT("slowlog-max-len", F_LIVE, slowlog_max_len, "128", 0, 1000000, "slow log entries kept"),
    INT("limiter-top-size", F_LIVE, limiter_top_size, "1000", 10, 100000,
        "keys LIMITER TOP tracks; a key limited over N/size times of N is always listed"),
    INT("metrics-port", 0, metrics_port, "0", 0, 65535,
        "HTTP port for Prometheus GET /metrics, on the bind addresses; 0 = off"),
    /* Redis 7.0's encoding tunables with its defaults and ranges, each also under its old
     * ziplist name (the same setting, as lua-time-limit above). */
    INT("hash-max-listpack-entries", F_LIVE, hash_max_listpack_entries, "512", 0, LONG_MAX,
        "Redis encoding tunable (accepted and reported; no effect on rlimitd's hashes)"),
    INT("hash-max-ziplist-entries", F_LIVE, hash_max_listpack_entries, "512", 0, LONG_MAX,
        "the old name of hash-max-listpack-entries"),
    MEM("hash-max-listpack-value", F_LIVE, hash_max_listpack_value, "64", 0, LONG_MAX,
        "Redis encoding tunable (accepted and reported; no effect on rlimitd's hashes)"),
    MEM("hash-max-ziplist-value", F_LIVE, hash_max_listpack_value, "64", 0, LONG_MAX,
        "the old name of hash-max-listpack-value"),
    INT("zset-max-listpack-entries", F_LIVE, zset_max_listpack_entries, "128", 0, LONG_MAX,
        "Redis encoding tunable (accepted and reported; no effect on rlimitd's sorted sets)"),
    INT("zset-max-ziplist-entries", F_LIVE, zset_max_listpack_entries, "128", 0, LONG_MAX,
        "the old name of zset-max-listpack-entries"),
    MEM("zset-max-listpack-value", F_LIVE, zset_max_listpack_value, "64", 0, LONG_MAX,
        "Redis encoding tunable (accepted and reported; no effect on rlimitd's sorted sets)"),
    MEM("zset-max-ziplist-value", F_LIVE, zset_max_listpack_value, "64", 0, LONG_MAX,
        "the old name of zset-max-listpack-value"),
    INT("list-max-listpack-size", F_LIVE, list_max_listpack_size, "-2", INT_MIN, INT_MAX,
        "Redis encoding tunable (accepted and reported; no effect on rlimitd's lists)"),
    INT("list-max-ziplist-size", F_LIVE, list_max_listpack_size, "-2", INT_MIN, INT_MAX,
        "the old name of list-max-listpack-size"),
    INT("list-compress-depth", F_LIVE, list_compress_depth, "0", 0, INT_MAX,
        "Redis encoding tunable (accepted and reported; rlimitd does not compress lists)"),
    INT("set-max-intset-entries", F_LIVE, set_max_intset_entries, "512", 0, LONG_MAX,
        "Redis encoding tunable (accepted and reported; rlimitd has no sets)"),
    ROW("notify-keyspace-events", T_KEVENTS, F_LIVE, notify_keyspace_events, "", 0, INT64_MAX,
        "keyspace event classes published over Pub/Sub, Redis's letters K E g $ l s h z x e t m "
        "d n A and r (limiter commands); empty = none"),
    PSEUDO("save", T_STRING, "", "Redis RDB schedule: always empty, see save-interval"),
    PSEUDO("appendonly", T_BOOL, "no", "Redis AOF: always no"),
    PSEUDO("databases", T_INT, "1", "Redis databases: always 1 (only db 0 exists)"),
};

#define NROWS (sizeof(table) / sizeof(table[0]))

/* Longest bind word we keep: a full IPv6 address plus the '-' prefix fits with room. */
#define BIND_WORD_MAX 63
static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Out of memory while configuring: nothing sensible to fall back to (DESIGN.md, Errors). */
static int64_t *int_at(struct conf *c, const struct directive *d)
{
    return (int64_t *)(void *)((char *)c + d->off);
}

static int64_t int_get(const struct conf *c, const struct directive *d)
{
    return *(const int64_t *)(const void *)((const char *)c + d->off);
}

static char **str_at(struct conf *c, const struct directive *d)
{
    return (char **)(void *)((char *)c + d->off);
}

static const char *str_get(const struct conf *c, const struct directive *d)
{
    const char *s = *(char *const *)(const void *)((const char *)c + d->off);

    return s ? s : "";
}

static const struct directive *lookup(const char *name)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcasecmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

/* A value as it may be shown inside an error: bounded, and with control bytes replaced, so a
 * hostile CONFIG SET argument cannot forge log lines or reply framing. */
static const char *shown(const char *v, char *buf, size_t buflen)
{
    size_t i, n = strlen(v);
    size_t keep = n < buflen - 4 ? n : buflen - 4;

    for (i = 0; i < keep; i++)
        buf[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
    if (keep < n)
        memcpy(buf + i, "...", 3), i += 3;
    buf[i] = '\0';
    return buf;
}

/* A memory amount in the largest unit that divides it, as a user would write it. */
static void fmt_mem(char *buf, size_t len, int64_t v)
{
    if (v != 0 && v % GB == 0)
        snprintf(buf, len, "%" PRId64 "gb", v / GB);
    else if (v != 0 && v % MB == 0)
        snprintf(buf, len, "%" PRId64 "mb", v / MB);
    else if (v != 0 && v % KB == 0)
        snprintf(buf, len, "%" PRId64 "kb", v / KB);
    else
        snprintf(buf, len, "%" PRId64, v);
}

static void fmt_num(const struct directive *d, char *buf, size_t len, int64_t v)
{
    if (d->type == T_MEMORY)
        fmt_mem(buf, len, v);
    else if (d->type == T_OCTAL)
        snprintf(buf, len, "%" PRIo64, v);
    else
        snprintf(buf, len, "%" PRId64, v);
}

/* A refused value. From the file or the command line (live 0) the reason names the directive and
 * the value; from CONFIG SET (live 1) it is Redis 7.0's sentence alone (redis_why), which the
 * command layer frames as Redis does: "ERR CONFIG SET failed (possibly related to argument
 * 'NAME') - " + it. */
static int bad_value(const struct directive *d, const char *v, char *err, size_t errlen,
                     const char *why, int live, const char *redis_why)
{
    char vb[64];

    if (live) {
        set_err(err, errlen, "%s", redis_why);
        return -1;
    }
    set_err(err, errlen, "invalid value for '%s': '%s' (%s)", d->name, shown(v, vb, sizeof vb),
            why);
    return -1;
}

static int out_of_range(const struct directive *d, const char *v, char *err, size_t errlen,
                        int live)
{
    char lo[32], hi[32], why[96], redis_why[96];
    const char *unit = d->type == T_DURATION ? " seconds" : "";

    /* Redis's bounds in its words: signed decimal, octal for a file mode. */
    if (d->type == T_OCTAL)
        snprintf(redis_why, sizeof redis_why, "argument must be between %" PRIo64 " and %" PRIo64
                 " inclusive", d->min, d->max);
    else
        snprintf(redis_why, sizeof redis_why, "argument must be between %" PRId64 " and %" PRId64
                 " inclusive", d->min, d->max);

    fmt_num(d, lo, sizeof lo, d->min);
    fmt_num(d, hi, sizeof hi, d->max);
    if (d->max == INT64_MAX)
        snprintf(why, sizeof why, "must be at least %s%s", lo, unit);
    else
        snprintf(why, sizeof why, "must be %s..%s%s", lo, hi, unit);
    return bad_value(d, v, err, errlen, why, live, redis_why);
}

static int parse_octal(const char *s, int64_t *out)
{
    int64_t v = 0;

    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '7' || v > (INT64_MAX >> 3))
            return -1;
        v = v * 8 + (*s - '0');
    }
    *out = v;
    return 0;
}

/* Parses v for a numeric row (every type but T_STRING and T_BIND) and checks its range. */
static int parse_num(const struct directive *d, const char *v, int64_t *out, char *err,
                     size_t errlen, int live)
{
    static const char not_int[] = "argument couldn't be parsed into an integer";
    int64_t n, ms;

    switch (d->type) {
    case T_INT:
        if (util_parse_i64(v, strlen(v), &n) != 0)
            return bad_value(d, v, err, errlen, "not an integer", live, not_int);
        break;
    case T_MEMORY: {
        uint64_t u;
        if (util_parse_memory_u64(v, &u) != 0)
            return bad_value(d, v, err, errlen, "not a memory amount like 512kb or 1gb", live,
                             "argument must be a memory value");
        if (u > (uint64_t)d->max)
            return out_of_range(d, v, err, errlen, live);
        n = (int64_t)u;
        break;
    }
    case T_OCTAL:
        if (parse_octal(v, &n) != 0)
            return bad_value(d, v, err, errlen, "not an octal mode like 700", live,
                             "argument couldn't be parsed as an octal number");
        break;
    case T_DURATION:
        /* A plain number is read as Redis reads an integer (a sign, no leading zero, any
         * int64, then the range check); only a number with a unit is a duration. */
        if (v[strspn(v, "-0123456789")] == '\0') {
            if (util_parse_i64(v, strlen(v), &n) != 0)
                return bad_value(d, v, err, errlen, "not an integer", live, not_int);
            break;
        }
        if (util_parse_duration_ms(v, d->unit_ms, &ms) != 0)
            return bad_value(d, v, err, errlen, "not a duration like 30 or 30s, 5m, 1h", live,
                             not_int);
        if (ms % d->unit_ms != 0)
            return bad_value(d, v, err, errlen, "must be a whole number of seconds", live,
                             "argument must be a whole number of seconds");
        n = ms / d->unit_ms;
        break;
    case T_KEVENTS:
        if ((n = conf_kevents_parse(v)) < 0) {
            set_err(err, errlen, "%s", CONF_KEVENTS_BAD);
            return -1;
        }
        break;
    case T_BOOL:
        if (strcasecmp(v, "yes") == 0)
            n = 1;
        else if (strcasecmp(v, "no") == 0)
            n = 0;
        else
            return bad_value(d, v, err, errlen, "must be yes or no", live,
                             "argument must be 'yes' or 'no'");
        *out = n;
        return 0;
    case T_ENUM:
        for (n = 0; d->names[n]; n++)
            if (strcasecmp(v, d->names[n]) == 0) {
                *out = n;
                return 0;
            }
        {
            char why[128] = "must be one of", redis_why[160];
            size_t len = strlen(why);
            for (int i = 0; d->names[i] && len < sizeof why; i++)
                len += (size_t)snprintf(why + len, sizeof why - len, "%s %s", i ? "," : "",
                                        d->names[i]);
            /* Redis's list: "...following: debug, verbose, notice, warning". */
            snprintf(redis_why, sizeof redis_why, "argument(s) must be one of the following:%s",
                     why + strlen("must be one of"));
            return bad_value(d, v, err, errlen, why, live, redis_why);
        }
    default:
        abort(); /* T_STRING and T_BIND never come here */
    }
    if (n < d->min || n > d->max)
        return out_of_range(d, v, err, errlen, live);
    *out = n;
    return 0;
}

static int set_string(struct conf *c, const struct directive *d, const char *v, char *err,
                      size_t errlen)
{
    char **slot;
    const char *why;

    if ((d->flags & F_NONEMPTY) && *v == '\0')
        return bad_value(d, v, err, errlen, "must not be empty", 0, NULL);
    if (d->check && (why = d->check(v)) != NULL)
        return bad_value(d, v, err, errlen, why, 0, NULL);
    slot = str_at(c, d);
    free(*slot);
    *slot = xstrdup(v);
    return 0;
}

/* 1 if the len bytes at w are a bind word: an optional '-', then a numeric IPv4 or IPv6
 * address. Host names are refused: they could resolve differently at every start, and a typo
 * is better caught here than as a failed listen. */
static int bind_word_ok(const char *w, size_t len)
{
    char addr[BIND_WORD_MAX + 1];
    unsigned char sink[sizeof(struct in6_addr)];

    if (len == 0 || len > BIND_WORD_MAX)
        return 0;
    memcpy(addr, w, len);
    addr[len] = '\0';
    w = addr[0] == '-' ? addr + 1 : addr;
    return inet_pton(AF_INET, w, sink) == 1 || inet_pton(AF_INET6, w, sink) == 1;
}

static int set_bind(struct conf *c, const struct directive *d, int argc, const char *const *argv,
                    char *err, size_t errlen)
{
    static const char ws[] = " \t\r\n";
    char *words[CONF_MAX_BIND];
    int n = 0, total = 0;

    /* Count first, so that nothing is allocated for a list that will be refused. */
    for (int i = 0; i < argc; i++)
        for (const char *p = argv[i] + strspn(argv[i], ws); *p; p += strspn(p, ws)) {
            size_t len = strcspn(p, ws);
            if (!bind_word_ok(p, len)) {
                char vb[BIND_WORD_MAX + 8];
                char word[BIND_WORD_MAX + 2];
                size_t keep = len < sizeof word - 1 ? len : sizeof word - 1;
                memcpy(word, p, keep);
                word[keep] = '\0';
                set_err(err, errlen,
                        "invalid value for '%s': '%s' (not a numeric IPv4 or IPv6 "
                        "address)",
                        d->name, shown(word, vb, sizeof vb));
                return -1;
            }
            total++;
            p += len;
        }
    if (total < d->min || total > d->max) {
        set_err(err, errlen,
                "wrong number of arguments for '%s' (expected %" PRId64 "..%" PRId64
                " addresses, got %d)",
                d->name, d->min, d->max, total);
        return -1;
    }
    for (int i = 0; i < argc; i++)
        for (const char *p = argv[i] + strspn(argv[i], ws); *p; p += strspn(p, ws)) {
            size_t len = strcspn(p, ws);
            words[n] = strndup(p, len);
            if (words[n] == NULL)
                alloc_fail(len + 1);
            n++;
            p += len;
        }
    for (int i = 0; i < c->nbind; i++)
        free(c->bind[i]);
    memcpy(c->bind, words, (size_t)n * sizeof words[0]);
    for (int i = n; i < CONF_MAX_BIND; i++)
        c->bind[i] = NULL;
    c->nbind = n;
    return 0;
}

/* A larger bulk could never arrive whole: the scanner limits the whole command to the query
 * buffer first. Refusing the combination points at the setting that does nothing. */
static int bulk_vs_query(int64_t bulk, int64_t query, char *err, size_t errlen)
{
    if (bulk <= query)
        return 0;
    set_err(err, errlen,
            "proto-max-bulk-len (%" PRId64 ") must not exceed "
            "client-query-buffer-limit (%" PRId64 ")",
            bulk, query);
    return -1;
}

int conf_set(struct conf *c, const char *name, int argc, const char *const *argv, int live,
             char *err, size_t errlen)
{
    const struct directive *d = lookup(name);
    int64_t v;

    if (d == NULL) {
        char nb[64];
        set_err(err, errlen, "unknown directive '%s'", shown(name, nb, sizeof nb));
        return -1;
    }
    if (live && !(d->flags & F_LIVE)) {
        set_err(err, errlen, "can't set immutable config");
        return -1;
    }
    if (d->type == T_BIND)
        return set_bind(c, d, argc, argv, err, errlen);
    if (d->type == T_OBUF) {
        const char *why = NULL;
        if (conf_obuf_set(c->obuf, argc, argv, live, &why) == 0)
            return 0;
        set_err(err, errlen, "%s", why);
        return -1;
    }
    if (argc != 1) {
        set_err(err, errlen, "wrong number of arguments for '%s' (expected 1, got %d)", d->name,
                argc);
        return -1;
    }
    if (d->flags & F_CONST) {
        /* Setting these to what they always are is harmless and keeps scripts written for a
         * Redis without persistence (CONFIG SET save "") working; anything else would be a
         * silent lie about durability. */
        int64_t def = 0;
        /* rlimitd's own texts here: these rows' ranges are placeholders, not limits. */
        if (d->type != T_STRING && (parse_num(d, argv[0], &v, err, errlen, 0) != 0 ||
                                    parse_num(d, d->def, &def, NULL, 0, 0) != 0))
            return -1;
        if (d->type == T_STRING ? strcmp(argv[0], d->def) != 0 : v != def) {
            char why[128];
            snprintf(why, sizeof why,
                     "rlimitd only accepts '%s'; snapshots follow "
                     "save-interval",
                     d->def);
            return bad_value(d, argv[0], err, errlen, why, 0, NULL);
        }
        return 0;
    }
    if (d->type == T_STRING)
        return set_string(c, d, argv[0], err, errlen);
    if (parse_num(d, argv[0], &v, err, errlen, live) != 0)
        return -1;
    /* Atomic: I/O threads read live numeric fields without conf_lock (CONF_GET, conf.h). */
    __atomic_store_n(int_at(c, d), v, __ATOMIC_RELAXED);
    if (live && d->apply)
        d->apply(c);
    return 0;
}

int conf_settable(const char *name)
{
    const struct directive *d = lookup(name);
    if (d == NULL)
        return -1;
    return (d->flags & F_LIVE) != 0;
}

const char *conf_row_name(const char *name)
{
    const struct directive *d = lookup(name);
    return d != NULL ? d->name : NULL;
}

void conf_init(struct conf *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NROWS; i++) {
        const char *argv[1] = {table[i].def};
        char err[256];

        if (table[i].flags & F_CONST)
            continue;
        /* A default that fails its own row's checks is a bug in the table, caught by the very
         * first run of any test. */
        if (conf_set(c, table[i].name, 1, argv, 0, err, sizeof err) != 0) {
            fprintf(stderr, "rlimitd: bad built-in default: %s\n", err);
            abort();
        }
    }
}

void conf_free(struct conf *c)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (table[i].type != T_STRING || (table[i].flags & F_CONST))
            continue;
        char **slot = str_at(c, &table[i]);
        free(*slot);
        *slot = NULL;
    }
    for (int i = 0; i < c->nbind; i++) {
        free(c->bind[i]);
        c->bind[i] = NULL;
    }
    c->nbind = 0;
}

void conf_copy(struct conf *dst, const struct conf *src)
{
    memcpy(dst, src, sizeof *dst);
    for (size_t i = 0; i < NROWS; i++) {
        if (table[i].type != T_STRING || (table[i].flags & F_CONST))
            continue;
        char **slot = str_at(dst, &table[i]);
        if (*slot != NULL)
            *slot = xstrdup(*slot);
    }
    for (int i = 0; i < dst->nbind; i++)
        dst->bind[i] = xstrdup(src->bind[i]);
}

int conf_check(const struct conf *c, char *err, size_t errlen)
{
    if (bulk_vs_query(c->proto_max_bulk_len, c->client_query_buffer_limit, err, errlen) != 0)
        return -1;
    if (c->port == 0 && (c->unixsocket == NULL || c->unixsocket[0] == '\0')) {
        set_err(err, errlen, "nothing to listen on: port is 0 and unixsocket is not set");
        return -1;
    }
    return 0;
}

void conf_resolve(struct conf *c)
{
    if (c->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->threads = n < 1 ? 1 : n > CONF_MAX_THREADS ? CONF_MAX_THREADS : n;
    }
}

void conf_get(const struct conf *c, const char *pattern, conf_visit_fn cb, void *ud)
{
    size_t plen = strlen(pattern);
    /* As Redis 7.0: a pattern without glob characters is a name, looked up (case-insensitive)
     * and answered under the spelling it was asked with. */
    int exact = strpbrk(pattern, "[*?") == NULL;

    for (size_t i = 0; i < NROWS; i++) {
        const struct directive *d = &table[i];
        char buf[CONF_MAX_BIND * (BIND_WORD_MAX + 1) + 1];
        const char *val = buf;

        if (exact ? strcasecmp(pattern, d->name) != 0
                  : !util_glob_match(pattern, plen, d->name, strlen(d->name), 1))
            continue;
        if (d->flags & F_CONST) {
            val = d->def;
        } else if (d->type == T_STRING) {
            val = str_get(c, d);
        } else if (d->type == T_BIND) {
            size_t len = 0;
            buf[0] = '\0';
            for (int j = 0; j < c->nbind; j++)
                len +=
                    (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", j ? " " : "", c->bind[j]);
        } else if (d->type == T_ENUM) {
            val = d->names[int_get(c, d)];
        } else if (d->type == T_BOOL) {
            val = int_get(c, d) ? "yes" : "no";
        } else if (d->type == T_OCTAL) {
            snprintf(buf, sizeof buf, "%" PRIo64, int_get(c, d));
        } else if (d->type == T_OBUF) {
            conf_obuf_format(c->obuf, buf, sizeof buf);
        } else if (d->type == T_KEVENTS) {
            conf_kevents_format(int_get(c, d), buf, sizeof buf);
        } else {
            snprintf(buf, sizeof buf, "%" PRId64, int_get(c, d));
        }
        cb(ud, exact ? pattern : d->name, val);
    }
}
