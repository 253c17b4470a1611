/* cmd_limiter.c - what the limiters decided: per-thread decision counters (INFO limiter,
 * /metrics) and the most-limited keys (LIMITER TOP [COUNT n], LIMITER HELP).
 *
 * Counting an allowed call is two single-writer increments on the calling thread's struct
 * stats: no lock, no shared cache line. A limited call also goes into one space-saving sketch
 * (topk.h) under its own mutex. One sketch, not one per thread: merging per-thread sketches
 * loses the guarantee that a key limited more than N/size times is listed. Only limited calls
 * take the mutex, and they are the rarer ones (DESIGN.md "Observability").
 *
 * Lock order: a key's shard lock (held by the dispatcher around the handler), then the
 * sketch's mutex. Nothing takes a shard lock or conf_lock while holding the sketch's mutex. */
#include "cmd_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/topk.h"

#define TOP_DEFAULT 10
#define TOP_MAX 1000

struct limiter_top {
    pthread_mutex_t lock;
    struct topk *t; /* malloc'd block of topk_bytes(size) */
    uint8_t seed[16];
};

static struct topk *top_alloc(const uint8_t seed[16], uint32_t size)
{
    if (size < TOPK_MIN_SIZE)
        size = TOPK_MIN_SIZE;
    if (size > TOPK_MAX_SIZE)
        size = TOPK_MAX_SIZE;
    void *mem = malloc(topk_bytes(size));
    if (mem == NULL)
        abort();
    return topk_init(mem, size, seed);
}

struct limiter_top *limiter_top_create(uint32_t size)
{
    struct limiter_top *top = calloc(1, sizeof(*top));
    if (top == NULL)
        abort();
    /* Adaptive: a thread finding it held spins briefly before sleeping, as the section is a
     * few hundred nanoseconds and a futex sleep and wake-up would cost more. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&top->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    /* A per-process random seed: a client cannot aim keys at one probe run of the sketch. */
    FILE *f = fopen("/dev/urandom", "rb");
    if (f != NULL) {
        if (fread(top->seed, 1, sizeof(top->seed), f) != sizeof(top->seed))
            memset(top->seed, 0x5a, sizeof(top->seed));
        fclose(f);
    }
    top->t = top_alloc(top->seed, size);
    return top;
}

void limiter_top_destroy(struct limiter_top **tp)
{
    struct limiter_top *top = *tp;
    if (top == NULL)
        return;
    free(top->t);
    pthread_mutex_destroy(&top->lock);
    free(top);
    *tp = NULL;
}

/* Caller holds top->lock. CONFIG SET limiter-top-size (or a reload) takes effect here, at the
 * next use: a sketch of the new size starts empty, as its bound is in terms of its own N. */
static void top_fit(struct cmd_env *env, struct limiter_top *top)
{
    int64_t want = __atomic_load_n(&env->conf->limiter_top_size, __ATOMIC_RELAXED);
    if (want >= TOPK_MIN_SIZE && want <= TOPK_MAX_SIZE && (uint32_t)want != topk_size(top->t)) {
        free(top->t);
        top->t = top_alloc(top->seed, (uint32_t)want);
    }
}

void limiter_stats_count(struct cmd_ctx *x, enum stats_lim kind, int allowed, int near)
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
    if (allowed || top == NULL || x->nkeys < 1)
        return;
    /* The hash outside the lock: the seed never changes, even when the sketch is resized. */
    uint64_t h = topk_hash(top->seed, x->keys[0].p, x->keys[0].len);
    pthread_mutex_lock(&top->lock);
    top_fit(x->env, top);
    topk_add_hashed(top->t, x->keys[0].p, x->keys[0].len, h);
    pthread_mutex_unlock(&top->lock);
}

void limiter_top_each(struct cmd_env *env, uint32_t n, limiter_top_fn fn, void *ud)
{
    struct limiter_top *top = env->top;
    if (top == NULL || n == 0)
        return;
    struct topk_item *items = malloc(sizeof(*items) * n);
    if (items == NULL)
        abort();
    pthread_mutex_lock(&top->lock);
    top_fit(env, top);
    uint32_t got = topk_list(top->t, items, n);
    for (uint32_t i = 0; i < got; i++)
        fn(ud, items[i].key, items[i].len, items[i].count);
    pthread_mutex_unlock(&top->lock);
    free(items);
}

void limiter_top_clear(struct cmd_env *env)
{
    struct limiter_top *top = env->top;
    if (top == NULL)
        return;
    pthread_mutex_lock(&top->lock);
    topk_clear(top->t);
    pthread_mutex_unlock(&top->lock);
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
