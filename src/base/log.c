/* log.c - leveled log lines, one write(2) each, from any thread or a forked child.
 *
 * Line format, as Redis writes it so that existing log tooling reads it:
 *     PID:R DD Mon YYYY HH:MM:SS.mmm L message
 * R is the role: 'M' for the daemon, 'C' for a forked child (BGSAVE). L is the level mark:
 * '.' debug, '-' verbose, '*' notice, '#' warning.
 *
 * Writers take no lock: a line is formatted on the stack and handed to the kernel in one
 * write(2). With O_APPEND every such write lands whole at the end of the file, and on a pipe a
 * write of at most PIPE_BUF bytes is atomic, hence the line limit below. The descriptor number
 * writers use never changes once a file has been opened: log_open points that same number at
 * the new file with dup3, which the kernel does atomically, so a writer racing a SIGHUP reopen
 * writes whole lines to the old file or the new one, never to a closed or reused descriptor. */
#include "rlimitd/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* One line, newline included; a longer message is cut and ends in "...". */
#define LOG_LINE_MAX PIPE_BUF

static const char *const level_names[] = {"debug", "verbose", "notice", "warning"};
static const char level_marks[] = {'.', '-', '*', '#'};
static const char *const month_names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static _Atomic int log_fd = STDERR_FILENO;
static _Atomic int min_level = LOG_NOTICE;
/* The process that first logged or opened the log; any other pid is a forked child. */
static _Atomic pid_t main_pid;
/* Seconds east of UTC, refreshed by the main process; a child formats times with it. */
static _Atomic long utc_offset;

/* Serialises log_open / log_close; writers never take it. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* The descriptor we opened for the first file and keep retargeting; -1 while on stderr. */
static int owned_fd = -1;

/* Civil date from days since 1970-01-01 (proleptic Gregorian), computed by hand because
 * localtime_r and gmtime_r take glibc's time zone lock, which a child forked while another
 * thread held it would wait on forever. Years are counted from March so that the leap day is
 * the last day of the year. */
static void civil_from_days(int64_t days, int *year, int *month, int *mday)
{
    int64_t z = days + 719468; /* days since 0000-03-01 */
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                                    /* March = 0 */

    *mday = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = (int)(yoe + era * 400 + (*month <= 2));
}

static void note_main_pid(void)
{
    pid_t none = 0;

    atomic_compare_exchange_strong(&main_pid, &none, getpid());
}

/* Records the offset a forked child will format times with (see fmt_time). */
static void note_utc_offset(void)
{
    time_t now = time(NULL);
    struct tm tm;

    tzset();
    if (localtime_r(&now, &tm) != NULL)
        atomic_store_explicit(&utc_offset, tm.tm_gmtoff, memory_order_relaxed);
}

/* Writes "DD Mon YYYY HH:MM:SS" for t into buf. */
static int fmt_time(char *buf, size_t len, time_t t, int in_child)
{
    int y, mon, d, hh, mm, ss;

    if (!in_child) {
        struct tm tm;
        if (localtime_r(&t, &tm) != NULL) {
            atomic_store_explicit(&utc_offset, tm.tm_gmtoff, memory_order_relaxed);
            return snprintf(buf, len, "%02d %s %d %02d:%02d:%02d", tm.tm_mday,
                            month_names[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                            tm.tm_sec);
        }
    }
    /* The child's clock runs on the offset last seen by the parent; a DST change during one
     * BGSAVE only shifts the child's few lines. */
    int64_t local = (int64_t)t + atomic_load_explicit(&utc_offset, memory_order_relaxed);
    int64_t days = local >= 0 ? local / 86400 : (local - 86399) / 86400;
    int64_t secs = local - days * 86400;

    civil_from_days(days, &y, &mon, &d);
    hh = (int)(secs / 3600);
    mm = (int)(secs / 60 % 60);
    ss = (int)(secs % 60);
    return snprintf(buf, len, "%02d %s %d %02d:%02d:%02d", d, month_names[mon - 1], y, hh, mm, ss);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    struct timespec ts;
    va_list ap;
    size_t len, room;
    int n, saved_errno = errno;
    pid_t pid;
    int in_child;

    if ((unsigned)lvl > LOG_WARNING ||
        (int)lvl < atomic_load_explicit(&min_level, memory_order_relaxed))
        return;
    note_main_pid();
    pid = getpid();
    in_child = pid != atomic_load(&main_pid);
    clock_gettime(CLOCK_REALTIME, &ts);

    n = snprintf(line, sizeof line, "%d:%c ", (int)pid, in_child ? 'C' : 'M');
    n += fmt_time(line + n, sizeof line - (size_t)n, ts.tv_sec, in_child);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03d %c ", (int)(ts.tv_nsec / 1000000),
                  level_marks[lvl]);
    len = (size_t)n;

    room = sizeof line - len; /* vsnprintf's NUL slot becomes the newline */
    va_start(ap, fmt);
    errno = saved_errno; /* so that a %m in fmt reports the caller's errno */
    n = vsnprintf(line + len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    } else if ((size_t)n >= room) {
        n = (int)room - 1;
        memcpy(line + len + n - 3, "...", 3);
    }
    len += (size_t)n;
    line[len++] = '\n';

    int fd = atomic_load(&log_fd);
    const char *p = line;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* nowhere left to report it */
        p += w;
        len -= (size_t)w;
    }
    errno = saved_errno;
}

int log_open(const char *path)
{
    int rc = 0, saved = 0;

    note_main_pid();
    note_utc_offset();
    pthread_mutex_lock(&open_lock);
    if (path == NULL || *path == '\0') {
        /* Back to stderr: keep the number writers hold, make it refer to stderr. */
        if (owned_fd >= 0 && dup3(STDERR_FILENO, owned_fd, O_CLOEXEC) < 0) {
            saved = errno;
            rc = -1;
        }
    } else {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            saved = errno;
            rc = -1;
        } else if (owned_fd < 0) {
            owned_fd = fd;
            atomic_store(&log_fd, fd);
        } else {
            if (dup3(fd, owned_fd, O_CLOEXEC) < 0) {
                saved = errno;
                rc = -1;
            }
            close(fd);
        }
    }
    pthread_mutex_unlock(&open_lock);
    if (rc != 0)
        errno = saved;
    return rc;
}

void log_close(void)
{
    /* Only safe once no other thread logs: a writer that loaded owned_fd just before the close
     * could otherwise write into whatever reuses the number. */
    pthread_mutex_lock(&open_lock);
    if (owned_fd >= 0) {
        atomic_store(&log_fd, STDERR_FILENO);
        close(owned_fd);
        owned_fd = -1;
    }
    pthread_mutex_unlock(&open_lock);
}

void log_set_level(enum log_level lvl)
{
    atomic_store_explicit(&min_level, (int)lvl, memory_order_relaxed);
}

int log_level_parse(const char *s)
{
    for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    return -1;
}
