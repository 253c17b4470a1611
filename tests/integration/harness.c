/* harness.c - see harness.h. Black box: this file knows the daemon only by its command line,
 * its log and the Redis protocol. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <criterion/criterion.h>

#define MAX_DAEMONS 8
#define LOG_TAIL 3000

/* Daemons started by this worker process, for it_fini. */
static struct it_daemon *daemons[MAX_DAEMONS];

long long it_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void it_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *it_bin(void)
{
    const char *b = getenv("RLIMITD_BIN");
    cr_assert(b != NULL && b[0] != '\0', "RLIMITD_BIN is not set (run through meson test)");
    return b;
}

const char *it_source_root(void)
{
    const char *s = getenv("RLIMITD_SOURCE_ROOT");
    cr_assert(s != NULL && s[0] != '\0', "RLIMITD_SOURCE_ROOT is not set (run through meson test)");
    return s;
}

int it_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
    socklen_t len = sizeof(a);
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname: %s",
              strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

char *it_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    cr_assert(buf != NULL);
    if (f != NULL) {
        size_t n;
        while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
            len += n;
            if (cap - len < 2) {
                cap *= 2;
                buf = realloc(buf, cap);
                cr_assert(buf != NULL);
            }
        }
        fclose(f);
    }
    buf[len] = '\0';
    return buf;
}

/* The end of the daemon's log, for failure messages (a static copy: the caller is about to
 * fail the test, and must not leak on the way out). */
static const char *log_tail(const struct it_daemon *d)
{
    static char tail[LOG_TAIL + 1];
    char *whole = it_read_file(d->log);
    size_t n = strlen(whole);
    snprintf(tail, sizeof(tail), "%s", n > LOG_TAIL ? whole + n - LOG_TAIL : whole);
    free(whole);
    return tail;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *dir)
{
    if (dir[0] != '\0')
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void unregister(struct it_daemon *d)
{
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (daemons[i] == d)
            daemons[i] = NULL;
    remove_tree(d->dir);
    free(d);
}

struct it_daemon *it_prepare(void)
{
    /* A daemon that is gone must not take the test process with it. */
    signal(SIGPIPE, SIG_IGN);
    struct it_daemon *d = calloc(1, sizeof(*d));
    cr_assert(d != NULL);
    int slot = -1;
    for (int i = 0; i < MAX_DAEMONS && slot < 0; i++)
        if (daemons[i] == NULL)
            slot = i;
    cr_assert(slot >= 0, "too many daemons in one test");
    daemons[slot] = d;

    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof(d->dir), "%s/rlimitd-it.XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    cr_assert(mkdtemp(d->dir) != NULL, "mkdtemp %s: %s", d->dir, strerror(errno));
    snprintf(d->conf, sizeof(d->conf), "%s/rlimitd.conf", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/rlimitd.log", d->dir);
    FILE *f = fopen(d->conf, "w");
    cr_assert(f != NULL, "%s: %s", d->conf, strerror(errno));
    fprintf(f,
            "# written by the integration harness\n"
            "bind 127.0.0.1\n"
            "dir \"%s\"\n"
            "save-interval 0\n"
            "threads 2\n"
            "loglevel notice\n",
            d->dir);
    cr_assert(fclose(f) == 0);
    return d;
}

void it_spawn(struct it_daemon *d, int port, const char *const *extra)
{
    const char *argv[64];
    int n = 0;
    char portbuf[16];
    snprintf(portbuf, sizeof(portbuf), "%d", port);
    argv[n++] = it_bin();
    argv[n++] = "-c";
    argv[n++] = d->conf;
    argv[n++] = "--port";
    argv[n++] = portbuf;
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        cr_assert(n < 62, "too many daemon arguments");
        if (strcmp(extra[i], "--requirepass") == 0 && extra[i + 1] != NULL)
            snprintf(d->pass, sizeof(d->pass), "%s", extra[i + 1]);
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    d->port = port;

    d->pid = it_spawn_server(argv, d->log, d->dir, NULL);
}

pid_t it_spawn_server(const char *const *argv, const char *log, const char *dir,
                      const char *const *env)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the test worker (e.g. on a Criterion timeout). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        for (int i = 0; env != NULL && env[i] != NULL; i += 2)
            setenv(env[i], env[i + 1], 1);
        int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (logfd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 ||
            chdir(dir) != 0)
            _exit(126);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int it_wait_exit(struct it_daemon *d, int ms)
{
    if (d->pid == 0)
        return 1;
    long long deadline = it_now_ms() + ms;
    for (;;) {
        int st;
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            d->status = st;
            d->pid = 0;
            return 1;
        }
        if (it_now_ms() >= deadline)
            return 0;
        it_sleep_ms(10);
    }
}

redisContext *it_try_connect(int port)
{
    struct timeval ct = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, ct);
    if (c == NULL)
        return NULL;
    if (c->err) {
        redisFree(c);
        return NULL;
    }
    struct timeval rt = {30, 0};
    redisSetTimeout(c, rt);
    return c;
}

int it_wait_ready(struct it_daemon *d, int ms)
{
    long long deadline = it_now_ms() + ms;
    for (;;) {
        if (it_wait_exit(d, 0))
            return 0;
        redisContext *c = it_try_connect(d->port);
        if (c != NULL) {
            struct timeval rt = {1, 0};
            redisSetTimeout(c, rt);
            redisReply *r = redisCommand(c, "PING");
            /* NOAUTH is an answer too: the daemon is up and asks for a password. */
            int ok =
                r != NULL && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                              (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
            if (r != NULL)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 1;
        }
        if (it_now_ms() >= deadline)
            return 0;
        it_sleep_ms(20);
    }
}

struct it_daemon *it_start(const char *const *extra)
{
    struct it_daemon *d = it_prepare();
    for (int attempt = 0;; attempt++) {
        it_spawn(d, it_free_port(), extra);
        if (it_wait_ready(d, 10000))
            return d;
        const char *tail = log_tail(d);
        int exited = d->pid == 0;
        /* The free port may have been taken between picking and binding: try another. */
        if (exited && attempt < 3 && strstr(tail, "in use") != NULL) {
            if (truncate(d->log, 0) != 0)
                cr_assert_fail("truncate %s: %s", d->log, strerror(errno));
            continue;
        }
        if (!exited) {
            kill(d->pid, SIGKILL);
            it_wait_exit(d, 5000);
        }
        cr_assert_fail("rlimitd did not answer PING within 10 s (%s, status 0x%x); log:\n%s",
                       exited ? "exited" : "still running", d->status, tail);
    }
}

void it_assert_clean_log(const struct it_daemon *d)
{
    static const char *const bad[] = {"runtime error:", "AddressSanitizer", "LeakSanitizer",
                                      "ThreadSanitizer", NULL};
    char *whole = it_read_file(d->log);
    for (int i = 0; bad[i] != NULL; i++) {
        const char *hit = strstr(whole, bad[i]);
        if (hit != NULL) {
            static char excerpt[LOG_TAIL + 1];
            snprintf(excerpt, sizeof(excerpt), "%s", hit);
            free(whole);
            cr_assert_fail("daemon log (%s) contains \"%s\":\n%s", d->log, bad[i], excerpt);
        }
    }
    free(whole);
}

/* Waits for the exit after a stop request, then asserts status 0 and a clean log. */
static void finish_stop(struct it_daemon *d, const char *how)
{
    if (!it_wait_exit(d, 30000)) {
        kill(d->pid, SIGKILL);
        it_wait_exit(d, 5000);
        const char *tail = log_tail(d);
        cr_assert_fail("rlimitd did not exit within 30 s of %s; log:\n%s", how, tail);
    }
    if (!WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0) {
        const char *tail = log_tail(d);
        if (WIFSIGNALED(d->status))
            cr_assert_fail("rlimitd was killed by signal %d after %s; log:\n%s",
                           WTERMSIG(d->status), how, tail);
        cr_assert_fail("rlimitd exited with status %d after %s (want 0); log:\n%s",
                       WEXITSTATUS(d->status), how, tail);
    }
    it_assert_clean_log(d);
    unregister(d);
}

void it_stop(struct it_daemon *d)
{
    cr_assert(d != NULL && d->pid != 0, "it_stop: daemon not running");
    redisContext *c = NULL;
    /* A daemon at maxclients may refuse us ("-ERR max number of clients reached") for a
     * moment after its clients went away: retry until a PING is answered. */
    long long deadline = it_now_ms() + 5000;
    while (c == NULL && it_now_ms() < deadline) {
        c = it_try_connect(d->port);
        if (c != NULL) {
            redisReply *r = NULL;
            int ok = 1;
            if (d->pass[0] != '\0') {
                r = redisCommand(c, "AUTH %s", d->pass);
                ok = r != NULL && r->type == REDIS_REPLY_STATUS;
                if (r != NULL)
                    freeReplyObject(r);
            }
            if (ok) {
                r = redisCommand(c, "PING");
                ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
                if (r != NULL)
                    freeReplyObject(r);
            }
            if (!ok) {
                redisFree(c);
                c = NULL;
            }
        }
        if (c == NULL)
            it_sleep_ms(50);
    }
    if (c == NULL) {
        kill(d->pid, SIGTERM);
        finish_stop(d, "SIGTERM (no connection accepted for SHUTDOWN)");
        return;
    }
    redisReply *r = redisCommand(c, "SHUTDOWN NOSAVE");
    /* Redis closes the connection without a reply; +OK is tolerated. */
    if (r != NULL && !(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)) {
        char msg[256];
        snprintf(msg, sizeof(msg), "type %d: %s", r->type, r->str != NULL ? r->str : "");
        freeReplyObject(r);
        redisFree(c);
        kill(d->pid, SIGKILL);
        it_wait_exit(d, 5000);
        cr_assert_fail("SHUTDOWN NOSAVE answered %s", msg);
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    finish_stop(d, "SHUTDOWN NOSAVE");
}

void it_stop_signal(struct it_daemon *d, int sig)
{
    cr_assert(d != NULL && d->pid != 0, "it_stop_signal: daemon not running");
    cr_assert(kill(d->pid, sig) == 0, "kill: %s", strerror(errno));
    finish_stop(d, strsignal(sig));
}

void it_fini(void)
{
    for (int i = 0; i < MAX_DAEMONS; i++) {
        struct it_daemon *d = daemons[i];
        if (d == NULL)
            continue;
        if (d->pid != 0) {
            kill(d->pid, SIGKILL);
            it_wait_exit(d, 5000);
        }
        unregister(d);
    }
}

long it_rss_kib(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    char *s = it_read_file(path);
    const char *p = strstr(s, "VmRSS:");
    long v = p != NULL ? strtol(p + 6, NULL, 10) : -1;
    free(s);
    return v;
}

long long it_proc_stat_field(const char *path, int field)
{
    char *s = it_read_file(path);
    if (s[0] == '\0') {
        free(s);
        return -1;
    }
    const char *f = strrchr(s, ')'); /* the command name (field 2) may hold spaces and ')' */
    cr_assert(f != NULL && field >= 3, "%s: no field %d", path, field);
    f += 2; /* field 3 */
    for (int i = 3; i < field && f != NULL; i++) {
        f = strchr(f, ' ');
        if (f != NULL)
            f++;
    }
    long long v = 0;
    cr_assert(f != NULL && sscanf(f, "%lld", &v) == 1, "%s: cannot parse field %d", path, field);
    free(s);
    return v;
}

/* ---- hiredis ---- */

redisContext *it_connect(int port)
{
    struct timeval ct = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, ct);
    cr_assert(c != NULL, "redisConnect: out of memory");
    cr_assert(!c->err, "connect to 127.0.0.1:%d: %s", port, c->errstr);
    struct timeval rt = {30, 0};
    redisSetTimeout(c, rt);
    return c;
}

redisReply *it_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(r != NULL, "no reply to \"%s\": %s", fmt, c->errstr);
    return r;
}

redisReply *it_cmdargv(redisContext *c, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    cr_assert(r != NULL, "no reply to %s...: %s", argv[0], c->errstr);
    return r;
}

/* A short human description of a reply, for failure messages. */
static const char *describe(const redisReply *r, char *buf, size_t len)
{
    switch (r->type) {
    case REDIS_REPLY_STATUS:
        snprintf(buf, len, "+%s", r->str);
        break;
    case REDIS_REPLY_ERROR:
        snprintf(buf, len, "-%s", r->str);
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(buf, len, ":%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(buf, len, "(nil)");
        break;
    case REDIS_REPLY_STRING:
        snprintf(buf, len, "\"%.*s\"", (int)(r->len > 200 ? 200 : r->len), r->str);
        break;
    case REDIS_REPLY_ARRAY: {
        size_t off = (size_t)snprintf(buf, len, "*%zu [", r->elements);
        for (size_t i = 0; i < r->elements && off + 40 < len; i++) {
            char e[64];
            describe(r->element[i], e, sizeof(e));
            off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", e);
        }
        if (off < len)
            snprintf(buf + off, len - off, "]");
        break;
    }
    default:
        snprintf(buf, len, "(type %d)", r->type);
    }
    return buf;
}

void it_check_status(redisReply *r, const char *want, const char *file, int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, want) == 0, "%s:%d: want +%s, got %s",
              file, line, want, describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_int(redisReply *r, long long want, const char *file, int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == want, "%s:%d: want :%lld, got %s",
              file, line, want, describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_bulk(redisReply *r, const char *want, const char *file, int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_STRING && r->len == strlen(want) &&
                  memcmp(r->str, want, r->len) == 0,
              "%s:%d: want \"%s\", got %s", file, line, want, describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_nil(redisReply *r, const char *file, int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_NIL, "%s:%d: want (nil), got %s", file, line,
              describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_err(redisReply *r, const char *want, const char *file, int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_ERROR && strcmp(r->str, want) == 0,
              "%s:%d: want -%s|, got %s|", file, line, want, describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_err_like(redisReply *r, const char *prefix, const char *contains, const char *file,
                       int line)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0 &&
                  (contains == NULL || strstr(r->str, contains) != NULL),
              "%s:%d: want -%s... containing \"%s\", got %s", file, line, prefix,
              contains != NULL ? contains : "", describe(r, b, sizeof(b)));
    freeReplyObject(r);
}

void it_check_ints(redisReply *r, const long long *want, size_t n, const char *file, int line)
{
    char b[512];
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == n;
    for (size_t i = 0; ok && i < n; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == want[i];
    if (!ok) {
        char w[256];
        size_t off = 0;
        for (size_t i = 0; i < n && off + 24 < sizeof(w); i++)
            off += (size_t)snprintf(w + off, sizeof(w) - off, "%s%lld", i ? " " : "", want[i]);
        w[off] = '\0';
        cr_assert_fail("%s:%d: want [%s], got %s", file, line, w, describe(r, b, sizeof(b)));
    }
    freeReplyObject(r);
}

long long it_int(redisReply *r)
{
    char b[512];
    cr_assert(r->type == REDIS_REPLY_INTEGER, "want an integer, got %s", describe(r, b, sizeof(b)));
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

long long it_info_int(redisContext *c, const char *section, const char *field)
{
    redisReply *r = it_cmd(c, "INFO %s", section);
    cr_assert(r->type == REDIS_REPLY_STRING, "INFO %s: want a bulk string", section);
    /* Every field line follows a CRLF (the first one follows the "# Section" header), so the
     * match cannot be the tail of a longer name (used_memory in total_used_memory). */
    char key[128];
    snprintf(key, sizeof(key), "\r\n%s:", field);
    const char *p = strstr(r->str, key);
    cr_assert(p != NULL, "INFO %s lacks %s:\n%s", section, field, r->str);
    long long v = strtoll(p + strlen(key), NULL, 10);
    freeReplyObject(r);
    return v;
}

void it_await_blocked(redisContext *c, long long n)
{
    long long got = -1;
    for (int i = 0; i < 30000; i++) {
        got = it_info_int(c, "clients", "blocked_clients");
        if (got == n)
            return;
        it_sleep_ms(2);
    }
    cr_assert_fail("blocked_clients stayed %lld, want %lld", got, n);
}

double it_metric_sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    cr_assert_fail("no sample %s in:\n%s", series, text);
    return -1;
}

void it_queue_waiters(redisContext *c, int port, const char *req, int n, int fd[], long long id[])
{
    for (int i = 0; i < n; i++) {
        fd[i] = it_raw_connect(port);
        it_raw_send(fd[i], "CLIENT ID\r\n", 11);
        redisReply *o;
        cr_assert_eq(it_raw_read_replies(fd[i], 1, &o), 1);
        id[i] = o->integer;
        freeReplyObject(o);
        it_raw_send(fd[i], req, strlen(req));
        it_await_blocked(c, i + 1);
    }
}

void it_five(redisReply *r, long long v[5])
{
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5, "want 5 integers");
    for (int i = 0; i < 5; i++)
        v[i] = r->element[i]->integer;
    freeReplyObject(r);
}

/* ---- raw sockets ---- */

int it_raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect :%d: %s", port,
              strerror(errno));
    return fd;
}

void it_raw_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n > 0, "send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

void it_raw_exchange(int fd, const void *buf, size_t len, int idle_ms, size_t max_keep,
                     size_t want_len, struct it_io *io)
{
    memset(io, 0, sizeof(*io));
    size_t cap = 65536;
    io->data = malloc(cap + 1);
    cr_assert(io->data != NULL);
    size_t kept = 0;
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int can_write = 1;
    char chunk[65536];
    size_t got = 0;
    for (;;) {
        if (want_len > 0 && got >= want_len)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (can_write && io->sent < len)
            p.events |= POLLOUT;
        int pr = poll(&p, 1, idle_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break; /* idle */
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                io->closed = 1;
                break;
            }
            if (n > 0) {
                got += (size_t)n;
                size_t keep = (size_t)n;
                if (kept + keep > max_keep)
                    keep = max_keep > kept ? max_keep - kept : 0;
                if (kept + keep > cap) {
                    while (kept + keep > cap)
                        cap *= 2;
                    io->data = realloc(io->data, cap + 1);
                    cr_assert(io->data != NULL);
                }
                memcpy(io->data + kept, chunk, keep);
                kept += keep;
            }
        }
        if ((p.revents & POLLOUT) && can_write && io->sent < len) {
            ssize_t n = send(fd, (const char *)buf + io->sent, len - io->sent, MSG_NOSIGNAL);
            if (n > 0)
                io->sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                can_write = 0; /* EPIPE / reset: keep reading what was sent before */
        }
    }
    fcntl(fd, F_SETFL, flags);
    io->data[kept] = '\0';
    io->len = kept;
}

size_t it_raw_read_replies(int fd, size_t n, redisReply **out)
{
    redisReader *rd = redisReaderCreate();
    cr_assert(rd != NULL);
    size_t got = 0;
    char chunk[65536];
    while (got < n) {
        void *r = NULL;
        cr_assert(redisReaderGetReply(rd, &r) == REDIS_OK, "malformed RESP: %s", rd->errstr);
        if (r != NULL) {
            out[got++] = r;
            continue;
        }
        ssize_t k = recv(fd, chunk, sizeof(chunk), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        redisReaderFeed(rd, chunk, (size_t)k);
    }
    redisReaderFree(rd);
    return got;
}

size_t it_parse_replies(const char *data, size_t len, redisReply **out, size_t max, size_t *rest)
{
    redisReader *rd = redisReaderCreate();
    cr_assert(rd != NULL);
    size_t n = 0;
    const size_t step = 1 << 20;
    size_t fed = 0;
    for (;;) {
        void *r = NULL;
        int rc = redisReaderGetReply(rd, &r);
        cr_assert(rc == REDIS_OK, "malformed RESP from the daemon: %s", rd->errstr);
        if (r != NULL) {
            if (n < max)
                out[n] = r;
            else
                freeReplyObject(r);
            n++;
            continue;
        }
        if (fed >= len)
            break;
        size_t k = len - fed < step ? len - fed : step;
        redisReaderFeed(rd, data + fed, k);
        fed += k;
    }
    if (rest != NULL)
        *rest = rd->len - rd->pos;
    redisReaderFree(rd);
    return n < max ? n : max;
}

void it_assert_healthy(struct it_daemon *d, redisContext *other, const char *sentinel_key,
                       const char *sentinel_val)
{
    cr_assert(d->pid != 0 && !it_wait_exit(d, 0), "the daemon died (status 0x%x)", d->status);
    IT_STATUS(it_cmd(other, "PING"), "PONG");
    IT_BULK(it_cmd(other, "GET %s", sentinel_key), sentinel_val);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
}

/* ---- child processes ---- */

int it_run(char **out, const char *fmt, ...)
{
    char line[4000], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < sizeof(line), "command line too long");
    /* No terminal, no stdin (a pipe inside the line still feeds its own commands). */
    snprintf(cmd, sizeof(cmd), "( %s ) </dev/null 2>&1", line);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "popen %s: %s", cmd, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    cr_assert(buf != NULL);
    size_t k;
    while ((k = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert(buf != NULL);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    if (out != NULL)
        *out = buf;
    else
        free(buf);
    return st;
}

void it_limit_init(struct it_limit *l)
{
    lm_gcra_reset(&l->model);
    l->since = lm_now_ns();
}

void it_throttle(redisContext *c, struct it_limit *l, const char *key, int max_burst, int count,
                 int period, int quantity, const long long want[5], const char *file, int line)
{
    char b[512], why[512];
    int64_t before = lm_now_ns();
    redisReply *r =
        it_cmd(c, "CL.THROTTLE %s %d %d %d %d", key, max_burst, count, period, quantity);
    int64_t after = lm_now_ns();
    long long v[5];
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 5;
    for (size_t i = 0; ok && i < 5; i++) {
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
        v[i] = ok ? r->element[i]->integer : 0;
    }
    cr_assert(ok, "%s:%d: CL.THROTTLE %s: got %s", file, line, key, describe(r, b, sizeof(b)));
    freeReplyObject(r);
    cr_assert(lm_gcra_check(&l->model, max_burst, count, period, quantity, before, after, v, why,
                            sizeof why) == 0,
              "%s:%d: CL.THROTTLE %s: %s", file, line, key, why);
    if (after - l->since < INT64_C(1000000000))
        for (size_t i = 0; i < 5; i++)
            cr_assert(v[i] == want[i],
                      "%s:%d: CL.THROTTLE %s: got [%lld %lld %lld %lld %lld], want "
                      "[%lld %lld %lld %lld %lld]",
                      file, line, key, v[0], v[1], v[2], v[3], v[4], want[0], want[1], want[2],
                      want[3], want[4]);
}
