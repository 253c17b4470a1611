/* client_start.h - a connection's beginning (client_start.c). */
#ifndef RLIMITD_CLIENT_START_H
#define RLIMITD_CLIENT_START_H

#include "client.h"

void client_accept(struct io_thread *t, uv_stream_t *listener, int is_unix);
/* A connection just accepted (or opened from an accept4(2)ed descriptor, busy_serve.c) joins
 * the thread's lists and starts reading. */
void client_start(struct client *c, int is_unix);

#endif
