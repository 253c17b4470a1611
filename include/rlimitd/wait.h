/* wait.h - the WAIT timeout_ms option of CL.THROTTLE, GCRA, THROTTLE.ALL and LEASE.ACQUIRE
 * (COMMANDS.md, "Waiting for capacity"): its argument rules, shared by the daemon and rlimit.so.
 * Pure. */
#ifndef RLIMITD_WAIT_H
#define RLIMITD_WAIT_H

#include <stddef.h>
#include <stdint.h>

/* The longest timeout, in ms (about 31.7 years); 0 waits without a timeout. */
#define WAIT_MAX_MS 1000000000000LL

/* Redis's texts for a blocking command's timeout (BLPOP, XREAD BLOCK), after "ERR ". */
#define WAIT_ERR_NEGATIVE "timeout is negative"
#define WAIT_ERR_RANGE "timeout is out of range"
#define WAIT_ERR_NOT_INT "timeout is not an integer or out of range"

/* Whether the word is WAIT (any case; the bytes need not be NUL terminated). */
int wait_is_option(const char *s, size_t len);

/* Parses the timeout after WAIT. Returns 0 with *ms, or -1 with *err one of the texts above. */
int wait_parse_ms(const char *s, size_t len, int64_t *ms, const char **err);

/* CL.THROTTLE and GCRA take WAIT as their last two arguments, after their own: when argv has
 * at least min_argc + 2 entries and the second to last is WAIT, *argc_out is argc less those two,
 * *has 1 and *ms the timeout (or -1 with *err when it is not one); otherwise *argc_out is argc
 * and *has 0. */
int wait_split(int argc, const char *const *argv, const size_t *lens, int min_argc,
               int *argc_out, int *has, int64_t *ms, const char **err);

#endif
