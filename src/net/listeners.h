/* listeners.h - the listening sockets (listeners.c): bound before any loop runs, handed to each
 * I/O thread's loop, closed when shutdown begins. Internal to the network layer. */
#ifndef RLIMITD_LISTENERS_H
#define RLIMITD_LISTENERS_H

#include "server_state.h"

/* Binds every configured address once per I/O thread (srv->tcp_fds) before any loop runs, so a
 * taken port fails the start. 0, or -1 (logged). */
int listeners_bind(struct server *srv);
/* Opens metrics-port's sockets and starts its HTTP listener (srv->metrics). 0, or -1 (logged). */
int listeners_start_metrics(struct server *srv);
/* On the thread's loop: listens on the thread's sockets bound by listeners_bind, and thread 0
 * on the unix socket too; new connections go to client_accept. 0, or -1 (logged). */
int listeners_open(struct io_thread *t);
/* Stops accepting on this thread (shutdown). */
void listeners_close(struct io_thread *t);

#endif
