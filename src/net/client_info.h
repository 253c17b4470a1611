/* client_info.h - a connection described as Redis describes one (client_info.c). */
#ifndef RLIMITD_CLIENT_INFO_H
#define RLIMITD_CLIENT_INFO_H

#include <sys/socket.h>

#include "client.h"

/* "ip:port" of an IPv4 address, "[ip]:port" of an IPv6 one, as Redis writes them ("?:0" for
 * another family). */
void client_format_addr(const struct sockaddr_storage *ss, char *out, size_t outlen);
/* The local "ip:port" of c's socket (the socket's path for a Unix socket), as CLIENT LIST's
 * laddr shows it. Same locking as client_format. */
void client_local_addr(const struct client *c, char *out, size_t outlen);
/* CLIENT LIST line of c appended to out, "\n" included. From another thread than c's the caller
 * holds net_shared.lock and env.names_lock (c cannot close, its name cannot change meanwhile);
 * c's own thread may call it without them. */
void client_format(const struct client *c, struct rbuf *out, uint64_t now_mono_ms);

#endif
