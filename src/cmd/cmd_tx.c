/* cmd_tx.c - transactions: MULTI queues commands in an arena of the session's, EXEC locks the
 * shards of every queued command (and of the watched keys) in ascending order before the first
 * runs, checks WATCH's versions, then runs them all; DISCARD, WATCH, UNWATCH (DESIGN.md
 * "Keyspace: shards and locks"). */
#include "cmd_tx.h"
#include "rlimitd/alloc.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/util.h"
#include "cmd_run.h"
#include "cmd_shard_lock.h"
#include "cmd_table.h"

/* A queued command: one block of the transaction's arena holds its argv pointers, lengths,
 * keys and argument bytes. The keys are hashed when the command is queued (EXEC uses them both
 * to choose the shards to lock and to run the command); keys == NULL for a command whose key is
 * derived (ISALLOWED), collected when it runs. */
struct queued {
    int cmd;
    int argc;
    char **argv;
    size_t *lens;
    struct ks_key *keys;
    int nkeys;
};

/* Arena chunks: blocks never move (argv and keys point into them), a full chunk is followed by
 * a new one. */
struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(max_align_t) char data[];
};

#define CHUNK_BYTES 2048

struct multi {
    struct queued *q;
    int n, cap;
    struct chunk *chunks; /* the newest first */
    struct ks_key last;   /* the last key hashed (points into a block), len SIZE_MAX: none */
};

static _Thread_local struct multi *tl_spare_multi;

/* A transaction's state: the thread's spare one (emptied by the last transaction to end on this
 * thread) or a new one. */
static struct multi *multi_new(void)
{
    struct multi *m = tl_spare_multi;
    if (m != NULL)
        tl_spare_multi = NULL;
    else
        m = xcalloc(1, sizeof(*m));
    m->last.len = SIZE_MAX;
    return m;
}

static void multi_free(struct multi *m)
{
    struct chunk *c = m->chunks;
    while (c != NULL) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(m->q);
    free(m);
}

/* Keeps one emptied transaction (its queue, if of at most 16, and its first chunk) per thread,
 * so a warm MULTI ... EXEC allocates nothing; a thread holds at most about 3 KiB for it. */
static void multi_release(struct multi *m)
{
    if (tl_spare_multi != NULL || m->cap > 16) {
        multi_free(m);
        return;
    }
    struct chunk *keep = NULL, *next;
    for (struct chunk *c = m->chunks; c != NULL; c = next) {
        next = c->next;
        if (next == NULL && c->cap == CHUNK_BYTES)
            keep = c;
        else
            free(c);
    }
    if (keep != NULL)
        keep->used = 0;
    m->chunks = keep;
    m->n = 0;
    tl_spare_multi = m;
}

static void *multi_alloc(struct multi *m, size_t n)
{
    n = (n + _Alignof(max_align_t) - 1) & ~(size_t)(_Alignof(max_align_t) - 1);
    struct chunk *c = m->chunks;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        c = xmalloc(sizeof(*c) + cap);
        c->next = m->chunks;
        c->used = 0;
        c->cap = cap;
        m->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

void multi_discard(struct session *s)
{
    struct multi *m = s->multi;
    if (m != NULL) {
        multi_release(m);
        s->multi = NULL;
    }
    __atomic_fetch_and(&s->flags, ~(unsigned)(SESSION_IN_MULTI | SESSION_MULTI_DIRTY | SESSION_MULTI_DENYOOM),
                       __ATOMIC_RELAXED);
    __atomic_store_n(&s->multi_count, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->multi_mem, 0, __ATOMIC_RELAXED);
}

void cmd_tx_thread_exit(void)
{
    if (tl_spare_multi != NULL) {
        multi_free(tl_spare_multi);
        tl_spare_multi = NULL;
    }
}

/* ---- WATCH ----
 * The session keeps a handle per watched key and the key's version at WATCH; the keyspace bumps
 * the version on every write to the key (keyspace.h "WATCH"). EXEC locks the watched keys'
 * shards with its own and aborts if any changed. */
struct watched {
    struct keyspace *ks;
    int n, cap;
    struct watched_key {
        struct ks_watch *w;
        uint64_t version;
    } *v;
};

void watch_release_all(struct session *s)
{
    struct watched *wd = s->watched;
    if (wd == NULL)
        return;
    for (int i = 0; i < wd->n; i++) {
        unsigned shard = ks_watch_shard(wd->v[i].w);
        ks_lock(wd->ks, shard);
        ks_watch_release(wd->ks, wd->v[i].w);
        ks_unlock(wd->ks, shard);
    }
    free(wd->v);
    free(wd);
    s->watched = NULL;
}

static void cmd_watch(struct cmd_ctx *x)
{
    struct session *s = x->s;
    if (s->flags & SESSION_IN_MULTI) {
        reply_error(x->out, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    if (s->watched == NULL) {
        s->watched = xcalloc(1, sizeof(struct watched));
        s->watched->ks = x->env->ks;
    }
    struct watched *wd = s->watched;
    for (int k = 0; k < x->nkeys; k++) {
        uint64_t version;
        struct ks_watch *w = ks_watch_key(x->env->ks, &x->keys[k], x->now, &version);
        int already = 0;
        for (int i = 0; i < wd->n && !already; i++)
            already = wd->v[i].w == w;
        if (already) { /* watching a key twice keeps the first version, as Redis */
            ks_watch_release(x->env->ks, w);
            continue;
        }
        if (wd->n == wd->cap) {
            wd->cap = wd->cap ? wd->cap * 2 : 4;
            wd->v = xrealloc(wd->v, sizeof(*wd->v) * (size_t)wd->cap);
        }
        wd->v[wd->n].w = w;
        wd->v[wd->n].version = version;
        wd->n++;
    }
    reply_ok(x->out);
}

static void cmd_unwatch(struct cmd_ctx *x)
{
    /* Queued in a transaction it runs inside EXEC, which holds shard locks and drops the
     * watches itself when it ends. */
    if (!x->all_locked)
        watch_release_all(x->s);
    reply_ok(x->out);
}

/* ---- MULTI, EXEC, DISCARD ---- */

/* Copies the command into the transaction's arena and hashes its keys there; a key equal to the
 * last one hashed in this transaction (the usual MULTI of commands on one key) takes its hash. */
void multi_queue(struct cmd_env *env, struct session *s, int idx, int argc, char **argv,
                 const size_t *lens)
{
    const struct cmd_def *d = &cmd_defs[idx];
    struct multi *m = s->multi;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        struct queued *q = xrealloc(m->q, sizeof(*q) * (size_t)cap);
        m->q = q;
        m->cap = cap;
    }
    int first = 0, step = 1;
    int nkeys = d->flags & CMD_KEYDERIVED ? 0 : key_span(d, argc, argv, lens, &first, &step);
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens[i] + 1;
    /* One block: argv pointers, lengths, keys, then the argument bytes. */
    size_t head = sizeof(char *) * (size_t)argc + sizeof(size_t) * (size_t)argc;
    size_t keys_at = head;
    head += sizeof(struct ks_key) * (size_t)nkeys;
    char *block = multi_alloc(m, head + bytes);
    struct queued *e = &m->q[m->n++];
    __atomic_store_n(&s->multi_count, m->n, __ATOMIC_RELAXED);
    __atomic_store_n(&s->multi_mem, s->multi_mem + head + bytes, __ATOMIC_RELAXED);
    if (d->flags & CMD_DENYOOM)
        __atomic_fetch_or(&s->flags, SESSION_MULTI_DENYOOM, __ATOMIC_RELAXED);
    e->cmd = idx;
    e->argc = argc;
    e->argv = (char **)block;
    e->lens = (size_t *)(block + sizeof(char *) * (size_t)argc);
    char *p = block + head;
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        p[lens[i]] = '\0';
        e->argv[i] = p;
        e->lens[i] = lens[i];
        p += lens[i] + 1;
    }
    e->nkeys = nkeys;
    e->keys = d->flags & CMD_KEYDERIVED ? NULL : (struct ks_key *)(block + keys_at);
    for (int i = 0; i < nkeys; i++) {
        int a = first + i * step;
        struct ks_key *k = &e->keys[i];
        if (m->last.len == lens[a] && util_bytes_eq(m->last.p, argv[a], lens[a])) {
            *k = m->last;
            k->p = e->argv[a];
        } else {
            ks_key_init(env->ks, k, e->argv[a], lens[a]);
        }
        m->last = *k;
    }
}

static void cmd_multi(struct cmd_ctx *x)
{
    if (x->s->flags & SESSION_IN_MULTI) {
        reply_error(x->out, "ERR MULTI calls can not be nested");
        return;
    }
    x->s->multi = multi_new();
    __atomic_fetch_or(&x->s->flags, SESSION_IN_MULTI, __ATOMIC_RELAXED);
    __atomic_store_n(&x->s->multi_count, 0, __ATOMIC_RELAXED);
    reply_ok(x->out);
}

static void cmd_discard(struct cmd_ctx *x)
{
    if (!(x->s->flags & SESSION_IN_MULTI)) {
        reply_error(x->out, "ERR DISCARD without MULTI");
        return;
    }
    multi_discard(x->s);
    watch_release_all(x->s);
    reply_ok(x->out);
}

/* Whether a key the session watches changed since it was watched (its shards held). */
static int watched_changed(struct cmd_ctx *x)
{
    struct watched *wd = x->s->watched;
    for (int i = 0; wd != NULL && i < wd->n; i++)
        if (ks_watch_changed(x->env->ks, wd->v[i].w, wd->v[i].version, x->now))
            return 1;
    return 0;
}

/* Runs the queue under er's shards, the replies in one array. Returns 1 when a script asked
 * for the transaction to run again holding every shard (er->rerun), before any write. */
static int run_queue(struct cmd_ctx *x, struct multi *m, struct exec_run *er)
{
    reply_array(x->out, m->n);
    /* One tick reading between two commands ends the first's duration and starts the next's. */
    uint64_t ticks = clock_ticks();
    for (int i = 0; i < m->n; i++) {
        run_keys(x->env, x->s, m->q[i].cmd, m->q[i].argc, m->q[i].argv, m->q[i].lens, x->out,
                 x->now, 1, 0, m->q[i].keys, m->q[i].nkeys, &ticks);
        if (er->rerun)
            return 1;
        if (cmd_defs[m->q[i].cmd].flags & CMD_WRITE)
            er->wrote = 1;
    }
    return 0;
}

static void cmd_exec(struct cmd_ctx *x)
{
    struct session *s = x->s;
    if (!(s->flags & SESSION_IN_MULTI)) {
        reply_error(x->out, "ERR EXEC without MULTI");
        return;
    }
    if (s->flags & SESSION_MULTI_DIRTY) {
        multi_discard(s);
        watch_release_all(s);
        reply_error(x->out, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    /* Take every shard the transaction touches before its first command, so no other client's
     * command interleaves on those keys (COMMANDS.md). A whole-keyspace command takes them all. */
    struct multi *m = s->multi;
    struct keyspace *ks = x->env->ks;
    struct shard_set set = {{0}};
    for (int i = 0; i < m->n; i++) {
        const struct cmd_def *d = &cmd_defs[m->q[i].cmd];
        if (d->flags & CMD_ALLSHARDS) {
            for (unsigned sh = 0; sh < ks_nshards(ks); sh++)
                shard_set_add(&set, sh);
            break;
        }
        struct ks_key *keys = m->q[i].keys;
        int n = m->q[i].nkeys;
        if (keys == NULL)
            n = collect_keys(d, s, m->q[i].argc, m->q[i].argv, m->q[i].lens, ks, &keys);
        for (int k = 0; k < n; k++)
            shard_set_add(&set, ks_shard(ks, &keys[k]));
    }
    struct watched *wd = s->watched;
    for (int i = 0; wd != NULL && i < wd->n; i++)
        shard_set_add(&set, ks_watch_shard(wd->v[i].w));
    if (lock_set_or_busy(x->env, &set) != 0) {
        /* A script has held one of the shards past busy-reply-threshold: Redis's answer to an
         * EXEC while it is busy, and the transaction is gone. */
        multi_discard(s);
        watch_release_all(s);
        reply_error(x->out, "EXECABORT Transaction discarded because of: " BUSY_TEXT);
        return;
    }
    if (watched_changed(x)) {
        lock_set(ks, &set, 0);
        multi_discard(s);
        watch_release_all(s);
        reply_null_array(x->out);
        return;
    }
    /* Detach the queue first: a queued RESET or QUIT must not free it under us. */
    s->multi = NULL;
    __atomic_fetch_and(&s->flags, ~(unsigned)(SESSION_IN_MULTI | SESSION_MULTI_DIRTY | SESSION_MULTI_DENYOOM),
                       __ATOMIC_RELAXED);
    __atomic_store_n(&s->multi_count, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->multi_mem, 0, __ATOMIC_RELAXED);
    struct exec_run er = {.set = set};
    s->exec = &er;
    size_t out_start = x->out->len;
    while (run_queue(x, m, &er) != 0) {
        /* A script needed a shard out of lock order before anything was written: give every
         * shard back and take them all ascending, then run the queue again from the start.
         * The watched keys may have changed meanwhile. */
        x->out->len = out_start;
        lock_set(ks, &er.set, 0);
        memset(&er, 0, sizeof(er));
        for (unsigned sh = 0; sh < ks_nshards(ks); sh++)
            shard_set_add(&er.set, sh);
        if (lock_set_or_busy(x->env, &er.set) != 0) {
            reply_error(x->out, "EXECABORT Transaction discarded because of: " BUSY_TEXT);
            goto done;
        }
        if (watched_changed(x)) {
            lock_set(ks, &er.set, 0);
            reply_null_array(x->out);
            goto done;
        }
    }
    lock_set(ks, &er.set, 0);
done:
    s->exec = NULL;
    watch_release_all(s);
    multi_release(m);
}

/* ---- the transaction commands ---- */

const struct cmd_def cmd_tx_table[] = {
    {"multi", 1, CMD_NOQUEUE | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "fast transaction", cmd_multi,
     {.summary = "Starts a transaction", .since = "1.2.0", .group = "transactions",
      .complexity = "O(1)", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"exec", 1, CMD_NOQUEUE | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "slow transaction", cmd_exec,
     {.summary = "Runs the commands queued since MULTI", .since = "1.2.0", .group = "transactions",
      .complexity = "Depends on the queued commands", .extra = CMD_SHOW_SKIP_SLOWLOG}},
    {"discard", 1, CMD_NOQUEUE | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "fast transaction", cmd_discard,
     {.summary = "Discards the commands queued since MULTI", .since = "2.0.0",
      .group = "transactions", .complexity = "O(N) where N is the number of queued commands",
      .extra = CMD_SHOW_ALLOW_BUSY}},
    {"watch", -2, CMD_NOQUEUE | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 1, -1, 1,
     "fast transaction", cmd_watch,
     {.summary = "Makes the next EXEC fail if any of the keys is written before it",
      .since = "2.2.0", .group = "transactions", .complexity = "O(1) for every key.",
      .args = "*key:key", .keyflags = "RO", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"unwatch", 1, CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "fast transaction", cmd_unwatch,
     {.summary = "Forgets the keys WATCH recorded", .since = "2.2.0", .group = "transactions",
      .complexity = "O(1)", .extra = CMD_SHOW_ALLOW_BUSY}},
};
const int cmd_tx_count = (int)(sizeof(cmd_tx_table) / sizeof(cmd_tx_table[0]));
