/* test_cli.c - the command line (CONFIG.md): --version, --help, --test-config, configuration
 * errors, a port already in use, stopping with signals. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(cli, .fini = it_fini, .timeout = 120);

/* Prefix for command lines that must not start a server: if one starts anyway, it is killed
 * (exit status 137), which expect_exit reports as such. */
#define GUARD "timeout -s KILL 20 "

static void expect_exit(int st, int code, const char *out, const char *what)
{
    cr_assert(WIFEXITED(st), "%s: did not exit normally (0x%x): %s", what, st, out);
    cr_assert(WEXITSTATUS(st) != 137, "%s: still running after 20 s (it started a server?): %s",
              what, out);
    if (code >= 0)
        cr_assert(WEXITSTATUS(st) == code, "%s: exit %d, want %d; output:\n%s", what,
                  WEXITSTATUS(st), code, out);
    else
        cr_assert(WEXITSTATUS(st) != 0, "%s: exit 0, want failure; output:\n%s", what, out);
}

Test(cli, version_and_help)
{
    char *out;
    int st = it_run(&out, GUARD "'%s' --version", it_bin());
    expect_exit(st, 0, out, "--version");
    cr_assert(strncmp(out, "rlimitd ", 8) == 0 && strchr(out, '.') != NULL,
              "--version printed \"%s\"", out);
    free(out);
    st = it_run(&out, GUARD "'%s' -v", it_bin());
    expect_exit(st, 0, out, "-v");
    free(out);
    st = it_run(&out, GUARD "'%s' --help", it_bin());
    expect_exit(st, 0, out, "--help");
    cr_assert(strstr(out, "Usage") != NULL && strstr(out, "--test-config") != NULL,
              "--help printed \"%s\"", out);
    free(out);
    st = it_run(&out, GUARD "'%s' -h", it_bin());
    expect_exit(st, 0, out, "-h");
    free(out);
    st = it_run(&out, GUARD "'%s' --no-such-directive 1", it_bin());
    expect_exit(st, -1, out, "--no-such-directive");
    cr_assert(strstr(out, "no-such-directive") != NULL, "message does not name it: %s", out);
    free(out);
    st = it_run(&out, GUARD "'%s' --port notaport", it_bin());
    expect_exit(st, -1, out, "--port notaport");
    cr_assert(strstr(out, "port") != NULL, "message does not name port: %s", out);
    free(out);
}

Test(cli, test_config_accepts_the_sample)
{
    char *out;
    int st = it_run(&out, GUARD "'%s' --test-config -c '%s/conf/rlimitd.conf'", it_bin(),
                    it_source_root());
    expect_exit(st, 0, out, "--test-config conf/rlimitd.conf");
    free(out);
    st = it_run(&out, GUARD "'%s' -c '%s/conf/rlimitd.conf' --test-config --port 7400", it_bin(),
                it_source_root());
    expect_exit(st, 0, out, "--test-config with an override");
    free(out);
}

/* Writes text to <dir>/name and returns the path (static buffer). */
static const char *write_conf(const char *dir, const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
    return path;
}

Test(cli, bad_config_file_names_file_and_line)
{
    struct it_daemon *d = it_prepare(); /* only for its temp dir */
    static const struct {
        const char *text;
        int line;
        const char *word;
    } cases[] = {
        {"# comment\nport 7400\nprot 7379\n", 3, "prot"},
        {"port 70000\n", 1, "port"},
        {"bind 127.0.0.1\n\nport 1 2\n", 3, "port"},
        {"loglevel notice\nloglevel loud\n", 2, "loglevel"},
        {"requirepass \"unterminated\n", 1, NULL},
        {"maxmemory lots\n", 1, "maxmemory"},
        {"port 7400 # trailing comment is not a comment\n", 1, "port"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *path = write_conf(d->dir, "bad.conf", cases[i].text);
        char where[600];
        snprintf(where, sizeof(where), "%s:%d: ", path, cases[i].line);
        for (int mode = 0; mode < 2; mode++) {
            char *out;
            char extra[64];
            snprintf(extra, sizeof(extra), "--port %d", it_free_port());
            int st = it_run(&out, GUARD "'%s' -c '%s' %s", it_bin(), path,
                            mode ? "--test-config" : extra);
            expect_exit(st, -1, out, cases[i].text);
            cr_assert(strstr(out, where) != NULL, "case %zu: want \"%s\" in:\n%s", i, where, out);
            if (cases[i].word != NULL)
                cr_assert(strstr(out, cases[i].word) != NULL, "case %zu: want \"%s\" in:\n%s", i,
                          cases[i].word, out);
            free(out);
        }
    }
    /* A file that does not exist. */
    char *out;
    int st =
        it_run(&out, GUARD "'%s' -c '%s/no-such.conf' --port %d", it_bin(), d->dir, it_free_port());
    expect_exit(st, -1, out, "missing config file");
    cr_assert(strstr(out, "no-such.conf") != NULL, "message lacks the path: %s", out);
    free(out);
}

/* Spawns a daemon on a port that is taken and expects it to exit 1 with a message. */
static void expect_port_refused(int port, const char *what)
{
    struct it_daemon *d = it_prepare();
    it_spawn(d, port, NULL);
    if (!it_wait_exit(d, 10000)) {
        int answers = it_wait_ready(d, 1000);
        kill(d->pid, SIGKILL);
        it_wait_exit(d, 5000);
        cr_assert_fail("%s: rlimitd started on port %d, which is already in use (%s)", what, port,
                       answers ? "and answers PING" : "not answering");
    }
    char *log = it_read_file(d->log);
    cr_assert(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 1,
              "%s: status 0x%x, want exit 1; log:\n%s", what, d->status, log);
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    cr_assert(strstr(log, "in use") != NULL && strstr(log, portstr) != NULL,
              "%s: the message should name port %d and say it is in use; log:\n%s", what, port,
              log);
    free(log);
    it_assert_clean_log(d);
}

Test(cli, port_already_in_use)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    cr_assert(listen(fd, 1) == 0);
    socklen_t len = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    expect_port_refused(ntohs(a.sin_port), "port held by another program");
    close(fd);
}

/* A second rlimitd on the port of a running one must refuse to start too: with both running,
 * the kernel would split the clients between two independent limiters. */
Test(cli, port_in_use_by_another_rlimitd)
{
    struct it_daemon *first = it_start(NULL);
    expect_port_refused(first->port, "port held by another rlimitd");
    redisContext *c = it_connect(first->port);
    IT_STATUS(it_cmd(c, "PING"), "PONG");
    redisFree(c);
    it_stop(first);
}

Test(cli, sigterm_and_sigint_exit_cleanly)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    IT_INTS(it_cmd(c, "CL.THROTTLE k 15 30 60"), 0, 16, 15, -1, 2);
    redisFree(c);
    it_stop_signal(d, SIGTERM);
    d = it_start(NULL);
    it_stop_signal(d, SIGINT);
}

Test(cli, shutdown_nosave_with_clients_connected)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *cs[10];
    for (int i = 0; i < 10; i++) {
        cs[i] = it_connect(d->port);
        IT_INT(it_cmd(cs[i], "INCR n"), i + 1);
    }
    it_stop(d);
    for (int i = 0; i < 10; i++)
        redisFree(cs[i]);
}
