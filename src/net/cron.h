/* cron.h - each I/O thread's 100 ms timer (cron.c). Internal to the network layer. */
#ifndef RLIMITD_CRON_H
#define RLIMITD_CRON_H

#include <stdint.h>

#include "server_state.h"

/* Starts the thread's cron (t->cron, initialized on its loop): active expiry over the thread's
 * shards, idle timeouts and CLIENT KILL; on thread 0 also memory return, INFO's ops samples and
 * the persistence tick. */
void cron_start(struct io_thread *t);
/* Writes so far, all threads: what "changed since the last save" is measured against. */
uint64_t server_dirty_total(struct server *srv);

#endif
