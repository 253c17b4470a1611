/* redis_harness.c - see redis_harness.h. */
#include "redis_harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "../integration/harness.h"

enum { MAX_SERVERS = 8 };
static struct rs_server *servers[MAX_SERVERS];

static const char *module_path(void)
{
    const char *m = getenv("RLIMIT_MODULE");
    cr_assert(m != NULL && access(m, R_OK) == 0, "RLIMIT_MODULE must name the built rlimit.so");
    return m;
}

static const char *server_bin(void)
{
    const char *s = getenv("REDIS_SERVER");
    return s != NULL ? s : "redis-server";
}

static void spawn(struct rs_server *s, const char *module_args, const char *const *extra)
{
    const char *argv[64];
    char portbuf[16], args[1024];
    int n = 0;
    snprintf(portbuf, sizeof portbuf, "%d", s->port);
    argv[n++] = server_bin();
    argv[n++] = "--port";
    argv[n++] = portbuf;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--dir";
    argv[n++] = s->dir;
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--enable-debug-command";
    argv[n++] = "yes";
    /* On redis-server's command line an option's values are the words up to the next "--":
     * the module path, then its arguments. */
    argv[n++] = "--loadmodule";
    argv[n++] = module_path();
    snprintf(args, sizeof args, "%s", module_args ? module_args : "");
    for (char *save = NULL, *w = strtok_r(args, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        cr_assert(n < 40, "too many module arguments");
        argv[n++] = w;
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        cr_assert(n < 62, "too many redis-server arguments");
        argv[n++] = extra[i];
    }
    argv[n] = NULL;

    /* A sanitized module needs its runtimes loaded first in the uninstrumented server. Leak
     * checking stays off: the server's own allocations at exit are not ours, and the module
     * allocates through the server's allocator anyway. */
    const char *preload = getenv("RLIMIT_REDIS_PRELOAD");
    const char *const sanitized[] = {"LD_PRELOAD", preload, "ASAN_OPTIONS",
                                     "detect_leaks=0:abort_on_error=1", NULL};
    s->pid = it_spawn_server(argv, s->log, s->dir,
                             preload != NULL && *preload != '\0' ? sanitized : NULL);
}

/* 1 once PING answers, 0 if the server exited first or 10 s passed. */
static int wait_ready(struct rs_server *s)
{
    long long deadline = it_now_ms() + 10000;
    while (it_now_ms() < deadline) {
        if (waitpid(s->pid, &s->status, WNOHANG) == s->pid) {
            s->pid = 0;
            return 0;
        }
        redisContext *c = it_try_connect(s->port);
        if (c != NULL) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            if (r != NULL)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 1;
        }
        it_sleep_ms(20);
    }
    return 0;
}

static struct rs_server *prepare(void)
{
    struct rs_server *s = calloc(1, sizeof *s);
    cr_assert(s != NULL);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/rlimit-module-XXXXXX", tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(s->dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(s->log, sizeof s->log, "%s/redis.log", s->dir);
    s->port = it_free_port();
    int slot = 0;
    while (slot < MAX_SERVERS && servers[slot] != NULL)
        slot++;
    cr_assert(slot < MAX_SERVERS, "too many servers in one test");
    servers[slot] = s;
    return s;
}

struct rs_server *rs_try_start(const char *module_args, const char *const *extra,
                               struct rs_server **failed)
{
    struct rs_server *s = prepare();
    spawn(s, module_args, extra);
    if (wait_ready(s))
        return s;
    *failed = s;
    return NULL;
}

struct rs_server *rs_start(const char *module_args, const char *const *extra)
{
    struct rs_server *failed = NULL;
    struct rs_server *s = rs_try_start(module_args, extra, &failed);
    if (s == NULL) {
        char *log = it_read_file(failed->log);
        cr_assert_fail("redis-server did not start (status 0x%x). Log:\n%s", failed->status, log);
    }
    return s;
}

void rs_restart(struct rs_server *s, const char *module_args, const char *const *extra)
{
    cr_assert(s->pid == 0, "restart of a running server");
    spawn(s, module_args, extra);
    if (!wait_ready(s)) {
        char *log = it_read_file(s->log);
        cr_assert_fail("redis-server did not restart (status 0x%x). Log:\n%s", s->status, log);
    }
}

void rs_shutdown(struct rs_server *s)
{
    if (s->pid == 0)
        return;
    redisContext *c = it_try_connect(s->port);
    if (c != NULL) {
        redisReply *r = redisCommand(c, "SHUTDOWN NOSAVE");
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
    } else {
        kill(s->pid, SIGTERM);
    }
    long long deadline = it_now_ms() + 10000;
    while (waitpid(s->pid, &s->status, WNOHANG) != s->pid) {
        if (it_now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &s->status, 0);
            break;
        }
        it_sleep_ms(10);
    }
    s->pid = 0;
}

static void discard(struct rs_server *s)
{
    if (s->pid != 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] == s)
            servers[i] = NULL;
    free(s);
}

/* Fails the test if the server log holds a sanitizer report (the module is instrumented in the
 * ASan+UBSan build) or a crash report. */
static void assert_clean_log(struct rs_server *s)
{
    char *log = it_read_file(s->log);
    int dirty = strstr(log, "runtime error:") != NULL || strstr(log, "Sanitizer") != NULL ||
                strstr(log, "REDIS BUG REPORT") != NULL;
    if (dirty) {
        fprintf(stderr, "%s\n", log);
        free(log);
        discard(s);
        cr_assert_fail("redis-server log holds a sanitizer or crash report (printed above)");
    }
    free(log);
}

void rs_stop(struct rs_server *s)
{
    rs_shutdown(s);
    assert_clean_log(s);
    discard(s);
}

void rs_fini(void)
{
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] != NULL)
            discard(servers[i]);
}
