/* hooks.h - the services the command layer calls upward through (hooks.c). Internal to the
 * network layer. */
#ifndef RLIMITD_HOOKS_H
#define RLIMITD_HOOKS_H

#include "server_state.h"

/* Fills srv->env.hooks (struct server_hooks, rlimitd/cmd.h): the client registry (CLIENT LIST,
 * CLIENT KILL, connected clients), SHUTDOWN, configuration changes, and with srv->persist the
 * snapshot's (SAVE, BGSAVE, INFO persistence, LASTSAVE). */
void hooks_install(struct server *srv);

#endif
