/* module_lease.c - concurrency leases (COMMANDS.md, LEASE.*) inside Redis: the daemon's rules
 * (lease.c) on the rlim-leas type, with the primary's clock. Effects travel as RLIMIT.LEASEPUT
 * (an acquire, a renewal) and RLIMIT.LEASEDEL (a release), each carrying the primary's `now`, so
 * a replica drops the same expired leases and ends with the same bytes. An acquire refused
 * because the set is full, a release or renewal of a lease not held, and LEASE.COUNT change
 * nothing (the expired leases they skip are dropped by the next write) and propagate nothing. */
#include "module_lease.h"
#include "module_lease_state.h"
#include "module_reply.h"
#include "module_stats.h"
#include "module_wait.h"

#include "rlimitd/lease.h"
#include "rlimitd/util.h"

#define NS_PER_MS 1000000LL

/* The key opened in mode with its lease set in *s (NULL: empty), or NULL with WRONGTYPE replied
 * (*s NULL too). A key opened for reading alone is NULL when absent: LEASE.COUNT checks *s. */
static RedisModuleKey *open_leases(RedisModuleCtx *ctx, RedisModuleString *name, int mode,
                                   const struct lease_set **s)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, mode);
    *s = NULL;
    if (key == NULL)
        return NULL;
    if (rl_lease_get(key, s) == 0)
        return key;
    RedisModule_CloseKey(key);
    RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    return NULL;
}

static int acquire_core(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                        struct rl_run *run)
{
    if (argc < 4)
        return rl_reply_arity(ctx, "lease.acquire");
    /* lease_acquire_parse reads at most 6 arguments (a longer call is its syntax error, after
     * limit and ttl_ms are checked): the rest need no pointers. */
    const char *p[6];
    size_t len[6];
    for (int i = 0; i < argc && i < 6; i++)
        p[i] = RedisModule_StringPtrLen(argv[i], &len[i]);
    struct lease_acquire_args a;
    const char *err;
    if (lease_acquire_parse(argc, p, len, &a, &err) != 0)
        return rl_reply_err(ctx, err);
    if (a.has_wait && rl_wait_behind(ctx, argv, argc, run, argv[1], a.wait_ms))
        return REDISMODULE_OK;
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    int64_t now = rl_now_ns();
    int64_t live = s != NULL ? lease_count_live(s, now) : 0;
    size_t klen;
    const char *kname = RedisModule_StringPtrLen(argv[1], &klen);
    if (live >= a.limit) {
        RedisModule_CloseKey(key);
        /* Full: a slot frees itself when the earliest lease expires, or at a LEASE.RELEASE. */
        int64_t next = lease_min_expire(s);
        if (a.has_wait &&
            rl_wait_park(ctx, argv, argc, run, argv[1], a.wait_ms, next > now ? next - now : 0))
            return REDISMODULE_OK;
        rl_stats_count(RL_LIM_LEASE, kname, klen, 0, 0);
        return RedisModule_ReplyWithNull(ctx);
    }
    struct lease_set empty = {0, 0, 0};
    int64_t id = lease_new_id(s != NULL ? s : &empty, now), expire = now + a.ttl_ms * NS_PER_MS;
    rl_lease_put(key, now, id, expire);
    RedisModule_CloseKey(key);
    RedisModule_Replicate(ctx, "RLIMIT.LEASEPUT", "slll", argv[1], (long long)now, (long long)id,
                          (long long)expire);
    rl_stats_count(RL_LIM_LEASE, kname, klen, 1, (live + 1) * 10 >= a.limit * 9);
    char buf[24];
    return RedisModule_ReplyWithStringBuffer(ctx, buf, util_fmt_i64(buf, id));
}

int rl_cmd_lease_acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return rl_wait_call(ctx, argv, argc, acquire_core);
}

int rl_cmd_lease_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return rl_reply_arity(ctx, "lease.release");
    int64_t id;
    if (rl_arg_i64(ctx, argv[2], &id))
        return REDISMODULE_OK;
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    int64_t now = rl_now_ns();
    int i = s != NULL ? lease_find(s, id) : -1;
    int held = i >= 0 && s->l[i].expire > now;
    if (held) {
        rl_lease_del(key, now, id);
        RedisModule_Replicate(ctx, "RLIMIT.LEASEDEL", "sll", argv[1], (long long)now,
                              (long long)id);
    }
    RedisModule_CloseKey(key);
    if (held)
        rl_wait_notify(ctx, argv[1]);
    return RedisModule_ReplyWithLongLong(ctx, held);
}

int rl_cmd_lease_renew(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4)
        return rl_reply_arity(ctx, "lease.renew");
    int64_t id, ttl_ms;
    if (rl_arg_i64(ctx, argv[2], &id))
        return REDISMODULE_OK;
    size_t tlen;
    const char *t = RedisModule_StringPtrLen(argv[3], &tlen), *err;
    if (lease_parse_ttl(t, tlen, &ttl_ms, &err) != 0)
        return rl_reply_err(ctx, err);
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    int64_t now = rl_now_ns();
    int i = s != NULL ? lease_find(s, id) : -1;
    int held = i >= 0 && s->l[i].expire > now;
    if (held) {
        int64_t expire = now + ttl_ms * NS_PER_MS;
        rl_lease_put(key, now, id, expire);
        RedisModule_Replicate(ctx, "RLIMIT.LEASEPUT", "slll", argv[1], (long long)now,
                              (long long)id, (long long)expire);
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, held);
}

int rl_cmd_lease_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return rl_reply_arity(ctx, "lease.count");
    const struct lease_set *s;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    if (key == NULL) /* absent */
        return RedisModule_ReplyWithLongLong(ctx, 0);
    if (rl_lease_get(key, &s) != 0) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    long long n = s != NULL ? lease_count_live(s, rl_now_ns()) : 0;
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, n);
}

/* ---- effects: validated like user input, applied exactly as given ---- */

static int effect_args(RedisModuleCtx *ctx, RedisModuleString **argv, int n, int64_t *v)
{
    for (int i = 0; i < n; i++)
        if (rl_arg_i64(ctx, argv[i], &v[i]))
            return -1;
    if (v[0] < 0 || (n > 2 && v[2] < 0)) {
        rl_reply_err(ctx, "invalid time: must be >= 0 (ns since the epoch)");
        return -1;
    }
    return 0;
}

int rl_cmd_leaseput(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 5)
        return rl_reply_arity(ctx, "rlimit.leaseput");
    int64_t v[3]; /* now, id, expire */
    if (effect_args(ctx, argv + 2, 3, v) != 0)
        return REDISMODULE_OK;
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    /* A new id must exceed every id of the set (they are ascending), as on the primary. */
    if (s != NULL && lease_find(s, v[1]) < 0 && s->n > 0 && v[1] <= s->l[s->n - 1].id) {
        RedisModule_CloseKey(key);
        return rl_reply_err(ctx, "invalid id: not above the set's ids");
    }
    rl_lease_put(key, v[0], v[1], v[2]);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int rl_cmd_leasedel(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4)
        return rl_reply_arity(ctx, "rlimit.leasedel");
    int64_t v[2]; /* now, id */
    if (effect_args(ctx, argv + 2, 2, v) != 0)
        return REDISMODULE_OK;
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    int done = rl_lease_del(key, v[0], v[1]);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, done);
}

int rl_cmd_leaseset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return rl_reply_arity(ctx, "rlimit.leaseset");
    size_t len;
    const char *packed = RedisModule_StringPtrLen(argv[2], &len), *err;
    const struct lease_set *s;
    RedisModuleKey *key = open_leases(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &s);
    if (key == NULL)
        return REDISMODULE_OK;
    /* The key's expiry comes with the set (the AOF rewrite emits PEXPIREAT after it anyway). */
    if (rl_lease_replace(key, packed, len, &err) != 0) {
        RedisModule_CloseKey(key);
        return rl_reply_err(ctx, err);
    }
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}
