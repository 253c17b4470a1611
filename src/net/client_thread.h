/* client_thread.h - what a thread's connections share (client_thread.c): the parser's and
 * replies' shared buffers and the loop handles that write each turn's replies. */
#ifndef RLIMITD_CLIENT_THREAD_H
#define RLIMITD_CLIENT_THREAD_H

#include "client.h"

/* The thread's shared parser and reply buffers: before its first accept, after a CONFIG SET
 * (limits), after its last close. */
void client_thread_init(struct io_thread *t);
void client_thread_config(struct io_thread *t);
void client_thread_deinit(struct io_thread *t);
/* Closes the thread's loop handles (before the loop's last run). */
void client_thread_close_handles(struct io_thread *t);
/* The request limits as configured now. */
struct resp_limits client_limits(struct net_shared *net);

#endif
