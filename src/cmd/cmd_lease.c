/* cmd_lease.c - concurrency leases (COMMANDS.md, LEASE.*): LEASE.ACQUIRE, LEASE.RELEASE,
 * LEASE.RENEW, LEASE.COUNT. Arguments by lease.c's rules, the set by the keyspace (ks_lease.c),
 * replies here. */
#include "cmd_internal.h"
#include "cmd_notify.h"

#include "rlimitd/lease.h"
#include "rlimitd/util.h"
#include "cmd_wait.h"

#define NS_PER_MS 1000000LL

/* The one error a lease op may answer besides its arguments' (KS_WRONGTYPE, KS_OOM). */
static int lease_failed(struct cmd_ctx *x, int rc)
{
    if (rc == KS_OK)
        return 0;
    reply_ks_error(x->out, rc);
    return 1;
}

static void reply_id(struct rbuf *out, int64_t id)
{
    char buf[24];
    reply_bulk(out, buf, util_fmt_i64(buf, id));
}

static void cmd_lease_acquire(struct cmd_ctx *x)
{
    struct lease_acquire_args a;
    const char *err;
    if (lease_acquire_parse(x->argc, (const char *const *)x->argv, x->lens, &a, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    int may_wait = a.has_wait && wait_may(x);
    if (may_wait && wait_behind(x, &x->keys[0], a.wait_ms))
        return;
    struct ks_lease_out o;
    int rc = ks_lease_acquire(x->env->ks, &x->keys[0], x->now, a.limit, a.ttl_ms * NS_PER_MS,
                              &o);
    if (lease_failed(x, rc))
        return;
    /* Full: a slot frees itself when the earliest lease expires, or at a LEASE.RELEASE. */
    if (o.id == 0 && may_wait &&
        wait_park(x, &x->keys[0], a.wait_ms, o.next_free > x->now ? o.next_free - x->now : 0))
        return;
    /* near: at least 90% of the limit held after this acquire. */
    limiter_stats_count(x, LIM_LEASE, o.id != 0, o.count * 10 >= a.limit * 9);
    notify_key(NOTIFY_LIMITER, o.id != 0 ? "lease.acquire" : "limited", &x->keys[0]);
    if (o.id != 0)
        reply_id(x->out, o.id);
    else
        reply_nil(x->out);
}

static void cmd_lease_release(struct cmd_ctx *x)
{
    int64_t id;
    const char *err;
    if (lease_parse_id(x->argv[2], x->lens[2], &id, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    struct ks_lease_out o;
    if (lease_failed(x, ks_lease_release(x->env->ks, &x->keys[0], x->now, id, &o)))
        return;
    if (o.done) {
        wait_notify(&x->keys[0]);
        notify_key(NOTIFY_LIMITER, "lease.release", &x->keys[0]);
        if (o.count == 0) /* the last lease went, and the key with it */
            notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
    }
    reply_int(x->out, o.done);
}

static void cmd_lease_renew(struct cmd_ctx *x)
{
    int64_t id, ttl_ms;
    const char *err;
    if (lease_parse_id(x->argv[2], x->lens[2], &id, &err) != 0 ||
        lease_parse_ttl(x->argv[3], x->lens[3], &ttl_ms, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    struct ks_lease_out o;
    if (lease_failed(x, ks_lease_renew(x->env->ks, &x->keys[0], x->now, id, ttl_ms * NS_PER_MS,
                                       &o)))
        return;
    if (o.done)
        notify_key(NOTIFY_LIMITER, "lease.renew", &x->keys[0]);
    reply_int(x->out, o.done);
}

static void cmd_lease_live(struct cmd_ctx *x)
{
    int64_t n;
    if (lease_failed(x, ks_lease_count(x->env->ks, &x->keys[0], x->now, &n)))
        return;
    reply_int(x->out, n);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_lease_table[] = {
    {"lease.acquire", -4, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write fast",
     cmd_lease_acquire,
     {.summary = "Takes one of a key's limit concurrent leases for ttl_ms milliseconds, answering "
                 "its id, or nil when all are held", .since = "0.2.0", .group = "generic",
      .complexity = "O(N) where N is the number of leases held on the key",
      .args = "key:key limit:integer ttl_ms:integer ?timeout:integer=WAIT",
      .keyflags = "RW access update"}},
    {"lease.release", 3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", cmd_lease_release,
     {.summary = "Gives a lease back before it expires", .since = "0.2.0", .group = "generic",
      .complexity = "O(N) where N is the number of leases held on the key",
      .args = "key:key id:integer", .keyflags = "RW delete"}},
    {"lease.renew", 4, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", cmd_lease_renew,
     {.summary = "Moves a held lease's expiry to ttl_ms milliseconds from now", .since = "0.2.0",
      .group = "generic", .complexity = "O(N) where N is the number of leases held on the key",
      .args = "key:key id:integer ttl_ms:integer", .keyflags = "RW update"}},
    {"lease.count", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "read fast", cmd_lease_live,
     {.summary = "Counts the leases held on a key", .since = "0.2.0", .group = "generic",
      .complexity = "O(N) where N is the number of leases held on the key",
      .args = "key:key", .keyflags = "RO access"}},
};
const int cmd_lease_count = (int)(sizeof(cmd_lease_table) / sizeof(cmd_lease_table[0]));
