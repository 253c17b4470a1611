/* module_lease_state.c - concurrency leases in Redis: the rlim-leas module type holding a struct
 * lease_set (lease.h), its RDB, AOF-rewrite, digest and memory callbacks, and the changes the
 * lease commands and their effects make. A module type for the same reasons as the window log:
 * no string command can scribble over it, TYPE names it, DEBUG DIGEST-VALUE compares it.
 *
 * Packed form (RDB, RLIMIT.LEASESET): little-endian int64s, the highest id handed out, then
 * each lease's id and expiry (ns since the epoch), ids ascending. */
#include "module_lease_state.h"
#include "module_packed.h"
#include "module_stats.h"

#include <string.h>

static RedisModuleType *rl_lease_type; /* TYPE shows "rlim-leas" */

#define RL_LEASE_ENCVER 0

static struct lease_set *set_alloc(uint32_t cap, int64_t last_id)
{
    struct lease_set *s = RedisModule_Alloc(lease_set_bytes(cap));
    lease_set_init(s, cap, last_id);
    return s;
}

int rl_lease_get(RedisModuleKey *key, const struct lease_set **s)
{
    int t = RedisModule_KeyType(key);
    *s = NULL;
    if (t == REDISMODULE_KEYTYPE_EMPTY)
        return 0;
    if (t != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(key) != rl_lease_type)
        return -1;
    *s = RedisModule_ModuleTypeGetValue(key);
    return 0;
}

/* The key's expiry follows its leases; an empty set deletes it. */
static void settle(RedisModuleKey *key, struct lease_set *s)
{
    if (s->n == 0) {
        RedisModule_DeleteKey(key);
        return;
    }
    int64_t exp = lease_max_expire(s);
    RedisModule_SetAbsExpire(key, exp / 1000000 + (exp % 1000000 > 0));
}

void rl_lease_put(RedisModuleKey *key, int64_t now, int64_t id, int64_t expire)
{
    const struct lease_set *cur;
    rl_lease_get(key, &cur);
    struct lease_set *s = (struct lease_set *)cur;
    if (s == NULL) {
        s = set_alloc(4, 0);
        RedisModule_ModuleTypeSetValue(key, rl_lease_type, s);
        rl_stats_values(1);
    }
    lease_purge(s, now);
    if (lease_find(s, id) < 0 && s->n == s->cap) {
        /* Replaced in place: the key, its expiry and its LRU stay; the old set is ours. */
        struct lease_set *g = set_alloc(lease_grow_cap(s, s->n + 1), s->last_id);
        memcpy(g->l, s->l, s->n * sizeof(s->l[0]));
        g->n = s->n;
        void *old;
        RedisModule_ModuleTypeReplaceValue(key, rl_lease_type, g, &old);
        RedisModule_Free(old);
        s = g;
    }
    lease_put(s, id, expire);
    settle(key, s);
}

int rl_lease_del(RedisModuleKey *key, int64_t now, int64_t id)
{
    const struct lease_set *cur;
    if (rl_lease_get(key, &cur) != 0 || cur == NULL)
        return 0;
    struct lease_set *s = (struct lease_set *)cur;
    lease_purge(s, now);
    int i = lease_find(s, id);
    if (i >= 0)
        lease_remove(s, i);
    settle(key, s);
    return i >= 0;
}

/* ---- the packed form ---- */

static char *lease_pack(const void *value, size_t *len)
{
    const struct lease_set *s = value;
    *len = 8 + (size_t)s->n * 16;
    unsigned char *buf = RedisModule_Alloc(*len);
    rl_put_i64(buf, s->last_id);
    for (uint32_t i = 0; i < s->n; i++) {
        rl_put_i64(buf + 8 + (size_t)i * 16, s->l[i].id);
        rl_put_i64(buf + 16 + (size_t)i * 16, s->l[i].expire);
    }
    return (char *)buf;
}

static void *lease_unpack(const char *packed, size_t len, const char **err)
{
    const unsigned char *p = (const unsigned char *)packed;
    if (len < 24 || (len - 8) % 16 != 0 || (len - 8) / 16 > UINT32_MAX) {
        *err = "a lease set is the highest id and 1 or more (id, expiry) pairs of 8-byte integers";
        return NULL;
    }
    uint32_t n = (uint32_t)((len - 8) / 16);
    struct lease_set *s = set_alloc(n, rl_get_i64(p));
    for (uint32_t i = 0; i < n; i++) {
        int64_t id = rl_get_i64(p + 8 + (size_t)i * 16), exp = rl_get_i64(p + 16 + (size_t)i * 16);
        /* lease_find's binary search relies on ascending ids; a new id must exceed them all. */
        if ((i > 0 && id <= s->l[i - 1].id) || id > s->last_id) {
            RedisModule_Free(s);
            *err = "lease ids must be ascending and at most the highest id";
            return NULL;
        }
        lease_put(s, id, exp);
    }
    return s;
}

int rl_lease_replace(RedisModuleKey *key, const char *packed, size_t len, const char **err)
{
    struct lease_set *s = lease_unpack(packed, len, err);
    if (s == NULL)
        return -1;
    RedisModule_ModuleTypeSetValue(key, rl_lease_type, s);
    rl_stats_values(1); /* the old value, if any, went through its type's free */
    settle(key, s);
    return 0;
}

/* ---- the type's callbacks ---- */

static void *lease_rdb_load(RedisModuleIO *io, int encver)
{
    return rl_packed_rdb_load(io, encver, RL_LEASE_ENCVER, "rlim-leas", lease_unpack);
}

static void lease_rdb_save(RedisModuleIO *io, void *value)
{
    rl_packed_rdb_save(io, value, lease_pack);
}

static void lease_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value)
{
    /* An empty set is never stored (settle deletes the key). The server emits the key's
     * PEXPIREAT after this. */
    rl_packed_aof(aof, "RLIMIT.LEASESET", key, value, lease_pack);
}

static size_t lease_mem_usage(const void *value)
{
    return lease_set_bytes(((const struct lease_set *)value)->cap);
}

static void lease_digest(RedisModuleDigest *md, void *value)
{
    const struct lease_set *s = value;
    RedisModule_DigestAddLongLong(md, s->last_id);
    for (uint32_t i = 0; i < s->n; i++) {
        RedisModule_DigestAddLongLong(md, s->l[i].id);
        RedisModule_DigestAddLongLong(md, s->l[i].expire);
    }
    RedisModule_DigestEndSequence(md);
}

static void lease_free(void *value)
{
    RedisModule_Free(value);
    rl_stats_values(-1);
}

int rl_lease_type_create(RedisModuleCtx *ctx)
{
    RedisModuleTypeMethods m = {
        .version = REDISMODULE_TYPE_METHOD_VERSION_1,
        .rdb_load = lease_rdb_load,
        .rdb_save = lease_rdb_save,
        .aof_rewrite = lease_aof_rewrite,
        .mem_usage = lease_mem_usage,
        .digest = lease_digest,
        .free = lease_free,
    };
    /* Type names are exactly 9 characters. */
    rl_lease_type = RedisModule_CreateDataType(ctx, "rlim-leas", RL_LEASE_ENCVER, &m);
    return rl_lease_type != NULL ? REDISMODULE_OK : REDISMODULE_ERR;
}
