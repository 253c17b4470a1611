/* busy_serve.h - answering a thread's other connections while its script is busy
 * (busy_serve.c). */
#ifndef RLIMITD_BUSY_SERVE_H
#define RLIMITD_BUSY_SERVE_H

#include "client.h"

/* The calling thread is t's (io_thread_main, before its loop runs). */
void busy_serve_thread(struct io_thread *t);
/* Frees what serving while busy kept (the thread's teardown). */
void busy_serve_thread_end(struct io_thread *t);
/* The server_hooks busy_serve: serves the calling thread's connections (ud unused). */
void busy_serve(void *ud);

#endif
