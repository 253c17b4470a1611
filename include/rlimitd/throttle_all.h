/* throttle_all.h - THROTTLE.ALL (COMMANDS.md, THROTTLE.ALL): several CL.THROTTLE limits, one per
 * key, decided together: the request is taken from every limit or from none.
 *
 *   THROTTLE.ALL numkeys key [key ...] LIMIT max_burst count period quantity [LIMIT ...]
 *                [WAIT timeout_ms]
 *
 * Pure: argument rules and the decision over the keys' TATs, which the caller reads and, when
 * admitted, stores (the daemon's cmd_throttle_all.c, rlimit.so's module_multi.c). Each limit is
 * CL.THROTTLE's arithmetic (gcra.h), so a limit alone answers what CL.THROTTLE answers. */
#ifndef RLIMITD_THROTTLE_ALL_H
#define RLIMITD_THROTTLE_ALL_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/gcra.h"

/* The most keys (limits) in one call. */
#define THROTTLE_ALL_MAX_KEYS 32
/* The fewest arguments, the name counted: THROTTLE.ALL 1 k LIMIT b c p q. */
#define THROTTLE_ALL_MIN_ARGC 8
/* Where the keys start: argv[1] counts them, argv[2] is the first. */
#define THROTTLE_ALL_FIRST_KEY 2

/* The parsed arguments of one call. */
struct throttle_all_req {
    int n;                                       /* keys = limits, 1..THROTTLE_ALL_MAX_KEYS */
    struct gcra_limits lim[THROTTLE_ALL_MAX_KEYS]; /* limit i is key i's */
    int has_wait;                                /* WAIT was given */
    int64_t wait_ms;                             /* its timeout, 0 = none (wait.h) */
};

/* Parses argv[0..argc) (argv[0] the command name; the bytes need not be NUL terminated).
 * Returns 0, or -1 with the error text (after "ERR ") in err (errlen bytes, NUL terminated).
 * Checks, in order: numkeys (an integer, 1..32, not past the arguments), the keys distinct,
 * then each LIMIT in turn (the word, four integers, gcra_prepare's rules, named by the limit's
 * index), then what follows the last LIMIT (nothing, or WAIT and its timeout). */
int throttle_all_parse(int argc, const char *const *argv, const size_t *lens,
                       struct throttle_all_req *req, char *err, size_t errlen);

/* The decision, in the units of the reply. */
struct throttle_all_result {
    int limited;         /* 1 if any limit refused: then nothing is taken from any */
    int index;           /* the first limit that refused, -1 if none */
    int64_t retry_after; /* seconds until every limit admits the request (CL.THROTTLE's
                          * rounding), -1 when admitted or when some limit never can */
    int64_t wait_ns;     /* the same exactly: 0 admitted, -1 never, INT64_MAX past int64 */
};

/* Decides the request at now_ns. has[i]/tat[i] are key i's state as gcra_step takes it. Fills
 * per[i] with what CL.THROTTLE would answer for limit i after the decision: when admitted, the
 * allowed step (per[i].store says whether to store per[i].new_tat); when refused, nothing is
 * stored (every store is 0) and a limit that would admit alone answers as a peek of its state
 * (limited 0, the remaining and reset it has, retry -1), one that refuses its limited reply.
 * Returns 0, or -1 with *err (gcra_step's range error) and *err_index the limit. */
int throttle_all_decide(const struct throttle_all_req *req, int64_t now_ns, const int *has,
                        const int64_t *tat, struct gcra_result *per,
                        struct throttle_all_result *out, const char **err, int *err_index);

#endif
