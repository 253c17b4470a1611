/* sighup.h - SIGHUP on I/O thread 0's loop (sighup.c). Internal to the network layer. */
#ifndef RLIMITD_SIGHUP_H
#define RLIMITD_SIGHUP_H

#include "server_state.h"

/* Watches SIGHUP on thread 0's loop (srv->sig_hup, closed by that thread at shutdown): each one
 * reopens the log file and re-reads the live settings from srv->config_file. */
void sighup_watch(struct server *srv);

#endif
