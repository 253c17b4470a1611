/* server.h - the network daemon: I/O threads, listeners, connections (DESIGN.md "Threads"). */
#ifndef RLIMITD_SERVER_H
#define RLIMITD_SERVER_H

#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"

/* Binds the configured addresses, runs conf->threads event loops until SHUTDOWN, SIGTERM or
 * SIGINT, and returns the process exit code (0 after a clean shutdown, 1 if it could not
 * start). The keyspace stays the caller's. */
int server_run(struct conf *conf, struct keyspace *ks);

#endif
