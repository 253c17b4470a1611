/* module_api.c - the Redis module API's function pointers and their lookup at load time
 * (see include/rlimitd/redismodule_api.h for why the declarations are our own). */
#include "rlimitd/redismodule_api.h"

#define RLIMIT_RM_DEFINE(ret, name, params) ret(*RedisModule_##name) params = NULL;
RLIMIT_RM_API(RLIMIT_RM_DEFINE)
#undef RLIMIT_RM_DEFINE

int rm_api_load(RedisModuleCtx *ctx, const char *name, int ver)
{
    /* The documented module ABI: the server stores its GetApi function in the first word of the
     * context handed to RedisModule_OnLoad. */
    int (*get_api)(const char *, void *) = (int (*)(const char *, void *))((void **)ctx)[0];
    const char *missing = NULL;

#define RLIMIT_RM_LOOKUP(ret, fn, params)                                                          \
    if (get_api("RedisModule_" #fn, (void *)&RedisModule_##fn) != REDISMODULE_OK ||                \
        RedisModule_##fn == NULL)                                                                  \
        missing = missing ? missing : "RedisModule_" #fn;
    RLIMIT_RM_API(RLIMIT_RM_LOOKUP)
#undef RLIMIT_RM_LOOKUP

    if (missing != NULL) {
        /* Say which one, so an operator on an old server knows why the load failed. */
        if (RedisModule_Log != NULL)
            RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING,
                            "rlimit: this server lacks %s; Redis >= 7.0 or Valkey is required",
                            missing);
        return REDISMODULE_ERR;
    }
    if (RedisModule_IsModuleNameBusy(name)) {
        RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING,
                        "rlimit: already loaded; a module with data types cannot be loaded "
                        "twice or unloaded, so restart the server to change its arguments");
        return REDISMODULE_ERR;
    }
    RedisModule_SetModuleAttribs(ctx, name, ver, REDISMODULE_APIVER_1);
    return REDISMODULE_OK;
}
