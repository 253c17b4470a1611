/* module_packed.h - the module's values kept as byte strings in RDB and AOF (module_packed.c):
 * little-endian 8-byte integers, and the load/save callbacks every packed type shares. */
#ifndef RLIMITD_MODULE_PACKED_H
#define RLIMITD_MODULE_PACKED_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/redismodule_api.h"

/* A type's value as bytes (RedisModule_Alloc'd, *len set) and back; unpack answers NULL with
 * *err when the bytes are not a valid value. */
typedef char *(*rl_pack_fn)(const void *value, size_t *len);
typedef void *(*rl_unpack_fn)(const char *packed, size_t len, const char **err);

void rl_put_i64(unsigned char *p, int64_t v);
int64_t rl_get_i64(const unsigned char *p);

/* rdb_load: refuses an encoding version other than want, reads the packed string, unpacks it;
 * a failure is logged as "rlimit: ... <type_name> ..." and answers NULL (Redis aborts the load). */
void *rl_packed_rdb_load(RedisModuleIO *io, int encver, int want, const char *type_name,
                         rl_unpack_fn unpack);
void rl_packed_rdb_save(RedisModuleIO *io, const void *value, rl_pack_fn pack);
/* aof_rewrite: one `<cmd> key packed` command that rebuilds the value. */
void rl_packed_aof(RedisModuleIO *aof, const char *cmd, RedisModuleString *key, const void *value,
                   rl_pack_fn pack);

#endif
