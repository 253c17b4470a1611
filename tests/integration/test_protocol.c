/* test_protocol.c - the wire protocol and hostile input (COMMANDS.md "Wire protocol", 7). Every case runs while a
 * second connection holds a key: afterwards that connection must still be served, the key must
 * keep its value, and a new connection must answer PING. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(protocol, .fini = it_fini, .timeout = 180);

#define MIB (1024 * 1024)

static struct it_daemon *d;
static redisContext *other;

/* Starts the daemon, opens the second connection and stores the sentinel. */
static void begin(const char *const *extra)
{
    d = it_start(extra);
    other = it_connect(d->port);
    IT_STATUS(it_cmd(other, "SET sentinel alive"), "OK");
}

static void end(void)
{
    it_assert_healthy(d, other, "sentinel", "alive");
    redisFree(other);
    it_stop(d);
}

/* Asserts the exchange ended with exactly one "-ERR Protocol error: ..." line and a close. */
static void expect_protocol_error(const struct it_io *io, const char *what)
{
    cr_assert(io->closed, "%s: connection not closed (got %zu bytes: %.200s)", what, io->len,
              io->data);
    const char *pfx = "-ERR Protocol error: ";
    cr_assert(io->len > strlen(pfx) && strncmp(io->data, pfx, strlen(pfx)) == 0,
              "%s: want \"%s...\", got %zu bytes: \"%.200s\"", what, pfx, io->len, io->data);
    const char *eol = strstr(io->data, "\r\n");
    cr_assert(eol != NULL && (size_t)(eol - io->data) + 2 == io->len,
              "%s: want one error line, got \"%.300s\"", what, io->data);
}

/* Sends req on a fresh connection and expects a protocol error and a close. */
static void hostile(const char *req, size_t len, const char *what)
{
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, req, len, 10000, 1 << 20, 0, &io);
    expect_protocol_error(&io, what);
    free(io.data);
    close(fd);
    /* After each case, a new connection is served. */
    redisContext *c = it_connect(d->port);
    redisReply *r = it_cmd(c, "PING");
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0,
              "no PONG on a new connection after: %s", what);
    freeReplyObject(r);
    redisFree(c);
}

static void hostile_str(const char *req)
{
    hostile(req, strlen(req), req);
}

Test(protocol, pipeline_of_1000_in_one_write)
{
    begin(NULL);
    enum { N = 1000 };
    const char *one = "*2\r\n$4\r\nINCR\r\n$4\r\npipe\r\n";
    size_t l = strlen(one);
    char *buf = malloc(N * l);
    for (int i = 0; i < N; i++)
        memcpy(buf + (size_t)i * l, one, l);
    int fd = it_raw_connect(d->port);
    it_raw_send(fd, buf, N * l);
    static redisReply *r[N];
    size_t got = it_raw_read_replies(fd, N, r);
    cr_assert(got == N, "got %zu of %d replies", got, N);
    for (int i = 0; i < N; i++) {
        it_check_int(r[i], i + 1, "pipelined INCR", i + 1);
    }
    /* Nothing more comes. */
    free(buf);
    close(fd);
    IT_BULK(it_cmd(other, "GET pipe"), "1000");
    end();
}

Test(protocol, inline_commands)
{
    begin(NULL);
    int fd = it_raw_connect(d->port);
    struct {
        const char *req, *want;
    } cases[] = {
        {"PING\r\n", "+PONG\r\n"},
        {"PING\n", "+PONG\r\n"}, /* as nc sends it */
        {"ping\r\n", "+PONG\r\n"},
        {"  PING   \r\n", "+PONG\r\n"},
        {"ECHO \"hello world\"\r\n", "$11\r\nhello world\r\n"},
        {"ECHO 'single quoted'\r\n", "$13\r\nsingle quoted\r\n"},
        {"SET \"inline key\" 'inline value'\r\n", "+OK\r\n"},
        {"GET \"inline key\"\r\n", "$12\r\ninline value\r\n"},
        {"ECHO \"\"\r\n", "$0\r\n\r\n"},
        {"INCR counter\r\nINCR counter\r\n", ":1\r\n:2\r\n"},
        {"\r\nPING\r\n", "+PONG\r\n"}, /* an empty line gets no reply */
        {"foo a b\r\n", "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"},
        {"CL.THROTTLE user123 15 30 60 1\r\n", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        it_raw_send(fd, cases[i].req, strlen(cases[i].req));
        size_t want = strlen(cases[i].want);
        char buf[256];
        size_t got = 0;
        while (got < want) {
            ssize_t n = recv(fd, buf + got, want - got, 0);
            cr_assert(n > 0, "inline %zu: connection closed after \"%.*s\"", i, (int)got, buf);
            got += (size_t)n;
        }
        cr_assert(memcmp(buf, cases[i].want, want) == 0, "inline \"%s\": want \"%s\", got \"%.*s\"",
                  cases[i].req, cases[i].want, (int)want, buf);
    }
    /* Unbalanced quotes are a protocol error. */
    struct it_io io;
    it_raw_exchange(fd, "ECHO \"unterminated\r\n", 20, 10000, 1 << 20, 0, &io);
    expect_protocol_error(&io, "unbalanced quotes");
    free(io.data);
    close(fd);
    end();
}

Test(protocol, mixed_inline_and_multibulk_in_one_write)
{
    begin(NULL);
    const char *req = "PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nECHO inline\r\n*1\r\n$4\r\nPING\r\n"
                      "INCR m\r\n*2\r\n$4\r\nINCR\r\n$1\r\nm\r\n";
    const char *want = "+PONG\r\n$2\r\nhi\r\n$6\r\ninline\r\n+PONG\r\n:1\r\n:2\r\n";
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, req, strlen(req), 10000, 1 << 20, strlen(want), &io);
    cr_assert(!io.closed, "connection closed");
    cr_assert(io.len == strlen(want) && memcmp(io.data, want, io.len) == 0,
              "want \"%s\", got \"%s\"", want, io.data);
    free(io.data);
    /* The same bytes, one byte per write. */
    const char *want2 = "+PONG\r\n$2\r\nhi\r\n$6\r\ninline\r\n+PONG\r\n:3\r\n:4\r\n";
    for (size_t i = 0; req[i] != '\0'; i++) {
        it_raw_send(fd, req + i, 1);
        if (i % 7 == 0)
            it_sleep_ms(1);
    }
    char buf[256];
    size_t got = 0, wl = strlen(want2);
    while (got < wl) {
        ssize_t n = recv(fd, buf + got, wl - got, 0);
        cr_assert(n > 0, "closed or timed out after \"%.*s\"", (int)got, buf);
        got += (size_t)n;
    }
    cr_assert(memcmp(buf, want2, wl) == 0, "byte-by-byte: want \"%s\", got \"%.*s\"", want2,
              (int)wl, buf);
    close(fd);
    end();
}

Test(protocol, huge_bulk_length_rejected_before_payload)
{
    begin(NULL);
    /* No payload follows: the error must come from the header alone. */
    hostile_str("*1\r\n$2000000000\r\n");
    hostile_str("*2\r\n$3\r\nGET\r\n$2000000000\r\n");
    hostile_str("*1\r\n$9223372036854775807\r\n");
    hostile_str("*1\r\n$99999999999999999999999\r\n");
    hostile_str("*1\r\n$-5\r\n");
    hostile_str("*1\r\n$abc\r\n");
    end();
}

Test(protocol, huge_multibulk_count_rejected)
{
    begin(NULL);
    hostile_str("*2000000000\r\n");
    hostile_str("*9223372036854775807\r\n");
    hostile_str("*99999999999999999999999\r\n");
    hostile_str("*abc\r\n");
    end();
}

/* Builds "*2\r\n$3\r\nSET\r\n$<n>\r\n<n bytes>\r\n"-style commands with one big argument. */
static char *big_command(const char *name, size_t n, size_t *len)
{
    char head[128];
    int h = snprintf(head, sizeof(head), "*2\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(name), name, n);
    char *buf = malloc((size_t)h + n + 2);
    memcpy(buf, head, (size_t)h);
    memset(buf + h, 'k', n);
    memcpy(buf + h + n, "\r\n", 2);
    *len = (size_t)h + n + 2;
    return buf;
}

Test(protocol, key_over_proto_max_bulk_len_rejected)
{
    begin(NULL);
    size_t len;
    char *req = big_command("GET", 2 * MIB, &len);
    hostile(req, len, "2 MiB key");
    free(req);
    /* Over 512kb but within the 1mb query buffer: still the bulk limit. */
    req = big_command("GET", 600 * 1024, &len);
    hostile(req, len, "600 KiB key");
    free(req);
    /* Just under: served. */
    redisContext *c = it_connect(d->port);
    char *val = malloc(500 * 1024 + 1);
    memset(val, 'v', 500 * 1024);
    val[500 * 1024] = '\0';
    IT_STATUS(it_cmd(c, "SET bigval %b", val, (size_t)500 * 1024), "OK");
    redisReply *r = it_cmd(c, "GET bigval");
    cr_assert(r->type == REDIS_REPLY_STRING && r->len == 500 * 1024 &&
              memcmp(r->str, val, r->len) == 0);
    freeReplyObject(r);
    free(val);
    redisFree(c);
    end();
}

Test(protocol, garbage_bytes_never_crash)
{
    begin(NULL);
    size_t n = 2 * MIB;
    unsigned char *junk = malloc(n);
    srandom(12345);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++)
            junk[i] = (unsigned char)(random() & 0xff);
        int fd = it_raw_connect(d->port);
        struct it_io io;
        it_raw_exchange(fd, junk, n, 3000, 1 << 20, 0, &io);
        /* Garbage never forms a valid command here; whatever came back must be errors. */
        cr_assert(io.len == 0 || io.data[0] == '-', "garbage round %d answered \"%.100s\"", round,
                  io.data);
        free(io.data);
        close(fd);
    }
    /* 2 MiB with no newline at all, over the 1 MB query buffer: must be cut off. */
    memset(junk, 'A', n);
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, junk, n, 10000, 1 << 20, 0, &io);
    cr_assert(io.closed, "2 MiB line without a newline: connection still open");
    cr_assert(io.len == 0 || strncmp(io.data, "-ERR Protocol error: ", 21) == 0,
              "2 MiB line without a newline answered \"%.100s\"", io.data);
    free(io.data);
    close(fd);
    /* Same, NUL bytes and \r without \n. */
    for (size_t i = 0; i < n; i++)
        junk[i] = (i % 2) ? '\r' : '\0';
    fd = it_raw_connect(d->port);
    it_raw_exchange(fd, junk, n, 10000, 1 << 20, 0, &io);
    cr_assert(io.closed, "2 MiB of NUL and CR: connection still open");
    free(io.data);
    close(fd);
    free(junk);
    end();
}

Test(protocol, nested_arrays_and_non_bulk_elements_rejected)
{
    begin(NULL);
    hostile_str("*1\r\n*1\r\n$4\r\nPING\r\n");
    hostile_str("*2\r\n$4\r\nECHO\r\n*1\r\n$2\r\nhi\r\n");
    hostile_str("*1\r\n:5\r\n");
    hostile_str("*2\r\n$4\r\nECHO\r\n+hi\r\n");
    hostile_str("*2\r\n$4\r\nECHO\r\n-hi\r\n");
    end();
}

Test(protocol, over_long_length_strings_rejected)
{
    begin(NULL);
    size_t n = 2 * MIB;
    char *buf = malloc(n + 8);
    /* "$" followed by 2 MiB of digits and no CRLF. */
    memcpy(buf, "*1\r\n$", 5);
    memset(buf + 5, '1', n);
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, buf, n + 5, 10000, 1 << 20, 0, &io);
    cr_assert(io.closed, "endless bulk length: connection still open");
    cr_assert(io.len == 0 || strncmp(io.data, "-ERR Protocol error: ", 21) == 0,
              "endless bulk length answered \"%.100s\"", io.data);
    free(io.data);
    close(fd);
    /* "*" followed by 2 MiB of digits. */
    buf[0] = '*';
    memset(buf + 1, '2', n);
    fd = it_raw_connect(d->port);
    it_raw_exchange(fd, buf, n + 1, 10000, 1 << 20, 0, &io);
    cr_assert(io.closed, "endless multibulk count: connection still open");
    cr_assert(io.len == 0 || strncmp(io.data, "-ERR Protocol error: ", 21) == 0,
              "endless multibulk count answered \"%.100s\"", io.data);
    free(io.data);
    close(fd);
    free(buf);
    end();
}

Test(protocol, client_query_buffer_limit_exceeded)
{
    begin(IT_ARGS("--client-query-buffer-limit", "1kb", "--proto-max-bulk-len", "500"));
    /* Every argument within the bulk limit, the command as a whole over 1 KiB. */
    char arg[401];
    memset(arg, 'a', 400);
    arg[400] = '\0';
    char req[2048];
    int n =
        snprintf(req, sizeof(req),
                 "*4\r\n$6\r\nEXISTS\r\n$400\r\n%s\r\n$400\r\n%s\r\n$400\r\n%s\r\n", arg, arg, arg);
    hostile(req, (size_t)n, "3 x 400-byte arguments over a 1 KiB query buffer");
    /* Two fit. */
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "EXISTS %s %s", arg, arg), 0);
    /* An argument over proto-max-bulk-len alone. */
    char big[600];
    memset(big, 'b', 599);
    big[599] = '\0';
    n = snprintf(req, sizeof(req), "*2\r\n$3\r\nGET\r\n$599\r\n%s\r\n", big);
    hostile(req, (size_t)n, "599-byte argument over proto-max-bulk-len 500");
    /* An inline line over the query buffer. */
    char line[3000];
    memcpy(line, "PING ", 5);
    memset(line + 5, 'x', sizeof(line) - 5);
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, line, sizeof(line), 10000, 1 << 20, 0, &io);
    cr_assert(io.closed, "3000-byte inline line over a 1 KiB query buffer: still open");
    free(io.data);
    close(fd);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    end();
}

Test(protocol, proto_max_args_exceeded)
{
    begin(IT_ARGS("--proto-max-args", "4"));
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "EXISTS a b c"), 0);
    redisFree(c);
    hostile_str("*5\r\n$6\r\nEXISTS\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n");
    /* The count alone is enough to refuse. */
    hostile_str("*5\r\n");
    hostile_str("*1000\r\n");
    end();
}

/* A pipeline far larger than the query buffer is fine: the limit is on unparsed input. */
Test(protocol, pipeline_larger_than_query_buffer)
{
    begin(NULL);
    enum { N = 80000 };
    const char *one = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n";
    size_t l = strlen(one);
    char *buf = malloc(N * l);
    for (int i = 0; i < N; i++)
        memcpy(buf + (size_t)i * l, one, l);
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, buf, N * l, 10000, 64 * MIB, (size_t)N * 5, &io);
    cr_assert(!io.closed, "connection closed after %zu of %zu bytes sent", io.sent, N * l);
    cr_assert(io.sent == N * l && io.len == (size_t)N * 5, "sent %zu/%zu, got %zu/%d bytes",
              io.sent, N * l, io.len, N * 5);
    for (size_t i = 0; i < io.len; i += 5)
        cr_assert(memcmp(io.data + i, "+OK\r\n", 5) == 0, "reply %zu is not +OK", i / 5);
    free(io.data);
    free(buf);
    close(fd);
    end();
}

/* Replies to the commands before a protocol error are delivered before the error (Redis sends
 * what it answered, then the error, then closes). */
Test(protocol, replies_before_a_protocol_error_are_delivered)
{
    begin(NULL);
    const char *req = "PING\r\n*2\r\n$4\r\nINCR\r\n$3\r\npre\r\n*1\r\n$-5\r\nINCR pre\r\n";
    int fd = it_raw_connect(d->port);
    struct it_io io;
    it_raw_exchange(fd, req, strlen(req), 10000, 1 << 20, 0, &io);
    const char *want = "+PONG\r\n:1\r\n-ERR Protocol error: ";
    cr_assert(io.closed, "connection not closed after the protocol error");
    cr_assert(strncmp(io.data, want, strlen(want)) == 0, "want \"%s...\", got \"%s\"", want,
              io.data);
    free(io.data);
    close(fd);
    /* Nothing after the bad frame ran. */
    IT_BULK(it_cmd(other, "GET pre"), "1");
    end();
}

/* A big argument trickling in, in odd-sized pieces, is assembled correctly. */
Test(protocol, big_argument_in_small_pieces)
{
    begin(NULL);
    size_t n = 300 * 1024, len;
    char *req = big_command("ECHO", n, &len);
    for (size_t i = 0; i < n; i++)
        req[len - 2 - n + i] = (char)('a' + i % 26);
    int fd = it_raw_connect(d->port);
    srandom(7);
    for (size_t off = 0; off < len;) {
        size_t k = 1 + (size_t)random() % 9000;
        if (k > len - off)
            k = len - off;
        it_raw_send(fd, req + off, k);
        off += k;
    }
    redisReply *r[1];
    cr_assert(it_raw_read_replies(fd, 1, r) == 1, "no reply to a 300 KiB ECHO");
    cr_assert(r[0]->type == REDIS_REPLY_STRING && r[0]->len == n &&
                  memcmp(r[0]->str, req + len - 2 - n, n) == 0,
              "ECHO of 300 KiB in pieces came back different");
    freeReplyObject(r[0]);
    free(req);
    close(fd);
    end();
}

/* Clients that vanish with requests in flight and replies pending, politely or with a reset. */
Test(protocol, clients_vanishing_mid_pipeline)
{
    begin(NULL);
    enum { N = 5000 };
    const char *one = "*2\r\n$4\r\nINCR\r\n$6\r\nvanish\r\n";
    size_t l = strlen(one);
    char *buf = malloc(N * l);
    for (int i = 0; i < N; i++)
        memcpy(buf + (size_t)i * l, one, l);
    for (int round = 0; round < 40; round++) {
        int fd = it_raw_connect(d->port);
        /* Send part or all of the pipeline, maybe cut inside a command, and leave. */
        size_t cut = round % 2 ? N * l : (size_t)(round + 1) * 997;
        struct it_io io;
        it_raw_exchange(fd, buf, cut, 50, 16, 0, &io);
        free(io.data);
        if (round % 4 == 3) {
            struct linger lg = {1, 0}; /* close with RST */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(fd);
    }
    free(buf);
    redisReply *r = it_cmd(other, "GET vanish");
    cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    end();
}
