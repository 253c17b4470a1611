/* harness.h - black-box helpers for the integration tests: start the real rlimitd binary on a
 * free port, talk to it with hiredis or raw sockets, stop it and check how it ended.
 *
 * Every test runs in its own Criterion worker process. it_start() records the daemon in a
 * per-process global so that it_fini() (the suites' .fini) can kill it and remove its temp dir
 * even when an assertion aborted the test half way. The daemon also gets PR_SET_PDEATHSIG, so a
 * worker killed by a Criterion timeout does not leave it running. */
#ifndef RLIMITD_IT_HARNESS_H
#define RLIMITD_IT_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "../cases/limit_model.h"

struct it_daemon {
    pid_t pid; /* 0 once reaped */
    int port;
    int status;    /* waitpid status once reaped */
    char dir[256]; /* temp dir: conf, log, snapshot dir */
    char conf[320];
    char log[320];
    char pass[128]; /* requirepass given on the command line, for it_stop's AUTH */
};

/* Builds a NULL-terminated argument list: IT_ARGS("--threads", "2"). */
#define IT_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Environment: RLIMITD_BIN (the daemon), RLIMITD_SOURCE_ROOT. Asserts they are set. */
const char *it_bin(void);
const char *it_source_root(void);

/* A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close). */
int it_free_port(void);

/* Starts rlimitd -c <tmp conf> --port P <extra...> with stdout+stderr in <dir>/rlimitd.log and
 * waits until PING answers PONG (up to 10 s). extra may be NULL. Asserts on failure, showing the
 * log. The tmp conf binds 127.0.0.1, sets dir to the temp dir, save-interval 0, threads 2. */
struct it_daemon *it_start(const char *const *extra);
/* The parts of it_start: allocate and register a daemon with its temp dir and conf file;
 * spawn it on port (no waiting); wait up to ms for it to exit (1 if it did, status in
 * d->status); wait up to ms for PING to answer (1 if it did). */
struct it_daemon *it_prepare(void);
void it_spawn(struct it_daemon *d, int port, const char *const *extra);
int it_wait_exit(struct it_daemon *d, int ms);
/* Forks and execs argv[0] (looked up in PATH when it has no slash) in dir, stdin from
 * /dev/null, stdout and stderr appended to log, dying with the test worker; env, if not NULL,
 * is NAME, value, ..., NULL, set in the child only. Returns the pid. it_spawn uses it for
 * rlimitd, tests/module for redis-server. */
pid_t it_spawn_server(const char *const *argv, const char *log, const char *dir,
                      const char *const *env);
int it_wait_ready(struct it_daemon *d, int ms);

/* SHUTDOWN NOSAVE (after AUTH if needed; falls back to SIGTERM if no connection is accepted),
 * waits for the exit, asserts exit status 0 and a clean log. Removes the temp dir. */
void it_stop(struct it_daemon *d);
/* Same, but stops with a signal instead of SHUTDOWN. */
void it_stop_signal(struct it_daemon *d, int sig);
/* Asserts the log has no sanitizer report. */
void it_assert_clean_log(const struct it_daemon *d);
/* The whole log, malloc'd and NUL-terminated ("" if unreadable). */
char *it_read_file(const char *path);

/* Criterion .fini for every suite: SIGKILLs a daemon still running, removes its temp dir. */
void it_fini(void);

/* Resident set size of a process in KiB, or -1. */
long it_rss_kib(pid_t pid);
/* Field `field` (1-based, as proc(5) numbers them; >= 3) of a /proc .../stat file, e.g.
 * /proc/PID/stat or /proc/PID/task/TID/stat; -1 if the file cannot be read (a thread that
 * ended). The parse itself is asserted. */
long long it_proc_stat_field(const char *path, int field);

/* ---- hiredis ---- */

/* Connects with a 5 s connect timeout and a 30 s read/write timeout; asserts success. */
redisContext *it_connect(int port);
/* Connects (AUTH pass if pass != NULL); returns NULL instead of asserting. */
redisContext *it_try_connect(int port);
/* redisCommand that asserts a reply came back (not a connection error). */
redisReply *it_cmd(redisContext *c, const char *fmt, ...);
redisReply *it_cmdargv(redisContext *c, int argc, const char **argv);

/* Checks that consume (free) the reply; on mismatch they fail the test naming file:line. */
void it_check_status(redisReply *r, const char *want, const char *file, int line);
void it_check_int(redisReply *r, long long want, const char *file, int line);
void it_check_bulk(redisReply *r, const char *want, const char *file, int line);
void it_check_nil(redisReply *r, const char *file, int line);
void it_check_err(redisReply *r, const char *want, const char *file, int line);
/* Error starting with prefix and (if contains != NULL) containing contains. */
void it_check_err_like(redisReply *r, const char *prefix, const char *contains, const char *file,
                       int line);
/* Array of n integers. */
void it_check_ints(redisReply *r, const long long *want, size_t n, const char *file, int line);

#define IT_STATUS(r, s) it_check_status((r), (s), __FILE__, __LINE__)
#define IT_INT(r, v) it_check_int((r), (v), __FILE__, __LINE__)
#define IT_BULK(r, s) it_check_bulk((r), (s), __FILE__, __LINE__)
#define IT_NIL(r) it_check_nil((r), __FILE__, __LINE__)
#define IT_ERR(r, s) it_check_err((r), (s), __FILE__, __LINE__)
#define IT_ERR_LIKE(r, p, c) it_check_err_like((r), (p), (c), __FILE__, __LINE__)
#define IT_INTS(r, ...)                                                                            \
    do {                                                                                           \
        const long long it_want_[] = {__VA_ARGS__};                                                \
        it_check_ints((r), it_want_, sizeof(it_want_) / sizeof(it_want_[0]), __FILE__, __LINE__);  \
    } while (0)

/* Integer value of an integer reply (asserted), freeing it. */
long long it_int(redisReply *r);
/* The number after "field:" in INFO section's reply (asserted present). */
long long it_info_int(redisContext *c, const char *section, const char *field);
/* Waits (up to 60 s, whatever the machine) until INFO clients says n blocked_clients; asserts. */
void it_await_blocked(redisContext *c, long long n);
/* The value of the Prometheus sample `series` (name with labels, exactly as exposed) in the
 * /metrics body text; asserts it is there. */
double it_metric_sample(const char *text, const char *series);
/* Opens n raw connections to port, one after another; each asks CLIENT ID (into id[i]), then
 * sends req (a complete RESP command that blocks), and the next is opened only once INFO on c
 * counts it blocked, so the n wait in that order. */
void it_queue_waiters(redisContext *c, int port, const char *req, int n, int fd[], long long id[]);
/* The reply's five integers (asserted an array of 5: a limiter's reply), freeing it. */
void it_five(redisReply *r, long long v[5]);

/* ---- raw sockets ---- */

/* Blocking TCP connection to 127.0.0.1:port with 10 s send/receive timeouts; asserts. */
int it_raw_connect(int port);
/* Sends all of buf; asserts. */
void it_raw_send(int fd, const void *buf, size_t len);

/* Result of it_raw_exchange: what came back and how the connection ended. */
struct it_io {
    char *data; /* malloc'd, NUL-terminated, len bytes */
    size_t len;
    size_t sent; /* bytes of the request the peer accepted */
    int closed;  /* the peer closed (EOF or reset) */
};

/* Writes buf (as far as the peer accepts it) while reading everything that comes back, until
 * the peer closes, want_len bytes have come back (want_len 0: no such target), or nothing
 * moves in either direction for idle_ms. A reset counts as closed; after EPIPE it keeps reading.
 * Stores at most max_keep received bytes (io->len counts only those). Free io->data. */
void it_raw_exchange(int fd, const void *buf, size_t len, int idle_ms, size_t max_keep,
                     size_t want_len, struct it_io *io);
/* Reads until n complete replies have been parsed into out[] (or the peer closes, or 10 s pass
 * without data). Returns how many were parsed; the caller frees them. */
size_t it_raw_read_replies(int fd, size_t n, redisReply **out);

/* Parses a buffer of RESP replies. Returns the number parsed into out[0..max) (freed by the
 * caller with freeReplyObject), asserting the bytes are well-formed RESP; *rest is set to the
 * count of trailing bytes that do not form a complete reply. */
size_t it_parse_replies(const char *data, size_t len, redisReply **out, size_t max, size_t *rest);

/* The hostile-input epilogue: the second connection `other` still answers PING and GET of
 * sentinel_key gives sentinel_val, and a brand-new connection answers PING. */
void it_assert_healthy(struct it_daemon *d, redisContext *other, const char *sentinel_key,
                       const char *sentinel_val);

/* ---- child processes ---- */

/* Runs a shell command line, capturing stdout+stderr (malloc'd into *out). Returns the exit
 * status as from waitpid (use WIFEXITED/WEXITSTATUS). */
int it_run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic milliseconds. */
long long it_now_ms(void);

/* A CL.THROTTLE key followed by the GCRA model (tests/cases/limit_model.h), so that a test can
 * check a key's replies without assuming the calls are quick. */
struct it_limit {
    struct lm_gcra model;
    int64_t since; /* CLOCK_REALTIME before the key's first call */
};
void it_limit_init(struct it_limit *l);
/* Sends `CL.THROTTLE key max_burst count period quantity` and checks the reply against the model
 * with the time measured around the call; while the key's calls so far took under a second
 * (COMMANDS.md 2's "quick succession"), also against want exactly. */
void it_throttle(redisContext *c, struct it_limit *l, const char *key, int max_burst, int count,
                 int period, int quantity, const long long want[5], const char *file, int line);
#define IT_THROTTLE(c, l, key, mb, count, period, q, ...)                                          \
    do {                                                                                           \
        const long long it_want_[5] = {__VA_ARGS__};                                               \
        it_throttle((c), (l), (key), (mb), (count), (period), (q), it_want_, __FILE__, __LINE__);  \
    } while (0)
void it_sleep_ms(int ms);

#endif
