/* signals.c - a pipe written by the signal handler, read by a watcher thread (signals.h). The
 * handler does only what is async-signal-safe: one write of the signal number. */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int pipe_fd[2] = {-1, -1};
static pthread_t watcher;
static void (*stop_cb)(void *, int, int);
static void *stop_ud;

static void on_signal(int signum)
{
    int saved = errno;
    unsigned char b = (unsigned char)signum;
    ssize_t n = write(pipe_fd[1], &b, 1); /* a full pipe drops it: signals were pending anyway */
    (void)n;
    errno = saved;
}

static void *watch(void *arg)
{
    (void)arg;
    int count = 0;
    for (;;) {
        unsigned char b;
        ssize_t n = read(pipe_fd[0], &b, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1 || b == 0)
            return NULL; /* sigwatch_stop */
        stop_cb(stop_ud, b, ++count);
    }
}

static void set_action(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int sigwatch_start(void (*on_stop)(void *ud, int signum, int count), void *ud)
{
    if (pipe2(pipe_fd, O_CLOEXEC) != 0)
        return -1;
    stop_cb = on_stop;
    stop_ud = ud;
    int err = pthread_create(&watcher, NULL, watch, NULL);
    if (err != 0) {
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        pipe_fd[0] = pipe_fd[1] = -1;
        errno = err;
        return -1;
    }
    /* Named here, not by the thread itself: the name is then in place before the server says it
     * is ready, so whoever lists the daemon's threads (tests, ps -L) can tell it apart at once. */
    pthread_setname_np(watcher, SIGWATCH_THREAD_NAME);
    set_action(on_signal);
    return 0;
}

void sigwatch_stop(void)
{
    if (pipe_fd[1] < 0)
        return;
    set_action(SIG_DFL);
    unsigned char zero = 0;
    while (write(pipe_fd[1], &zero, 1) < 0 && errno == EINTR)
        ;
    pthread_join(watcher, NULL);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    pipe_fd[0] = pipe_fd[1] = -1;
}
