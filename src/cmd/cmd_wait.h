/* cmd_wait.h - what the handlers of the commands with WAIT (cmd_limit.c, cmd_throttle_all.c,
 * cmd_lease.c) call to park a request in its key's queue (cmd_wait.c, rlimitd/waiters.h). Every
 * call is made with the key's shard locked, which is what keeps a queue's order and a request's
 * decision one step: a request joins a queue, or finds it empty and is decided, while no other
 * request on the key can be decided. */
#ifndef RLIMITD_CMD_WAIT_H
#define RLIMITD_CMD_WAIT_H

#include "cmd_internal.h"

/* Whether this run of a command given WAIT may wait: its connection can block (a session of
 * the network layer), it runs neither inside EXEC nor from a script (BLPOP's rule: it answers at
 * once, as without WAIT), and it is not the last run at its timeout. */
int wait_may(const struct cmd_ctx *x);
/* A request's first run (not a waiter run again): when others already wait on key, it joins the
 * back of the queue undecided. Returns 1 if it did (the handler answers nothing). */
int wait_behind(struct cmd_ctx *x, const struct ks_key *key, int64_t timeout_ms);
/* The request was refused; wait_ns is the limiter's time until it would pass (-1: never, so
 * waiting cannot help; INT64_MAX: beyond any timer). Parks it (at the back of the queue on a
 * first run; a waiter run again keeps its place at the head). Returns 1 if parked (the handler
 * answers nothing), 0 if the refusal must be answered now. */
int wait_park(struct cmd_ctx *x, const struct ks_key *key, int64_t timeout_ms, int64_t wait_ns);
/* Capacity came back under key by another way than time (LEASE.RELEASE): its head runs again. */
void wait_notify(const struct ks_key *key);

#endif
