/* cmd_throttle_all.c - THROTTLE.ALL (COMMANDS.md, THROTTLE.ALL): several CL.THROTTLE limits, one
 * per key, taken from all or from none. The dispatcher has locked every key's shard (the keys
 * are counted by argv[1], CMD_NUMKEYS_AT1), so the reads, the decision and the writes below are
 * one atomic step for every other client, whichever shards the keys live on. */
#include "cmd_internal.h"
#include "cmd_notify.h"

#include "rlimitd/throttle_all.h"
#include "cmd_wait.h"

/* The reply: limited, the first refusing limit's index, retry_after, then each limit's five
 * integers as CL.THROTTLE answers them. */
static void reply_all(struct rbuf *out, const struct throttle_all_result *res,
                      const struct gcra_result *per, int n)
{
    reply_array(out, 3 + n);
    reply_int(out, res->limited);
    reply_int(out, res->index);
    reply_int(out, res->retry_after);
    for (int i = 0; i < n; i++) {
        rbuf_append(out, "*5\r\n", 4);
        reply_int(out, per[i].limited);
        reply_int(out, per[i].limit);
        reply_int(out, per[i].remaining);
        reply_int(out, per[i].retry_after);
        reply_int(out, per[i].reset_after);
    }
}

static void cmd_throttle_all(struct cmd_ctx *x)
{
    struct throttle_all_req req;
    char err[160];
    if (throttle_all_parse(x->argc, (const char *const *)x->argv, x->lens, &req, err,
                           sizeof err) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    /* The dispatcher's count of keys is the same rule as the parser's (cmd_run.c key_span). */
    if (x->nkeys != req.n) {
        reply_error(x->out, "ERR Number of keys can't be greater than number of args");
        return;
    }
    /* A waiting THROTTLE.ALL queues on its first key (COMMANDS.md, "Waiting for capacity"). */
    int may_wait = req.has_wait && wait_may(x);
    if (may_wait && wait_behind(x, &x->keys[0], req.wait_ms))
        return;
    int has[THROTTLE_ALL_MAX_KEYS];
    int64_t tat[THROTTLE_ALL_MAX_KEYS];
    for (int i = 0; i < req.n; i++) {
        int rc = ks_gcra_read(x->env->ks, &x->keys[i], x->now, &has[i], &tat[i]);
        if (rc != KS_OK) {
            reply_ks_error(x->out, rc);
            return;
        }
    }
    struct gcra_result per[THROTTLE_ALL_MAX_KEYS];
    struct throttle_all_result res;
    const char *why;
    int bad;
    if (throttle_all_decide(&req, x->now, has, tat, per, &res, &why, &bad) != 0) {
        reply_errorf(x->out, "ERR limit %d: %s", bad, why);
        return;
    }
    if (res.limited && may_wait && wait_park(x, &x->keys[0], req.wait_ms, res.wait_ns))
        return;
    int near = 0;
    if (!res.limited) {
        /* All or nothing under maxmemory too: asked once, before the first write. */
        int creates = 0;
        for (int i = 0; i < req.n; i++) {
            creates |= per[i].store && !has[i];
            near |= per[i].remaining <= per[i].limit / 10;
        }
        if (creates && ks_over_maxmemory(x->env->ks)) {
            reply_ks_error(x->out, KS_OOM);
            return;
        }
        for (int i = 0; i < req.n; i++)
            if (per[i].store) {
                ks_gcra_write(x->env->ks, &x->keys[i], x->now, per[i].new_tat);
                notify_key(NOTIFY_LIMITER, "throttle.all", &x->keys[i]);
            }
    } else {
        notify_key(NOTIFY_LIMITER, "limited", &x->keys[res.index]);
    }
    limiter_stats_count_key(x, LIM_THROTTLE_ALL, !res.limited, near,
                            res.limited ? &x->keys[res.index] : NULL);
    reply_all(x->out, &res, per, req.n);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_throttle_all_table[] = {
    {"throttle.all", -8, CMD_WRITE | CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY | CMD_NUMKEYS | CMD_NUMKEYS_AT1, 0, 0, 0,
     "write", cmd_throttle_all,
     {.summary = "Applies several GCRA rate limits, one per key, taking the request from all of "
                 "them or from none", .since = "0.2.0", .group = "generic",
      .complexity = "O(N) where N is the number of keys",
      .args = "numkeys:integer *key:key *limit{max_burst:integer count:integer period:integer "
              "quantity:integer}=LIMIT ?timeout:integer=WAIT",
      .keyflags = "RW access update"}},
};
const int cmd_throttle_all_count =
    (int)(sizeof(cmd_throttle_all_table) / sizeof(cmd_throttle_all_table[0]));
