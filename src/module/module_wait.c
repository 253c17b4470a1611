/* module_wait.c - WAIT inside Redis (COMMANDS.md, "Waiting for capacity"), as in the daemon:
 * one first-come first-served queue per key; only its head is decided again, at the limiter's
 * time (a module timer), when a lease of its key is released, and when the waiter before it
 * left; the timeout answers as without WAIT; never inside MULTI or a script.
 *
 * A waiting client is blocked with RedisModule_BlockClient. Its head's decision runs in a timer
 * callback, through a thread-safe context bound to the blocked client (on Redis's own thread):
 * the keys are its database's and the admitted reply accumulates for the client, who gets it
 * when RedisModule_UnblockClient is handled (the reply callback adds nothing). The timeout
 * callback decides once more on the client's own context; the disconnect callback drops the
 * waiter. Every path ends in RedisModule_UnblockClient with the waiter as private data, and
 * the free callback frees it. (BlockClientOnKeys does not fit: Redis 7.0 serves clients blocked
 * on a key only while the key exists, and a GCRA key expires exactly when its capacity returns.)
 * Redis runs all of this on one thread: no locks. */
#include "module_wait.h"

#include <string.h>

#include "module_reply.h"
#include "rlimitd/fifo.h"

#define NBUCKETS 1024u
#define NS_PER_MS 1000000LL
#define CTX_NO_BLOCKING ((1 << 0) | (1 << 1) | (1 << 21)) /* LUA, MULTI, DENY_BLOCKING */

struct rl_queue {
    struct rl_queue *next; /* in its bucket */
    struct fifo waiters;
    uint64_t hash;
    size_t len;
    char key[];
};

struct rl_waiter {
    struct fifo_link link;           /* in its key's queue (in: NULL once it left) */
    struct rl_waiter *gprev, *gnext; /* every waiter (found by its blocked client) */
    RedisModuleBlockedClient *bc;
    RedisModuleTimerID timer, deadline;
    int has_timer, has_deadline;
    int done; /* UnblockClient called: only the free callback is left */
    rl_core_fn core;
    int argc;
    RedisModuleString **argv;
};

static struct rl_queue *buckets[NBUCKETS];
static struct rl_waiter *all;

static uint64_t hash_key(const char *p, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

static struct rl_waiter *head_of(const struct rl_queue *q)
{
    return FIFO_ENTRY(q->waiters.head, struct rl_waiter, link);
}

static struct rl_queue **slot_of(RedisModuleString *key)
{
    size_t len;
    const char *p = RedisModule_StringPtrLen(key, &len);
    uint64_t h = hash_key(p, len);
    struct rl_queue **s = &buckets[h & (NBUCKETS - 1)];
    while (*s != NULL && ((*s)->hash != h || (*s)->len != len || memcmp((*s)->key, p, len) != 0))
        s = &(*s)->next;
    return s;
}

static void on_timer(RedisModuleCtx *ctx, void *data);

static void stop_timer(RedisModuleCtx *ctx, struct rl_waiter *w)
{
    if (w->has_timer)
        RedisModule_StopTimer(ctx, w->timer, NULL);
    w->has_timer = 0;
}

static void set_timer(RedisModuleCtx *ctx, struct rl_waiter *w, int64_t ms)
{
    stop_timer(ctx, w);
    w->timer = RedisModule_CreateTimer(ctx, ms, on_timer, w);
    w->has_timer = 1;
}

/* w leaves its queue; a new head is decided at once (in the next event loop turn). */
static void leave(RedisModuleCtx *ctx, struct rl_waiter *w)
{
    stop_timer(ctx, w);
    struct fifo *in = w->link.in;
    int was_head = fifo_unlink(&w->link);
    if (was_head < 0)
        return;
    struct rl_queue *q = FIFO_ENTRY(in, struct rl_queue, waiters);
    if (fifo_is_empty(&q->waiters)) {
        struct rl_queue **s = &buckets[q->hash & (NBUCKETS - 1)];
        while (*s != q)
            s = &(*s)->next;
        *s = q->next;
        RedisModule_Free(q);
    } else if (was_head) {
        set_timer(ctx, head_of(q), 0);
    }
}

/* The client is answered (or gone): out of the queue, and released to Redis. */
static void finish(RedisModuleCtx *ctx, struct rl_waiter *w)
{
    leave(ctx, w);
    if (w->has_deadline)
        RedisModule_StopTimer(ctx, w->deadline, NULL);
    w->has_deadline = 0;
    w->done = 1;
    RedisModule_UnblockClient(w->bc, w);
}

static struct rl_waiter *find(RedisModuleBlockedClient *bc)
{
    for (struct rl_waiter *w = all; w != NULL; w = w->gnext)
        if (w->bc == bc)
            return w;
    return NULL;
}

static int reply_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    (void)ctx, (void)argv, (void)argc;
    return REDISMODULE_OK; /* the reply was written through the thread-safe context */
}

/* CLIENT UNBLOCK (Redis's timeout path): out of the queue, decided once more as without WAIT,
 * answered. */
static int timeout_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    struct rl_waiter *w = find(RedisModule_GetBlockedClientHandle(ctx));
    if (w == NULL || w->done)
        return REDISMODULE_OK;
    leave(ctx, w);
    struct rl_run run = {w->core, NULL, 1, 0};
    w->core(ctx, argv, argc, &run);
    finish(ctx, w);
    return REDISMODULE_OK;
}

static void disconnect_cb(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc)
{
    struct rl_waiter *w = find(bc);
    if (w != NULL && !w->done)
        finish(ctx, w);
}

static void free_cb(RedisModuleCtx *ctx, void *privdata)
{
    (void)ctx;
    struct rl_waiter *w = privdata;
    if (w->gprev != NULL)
        w->gprev->gnext = w->gnext;
    else
        all = w->gnext;
    if (w->gnext != NULL)
        w->gnext->gprev = w->gprev;
    for (int i = 0; i < w->argc; i++)
        RedisModule_FreeString(NULL, w->argv[i]);
    RedisModule_Free(w->argv);
    RedisModule_Free(w);
}

/* The timeout, on a module timer of its own rather than BlockClient's (Redis checks those only
 * as often as its event loop wakes, up to 1000/hz ms late): out of the queue, decided once more
 * as without WAIT through the blocked client's context, answered. */
static void on_deadline(RedisModuleCtx *ctx, void *data)
{
    struct rl_waiter *w = data;
    w->has_deadline = 0;
    if (w->done)
        return;
    leave(ctx, w);
    RedisModuleCtx *tctx = RedisModule_GetThreadSafeContext(w->bc);
    struct rl_run run = {w->core, NULL, 1, 0};
    w->core(tctx, w->argv, w->argc, &run);
    RedisModule_FreeThreadSafeContext(tctx);
    finish(ctx, w);
}

/* The head's turn may have come: decided again through the blocked client's context. */
static void on_timer(RedisModuleCtx *ctx, void *data)
{
    struct rl_waiter *w = data;
    w->has_timer = 0;
    if (w->done || !fifo_is_head(&w->link))
        return;
    RedisModuleCtx *tctx = RedisModule_GetThreadSafeContext(w->bc);
    struct rl_run run = {w->core, w, 0, 0};
    w->core(tctx, w->argv, w->argc, &run);
    RedisModule_FreeThreadSafeContext(tctx);
    if (!run.parked)
        finish(ctx, w);
}

int rl_wait_call(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, rl_core_fn core)
{
    struct rl_run run = {core, NULL, 0, 0};
    return core(ctx, argv, argc, &run);
}

static int may_block(RedisModuleCtx *ctx, const struct rl_run *run)
{
    return !run->no_wait &&
           (run->w != NULL || !(RedisModule_GetContextFlags(ctx) & CTX_NO_BLOCKING));
}

/* Blocks the calling client and queues it at the back of key's queue. */
static struct rl_waiter *join(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                              struct rl_run *run, RedisModuleString *key, int64_t timeout_ms)
{
    struct rl_queue **s = slot_of(key);
    if (*s == NULL) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(key, &len);
        struct rl_queue *q = RedisModule_Alloc(sizeof(*q) + len);
        q->next = NULL;
        fifo_init(&q->waiters);
        q->hash = hash_key(p, len);
        q->len = len;
        memcpy(q->key, p, len);
        *s = q;
    }
    struct rl_queue *q = *s;
    struct rl_waiter *w = RedisModule_Alloc(sizeof(*w));
    memset(w, 0, sizeof(*w));
    w->core = run->core;
    w->argc = argc;
    w->argv = RedisModule_Alloc(sizeof(*w->argv) * (size_t)argc);
    for (int i = 0; i < argc; i++)
        w->argv[i] = RedisModule_CreateStringFromString(NULL, argv[i]);
    /* No timeout for Redis to keep: the module's timer keeps it to the millisecond. */
    w->bc = RedisModule_BlockClient(ctx, reply_cb, timeout_cb, free_cb, 0);
    RedisModule_SetDisconnectCallback(w->bc, disconnect_cb);
    if (timeout_ms > 0) {
        w->deadline = RedisModule_CreateTimer(ctx, timeout_ms, on_deadline, w);
        w->has_deadline = 1;
    }
    fifo_push(&q->waiters, &w->link);
    w->gnext = all;
    if (all != NULL)
        all->gprev = w;
    all = w;
    run->parked = 1;
    return w;
}

int rl_wait_behind(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run,
                   RedisModuleString *key, int64_t timeout_ms)
{
    if (run->w != NULL || !may_block(ctx, run) || *slot_of(key) == NULL)
        return 0;
    join(ctx, argv, argc, run, key, timeout_ms);
    return 1;
}

int rl_wait_park(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, struct rl_run *run,
                 RedisModuleString *key, int64_t timeout_ms, int64_t wait_ns)
{
    if (wait_ns < 0 || !may_block(ctx, run))
        return 0;
    struct rl_waiter *w = run->w;
    if (w == NULL)
        w = join(ctx, argv, argc, run, key, timeout_ms);
    run->parked = 1;
    if (fifo_is_head(&w->link) && wait_ns < INT64_MAX / 2) {
        int64_t ms = (wait_ns + NS_PER_MS - 1) / NS_PER_MS;
        set_timer(ctx, w, ms > 0 ? ms : 1);
    }
    return 1;
}

void rl_wait_notify(RedisModuleCtx *ctx, RedisModuleString *key)
{
    struct rl_queue *q = *slot_of(key);
    if (q != NULL)
        set_timer(ctx, head_of(q), 0);
}
