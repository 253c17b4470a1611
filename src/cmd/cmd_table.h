/* cmd_table.h - the joined command table and its lookup by name (cmd_table.c), for the
 * dispatcher's files. */
#ifndef RLIMITD_CMD_TABLE_H
#define RLIMITD_CMD_TABLE_H

#include <stddef.h>

#include "cmd_internal.h"
#include "rlimitd/stats.h"

/* The areas' rows joined in CMD_AREAS order, built at the first lookup: an index into it is
 * the command's number (INFO commandstats, struct session's last_cmd). */
extern struct cmd_def cmd_defs[STATS_MAX_CMDS];

/* The index of the command named by the len bytes at name (any case), or -1. */
int cmd_lookup(const char *name, size_t len);

/* Whether argc (the name included) fits the row's arity, Redis's convention. */
static inline int arity_ok(const struct cmd_def *d, int argc)
{
    return d->arity >= 0 ? argc == d->arity : argc >= -d->arity;
}

#endif
