/* gcra.h - the Generic Cell Rate Algorithm of CL.THROTTLE (COMMANDS.md "CL.THROTTLE").
 *
 * Pure arithmetic in int64 nanoseconds: no I/O, no allocation, no clock. The caller reads the
 * clock once and passes `now`; the caller stores the resulting TAT. */
#ifndef RLIMITD_GCRA_H
#define RLIMITD_GCRA_H

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
};

/* Validates the numeric arguments (already parsed as integers) and derives the limits.
 * Returns 0, or -1 with *err set to a static message naming the argument (the text after
 * "ERR "), e.g. "invalid max_burst: must be >= 0". */
int gcra_prepare(int64_t max_burst, int64_t count, int64_t period_s, int64_t quantity,
                 struct gcra_limits *out, const char **err);

/* One GCRA decision at time now_ns. has_tat says whether a stored TAT exists (tat is ignored
 * otherwise; a TAT before now_ns counts as absent). Returns 0, or -1 with *err set if now +
 * tolerance would overflow int64 (only for absurd clocks or parameters). On success r->store is 1
 * only for an allowed call with quantity > 0: a limited call and a peek (quantity 0) store nothing
 * (COMMANDS.md "CL.THROTTLE"). */
int gcra_step(const struct gcra_limits *l, int64_t now_ns, int has_tat, int64_t tat,
              struct gcra_result *r, const char **err);

/* COMMANDS.md "CL.THROTTLE" rounding: ns -> ms (floor) -> seconds rounded up. ns must be >= 0. */
int64_t gcra_ceil_seconds(int64_t ns);

#endif
