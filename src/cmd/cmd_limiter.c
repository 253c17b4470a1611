/* cmd_limiter.c - what the limiters decided: per-thread decision counters (INFO limiter,
 * /metrics) and the most-limited keys (LIMITER TOP [COUNT n], LIMITER HELP).
 *
 * Counting an allowed call is two single-writer increments on the calling thread's struct
 * stats: no lock, no shared cache line. A limited call also goes into its I/O thread's own
 * space-saving sketch (topk.h), under that sketch's spin lock: only the owner thread and
 * readers take it, so on the hot path it is free and its cache line stays on the owner's CPU.
 * A spin lock, as taking a free one is one atomic exchange and releasing it one store (a
 * mutex costs several times that); the owner can only wait while a reader merges that one
 * sketch (O(k), rare), and a waiter yields its CPU, as the holder may be preempted.
 * Readers (LIMITER TOP, /metrics) merge the sketches one at a time into a private merged
 * sketch; topk.h proves the merged list keeps the single sketch's bounds in terms of the total
 * N (DESIGN.md "Observability").
 *
 * Lock order: a key's shard lock (held by the dispatcher around the handler), then one
 * sketch's lock. Nothing takes a shard lock or conf_lock while holding a sketch's lock, and
 * no one holds two sketch locks. */
#include "cmd_internal.h"
#include "rlimitd/alloc.h"

#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/topk.h"

#define TOP_DEFAULT 10
#define TOP_MAX 1000
/* One sketch per I/O thread, and one shared by any other caller (a session without a
 * thread's stats, as in the unit tests): correct whoever uses which, as each has its lock. */
#define TOP_PARTS (CONF_MAX_THREADS + 1)

struct top_part {
    alignas(64) pthread_spinlock_t lock; /* its own cache line: no false sharing */
    struct topk *t; /* malloc'd block of topk_bytes(size), NULL until first used */
};

struct limiter_top {
    struct top_part parts[TOP_PARTS];
};

static void part_lock(struct top_part *p)
{
    while (pthread_spin_trylock(&p->lock) != 0)
        sched_yield();
}

static uint32_t clamp_size(int64_t size)
{
    if (size < TOPK_MIN_SIZE)
        return TOPK_MIN_SIZE;
    if (size > TOPK_MAX_SIZE)
        return TOPK_MAX_SIZE;
    return (uint32_t)size;
}

struct limiter_top *limiter_top_create(uint32_t size)
{
    (void)size; /* each part is sized from the configuration at its first use (part_fit) */
    struct limiter_top *top = aligned_alloc(64, sizeof(struct limiter_top));
    if (top == NULL)
        abort();
    memset(top, 0, sizeof(*top));
    for (int i = 0; i < TOP_PARTS; i++)
        pthread_spin_init(&top->parts[i].lock, PTHREAD_PROCESS_PRIVATE);
    return top;
}

void limiter_top_destroy(struct limiter_top **tp)
{
    struct limiter_top *top = *tp;
    if (top == NULL)
        return;
    for (int i = 0; i < TOP_PARTS; i++) {
        free(top->parts[i].t);
        pthread_spin_destroy(&top->parts[i].lock);
    }
    free(top);
    *tp = NULL;
}

/* Caller holds p->lock. CONFIG SET limiter-top-size (or a reload) takes effect here, at the
 * part's next use: a sketch of the new size starts empty, as its bound is in terms of its own
 * N. The hashes added are the keyspace's (keyed SipHash), so the sketch's own seed is unused. */
static void part_fit(struct top_part *p, uint32_t size)
{
    if (p->t != NULL && topk_size(p->t) == size)
        return;
    static const uint8_t unused[16];
    free(p->t);
    p->t = topk_init(malloc(topk_bytes(size)), size, unused);
    if (p->t == NULL)
        abort();
}

static uint32_t want_size(const struct cmd_env *env)
{
    return clamp_size(__atomic_load_n(&env->conf->limiter_top_size, __ATOMIC_RELAXED));
}

void limiter_stats_count(struct cmd_ctx *x, enum stats_lim kind, int allowed, int near)
{
    limiter_stats_count_key(x, kind, allowed, near, x->nkeys > 0 ? &x->keys[0] : NULL);
}

void limiter_stats_count_key(struct cmd_ctx *x, enum stats_lim kind, int allowed, int near,
                             const struct ks_key *key)
{
    struct stats *st = x->s->stats;
    if (st != NULL) {
        if (allowed) {
            stats_add(&st->lim_allowed[kind], 1);
            if (near)
                stats_add(&st->near_limit, 1);
        } else {
            stats_add(&st->lim_limited[kind], 1);
        }
    }
    struct limiter_top *top = x->env->top;
    if (allowed || top == NULL || key == NULL)
        return;
    int i = 0;
    while (i < x->env->nstats && i < CONF_MAX_THREADS && x->env->stats[i] != st)
        i++;
    if (st == NULL || i >= x->env->nstats)
        i = CONF_MAX_THREADS; /* also where a thread past CONF_MAX_THREADS would go */
    struct top_part *p = &top->parts[i];
    uint32_t size = want_size(x->env);
    part_lock(p);
    part_fit(p, size);
    topk_add_hashed(p->t, key->p, key->len, key->hash);
    pthread_spin_unlock(&p->lock);
}

void limiter_top_each(struct cmd_env *env, uint32_t n, limiter_top_fn fn, void *ud)
{
    struct limiter_top *top = env->top;
    if (top == NULL || n == 0)
        return;
    uint32_t size = want_size(env);
    if (n > size)
        n = size; /* the bounds hold for the size highest merged counts */
    /* The parts that have recorded anything, so far: a part first used after this look holds
     * only events later than the read, and is left out. The merged sketch needs room for the
     * keys of every part merged (each fitted to size): it never takes a counter over. */
    int merge[TOP_PARTS];
    uint32_t used = 0;
    for (int i = 0; i < TOP_PARTS; i++) {
        part_lock(&top->parts[i]);
        merge[i] = top->parts[i].t != NULL;
        pthread_spin_unlock(&top->parts[i].lock);
        used += (uint32_t)merge[i];
    }
    if (used == 0)
        return;
    uint32_t cap = size * used;
    struct topk *m = topk_merged_init(xmalloc(topk_merged_bytes(cap)), cap);
    struct topk_item *items = xmalloc(sizeof(*items) * n);
    if (m == NULL)
        abort(); /* topk_merged_init refuses only a NULL block or a zero size */
    for (int i = 0; i < TOP_PARTS; i++) {
        if (!merge[i])
            continue;
        struct top_part *p = &top->parts[i];
        part_lock(p);
        part_fit(p, size);
        if (topk_merge(m, p->t) != 0)
            abort(); /* cannot happen: cap counters hold every merged part's keys */
        pthread_spin_unlock(&p->lock);
    }
    uint32_t got = topk_list(m, items, n);
    for (uint32_t i = 0; i < got; i++)
        fn(ud, items[i].key, items[i].len, items[i].count);
    free(items);
    free(m);
}

void limiter_top_clear(struct cmd_env *env)
{
    struct limiter_top *top = env->top;
    if (top == NULL)
        return;
    for (int i = 0; i < TOP_PARTS; i++) {
        struct top_part *p = &top->parts[i];
        part_lock(p);
        if (p->t != NULL)
            topk_clear(p->t);
        pthread_spin_unlock(&p->lock);
    }
}

/* ---- LIMITER ---- */

static const char *const limiter_help[] = {
    "LIMITER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "TOP [COUNT <count>]",
    "    Return the keys limited most often since the start or CONFIG RESETSTAT, as [key, count]",
    "    pairs, highest first (default 10, at most 1000). Counts are estimates that are over by",
    "    at most N/limiter-top-size, N being all limited calls.",
    "HELP",
    "    Print this help.",
    NULL,
};

struct top_acc {
    struct rbuf b;
    int64_t n;
};

static void top_reply_item(void *ud, const char *key, size_t len, uint64_t count)
{
    struct top_acc *acc = ud;
    reply_array(&acc->b, 2);
    reply_bulk(&acc->b, key, len);
    reply_int(&acc->b, (int64_t)count);
    acc->n++;
}

static void limiter_top(struct cmd_ctx *x)
{
    int64_t n = TOP_DEFAULT;
    if (x->argc == 4 && arg_is(x, 2, "COUNT")) {
        if (arg_i64(x, 3, &n))
            return;
        if (n < 1 || n > TOP_MAX) {
            reply_errorf(x->out, "ERR COUNT must be between 1 and %d", TOP_MAX);
            return;
        }
    } else if (x->argc != 2) {
        reply_syntax_error(x->out);
        return;
    }
    /* The array header needs the count, known once the list is written. */
    struct top_acc acc = {.n = 0};
    rbuf_init(&acc.b);
    limiter_top_each(x->env, (uint32_t)n, top_reply_item, &acc);
    reply_array(x->out, acc.n);
    if (acc.b.len > 0)
        rbuf_append(x->out, acc.b.p, acc.b.len);
    rbuf_free(&acc.b);
}

static void cmd_limiter(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "TOP")) {
        limiter_top(x);
    } else if (arg_is(x, 1, "HELP")) {
        reply_help_lines(x->out, limiter_help);
    } else {
        reply_subcmd_unknown(x, "LIMITER");
    }
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_limiter_table[] = {
    {"limiter", -2, CMD_LOADING | CMD_STALE, 0, 0, 0, "slow", cmd_limiter,
     {.summary = "A container for limiter statistics commands (TOP, HELP)", .since = "0.1.0",
      .group = "server", .complexity = "Depends on subcommand.",
      .tips = "nondeterministic_output"}},
};
const int cmd_limiter_count = (int)(sizeof(cmd_limiter_table) / sizeof(cmd_limiter_table[0]));
