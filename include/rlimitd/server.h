/* server.h - the network daemon: I/O threads, listeners, connections (DESIGN.md "Threads"). */
#ifndef RLIMITD_SERVER_H
#define RLIMITD_SERVER_H

#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/persist.h"

/* Binds the configured addresses, runs conf->threads event loops until SHUTDOWN, SIGTERM or
 * SIGINT, takes the final snapshot (unless SHUTDOWN NOSAVE), and returns the process exit code:
 * 0 after a clean shutdown, 1 if it could not start or the final save failed. The keyspace and
 * persist stay the caller's. config_file (may be NULL) is re-read on SIGHUP for the settings
 * that can change live. */
int server_run(struct conf *conf, const char *config_file, struct keyspace *ks,
               struct persist *persist);

#endif
