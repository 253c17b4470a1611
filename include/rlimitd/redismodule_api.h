/* redismodule_api.h - the part of the Redis module API that rlimit.so uses, declared by us.
 *
 * Debian ships no redismodule.h, and the module needs only a few dozen entry points, so they are
 * declared here from the documented API (redis.io "Modules API reference"). A module does not
 * link against the server: at load, the server passes a lookup function in the first word of the
 * context, and every entry point is fetched by name ("RedisModule_OpenKey", ...) into a function
 * pointer. RLIMIT_RM_API lists them once; the macros below turn that one list into the pointer
 * declarations, their definitions (module_api.c) and the lookups (rm_api_load), so the three
 * cannot disagree. Valkey answers the same names. */
#ifndef RLIMITD_REDISMODULE_API_H
#define RLIMITD_REDISMODULE_API_H

#include <stddef.h>
#include <stdint.h>

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

/* OpenKey modes. */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

/* KeyType answers used here. */
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_MODULE 6

/* GetExpire/GetAbsExpire when the key has no expiry. */
#define REDISMODULE_NO_EXPIRE -1

/* GetContextFlags bits used here. */
#define REDISMODULE_CTX_FLAGS_CLUSTER (1 << 5)

/* SetModuleOptions: rdb_load reports bad input through IsIOError instead of the server
 * panicking, so a crafted RESTORE payload is an error reply, not a crash. */
#define REDISMODULE_OPTIONS_HANDLE_IO_ERRORS (1 << 0)

/* CallReplyType answers used here. */
#define REDISMODULE_REPLY_ARRAY 3

/* Log levels. */
#define REDISMODULE_LOGLEVEL_WARNING "warning"
#define REDISMODULE_LOGLEVEL_NOTICE "notice"

#define REDISMODULE_ERRORMSG_WRONGTYPE                                                             \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

typedef long long mstime_t;
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleIO RedisModuleIO;
typedef struct RedisModuleType RedisModuleType;
typedef struct RedisModuleDigest RedisModuleDigest;

typedef struct RedisModuleCommand RedisModuleCommand;
typedef struct RedisModuleCallReply RedisModuleCallReply;

typedef struct RedisModuleInfoCtx RedisModuleInfoCtx;
typedef struct RedisModuleBlockedClient RedisModuleBlockedClient;
typedef uint64_t RedisModuleTimerID;
typedef void (*RedisModuleTimerProc)(RedisModuleCtx *ctx, void *data);
typedef void (*RedisModuleDisconnectFunc)(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc);
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
typedef void (*RedisModuleInfoFunc)(RedisModuleInfoCtx *ctx, int for_crash_report);
typedef void *(*RedisModuleTypeLoadFunc)(RedisModuleIO *rdb, int encver);
typedef void (*RedisModuleTypeSaveFunc)(RedisModuleIO *rdb, void *value);
typedef void (*RedisModuleTypeRewriteFunc)(RedisModuleIO *aof, RedisModuleString *key,
                                           void *value);
typedef size_t (*RedisModuleTypeMemUsageFunc)(const void *value);
typedef void (*RedisModuleTypeDigestFunc)(RedisModuleDigest *digest, void *value);
typedef void (*RedisModuleTypeFreeFunc)(void *value);

/* Version 1 of the type-methods structure: the server reads only these fields when version is
 * 1, so the later optional callbacks (aux data, defrag, ...) need not be declared. */
#define REDISMODULE_TYPE_METHOD_VERSION_1 1
typedef struct RedisModuleTypeMethods {
    uint64_t version;
    RedisModuleTypeLoadFunc rdb_load;
    RedisModuleTypeSaveFunc rdb_save;
    RedisModuleTypeRewriteFunc aof_rewrite;
    RedisModuleTypeMemUsageFunc mem_usage;
    RedisModuleTypeDigestFunc digest;
    RedisModuleTypeFreeFunc free;
} RedisModuleTypeMethods;

/* SetCommandInfo (Redis >= 7.0), used here only for the arity: with no history, key specs or
 * arguments the server reads no array, so the element sizes in the version block are not
 * needed, and the key spec given to CreateCommand stays. */
typedef struct RedisModuleCommandInfoVersion {
    int version; /* 1 */
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} RedisModuleCommandInfoVersion;

typedef struct RedisModuleCommandInfo {
    const RedisModuleCommandInfoVersion *version;
    const char *summary;
    const char *complexity;
    const char *since;
    void *history;   /* RedisModuleCommandHistoryEntry[], unused */
    const char *tips;
    int arity;       /* as COMMAND INFO shows it: N exactly, -N at least N */
    void *key_specs; /* RedisModuleCommandKeySpec[], unused */
    void *args;      /* RedisModuleCommandArg[], unused */
} RedisModuleCommandInfo;

/* X(return type, name without the RedisModule_ prefix, parameter list) */
#define RLIMIT_RM_API(X)                                                                           \
    X(void, SetModuleAttribs, (RedisModuleCtx * ctx, const char *name, int ver, int apiver))      \
    X(int, IsModuleNameBusy, (const char *name))                                                   \
    X(void, SetModuleOptions, (RedisModuleCtx * ctx, int options))                                 \
    X(RedisModuleCommand *, GetCommand, (RedisModuleCtx * ctx, const char *name))                  \
    X(int, SetCommandInfo, (RedisModuleCommand * command, const RedisModuleCommandInfo *info))     \
    X(int, CreateCommand,                                                                          \
      (RedisModuleCtx * ctx, const char *name, RedisModuleCmdFunc cmdfunc, const char *strflags,  \
       int firstkey, int lastkey, int keystep))                                                    \
    X(RedisModuleType *, CreateDataType,                                                           \
      (RedisModuleCtx * ctx, const char *name, int encver, RedisModuleTypeMethods *typemethods))  \
    X(int, GetContextFlags, (RedisModuleCtx * ctx))                                                \
    X(int, IsKeysPositionRequest, (RedisModuleCtx * ctx))                                          \
    X(void, KeyAtPos, (RedisModuleCtx * ctx, int pos))                                             \
    X(void, Log, (RedisModuleCtx * ctx, const char *level, const char *fmt, ...))                  \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx * ctx, RedisModuleString * name, int mode))       \
    X(void, CloseKey, (RedisModuleKey * key))                                                      \
    X(int, KeyType, (RedisModuleKey * key))                                                        \
    X(RedisModuleType *, ModuleTypeGetType, (RedisModuleKey * key))                                \
    X(void *, ModuleTypeGetValue, (RedisModuleKey * key))                                          \
    X(int, ModuleTypeSetValue, (RedisModuleKey * key, RedisModuleType * mt, void *value))          \
    X(int, ModuleTypeReplaceValue,                                                                 \
      (RedisModuleKey * key, RedisModuleType * mt, void *new_value, void **old_value))            \
    X(int, SetAbsExpire, (RedisModuleKey * key, mstime_t expire))                                  \
    X(int, StringSet, (RedisModuleKey * key, RedisModuleString * str))                             \
    X(char *, StringDMA, (RedisModuleKey * key, size_t *len, int mode))                             \
    X(mstime_t, GetAbsExpire, (RedisModuleKey * key))                                              \
    X(RedisModuleString *, CreateString, (RedisModuleCtx * ctx, const char *ptr, size_t len))      \
    X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * str))                           \
    X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len))                     \
    X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *err))                                \
    X(int, ReplyWithSimpleString, (RedisModuleCtx * ctx, const char *msg))                         \
    X(int, ReplyWithArray, (RedisModuleCtx * ctx, long len))                                       \
    X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long ll))                                \
    X(int, ReplyWithNull, (RedisModuleCtx * ctx))                                                  \
    X(int, DeleteKey, (RedisModuleKey * key))                                                      \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx * ctx, const char *buf, size_t len))             \
    X(int, RegisterInfoFunc, (RedisModuleCtx * ctx, RedisModuleInfoFunc cb))                       \
    X(int, InfoAddSection, (RedisModuleInfoCtx * ctx, const char *name))                           \
    X(int, InfoAddFieldULongLong,                                                                  \
      (RedisModuleInfoCtx * ctx, const char *field, unsigned long long value))                     \
    X(int, Replicate, (RedisModuleCtx * ctx, const char *cmdname, const char *fmt, ...))          \
    X(int, ReplicateVerbatim, (RedisModuleCtx * ctx))                                              \
    X(void, EmitAOF, (RedisModuleIO * io, const char *cmdname, const char *fmt, ...))             \
    X(void, SaveSigned, (RedisModuleIO * io, int64_t value))                                       \
    X(int64_t, LoadSigned, (RedisModuleIO * io))                                                   \
    X(void, SaveStringBuffer, (RedisModuleIO * io, const char *str, size_t len))                   \
    X(char *, LoadStringBuffer, (RedisModuleIO * io, size_t *lenptr))                              \
    X(int, IsIOError, (RedisModuleIO * io))                                                        \
    X(void, LogIOError, (RedisModuleIO * io, const char *levelstr, const char *fmt, ...))          \
    X(void, DigestAddLongLong, (RedisModuleDigest * md, long long ll))                             \
    X(void, DigestEndSequence, (RedisModuleDigest * md))                                           \
    X(void *, Alloc, (size_t bytes))                                                               \
    X(void, Free, (void *ptr))                                                                     \
    X(RedisModuleCallReply *, Call, (RedisModuleCtx * ctx, const char *cmd, const char *fmt, ...)) \
    X(int, CallReplyType, (RedisModuleCallReply * reply))                                          \
    X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply * reply, size_t idx))   \
    X(void, FreeCallReply, (RedisModuleCallReply * reply))                                         \
    X(RedisModuleString *, CreateStringFromString,                                                 \
      (RedisModuleCtx * ctx, const RedisModuleString *str))                                        \
    X(RedisModuleBlockedClient *, BlockClient,                                                     \
      (RedisModuleCtx * ctx, RedisModuleCmdFunc reply_callback,                                    \
       RedisModuleCmdFunc timeout_callback, void (*free_privdata)(RedisModuleCtx *, void *),       \
       long long timeout_ms))                                                                      \
    X(int, UnblockClient, (RedisModuleBlockedClient * bc, void *privdata))                         \
    X(RedisModuleBlockedClient *, GetBlockedClientHandle, (RedisModuleCtx * ctx))                  \
    X(void, SetDisconnectCallback,                                                                 \
      (RedisModuleBlockedClient * bc, RedisModuleDisconnectFunc callback))                         \
    X(RedisModuleCtx *, GetThreadSafeContext, (RedisModuleBlockedClient * bc))                     \
    X(void, FreeThreadSafeContext, (RedisModuleCtx * ctx))                                         \
    X(RedisModuleTimerID, CreateTimer,                                                             \
      (RedisModuleCtx * ctx, mstime_t period, RedisModuleTimerProc callback, void *data))          \
    X(int, StopTimer, (RedisModuleCtx * ctx, RedisModuleTimerID id, void **data))

#define RLIMIT_RM_DECLARE(ret, name, params) extern ret(*RedisModule_##name) params;
RLIMIT_RM_API(RLIMIT_RM_DECLARE)
#undef RLIMIT_RM_DECLARE

/* Fetches every entry point of RLIMIT_RM_API and registers the module under name. Call first
 * thing in RedisModule_OnLoad. Returns REDISMODULE_ERR if the server lacks one of them (too old
 * a server): the caller then refuses to load rather than crash later on a NULL pointer; and if a
 * module of that name is already loaded (a second MODULE LOAD of the same file runs OnLoad in the
 * same, already-loaded library: the caller must then leave its globals alone). */
int rm_api_load(RedisModuleCtx *ctx, const char *name, int ver);

#endif
