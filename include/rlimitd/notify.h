/* notify.h - the systemd service notification protocol (sd_notify(3)), in tree: one datagram
 * to the socket named by $NOTIFY_SOCKET. Linking libsystemd would pull liblzma, libgcrypt, zstd
 * and lz4 into a network daemon for what is a single sendmsg. */
#ifndef RLIMITD_NOTIFY_H
#define RLIMITD_NOTIFY_H

/* Reads $NOTIFY_SOCKET once. mode is enum conf_supervised: SUPERVISED_NO disables, SYSTEMD and
 * AUTO use the socket when it is set. Returns 1 if notifications will be sent, else 0. */
int notify_init(int mode);

/* Sends state (e.g. "READY=1\nSTATUS=Ready"). Returns 0, or -1 (errno set) if it failed;
 * a no-op returning 0 when notifications are off. */
int notify_send(const char *state);

#endif
