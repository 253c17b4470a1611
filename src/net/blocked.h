/* blocked.h - connections whose request waits for capacity (WAIT; blocked.c, DESIGN.md
 * "Waiting for capacity"). */
#ifndef RLIMITD_BLOCKED_H
#define RLIMITD_BLOCKED_H

#include "client.h"

/* The thread's wait home and its wake-up; resume is how a connection whose request has been
 * answered goes on to the commands behind it (client.c's, so this file never calls it by name:
 * client.c calls here). */
void blocked_thread_init(struct io_thread *t, void (*resume)(struct client *c));
/* Before the loop's last run: no more wake-ups reach the thread. */
void blocked_thread_close(struct io_thread *t);
/* After a command ran on c: if it parked its request (the session holds a waiter), c blocks
 * until it is answered: its later commands wait, as behind Redis's blocked client. Returns 1 if
 * it blocked. argv is the command just run (copied: the parser's buffers move on). */
int blocked_park(struct client *c, int argc, char **argv, const size_t *lens);
/* c is closing: its request leaves its queue (the next waiter takes its turn). */
void blocked_forget(struct client *c);

#endif
