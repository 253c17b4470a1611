/* cmd_metrics.c - the Prometheus text exposition (format 0.0.4) served on metrics-port's
 * GET /metrics: the limiters' decisions, keys, clients, memory, calls and time per command, the
 * last snapshot, and the 10 most-limited keys. The counters are the ones INFO shows, so CONFIG
 * RESETSTAT resets them too (Prometheus's rate() treats a drop as a counter reset).
 *
 * Label values are escaped as the format says (backslash, double quote, newline), and since it
 * requires UTF-8, a key's bytes that are not valid UTF-8 are shown as U+FFFD. */
#include "cmd_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rlimitd/pubsub.h"

#define TOP_KEYS 10

static void line(struct rbuf *b, const char *s)
{
    rbuf_append(b, s, strlen(s));
}

static void linef(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void linef(struct rbuf *b, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0)
        rbuf_append(b, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void family(struct rbuf *b, const char *name, const char *type, const char *help)
{
    linef(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len;
    uint32_t cp;
    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xe0) == 0xc0) {
        len = 2;
        cp = p[0] & 0x1fu;
    } else if ((p[0] & 0xf0) == 0xe0) {
        len = 3;
        cp = p[0] & 0x0fu;
    } else if ((p[0] & 0xf8) == 0xf0) {
        len = 4;
        cp = p[0] & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    /* No overlong forms, no surrogates, nothing past U+10FFFF. */
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return len;
}

/* Appends s as the inside of a quoted label value. */
static void escape_label(struct rbuf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] == '\\') {
            rbuf_append(b, "\\\\", 2);
            i++;
        } else if (p[i] == '"') {
            rbuf_append(b, "\\\"", 2);
            i++;
        } else if (p[i] == '\n') {
            rbuf_append(b, "\\n", 2);
            i++;
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len == 0) {
                rbuf_append(b, "\xef\xbf\xbd", 3);
                i++;
            } else {
                rbuf_append(b, p + i, len);
                i += len;
            }
        }
    }
}

static void top_item(void *ud, const char *key, size_t len, uint64_t count)
{
    struct rbuf *b = ud;
    line(b, "rlimitd_limited_top{key=\"");
    escape_label(b, key, len);
    linef(b, "\"} %" PRIu64 "\n", count);
}

void cmd_metrics(struct cmd_env *env, struct rbuf *out)
{
    static const char *const cmds[LIM_COUNT] = {"cl.throttle", "gcra", "isallowed",
                                                "throttle.all", "lease.acquire"};

    family(out, "rlimitd_requests_total", "counter",
           "Limiter calls by command and decision (ISALLOWED's denied counts as limited).");
    for (int k = 0; k < LIM_COUNT; k++) {
        linef(out, "rlimitd_requests_total{command=\"%s\",result=\"allowed\"} %" PRIu64 "\n",
              cmds[k], stats_total(env, STATS_LIM_OFF(lim_allowed, k)));
        linef(out, "rlimitd_requests_total{command=\"%s\",result=\"limited\"} %" PRIu64 "\n",
              cmds[k], stats_total(env, STATS_LIM_OFF(lim_limited, k)));
    }
    family(out, "rlimitd_near_limit_total", "counter",
           "Allowed limiter calls that left at most 10% of the capacity.");
    linef(out, "rlimitd_near_limit_total %" PRIu64 "\n", STATS_TOTAL(env, near_limit));

    family(out, "rlimitd_keys", "gauge", "Keys in the keyspace.");
    linef(out, "rlimitd_keys %" PRIu64 "\n", ks_key_count(env->ks));
    family(out, "rlimitd_limiter_keys", "gauge", "Keys holding CL.THROTTLE or ISALLOWED state.");
    linef(out, "rlimitd_limiter_keys %" PRIu64 "\n", ks_limiter_key_count(env->ks));

    uint64_t clients = 0;
    if (env->hooks.connected_clients != NULL)
        clients = env->hooks.connected_clients(env->hooks.ud);
    family(out, "rlimitd_connected_clients", "gauge", "Client connections.");
    linef(out, "rlimitd_connected_clients %" PRIu64 "\n", clients);
    struct pubsub_stats ps;
    pubsub_get_stats(&ps);
    family(out, "rlimitd_pubsub_subscribers", "gauge",
           "Connections holding at least one Pub/Sub subscription.");
    linef(out, "rlimitd_pubsub_subscribers %" PRIu64 "\n", ps.subscribers);
    family(out, "rlimitd_pubsub_channels", "gauge",
           "Channels, patterns and shard channels with a subscriber.");
    static const char *const kinds[PUBSUB_KINDS] = {"channel", "pattern", "shard"};
    for (int k = 0; k < PUBSUB_KINDS; k++)
        linef(out, "rlimitd_pubsub_channels{kind=\"%s\"} %" PRId64 "\n", kinds[k],
              pubsub_names((enum pubsub_kind)k, NULL, 0, NULL, NULL));
    family(out, "rlimitd_pubsub_published_total", "counter", "PUBLISH and SPUBLISH calls.");
    linef(out, "rlimitd_pubsub_published_total %" PRIu64 "\n", ps.published);
    family(out, "rlimitd_pubsub_delivered_total", "counter",
           "Messages delivered to subscribers (one per receiving subscription).");
    linef(out, "rlimitd_pubsub_delivered_total %" PRIu64 "\n", ps.delivered);
    family(out, "rlimitd_used_memory_bytes", "gauge",
           "Bytes used: keys, tables, Lua and the connections' buffers (INFO used_memory).");
    linef(out, "rlimitd_used_memory_bytes %" PRIu64 "\n", ks_used_memory(env->ks));

    int n = cmd_count();
    family(out, "rlimitd_commands_total", "counter", "Commands run, by command.");
    for (int i = 0; i < n && i < STATS_MAX_CMDS; i++)
        linef(out, "rlimitd_commands_total{command=\"%s\"} %" PRIu64 "\n", cmd_name(i),
              stats_total(env, STATS_CMD_OFF(i, calls)));
    family(out, "rlimitd_commands_duration_seconds_total", "counter",
           "Time spent running commands, by command.");
    for (int i = 0; i < n && i < STATS_MAX_CMDS; i++)
        linef(out, "rlimitd_commands_duration_seconds_total{command=\"%s\"} %.6f\n", cmd_name(i),
              (double)stats_total(env, STATS_CMD_OFF(i, usec)) / 1e6);

    int64_t lastsave = env->hooks.lastsave != NULL ? env->hooks.lastsave(env->hooks.ud)
                                                   : env->start_ns / 1000000000;
    family(out, "rlimitd_snapshot_last_success_timestamp_seconds", "gauge",
           "Unix time of the last successful snapshot (the start if none yet).");
    linef(out, "rlimitd_snapshot_last_success_timestamp_seconds %" PRId64 "\n", lastsave);

    family(out, "rlimitd_limited_top", "gauge",
           "Times the most-limited keys were limited (LIMITER TOP's estimates).");
    limiter_top_each(env, TOP_KEYS, top_item, out);
}
