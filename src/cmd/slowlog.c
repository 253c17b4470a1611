/* slowlog.c - SLOWLOG's record of slow commands (the SLOWLOG and LATENCY commands that read it
 * are in cmd_slowlog.c; this file knows nothing of the command layer).
 *
 * The record is a ring of the newest slowlog-max-len entries behind one mutex. Every command
 * passes through slowlog_maybe_add, so the common case - not slow enough - is one relaxed load
 * and one comparison, with no lock; the lock is taken only to add an entry, and by SLOWLOG
 * itself. An entry is built (arguments copied and cut) before the lock is taken, so a slow
 * command's entry never holds up the others for long.
 *
 * Entries look as Redis 7's do: [id, unix time s, duration us, [args...], "addr", "name"].
 * Arguments are cut as Redis cuts them (32 at most, the last of which then says how many more
 * there were; 128 bytes each, then how many more bytes), and secrets are replaced with
 * "(redacted)" as Redis does for AUTH, HELLO AUTH and CONFIG SET requirepass. */
#include "slowlog.h"
#include "rlimitd/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/reply.h"
#include "rlimitd/util.h"

#define MAX_ARGS 32
#define MAX_ARG_BYTES 128

struct sl_entry {
    uint64_t id;
    int64_t time_s;
    int64_t dur_us;
    int argc;
    char **argv; /* into the same allocation */
    size_t *lens;
    char *name; /* client name, "" if none */
    size_t name_len;
    char *addr; /* client "ip:port" */
};

struct slowlog {
    pthread_mutex_t lock;
    struct sl_entry **ring; /* oldest at first, n entries, cap slots */
    size_t first, n, cap;
    uint64_t next_id;
};

struct slowlog *slowlog_create(void)
{
    struct slowlog *sl = xcalloc(1, sizeof(*sl));
    pthread_mutex_init(&sl->lock, NULL);
    return sl;
}

/* Caller holds the lock. */
static void drop_all(struct slowlog *sl)
{
    for (size_t i = 0; i < sl->n; i++)
        free(sl->ring[(sl->first + i) % sl->cap]);
    sl->first = 0;
    sl->n = 0;
}

void slowlog_destroy(struct slowlog **slp)
{
    struct slowlog *sl = *slp;
    if (sl == NULL)
        return;
    drop_all(sl);
    free(sl->ring);
    pthread_mutex_destroy(&sl->lock);
    free(sl);
    *slp = NULL;
}

size_t slowlog_len(struct slowlog *sl)
{
    pthread_mutex_lock(&sl->lock);
    size_t n = sl->n;
    pthread_mutex_unlock(&sl->lock);
    return n;
}

void slowlog_reset(struct slowlog *sl)
{
    pthread_mutex_lock(&sl->lock);
    drop_all(sl);
    pthread_mutex_unlock(&sl->lock);
}

/* Which arguments hold secrets: 1 for argument i if it must be shown as "(redacted)". */
static int secret(int argc, char **argv, const size_t *lens, int i)
{
    if (util_eq_nocase(argv[0], lens[0], "auth"))
        return i >= 1;
    if (util_eq_nocase(argv[0], lens[0], "hello")) {
        /* HELLO [protover [AUTH user pass] [SETNAME name]]: the two words after AUTH. */
        for (int j = 2; j + 2 < argc; j++)
            if (util_eq_nocase(argv[j], lens[j], "auth") && (i == j + 1 || i == j + 2))
                return 1;
        return 0;
    }
    if (util_eq_nocase(argv[0], lens[0], "config") && argc >= 4 &&
        util_eq_nocase(argv[1], lens[1], "set")) {
        /* CONFIG SET name value [name value ...]: the value after requirepass. */
        for (int j = 2; j + 1 < argc; j += 2)
            if (util_eq_nocase(argv[j], lens[j], "requirepass") && i == j + 1)
                return 1;
    }
    return 0;
}

/* Argument i as the entry shows it, written to buf (at least 200 bytes) when it differs from
 * the original; returns its length and sets *p to its bytes. */
static size_t shown_arg(int argc, char **argv, const size_t *lens, int kept, int i, char *buf,
                        const char **p)
{
    if (kept != argc && i == kept - 1) {
        *p = buf;
        return (size_t)snprintf(buf, 200, "... (%d more arguments)", argc - kept + 1);
    }
    if (secret(argc, argv, lens, i)) {
        *p = "(redacted)";
        return 10;
    }
    if (lens[i] > MAX_ARG_BYTES) {
        memcpy(buf, argv[i], MAX_ARG_BYTES);
        int n = snprintf(buf + MAX_ARG_BYTES, 200 - MAX_ARG_BYTES, "... (%zu more bytes)",
                         lens[i] - MAX_ARG_BYTES);
        *p = buf;
        return MAX_ARG_BYTES + (size_t)n;
    }
    *p = argv[i];
    return lens[i];
}

/* Builds an entry in one allocation: the struct, argv pointers, lengths, then the bytes. */
static struct sl_entry *make_entry(int64_t now, int64_t dur_us, int argc, char **argv,
                                   const size_t *lens, const char *name, const char *addr)
{
    int kept = argc > MAX_ARGS ? MAX_ARGS : argc;
    char buf[200];
    const char *p;
    size_t bytes = 0;
    for (int i = 0; i < kept; i++)
        bytes += shown_arg(argc, argv, lens, kept, i, buf, &p) + 1;
    if (name == NULL)
        name = "";
    size_t name_len = strlen(name);
    if (addr == NULL)
        addr = "";
    size_t addr_len = strlen(addr);
    size_t head =
        sizeof(struct sl_entry) + sizeof(char *) * (size_t)kept + sizeof(size_t) * (size_t)kept;
    struct sl_entry *e = xmalloc(head + bytes + name_len + 1 + addr_len + 1);
    e->time_s = now / 1000000000;
    e->dur_us = dur_us;
    e->argc = kept;
    e->argv = (char **)(e + 1);
    e->lens = (size_t *)(e->argv + kept);
    char *d = (char *)(e->lens + kept);
    for (int i = 0; i < kept; i++) {
        size_t n = shown_arg(argc, argv, lens, kept, i, buf, &p);
        memcpy(d, p, n);
        d[n] = '\0';
        e->argv[i] = d;
        e->lens[i] = n;
        d += n + 1;
    }
    memcpy(d, name, name_len + 1);
    e->name = d;
    e->name_len = name_len;
    d += name_len + 1;
    memcpy(d, addr, addr_len + 1);
    e->addr = d;
    return e;
}

void slowlog_maybe_add(struct slowlog *sl, const struct conf *conf, int64_t now, int64_t dur_us,
                       int argc, char **argv, const size_t *lens, const char *name,
                       const char *addr)
{
    /* CONFIG SET may change these at any time; a relaxed load sees the old or the new value. */
    int64_t slower_than = __atomic_load_n(&conf->slowlog_log_slower_than, __ATOMIC_RELAXED);
    if (slower_than < 0 || dur_us < slower_than || argc <= 0)
        return;
    /* EXEC's queued commands are recorded one by one; EXEC itself would count them twice
     * (Redis marks it skip_slowlog). */
    if (util_eq_nocase(argv[0], lens[0], "exec"))
        return;
    int64_t max_len = __atomic_load_n(&conf->slowlog_max_len, __ATOMIC_RELAXED);
    struct sl_entry *e = make_entry(now, dur_us, argc, argv, lens, name, addr);

    pthread_mutex_lock(&sl->lock);
    e->id = sl->next_id++;
    /* Make room: the oldest go first; with slowlog-max-len 0 nothing is kept, as in Redis
     * (the id is used up all the same). */
    while (sl->n > 0 && (int64_t)sl->n >= max_len) {
        free(sl->ring[sl->first]);
        sl->first = (sl->first + 1) % sl->cap;
        sl->n--;
    }
    if (max_len <= 0) {
        pthread_mutex_unlock(&sl->lock);
        free(e);
        return;
    }
    if (sl->n == sl->cap) {
        size_t cap = sl->cap ? sl->cap * 2 : 16;
        struct sl_entry **ring = xmalloc(sizeof(*ring) * cap);
        for (size_t i = 0; i < sl->n; i++)
            ring[i] = sl->ring[(sl->first + i) % sl->cap];
        free(sl->ring);
        sl->ring = ring;
        sl->cap = cap;
        sl->first = 0;
    }
    sl->ring[(sl->first + sl->n) % sl->cap] = e;
    sl->n++;
    pthread_mutex_unlock(&sl->lock);
}

/* SLOWLOG GET's reply. */
void slowlog_reply(struct slowlog *sl, struct rbuf *out, int64_t count)
{
    pthread_mutex_lock(&sl->lock);
    size_t n = count < 0 || (uint64_t)count > sl->n ? sl->n : (size_t)count;
    reply_array(out, (int64_t)n);
    /* Newest first. */
    for (size_t k = 0; k < n; k++) {
        const struct sl_entry *e = sl->ring[(sl->first + sl->n - 1 - k) % sl->cap];
        reply_array(out, 6);
        reply_int(out, (int64_t)e->id);
        reply_int(out, e->time_s);
        reply_int(out, e->dur_us);
        reply_array(out, e->argc);
        for (int i = 0; i < e->argc; i++)
            reply_bulk(out, e->argv[i], e->lens[i]);
        reply_bulk_cstr(out, e->addr);
        reply_bulk(out, e->name, e->name_len);
    }
    pthread_mutex_unlock(&sl->lock);
}
