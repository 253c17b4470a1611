/* isallowed.h - ISALLOWED's request rules (COMMANDS.md "ISALLOWED"), shared by the daemon and the Redis module:
 * the state key it derives from its arguments and the validation of period and max_count.
 *
 * Pure: no I/O, no allocation. The window arithmetic itself is swlog.h. */
#ifndef RLIMITD_ISALLOWED_H
#define RLIMITD_ISALLOWED_H

#include <stddef.h>
#include <stdint.h>

/* The longest period: 100 years, so that expiry arithmetic in ns stays far from int64 overflow
 * for any wall clock this century. */
#define ISALLOWED_MAX_PERIOD_S 3153600000LL

/* The latest attempt timestamp a window log may hold, in ms since the epoch: the last ms whose ns
 * still fit int64 (year 2262), so that timestamp + the longest period cannot overflow. Only
 * state written from outside (the module's effect commands and RDB/AOF) can come near it. */
#define ISALLOWED_MAX_TS_MS (INT64_MAX / 1000000)

/* The default ceiling on max_count (the daemon's window-max-count, the module's load argument). */
#define ISALLOWED_DEFAULT_MAX_COUNT 1000000LL

/* Length of the state key "hist:{user}:action" for a user and action of these lengths. */
size_t isallowed_key_len(size_t ulen, size_t alen);

/* Writes the state key into buf (room for isallowed_key_len bytes); returns its length. */
size_t isallowed_key(char *buf, const char *user, size_t ulen, const char *action, size_t alen);

/* Validates period (seconds) and max_count against the configured ceiling. Returns 0 and sets
 * *period_ms, or -1 with the error text (after "ERR ") written to err (errlen bytes, NUL
 * terminated), naming the argument as ISALLOWED's clients see it. */
int isallowed_prepare(int64_t period_s, int64_t max_count, int64_t ceiling, int64_t *period_ms,
                      char *err, size_t errlen);

#endif
