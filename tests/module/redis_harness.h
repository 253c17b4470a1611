/* redis_harness.h - start Debian's real redis-server with rlimit.so loaded, for the module's
 * tests (issue 6). Built on the integration harness (ports, hiredis helpers, temp-dir cleanup
 * conventions). Environment: RLIMIT_MODULE (the built rlimit.so), REDIS_SERVER (default
 * redis-server on PATH). */
#ifndef RLIMITD_REDIS_HARNESS_H
#define RLIMITD_REDIS_HARNESS_H

#include <sys/types.h>

struct rs_server {
    pid_t pid; /* 0 once reaped */
    int port;
    int status;
    char dir[256];
    char log[320];
};

/* Starts redis-server on a free port in a fresh temp dir: no RDB saves, no AOF, DEBUG enabled,
 * the module loaded with module_args (space-separated, may be NULL), plus extra arguments
 * (NULL-terminated, may be NULL). Waits until PING answers; asserts, showing the log. */
struct rs_server *rs_start(const char *module_args, const char *const *extra);
/* Same, but returns NULL if the server exited instead of answering (for load failures);
 * the log stays readable in s->log until rs_free. */
struct rs_server *rs_try_start(const char *module_args, const char *const *extra,
                               struct rs_server **failed);
/* Starts again in the same dir and port (restart from its RDB/AOF). */
void rs_restart(struct rs_server *s, const char *module_args, const char *const *extra);
/* SHUTDOWN NOSAVE and wait; keeps the dir (for a restart). */
void rs_shutdown(struct rs_server *s);
/* Shutdown (if running) and remove the temp dir. */
void rs_stop(struct rs_server *s);
/* Criterion .fini: kills servers still running and removes their dirs. */
void rs_fini(void);

#endif
