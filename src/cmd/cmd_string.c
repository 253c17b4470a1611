/* cmd_string.c - the fixed-window recipe's commands: GET, SET, INCR, INCRBY, DECR, DECRBY. */
#include "cmd_internal.h"
#include "rlimitd/clock.h"

#include <limits.h>
#include <string.h>

#include "rlimitd/util.h"


static void cmd_get(struct cmd_ctx *x)
{
    struct ks_value v;
    switch (ks_get(x->env->ks, &x->keys[0], x->now, &v)) {
    case KS_NONE:
        reply_nil(x->out);
        break;
    case KS_GCRA: /* COMMANDS.md: redis-cell users read the TAT in ns as a decimal string */
    case KS_INT:
        reply_bulk_i64(x->out, v.i);
        break;
    case KS_RAW:
        reply_bulk(x->out, v.p, v.len);
        break;
    case KS_SWLOG:
    case KS_ZSET:
        reply_ks_error(x->out, KS_WRONGTYPE);
        break;
    }
}

/* Converts a relative or absolute expiry argument to absolute ns. unit_ns is 1e9 (EX, EXAT) or
 * 1e6 (PX, PXAT). Returns 0, or -1 if not positive or it overflows. */
static int expire_arg(int64_t v, int64_t unit_ns, int absolute, int64_t now, int64_t *at)
{
    int64_t ns;
    if (v <= 0 || __builtin_mul_overflow(v, unit_ns, &ns))
        return -1;
    if (absolute) {
        *at = ns;
        return 0;
    }
    return __builtin_add_overflow(now, ns, at) ? -1 : 0;
}

static void cmd_set(struct cmd_ctx *x)
{
    int flags = 0;
    int64_t at = 0;
    int have_expire = 0;
    for (int i = 3; i < x->argc; i++) {
        int64_t unit = 0;
        int absolute = 0;
        if (arg_is(x, i, "NX") && !(flags & KS_SET_XX)) {
            flags |= KS_SET_NX;
        } else if (arg_is(x, i, "XX") && !(flags & KS_SET_NX)) {
            flags |= KS_SET_XX;
        } else if (arg_is(x, i, "KEEPTTL") && !have_expire) {
            flags |= KS_SET_KEEPTTL;
        } else if (arg_is(x, i, "EX") || arg_is(x, i, "PX") || arg_is(x, i, "EXAT") ||
                   arg_is(x, i, "PXAT")) {
            unit = (x->argv[i][0] | 0x20) == 'e' ? CLOCK_NS_PER_SEC : CLOCK_NS_PER_MS;
            absolute = x->lens[i] == 4;
            if (have_expire || (flags & KS_SET_KEEPTTL) || i + 1 >= x->argc) {
                reply_syntax_error(x->out);
                return;
            }
            int64_t v;
            if (arg_i64(x, ++i, &v))
                return;
            if (expire_arg(v, unit, absolute, x->now, &at) != 0) {
                reply_error(x->out, "ERR invalid expire time in 'set' command");
                return;
            }
            have_expire = 1;
        } else {
            reply_syntax_error(x->out);
            return;
        }
    }
    /* An absolute time already past: Redis stores and expires at once; so do we, by
     * deleting whatever was there when the write would have happened. */
    if (have_expire && at <= x->now) {
        if (!(flags & (KS_SET_NX | KS_SET_XX)) ||
            ((flags & KS_SET_XX) && ks_get(x->env->ks, &x->keys[0], x->now, NULL) != KS_NONE) ||
            ((flags & KS_SET_NX) && ks_get(x->env->ks, &x->keys[0], x->now, NULL) == KS_NONE)) {
            ks_del(x->env->ks, &x->keys[0], x->now);
            reply_ok(x->out);
        } else {
            reply_nil(x->out);
        }
        return;
    }
    int rc = ks_set(x->env->ks, &x->keys[0], x->now, x->argv[2], x->lens[2], at, flags);
    if (rc < 0)
        reply_ks_error(x->out, rc);
    else if (rc == 0)
        reply_nil(x->out);
    else
        reply_ok(x->out);
}

static void incr_by(struct cmd_ctx *x, int64_t delta)
{
    int64_t v;
    int rc = ks_incrby(x->env->ks, &x->keys[0], x->now, delta, &v);
    if (rc != KS_OK)
        reply_ks_error(x->out, rc);
    else
        reply_int(x->out, v);
}

static void cmd_incr(struct cmd_ctx *x)
{
    incr_by(x, 1);
}

static void cmd_decr(struct cmd_ctx *x)
{
    incr_by(x, -1);
}

static void cmd_incrby(struct cmd_ctx *x)
{
    int64_t d;
    if (arg_i64(x, 2, &d) == 0)
        incr_by(x, d);
}

static void cmd_decrby(struct cmd_ctx *x)
{
    int64_t d;
    if (arg_i64(x, 2, &d))
        return;
    if (d == INT64_MIN) {
        reply_error(x->out, "ERR decrement would overflow");
        return;
    }
    incr_by(x, -d);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_string_table[] = {
    {"get", 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "read string fast", cmd_get,
     {.summary = "Returns the string value of a key", .since = "1.0.0", .group = "string",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RO access"}},
    {"set", -3, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write string slow", cmd_set,
     {.summary = "Sets the string value of a key, with an optional expiry and existence condition",
      .since = "1.0.0", .group = "string", .complexity = "O(1)",
      .args = "key:key value:string ?condition(nx=NX xx=XX) ?expiration(seconds:integer=EX "
              "milliseconds:integer=PX unix-time-seconds:unix-time=EXAT "
              "unix-time-milliseconds:unix-time=PXAT keepttl=KEEPTTL)",
      .keyflags = "RW access update variable_flags", .resolved = "OW update"}},
    {"incr", 2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_incr,
     {.summary = "Adds one to the integer value of a key", .since = "1.0.0", .group = "string",
      .complexity = "O(1)", .args = "key:key", .keyflags = "RW access update"}},
    {"incrby", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_incrby,
     {.summary = "Adds an amount to the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key increment:integer",
      .keyflags = "RW access update"}},
    {"decr", 2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_decr,
     {.summary = "Subtracts one from the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key", .keyflags = "RW access update"}},
    {"decrby", 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "write string fast", cmd_decrby,
     {.summary = "Subtracts an amount from the integer value of a key", .since = "1.0.0",
      .group = "string", .complexity = "O(1)", .args = "key:key decrement:integer",
      .keyflags = "RW access update"}},
};
const int cmd_string_count = (int)(sizeof(cmd_string_table) / sizeof(cmd_string_table[0]));
