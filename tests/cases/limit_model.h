/* limit_model.h - reference models of CL.THROTTLE (GCRA, COMMANDS.md "CL.THROTTLE") and ISALLOWED (sliding-window log,
 * COMMANDS.md "ISALLOWED") for tests that cannot know the server's clock exactly.
 *
 * The server reads CLOCK_REALTIME once per command. A client that reads the same clock just before
 * sending a command and just after its reply arrives knows that the server's reading lies in
 * [before, after]. The models keep what the replies so far prove about a key's state as an
 * interval (the GCRA's TAT, the window's attempt times) and check that each new reply is what the
 * algorithm gives for SOME server time in the call's interval and some state in the interval kept.
 * A reply no such time explains (a lost state, an off-by-one in remaining, a wrong rounding) is
 * reported with the reason; a slow machine only widens the intervals, it never fails a check.
 * When the calls were quick the intervals are narrow and the checks are as sharp as exact values.
 *
 * Written from COMMANDS.md "CL.THROTTLE" and 3 alone: it shares no code with src/gcra.c or src/swlog.c, so a bug
 * there is not mirrored here. Pure C, no test framework: the shell tests use it through
 * tests/cases/limit_check.c. */
#ifndef RLIMITD_LIMIT_MODEL_H
#define RLIMITD_LIMIT_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_REALTIME in ns: the clock the daemon and rlimit.so read. */
int64_t lm_now_ns(void);

/* What is known about one CL.THROTTLE key: its TAT lies in [tat_lo, tat_hi] (ns), and TAT minus
 * the server time of the key's previous call lies in [rel_lo, rel_hi]; that call's server time
 * lay in [prev_before, prev_after]. The second form matters for pipelined calls, whose time
 * bounds overlap: the server serves them in order, so later calls never see an earlier time. A key
 * that is absent (never set, deleted, or expired) has a TAT far in the past: lm_gcra_reset. */
struct lm_gcra {
    int64_t tat_lo, tat_hi;
    int has_prev;
    int64_t rel_lo, rel_hi;
    int64_t prev_before, prev_after;
};

void lm_gcra_reset(struct lm_gcra *k);

/* Checks the reply r[5] of `CL.THROTTLE key max_burst count period quantity` whose server time
 * lies in [before, after] (ns), and narrows *k to what the reply proves. Returns 0, or -1 with
 * the reason in why (then *k is unchanged). Arguments must be valid (the reply an array). */
int lm_gcra_check(struct lm_gcra *k, int64_t max_burst, int64_t count, int64_t period_s,
                  int64_t quantity, int64_t before, int64_t after, const long long r[5], char *why,
                  size_t whylen);

/* GCRA (Redis's command) on the same key, with emission interval ei_us and TOKENS tokens, its
 * server time in [before, after] (ns), limited as its reply said: carries the key's state forward
 * so that later CL.THROTTLE checks stay sharp (GCRA's own reply is the case table's to check).
 * GCRA reads the TAT rounded up to whole us and the clock truncated to us, and when allowed
 * stores max(now, TAT) + ei_us * tokens in whole us; a limited call stores nothing. */
void lm_gcra_note_redis(struct lm_gcra *k, int64_t ei_us, int64_t tokens, int64_t before,
                        int64_t after, int limited);

/* The range [*lo, *hi] a PTTL of the key, read in [before, after], may answer (ms; the module
 * rounds its expiry up to whole ms and reads the time in whole ms, the daemon truncates, so
 * the ms roundings are allowed for). */
void lm_gcra_pttl_range(const struct lm_gcra *k, int64_t before, int64_t after, long long *lo,
                        long long *hi);

/* An ISALLOWED window: the newest attempts' times as ms intervals, oldest first. */
enum { LM_WINDOW_MAX = 64 };
struct lm_window {
    int n;
    int64_t lo[LM_WINDOW_MAX], hi[LM_WINDOW_MAX];
    int64_t period_ms; /* of the last call, for the expiry */
};

void lm_window_reset(struct lm_window *w);

/* Checks the reply (1 allowed, 0 denied) of `ISALLOWED user action period max_count` whose
 * server time lies in [before, after] (ns), and records the attempt (COMMANDS.md "ISALLOWED" records denied
 * attempts too). Returns 0, or -1 with the reason in why. max_count must be < LM_WINDOW_MAX. */
int lm_window_check(struct lm_window *w, int64_t period_s, int64_t max_count, int64_t before,
                    int64_t after, long long allowed, char *why, size_t whylen);

/* The range a PTTL of the window's key, read in [before, after] (ns), may answer (ms). */
void lm_window_pttl_range(const struct lm_window *w, int64_t before, int64_t after, long long *lo,
                          long long *hi);

#endif
