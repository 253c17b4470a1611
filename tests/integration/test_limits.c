/* test_limits.c - concurrency (many connections on two threads racing for one key) and the
 * connection limits of COMMANDS.md, Wire protocol: maxclients, timeout, output back-pressure. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "../cases/limit_model.h"

TestSuite(concurrency, .fini = it_fini, .timeout = 180);
TestSuite(limits, .fini = it_fini, .timeout = 300);

enum { CONNS = 200 };

/* CLOCK_REALTIME just before the first command of the last race was written and just after its
 * last reply was read: every call of the race ran in between. */
static int64_t race_before, race_after;

/* Opens CONNS connections, queues cmd on each, writes all of them, then reads all replies. */
static void race(struct it_daemon *d, const char *cmd, redisReply **replies)
{
    static redisContext *cs[CONNS];
    for (int i = 0; i < CONNS; i++) {
        cs[i] = it_connect(d->port);
        /* Make sure the server has accepted it before the race starts. */
        IT_STATUS(it_cmd(cs[i], "PING"), "PONG");
    }
    for (int i = 0; i < CONNS; i++)
        cr_assert(redisAppendCommand(cs[i], cmd) == REDIS_OK);
    race_before = lm_now_ns();
    for (int i = 0; i < CONNS; i++) {
        int done = 0;
        while (!done)
            cr_assert(redisBufferWrite(cs[i], &done) == REDIS_OK, "%s", cs[i]->errstr);
    }
    for (int i = 0; i < CONNS; i++) {
        void *r = NULL;
        cr_assert(redisGetReply(cs[i], &r) == REDIS_OK, "conn %d: %s", i, cs[i]->errstr);
        replies[i] = r;
        redisFree(cs[i]);
    }
    race_after = lm_now_ns();
}

/* Orders replies of one key as the server must have served them: allowed calls by remaining,
 * highest first, then the limited ones by reset_after, highest (earliest) first. */
static int served_order(const void *a, const void *b)
{
    const long long *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    if (x[2] != y[2])
        return x[2] > y[2] ? -1 : 1;
    if (x[4] != y[4])
        return x[4] > y[4] ? -1 : 1;
    return x[3] > y[3] ? -1 : x[3] < y[3];
}

Test(concurrency, throttle_hot_key_from_200_connections)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static redisReply *r[CONNS];
    race(d, "CL.THROTTLE hot 9 10 3600", r);
    /* EI = 360 s, DVT = 3600 s, limit 10: the allowed calls, in whatever order they ran, must be
     * the sequence a single client would see; the rest are refusals (no call refills during a
     * race shorter than EI, so the order below is the one the server served). In that order
     * every reply must fit the GCRA model for a server time within the race; when the race took
     * under a second (as usual) the values are also exactly COMMANDS.md, CL.THROTTLE: remaining 9..0 with reset
     * 360..3600, then 190 identical refusals. */
    static long long v[CONNS][5];
    for (int i = 0; i < CONNS; i++) {
        cr_assert(r[i]->type == REDIS_REPLY_ARRAY && r[i]->elements == 5, "conn %d: bad reply", i);
        for (int k = 0; k < 5; k++) {
            cr_assert(r[i]->element[k]->type == REDIS_REPLY_INTEGER);
            v[i][k] = r[i]->element[k]->integer;
        }
        freeReplyObject(r[i]);
    }
    qsort(v, CONNS, sizeof v[0], served_order);
    struct lm_gcra model;
    lm_gcra_reset(&model);
    char why[512];
    for (int i = 0; i < CONNS; i++)
        cr_assert(lm_gcra_check(&model, 9, 10, 3600, 1, race_before, race_after, v[i], why,
                                sizeof why) == 0,
                  "call %d in served order: %s", i + 1, why);
    if (race_after - race_before >= 1000000000) {
        cr_log_warn("the race took %.3f s: checked by the model only",
                    (double)(race_after - race_before) / 1e9);
        it_stop(d);
        return;
    }
    for (int i = 0; i < CONNS; i++) {
        long long want[5] = {1, 10, 0, 360, 3600};
        if (i < 10) {
            want[0] = 0, want[2] = 9 - i, want[3] = -1, want[4] = 360 * (i + 1);
        }
        for (int k = 0; k < 5; k++)
            cr_assert(v[i][k] == want[k], "call %d in served order: field %d is %lld, want %lld",
                      i + 1, k, v[i][k], want[k]);
    }
    it_stop(d);
}

Test(concurrency, isallowed_hot_key_from_200_connections)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    static redisReply *r[CONNS];
    race(d, "ISALLOWED u a 60 10", r);
    int ones = 0;
    for (int i = 0; i < CONNS; i++) {
        cr_assert(r[i]->type == REDIS_REPLY_INTEGER && (r[i]->integer == 0 || r[i]->integer == 1),
                  "conn %d: bad reply", i);
        ones += r[i]->integer == 1;
        freeReplyObject(r[i]);
    }
    cr_assert(ones == 10, "%d connections were allowed, want exactly 10", ones);
    it_stop(d);
}

Test(concurrency, counters_from_many_connections)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", "2"));
    enum { N = 50, EACH = 200 };
    static redisContext *cs[N];
    for (int i = 0; i < N; i++) {
        cs[i] = it_connect(d->port);
        for (int k = 0; k < EACH; k++)
            redisAppendCommand(cs[i], "INCR shared");
    }
    for (int i = 0; i < N; i++) {
        int done = 0;
        while (!done)
            cr_assert(redisBufferWrite(cs[i], &done) == REDIS_OK);
    }
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < EACH; k++) {
            void *r;
            cr_assert(redisGetReply(cs[i], &r) == REDIS_OK);
            cr_assert(((redisReply *)r)->type == REDIS_REPLY_INTEGER);
            freeReplyObject(r);
        }
        redisFree(cs[i]);
    }
    redisContext *c = it_connect(d->port);
    IT_BULK(it_cmd(c, "GET shared"), "10000");
    redisFree(c);
    it_stop(d);
}

Test(limits, maxclients)
{
    struct it_daemon *d = it_start(IT_ARGS("--maxclients", "5"));
    redisContext *cs[5];
    for (int i = 0; i < 5; i++) {
        cs[i] = it_connect(d->port);
        IT_STATUS(it_cmd(cs[i], "PING"), "PONG");
    }
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, "PING\r\n", 6, 10000, 4096, 0, &io);
    cr_assert(io.closed, "the 6th connection was not closed");
    cr_assert_str_eq(io.data, "-ERR max number of clients reached\r\n",
                     "the 6th connection got \"%s\"", io.data);
    free(io.data);
    close(fd);
    /* The five are still served. */
    for (int i = 0; i < 5; i++)
        IT_STATUS(it_cmd(cs[i], "PING"), "PONG");
    /* A slot frees up when one leaves. */
    redisFree(cs[0]);
    long long deadline = it_now_ms() + 10000;
    for (;;) {
        fd = it_raw_connect(d->port);
        it_raw_exchange(fd, "PING\r\n", 6, 10000, 4096, 7, &io);
        int ok = strcmp(io.data, "+PONG\r\n") == 0;
        free(io.data);
        close(fd);
        if (ok)
            break;
        cr_assert(it_now_ms() < deadline, "no slot after a client left");
        it_sleep_ms(50);
    }
    /* maxclients is live. */
    IT_STATUS(it_cmd(cs[1], "CONFIG SET maxclients 10"), "OK");
    redisContext *more[5];
    for (int i = 0; i < 5; i++) {
        more[i] = it_connect(d->port);
        IT_STATUS(it_cmd(more[i], "PING"), "PONG");
    }
    for (int i = 0; i < 5; i++)
        redisFree(more[i]);
    for (int i = 1; i < 5; i++)
        redisFree(cs[i]);
    it_stop(d);
}

/* Waits up to ms for the peer to close fd. */
static int wait_closed(int fd, int ms)
{
    long long deadline = it_now_ms() + ms;
    char buf[256];
    while (it_now_ms() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
    }
    return 0;
}

Test(limits, idle_timeout)
{
    struct it_daemon *d = it_start(IT_ARGS("--timeout", "1"));
    int idle = it_raw_connect(d->port);
    it_raw_send(idle, "PING\r\n", 6);
    char buf[16];
    cr_assert(recv(idle, buf, 7, MSG_WAITALL) == 7 && memcmp(buf, "+PONG\r\n", 7) == 0);
    cr_assert(wait_closed(idle, 30000), "an idle client was not closed within 30 s (timeout 1)");
    close(idle);
    /* A connection that never sent anything is closed too. */
    idle = it_raw_connect(d->port);
    cr_assert(wait_closed(idle, 30000), "a silent client was not closed within 30 s");
    close(idle);
    /* timeout is live: with 3 s, a client that talks every 100 ms stays. A close is only
     * acceptable if this process was in fact silent for 3 s (a starved machine), measured from
     * before the previous command was sent. */
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "CONFIG SET timeout 3"), "OK");
    long long prev_sent = it_now_ms();
    for (int i = 0; i < 50; i++) {
        long long sent = it_now_ms();
        redisReply *r = redisCommand(c, "PING");
        if (r == NULL) {
            long long silent = it_now_ms() - prev_sent;
            cr_assert(silent >= 3000, "closed after %lld ms without a command (timeout 3 s): %s",
                      silent, c->errstr);
            cr_log_warn("PING %d: closed after a %lld ms gap on a starved machine", i, silent);
            redisFree(c);
            c = it_connect(d->port);
            sent = it_now_ms();
            r = redisCommand(c, "PING");
            cr_assert(r != NULL, "%s", c->errstr);
        }
        IT_STATUS(r, "PONG");
        prev_sent = sent;
        it_sleep_ms(100);
    }
    redisFree(c);
    it_stop(d);
}

/* Writes PING <index as 8 digits + padding> commands into buf; returns bytes written. */
enum { BP_N = 200000, BP_PAYLOAD = 1000 };

static size_t fill_pings(char *buf, size_t cap, int *next)
{
    size_t len = 0;
    char head[32];
    int h = snprintf(head, sizeof(head), "*2\r\n$4\r\nPING\r\n$%d\r\n", BP_PAYLOAD);
    size_t one = (size_t)h + BP_PAYLOAD + 2;
    while (*next < BP_N && len + one <= cap) {
        memcpy(buf + len, head, (size_t)h);
        char *p = buf + len + h;
        char idx[16];
        snprintf(idx, sizeof(idx), "%08d", *next % 100000000);
        memcpy(p, idx, 8);
        memset(p + 8, 'p', BP_PAYLOAD - 8);
        memcpy(p + BP_PAYLOAD, "\r\n", 2);
        len += one;
        (*next)++;
    }
    return len;
}

Test(limits, output_back_pressure)
{
    struct it_daemon *d = it_start(IT_ARGS("--client-output-pause-limit", "1mb"));
    redisContext *other = it_connect(d->port);
    IT_STATUS(it_cmd(other, "SET sentinel alive"), "OK");
    long rss0 = it_rss_kib(d->pid);
    int fd = it_raw_connect(d->port);
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);

    size_t cap = 256 * 1024, pos = 0, len = 0, sent = 0;
    size_t total = (size_t)BP_N * (strlen("*2\r\n$4\r\nPING\r\n$1000\r\n") + BP_PAYLOAD + 2);
    char *buf = malloc(cap);
    int next = 0;
    /* Phase 1: write without reading until the daemon stops taking input for 2 s. */
    for (;;) {
        if (pos == len) {
            len = fill_pings(buf, cap, &next);
            pos = 0;
            if (len == 0)
                break;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 2000) == 0)
            break;
        ssize_t n = send(fd, buf + pos, len - pos, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        cr_assert(n > 0, "send: %s", strerror(errno));
        pos += (size_t)n;
        sent += (size_t)n;
    }
    /* A daemon without back-pressure would have swallowed all of it, buffering the replies. */
    cr_assert(sent < total / 2,
              "the daemon kept reading a client that does not read: %zu of %zu bytes taken", sent,
              total);
    long rss1 = it_rss_kib(d->pid);
    cr_log_info("back-pressure: stalled after %zu bytes; daemon RSS %ld -> %ld KiB", sent, rss0,
                rss1);
    if (getenv("ASAN_OPTIONS") == NULL) /* ASan's quarantine makes RSS meaningless */
        cr_assert(rss1 - rss0 < 100 * 1024, "daemon RSS grew from %ld to %ld KiB", rss0, rss1);
    /* Others are served meanwhile. */
    IT_STATUS(it_cmd(other, "PING"), "PONG");
    IT_BULK(it_cmd(other, "GET sentinel"), "alive");
    IT_INTS(it_cmd(other, "CL.THROTTLE bp 15 30 60"), 0, 16, 15, -1, 2);

    /* Phase 2: read everything, in order, while writing the rest. */
    redisReader *rd = redisReaderCreate();
    int expect = 0;
    char chunk[65536];
    while (expect < BP_N) {
        if (pos == len) {
            len = fill_pings(buf, cap, &next);
            pos = 0;
        }
        struct pollfd p = {fd, POLLIN | (pos < len ? POLLOUT : 0), 0};
        int pr = poll(&p, 1, 30000);
        cr_assert(pr > 0, "no progress for 30 s at reply %d", expect);
        if (p.revents & POLLOUT) {
            ssize_t n = send(fd, buf + pos, len - pos, MSG_NOSIGNAL);
            if (n > 0)
                pos += (size_t)n;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            cr_assert(n > 0, "connection closed at reply %d", expect);
            redisReaderFeed(rd, chunk, (size_t)n);
            void *r;
            while (redisReaderGetReply(rd, &r) == REDIS_OK && r != NULL) {
                redisReply *rr = r;
                char want[16];
                snprintf(want, sizeof(want), "%08d", expect % 100000000);
                cr_assert(rr->type == REDIS_REPLY_STRING && rr->len == BP_PAYLOAD &&
                              memcmp(rr->str, want, 8) == 0,
                          "reply %d: type %d len %zu", expect, rr->type, rr->len);
                freeReplyObject(r);
                expect++;
            }
            cr_assert(rd->err == 0, "malformed reply: %s", rd->errstr);
        }
    }
    redisReaderFree(rd);
    free(buf);
    close(fd);
    IT_STATUS(it_cmd(other, "PING"), "PONG");
    redisFree(other);
    it_stop(d);
}

/* Connections that come and go must give their slot back: with maxclients 20, 500 short
 * connections in a row (closed politely or with a reset) all get served. */
Test(limits, connection_churn_releases_slots)
{
    struct it_daemon *d = it_start(IT_ARGS("--maxclients", "20"));
    for (int i = 0; i < 500; i++) {
        int fd = it_raw_connect(d->port);
        struct it_io io;
        long long deadline = it_now_ms() + 10000;
        for (;;) {
            it_raw_exchange(fd, "PING\r\n", 6, 10000, 4096, 7, &io);
            int ok = strcmp(io.data, "+PONG\r\n") == 0;
            int full = strncmp(io.data, "-ERR max number of clients reached", 34) == 0;
            cr_assert(ok || full, "connection %d got \"%s\"", i, io.data);
            free(io.data);
            if (ok)
                break;
            /* Closing is asynchronous: a few refusals right after a close are fine. */
            cr_assert(it_now_ms() < deadline, "connection %d: still full after 10 s", i);
            close(fd);
            it_sleep_ms(20);
            fd = it_raw_connect(d->port);
        }
        if (i % 3 == 0) {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(fd);
    }
    /* And the count goes back down. */
    redisContext *c = it_connect(d->port);
    long long deadline = it_now_ms() + 10000;
    for (;;) {
        long long n = it_info_int(c, "clients", "connected_clients");
        if (n == 1)
            break;
        cr_assert(it_now_ms() < deadline, "connected_clients stays %lld with one client", n);
        it_sleep_ms(50);
    }
    redisFree(c);
    it_stop(d);
}

/* Redis 7.0's text, final period included (COMMANDS.md, Wire protocol). */
#define OOM "OOM command not allowed when used memory > 'maxmemory'."
#define IT_OOM(r) IT_ERR_LIKE((r), OOM, NULL)

/* Over maxmemory, every command that may grow memory is refused, as Redis refuses its denyoom
 * commands, new key or not; the limiters keep answering on their existing keys (CONFIG.md,
 * maxmemory) and refuse a new one; reads, deletes and expiries keep working. */
Test(limits, maxmemory_refuses_writes_limiters_keep_answering)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    for (int i = 0; i < 2000; i++)
        redisAppendCommand(c, "SET fill:%d 0123456789012345678901234567890123456789", i);
    for (int i = 0; i < 2000; i++) {
        void *r;
        cr_assert(redisGetReply(c, &r) == REDIS_OK);
        freeReplyObject(r);
    }
    IT_INT(it_cmd(c, "INCR counter"), 1);
    struct it_limit g;
    it_limit_init(&g);
    IT_THROTTLE(c, &g, "g", 15, 30, 60, 1, 0, 16, 15, -1, 2);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 1000"), "OK");
    IT_OOM(it_cmd(c, "SET newkey v"));
    IT_OOM(it_cmd(c, "INCR newcounter"));
    IT_OOM(it_cmd(c, "CL.THROTTLE newg 15 30 60"));
    IT_OOM(it_cmd(c, "ISALLOWED newuser a 60 5"));
    IT_INT(it_cmd(c, "EXISTS newkey newcounter newg hist:{newuser}:a"), 0);
    /* Writes to existing keys are refused; the limiters' existing keys keep working. */
    IT_OOM(it_cmd(c, "INCR counter"));
    IT_THROTTLE(c, &g, "g", 15, 30, 60, 1, 0, 16, 14, -1, 4);
    IT_INT(it_cmd(c, "ISALLOWED u a 60 5"), 1);
    IT_BULK(it_cmd(c, "GET fill:1"), "0123456789012345678901234567890123456789");
    IT_OOM(it_cmd(c, "SET fill:3 overwritten"));
    IT_INT(it_cmd(c, "DEL fill:1"), 1);
    IT_INT(it_cmd(c, "EXPIRE fill:2 100"), 1);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    /* Lifting the limit lets new keys in again. */
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 0"), "OK");
    IT_STATUS(it_cmd(c, "SET newkey v"), "OK");
    IT_INT(it_cmd(c, "INCR counter"), 2);
    IT_INTS(it_cmd(c, "CL.THROTTLE newg 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    it_stop(d);
}
