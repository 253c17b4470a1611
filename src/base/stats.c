/* stats.c - error classification for INFO's errorstat section.
 *
 * Redis counts error replies by their first word (errorstat_ERR, errorstat_WRONGTYPE, ...). The
 * codes rlimitd answers itself have an enum of their own (stats.h); the rest are OTHER here and
 * named by the caller. */
#include "rlimitd/stats.h"

#include <string.h>

static const char *const err_names[ERRSTAT_COUNT] = {
    [ERRSTAT_ERR] = "ERR",
    [ERRSTAT_WRONGTYPE] = "WRONGTYPE",
    [ERRSTAT_NOAUTH] = "NOAUTH",
    [ERRSTAT_WRONGPASS] = "WRONGPASS",
    [ERRSTAT_OOM] = "OOM",
    [ERRSTAT_NOPROTO] = "NOPROTO",
    [ERRSTAT_EXECABORT] = "EXECABORT",
    [ERRSTAT_NOSCRIPT] = "NOSCRIPT",
    [ERRSTAT_BUSY] = "BUSY",
    [ERRSTAT_NOTBUSY] = "NOTBUSY",
    [ERRSTAT_UNKILLABLE] = "UNKILLABLE",
    [ERRSTAT_OTHER] = "OTHER",
};

enum stats_err stats_err_code(const char *reply, size_t n, const char **code, size_t *len)
{
    /* The line: up to its CR (error texts have none inside, reply_error makes them spaces). */
    const char *cr = memchr(reply, '\r', n);
    if (cr != NULL)
        n = (size_t)(cr - reply);
    const char *sp = memchr(reply, ' ', n < 32 ? n : 32);
    if (n == 0 || reply[0] != '-' || sp == NULL)
        return ERRSTAT_ERR;
    *code = reply + 1;
    *len = (size_t)(sp - reply) - 1;
    for (int e = 0; e < ERRSTAT_OTHER; e++) {
        if (strlen(err_names[e]) == *len && memcmp(*code, err_names[e], *len) == 0)
            return (enum stats_err)e;
    }
    return ERRSTAT_OTHER;
}

const char *stats_err_name(enum stats_err e)
{
    if ((unsigned)e >= ERRSTAT_COUNT)
        return err_names[ERRSTAT_OTHER];
    return err_names[e];
}
