/* pubsub_load.c - Pub/Sub load for bench/pubsub.sh: S subscriber connections SUBSCRIBEd to one
 * channel, one publisher pipelining PUBLISH D at a time, N messages of Z bytes; every subscriber
 * reads every message (a thread polls them all) and the run ends when the last frame is in.
 * With -P PID, the server's CPU time (all threads, /proc/PID/stat) over the run is reported per
 * message published and per message delivered. Works against rlimitd and redis-server alike.
 *
 *   pubsub_load -p PORT [-s SUBS] [-n MESSAGES] [-d PIPELINE] [-z PAYLOAD] [-P PID]
 *
 * Prints one line of key=value pairs. Exits 1 on a wrong reply or a closed connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proc_stat.h"

static int port, subs = 1, pipeline = 16, payload = 32;
static long messages = 100000;
static int *sub_fd;
static size_t frame_len;

static void die(const char *what)
{
    fprintf(stderr, "pubsub_load: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes (the caller knows the reply's size). */
static void read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("read");
        got += (size_t)r;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every subscriber reads until it has all messages' frames (their size is known). */
static void *read_subscribers(void *arg)
{
    (void)arg;
    size_t want = frame_len * (size_t)messages;
    size_t *got = calloc((size_t)subs, sizeof(size_t));
    struct pollfd *pfd = calloc((size_t)subs, sizeof(*pfd));
    char *buf = malloc(1 << 16);
    int left = subs;
    for (int i = 0; i < subs; i++) {
        pfd[i].fd = sub_fd[i];
        pfd[i].events = POLLIN;
    }
    while (left > 0) {
        if (poll(pfd, (nfds_t)subs, 60000) <= 0)
            die("subscribers waited 60 s for messages");
        for (int i = 0; i < subs; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(pfd[i].fd, buf, 1 << 16);
            if (r <= 0)
                die("subscriber read");
            got[i] += (size_t)r;
            if (got[i] > want)
                die("a subscriber got more than was published");
            if (got[i] == want) {
                pfd[i].fd = -1;
                left--;
            }
        }
    }
    free(buf);
    free(pfd);
    free(got);
    return NULL;
}

int main(int argc, char **argv)
{
    long pid = 0;
    int opt;
    while ((opt = getopt(argc, argv, "p:s:n:d:z:P:")) != -1) {
        switch (opt) {
        case 'p': port = atoi(optarg); break;
        case 's': subs = atoi(optarg); break;
        case 'n': messages = atol(optarg); break;
        case 'd': pipeline = atoi(optarg); break;
        case 'z': payload = atoi(optarg); break;
        case 'P': pid = atol(optarg); break;
        default:
            fprintf(stderr, "usage: pubsub_load -p PORT [-s SUBS] [-n MESSAGES] [-d PIPELINE] "
                            "[-z PAYLOAD] [-P PID]\n");
            return 2;
        }
    }
    if (port <= 0 || subs < 1 || messages < 1 || pipeline < 1 || payload < 1)
        return 2;
    char *body = malloc((size_t)payload);
    memset(body, 'x', (size_t)payload);
    char hdr[64];
    int hl = snprintf(hdr, sizeof(hdr), "$%d\r\n", payload);
    frame_len = strlen("*3\r\n$7\r\nmessage\r\n$5\r\nbench\r\n") + (size_t)hl +
                (size_t)payload + 2;

    const char sub[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nbench\r\n";
    const char sub_reply[] = "*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n";
    sub_fd = calloc((size_t)subs, sizeof(int));
    for (int i = 0; i < subs; i++) {
        sub_fd[i] = dial();
        send_all(sub_fd[i], sub, sizeof(sub) - 1);
        char r[sizeof(sub_reply)];
        read_exact(sub_fd[i], r, sizeof(sub_reply) - 1);
        if (memcmp(r, sub_reply, sizeof(sub_reply) - 1) != 0)
            die("SUBSCRIBE's reply");
    }
    int pub = dial();
    /* One batch of the pipeline: D PUBLISH commands. */
    size_t one_len = strlen("*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n") + (size_t)hl +
                     (size_t)payload + 2;
    char *batch = malloc(one_len * (size_t)pipeline);
    for (int i = 0; i < pipeline; i++) {
        char *p = batch + one_len * (size_t)i;
        int n = sprintf(p, "*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n%s", hdr);
        memcpy(p + n, body, (size_t)payload);
        memcpy(p + n + payload, "\r\n", 2);
    }
    char want_reply[32];
    int rl = snprintf(want_reply, sizeof(want_reply), ":%d\r\n", subs);
    char *replies = malloc((size_t)rl * (size_t)pipeline);

    pthread_t reader;
    double c0 = pid > 0 ? proc_cpu_s(pid) : 0, t0 = now_s();
    pthread_create(&reader, NULL, read_subscribers, NULL);
    for (long sent = 0; sent < messages;) {
        int d = messages - sent < pipeline ? (int)(messages - sent) : pipeline;
        send_all(pub, batch, one_len * (size_t)d);
        read_exact(pub, replies, (size_t)rl * (size_t)d);
        for (int i = 0; i < d; i++)
            if (memcmp(replies + (size_t)rl * (size_t)i, want_reply, (size_t)rl) != 0)
                die("PUBLISH did not count every subscriber");
        sent += d;
    }
    pthread_join(reader, NULL);
    double t1 = now_s(), c1 = pid > 0 ? proc_cpu_s(pid) : 0;
    double cpu = c1 - c0, secs = t1 - t0;
    printf("subscribers=%d messages=%ld pipeline=%d payload=%d secs=%.3f msgs_per_s=%.0f "
           "server_cpu_s=%.3f us_per_msg=%.3f us_per_delivery=%.4f\n",
           subs, messages, pipeline, payload, secs, (double)messages / secs, cpu,
           cpu * 1e6 / (double)messages, cpu * 1e6 / ((double)messages * subs));
    return 0;
}
