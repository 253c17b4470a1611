/* signals.h - SIGTERM and SIGINT answered on a thread of their own (signals.c).
 *
 * I/O thread 0 may be inside a long script when a stop signal arrives; a signal handled by its
 * event loop would wait for the script's end, which may never come. Internal to the network
 * layer. */
#ifndef RLIMITD_SIGNALS_H
#define RLIMITD_SIGNALS_H

/* The watcher thread's name (/proc/PID/task/TID/comm), at most 15 bytes. */
#define SIGWATCH_THREAD_NAME "rlimitd-signals"

/* Calls on_stop(ud, signum, count) on the watcher thread for every SIGTERM or SIGINT received,
 * count being 1 for the first and counting up. Returns 0, or -1 (errno set) if the thread or
 * its pipe could not be made. */
int sigwatch_start(void (*on_stop)(void *ud, int signum, int count), void *ud);
/* Restores the default actions and ends the thread (no call runs after it returns). */
void sigwatch_stop(void);

#endif
