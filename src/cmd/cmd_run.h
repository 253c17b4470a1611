/* cmd_run.h - running one command whose arity and permissions were checked: its keys found
 * and hashed, its shards locked, its handler run, its call counted and slow-logged
 * (cmd_run.c). For the dispatcher, EXEC and redis.call. */
#ifndef RLIMITD_CMD_RUN_H
#define RLIMITD_CMD_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "cmd_internal.h"

/* Where a command's keys are in argv (not for CMD_KEYDERIVED): returns how many, from *first,
 * *step apart. */
int key_span(const struct cmd_def *d, int argc, char **argv, const size_t *lens, int *first,
             int *step);
/* The thread's scratch array for n keys (valid until the next command on this thread). */
struct ks_key *scratch_keys(int n);
/* Fills *keys with the command's keys, hashed, in the thread's scratch. Returns the count. */
int collect_keys(const struct cmd_def *d, struct session *s, int argc, char **argv,
                 const size_t *lens, struct keyspace *ks, struct ks_key **keys);
/* Runs command idx with its shards locked unless all_locked (inside EXEC, or called from a
 * script, which holds them), and counts it; a script's calls (from_script) stay out of the
 * slow log. keys: the command's keys if already collected (redis.call and EXEC have them),
 * else NULL. ticks, if not NULL, holds a tick reading taken just before: the duration starts
 * there, and the reading that ends it is left there for the next command. */
void run_keys(struct cmd_env *env, struct session *s, int idx, int argc, char **argv,
              const size_t *lens, struct rbuf *out, int64_t now, int all_locked, int from_script,
              struct ks_key *keys, int nkeys, uint64_t *ticks);
/* Replies the error msg for command idx (-1: unknown) and counts it; inside MULTI the
 * transaction is then aborted at EXEC, as Redis does. */
void reject(struct session *s, int idx, struct rbuf *out, const char *msg);
/* Counts the error reply at start of out in INFO errorstats (nothing if it is not one). */
void count_error(struct session *s, const struct rbuf *out, size_t start);
/* The command running on this thread answers an error counted already (a script's reply
 * carrying its redis.call's error): run_keys counts it as a failed call only. */
void run_error_counted(void);
/* Frees the thread's scratch (cmd_thread_exit). */
void cmd_run_thread_exit(void);

#endif
