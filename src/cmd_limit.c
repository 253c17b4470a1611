/* cmd_limit.c - CL.THROTTLE (SPEC 2) and ISALLOWED (SPEC 3): validate, apply, reply. */
#include "cmd_internal.h"

#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/isallowed.h"

void cmd_throttle(struct cmd_ctx *x)
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
    /* near: at most a tenth of the limit left (limit 1..9: nothing left). */
    limiter_stats_count(x, LIM_THROTTLE, !r.limited, r.remaining <= r.limit / 10);
    rbuf_append(x->out, "*5\r\n", 4);
    reply_int(x->out, r.limited);
    reply_int(x->out, r.limit);
    reply_int(x->out, r.remaining);
    reply_int(x->out, r.retry_after);
    reply_int(x->out, r.reset_after);
}

void cmd_isallowed(struct cmd_ctx *x)
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
    reply_int(x->out, allowed);
}
