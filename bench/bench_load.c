/* bench_load.c - fills a server with distinct limiter keys, fast, for bench/compare.sh.
 *
 * The same program loads rlimitd and Redis, so both get the same keys in the same order:
 *
 *   bench_load -p PORT -m gcra|window -n KEYS [-a ATTEMPTS] [-l SHA] [-b BATCH] [-H HOST]
 *
 * gcra:   CL.THROTTLE k:<12 digits> 15 30 86400               (Redis: EVALSHA SHA 1 <key> ...)
 * window: ISALLOWED <5 chars> a 3600 10    key hist:{<5 chars>}:a (Redis: EVALSHA SHA 1 <key> ...)
 *
 * Every key is 14 bytes. The parameters keep the state alive for the whole measurement: a GCRA
 * key expires at its TAT, 48 minutes after one call (emission interval 86400 s / 30); a window
 * key an hour after its newest attempt. With -a N every key gets N calls, one round over all keys
 * after another, so two calls on one key are never in the same millisecond (the Lua recipe would
 * merge them) unless the round is that short.
 *
 * Commands go out in batches of BATCH (default 1000) over one connection, with the next batch sent
 * before the replies of the previous one are read: at most two batches are in flight. Prints one
 * line: calls, errors, allowed (reply says allowed), seconds, calls per second. Exits 1 on any
 * error reply or I/O failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY_LEN 14

enum mode { MODE_GCRA, MODE_WINDOW };

struct opts {
    const char *host;
    int port;
    enum mode mode;
    long keys;
    long attempts;
    const char *sha; /* NULL: rlimitd's native command */
    long batch;
};

/* Reply bytes received and not yet parsed. */
struct inbuf {
    char *p;
    size_t len;
    size_t cap;
};

struct counts {
    long replies;
    long errors;
    long allowed;
    char first_error[128];
};

static void die(const char *what)
{
    fprintf(stderr, "bench_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "bench_load: out of memory\n");
        exit(1);
    }
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The 14-byte key of key number i. */
static void make_key(enum mode m, long i, char out[KEY_LEN + 1])
{
    static const char digits62[] =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    if (m == MODE_GCRA) {
        /* Bounded to 12 digits, so the key is always 14 bytes (and gcc can see it fits). */
        snprintf(out, KEY_LEN + 1, "k:%012lu", (unsigned long)i % 1000000000000UL);
        return;
    }
    /* hist:{uuuuu}:a with a 5-character base-62 user: 916M distinct users. */
    memcpy(out, "hist:{", 6);
    for (int d = 4; d >= 0; d--) {
        out[6 + d] = digits62[i % 62];
        i /= 62;
    }
    memcpy(out + 11, "}:a", 4);
}

/* Appends "$<len>\r\n<s>\r\n". */
static size_t put_bulk(char *dst, const char *s, size_t n)
{
    size_t h = (size_t)sprintf(dst, "$%zu\r\n", n);
    memcpy(dst + h, s, n);
    memcpy(dst + h + n, "\r\n", 2);
    return h + n + 2;
}

/* One request for key number i into dst (at most 256 bytes); returns its length. */
static size_t make_request(const struct opts *o, long i, char *dst)
{
    char key[KEY_LEN + 1];
    size_t n = 0;
    make_key(o->mode, i, key);
    if (o->mode == MODE_GCRA) {
        const char *args[] = {"15", "30", "86400"};
        if (o->sha != NULL) {
            n += (size_t)sprintf(dst, "*7\r\n");
            n += put_bulk(dst + n, "EVALSHA", 7);
            n += put_bulk(dst + n, o->sha, strlen(o->sha));
            n += put_bulk(dst + n, "1", 1);
        } else {
            n += (size_t)sprintf(dst, "*5\r\n");
            n += put_bulk(dst + n, "CL.THROTTLE", 11);
        }
        n += put_bulk(dst + n, key, KEY_LEN);
        for (int a = 0; a < 3; a++)
            n += put_bulk(dst + n, args[a], strlen(args[a]));
        return n;
    }
    if (o->sha != NULL) {
        n += (size_t)sprintf(dst, "*6\r\n");
        n += put_bulk(dst + n, "EVALSHA", 7);
        n += put_bulk(dst + n, o->sha, strlen(o->sha));
        n += put_bulk(dst + n, "1", 1);
        n += put_bulk(dst + n, key, KEY_LEN);
    } else {
        /* ISALLOWED derives hist:{user}:action itself. */
        n += (size_t)sprintf(dst, "*5\r\n");
        n += put_bulk(dst + n, "ISALLOWED", 9);
        n += put_bulk(dst + n, key + 6, 5);
        n += put_bulk(dst + n, "a", 1);
    }
    n += put_bulk(dst + n, "3600", 4);
    n += put_bulk(dst + n, "10", 2);
    return n;
}

/* Length of the line at p (through "\r\n"), or 0 if incomplete. */
static size_t line_len(const char *p, size_t avail)
{
    const char *cr = memchr(p, '\r', avail);
    if (cr == NULL || (size_t)(cr - p) + 1 >= avail)
        return 0;
    return (size_t)(cr - p) + 2;
}

/* Parses one complete reply at p. Returns its length, 0 if incomplete. *first is the first
 * integer seen (the reply itself for ":n", the first element of an array), *is_err 1 for "-". */
static size_t parse_reply(const char *p, size_t avail, long *first, int *is_err)
{
    size_t l = line_len(p, avail);
    if (l == 0)
        return 0;
    switch (p[0]) {
    case '+':
        return l;
    case '-':
        *is_err = 1;
        return l;
    case ':':
        *first = strtol(p + 1, NULL, 10);
        return l;
    case '$': {
        long n = strtol(p + 1, NULL, 10);
        if (n < 0)
            return l;
        if (avail < l + (size_t)n + 2)
            return 0;
        return l + (size_t)n + 2;
    }
    case '*': {
        long n = strtol(p + 1, NULL, 10);
        size_t used = l;
        for (long e = 0; e < n; e++) {
            long v = 0;
            size_t k = parse_reply(p + used, avail - used, &v, is_err);
            if (k == 0)
                return 0;
            if (e == 0)
                *first = v;
            used += k;
        }
        return used;
    }
    default:
        fprintf(stderr, "bench_load: unexpected reply byte 0x%02x\n", (unsigned char)p[0]);
        exit(1);
    }
}

/* Reads until `want` more replies have been parsed. */
static void read_replies(int fd, struct inbuf *in, long want, enum mode m, struct counts *c)
{
    long got = 0;
    size_t off = 0;
    while (got < want) {
        long first = 0;
        int is_err = 0;
        size_t k = off < in->len ? parse_reply(in->p + off, in->len - off, &first, &is_err) : 0;
        if (k > 0) {
            if (is_err) {
                if (c->errors++ == 0) {
                    size_t l = line_len(in->p + off, in->len - off);
                    size_t n = l - 2 < sizeof(c->first_error) - 1 ? l - 2
                                                                  : sizeof(c->first_error) - 1;
                    memcpy(c->first_error, in->p + off, n);
                    c->first_error[n] = '\0';
                }
            } else if (m == MODE_GCRA ? first == 0 : first == 1) {
                c->allowed++; /* CL.THROTTLE: limited = 0; ISALLOWED: 1 */
            }
            off += k;
            got++;
            c->replies++;
            continue;
        }
        /* Incomplete: keep the tail, read more. */
        memmove(in->p, in->p + off, in->len - off);
        in->len -= off;
        off = 0;
        if (in->cap - in->len < 65536) {
            in->cap *= 2;
            in->p = realloc(in->p, in->cap);
            if (in->p == NULL)
                die("realloc");
        }
        ssize_t r = read(fd, in->p + in->len, in->cap - in->len);
        if (r == 0) {
            fprintf(stderr, "bench_load: server closed the connection\n");
            exit(1);
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("read");
        }
        in->len += (size_t)r;
    }
    memmove(in->p, in->p + off, in->len - off);
    in->len -= off;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write");
        }
        p += w;
        n -= (size_t)w;
    }
}

static int connect_to(const char *host, int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "bench_load: not an IPv4 address: %s\n", host);
        exit(1);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_load -p PORT -m gcra|window -n KEYS [-a ATTEMPTS] [-l SHA] "
                    "[-b BATCH] [-H HOST]\n");
    exit(2);
}

static long num_arg(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1)
        usage();
    return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
    int have_mode = 0;
    o->host = "127.0.0.1";
    o->mode = MODE_GCRA;
    o->port = 0;
    o->keys = 0;
    o->attempts = 1;
    o->sha = NULL;
    o->batch = 1000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc || a[0] != '-' || a[1] == '\0' || a[2] != '\0')
            usage();
        const char *v = argv[++i];
        switch (a[1]) {
        case 'H':
            o->host = v;
            break;
        case 'p':
            o->port = (int)num_arg(v);
            break;
        case 'm':
            have_mode = 1;
            if (strcmp(v, "gcra") == 0)
                o->mode = MODE_GCRA;
            else if (strcmp(v, "window") == 0)
                o->mode = MODE_WINDOW;
            else
                usage();
            break;
        case 'n':
            o->keys = num_arg(v);
            break;
        case 'a':
            o->attempts = num_arg(v);
            break;
        case 'l':
            o->sha = v;
            break;
        case 'b':
            o->batch = num_arg(v);
            break;
        default:
            usage();
        }
    }
    /* 62^5 distinct window users; 10^12 GCRA keys. */
    if (!have_mode || o->port <= 0 || o->port > 65535 || o->keys <= 0 ||
        o->keys > 916132832L || (o->sha != NULL && strlen(o->sha) > 64))
        usage();
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_opts(argc, argv, &o);

    int fd = connect_to(o.host, o.port);
    size_t cap = (size_t)o.batch * 256;
    char *bufs[2] = {xmalloc(cap), xmalloc(cap)};
    struct inbuf in = {xmalloc(1 << 20), 0, 1 << 20};
    struct counts c;
    memset(&c, 0, sizeof(c));

    long total = o.keys * o.attempts;
    long sent = 0, pending = 0; /* requests in the batch sent before the current one */
    int which = 0;
    double t0 = now_s();
    while (sent < total) {
        size_t len = 0;
        long n = 0;
        for (; n < o.batch && sent + n < total; n++)
            len += make_request(&o, (sent + n) % o.keys, bufs[which] + len);
        write_all(fd, bufs[which], len);
        sent += n;
        if (pending > 0)
            read_replies(fd, &in, pending, o.mode, &c);
        pending = n;
        which ^= 1;
    }
    if (pending > 0)
        read_replies(fd, &in, pending, o.mode, &c);
    double secs = now_s() - t0;

    printf("calls %ld errors %ld allowed %ld seconds %.3f rate %.0f\n", c.replies, c.errors,
           c.allowed, secs, secs > 0 ? (double)c.replies / secs : 0.0);
    if (c.errors > 0)
        fprintf(stderr, "bench_load: %ld error replies, the first: %s\n", c.errors,
                c.first_error);
    close(fd);
    free(bufs[0]);
    free(bufs[1]);
    free(in.p);
    return c.errors > 0 ? 1 : 0;
}
