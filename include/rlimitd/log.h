/* log.h - leveled logging to stderr or a file, one write(2) per line, thread safe.
 *
 * Lines look like Redis's: "PID:R DD Mon YYYY HH:MM:SS.mmm L message", R = 'M' (daemon) or 'C'
 * (forked child, e.g. BGSAVE), L = '.' debug, '-' verbose, '*' notice, '#' warning. A message
 * is cut to fit one PIPE_BUF-sized line and ends in "..." when cut. log_msg keeps errno, and is
 * safe in a forked child (no locks, no localtime). The default level is notice. */
#ifndef RLIMITD_LOG_H
#define RLIMITD_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_VERBOSE, LOG_NOTICE, LOG_WARNING };

/* path NULL or "" logs to stderr. Returns 0, or -1 with errno if the file cannot be opened
 * (logging then stays where it was). Reopening is how SIGHUP rotates the file: the switch is
 * atomic for threads logging meanwhile. Files are opened O_APPEND, mode 0644 before umask. */
int log_open(const char *path);
void log_set_level(enum log_level lvl);
/* Parses "debug", "verbose", "notice", "warning"; -1 if unknown. */
int log_level_parse(const char *s);
/* Back to stderr and closes the file. Call only when no other thread can be logging. */
void log_close(void);

void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_verbose(...) log_msg(LOG_VERBOSE, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)

#endif
