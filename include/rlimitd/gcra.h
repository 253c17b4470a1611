/* gcra.h - the Generic Cell Rate Algorithm of CL.THROTTLE (COMMANDS.md, CL.THROTTLE).
 *
 * Pure arithmetic in int64 nanoseconds: no I/O, no allocation, no clock. The caller reads the
 * clock once and passes `now`; the caller stores the resulting TAT. */
#ifndef RLIMITD_GCRA_H
#define RLIMITD_GCRA_H

#include <stddef.h>
#include <stdint.h>

/* Validated, derived parameters of one CL.THROTTLE call. */
struct gcra_limits {
    int64_t ei;    /* emission interval: period_ns / count */
    int64_t dvt;   /* delay variation tolerance: ei * (max_burst + 1) */
    int64_t inc;   /* ei * quantity */
    int64_t limit; /* max_burst + 1 */
};

/* The outcome of one step, in the units of the reply. */
struct gcra_result {
    int limited;         /* 1 if the request is refused */
    int64_t limit;       /* max_burst + 1 */
    int64_t remaining;   /* in [0, limit] */
    int64_t retry_after; /* seconds, rounded up at ms granularity; -1 for "not applicable" */
    int64_t reset_after; /* seconds, rounded up at ms granularity */
    int store;           /* 1 if the caller must store new_tat (and expire the key at it) */
    int64_t new_tat;     /* valid when store is 1 */
    int64_t wait_ns;     /* exactly how long until the same request would pass: 0 when allowed,
                          * -1 when it never can (retry_after -1), INT64_MAX past int64 ns */
};

/* Validates the numeric arguments (already parsed as integers) and derives the limits.
 * Returns 0, or -1 with *err set to a static message naming the argument (the text after
 * "ERR "), e.g. "invalid max_burst: must be >= 0". */
int gcra_prepare(int64_t max_burst, int64_t count, int64_t period_s, int64_t quantity,
                 struct gcra_limits *out, const char **err);

/* One GCRA decision at time now_ns. has_tat says whether a stored TAT exists (tat is ignored
 * otherwise; a TAT before now_ns counts as absent; a microsecond TAT past 2262, see "the stored
 * TAT" below, is the range error). Returns 0, or -1 with *err set if now +
 * tolerance would overflow int64 (only for absurd clocks or parameters). On success r->store is 1
 * only for an allowed call with quantity > 0: a limited call and a peek (quantity 0) store nothing
 * (COMMANDS.md, CL.THROTTLE). */
int gcra_step(const struct gcra_limits *l, int64_t now_ns, int has_tat, int64_t tat,
              struct gcra_result *r, const char **err);

/* COMMANDS.md, CL.THROTTLE rounding: ns -> ms (floor) -> seconds rounded up. ns must be >= 0. */
int64_t gcra_ceil_seconds(int64_t ns);

/* ---- the stored TAT ----
 * A key's state is one int64, shared by CL.THROTTLE and GCRA (gcra_redis.h). A value > 0 is the
 * TAT in nanoseconds since the epoch. GCRA keeps Redis's microsecond arithmetic, whose TATs reach
 * the year 294,247 where nanoseconds end in 2262 (e.g. `GCRA k 1 1 999999999999`: one token per
 * 31,700 years); such a TAT is stored as minus its microseconds (a value < 0). The store cannot
 * keep an expiry past 2262 either, so a key holding one has none (gcra_tat_expire). CL.THROTTLE
 * refuses such a key with its range error: its nanosecond arithmetic cannot reach it. */

/* The largest TAT, in microseconds, that is kept in nanoseconds. */
#define GCRA_TAT_NS_MAX_US (INT64_MAX / 1000)

/* The stored form of a TAT of tat_us microseconds (tat_us >= 1). */
int64_t gcra_tat_from_us(int64_t tat_us);
/* The expiry (ns since the epoch) of a key holding the stored TAT v: v itself, or 0 (none) for
 * a TAT past the nanosecond range. */
static inline int64_t gcra_tat_expire(int64_t v)
{
    return v > 0 ? v : 0;
}
/* The TAT as GET shows it, in nanoseconds as decimal text (beyond int64 for a microsecond TAT:
 * its microseconds followed by "000"), into buf (at least GCRA_TAT_TEXT_MAX bytes, not
 * NUL-terminated). Returns the length. */
#define GCRA_TAT_TEXT_MAX 24
size_t gcra_tat_format(char *buf, int64_t v);
/* Reads that text back (rlimit.so keeps the state as a Redis string): 0 and *v, or -1 when the
 * text is not a canonical positive decimal that gcra_tat_format could have written. */
int gcra_tat_parse(const char *s, size_t len, int64_t *v);

#endif
