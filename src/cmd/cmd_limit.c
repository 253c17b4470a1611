/* cmd_limit.c - CL.THROTTLE (SPEC 2) and ISALLOWED (SPEC 3): validate, apply, reply. */
#include "cmd_internal.h"

#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/isallowed.h"

static void cmd_throttle(struct cmd_ctx *x)
{
    /* SPEC 2: arity 5 or 6 (the table says "at least 5"). */
    if (x->argc > 6) {
        reply_error(x->out, "ERR wrong number of arguments for 'cl.throttle' command");
        return;
    }
    int64_t burst, count, period, quantity = 1;
    if (arg_i64(x, 2, &burst) || arg_i64(x, 3, &count) || arg_i64(x, 4, &period))
        return;
    if (x->argc == 6 && arg_i64(x, 5, &quantity))
        return;

    struct gcra_limits l;
    const char *err;
    if (gcra_prepare(burst, count, period, quantity, &l, &err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    struct gcra_result r;
    int rc = ks_gcra_apply(x->env->ks, &x->keys[0], x->now, &l, &r, &err);
    if (rc == -100) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return;
    }
    rbuf_append(x->out, "*5\r\n", 4);
    reply_int(x->out, r.limited);
    reply_int(x->out, r.limit);
    reply_int(x->out, r.remaining);
    reply_int(x->out, r.retry_after);
    reply_int(x->out, r.reset_after);
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
    int rc = ks_swlog_apply(x->env->ks, &x->keys[0], x->now, period_ms, max_count, &allowed);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return;
    }
    reply_int(x->out, allowed);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_limit_table[] = {
    {"cl.throttle", -5, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write fast", cmd_throttle,
     {.summary = "Applies a GCRA rate limit to a key and answers whether the action is allowed, "
                 "with the limit, remaining quota, retry and reset times", .since = "0.1.0",
      .group = "generic", .complexity = "O(1)",
      .args = "key:key max_burst:integer count:integer period:integer ?quantity:integer",
      .keyflags = "RW access update"}},
    {"isallowed", 5, CMD_WRITE | CMD_DENYOOM | CMD_FAST | CMD_KEYDERIVED, 1, 1, 1,
     "write fast", cmd_isallowed,
     {.summary = "Records an attempt in a sliding-window log and answers whether it is within the "
                 "limit", .since = "0.1.0", .group = "generic", .complexity = "O(1) amortized",
      .args = "user:key action:string period:integer max_count:integer",
      .keyflags = "RW access update",
      .notes = "The state key is hist:{user}:action; the user is its hash tag, so route by it"}},
};
const int cmd_limit_count = (int)(sizeof(cmd_limit_table) / sizeof(cmd_limit_table[0]));
