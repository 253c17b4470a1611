/* cmd_tx.h - transactions (cmd_tx.c): MULTI's queue, EXEC, DISCARD, WATCH and UNWATCH. What
 * the dispatcher and the session's teardown use; multi_discard and watch_release_all are in
 * cmd_internal.h, for the handlers. */
#ifndef RLIMITD_CMD_TX_H
#define RLIMITD_CMD_TX_H

#include <stddef.h>

#include "cmd_internal.h"

/* Copies the command into the session's transaction (inside MULTI) and hashes its keys. */
void multi_queue(struct cmd_env *env, struct session *s, int idx, int argc, char **argv,
                 const size_t *lens);
/* Frees the thread's spare transaction (cmd_thread_exit). */
void cmd_tx_thread_exit(void);

#endif
