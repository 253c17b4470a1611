/* module_packed.c - the packed form's integers and the RDB/AOF callbacks of the module's
 * packed types (module_packed.h). */
#include "module_packed.h"
#include "module_stats.h"

void rl_put_i64(unsigned char *p, int64_t v)
{
    for (int b = 0; b < 8; b++)
        p[b] = (unsigned char)((uint64_t)v >> (8 * b));
}

int64_t rl_get_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return (int64_t)v;
}

void *rl_packed_rdb_load(RedisModuleIO *io, int encver, int want, const char *type_name,
                         rl_unpack_fn unpack)
{
    if (encver != want) {
        RedisModule_LogIOError(io, REDISMODULE_LOGLEVEL_WARNING,
                               "rlimit: %s encoding %d is newer than this module", type_name,
                               encver);
        return NULL;
    }
    size_t len;
    char *buf = RedisModule_LoadStringBuffer(io, &len);
    if (RedisModule_IsIOError(io) || buf == NULL)
        return NULL;
    const char *err;
    void *value = unpack(buf, len, &err);
    RedisModule_Free(buf);
    if (value == NULL)
        RedisModule_LogIOError(io, REDISMODULE_LOGLEVEL_WARNING, "rlimit: corrupt %s: %s",
                               type_name, err);
    else
        rl_stats_values(1);
    return value;
}

void rl_packed_rdb_save(RedisModuleIO *io, const void *value, rl_pack_fn pack)
{
    size_t len;
    char *buf = pack(value, &len);
    RedisModule_SaveStringBuffer(io, buf, len);
    RedisModule_Free(buf);
}

void rl_packed_aof(RedisModuleIO *aof, const char *cmd, RedisModuleString *key, const void *value,
                   rl_pack_fn pack)
{
    size_t len;
    char *buf = pack(value, &len);
    RedisModule_EmitAOF(aof, cmd, "sb", key, buf, len);
    RedisModule_Free(buf);
}
