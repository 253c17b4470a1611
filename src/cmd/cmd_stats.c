/* cmd_stats.c - the I/O threads' counters (stats.h) as INFO and /metrics show them: summed over
 * the threads, minus their sums at the last CONFIG RESETSTAT; and INFO errorstats. */
#include "cmd_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/log.h"

uint64_t stats_sum(const struct cmd_env *env, size_t offset)
{
    uint64_t n = 0;
    for (int i = 0; env->stats != NULL && i < env->nstats; i++) {
        if (env->stats[i] != NULL)
            n += stats_get((_Atomic uint64_t *)((char *)env->stats[i] + offset));
    }
    return n;
}

/* ---- CONFIG RESETSTAT ----
 *
 * The counters are written by their own thread only, without locked instructions, so another
 * thread cannot zero them (a write racing the owner's load + store would be lost, or undo the
 * reset). RESETSTAT instead records every counter's current sum in env->stats_base, and the
 * figures INFO and /metrics show are the sums minus that base. Counters only grow, so the
 * difference is never negative; `dirty` (snapshots) and the ops rate read the raw sums. */

#define STATS_WORDS (sizeof(struct stats) / sizeof(_Atomic uint64_t))
_Static_assert(sizeof(struct stats) % sizeof(_Atomic uint64_t) == 0, "stats holds only counters");

static pthread_mutex_t reset_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t stats_total(const struct cmd_env *env, size_t offset)
{
    uint64_t n = stats_sum(env, offset);
    if (env->stats_base == NULL)
        return n;
    uint64_t base = stats_get((_Atomic uint64_t *)((char *)env->stats_base + offset));
    return n >= base ? n - base : 0;
}

void stats_reset(struct cmd_env *env)
{
    if (env->stats_base == NULL)
        return;
    pthread_mutex_lock(&reset_lock);
    _Atomic uint64_t *base = (_Atomic uint64_t *)env->stats_base;
    for (size_t w = 0; w < STATS_WORDS; w++)
        atomic_store_explicit(&base[w], stats_sum(env, w * sizeof(_Atomic uint64_t)),
                              memory_order_relaxed);
    pthread_mutex_unlock(&reset_lock);
    errorstats_reset();
    limiter_top_clear(env);
}

/* ---- INFO errorstats ----
 *
 * One errorstat_<CODE> line per distinct error code, as Redis 7.0 counts them (afterErrorReply;
 * the code's rule is stats_err_code's).
 * The codes rlimitd answers itself (enum stats_err) are counted per I/O thread without a lock,
 * as every other counter (stats.h); only a code outside them, which only a script can produce
 * (redis.error_reply('MY_CODE ...'), an error table's err field), takes the lock of the table
 * below, once per such error. That table has room for ERRORSTATS_MAX names, the cap Redis put on
 * its own table in 7.4 (7.0.15 has none: every distinct code a script makes up would grow it
 * without bound): the error that would make one name more than that empties it and stops the
 * counting of codes, until CONFIG RESETSTAT; meanwhile INFO shows errorstat_ERRORSTATS_DISABLED
 * only, and total_error_replies still counts every error. The per-thread codes are counted as
 * names when the cap is checked but never trip it themselves (Redis trips it on whichever name
 * comes last; rlimitd checks on the slow path only).
 *
 * One table per process: the daemon runs one server (cmd_env), errorstats_attach names it. */

#define ERRORSTATS_MAX 128

struct code_count {
    char name[STATS_ERR_CODE_MAX];
    unsigned char len;
    uint64_t count;
};

static struct {
    pthread_mutex_t lock;
    const struct cmd_env *env; /* whose per-thread counters hold the other codes */
    int n;
    int disabled;
    struct code_count codes[ERRORSTATS_MAX];
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define ERR_COUNT(env, e)                                                                          \
    stats_total((env), offsetof(struct stats, errors) + (size_t)(e) * sizeof(_Atomic uint64_t))

void errorstats_attach(const struct cmd_env *env)
{
    pthread_mutex_lock(&table.lock);
    table.env = env;
    table.n = 0;
    table.disabled = 0;
    pthread_mutex_unlock(&table.lock);
}

void errorstats_reset(void)
{
    pthread_mutex_lock(&table.lock);
    table.n = 0;
    table.disabled = 0;
    pthread_mutex_unlock(&table.lock);
}

/* Caller holds the lock. How many names INFO would show now. */
static int names_now(void)
{
    int n = table.n;
    if (table.env != NULL)
        for (int e = 0; e < ERRSTAT_OTHER; e++)
            n += ERR_COUNT(table.env, e) > 0;
    return n;
}

void errorstats_count_other(const char *code, size_t len)
{
    if (len > STATS_ERR_CODE_MAX)
        len = STATS_ERR_CODE_MAX; /* stats_err_code never gives more */
    pthread_mutex_lock(&table.lock);
    if (!table.disabled) {
        int i = 0;
        while (i < table.n &&
               !(table.codes[i].len == len && memcmp(table.codes[i].name, code, len) == 0))
            i++;
        if (i < table.n) {
            table.codes[i].count++;
        } else if (names_now() >= ERRORSTATS_MAX || table.n == ERRORSTATS_MAX) {
            log_warning("Errorstats stopped adding new errors: %d distinct error codes, the "
                        "limit (a script making up codes with redis.error_reply?); INFO "
                        "errorstats shows ERRORSTATS_DISABLED until CONFIG RESETSTAT",
                        ERRORSTATS_MAX);
            table.n = 0;
            table.disabled = 1;
        } else {
            memcpy(table.codes[i].name, code, len);
            table.codes[i].len = (unsigned char)len;
            table.codes[i].count = 1;
            table.n++;
        }
    }
    pthread_mutex_unlock(&table.lock);
}

/* Redis's order: its table is a radix tree, walked in byte order, a prefix first. */
static int by_name(const void *a, const void *b)
{
    const struct code_count *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    if (c != 0)
        return c;
    return (int)x->len - (int)y->len;
}

static void line(struct rbuf *b, const char *name, size_t len, uint64_t count)
{
    char tail[40];
    rbuf_append(b, "errorstat_", 10);
    size_t at = b->len;
    rbuf_append(b, name, len);
    /* As Redis's getSafeInfoString: the bytes INFO's syntax uses become '_'. */
    for (size_t i = at; i < b->len; i++)
        if (b->p[i] == '#' || b->p[i] == ':' || b->p[i] == '\r' || b->p[i] == '\n')
            b->p[i] = '_';
    int n = snprintf(tail, sizeof(tail), ":count=%" PRIu64 "\r\n", count);
    rbuf_append(b, tail, (size_t)n);
}

void errorstats_info(const struct cmd_env *env, struct rbuf *b)
{
    struct code_count rows[ERRORSTATS_MAX + ERRSTAT_OTHER];
    int n = 0;
    pthread_mutex_lock(&table.lock);
    if (table.disabled) {
        pthread_mutex_unlock(&table.lock);
        line(b, "ERRORSTATS_DISABLED", 19, 1);
        return;
    }
    memcpy(rows, table.codes, sizeof(rows[0]) * (size_t)table.n);
    n = table.n;
    pthread_mutex_unlock(&table.lock);
    for (int e = 0; e < ERRSTAT_OTHER; e++) {
        uint64_t count = ERR_COUNT(env, e);
        if (count == 0)
            continue;
        const char *name = stats_err_name((enum stats_err)e);
        rows[n].len = (unsigned char)strlen(name);
        memcpy(rows[n].name, name, rows[n].len);
        rows[n].count = count;
        n++;
    }
    qsort(rows, (size_t)n, sizeof(rows[0]), by_name);
    for (int i = 0; i < n; i++)
        line(b, rows[i].name, rows[i].len, rows[i].count);
}
