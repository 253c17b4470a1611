/* zset_load.c - sorted-set load for bench/zset.sh: the same commands, in the same order, to
 * rlimitd or Redis, with the server's CPU time over the run (bench/README.md "zset.sh").
 *
 *   zset_load -p PORT -m recipe|load|zadd|zrank|zrangebyscore [-n N] [-a ROUNDS] [-k KEYS]
 *             [-b BATCH] [-s SEED] [-P SERVER_PID] [-H HOST]
 *
 * recipe:  ROUNDS rounds over keys z:<12 digits> 0..N-1 of the rate-limit transaction
 *            MULTI, ZREMRANGEBYSCORE k 0 <now-10000>, ZADD k <now> <now>, ZCARD k,
 *            PEXPIRE k 3600000, EXEC
 *          with a synthetic clock: now = 1700000000000 + 1000 * round (13-digit ms, the member
 *          equal to its score), so after 10 rounds every key holds 10 entries and the state is
 *          the same on any machine. The expiry is an hour, not the 10 s window: keys must outlive
 *          the load however slow it is (PEXPIRE costs the same). Counted op: one transaction.
 * load:    ZADD big <score> m<i> for i in 0..N-1 (pseudo-random scores in [0, 1e9)): fills the
 *          one large set. Counted op: one ZADD.
 * zadd:    N ZADDs to big re-scoring random existing members m<0..KEYS-1>.
 * zrank:   N ZRANKs of random members of big.
 * zrangebyscore: N ZRANGEBYSCORE big x x+10000 (about 10 members for KEYS=1M).
 *
 * The pseudo-random scores and members come from SEED (default 1): the same SEED sends the same
 * commands to either server; a repeated run on one server needs another SEED (re-scoring a member
 * to the score it already has is a cheaper no-op).
 *
 * Batches of BATCH ops (default 100 transactions, 1000 single commands) are written, then all
 * their replies are read. With -P, the server's utime+stime (/proc/PID/stat: all its threads)
 * is read before the first batch and after the last reply. Prints one line:
 *   ops N errors E seconds S ops_per_s R server_cpu_ms C cpu_us_per_op U
 * and, on an error reply, the first one on stderr; exits 1 if any reply was an error. */
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

#include "proc_stat.h"

#define CLOCK_BASE_MS 1700000000000LL
#define WINDOW_MS 10000LL
#define EXPIRE_MS 3600000LL

enum mode { MODE_RECIPE, MODE_LOAD, MODE_ZADD, MODE_ZRANK, MODE_ZRANGEBYSCORE };

struct opts {
    const char *host;
    int port;
    enum mode mode;
    long n;      /* keys (recipe), members (load), ops (the others) */
    long rounds; /* recipe only */
    long keys;   /* members of big the op modes pick from */
    long batch;
    long pid; /* 0: no CPU measurement */
    long seed;
};

struct inbuf {
    char *p;
    size_t len;
    size_t cap;
};

static void die(const char *what)
{
    fprintf(stderr, "zset_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        fprintf(stderr, "zset_load: out of memory\n");
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

/* xorshift64*: the same pseudo-random sequence on every run, for both servers. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Appends one command (argc strings) as RESP to out at *len; out has room (callers size it). */
static void put_cmd(char *out, size_t *len, int argc, const char **argv)
{
    *len += (size_t)sprintf(out + *len, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        *len += (size_t)sprintf(out + *len, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
}

/* One op (a transaction for recipe) number i into out; returns the replies it will get. */
static int make_op(const struct opts *o, long i, char *out, size_t *len)
{
    char key[32], a[32], b[32], c[32];
    switch (o->mode) {
    case MODE_RECIPE: {
        long round = i / o->n;
        long long now = CLOCK_BASE_MS + 1000LL * round;
        snprintf(key, sizeof key, "z:%012ld", i % o->n);
        snprintf(a, sizeof a, "%lld", now - WINDOW_MS);
        snprintf(b, sizeof b, "%lld", now);
        snprintf(c, sizeof c, "%lld", EXPIRE_MS);
        put_cmd(out, len, 1, (const char *[]){"MULTI"});
        put_cmd(out, len, 4, (const char *[]){"ZREMRANGEBYSCORE", key, "0", a});
        put_cmd(out, len, 4, (const char *[]){"ZADD", key, b, b});
        put_cmd(out, len, 2, (const char *[]){"ZCARD", key});
        put_cmd(out, len, 3, (const char *[]){"PEXPIRE", key, c});
        put_cmd(out, len, 1, (const char *[]){"EXEC"});
        return 6;
    }
    case MODE_LOAD:
        snprintf(a, sizeof a, "%llu", (unsigned long long)(rng() % 1000000000ULL));
        snprintf(b, sizeof b, "m%ld", i);
        put_cmd(out, len, 4, (const char *[]){"ZADD", "big", a, b});
        return 1;
    case MODE_ZADD:
        snprintf(a, sizeof a, "%llu", (unsigned long long)(rng() % 1000000000ULL));
        snprintf(b, sizeof b, "m%llu", (unsigned long long)(rng() % (uint64_t)o->keys));
        put_cmd(out, len, 4, (const char *[]){"ZADD", "big", a, b});
        return 1;
    case MODE_ZRANK:
        snprintf(b, sizeof b, "m%llu", (unsigned long long)(rng() % (uint64_t)o->keys));
        put_cmd(out, len, 3, (const char *[]){"ZRANK", "big", b});
        return 1;
    case MODE_ZRANGEBYSCORE: {
        unsigned long long x = rng() % 1000000000ULL;
        snprintf(a, sizeof a, "%llu", x);
        snprintf(b, sizeof b, "%llu", x + 10000);
        put_cmd(out, len, 4, (const char *[]){"ZRANGEBYSCORE", "big", a, b});
        return 1;
    }
    }
    return 0;
}

/* Length of the reply at p (0: incomplete). *err is set if it or anything inside it is an error
 * reply; the first error's text goes to first_err if that is still empty. */
static size_t reply_len(const char *p, size_t avail, int *err, char *first_err, size_t fe_size)
{
    const char *nl = avail ? memchr(p, '\n', avail) : NULL;
    if (nl == NULL)
        return 0;
    size_t head = (size_t)(nl - p) + 1;
    switch (p[0]) {
    case '-':
        *err = 1;
        if (first_err[0] == '\0') { /* the text between '-' and CR LF */
            size_t n = head >= 3 ? head - 3 : 0;
            if (n > fe_size - 1)
                n = fe_size - 1;
            memcpy(first_err, p + 1, n);
            first_err[n] = '\0';
        }
        return head;
    case '+':
    case ':':
        return head;
    case '$': {
        long n = strtol(p + 1, NULL, 10);
        if (n < 0)
            return head;
        return avail >= head + (size_t)n + 2 ? head + (size_t)n + 2 : 0;
    }
    case '*': {
        long n = strtol(p + 1, NULL, 10);
        size_t off = head;
        for (long i = 0; i < n; i++) {
            size_t l = reply_len(p + off, avail - off, err, first_err, fe_size);
            if (l == 0)
                return 0;
            off += l;
        }
        return off;
    }
    default:
        fprintf(stderr, "zset_load: unexpected reply byte 0x%02x\n", (unsigned char)p[0]);
        exit(1);
    }
}

/* Reads until want replies have been parsed; returns how many of them were (or held) errors. */
static long read_replies(int fd, struct inbuf *in, long want, char *first_err, size_t fe_size)
{
    long errors = 0;
    size_t pos = 0;
    while (want > 0) {
        int err = 0;
        size_t l = reply_len(in->p + pos, in->len - pos, &err, first_err, fe_size);
        if (l > 0) {
            pos += l;
            errors += err;
            want--;
            continue;
        }
        memmove(in->p, in->p + pos, in->len - pos);
        in->len -= pos;
        pos = 0;
        if (in->cap - in->len < 65536) {
            in->cap = in->cap * 2 + 65536;
            in->p = xrealloc(in->p, in->cap);
        }
        ssize_t r = read(fd, in->p + in->len, in->cap - in->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ECONNRESET;
            die("read");
        }
        in->len += (size_t)r;
    }
    memmove(in->p, in->p + pos, in->len - pos);
    in->len -= pos;
    return errors;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

static int connect_to(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "zset_load: bad host %s\n", host);
        exit(2);
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void usage(void)
{
    fprintf(stderr, "usage: zset_load -p PORT -m recipe|load|zadd|zrank|zrangebyscore [-n N] "
                    "[-a ROUNDS] [-k KEYS] [-b BATCH] [-s SEED] [-P SERVER_PID] [-H HOST]\n");
    exit(2);
}

static long num_arg(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0)
        usage();
    return v;
}

int main(int argc, char **argv)
{
    struct opts o = {.host = "127.0.0.1", .n = 100000, .rounds = 1, .keys = 1000000, .seed = 1};
    const char *mode = NULL;
    int ch;
    while ((ch = getopt(argc, argv, "p:m:n:a:k:b:s:P:H:")) != -1) {
        switch (ch) {
        case 'p': o.port = (int)num_arg(optarg); break;
        case 'm': mode = optarg; break;
        case 'n': o.n = num_arg(optarg); break;
        case 'a': o.rounds = num_arg(optarg); break;
        case 'k': o.keys = num_arg(optarg); break;
        case 'b': o.batch = num_arg(optarg); break;
        case 's': o.seed = num_arg(optarg); break;
        case 'P': o.pid = num_arg(optarg); break;
        case 'H': o.host = optarg; break;
        default: usage();
        }
    }
    if (o.port <= 0 || mode == NULL || o.n <= 0 || o.rounds <= 0 || o.keys <= 0)
        usage();
    static const char *names[] = {"recipe", "load", "zadd", "zrank", "zrangebyscore"};
    int found = 0;
    for (int i = 0; i < 5; i++)
        if (strcmp(mode, names[i]) == 0) {
            o.mode = (enum mode)i;
            found = 1;
        }
    if (!found)
        usage();
    rng_state ^= (uint64_t)o.seed * 0xD1B54A32D192ED03ULL; /* never 0: xorshift's fixed point */
    if (rng_state == 0)
        rng_state = 1;
    if (o.batch == 0)
        o.batch = o.mode == MODE_RECIPE ? 100 : 1000;

    long total = o.mode == MODE_RECIPE ? o.n * o.rounds : o.n;
    int fd = connect_to(o.host, o.port);
    /* Room for one batch: a recipe transaction is under 300 bytes, a single command under 100. */
    size_t out_cap = (size_t)o.batch * 320 + 1024;
    char *out = xrealloc(NULL, out_cap);
    struct inbuf in = {.p = xrealloc(NULL, 1 << 20), .len = 0, .cap = 1 << 20};
    char first_err[256] = "";
    long errors = 0;

    double cpu0 = o.pid ? proc_cpu_s(o.pid) * 1000.0 : 0;
    double t0 = now_s();
    for (long done = 0; done < total;) {
        size_t len = 0;
        long replies = 0;
        long end = done + o.batch < total ? done + o.batch : total;
        for (long i = done; i < end; i++)
            replies += make_op(&o, i, out, &len);
        write_all(fd, out, len);
        errors += read_replies(fd, &in, replies, first_err, sizeof first_err);
        done = end;
    }
    double secs = now_s() - t0;
    double cpu = o.pid ? proc_cpu_s(o.pid) * 1000.0 - cpu0 : 0;

    printf("ops %ld errors %ld seconds %.3f ops_per_s %.0f server_cpu_ms %.0f cpu_us_per_op %.3f\n",
           total, errors, secs, (double)total / secs, cpu, cpu * 1000.0 / (double)total);
    if (errors > 0)
        fprintf(stderr, "zset_load: first error: %s\n", first_err);
    close(fd);
    free(out);
    free(in.p);
    return errors > 0 ? 1 : 0;
}
