/* test_output.c - replies a client does not read (docs/CONFIG.md "Output buffers", DESIGN.md
 * "Fairness"): client-output-buffer-limit as Redis 7.0 reads, answers and enforces it (against
 * redis-server itself where it speaks), the log line of a closed client, the small limit of
 * unauthenticated connections, a pipeline that lets the thread's other clients in between its
 * slices, and client-query-buffer-limit / proto-max-bulk-len raised and lowered together. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(output, .fini = it_fini, .timeout = 300);

/* ---- helpers ---- */

/* A list of n members of 13 bytes: LRANGE of it answers about 20 bytes per member. */
static void fill_list(redisContext *c, const char *key, int n)
{
    for (int i = 0; i < n; i += 100) {
        const char *argv[102];
        char members[100][16];
        int argc = 0;
        argv[argc++] = "RPUSH";
        argv[argc++] = key;
        for (int k = i; k < i + 100 && k < n; k++) {
            snprintf(members[k - i], sizeof members[0], "member:%06d", k);
            argv[argc++] = members[k - i];
        }
        IT_INT(it_cmdargv(c, argc, argv), i + 100 < n ? i + 100 : n);
    }
}

/* count copies of "LRANGE key 0 -1" in RESP, malloc'd; *len gets its size. */
static char *lranges(const char *key, int count, size_t *len)
{
    char one[128];
    int n = snprintf(one, sizeof one, "*4\r\n$6\r\nLRANGE\r\n$%zu\r\n%s\r\n$1\r\n0\r\n$2\r\n-1\r\n",
                     strlen(key), key);
    char *buf = malloc((size_t)n * (size_t)count);
    cr_assert(buf != NULL);
    for (int i = 0; i < count; i++)
        memcpy(buf + (size_t)i * (size_t)n, one, (size_t)n);
    *len = (size_t)n * (size_t)count;
    return buf;
}

/* Sends what the server takes of buf without reading anything, until it stops taking it for
 * idle_ms or took all; returns how much it took. */
static size_t send_unread(int fd, const char *buf, size_t len, int idle_ms)
{
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    size_t sent = 0;
    while (sent < len) {
        struct pollfd p = {fd, POLLOUT, 0};
        int pr = poll(&p, 1, idle_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0 || (p.revents & (POLLERR | POLLHUP)))
            break;
        ssize_t n = send(fd, buf + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break; /* closed by the server */
        sent += (size_t)n;
    }
    fcntl(fd, F_SETFL, flags);
    return sent;
}

/* Reads the connection to its end: 1 if the server closed it (EOF or reset) within ms. */
static int closed_within(int fd, int ms)
{
    char buf[65536];
    long long deadline = it_now_ms() + ms;
    while (it_now_ms() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, 100);
        if (pr <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    }
    return 0;
}

/* The first line of the file at path containing needle, malloc'd, waiting up to ms for it. */
static char *wait_log_line(const char *path, const char *needle, int ms)
{
    long long deadline = it_now_ms() + ms;
    for (;;) {
        char *log = it_read_file(path);
        char *hit = strstr(log, needle);
        if (hit != NULL) {
            char *start = hit;
            while (start > log && start[-1] != '\n')
                start--;
            size_t n = strcspn(start, "\n");
            char *line = strndup(start, n);
            free(log);
            return line;
        }
        free(log);
        if (it_now_ms() >= deadline)
            return NULL;
        it_sleep_ms(50);
    }
}

/* The client id the connection fd has (CLIENT ID over the raw socket). */
static long long raw_client_id(int fd)
{
    static const char cmd[] = "*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";
    it_raw_send(fd, cmd, sizeof cmd - 1);
    redisReply *r = NULL;
    cr_assert_eq(it_raw_read_replies(fd, 1, &r), 1);
    return it_int(r);
}

/* redis-server 7.0 on a free port, logging to path (its stdout); its pid in *pid. */
static int start_redis(const char *dir, const char *log, pid_t *pid)
{
    int port = it_free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    const char *argv[] = {"redis-server", "--port", ps, "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", NULL};
    *pid = it_spawn_server(argv, log, dir, NULL);
    long long deadline = it_now_ms() + 10000;
    while (it_now_ms() < deadline) {
        redisContext *c = it_try_connect(port);
        if (c != NULL) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            if (r != NULL)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return port;
        }
        it_sleep_ms(20);
    }
    cr_assert_fail("redis-server did not start");
    return 0;
}

static void stop_redis(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Same type and text: replies compared as the differential tests compare them. */
static void same_reply(redisReply *a, redisReply *b, const char *what)
{
    cr_assert_eq(a->type, b->type, "%s: type %d (rlimitd) vs %d (redis)", what, a->type,
                 b->type);
    if (a->type == REDIS_REPLY_ARRAY) {
        cr_assert_eq(a->elements, b->elements, "%s", what);
        for (size_t i = 0; i < a->elements; i++)
            same_reply(a->element[i], b->element[i], what);
    } else if (a->str != NULL || b->str != NULL) {
        cr_assert(a->str != NULL && b->str != NULL, "%s", what);
        cr_assert_str_eq(a->str, b->str, "%s", what);
    } else {
        cr_assert_eq(a->integer, b->integer, "%s", what);
    }
}

/* ---- CONFIG ---- */

/* The same CONFIG SET / GET sequence to rlimitd and redis-server 7.0: every reply the same. */
Test(output, config_set_and_get_answer_as_redis)
{
    struct it_daemon *d = it_start(NULL);
    char log[400];
    snprintf(log, sizeof log, "%s/redis.log", d->dir);
    pid_t rpid;
    int rport = start_redis(d->dir, log, &rpid);
    redisContext *a = it_connect(d->port), *b = it_connect(rport);
    static const char *const values[] = {
        "", "normal 1 2 3", "normal  1 2 3", "replica 1mb 2k 5", "slave 1 1 1 pubsub 2 2 2",
        "master 1 1 1", "foo 1 1 1", "normal 1 1 1 foo 1 1 1", "normal -1 0 0",
        "normal 1.5mb 0 0", "normal 1 1 -1", "normal 1 1 x", "normal 1 1", "NORMAL 10 20 30",
        "normal 0x10 1 1", "normal 1 1 1.5", "normal 99999999999999999999 1 1",
        "normal 1 1 99999999999", "normal 1gb 1g 1", "normal 1 1 2147483648", "normal 1 1 +5",
        "normal +5 1 1", "normal b 1 1", "normal 1B 1 1", "normal 1 1 ", " normal 1 1 1",
        "pubsub 32mb 8mb 60 slave 256mb 64mb 60 normal 0 0 0",
    };
    redisReply *ra = it_cmd(a, "CONFIG GET client-output-buffer-limit");
    redisReply *rb = it_cmd(b, "CONFIG GET client-output-buffer-limit");
    same_reply(ra, rb, "the default");
    freeReplyObject(ra);
    freeReplyObject(rb);
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        const char *argv[] = {"CONFIG", "SET", "client-output-buffer-limit", values[i]};
        ra = it_cmdargv(a, 4, argv);
        rb = it_cmdargv(b, 4, argv);
        same_reply(ra, rb, values[i]);
        freeReplyObject(ra);
        freeReplyObject(rb);
        ra = it_cmd(a, "CONFIG GET client-output-buffer-limit");
        rb = it_cmd(b, "CONFIG GET client-output-buffer-limit");
        same_reply(ra, rb, values[i]);
        freeReplyObject(ra);
        freeReplyObject(rb);
    }
    /* With other directives in one CONFIG SET, as Redis 7 allows. */
    ra = it_cmd(a, "CONFIG SET client-output-buffer-limit %s maxclients 900", "normal 7 8 9");
    rb = it_cmd(b, "CONFIG SET client-output-buffer-limit %s maxclients 900", "normal 7 8 9");
    same_reply(ra, rb, "two directives");
    freeReplyObject(ra);
    freeReplyObject(rb);
    ra = it_cmd(a, "CONFIG GET client-output-buffer-limit");
    rb = it_cmd(b, "CONFIG GET client-output-buffer-limit");
    same_reply(ra, rb, "after two directives");
    freeReplyObject(ra);
    freeReplyObject(rb);
    redisFree(a);
    redisFree(b);
    stop_redis(rpid);
    it_stop(d);
}

/* client-output-buffer-limit lines as in redis.conf (one per class, replica spelled both ways)
 * configure the daemon at start. */
Test(output, config_file_lines_per_class)
{
    struct it_daemon *d = it_prepare();
    FILE *f = fopen(d->conf, "a");
    cr_assert(f != NULL);
    fputs("client-output-buffer-limit normal 4mb 2mb 30\n"
          "client-output-buffer-limit replica 1mb 512kb 10\n"
          "client-output-buffer-limit pubsub 64mb 16mb 90 slave 2mb 1mb 20\n",
          f);
    fclose(f);
    it_spawn(d, it_free_port(), NULL);
    cr_assert(it_wait_ready(d, 10000), "%s", it_read_file(d->log));
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "CONFIG GET client-output-buffer-limit");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 2);
    cr_assert_str_eq(r->element[1]->str, "normal 4194304 2097152 30 slave 2097152 1048576 20 "
                                         "pubsub 67108864 16777216 90");
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

/* SIGHUP re-reads the file: client-output-buffer-limit follows it, and the query buffer and
 * bulk limits may both go down at once (applied one by one, the first alone would break the rule
 * between them; the file as a whole does not). */
Test(output, sighup_reloads_the_limits_together)
{
    struct it_daemon *d = it_prepare();
    char *base = it_read_file(d->conf);
    FILE *f = fopen(d->conf, "a");
    cr_assert(f != NULL);
    fputs("client-query-buffer-limit 1gb\nproto-max-bulk-len 512mb\n", f);
    fclose(f);
    it_spawn(d, it_free_port(), NULL);
    cr_assert(it_wait_ready(d, 10000), "%s", it_read_file(d->log));
    f = fopen(d->conf, "w");
    cr_assert(f != NULL);
    fprintf(f, "%sclient-query-buffer-limit 1mb\nproto-max-bulk-len 512kb\n"
               "client-output-buffer-limit normal 1mb 512kb 10\n",
            base);
    fclose(f);
    free(base);
    kill(d->pid, SIGHUP);
    redisContext *c = it_connect(d->port);
    const char *want[][2] = {{"client-query-buffer-limit", "1048576"},
                             {"proto-max-bulk-len", "524288"},
                             {"client-output-buffer-limit",
                              "normal 1048576 524288 10 slave 268435456 67108864 60 "
                              "pubsub 33554432 8388608 60"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char got[256] = "";
        for (int tries = 0; tries < 500; tries++) {
            redisReply *r = it_cmd(c, "CONFIG GET %s", want[i][0]);
            snprintf(got, sizeof got, "%s", r->elements == 2 ? r->element[1]->str : "");
            freeReplyObject(r);
            if (strcmp(got, want[i][1]) == 0)
                break;
            it_sleep_ms(20);
        }
        cr_assert_str_eq(got, want[i][1], "%s after SIGHUP:\n%s", want[i][0],
                         it_read_file(d->log));
    }
    /* A file that breaks the rule changes nothing, and the log says why. */
    base = it_read_file(d->conf);
    f = fopen(d->conf, "a");
    cr_assert(f != NULL);
    fputs("proto-max-bulk-len 2mb\nclient-output-buffer-limit normal 0 0 0\n", f);
    fclose(f);
    free(base);
    kill(d->pid, SIGHUP);
    char *line = wait_log_line(d->log, "keeping the running configuration", 10000);
    cr_assert(line != NULL, "%s", it_read_file(d->log));
    cr_assert(strstr(line, "SIGHUP: proto-max-bulk-len (2097152) must not exceed "
                           "client-query-buffer-limit (1048576)") != NULL,
              "%s", line);
    free(line);
    redisReply *r = it_cmd(c, "CONFIG GET client-output-buffer-limit");
    cr_assert_str_eq(r->element[1]->str, want[2][1]);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

/* The rule between the query buffer and the bulk limit is judged against the running values
 * (it used to be judged against the defaults: raising both one after the other failed), on
 * the result of the whole CONFIG SET, in both directions; the limits then hold on the wire. */
Test(output, query_buffer_and_bulk_limits_change_together)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "CONFIG SET client-query-buffer-limit 1gb"), "OK");
    IT_STATUS(it_cmd(c, "CONFIG SET proto-max-bulk-len 512mb"), "OK");
    redisReply *r = it_cmd(c, "CONFIG GET proto-max-bulk-len");
    cr_assert_str_eq(r->element[1]->str, "536870912");
    freeReplyObject(r);
    IT_ERR(it_cmd(c, "CONFIG SET client-query-buffer-limit 1mb"),
           "ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') - "
           "proto-max-bulk-len (536870912) must not exceed client-query-buffer-limit (1048576)");
    IT_ERR(it_cmd(c, "CONFIG SET proto-max-bulk-len 512mb client-query-buffer-limit 256mb"),
           "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - "
           "proto-max-bulk-len (536870912) must not exceed client-query-buffer-limit (268435456)");
    r = it_cmd(c, "CONFIG GET client-query-buffer-limit");
    cr_assert_str_eq(r->element[1]->str, "1073741824", "a refused CONFIG SET changed nothing");
    freeReplyObject(r);
    /* Lowering both in one command works in either order. */
    IT_STATUS(it_cmd(c, "CONFIG SET client-query-buffer-limit 1mb proto-max-bulk-len 512kb"),
              "OK");
    IT_STATUS(it_cmd(c, "CONFIG SET proto-max-bulk-len 32mb client-query-buffer-limit 64mb"),
              "OK");
    /* A 20 MB argument now passes; one over 32 MB is refused by the bulk limit. */
    size_t big = 20u << 20;
    char *v = malloc(big);
    cr_assert(v != NULL);
    memset(v, 'v', big);
    const char *argv[] = {"SET", "big", v};
    size_t lens[] = {3, 3, big};
    r = redisCommandArgv(c, 3, argv, lens);
    cr_assert(r != NULL, "%s", c->errstr);
    IT_STATUS(r, "OK");
    IT_INT(it_cmd(c, "STRLEN big"), (long long)big);
    free(v);
    int fd = it_raw_connect(d->port);
    static const char over[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40000000\r\n";
    struct it_io io;
    it_raw_exchange(fd, over, sizeof over - 1, 5000, 4096, 0, &io);
    cr_assert(strstr(io.data, "-ERR Protocol error: bulk length 40000000 exceeds "
                              "proto-max-bulk-len 33554432") == io.data,
              "%s", io.data);
    cr_assert(io.closed);
    free(io.data);
    close(fd);
    redisFree(c);
    it_stop(d);
}

/* ---- limits that close ---- */

/* A client over its class's hard limit is closed and logged with Redis's words and its CLIENT
 * LIST line; redis-server 7.0 closes the same client with the same words around its line. */
Test(output, hard_limit_closes_the_client_and_logs_it_as_redis)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET sentinel alive"), "OK");
    fill_list(c, "l", 500);
    IT_STATUS(it_cmd(c, "CONFIG SET client-output-buffer-limit %s", "normal 128kb 0 0"), "OK");
    int fd = it_raw_connect(d->port);
    long long id = raw_client_id(fd);
    size_t len;
    char *cmds = lranges("l", 3000, &len); /* 3000 replies of ~10 KB: 30 MB if buffered */
    send_unread(fd, cmds, len, 2000);
    char *line = wait_log_line(d->log, "for overcoming of output buffer limits.", 60000);
    cr_assert(line != NULL, "no log line:\n%s", it_read_file(d->log));
    char want[64];
    snprintf(want, sizeof want, "Client id=%lld addr=127.0.0.1:", id);
    cr_assert(strstr(line, want) != NULL, "%s", line);
    cr_assert(strstr(line, " cmd=lrange ") != NULL, "%s", line);
    cr_assert(strstr(line, " scheduled to be closed ASAP for overcoming of output buffer "
                           "limits.") != NULL ||
                  strstr(line, " closed for overcoming of output buffer limits.") != NULL,
              "%s", line);
    cr_assert(closed_within(fd, 10000), "the client was not closed");
    close(fd);
    /* Gone from CLIENT LIST; the others are untouched. */
    redisReply *r = it_cmd(c, "CLIENT LIST");
    snprintf(want, sizeof want, "id=%lld ", id);
    cr_assert(strstr(r->str, want) == NULL, "%s", r->str);
    freeReplyObject(r);
    it_assert_healthy(d, c, "sentinel", "alive");

    /* Redis: the same client, the same limit. */
    char log[400];
    snprintf(log, sizeof log, "%s/redis.log", d->dir);
    pid_t rpid;
    int rport = start_redis(d->dir, log, &rpid);
    redisContext *rc = it_connect(rport);
    fill_list(rc, "l", 500);
    IT_STATUS(it_cmd(rc, "CONFIG SET client-output-buffer-limit %s", "normal 128kb 0 0"), "OK");
    fd = it_raw_connect(rport);
    send_unread(fd, cmds, len, 2000);
    char *rline = wait_log_line(log, "for overcoming of output buffer limits.", 60000);
    cr_assert(rline != NULL, "redis-server did not log it:\n%s", it_read_file(log));
    /* The words around the client's line are Redis's. */
    const char *ours = strstr(line, "Client id="), *theirs = strstr(rline, "Client id=");
    cr_assert(ours != NULL && theirs != NULL, "%s\n%s", line, rline);
    const char *tail = " scheduled to be closed ASAP for overcoming of output buffer limits.";
    cr_assert(strstr(theirs, tail) != NULL, "%s", rline);
    close(fd);
    redisFree(rc);
    stop_redis(rpid);
    free(line);
    free(rline);
    free(cmds);
    redisFree(c);
    it_stop(d);
}

/* Over the soft limit for longer than its seconds closes the client, even one that sends
 * nothing more (it is paused: the cron looks); never before those seconds have passed. */
Test(output, soft_limit_closes_after_its_seconds)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    fill_list(c, "l", 500);
    IT_STATUS(it_cmd(c, "CONFIG SET client-output-buffer-limit %s", "normal 0 64kb 1"), "OK");
    int fd = it_raw_connect(d->port);
    size_t len;
    char *cmds = lranges("l", 3000, &len);
    long long t0 = it_now_ms();
    send_unread(fd, cmds, len, 500);
    char *line = wait_log_line(d->log, "for overcoming of output buffer limits.", 60000);
    long long t1 = it_now_ms();
    cr_assert(line != NULL, "no log line:\n%s", it_read_file(d->log));
    cr_assert(t1 - t0 >= 1000, "closed after %lld ms, before the soft limit's second", t1 - t0);
    cr_assert(closed_within(fd, 10000));
    close(fd);
    free(line);
    free(cmds);
    redisFree(c);
    it_stop(d);
}

/* With Redis's default (normal 0 0 0) a client that does not read is paused, not closed: it
 * later reads every reply, in order. */
Test(output, no_limit_means_paused_not_closed)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    fill_list(c, "l", 500);
    int fd = it_raw_connect(d->port);
    size_t len;
    char *cmds = lranges("l", 2000, &len);
    size_t sent = send_unread(fd, cmds, len, 1000);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    char *log = it_read_file(d->log);
    cr_assert(strstr(log, "output buffer limits") == NULL, "%s", log);
    free(log);
    /* Now read while sending the rest: all 2000 replies come, each the whole list. */
    struct it_io io;
    it_raw_exchange(fd, cmds + sent, len - sent, 10000, (size_t)1 << 30, 0, &io);
    cr_assert(!io.closed || io.sent == len - sent);
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, io.data, io.len);
    size_t got = 0;
    for (;;) {
        void *r = NULL;
        cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK);
        if (r == NULL)
            break;
        redisReply *rr = r;
        cr_assert_eq(rr->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(rr->elements, 500);
        freeReplyObject(rr);
        got++;
    }
    redisReaderFree(rd);
    cr_assert_eq(got, 2000, "got %zu replies", got);
    free(io.data);
    close(fd);
    free(cmds);
    redisFree(c);
    it_stop(d);
}

/* ---- unauthenticated connections (CVE-2025-21605) ---- */

/* Before AUTH a connection may not pile up replies: one that pipelines commands and reads none
 * of its NOAUTH errors is closed past 16 KiB of them, whatever client-output-buffer-limit says;
 * the same traffic after AUTH is only paused. */
Test(output, unauthenticated_client_that_does_not_read_is_closed)
{
    struct it_daemon *d = it_start(IT_ARGS("--requirepass", "s3cret"));
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "AUTH s3cret"), "OK");
    IT_STATUS(it_cmd(c, "SET sentinel alive"), "OK");
    /* A few errors, read, then AUTH: an ordinary unauthenticated client is fine. */
    int ok = it_raw_connect(d->port);
    static const char few[] = "PING\r\nPING\r\n*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\nPING\r\n";
    it_raw_send(ok, few, sizeof few - 1);
    redisReply *r[4];
    cr_assert_eq(it_raw_read_replies(ok, 4, r), 4);
    cr_assert_str_eq(r[0]->str, "NOAUTH Authentication required.");
    cr_assert_str_eq(r[2]->str, "OK");
    cr_assert_str_eq(r[3]->str, "PONG");
    for (int i = 0; i < 4; i++)
        freeReplyObject(r[i]);

    /* 100,000 PINGs unauthenticated: 3.4 MB of NOAUTH errors if they were kept. */
    size_t n = 100000, len = n * 6;
    char *pings = malloc(len);
    cr_assert(pings != NULL);
    for (size_t i = 0; i < n; i++)
        memcpy(pings + i * 6, "PING\r\n", 6);
    int fd = it_raw_connect(d->port);
    send_unread(fd, pings, len, 2000);
    char *line = wait_log_line(d->log, "for overcoming of output buffer limits.", 60000);
    cr_assert(line != NULL, "not closed:\n%s", it_read_file(d->log));
    cr_assert(strstr(line, " cmd=NULL ") != NULL || strstr(line, " cmd=ping ") != NULL, "%s",
              line);
    cr_assert(closed_within(fd, 10000));
    close(fd);
    free(line);
    IT_BULK(it_cmd(c, "GET sentinel"), "alive");

    /* The same pipeline after AUTH: paused, then every PONG arrives. */
    fd = it_raw_connect(d->port);
    static const char auth[] = "*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n";
    it_raw_send(fd, auth, sizeof auth - 1);
    size_t sent = send_unread(fd, pings, len, 1000);
    struct it_io io;
    it_raw_exchange(fd, pings + sent, len - sent, 10000, (size_t)64 << 20,
                    strlen("+OK\r\n") + n * strlen("+PONG\r\n"), &io);
    cr_assert_eq(io.len, strlen("+OK\r\n") + n * strlen("+PONG\r\n"), "got %zu bytes, closed %d",
                 io.len, io.closed);
    free(io.data);
    close(fd);
    char *log = it_read_file(d->log);
    char *first = strstr(log, "for overcoming of output buffer limits.");
    cr_assert(first != NULL && strstr(first + 1, "for overcoming of output buffer limits.") == NULL,
              "an authenticated client was closed:\n%s", log);
    free(log);
    free(pings);
    redisFree(c);
    it_stop(d);
}

/* ---- fairness ---- */

/* One connection's pipeline of big replies runs in slices: another connection's request that
 * arrives meanwhile is answered between two slices, not after the whole pipeline. The
 * back-pressure pause is raised out of the way so that only the slices can let it in. The
 * request is INFO commandstats, whose reply says how many of the pipeline's LRANGEs had run.
 * With one I/O thread kept busy by a script, the pipeline (one read's worth) and then the
 * request are written; once the script ends the thread finds both, the pipeline first, and a
 * server that ran a read's commands all at once would answer "all of them". Whatever the
 * timing the request cannot be answered before the pipeline's first slice (it was written
 * later), so "some but not all" is the one answer slices give unless the test stalls for as
 * long as 40 MB of replies take; the test tries up to 10 times to see it once. */
Test(output, a_pipeline_lets_other_clients_in_between_slices)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "1", "--client-output-pause-limit", "1gb"));
    redisContext *c = it_connect(d->port), *busy = it_connect(d->port);
    fill_list(c, "l", 1000);
    enum { PIPELINE = 1600 }; /* 61 KB of commands (one read), ~20 KB of reply each */
    size_t len;
    char *cmds = lranges("l", PIPELINE, &len);
    cr_assert(len <= 64 * 1024);
    long calls = 0;
    int seen = 0;
    for (int attempt = 0; attempt < 30 && !seen; attempt++) {
        IT_STATUS(it_cmd(c, "CONFIG RESETSTAT"), "OK");
        int fd = it_raw_connect(d->port);
        IT_INT(it_cmd(c, "EXISTS l"), 1); /* fd is accepted by now: the thread is idle */
        cr_assert(redisAppendCommand(busy, "EVAL %s 0 %d",
                                     "local n = 0 for i = 1, ARGV[1] do n = n + i end return 1",
                                     20000000) == REDIS_OK);
        int done = 0;
        while (!done)
            cr_assert(redisBufferWrite(busy, &done) == REDIS_OK);
        it_raw_send(fd, cmds, len);
        redisReply *r = it_cmd(c, "INFO commandstats");
        const char *p = strstr(r->str, "cmdstat_lrange:calls=");
        calls = p != NULL ? strtol(p + strlen("cmdstat_lrange:calls="), NULL, 10) : 0;
        freeReplyObject(r);
        void *er = NULL;
        cr_assert(redisGetReply(busy, &er) == REDIS_OK);
        IT_INT(er, 1);
        if (calls > 0 && calls < PIPELINE)
            seen = 1;
        close(fd); /* its replies are dropped with it */
        /* Wait until the closed connection is gone, so the next attempt starts quiet. */
        for (int i = 0; i < 500; i++) {
            r = it_cmd(c, "CLIENT LIST");
            int lines = 0;
            for (const char *q = r->str; *q; q++)
                lines += *q == '\n';
            freeReplyObject(r);
            if (lines == 2)
                break;
            it_sleep_ms(20);
        }
    }
    cr_assert(seen, "INFO never ran while the pipeline did (last: %ld of %d LRANGEs had run)",
              calls, PIPELINE);
    free(cmds);
    redisFree(busy);
    redisFree(c);
    it_stop(d);
}
