/* gcra_redis.h - GCRA, Redis's own rate-limit command (COMMANDS.md, GCRA), beside CL.THROTTLE's.
 *
 *   GCRA key max_burst tokens_per_period period [TOKENS n]
 *
 * Same algorithm as gcra.h, Redis's arithmetic: integer microseconds, `period` a float in seconds,
 * the emission interval rounded to the nearest microsecond. Pure: no I/O, no allocation, no
 * clock. Shared by the daemon (cmd_limit.c, store/ks_values.c) and rlimit.so (module_cmds.c).
 *
 * One state per key: the stored value is CL.THROTTLE's TAT in nanoseconds. GCRA reads it rounded
 * up to a whole microsecond (never earlier than CL.THROTTLE's own reading) and writes whole
 * microseconds times 1000, which CL.THROTTLE reads exactly; a TAT past the nanoseconds' end
 * (2262) in microseconds instead (gcra.h, "the stored TAT"). */
#ifndef RLIMITD_GCRA_REDIS_H
#define RLIMITD_GCRA_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/gcra.h"

/* The most arguments, the command name counted: GCRA key max_burst tpp period TOKENS n. */
#define GCRA_REDIS_MAX_ARGC 7
/* The fewest (the command tables' arity -5). */
#define GCRA_REDIS_MIN_ARGC 5
/* period must be below this many seconds (Redis's bound). */
#define GCRA_REDIS_MAX_PERIOD 1e12

/* The error texts, after "ERR " (Redis's, word for word). */
#define GCRA_REDIS_ERR_ARITY "wrong number of arguments for 'gcra' command"
#define GCRA_REDIS_ERR_OVERFLOW_TOKENS                                                             \
    "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and "     \
    "TOKENS would cause an overflow"
#define GCRA_REDIS_ERR_OVERFLOW_BURST                                                              \
    "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and "     \
    "max_burst would cause an overflow"

/* The parsed arguments of one call. */
struct gcra_redis_args {
    int64_t capacity;          /* max_burst + 1; INT64_MAX for max_burst INT64_MAX, as Redis */
    int64_t tokens_per_period; /* >= 1 */
    double period;             /* seconds, in (0, 1e12) */
    int64_t tokens;            /* TOKENS n, >= 1; default 1 */
};

/* Parses argv[0..argc) (argv[0] the command name, argv[1] the key; the bytes need not be NUL
 * terminated) with Redis's rules, in Redis's order: arity, max_burst, tokens_per_period, period,
 * TOKENS. Returns 0, or -1 with *err set to a static text after "ERR ". */
int gcra_redis_parse(int argc, const char *const *argv, const size_t *lens,
                     struct gcra_redis_args *a, const char **err);

/* The emission interval in whole microseconds: period·1e6 / tokens_per_period rounded half up,
 * at least 1 (Redis computes it in double precision; so does this, for the same values). */
int64_t gcra_redis_interval_us(const struct gcra_redis_args *a);

/* One GCRA decision at now_ns. has_tat says whether the key holds GCRA state; tat_ns is its
 * stored TAT (gcra.h; ignored otherwise). Returns 0 with *r filled (r->limit is the capacity;
 * r->new_tat the stored form of a whole number of microseconds, to store with expiry at
 * gcra_tat_expire of it when r->store), or -1 with *err one of the overflow texts above: either
 * product EI·TOKENS, EI·capacity, or max(now, TAT) + inc in microseconds, as Redis checks them. */
int gcra_redis_step(const struct gcra_redis_args *a, int64_t now_ns, int has_tat, int64_t tat_ns,
                    struct gcra_result *r, const char **err);

#endif
