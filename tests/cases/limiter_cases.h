/* limiter_cases.h - one table of CL.THROTTLE and ISALLOWED cases (COMMANDS.md, CL.THROTTLE and ISALLOWED), run against two
 * targets: the rlimitd daemon (tests/integration/test_limiter_cases.c) and Redis with rlimit.so
 * loaded (tests/module/test_module_cases.c). Same commands, same expected replies, so the module
 * cannot drift from the daemon.
 *
 * A step is a command line and the reply it must get, written compactly:
 *   :5            integer 5            :100..200   an integer in [100, 200]
 *   [0 16 15 -1 2] array of integers   +OK         status
 *   -ERR text     error, exactly       $text       bulk string       (nil)  nil
 *   ~pattern      the compact form of the reply matches the fnmatch(3) pattern, e.g.
 *                 "~-ERR *max_burst*"
 *   %model        no fixed value: the reply must fit the limit model (below) alone
 * Arguments are separated by single spaces; inside one, \xHH is a byte, "" alone is the empty
 * string; an argument "$LAST" is the last bulk string a step of the case got (a lease id). Two
 * directives are not commands: "@sleep MS" and "@gone KEY" (polls EXISTS until the key has
 * expired, at most 10 s).
 *
 * Time. The expected replies are what COMMANDS.md, CL.THROTTLE and ISALLOWED give for calls "in quick succession"; lc_run
 * asserts them exactly while the case (since its start or its last @gone) has run for under a
 * second. Independently of that, every CL.THROTTLE and ISALLOWED reply, and PTTL/TTL of their
 * keys, is checked against the reference models (tests/cases/limit_model.h) with the time
 * measured around each call, so a slow machine is never mistaken for a wrong server and a wrong
 * server is caught at any speed. After a second, time-dependent steps are left to the models,
 * and key counts (DBSIZE, EXISTS, DEL) may miss limiter keys the models say may have expired.
 * LC_STEP_DELAY_MS=N in the environment pauses N ms before every step: the slow-machine path,
 * on demand.
 * want_module, when set, replaces want on the module target (TYPE names the module's types, GET
 * of module state is WRONGTYPE). */
#ifndef RLIMITD_LIMITER_CASES_H
#define RLIMITD_LIMITER_CASES_H

#include <stddef.h>

#include <hiredis/hiredis.h>

struct lc_step {
    const char *cmd;
    const char *want;
    const char *want_module;
};

#define LC_MAX_STEPS 64

struct lc_case {
    const char *name;
    struct lc_step steps[LC_MAX_STEPS]; /* ends at the first step with cmd == NULL */
};

enum lc_target { LC_DAEMON, LC_MODULE };

extern const struct lc_case lc_cases[];
extern const size_t lc_case_count;

/* 0, 1, ..., lc_case_count - 1: the parameters of a Criterion ParameterizedTest over the cases. */
size_t *lc_case_indices(void);

/* Runs every step of case cs on c, failing the Criterion test at the first mismatch with the
 * case name, step number, command, expected and actual replies. */
void lc_run(redisContext *c, const struct lc_case *cs, enum lc_target target);

/* The compact form of a reply (as in the table), into buf. */
void lc_format(const redisReply *r, char *buf, size_t len);

#endif
