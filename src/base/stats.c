/* stats.c - error classification for INFO's errorstat section.
 *
 * Redis counts error replies by their first word (errorstat_ERR, errorstat_WRONGTYPE, ...); COMMANDS.md "Wire protocol"
 * and 4 list the codes rlimitd can answer. Anything else is counted as OTHER. */
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
    [ERRSTAT_OTHER] = "OTHER",
};

enum stats_err stats_err_of(const char *msg)
{
    size_t n;
    int e;

    if (msg == NULL)
        return ERRSTAT_OTHER;
    if (msg[0] == '-')
        msg++;
    /* The code is the first word: up to a space, the end of the line, or the end of msg. */
    n = strcspn(msg, " \r\n");
    for (e = 0; e < ERRSTAT_OTHER; e++) {
        if (strlen(err_names[e]) == n && memcmp(msg, err_names[e], n) == 0)
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
