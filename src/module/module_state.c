/* module_state.c - the module's limiter state: GCRA state as a Redis string, window logs (a ring
 * of ms timestamps from swlog.c) as a module type with its RDB, AOF-rewrite, digest and memory
 * callbacks, and the only functions that change them.
 *
 * GCRA state (CL.THROTTLE and GCRA) is a string holding the TAT in nanoseconds as decimal text
 * (gcra.h, "the stored TAT"): what GET shows in the daemon, and the type Redis's own GCRA keeps
 * its state in, so TYPE answers string, and RDB, AOF, replication, DUMP/RESTORE and MIGRATE are
 * Redis's own. The cost is that any string command may write the key: a string that is not such
 * a TAT is refused with WRONGTYPE, and an integer written there is read as a TAT (a past one, a
 * full bucket, for any counter). A window log is a module type: its ring is no string, and the
 * type gets WRONGTYPE from every other command for free. Keys of the earlier rlim-gcra type (an
 * RDB or DUMP from before) still load, and the next write turns them into strings. */
#include "module_packed.h"
#include "module_state.h"
#include "module_stats.h"

#include <limits.h>
#include <string.h>

#include "rlimitd/gcra.h"
#include "rlimitd/isallowed.h"

static RedisModuleType *rl_gcra_type; /* the earlier GCRA state: TYPE showed "rlim-gcra" */
static RedisModuleType *rl_wlog_type; /* TYPE shows "rlim-wlog" */

/* Bump with a new load path when an encoding changes; the RDB carries it. */
#define RL_ENCVER 0

/* An rlim-gcra value is one int64, the TAT (ns since the epoch, always >= 1), kept in the value
 * pointer itself: Redis never dereferences a module value, only hands it back to these
 * callbacks. (The module is built for 64-bit servers.) */
_Static_assert(sizeof(void *) == sizeof(int64_t), "the TAT is kept in a pointer");

static void *tat_to_value(int64_t tat)
{
    return (void *)(uintptr_t)tat;
}

static int64_t value_to_tat(const void *value)
{
    return (int64_t)(uintptr_t)value;
}

/* ---- the key's kind ---- */

enum rl_kind rl_key_kind(RedisModuleKey *key)
{
    int t = RedisModule_KeyType(key);
    if (t == REDISMODULE_KEYTYPE_EMPTY)
        return RL_EMPTY;
    if (t == REDISMODULE_KEYTYPE_STRING)
        return RL_GCRA;
    if (t == REDISMODULE_KEYTYPE_MODULE) {
        RedisModuleType *mt = RedisModule_ModuleTypeGetType(key);
        if (mt == rl_gcra_type)
            return RL_GCRA;
        if (mt == rl_wlog_type)
            return RL_WLOG;
    }
    return RL_OTHER;
}

/* ---- GCRA ---- */

int rl_gcra_tat(RedisModuleKey *key, int64_t *tat)
{
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE) {
        *tat = value_to_tat(RedisModule_ModuleTypeGetValue(key));
        return 0;
    }
    size_t len;
    const char *p = RedisModule_StringDMA(key, &len, REDISMODULE_READ);
    return p != NULL ? gcra_tat_parse(p, len, tat) : -1;
}

RedisModuleKey *rl_gcra_open(RedisModuleCtx *ctx, RedisModuleString *name, int *has,
                             int64_t *tat)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    enum rl_kind kind = rl_key_kind(key);
    *has = kind == RL_GCRA;
    *tat = 0;
    if (kind == RL_EMPTY || (kind == RL_GCRA && rl_gcra_tat(key, tat) == 0))
        return key;
    RedisModule_CloseKey(key);
    return NULL;
}

void rl_gcra_store_replicate(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *name,
                             int64_t tat, int floor_ms)
{
    int64_t ms = rl_gcra_store(ctx, key, tat, floor_ms);
    char text[GCRA_TAT_TEXT_MAX];
    size_t n = gcra_tat_format(text, tat);
    RedisModule_Replicate(ctx, "SET", "sbcl", name, text, n, "PXAT", (long long)ms);
}

int64_t rl_gcra_store(RedisModuleCtx *ctx, RedisModuleKey *key, int64_t tat, int floor_ms)
{
    char text[GCRA_TAT_TEXT_MAX];
    size_t n = gcra_tat_format(text, tat);
    RedisModuleString *s = RedisModule_CreateString(ctx, text, n);
    /* StringSet replaces any value (an rlim-gcra one too, through its free) and its expiry. */
    RedisModule_StringSet(key, s);
    RedisModule_FreeString(ctx, s);
    /* COMMANDS.md, CL.THROTTLE and GCRA: the key expires at its TAT. Redis keeps expiries in
     * ms: GCRA rounds down as Redis's GCRA does (a key that lasts into the TAT's ms; Redis keeps
     * a key through the ms of its expiry), CL.THROTTLE up, so its key never goes while the TAT
     * is ahead. A TAT in microseconds (past 2262) is rounded down: Redis's ms reach it. */
    int64_t ms;
    if (tat < 0)
        ms = -tat / 1000;
    else
        ms = tat / 1000000 + (!floor_ms && tat % 1000000 > 0);
    RedisModule_SetAbsExpire(key, ms);
    return ms;
}

static void *gcra_rdb_load(RedisModuleIO *io, int encver)
{
    if (encver != RL_ENCVER) {
        RedisModule_LogIOError(io, REDISMODULE_LOGLEVEL_WARNING,
                               "rlimit: rlim-gcra encoding %d is newer than this module", encver);
        return NULL;
    }
    int64_t tat = RedisModule_LoadSigned(io);
    if (RedisModule_IsIOError(io))
        return NULL;
    /* RLIMIT.SETTAT's rule: a TAT < 1 cannot come from this module, and it could not be written
     * back through an AOF rewrite. */
    if (tat < 1) {
        RedisModule_LogIOError(io, REDISMODULE_LOGLEVEL_WARNING, "rlimit: corrupt rlim-gcra: "
                               "TAT %lld", (long long)tat);
        return NULL;
    }
    rl_stats_values(1);
    return tat_to_value(tat); /* non-NULL: tat >= 1 (NULL would mean a failed load) */
}

static void gcra_rdb_save(RedisModuleIO *io, void *value)
{
    RedisModule_SaveSigned(io, value_to_tat(value));
}

static void gcra_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value)
{
    /* The server emits the key's PEXPIREAT after this; RLIMIT.SETTAT sets the same one. */
    RedisModule_EmitAOF(aof, "RLIMIT.SETTAT", "sl", key, (long long)value_to_tat(value));
}

static size_t gcra_mem_usage(const void *value)
{
    (void)value;
    return 0; /* the TAT lives in the value pointer: nothing allocated */
}

static void gcra_digest(RedisModuleDigest *md, void *value)
{
    RedisModule_DigestAddLongLong(md, value_to_tat(value));
    RedisModule_DigestEndSequence(md);
}

/* ---- window logs ---- */

struct swlog *rl_wlog_get(RedisModuleKey *key)
{
    return rl_key_kind(key) == RL_WLOG ? RedisModule_ModuleTypeGetValue(key) : NULL;
}

static struct swlog *wlog_alloc(uint32_t cap)
{
    struct swlog *log = RedisModule_Alloc(swlog_bytes(cap));
    swlog_init(log, cap);
    return log;
}

static struct swlog *wlog_move_to(void *ud, uint32_t cap)
{
    (void)ud;
    return RedisModule_Alloc(swlog_bytes(cap));
}

int rl_wlog_push(RedisModuleKey *key, int64_t cutoff_ms, int64_t keep, int64_t ts_ms,
                 int64_t period_ms, int64_t *newest_ms)
{
    struct swlog *log = rl_wlog_get(key);
    if (log == NULL) {
        log = wlog_alloc(swlog_initial_cap(keep));
        RedisModule_ModuleTypeSetValue(key, rl_wlog_type, log);
        rl_stats_values(1);
    }
    /* A period of 0 makes the cutoff itself the trim point (timestamps <= cutoff go). */
    struct swlog_attempt a = {cutoff_ms, 0, ts_ms, keep};
    struct swlog_outcome out = swlog_update(log, &a, wlog_move_to, NULL);
    if (out.log != log) {
        /* Swapped in place: the key, its expiry and its LRU stay; the old ring is ours to free. */
        void *old;
        RedisModule_ModuleTypeReplaceValue(key, rl_wlog_type, out.log, &old);
        RedisModule_Free(old);
    }
    *newest_ms = out.newest_ms;
    /* COMMANDS.md, ISALLOWED: the key expires `period` after its newest attempt. */
    RedisModule_SetAbsExpire(key, *newest_ms + period_ms);
    return out.verdict == SWLOG_ALLOWED;
}

/* A log as bytes: little-endian int64 ms, oldest first (RDB, AOF and RLIMIT.LOGSET). */
static char *wlog_pack(const void *value, size_t *len)
{
    const struct swlog *log = value;
    *len = (size_t)log->len * 8;
    unsigned char *buf = RedisModule_Alloc(*len ? *len : 1);
    for (uint32_t i = 0; i < log->len; i++) {
        rl_put_i64(buf + (size_t)i * 8, swlog_at(log, i));
    }
    return (char *)buf;
}

static void *wlog_unpack(const char *packed, size_t len, const char **err)
{
    const unsigned char *p = (const unsigned char *)packed;
    if (len == 0 || len % 8 != 0 || len / 8 >= UINT32_MAX) {
        *err = "a window log is 1 or more 8-byte timestamps";
        return NULL;
    }
    uint32_t n = (uint32_t)(len / 8);
    struct swlog *log = wlog_alloc(n);
    int64_t prev = INT64_MIN;
    for (uint32_t i = 0; i < n; i++) {
        int64_t ts = rl_get_i64(p + (size_t)i * 8);
        /* swlog's binary search and ISALLOWED's counting rely on ascending order. */
        if (ts < prev || ts < 0 || ts > ISALLOWED_MAX_TS_MS) {
            RedisModule_Free(log);
            *err = "window log timestamps must be ascending, between 0 and 9223372036854";
            return NULL;
        }
        prev = ts;
        /* swlog_record keeps at most max_count older ones; n - 1 keeps them all. */
        swlog_record(log, ts, (int64_t)n);
    }
    return log;
}

int rl_wlog_replace(RedisModuleKey *key, const char *packed, size_t len, const char **err)
{
    struct swlog *log = wlog_unpack(packed, len, err);
    if (log == NULL)
        return -1;
    /* Setting a value clears the key's expiry; a replaced log keeps the one it had. */
    mstime_t expire = RedisModule_GetAbsExpire(key);
    RedisModule_ModuleTypeSetValue(key, rl_wlog_type, log);
    rl_stats_values(1); /* the old value, if any, went through its type's free */
    if (expire != REDISMODULE_NO_EXPIRE)
        RedisModule_SetAbsExpire(key, expire);
    return 0;
}

static void *wlog_rdb_load(RedisModuleIO *io, int encver)
{
    return rl_packed_rdb_load(io, encver, RL_ENCVER, "rlim-wlog", wlog_unpack);
}

static void wlog_rdb_save(RedisModuleIO *io, void *value)
{
    rl_packed_rdb_save(io, value, wlog_pack);
}

static void wlog_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value)
{
    rl_packed_aof(aof, "RLIMIT.LOGSET", key, value, wlog_pack);
}

static size_t wlog_mem_usage(const void *value)
{
    return swlog_bytes(((const struct swlog *)value)->cap);
}

static void wlog_digest(RedisModuleDigest *md, void *value)
{
    /* The attempts themselves, not the ring's capacity or rotation: two logs that decide alike
     * digest alike. */
    const struct swlog *log = value;
    for (uint32_t i = 0; i < log->len; i++)
        RedisModule_DigestAddLongLong(md, swlog_at(log, i));
    RedisModule_DigestEndSequence(md);
}

/* The server frees a value when its key goes (DEL, overwrite, expiry, FLUSHALL). */
static void gcra_free(void *value)
{
    (void)value; /* nothing was allocated */
    rl_stats_values(-1);
}

static void wlog_free(void *value)
{
    RedisModule_Free(value);
    rl_stats_values(-1);
}

int rl_types_create(RedisModuleCtx *ctx)
{
    /* Type names are exactly 9 characters (the RDB stores them packed into 54 bits). */
    RedisModuleTypeMethods gcra = {
        .version = REDISMODULE_TYPE_METHOD_VERSION_1,
        .rdb_load = gcra_rdb_load,
        .rdb_save = gcra_rdb_save,
        .aof_rewrite = gcra_aof_rewrite,
        .mem_usage = gcra_mem_usage,
        .digest = gcra_digest,
        .free = gcra_free,
    };
    RedisModuleTypeMethods wlog = {
        .version = REDISMODULE_TYPE_METHOD_VERSION_1,
        .rdb_load = wlog_rdb_load,
        .rdb_save = wlog_rdb_save,
        .aof_rewrite = wlog_aof_rewrite,
        .mem_usage = wlog_mem_usage,
        .digest = wlog_digest,
        .free = wlog_free,
    };
    RedisModuleType *g = RedisModule_CreateDataType(ctx, "rlim-gcra", RL_ENCVER, &gcra);
    RedisModuleType *w = RedisModule_CreateDataType(ctx, "rlim-wlog", RL_ENCVER, &wlog);
    if (g == NULL || w == NULL)
        return REDISMODULE_ERR;
    rl_gcra_type = g;
    rl_wlog_type = w;
    return REDISMODULE_OK;
}
