/* io_thread.h - the I/O threads' loops (io_thread.c): set up, run, woken from other threads,
 * stopped, torn down. Internal to the network layer. */
#ifndef RLIMITD_IO_THREAD_H
#define RLIMITD_IO_THREAD_H

#include "server_state.h"

/* Sets up thread t's loop and handles (its connections' buffers, busy polling, the wake-up, the
 * cron, its listeners). 0, or -1 (logged). Once the loop is initialized t->srv is set, and from
 * then on io_thread_teardown must run for t, whether the rest succeeded or not. */
int io_thread_setup(struct server *srv, struct io_thread *t);
/* The thread's body (pthread_create's start routine; thread 0 runs it on the main thread): runs
 * the loop until shutdown has closed every handle. */
void *io_thread_main(void *arg);
/* After the loop has ended (or after a failed setup): closes what is left and the loop itself. */
void io_thread_teardown(struct io_thread *t);
/* Wakes every thread to act on what other threads asked: CLIENT KILL marks, a new configuration
 * generation, shutdown. */
void io_threads_wake(struct server *srv);
/* A configuration change (CONFIG SET, SIGHUP): the log level now, each thread's request limits
 * and busy polling at its next wake-up. */
void io_threads_config_changed(struct server *srv);
/* Begins shutdown once: new connections refused, each thread stops accepting, lets its clients
 * flush their last replies (at most SHUTDOWN_GRACE_MS), and ends its loop. */
void io_threads_stop(struct server *srv);

#endif
