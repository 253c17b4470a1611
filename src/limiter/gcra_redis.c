/* gcra_redis.c - GCRA, Redis's own rate-limit command (COMMANDS.md, GCRA).
 *
 * The algorithm is CL.THROTTLE's (gcra.c); what differs is Redis's arithmetic, which clients of
 * the command expect to the microsecond:
 *   EI   = round(period·1e6 / tokens_per_period), at least 1 µs   (double, rounded half up)
 *   DVT  = EI · capacity, capacity = max_burst + 1
 *   inc  = EI · TOKENS
 *   new  = max(now, TAT) + inc; limited when now < new - DVT
 *   retry_after = ceil(seconds until new - DVT), or -1 if allowed or inc > DVT (never passes)
 *   reset_after = ceil(ttl seconds), ttl = TAT - now if limited, else new - now
 *   remaining   = floor((DVT - ttl) / EI) if DVT - ttl > -EI, else 0
 * Seconds are rounded up from whole microseconds in double precision, as Redis does.
 *
 * The state is CL.THROTTLE's nanosecond TAT (gcra_redis.h says how the two units meet). A TAT
 * past the nanoseconds' end (2262) is kept in microseconds (gcra.h, "the stored TAT"), so every
 * TAT Redis's microsecond arithmetic reaches is reached here too, up to its own end. */
#include "rlimitd/gcra_redis.h"

#include <string.h>

#include "rlimitd/util.h"

#define NS_PER_US 1000

static const char not_int[] = "value is not an integer or out of range";

int gcra_redis_parse(int argc, const char *const *argv, const size_t *lens,
                     struct gcra_redis_args *a, const char **err)
{
    int64_t max_burst;

    if (argc < GCRA_REDIS_MIN_ARGC || argc > GCRA_REDIS_MAX_ARGC) {
        *err = GCRA_REDIS_ERR_ARITY;
        return -1;
    }
    /* Redis's getPositiveLongFromObjectOrReply and getRangeLongFromObjectOrReply texts. */
    if (util_parse_i64(argv[2], lens[2], &max_burst) != 0) {
        *err = not_int;
        return -1;
    }
    if (max_burst < 0) {
        *err = "value is out of range, must be positive";
        return -1;
    }
    /* Redis saturates: max_burst INT64_MAX keeps capacity INT64_MAX. */
    a->capacity = max_burst < INT64_MAX ? max_burst + 1 : INT64_MAX;
    if (util_parse_i64(argv[3], lens[3], &a->tokens_per_period) != 0) {
        *err = not_int;
        return -1;
    }
    if (a->tokens_per_period < 1) {
        *err = "value is out of range, value must between 1 and 9223372036854775807";
        return -1;
    }
    if (util_parse_double(argv[4], lens[4], &a->period) != 0) {
        *err = "value is not a valid float";
        return -1;
    }
    /* Written so that NaN could not pass either (util_parse_double refuses it anyway). */
    if (!(a->period > 0 && a->period < GCRA_REDIS_MAX_PERIOD)) {
        *err = "period must be > 0 and < 1e12";
        return -1;
    }
    a->tokens = 1;
    if (argc >= 6) {
        /* Redis compares the C string, which ends at an embedded NUL: "TOKENS\0x" is TOKENS. */
        size_t len = strnlen(argv[5], lens[5]);
        if (!util_eq_nocase(argv[5], len, "tokens")) {
            *err = "syntax error";
            return -1;
        }
        if (argc == 6) {
            *err = "Missing TOKENS value";
            return -1;
        }
        if (util_parse_i64(argv[6], lens[6], &a->tokens) != 0) {
            *err = not_int;
            return -1;
        }
        if (a->tokens < 1) {
            *err = "value is out of range, value must between 1 and 9223372036854775807";
            return -1;
        }
    }
    return 0;
}

int64_t gcra_redis_interval_us(const struct gcra_redis_args *a)
{
    /* period < 1e12 s, so the quotient is below 1e18 µs and the conversion cannot overflow. */
    double period_us = a->period * 1000000.0;
    int64_t ei = (int64_t)(period_us / (double)a->tokens_per_period + 0.5);

    return ei > 0 ? ei : 1;
}

/* ceil(us / 1e6) in double, as Redis rounds seconds; us >= 0, so the quotient is below 9.3e12
 * and the truncation to int64 is exact. */
static int64_t ceil_seconds(int64_t us)
{
    double s = (double)us / 1000000.0;
    int64_t t = (int64_t)s;

    return (double)t < s ? t + 1 : t;
}

int gcra_redis_step(const struct gcra_redis_args *a, int64_t now_ns, int has_tat, int64_t tat_ns,
                    struct gcra_result *r, const char **err)
{
    int64_t ei = gcra_redis_interval_us(a), dvt, inc, now, tat, new_tat, allow_at, ttl, next;

    /* Redis's order: the TOKENS product, then the capacity product. Both operands are >= 1, so
     * these are exactly "the product exceeds INT64_MAX". */
    if (__builtin_mul_overflow(ei, a->tokens, &inc)) {
        *err = GCRA_REDIS_ERR_OVERFLOW_TOKENS;
        return -1;
    }
    if (__builtin_mul_overflow(ei, a->capacity, &dvt)) {
        *err = GCRA_REDIS_ERR_OVERFLOW_BURST;
        return -1;
    }
    now = now_ns / NS_PER_US;
    /* Rounded up, so a CL.THROTTLE TAT between two microseconds is never read as earlier; a
     * microsecond TAT (< 0) as it is. A TAT at or before now (an absent key's, or one about to
     * expire) counts as now: max(now, TAT). */
    if (!has_tat)
        tat = now;
    else if (tat_ns < 0)
        tat = -tat_ns;
    else
        tat = tat_ns / NS_PER_US + (tat_ns % NS_PER_US > 0);
    if (tat < now)
        tat = now;
    /* Redis's one check of the sum: it must fit its microseconds. */
    if (__builtin_add_overflow(tat, inc, &new_tat)) {
        *err = GCRA_REDIS_ERR_OVERFLOW_TOKENS;
        return -1;
    }
    /* new_tat >= 0 and dvt >= 0: no overflow below. */
    allow_at = new_tat - dvt;
    r->limited = now < allow_at;
    r->limit = a->capacity;
    r->retry_after = -1;
    r->wait_ns = 0;
    if (r->limited) {
        r->wait_ns = -1;
        if (inc <= dvt) {
            r->retry_after = ceil_seconds(allow_at - now);
            /* From the clock's own nanoseconds: now was floored to the microsecond. */
            r->wait_ns = allow_at - now > INT64_MAX / NS_PER_US - 1
                             ? INT64_MAX
                             : (allow_at - now) * NS_PER_US - now_ns % NS_PER_US;
        }
        ttl = tat - now;
    } else {
        ttl = new_tat - now;
    }
    /* ttl >= 0 and dvt >= 0, so next cannot overflow; next <= dvt keeps remaining <= capacity. */
    next = dvt - ttl;
    r->remaining = next > -ei ? next / ei : 0;
    r->reset_after = ceil_seconds(ttl);
    /* TOKENS >= 1, so every allowed call moves the TAT. */
    r->store = !r->limited;
    r->new_tat = gcra_tat_from_us(new_tat);
    return 0;
}
