/* test_server.c - connection and server commands (COMMANDS.md, Wire protocol, 4): unknown commands, SELECT, HELLO,
 * PING/ECHO/TIME, CLIENT, CONFIG, AUTH, QUIT, RESET, INFO. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(server, .fini = it_fini, .timeout = 120);

#define NOAUTH "NOAUTH Authentication required."
#define WRONGPASS "WRONGPASS invalid username-password pair or user is disabled."

/* Reads from a raw socket until cap bytes arrived or the peer closed / timed out. */
static size_t raw_read(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len < cap) {
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    return len;
}

/* Reads one line (up to \r\n) from a raw socket. */
static void raw_line(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, buf + len, 1, 0);
        cr_assert(n == 1, "connection closed or timed out after \"%.*s\"", (int)len, buf);
        len++;
        if (len >= 2 && buf[len - 2] == '\r' && buf[len - 1] == '\n')
            break;
    }
    buf[len] = '\0';
}

/* Waits (up to 10 s) for the peer to close a raw socket, ignoring anything it sends. */
static int raw_wait_closed(int fd)
{
    char buf[4096];
    long long deadline = it_now_ms() + 10000;
    while (it_now_ms() < deadline) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0)
            return 1;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno == ECONNRESET;
    }
    return 0;
}

Test(server, unknown_command_text)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_ERR(it_cmd(c, "foo a b"), "ERR unknown command 'foo', with args beginning with: 'a' 'b' ");
    IT_ERR(it_cmd(c, "foo"), "ERR unknown command 'foo', with args beginning with: ");
    IT_ERR(it_cmd(c, "FooBar x"), "ERR unknown command 'FooBar', with args beginning with: 'x' ");
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    it_stop(d);
}

Test(server, select_only_db_zero)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SELECT 0"), "OK");
    IT_ERR(it_cmd(c, "SELECT 1"), "ERR DB index is out of range");
    IT_ERR(it_cmd(c, "SELECT 15"), "ERR DB index is out of range");
    IT_ERR_LIKE(it_cmd(c, "SELECT abc"), "ERR", NULL);
    IT_ERR(it_cmd(c, "SELECT"), "ERR wrong number of arguments for 'select' command");
    IT_STATUS(it_cmd(c, "SELECT 0"), "OK");
    redisFree(c);
    it_stop(d);
}

/* Checks a RESP2 HELLO reply: 7 field/value pairs as Redis sends them. */
static void check_hello(redisReply *r, long long id)
{
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 14, "HELLO: want 14 elements");
    static const char *const names[] = {"server", "version", "proto",  "id",
                                        "mode",   "role",    "modules"};
    for (int i = 0; i < 7; i++) {
        redisReply *k = r->element[2 * i];
        cr_assert(k->type == REDIS_REPLY_STRING && strcmp(k->str, names[i]) == 0,
                  "HELLO field %d: want %s", i, names[i]);
    }
    cr_assert(r->element[1]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[1]->str, "rlimitd") == 0);
    cr_assert(r->element[3]->type == REDIS_REPLY_STRING && r->element[3]->len > 0);
    cr_assert(r->element[5]->type == REDIS_REPLY_INTEGER && r->element[5]->integer == 2);
    cr_assert(r->element[7]->type == REDIS_REPLY_INTEGER && r->element[7]->integer == id,
              "HELLO id %lld, CLIENT ID %lld", r->element[7]->integer, id);
    cr_assert(r->element[9]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[9]->str, "standalone") == 0);
    cr_assert(r->element[11]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[11]->str, "master") == 0);
    cr_assert(r->element[13]->type == REDIS_REPLY_ARRAY && r->element[13]->elements == 0);
    freeReplyObject(r);
}

Test(server, hello)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long id = it_int(it_cmd(c, "CLIENT ID"));
    check_hello(it_cmd(c, "HELLO"), id);
    check_hello(it_cmd(c, "HELLO 2"), id);
    IT_ERR_LIKE(it_cmd(c, "HELLO 4"), "NOPROTO", NULL);
    IT_ERR_LIKE(it_cmd(c, "HELLO 1"), "NOPROTO", NULL);
    IT_ERR(it_cmd(c, "HELLO -3"), "NOPROTO unsupported protocol version");
    IT_ERR(it_cmd(c, "HELLO 3x"), "ERR Protocol version is not an integer or out of range");
    /* Still RESP2 after the refusals. */
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_NIL(it_cmd(c, "GET nothing"));
    check_hello(it_cmd(c, "hello 2"), id);
    redisFree(c);
    it_stop(d);
}

/* Sends req on a raw connection and checks that exactly want comes back (hiredis 0.14 reads
 * no RESP3, so these are compared as bytes). */
static void raw_expect(int fd, const char *req, const char *want)
{
    struct it_io io;
    it_raw_exchange(fd, req, strlen(req), 5000, 1 << 20, strlen(want), &io);
    cr_assert(io.len == strlen(want) && memcmp(io.data, want, io.len) == 0,
              "%s: got [%s] want [%s]", req, io.data, want);
    free(io.data);
}

/* Sends req and reads one reply that is a line (":5", "+OK") or a line and a payload ("$n",
 * "=n"), blocking (the connection has 10 s timeouts). Returns it NUL-terminated, malloc'd. */
static char *raw_one(int fd, const char *req)
{
    it_raw_send(fd, req, strlen(req));
    size_t cap = 256, len = 0;
    char *b = malloc(cap);
    cr_assert(b != NULL);
    while (len < 2 || b[len - 2] != '\r' || b[len - 1] != '\n') {
        cr_assert(recv(fd, b + len, 1, 0) == 1, "%s: no reply", req);
        len++;
        cr_assert(len < cap - 1, "%s: header too long", req);
    }
    if (b[0] == '$' || b[0] == '=') {
        long long n = strtoll(b + 1, NULL, 10);
        if (n >= 0) {
            size_t want = len + (size_t)n + 2;
            b = realloc(b, want + 1);
            cr_assert(b != NULL);
            while (len < want) {
                ssize_t r = recv(fd, b + len, want - len, 0);
                cr_assert(r > 0, "%s: reply cut short", req);
                len += (size_t)r;
            }
        }
    }
    b[len] = '\0';
    return b;
}

/* HELLO 3 switches the connection to RESP3 (its own reply a map already), RESP3 shapes follow,
 * CLIENT INFO shows resp=3, and RESET goes back to RESP2. */
Test(server, hello_resp3)
{
    struct it_daemon *d = it_start(NULL);
    int fd = it_raw_connect(d->port);
    struct it_io io;
    char *r = raw_one(fd, "CLIENT ID\r\n");
    long long id = strtoll(r + 1, NULL, 10);
    free(r);
    char want[512];
    snprintf(want, sizeof(want),
             "%%7\r\n$6\r\nserver\r\n$7\r\nrlimitd\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n"
             "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:%lld\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
             "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
             id);
    raw_expect(fd, "HELLO 3\r\n", want);
    raw_expect(fd, "GET nothing\r\n", "_\r\n");
    raw_expect(fd, "HSET h f v\r\n", ":1\r\n");
    raw_expect(fd, "HGETALL h\r\n", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    raw_expect(fd, "ZADD z 1.5 m\r\n", ":1\r\n");
    raw_expect(fd, "ZRANGE z 0 -1 WITHSCORES\r\n", "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n");
    /* HELLO without a version keeps the protocol. */
    it_raw_exchange(fd, "HELLO\r\n", 7, 5000, 1 << 20, strlen(want), &io);
    cr_assert(io.len == strlen(want) && memcmp(io.data, want, io.len) == 0, "HELLO: %s", io.data);
    free(io.data);
    r = raw_one(fd, "CLIENT INFO\r\n");
    cr_assert(r[0] == '=' && strstr(r, "\r\ntxt:id=") && strstr(r, " resp=3 "), "%s", r);
    free(r);
    raw_expect(fd, "RESET\r\n", "+RESET\r\n");
    raw_expect(fd, "GET nothing\r\n", "$-1\r\n");
    r = raw_one(fd, "CLIENT INFO\r\n");
    cr_assert(r[0] == '$' && strstr(r, "\r\nid=") && strstr(r, " resp=2 "), "%s", r);
    free(r);
    close(fd);
    it_stop(d);
}

/* With requirepass: HELLO 3 unauthenticated is refused with NOAUTH (and stays RESP2), a wrong
 * password with WRONGPASS, HELLO 3 AUTH authenticates and switches in one command. An option
 * read before a bad one has taken effect, as in Redis. */
Test(server, hello_auth)
{
    struct it_daemon *d = it_start(IT_ARGS("--requirepass", "pw"));
    int fd = it_raw_connect(d->port);
    raw_expect(fd, "HELLO 3\r\n",
               "-NOAUTH HELLO must be called with the client already authenticated, otherwise "
               "the HELLO AUTH <user> <pass> option can be used to authenticate the client and "
               "select the RESP protocol version at the same time\r\n");
    raw_expect(fd, "HELLO 3 AUTH default nope\r\n",
               "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw_expect(fd, "HELLO 3 AUTH bob pw\r\n",
               "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw_expect(fd, "GET k\r\n", "-NOAUTH Authentication required.\r\n");
    raw_expect(fd, "HELLO 3 AUTH default pw BOGUS\r\n",
               "-ERR Syntax error in HELLO option 'BOGUS'\r\n");
    /* The AUTH before the bad option stands; the protocol did not change. */
    raw_expect(fd, "GET k\r\n", "$-1\r\n");
    char *r = raw_one(fd, "CLIENT ID\r\n");
    long long id = strtoll(r + 1, NULL, 10);
    free(r);
    raw_expect(fd, "RESET\r\n", "+RESET\r\n");
    raw_expect(fd, "GET k\r\n", "-NOAUTH Authentication required.\r\n");
    char want[512];
    snprintf(want, sizeof(want),
             "%%7\r\n$6\r\nserver\r\n$7\r\nrlimitd\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n"
             "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:%lld\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
             "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
             id);
    raw_expect(fd, "HELLO 3 AUTH default pw SETNAME app\r\n", want);
    raw_expect(fd, "CLIENT GETNAME\r\n", "$3\r\napp\r\n");
    raw_expect(fd, "GET k\r\n", "_\r\n");
    close(fd);
    it_stop(d);
}

Test(server, ping_echo_time)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_BULK(it_cmd(c, "PING hello"), "hello");
    IT_BULK(it_cmd(c, "PING %s", "with spaces"), "with spaces");
    IT_ERR(it_cmd(c, "PING a b"), "ERR wrong number of arguments for 'ping' command");
    IT_BULK(it_cmd(c, "ECHO %s", "hi there"), "hi there");
    IT_BULK(it_cmd(c, "ECHO %s", ""), "");
    IT_ERR(it_cmd(c, "ECHO"), "ERR wrong number of arguments for 'echo' command");
    /* CLOCK_REALTIME, the clock TIME reads: time(2) reads a coarser one that can still show
     * the last second when the fine one has passed it. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t before = ts.tv_sec;
    redisReply *r = it_cmd(c, "TIME");
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t after = ts.tv_sec;
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "TIME: want 2 elements");
    cr_assert(r->element[0]->type == REDIS_REPLY_STRING);
    cr_assert(r->element[1]->type == REDIS_REPLY_STRING);
    long long s = atoll(r->element[0]->str), us = atoll(r->element[1]->str);
    cr_assert(s >= before && s <= after, "TIME seconds %lld not in [%ld, %ld]", s, (long)before,
              (long)after);
    cr_assert(us >= 0 && us < 1000000, "TIME microseconds %lld", us);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

/* The CLIENT LIST line of client id, or NULL. Returns a malloc'd copy. */
static char *client_line(const char *list, long long id)
{
    char needle[48];
    snprintf(needle, sizeof(needle), "id=%lld ", id);
    const char *p = list;
    while ((p = strstr(p, needle)) != NULL) {
        if (p == list || p[-1] == '\n') {
            const char *e = strchr(p, '\n');
            size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
            char *line = malloc(n + 1);
            memcpy(line, p, n);
            line[n] = '\0';
            return line;
        }
        p++;
    }
    return NULL;
}

Test(server, client_setname_getname_id_list)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *a = it_connect(d->port), *b = it_connect(d->port);
    IT_NIL(it_cmd(a, "CLIENT GETNAME"));
    IT_STATUS(it_cmd(a, "CLIENT SETNAME worker-1"), "OK");
    IT_BULK(it_cmd(a, "CLIENT GETNAME"), "worker-1");
    IT_NIL(it_cmd(b, "CLIENT GETNAME"));
    IT_ERR_LIKE(it_cmd(a, "CLIENT SETNAME %s", "has space"), "ERR", NULL);
    IT_BULK(it_cmd(a, "CLIENT GETNAME"), "worker-1");
    long long ida = it_int(it_cmd(a, "CLIENT ID"));
    long long idb = it_int(it_cmd(b, "CLIENT ID"));
    cr_assert(ida > 0 && idb > 0 && ida != idb, "client ids %lld %lld", ida, idb);
    IT_INT(it_cmd(a, "CLIENT ID"), ida);
    redisReply *r = it_cmd(b, "CLIENT LIST");
    cr_assert(r->type == REDIS_REPLY_STRING, "CLIENT LIST: want a bulk string");
    char *la = client_line(r->str, ida), *lb = client_line(r->str, idb);
    cr_assert(la != NULL && lb != NULL, "CLIENT LIST lacks id=%lld or id=%lld:\n%s", ida, idb,
              r->str);
    size_t lal = strlen(la);
    cr_assert(strstr(la, " name=worker-1 ") != NULL ||
                  (lal > 14 && strcmp(la + lal - 14, " name=worker-1") == 0),
              "no name=worker-1 in: %s", la);
    cr_assert(strstr(la, "addr=127.0.0.1:") != NULL, "no addr= in: %s", la);
    cr_assert(strstr(lb, "cmd=client") != NULL, "no cmd=client in: %s", lb);
    free(la);
    free(lb);
    freeReplyObject(r);
    /* SETNAME with an empty name clears it. */
    IT_STATUS(it_cmd(a, "CLIENT SETNAME %s", ""), "OK");
    IT_NIL(it_cmd(a, "CLIENT GETNAME"));
    redisFree(a);
    redisFree(b);
    it_stop(d);
}

Test(server, client_kill_closes_the_other_connection)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *a = it_connect(d->port);
    /* The victim is a raw socket, so we can watch it being closed. */
    int v = it_raw_connect(d->port);
    const char *cmd = "*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";
    it_raw_send(v, cmd, strlen(cmd));
    char line[64];
    raw_line(v, line, sizeof(line));
    cr_assert(line[0] == ':', "CLIENT ID answered %s", line);
    long long idv = atoll(line + 1);
    IT_INT(it_cmd(a, "CLIENT KILL ID %lld", idv), 1);
    cr_assert(raw_wait_closed(v), "killed connection was not closed within 10 s");
    close(v);
    /* Once its close has been processed, the client is gone from the registry. */
    long long deadline = it_now_ms() + 10000;
    while (it_int(it_cmd(a, "CLIENT KILL ID %lld", idv)) != 0) {
        cr_assert(it_now_ms() < deadline, "killed client %lld still listed after 10 s", idv);
        it_sleep_ms(20);
    }
    IT_INT(it_cmd(a, "CLIENT KILL ID 987654321"), 0);

    /* By address, new and old forms. */
    for (int form = 0; form < 2; form++) {
        v = it_raw_connect(d->port);
        it_raw_send(v, "PING\r\n", 6);
        raw_line(v, line, sizeof(line));
        cr_assert_str_eq(line, "+PONG\r\n");
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        cr_assert(getsockname(v, (struct sockaddr *)&sa, &sl) == 0);
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
        if (form == 0)
            IT_INT(it_cmd(a, "CLIENT KILL ADDR %s", addr), 1);
        else
            IT_STATUS(it_cmd(a, "CLIENT KILL %s", addr), "OK");
        cr_assert(raw_wait_closed(v), "connection killed by address was not closed");
        close(v);
    }
    IT_ERR_LIKE(it_cmd(a, "CLIENT KILL 127.0.0.1:1"), "ERR", NULL);
    /* The killer is fine. */
    IT_STATUS(it_cmd(a, "PING"), "PONG");
    redisFree(a);
    it_stop(d);
}

/* Finds name in a CONFIG GET reply; returns its value or NULL. */
static const char *config_value(const redisReply *r, const char *name)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, name) == 0)
            return r->element[i + 1]->str;
    return NULL;
}

Test(server, config_get_and_set)
{
    struct it_daemon *d = it_start(IT_ARGS("--maxclients", "777"));
    redisContext *c = it_connect(d->port);
    char port[16];
    snprintf(port, sizeof(port), "%d", d->port);
    redisReply *r = it_cmd(c, "CONFIG GET port");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[0]->str, "port");
    cr_assert_str_eq(r->element[1]->str, port);
    freeReplyObject(r);

    r = it_cmd(c, "CONFIG GET *");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0 && r->elements >= 40,
              "CONFIG GET * returned %zu elements", r->elements);
    for (size_t i = 0; i < r->elements; i++)
        cr_assert(r->element[i]->type == REDIS_REPLY_STRING);
    static const char *const names[] = {"bind",
                                        "port",
                                        "threads",
                                        "busy-poll-us",
                                        "maxclients",
                                        "timeout",
                                        "tcp-keepalive",
                                        "requirepass",
                                        "maxmemory",
                                        "dir",
                                        "dbfilename",
                                        "save-interval",
                                        "loglevel",
                                        "window-max-count",
                                        "client-query-buffer-limit",
                                        "proto-max-bulk-len",
                                        "save",
                                        "appendonly"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cr_assert(config_value(r, names[i]) != NULL, "CONFIG GET * lacks %s", names[i]);
    cr_assert_str_eq(config_value(r, "port"), port);
    cr_assert_str_eq(config_value(r, "maxclients"), "777");
    cr_assert_str_eq(config_value(r, "threads"), "2");
    cr_assert_str_eq(config_value(r, "dir"), d->dir);
    freeReplyObject(r);

    /* save and appendonly as a Redis without persistence answers them. */
    r = it_cmd(c, "CONFIG GET save");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[0]->str, "save");
    cr_assert_str_eq(r->element[1]->str, "");
    freeReplyObject(r);
    r = it_cmd(c, "CONFIG GET appendonly");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "no");
    freeReplyObject(r);
    r = it_cmd(c, "CONFIG GET no-such-setting");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 0);
    freeReplyObject(r);
    r = it_cmd(c, "CONFIG GET MAXCLIENTS");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "777");
    freeReplyObject(r);

    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 100mb"), "OK");
    r = it_cmd(c, "CONFIG GET maxmemory");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "104857600");
    freeReplyObject(r);
    IT_STATUS(it_cmd(c, "CONFIG SET maxmemory 0"), "OK");
    IT_STATUS(it_cmd(c, "CONFIG SET save %s", ""), "OK");
    IT_ERR(it_cmd(c, "CONFIG SET port 1"),
           "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable "
           "config");
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET maxmemory lots"),
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - ", NULL);
    IT_ERR_LIKE(it_cmd(c, "CONFIG SET save %s", "900 1"),
                "ERR CONFIG SET failed (possibly related to argument 'save') - ", NULL);
    r = it_cmd(c, "CONFIG GET maxmemory");
    cr_assert_str_eq(r->element[1]->str, "0");
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

Test(server, auth_required)
{
    struct it_daemon *d = it_start(IT_ARGS("--requirepass", "secret"));
    redisContext *c = it_connect(d->port);
    IT_ERR(it_cmd(c, "PING"), NOAUTH);
    IT_ERR(it_cmd(c, "GET k"), NOAUTH);
    IT_ERR(it_cmd(c, "CL.THROTTLE k 15 30 60"), NOAUTH);
    IT_ERR(it_cmd(c, "ISALLOWED u a 60 10"), NOAUTH);
    IT_ERR(it_cmd(c, "CONFIG GET requirepass"), NOAUTH);
    IT_ERR(it_cmd(c, "AUTH wrong"), WRONGPASS);
    IT_ERR(it_cmd(c, "AUTH default wrong"), WRONGPASS);
    IT_ERR(it_cmd(c, "AUTH someone secret"), WRONGPASS);
    IT_ERR(it_cmd(c, "PING"), NOAUTH);
    IT_STATUS(it_cmd(c, "AUTH secret"), "OK");
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    IT_INTS(it_cmd(c, "CL.THROTTLE k 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    /* The two-argument form with the default user; a new connection starts unauthenticated. */
    c = it_connect(d->port);
    IT_ERR(it_cmd(c, "EXISTS k"), NOAUTH);
    IT_STATUS(it_cmd(c, "AUTH default secret"), "OK");
    IT_INT(it_cmd(c, "EXISTS k"), 1);
    redisFree(c);
    /* QUIT works before AUTH. */
    int fd = it_raw_connect(d->port);
    it_raw_send(fd, "QUIT\r\n", 6);
    char buf[64];
    size_t n = raw_read(fd, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    cr_assert_str_eq(buf, "+OK\r\n");
    close(fd);
    it_stop(d);
}

Test(server, auth_without_password_configured)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *want = "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?";
    IT_ERR(it_cmd(c, "AUTH x"), want);
    IT_ERR(it_cmd(c, "AUTH secret"), want);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    it_stop(d);
}

Test(server, quit_replies_ok_then_closes)
{
    struct it_daemon *d = it_start(NULL);
    int fd = it_raw_connect(d->port);
    /* Commands after QUIT in the same write are not run. */
    const char *req = "*1\r\n$4\r\nQUIT\r\n*2\r\n$4\r\nINCR\r\n$5\r\nafter\r\n";
    it_raw_send(fd, req, strlen(req));
    char buf[256];
    size_t n = raw_read(fd, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    cr_assert_str_eq(buf, "+OK\r\n", "QUIT answered \"%s\"", buf);
    close(fd);
    redisContext *c = it_connect(d->port);
    IT_INT(it_cmd(c, "EXISTS after"), 0);
    redisFree(c);
    it_stop(d);
}

Test(server, reset_clears_connection_state)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "CLIENT SETNAME n1"), "OK");
    IT_STATUS(it_cmd(c, "MULTI"), "OK");
    IT_STATUS(it_cmd(c, "INCR r"), "QUEUED");
    IT_STATUS(it_cmd(c, "RESET"), "RESET");
    IT_NIL(it_cmd(c, "CLIENT GETNAME"));
    IT_ERR_LIKE(it_cmd(c, "EXEC"), "ERR", NULL);
    IT_INT(it_cmd(c, "EXISTS r"), 0);
    redisFree(c);
    it_stop(d);
}

/* A transaction's queue lives in an arena reused by the next transaction on the thread: large
 * arguments (past one arena chunk), many commands, repeated and multi-key commands, and a
 * derived-key limiter must all run as queued, transaction after transaction. */
Test(server, transactions_of_any_size_run_as_queued)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    static char big[5000];
    for (int round = 0; round < 3; round++) {
        int n = round == 1 ? 40 : 3; /* a long one between short ones */
        IT_STATUS(it_cmd(c, "MULTI"), "OK");
        for (int i = 0; i < n; i++) {
            memset(big, 'a' + (i + round) % 26, sizeof(big));
            size_t len = i % 2 ? sizeof(big) : (size_t)(i + 1);
            IT_STATUS(it_cmd(c, "SET tx:%d %b", i % 7, big, len), "QUEUED");
            IT_STATUS(it_cmd(c, "APPEND tx:%d x", i % 7), "QUEUED");
        }
        IT_STATUS(it_cmd(c, "MSET tx:a 1 tx:b 2 tx:a 3"), "QUEUED");
        IT_STATUS(it_cmd(c, "ISALLOWED tx:lim x 60 10"), "QUEUED");
        IT_STATUS(it_cmd(c, "DEL tx:b tx:none"), "QUEUED");
        redisReply *r = it_cmd(c, "EXEC");
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)(2 * n + 3),
                  "round %d: EXEC reply type %d, %zu elements", round, r->type, r->elements);
        for (int i = 0; i < n; i++) {
            size_t len = i % 2 ? sizeof(big) : (size_t)(i + 1);
            cr_assert(r->element[2 * i]->type == REDIS_REPLY_STATUS, "round %d SET %d", round, i);
            cr_assert(r->element[2 * i + 1]->type == REDIS_REPLY_INTEGER &&
                          r->element[2 * i + 1]->integer == (long long)len + 1,
                      "round %d APPEND %d", round, i);
        }
        cr_assert(r->element[2 * n + 1]->type == REDIS_REPLY_INTEGER &&
                      r->element[2 * n + 1]->integer == 1,
                  "ISALLOWED in EXEC");
        cr_assert(r->element[2 * n + 2]->type == REDIS_REPLY_INTEGER &&
                  r->element[2 * n + 2]->integer == 1);
        freeReplyObject(r);
        /* The last SET of tx:<k> wins, with its APPEND. */
        for (int k = 0; k < 7 && k < n; k++) {
            int i = k;
            while (i + 7 < n)
                i += 7;
            size_t len = i % 2 ? sizeof(big) : (size_t)(i + 1);
            r = it_cmd(c, "GET tx:%d", k);
            cr_assert(r->type == REDIS_REPLY_STRING && r->len == len + 1, "round %d GET tx:%d",
                      round, k);
            cr_assert(r->str[0] == 'a' + (i + round) % 26 && r->str[len] == 'x');
            freeReplyObject(r);
        }
        IT_BULK(it_cmd(c, "GET tx:a"), "3");
        IT_INT(it_cmd(c, "EXISTS tx:b"), 0);
    }
    redisFree(c);
    it_stop(d);
}

Test(server, info_has_redis_fields)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "SET k v"), "OK");
    redisReply *r = it_cmd(c, "INFO");
    cr_assert(r->type == REDIS_REPLY_STRING, "INFO: want a bulk string");
    char want[64];
    snprintf(want, sizeof(want), "tcp_port:%d\r\n", d->port);
    static const char *const fields[] = {
        "redis_version:",     "redis_mode:",  "run_id:",   "uptime_in_seconds:",
        "connected_clients:", "used_memory:", "loading:0", "total_commands_processed:",
        "db0:keys=1,"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        cr_assert(strstr(r->str, fields[i]) != NULL, "INFO lacks %s", fields[i]);
    cr_assert(strstr(r->str, want) != NULL, "INFO lacks %s", want);
    freeReplyObject(r);
    r = it_cmd(c, "INFO no-such-section");
    cr_assert(r->type == REDIS_REPLY_STRING, "INFO <unknown section> must succeed");
    freeReplyObject(r);
    /* redis-cli can read it. */
    char *out;
    int st = it_run(&out, "redis-cli -p %d INFO server", d->port);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "redis-cli: %s", out);
    cr_assert(strstr(out, "redis_version:") != NULL, "redis-cli INFO server printed: %s", out);
    free(out);
    redisFree(c);
    it_stop(d);
}

/* COMMAND INFO entries shaped like Redis 7's (10 elements), with the limiters' first argument
 * as their key, so cluster clients route them (COMMANDS.md). */
Test(server, command_info_routes_limiters_by_first_argument)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    long long n = it_int(it_cmd(c, "COMMAND COUNT"));
    cr_assert(n >= 40, "COMMAND COUNT %lld", n);
    static const struct {
        const char *name;
        long long arity;
    } cmds[] = {{"cl.throttle", -5}, {"isallowed", 5}, {"get", 2}, {"set", -3}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        redisReply *r = it_cmd(c, "COMMAND INFO %s", cmds[i].name);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
        redisReply *e = r->element[0];
        cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 10,
                  "COMMAND INFO %s: want a 10-element entry", cmds[i].name);
        cr_assert(e->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(e->element[0]->str, cmds[i].name) == 0);
        cr_assert(e->element[1]->integer == cmds[i].arity, "%s arity %lld", cmds[i].name,
                  e->element[1]->integer);
        cr_assert(e->element[3]->integer == 1 && e->element[4]->integer == 1 &&
                      e->element[5]->integer == 1,
                  "%s keys: first %lld last %lld step %lld", cmds[i].name, e->element[3]->integer,
                  e->element[4]->integer, e->element[5]->integer);
        cr_assert(e->element[8]->type == REDIS_REPLY_ARRAY && e->element[8]->elements >= 1,
                  "%s: no key specs", cmds[i].name);
        freeReplyObject(r);
    }
    redisReply *r = it_cmd(c, "COMMAND GETKEYS ISALLOWED alice login 60 10");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              strcmp(r->element[0]->str, "alice") == 0);
    freeReplyObject(r);
    r = it_cmd(c, "COMMAND INFO no-such-command");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              r->element[0]->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    redisFree(c);
    it_stop(d);
}

Test(server, slowlog)
{
    struct it_daemon *d = it_start(IT_ARGS("--slowlog-log-slower-than", "0"));
    redisContext *c = it_connect(d->port);
    IT_STATUS(it_cmd(c, "CLIENT SETNAME slowpoke"), "OK");
    IT_INTS(it_cmd(c, "CL.THROTTLE slow 15 30 60"), 0, 16, 15, -1, 2);
    long long n = it_int(it_cmd(c, "SLOWLOG LEN"));
    cr_assert(n >= 2, "SLOWLOG LEN %lld with slowlog-log-slower-than 0", n);
    redisReply *r = it_cmd(c, "SLOWLOG GET 1");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    redisReply *e = r->element[0];
    /* id, timestamp, microseconds, arguments, client address, client name */
    cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 6, "slowlog entry shape");
    cr_assert(e->element[3]->type == REDIS_REPLY_ARRAY && e->element[3]->elements >= 1);
    cr_assert(e->element[5]->type == REDIS_REPLY_STRING &&
              strcmp(e->element[5]->str, "slowpoke") == 0);
    freeReplyObject(r);
    IT_STATUS(it_cmd(c, "SLOWLOG RESET"), "OK");
    n = it_int(it_cmd(c, "SLOWLOG LEN"));
    cr_assert(n <= 1, "SLOWLOG LEN %lld right after RESET", n);
    redisFree(c);
    it_stop(d);
}

/* Errors that quote what the client sent must not let CR or LF through: the reply has to stay
 * one line, or the client's parser falls out of step with the server. */
Test(server, errors_quoting_input_stay_one_line)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    const char *evil = "x\r\n:666\r\n";
    const char *cases[][3] = {
        {"foo", evil, NULL},     {evil, "a", NULL},      {"CLIENT", evil, NULL},
        {"CONFIG", "SET", evil}, {"CONFIG", evil, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int argc = cases[i][2] != NULL ? 3 : 2;
        if (strcmp(cases[i][0], "CONFIG") == 0 && argc == 3) {
            const char *argv[] = {cases[i][0], cases[i][1], cases[i][2], "1"};
            redisReply *r = it_cmdargv(c, 4, argv);
            cr_assert(r->type == REDIS_REPLY_ERROR, "case %zu: want an error", i);
            cr_assert(strpbrk(r->str, "\r\n") == NULL, "case %zu: CR/LF in error: %s", i, r->str);
            freeReplyObject(r);
        } else {
            redisReply *r = it_cmdargv(c, argc, cases[i]);
            cr_assert(r->type == REDIS_REPLY_ERROR, "case %zu: want an error", i);
            cr_assert(strpbrk(r->str, "\r\n") == NULL, "case %zu: CR/LF in error: %s", i, r->str);
            freeReplyObject(r);
        }
        /* Still in step: the next reply is the next command's. */
        IT_STATUS(it_cmd(c, "PING"), "PONG");
    }
    redisFree(c);
    it_stop(d);
}

/* ---- io-sched-policy ---- */

/* Scheduling policy of every I/O thread of pid, which is every thread but the signal watcher
 * (field 41 of /proc/PID/task/TID/stat): how many run as SCHED_BATCH, out of *total, and the
 * main thread's (I/O thread 0) in *main_policy. */
static int count_batch_threads(pid_t pid, int *main_policy, int *total)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *dp = opendir(dir);
    cr_assert(dp != NULL, "cannot list %s", dir);
    int batch = 0;
    *main_policy = -1;
    *total = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[64 + sizeof(de->d_name) + 8];
        snprintf(path, sizeof(path), "%s/%s/stat", dir, de->d_name);
        long long policy = it_proc_stat_field(path, 41);
        if (policy < 0)
            continue; /* a thread that ended meanwhile */
        /* The signal watcher (net/signals.c) and the scripts' busy watcher (started by the
         * first script) are not I/O threads. */
        char comm_path[64 + sizeof(de->d_name) + 8], comm[32] = "";
        snprintf(comm_path, sizeof(comm_path), "%s/%s/comm", dir, de->d_name);
        FILE *f = fopen(comm_path, "r");
        if (f != NULL) {
            if (fgets(comm, sizeof(comm), f) == NULL)
                comm[0] = '\0';
            fclose(f);
        }
        if (strcmp(comm, "rlimitd-signals\n") == 0 || strcmp(comm, "rlimitd-busy\n") == 0)
            continue;
        batch += policy == SCHED_BATCH;
        (*total)++;
        if (atoi(de->d_name) == (int)pid)
            *main_policy = (int)policy;
    }
    closedir(dp);
    return batch;
}

static int info_says(redisContext *c, const char *line)
{
    redisReply *r = it_cmd(c, "INFO server");
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "INFO server");
    int found = strstr(r->str, line) != NULL;
    freeReplyObject(r);
    return found;
}

/* Starts a daemon with the given threads and policy; checks what INFO and the kernel say. */
static void check_io_sched(const char *threads, const char *policy, int want_batch)
{
    struct it_daemon *d = it_start(IT_ARGS("--threads", threads, "--io-sched-policy", policy));
    redisContext *c = it_connect(d->port);
    int nthreads = atoi(threads), main_policy, total;
    int batch = count_batch_threads(d->pid, &main_policy, &total);
    /* Right after start the daemon's threads are its I/O threads (a save thread comes later). */
    cr_assert_eq(total, nthreads, "threads %s: %d threads at start", threads, total);
    if (want_batch) {
        cr_assert(info_says(c, "\r\nio_sched_policy:batch\r\n"), "threads %s, %s: INFO", threads,
                  policy);
        cr_assert_eq(main_policy, SCHED_BATCH, "threads %s, %s: I/O thread 0", threads, policy);
        /* Every I/O thread inherits it from the main thread. */
        cr_assert_eq(batch, nthreads, "threads %s, %s: %d batch threads", threads, policy, batch);
    } else {
        /* Not batch: the class it was started with, this test's own (SCHED_OTHER unless the
         * test runs under chrt). */
        int own = sched_getscheduler(0);
        cr_assert_eq(main_policy, own, "threads %s, %s: I/O thread 0", threads, policy);
        cr_assert_eq(batch, own == SCHED_BATCH ? nthreads : 0, "threads %s, %s: %d batch threads",
                     threads, policy, batch);
        if (own == SCHED_OTHER)
            cr_assert(info_says(c, "\r\nio_sched_policy:normal\r\n"), "threads %s, %s: INFO",
                      threads, policy);
    }
    /* Served as before. */
    IT_INTS(it_cmd(c, "CL.THROTTLE sched 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    it_stop(d);
}

Test(server, io_sched_policy_reaches_every_io_thread)
{
    check_io_sched("2", "batch", 1);
    check_io_sched("2", "normal", 0);
    cpu_set_t cpus;
    cr_assert_eq(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
    int ncpu = CPU_COUNT(&cpus);
    char n[16];
    /* auto: batch exactly when the I/O threads are as many as the CPUs. The daemon counts the
     * CPUs as this test does (it inherits the affinity). */
    if (ncpu <= 16) {
        snprintf(n, sizeof(n), "%d", ncpu);
        check_io_sched(n, "auto", 1);
    }
    if (ncpu >= 2) {
        snprintf(n, sizeof(n), "%d", ncpu - 1 < 16 ? ncpu - 1 : 16);
        check_io_sched(n, "auto", 0);
    }
}
