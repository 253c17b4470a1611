/* isallowed.c - ISALLOWED's state key and argument rules (COMMANDS.md "ISALLOWED"), one copy for every front end
 * (the daemon's command layer and the Redis module) so their keys and errors cannot drift. */
#include "rlimitd/isallowed.h"

#include <stdio.h>
#include <string.h>

size_t isallowed_key_len(size_t ulen, size_t alen)
{
    return ulen + alen + 8;
}

size_t isallowed_key(char *buf, const char *user, size_t ulen, const char *action, size_t alen)
{
    /* COMMANDS.md "ISALLOWED": the recipe's key, with the user as a Redis hash tag so that cluster clients, which
     * route ISALLOWED by its first argument, land on the node that owns the state key. */
    memcpy(buf, "hist:{", 6);
    memcpy(buf + 6, user, ulen);
    buf[6 + ulen] = '}';
    buf[7 + ulen] = ':';
    memcpy(buf + 8 + ulen, action, alen);
    return isallowed_key_len(ulen, alen);
}

int isallowed_prepare(int64_t period_s, int64_t max_count, int64_t ceiling, int64_t *period_ms,
                      char *err, size_t errlen)
{
    if (period_s < 1 || period_s > ISALLOWED_MAX_PERIOD_S) {
        snprintf(err, errlen, "invalid period: must be between 1 and %lld seconds",
                 (long long)ISALLOWED_MAX_PERIOD_S);
        return -1;
    }
    if (max_count < 0 || max_count > ceiling) {
        snprintf(err, errlen, "invalid max_count: must be between 0 and %lld (window-max-count)",
                 (long long)ceiling);
        return -1;
    }
    *period_ms = period_s * 1000;
    return 0;
}
