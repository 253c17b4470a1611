/* cmd_run.c - running one command: its keys found and hashed (a thread's scratch, so a warm
 * command allocates nothing), its shards locked in ascending order (cmd_shard_lock.c), its
 * handler run, its call counted for INFO and offered to the slow log. The dispatcher, EXEC and
 * redis.call all run commands here. */
#include "cmd_run.h"
#include "rlimitd/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/isallowed.h"
#include "rlimitd/util.h"
#include "rlimitd/waiters.h"
#include "cmd_shard_lock.h"
#include "cmd_table.h"
#include "slowlog.h"

/* Scratch kept across commands so warm commands hash keys without malloc. One per thread, not
 * per session: a command's keys are collected, used and dropped before the next command starts
 * on that thread, and an idle connection should not pay for them (DESIGN.md "Connections"). */
struct scratch {
    struct ks_key *keys;
    int cap;
    char *derived; /* ISALLOWED's derived key */
    size_t dcap;
};

static _Thread_local struct scratch tl_scratch;

void cmd_run_thread_exit(void)
{
    free(tl_scratch.keys);
    free(tl_scratch.derived);
    memset(&tl_scratch, 0, sizeof(tl_scratch));
}

/* ---- a command's keys ---- */

/* Where a command's keys are in argv (not for CMD_KEYDERIVED): returns how many, from *first,
 * *step apart. */
int key_span(const struct cmd_def *d, int argc, char **argv, const size_t *lens,
             int *first, int *step)
{
    if (d->flags & CMD_NUMKEYS) {
        /* An invalid count gives no keys; the handler replies the error. */
        int at = CMD_NUMKEYS_ARG(d);
        int64_t nk;
        *first = at + 1;
        *step = 1;
        if (argc > at && util_parse_i64(argv[at], lens[at], &nk) == 0 && nk >= 0 &&
            nk <= argc - at - 1)
            return (int)nk;
        return 0;
    }
    *first = d->first_key;
    *step = d->step;
    if (d->first_key > 0) {
        int last = d->last_key < 0 ? argc + d->last_key : d->last_key;
        if (last >= argc)
            last = argc - 1;
        return last >= d->first_key ? (last - d->first_key) / d->step + 1 : 0;
    }
    return 0;
}

struct ks_key *scratch_keys(int n)
{
    struct scratch *sc = &tl_scratch;
    if (n > sc->cap) {
        free(sc->keys);
        sc->cap = n < 8 ? 8 : n;
        sc->keys = xmalloc(sizeof(struct ks_key) * (size_t)sc->cap);
    }
    return sc->keys;
}

/* Fills *keys with the command's keys. Returns the count. */
int collect_keys(const struct cmd_def *d, struct session *s, int argc, char **argv,
                 const size_t *lens, struct keyspace *ks, struct ks_key **keys)
{
    (void)s;
    if (d->flags & CMD_KEYDERIVED) {
        struct scratch *sc = &tl_scratch;
        size_t need = isallowed_key_len(lens[1], lens[2]);
        if (sc->dcap < need) {
            free(sc->derived);
            sc->dcap = need < 256 ? 256 : need;
            sc->derived = xmalloc(sc->dcap);
        }
        *keys = scratch_keys(1);
        size_t len = isallowed_key(sc->derived, argv[1], lens[1], argv[2], lens[2]);
        ks_key_init(ks, &(*keys)[0], sc->derived, len);
        return 1;
    }
    int first, step;
    int n = key_span(d, argc, argv, lens, &first, &step);
    *keys = scratch_keys(n);
    for (int i = 0; i < n; i++) {
        int a = first + i * step;
        ks_key_init(ks, &(*keys)[i], argv[a], lens[a]);
    }
    return n;
}

/* ---- running ---- */

/* Set by run_error_counted while a command runs: its error reply was counted already. */
static __thread int tl_error_counted;

void run_error_counted(void)
{
    tl_error_counted = 1;
}

void count_error(struct session *s, const struct rbuf *out, size_t start)
{
    if (s->stats == NULL || out->len <= start || out->p[start] != '-')
        return;
    const char *code;
    size_t len;
    enum stats_err e = stats_err_code(out->p + start, out->len - start, &code, &len);
    stats_add(&s->stats->errors[e], 1);
    if (e == ERRSTAT_OTHER)
        errorstats_count_other(code, len);
}

/* run() with the command's keys already collected (keys != NULL), as redis.call and EXEC have
 * them. ticks, if not NULL, holds a tick reading taken just before: the duration starts there,
 * and the reading that ends it is left there for the next command. */
void run_keys(struct cmd_env *env, struct session *s, int idx, int argc, char **argv,
              const size_t *lens, struct rbuf *out, int64_t now, int all_locked,
              int from_script, struct ks_key *keys, int nkeys, uint64_t *ticks)
{
    const struct cmd_def *d = &cmd_defs[idx];
    struct cmd_ctx x = {env, s, argc, argv, lens, keys, nkeys, now, out, all_locked};
    size_t start = out->len;
    uint64_t t0 = ticks != NULL ? *ticks : clock_ticks();
    tl_error_counted = 0;
    if (keys == NULL)
        x.nkeys = collect_keys(d, s, argc, argv, lens, env->ks, &x.keys);
    /* Atomic (CLIENT LIST on another thread reads it); before running: CLIENT LIST shows
     * itself as the current command. */
    __atomic_store_n(&s->last_cmd, idx, __ATOMIC_RELAXED);

    if (!all_locked && (d->flags & CMD_ALLSHARDS) && any_shard_busy(env)) {
        reject(s, idx, out, BUSY_TEXT);
        return;
    }
    if (all_locked || x.nkeys == 0) {
        d->fn(&x);
    } else if (x.nkeys == 1) {
        unsigned shard = ks_shard(env->ks, &x.keys[0]);
        if (lock_or_busy(env, shard) != 0) {
            reject(s, idx, out, BUSY_TEXT);
            return;
        }
        d->fn(&x);
        ks_unlock(env->ks, shard);
    } else {
        struct shard_set set = {{0}};
        for (int i = 0; i < x.nkeys; i++)
            shard_set_add(&set, ks_shard(env->ks, &x.keys[i]));
        if (lock_set_or_busy(env, &set) != 0) {
            reject(s, idx, out, BUSY_TEXT);
            return;
        }
        d->fn(&x);
        lock_set(env->ks, &set, 0);
    }

    /* Duration from the tick counter: the wall clock is read once per command (DESIGN.md). */
    uint64_t t1 = clock_ticks();
    if (ticks != NULL)
        *ticks = t1;
    int64_t dur_us = clock_ticks_to_us(t1 - t0);
    /* A request parked by WAIT answered nothing: it counts (and may be logged) once, at the
     * run that answers it, as Redis counts a blocked command. */
    if (s != NULL && s->waiter != NULL && s->waiter->parked)
        return;
    if (s->stats != NULL) {
        struct cmd_stats *cs = &s->stats->cmd[idx];
        stats_add(&cs->calls, 1);
        stats_add(&cs->usec, (uint64_t)dur_us);
        if (out->len > start && out->p[start] == '-') {
            stats_add(&cs->failed_calls, 1);
            if (!tl_error_counted)
                count_error(s, out, start);
        } else if (d->flags & CMD_WRITE) {
            stats_add(&s->stats->dirty, 1);
        }
    }
    if (env->slowlog != NULL && !from_script)
        slowlog_maybe_add(env->slowlog, env->conf, now, dur_us, argc, argv, lens,
                          s != NULL ? s->name : NULL, s != NULL ? s->peer : NULL);
}

void reject(struct session *s, int idx, struct rbuf *out, const char *msg)
{
    size_t start = out->len;
    reply_error(out, msg);
    if (s->stats != NULL) {
        if (idx >= 0)
            stats_add(&s->stats->cmd[idx].rejected_calls, 1);
        count_error(s, out, start);
    }
    /* Redis: an error while queueing makes EXEC fail. */
    if (s->flags & SESSION_IN_MULTI)
        __atomic_fetch_or(&s->flags, SESSION_MULTI_DIRTY, __ATOMIC_RELAXED);
}
