/* slow_readers.c - what clients that pipeline big replies and never read them do to the other
 * clients of a server: bench/slow_readers.sh runs it against rlimitd and Redis in one run
 * (bench/README.md "slow_readers.sh", issue 28).
 *
 *   slow_readers -p PORT -m setup [-e ELEMENTS] [-H HOST]
 *   slow_readers -p PORT -m run -P SERVER_PID [-c CLIENTS] [-n COMMANDS] [-i INTERVAL_US]
 *                [-t MAX_SECONDS] [-H HOST]
 *
 * setup: fills the list sr:list and the sorted set sr:zset with ELEMENTS (500) members each
 *        (element:NNNNNN, member:NNNNNN, score NNNNNN).
 * run:   opens CLIENTS (10) "slow" connections, each of which sends COMMANDS (10000) commands,
 *        LRANGE sr:list 0 -1 and ZRANGE sr:zset 0 -1 alternately, as fast as the server takes
 *        them, and never reads a byte. Meanwhile a bystander connection sends PING, waits for
 *        PONG, sleeps INTERVAL_US (500) and again, timing each round trip. The run ends once it
 *        has lasted a second and, over the last half second, the server used under 5% of a CPU
 *        (it is done with the slow clients: finished, or stopped reading them) and the slow
 *        clients sent nothing more; or after MAX_SECONDS (60).
 *        Prints one line of name=value pairs: samples, bystander latency p50/p99/p99.9/max in
 *        ms, busy (s: until the server went quiet), server CPU (s) over the run, the bytes of
 *        commands the slow clients got the server to take (of all they had), and the server's
 *        peak RSS (VmHWM) and RSS at the end, in MiB.
 * The server's CPU time is utime + stime of /proc/PID/stat (all threads). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proc_stat.h"

#define QUIET_WINDOW_S 0.5
#define QUIET_CPU_SHARE 0.05
#define MIN_RUN_S 1.0

struct opts {
    const char *host;
    int port;
    const char *mode;
    long elements;
    long pid;
    int clients;
    long commands;
    long interval_us;
    double max_s;
};

static void die(const char *what)
{
    fprintf(stderr, "slow_readers: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_to(const struct opts *o)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &a.sin_addr) != 1) {
        fprintf(stderr, "slow_readers: bad host %s\n", o->host);
        exit(1);
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("send");
        p += n;
        len -= (size_t)n;
    }
}

/* Reads until the bytes received end with `end` (a reply whose last line is known). */
static void read_until(int fd, const char *end)
{
    char buf[65536];
    size_t elen = strlen(end), have = 0;
    char tail[64] = "";
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("recv");
        /* Keep the last elen bytes seen, across reads. */
        for (ssize_t i = 0; i < n; i++) {
            if (have == elen) {
                memmove(tail, tail + 1, elen - 1);
                have--;
            }
            tail[have++] = buf[i];
        }
        if (have == elen && memcmp(tail, end, elen) == 0)
            return;
    }
}

/* Appends one RESP command at out (which has room for it) and answers its length. The
 * headers are formatted into a local buffer and copied: GCC's UBSan build sees a possibly
 * null destination in a direct sprintf(out, ...) and -Werror stops the build. */
static size_t put_cmd(char *out, int argc, const char **argv)
{
    char head[32];
    size_t len = (size_t)snprintf(head, sizeof head, "*%d\r\n", argc);
    memcpy(out, head, len);
    for (int i = 0; i < argc; i++) {
        size_t alen = strlen(argv[i]);
        size_t hlen = (size_t)snprintf(head, sizeof head, "$%zu\r\n", alen);
        memcpy(out + len, head, hlen);
        len += hlen;
        memcpy(out + len, argv[i], alen);
        len += alen;
        memcpy(out + len, "\r\n", 2);
        len += 2;
    }
    return len;
}

/* Fills the two values in batches, each ended by an ECHO whose reply tells the batch is done. */
static void setup(const struct opts *o)
{
    int fd = connect_to(o);
    static const char done[] = "$4\r\ndone\r\n";
    char *buf = malloc(1 << 20);
    if (buf == NULL)
        die("malloc");
    size_t len = put_cmd(buf, 3, (const char *[]){"DEL", "sr:list", "sr:zset"});
    len += put_cmd(buf + len, 2, (const char *[]){"ECHO", "done"});
    send_all(fd, buf, len);
    read_until(fd, done);
    for (long i = 0; i < o->elements;) {
        len = 0;
        for (long k = 0; k < 1000 && i < o->elements; k++, i++) {
            char e[32], m[32], sc[32];
            snprintf(e, sizeof e, "element:%06ld", i);
            snprintf(m, sizeof m, "member:%06ld", i);
            snprintf(sc, sizeof sc, "%ld", i);
            len += put_cmd(buf + len, 3, (const char *[]){"RPUSH", "sr:list", e});
            len += put_cmd(buf + len, 4, (const char *[]){"ZADD", "sr:zset", sc, m});
        }
        len += put_cmd(buf + len, 2, (const char *[]){"ECHO", "done"});
        send_all(fd, buf, len);
        read_until(fd, done);
    }
    free(buf);
    close(fd);
    printf("elements=%ld\n", o->elements);
}

/* ---- run ---- */

struct slow {
    int fd;
    char *cmds;
    size_t len, sent;
};

static struct slow *slows;
static int nslow;
static atomic_int stop_writing;
static _Atomic double last_progress; /* when a slow client last got bytes taken */

/* Writes the slow clients' commands as fast as the server takes them, never reading. */
static void *writer(void *arg)
{
    (void)arg;
    struct pollfd *pf = calloc((size_t)nslow, sizeof *pf);
    while (!atomic_load(&stop_writing)) {
        int n = 0;
        for (int i = 0; i < nslow; i++)
            if (slows[i].sent < slows[i].len) {
                pf[n].fd = slows[i].fd;
                pf[n].events = POLLOUT;
                n++;
            }
        if (n == 0)
            break;
        if (poll(pf, (nfds_t)n, 50) <= 0)
            continue;
        for (int i = 0, j = 0; i < nslow; i++) {
            if (slows[i].sent >= slows[i].len)
                continue;
            if (pf[j++].revents & POLLOUT) {
                struct slow *s = &slows[i];
                ssize_t w = send(s->fd, s->cmds + s->sent, s->len - s->sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                    s->sent += (size_t)w;
                    atomic_store(&last_progress, now_s());
                } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    s->sent = s->len; /* closed by the server: nothing more to send */
                    atomic_store(&last_progress, now_s());
                }
            }
        }
    }
    free(pf);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static void run(const struct opts *o)
{
    int by = connect_to(o);
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    for (int i = 0; i < 100; i++) { /* warm: the connection and the server's first replies */
        send_all(by, ping, sizeof ping - 1);
        read_until(by, "+PONG\r\n");
    }

    nslow = o->clients;
    slows = calloc((size_t)nslow, sizeof *slows);
    size_t total = 0;
    for (int i = 0; i < nslow; i++) {
        struct slow *s = &slows[i];
        s->fd = connect_to(o);
        s->cmds = malloc((size_t)o->commands * 64);
        if (s->cmds == NULL)
            die("malloc");
        for (long k = 0; k < o->commands; k++)
            s->len += k % 2 == 0
                          ? put_cmd(s->cmds + s->len, 4,
                                    (const char *[]){"LRANGE", "sr:list", "0", "-1"})
                          : put_cmd(s->cmds + s->len, 4,
                                    (const char *[]){"ZRANGE", "sr:zset", "0", "-1"});
        total += s->len;
    }

    size_t cap = 1 << 16, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    double t0 = now_s(), cpu0 = proc_cpu_s(o->pid);
    double win_t = t0, win_cpu = cpu0, busy = 0, t;
    atomic_store(&last_progress, t0);
    pthread_t wt;
    if (pthread_create(&wt, NULL, writer, NULL) != 0)
        die("pthread_create");
    for (;;) {
        double a = now_s();
        send_all(by, ping, sizeof ping - 1);
        read_until(by, "+PONG\r\n");
        t = now_s();
        if (n == cap) {
            cap *= 2;
            lat = realloc(lat, cap * sizeof *lat);
            if (lat == NULL)
                die("realloc");
        }
        lat[n++] = (t - a) * 1e3;
        if (t - win_t >= QUIET_WINDOW_S) {
            double cpu = proc_cpu_s(o->pid);
            int quiet = cpu - win_cpu < QUIET_CPU_SHARE * (t - win_t) &&
                        t - atomic_load(&last_progress) >= QUIET_WINDOW_S;
            if (!quiet)
                busy = t - t0;
            if ((quiet && t - t0 >= MIN_RUN_S) || t - t0 >= o->max_s)
                break;
            win_t = t;
            win_cpu = cpu;
        }
        if (o->interval_us > 0)
            usleep((useconds_t)o->interval_us);
    }
    double cpu = proc_cpu_s(o->pid) - cpu0;
    long hwm = proc_status_kb(o->pid, "VmHWM"), rss = proc_status_kb(o->pid, "VmRSS");
    atomic_store(&stop_writing, 1);
    pthread_join(wt, NULL);
    size_t sent = 0;
    for (int i = 0; i < nslow; i++) {
        sent += slows[i].sent;
        close(slows[i].fd);
        free(slows[i].cmds);
    }
    close(by);
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("samples=%zu p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f busy_s=%.2f "
           "server_cpu_s=%.2f sent_bytes=%zu of_bytes=%zu hwm_mib=%.1f rss_mib=%.1f "
           "seconds=%.2f\n",
           n, pct(lat, n, 0.5), pct(lat, n, 0.99), pct(lat, n, 0.999), lat[n - 1], busy, cpu,
           sent, total, (double)hwm / 1024, (double)rss / 1024, t - t0);
    free(lat);
    free(slows);
}

int main(int argc, char **argv)
{
    struct opts o = {.host = "127.0.0.1", .mode = "run", .elements = 500, .clients = 10,
                     .commands = 10000, .interval_us = 500, .max_s = 60};
    int c;
    while ((c = getopt(argc, argv, "p:m:e:P:c:n:i:t:H:")) != -1) {
        switch (c) {
        case 'p': o.port = atoi(optarg); break;
        case 'm': o.mode = optarg; break;
        case 'e': o.elements = atol(optarg); break;
        case 'P': o.pid = atol(optarg); break;
        case 'c': o.clients = atoi(optarg); break;
        case 'n': o.commands = atol(optarg); break;
        case 'i': o.interval_us = atol(optarg); break;
        case 't': o.max_s = atof(optarg); break;
        case 'H': o.host = optarg; break;
        default:
            fprintf(stderr, "usage: see the comment at the top of bench/slow_readers.c\n");
            return 2;
        }
    }
    if (o.port <= 0 || o.elements < 1 || o.clients < 0 || o.commands < 1) {
        fprintf(stderr, "slow_readers: -p PORT required; -e, -n at least 1\n");
        return 2;
    }
    if (strcmp(o.mode, "setup") == 0) {
        setup(&o);
    } else if (strcmp(o.mode, "run") == 0) {
        if (o.pid <= 0) {
            fprintf(stderr, "slow_readers: run needs -P SERVER_PID\n");
            return 2;
        }
        run(&o);
    } else {
        fprintf(stderr, "slow_readers: unknown mode %s\n", o.mode);
        return 2;
    }
    return 0;
}
