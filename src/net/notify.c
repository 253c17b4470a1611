/* notify.c - sd_notify(3)'s datagram protocol without libsystemd (notify.h). */
#include "rlimitd/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rlimitd/conf.h"

static struct sockaddr_un addr;
static socklen_t addr_len;

int notify_init(int mode)
{
    addr_len = 0;
    const char *path = getenv("NOTIFY_SOCKET");
    if (mode == SUPERVISED_NO || path == NULL || path[0] == '\0')
        return 0;
    size_t len = strlen(path);
    /* "@name" is a socket in the abstract namespace: a leading NUL byte in sun_path. */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path))
        return 0;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    return 1;
}

int notify_send(const char *state)
{
    if (addr_len == 0)
        return 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr,
                       addr_len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(state) ? 0 : -1;
}
