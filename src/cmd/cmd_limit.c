/* cmd_limit.c - CL.THROTTLE (COMMANDS.md, CL.THROTTLE), GCRA (COMMANDS.md, GCRA) and ISALLOWED (COMMANDS.md, ISALLOWED): validate, apply,
 * reply. */
#include "cmd_internal.h"
#include "cmd_notify.h"

#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"
#include "rlimitd/isallowed.h"
#include "rlimitd/wait.h"
#include "cmd_wait.h"

/* What both GCRA commands do with the keyspace's answer: an error reply, or the count for INFO
 * limiter (near: at most a tenth of the limit left; limit 1..9: nothing left) and the five
 * integers. */
static void finish_gcra(struct cmd_ctx *x, enum stats_lim kind, const char *event, int rc,
                        const char *err, const struct gcra_result *r)
{
    if (rc == KS_LIMIT_ERR) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return;
    }
    limiter_stats_count(x, kind, !r->limited, r->remaining <= r->limit / 10);
    notify_key(NOTIFY_LIMITER, r->limited ? "limited" : event, &x->keys[0]);
    rbuf_append(x->out, "*5\r\n", 4);
    reply_int(x->out, r->limited);
    reply_int(x->out, r->limit);
    reply_int(x->out, r->remaining);
    reply_int(x->out, r->retry_after);
    reply_int(x->out, r->reset_after);
}

/* WAIT timeout_ms after a GCRA command's own arguments: 0 with *argc the arguments before it, or
 * -1 once the timeout's error is answered. */
static int split_wait(struct cmd_ctx *x, int min_argc, int *argc, int *has, int64_t *ms)
{
    if (x->argc < min_argc + 2) { /* no room for WAIT: the common case, decided without a call */
        *argc = x->argc;
        *has = 0;
        *ms = 0;
        return 0;
    }
    const char *err;
    if (wait_split(x->argc, (const char *const *)x->argv, x->lens, min_argc, argc, has, ms,
                   &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return -1;
    }
    return 0;
}

/* A refused GCRA request given WAIT: parked rather than answered, when it may wait. */
static int gcra_parked(struct cmd_ctx *x, int has_wait, int64_t ms, int rc,
                       const struct gcra_result *r)
{
    return has_wait && rc == KS_OK && r->limited && wait_may(x) &&
           wait_park(x, &x->keys[0], ms, r->wait_ns);
}

static void cmd_throttle(struct cmd_ctx *x)
{
    int argc, has_wait;
    int64_t wait_ms;
    if (split_wait(x, 5, &argc, &has_wait, &wait_ms) != 0)
        return;
    /* COMMANDS.md, CL.THROTTLE: arity 5 or 6 (the table says "at least 5"), WAIT aside. */
    if (argc > 6) {
        reply_error(x->out, "ERR wrong number of arguments for 'cl.throttle' command");
        return;
    }
    int64_t burst, count, period, quantity = 1;
    if (arg_i64(x, 2, &burst) || arg_i64(x, 3, &count) || arg_i64(x, 4, &period))
        return;
    if (argc == 6 && arg_i64(x, 5, &quantity))
        return;

    struct gcra_limits l;
    const char *err;
    if (gcra_prepare(burst, count, period, quantity, &l, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    if (has_wait && wait_may(x) && wait_behind(x, &x->keys[0], wait_ms))
        return;
    struct gcra_result r;
    int rc = ks_gcra_apply(x->env->ks, &x->keys[0], x->now, &l, &r, &err);
    if (gcra_parked(x, has_wait, wait_ms, rc, &r))
        return;
    finish_gcra(x, LIM_THROTTLE, "cl.throttle", rc, err, &r);
}

/* GCRA key max_burst tokens_per_period period [TOKENS n]: Redis's checks in Redis's order
 * (arguments, then the key's type, then overflow), so every error is the one Redis gives. */
static void cmd_gcra(struct cmd_ctx *x)
{
    int argc, has_wait;
    int64_t wait_ms;
    if (split_wait(x, GCRA_REDIS_MIN_ARGC, &argc, &has_wait, &wait_ms) != 0)
        return;
    struct gcra_redis_args a;
    const char *err;
    if (gcra_redis_parse(argc, (const char *const *)x->argv, x->lens, &a, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    if (has_wait && wait_may(x) && wait_behind(x, &x->keys[0], wait_ms))
        return;
    struct gcra_result r;
    int rc = ks_gcra_redis_apply(x->env->ks, &x->keys[0], x->now, &a, &r, &err);
    if (gcra_parked(x, has_wait, wait_ms, rc, &r))
        return;
    finish_gcra(x, LIM_GCRA, "gcra", rc, err, &r);
}

static void cmd_isallowed(struct cmd_ctx *x)
{
    int64_t period, max_count;
    if (arg_i64(x, 3, &period) || arg_i64(x, 4, &max_count))
        return;
    int64_t ceiling = __atomic_load_n(&x->env->conf->window_max_count, __ATOMIC_RELAXED);
    int64_t period_ms;
    char err[128];
    if (isallowed_prepare(period, max_count, ceiling, &period_ms, err, sizeof err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    int allowed;
    int64_t in_window = 0;
    int rc = ks_swlog_apply(x->env->ks, &x->keys[0], x->now, period_ms, max_count, &allowed,
                            &in_window);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return;
    }
    /* near: the window now holds at least 90% of max_count attempts, this one included. */
    limiter_stats_count(x, LIM_ISALLOWED, allowed, in_window * 10 >= max_count * 9);
    notify_key(NOTIFY_LIMITER, allowed ? "isallowed" : "limited", &x->keys[0]);
    reply_int(x->out, allowed);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_limit_table[] = {
    {"cl.throttle", -5, CMD_WRITE | CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY | CMD_FAST, 1, 1, 1, "write fast", cmd_throttle,
     {.summary = "Applies a GCRA rate limit to a key and answers whether the action is allowed, "
                 "with the limit, remaining quota, retry and reset times", .since = "0.1.0",
      .group = "generic", .complexity = "O(1)",
      .args = "key:key max_burst:integer count:integer period:integer ?quantity:integer "
              "?timeout:integer=WAIT",
      .keyflags = "RW access update"}},
    {"gcra", -5, CMD_WRITE | CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY | CMD_FAST, 1, 1, 1, "write string fast", cmd_gcra,
     {.summary = "Rate limits a key with GCRA, answering whether the request is allowed, the "
                 "capacity, the remaining tokens, and retry and reset times in seconds",
      .since = "0.1.0", .group = "string", .complexity = "O(1)",
      .args = "key:key max_burst:integer tokens_per_period:integer period:double "
              "?tokens:integer=TOKENS ?timeout:integer=WAIT",
      .keyflags = "RW access update"}},
    {"isallowed", 5, CMD_WRITE | CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY | CMD_FAST | CMD_KEYDERIVED, 1, 1, 1,
     "write fast", cmd_isallowed,
     {.summary = "Records an attempt in a sliding-window log and answers whether it is within the "
                 "limit", .since = "0.1.0", .group = "generic", .complexity = "O(1) amortized",
      .args = "user:key action:string period:integer max_count:integer",
      .keyflags = "RW access update",
      .notes = "The state key is hist:{user}:action; the user is its hash tag, so route by it"}},
};
const int cmd_limit_count = (int)(sizeof(cmd_limit_table) / sizeof(cmd_limit_table[0]));
