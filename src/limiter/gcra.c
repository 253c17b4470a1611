/* gcra.c - the Generic Cell Rate Algorithm of CL.THROTTLE (COMMANDS.md, CL.THROTTLE).
 *
 * Everything is int64 nanoseconds. redis-cell wraps around or panics on absurd arguments; we
 * check every multiplication and addition instead and reject the call with a message naming the
 * argument (COMMANDS.md, CL.THROTTLE, "Validation"). Valid input gives redis-cell's answers exactly. */
#include "rlimitd/gcra.h"
#include "rlimitd/clock.h"
#include "rlimitd/util.h"

#include <stddef.h>
#include <string.h>


int gcra_prepare(int64_t max_burst, int64_t count, int64_t period_s, int64_t quantity,
                 struct gcra_limits *out, const char **err)
{
    int64_t period_ns, ei, limit, dvt, inc;

    if (max_burst < 0) {
        *err = "invalid max_burst: must be >= 0";
        return -1;
    }
    if (count < 1) {
        *err = "invalid count: must be >= 1";
        return -1;
    }
    if (period_s < 1) {
        *err = "invalid period: must be >= 1";
        return -1;
    }
    if (quantity < 0) {
        *err = "invalid quantity: must be >= 0";
        return -1;
    }
    if (__builtin_mul_overflow(period_s, CLOCK_NS_PER_SEC, &period_ns)) {
        *err = "period too large";
        return -1;
    }
    /* COMMANDS.md, CL.THROTTLE: integer division equals redis-cell's truncated float quotient for sane periods.
     * An interval of 0 would let any number of requests through, so it is an error. */
    ei = period_ns / count;
    if (ei < 1) {
        *err = "count too large for period: emission interval below 1ns";
        return -1;
    }
    if (__builtin_add_overflow(max_burst, 1, &limit) || __builtin_mul_overflow(ei, limit, &dvt)) {
        *err = "max_burst too large: tolerance overflows";
        return -1;
    }
    if (__builtin_mul_overflow(ei, quantity, &inc)) {
        *err = "quantity too large: increment overflows";
        return -1;
    }
    out->ei = ei;
    out->dvt = dvt;
    out->inc = inc;
    out->limit = limit;
    return 0;
}

int64_t gcra_ceil_seconds(int64_t ns)
{
    /* COMMANDS.md, CL.THROTTLE: truncate to whole milliseconds first, as redis-cell does, then round up to
     * seconds. So 1,000,000,001 ns is 1 s but 1,001,000,000 ns is 2 s. */
    int64_t ms = ns / CLOCK_NS_PER_MS;

    return ms / 1000 + (ms % 1000 != 0);
}

/* floor((dvt - ttl) / ei) clamped to [0, limit], or 0 unless dvt - ttl > -ei (COMMANDS.md, CL.THROTTLE). ttl and
 * dvt are both >= 0, so dvt - ttl cannot overflow. Any negative quotient clamps to 0, hence
 * truncating division gives the same answer as floor here. */
static int64_t remaining_of(const struct gcra_limits *l, int64_t ttl)
{
    int64_t next = l->dvt - ttl;
    int64_t rem;

    if (next <= -l->ei)
        return 0;
    rem = next / l->ei;
    if (rem < 0)
        return 0;
    return rem > l->limit ? l->limit : rem;
}

int gcra_step(const struct gcra_limits *l, int64_t now_ns, int has_tat, int64_t tat,
              struct gcra_result *r, const char **err)
{
    static const char range_err[] = "TAT out of range: clock or arguments too large";
    int64_t new_tat, allow_at, ttl, wait = 0;
    int limited;

    /* A microsecond TAT past 2262 (gcra.h, "the stored TAT"): nanoseconds cannot reach it. */
    if (has_tat && tat < 0) {
        *err = range_err;
        return -1;
    }
    /* A missing or passed TAT means the bucket is full: start from now. */
    if (!has_tat || tat < now_ns)
        tat = now_ns;
    /* From here tat >= now_ns, so the rule's max(now, tat) is tat. These can only overflow with a
     * clock or a stored TAT near the ends of int64; report that rather than wrap. */
    if (__builtin_add_overflow(tat, l->inc, &new_tat) ||
        __builtin_sub_overflow(new_tat, l->dvt, &allow_at) ||
        __builtin_sub_overflow(tat, now_ns, &ttl)) {
        *err = range_err;
        return -1;
    }
    limited = now_ns < allow_at;
    if (limited) {
        /* Nothing changes; ttl stays tat - now. */
        if (__builtin_sub_overflow(allow_at, now_ns, &wait)) {
            *err = range_err;
            return -1;
        }
    } else {
        /* new_tat - now_ns is in [0, dvt]: new_tat >= tat >= now_ns and allow_at <= now_ns. */
        ttl = new_tat - now_ns;
    }

    r->limited = limited;
    r->limit = l->limit;
    r->remaining = remaining_of(l, ttl);
    /* A request larger than the whole tolerance can never succeed: no retry time (COMMANDS.md, CL.THROTTLE). */
    r->retry_after = limited && l->inc <= l->dvt ? gcra_ceil_seconds(wait) : -1;
    r->wait_ns = !limited ? 0 : l->inc <= l->dvt ? wait : -1;
    r->reset_after = gcra_ceil_seconds(ttl);
    /* A limited call changes nothing; a peek (quantity 0) must not create a key (COMMANDS.md, CL.THROTTLE) and
     * on an existing key would store the TAT it already has. */
    r->store = !limited && l->inc != 0;
    r->new_tat = new_tat;
    return 0;
}

/* ---- the stored TAT (gcra.h) ---- */

int64_t gcra_tat_from_us(int64_t tat_us)
{
    return tat_us <= GCRA_TAT_NS_MAX_US ? tat_us * 1000 : -tat_us;
}

size_t gcra_tat_format(char *buf, int64_t v)
{
    if (v >= 0)
        return util_fmt_i64(buf, v);
    /* -v >= 1: at most 19 digits, then the three zeros of its nanoseconds. */
    size_t n = util_fmt_i64(buf, -v);
    memcpy(buf + n, "000", 3);
    return n + 3;
}

int gcra_tat_parse(const char *s, size_t len, int64_t *v)
{
    int64_t n;
    if (util_parse_i64(s, len, &n) == 0)
        return n >= 1 ? (*v = n, 0) : -1;
    /* Past int64: only the microsecond form, whose value in us is itself past the ns range. */
    if (len < 4 || len > 22 || memcmp(s + len - 3, "000", 3) != 0 ||
        util_parse_i64(s, len - 3, &n) != 0 || n <= GCRA_TAT_NS_MAX_US)
        return -1;
    *v = -n;
    return 0;
}
