/* script_lua.c - the Lua engine behind EVAL: one Lua 5.1 state per thread, sandboxed as Redis 7
 * sandboxes its own, with the `redis` library and Redis's conversions between Lua values and
 * replies (docs/COMMANDS.md, Scripting, DESIGN.md "Scripting").
 *
 * Sandbox. Redis 7 patches its Lua to make tables read-only; Debian's liblua5.1 has no such
 * patch, so rlimitd gets the same behaviour from proxies: the globals table every script sees
 * (LUA_GLOBALSINDEX, also _G) is an empty table whose metatable reads from a whitelist of
 * Redis 7.0's globals and refuses new or unknown names, and each library table (string, math,
 * table, redis, cjson, bit, cmsgpack, struct, coroutine) is likewise an empty proxy over the
 * real one. rawset,
 * setmetatable and table.insert refuse the proxies and the real tables. Bytecode never loads:
 * loadstring and load compile text only.
 *
 * Proxies cost two table lookups per access, so a script runs without them when its compiled
 * code shows it cannot write where they guard (script_bytecode.h): without SETGLOBAL its
 * functions' environment is W itself, and without SETTABLE either and without naming _G, load
 * or loadstring (the ways to reach G or code not scanned) it is D, W with the real library
 * tables. Such a script writes tables only through table constructors and C functions, and
 * the C functions that write a table argument (rawset, setmetatable, table.insert) refuse them.
 *
 * Memory: each state allocates through script_state.c's counting allocator. */
#include "rlimitd/script.h"
#include "rlimitd/alloc.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua-bitop.h>
#include <lua-cjson.h>

#include "rlimitd/clock.h"
#include "rlimitd/log.h"
#include "rlimitd/util.h"
#include "rlimitd/reply.h"
#include "script_bytecode.h"
#include "script_cmsgpack.h"
#include "script_kill.h"
#include "script_redis.h"
#include "script_state.h"
#include "script_stdlib.h"
#include "script_struct.h"

/* ---- sandbox ---- */

static int ro_newindex(lua_State *L)
{
    return luaL_error(L, "Attempt to modify a readonly table");
}

/* W's __index: only reached for a name W does not hold. */
static int globals_index(lua_State *L)
{
    const char *name = lua_tostring(L, 2);
    return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                      name ? name : "?");
}

static int is_readonly(lua_State *L, int idx)
{
    struct engine *e = engine_of(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->ro_ref);
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    int ro = lua_toboolean(L, -1);
    lua_pop(L, 2);
    return ro;
}

/* Replaces argument 1, when it is a proxy, with the table it shows: a library proxy its real
 * table, G the whitelist W. Returns 1 if it did. */
static int see_through(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, engine_of(L)->ro_ref);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return 0;
    }
    lua_replace(L, 1);
    lua_pop(L, 1);
    return 1;
}

/* pairs, next, rawget, table.foreach and cjson.encode: the functions that read a table's own
 * contents (not through __index) see through proxies, so a script reads the globals and
 * libraries as it would in Redis. */
static int l_see_through(lua_State *L)
{
    see_through(L);
    return original(L)(L);
}

/* A library table has no metatable; G's stays what its __metatable shows; a string's is shown
 * read-only (open_libs). */
static int l_getmetatable(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TSTRING) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, engine_of(L)->strmt_ref);
        return 1;
    }
    if (lua_type(L, 1) == LUA_TTABLE && lua_topointer(L, 1) != engine_of(L)->g &&
        see_through(L)) {
        lua_pushnil(L);
        return 1;
    }
    return original(L)(L);
}

static int l_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (is_readonly(L, 1))
        return raw_error(L, "Attempt to modify a readonly table");
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* table.insert: the one table function that can add to a table it did not create. The original
 * runs in this call's frame, so its errors read exactly as when scripts call it directly; a
 * read-only table is refused where the original would first write (after its argument checks,
 * as Redis's patched Lua refuses it). */
static int l_tinsert(lua_State *L)
{
    int n = lua_gettop(L);
    if (lua_type(L, 1) == LUA_TTABLE && (n == 2 || (n == 3 && lua_isnumber(L, 2))) &&
        is_readonly(L, 1))
        return raw_error(L, "Attempt to modify a readonly table");
    return original(L)(L);
}

static int l_setmetatable(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (is_readonly(L, 1))
        return raw_error(L, "Attempt to modify a readonly table");
    int t = lua_type(L, 2);
    luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
    if (luaL_getmetafield(L, 1, "__metatable"))
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* The chunk name Lua would print for a string source (luaO_chunkid's rules, LUA_IDSIZE 60). */
static void chunk_id(char *out, size_t outlen, const char *src)
{
    if (src[0] == '=') {
        snprintf(out, outlen, "%.59s", src + 1);
    } else if (src[0] == '@') {
        size_t l = strlen(src + 1);
        if (l > 43)
            snprintf(out, outlen, "...%s", src + 1 + l - 43);
        else
            snprintf(out, outlen, "%s", src + 1);
    } else {
        size_t len = strcspn(src, "\n\r");
        if (len > 43)
            len = 43;
        if (src[len] != '\0')
            snprintf(out, outlen, "[string \"%.*s...\"]", (int)len, src);
        else
            snprintf(out, outlen, "[string \"%s\"]", src);
    }
}

/* Loads text only: a binary chunk (ESC first) fails as Redis's Lua fails it, parsed as text. */
static int load_text(lua_State *L, const char *s, size_t n, const char *name)
{
    if (n > 0 && s[0] == '\033') {
        char id[80];
        chunk_id(id, sizeof(id), name);
        lua_pushnil(L);
        lua_pushfstring(L, "%s:1: unexpected symbol near 'char(27)'", id);
        return 2;
    }
    if (luaL_loadbuffer(L, s, n, name) != 0) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    return 1;
}

static int l_loadstring(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    const char *name = luaL_optstring(L, 2, s);
    return load_text(L, s, n, name);
}

static int l_load(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    const char *name = luaL_optstring(L, 2, "=(load)");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (;;) {
        lua_pushvalue(L, 1);
        lua_call(L, 0, 1);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        if (!lua_isstring(L, -1))
            return luaL_error(L, "reader function must return a string");
        if (lua_objlen(L, -1) == 0) {
            lua_pop(L, 1);
            break;
        }
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    return load_text(L, s, n, name);
}

/* Replaces the table at the top with a read-only proxy over it, and records the proxy. */
static void make_proxy(lua_State *L, struct engine *e)
{
    lua_newtable(L);                /* real proxy */
    lua_newtable(L);                /* real proxy mt */
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);        /* real proxy */
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->ro_ref);
    lua_pushvalue(L, -2);           /* proxy */
    lua_pushvalue(L, -4);           /* real */
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_remove(L, -2);              /* proxy */
}

/* __redis__err__handler, a global Redis 7.0 defines for its own use and scripts can call: the
 * error as a table, {err = "ERR " .. tostring(error)} or the table given, with the source and
 * line of the function that raised it (the caller, or its caller when that is a C function). */
static int l_err_handler_global(lua_State *L)
{
    lua_settop(L, 1);
    if (!lua_istable(L, 1)) {
        lua_getglobal(L, "tostring");
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        lua_pushliteral(L, "ERR ");
        lua_insert(L, -2);
        lua_concat(L, 2);
        lua_createtable(L, 0, 3);
        lua_insert(L, -2);
        lua_setfield(L, -2, "err");
        lua_replace(L, 1);
    } else if (is_readonly(L, 1)) {
        return raw_error(L, "Attempt to modify a readonly table");
    }
    lua_Debug ar;
    if (raiser(L, &ar)) {
        lua_pushstring(L, ar.source);
        lua_setfield(L, 1, "source");
        lua_pushinteger(L, ar.currentline);
        lua_setfield(L, 1, "line");
    }
    return 1;
}

/* Redis 7.0's globals (the libraries, cmsgpack and struct among them, are added in open_libs). */
static const char *const visible[] = {
    "_VERSION", "assert", "collectgarbage", "error", "gcinfo", "getmetatable", "ipairs",
    "next", "pairs", "rawequal", "rawget", "select", "tonumber", "tostring", "type",
    "unpack", NULL,
};

static int open_libs(lua_State *L)
{
    struct engine *e = engine_of(L);
    lua_newtable(L);
    e->ro_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    e->fns_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    e->flags_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    /* The standard libraries Redis opens, into the real globals. */
    static const luaL_Reg libs[] = {
        {"", luaopen_base},       {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
        {"cjson", luaopen_cjson}, {"bit", luaopen_bit},
        {"cmsgpack", luaopen_cmsgpack}, {"struct", luaopen_struct},
    };
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        lua_pushcfunction(L, libs[i].func);
        lua_pushstring(L, libs[i].name);
        lua_call(L, 1, 1);
        /* lua-cjson returns its table without setting a global; the others set it too. */
        if (libs[i].name[0] != '\0' && lua_istable(L, -1))
            lua_setglobal(L, libs[i].name);
        else
            lua_pop(L, 1);
    }
    lua_getglobal(L, LUA_STRLIBNAME);
    wrap(L, lua_gettop(L), "format", l_format);
    lua_getglobal(L, LUA_TABLIBNAME);
    wrap(L, lua_gettop(L), "foreach", l_see_through);
    lua_getglobal(L, "cjson");
    wrap(L, lua_gettop(L), "encode", l_see_through);
    lua_pop(L, 3);
    wrap(L, LUA_GLOBALSINDEX, "pairs", l_see_through);
    wrap(L, LUA_GLOBALSINDEX, "next", l_see_through);
    wrap(L, LUA_GLOBALSINDEX, "rawget", l_see_through);
    wrap(L, LUA_GLOBALSINDEX, "getmetatable", l_getmetatable);
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_pushcfunction(L, l_random);
    lua_setfield(L, -2, "random");
    lua_pushcfunction(L, l_randomseed);
    lua_setfield(L, -2, "randomseed");
    lua_pop(L, 1);

    redis_lib_open(L);

    /* The whitelist W the globals proxy reads. */
    lua_newtable(L);
    int w = lua_gettop(L);
    for (int i = 0; visible[i] != NULL; i++) {
        lua_getglobal(L, visible[i]);
        lua_setfield(L, w, visible[i]);
    }
    wrap(L, w, "tonumber", l_tonumber);
    lua_pushcfunction(L, l_rawset);
    lua_setfield(L, w, "rawset");
    lua_pushcfunction(L, l_pcall_global);
    lua_setfield(L, w, "pcall");
    lua_pushcfunction(L, l_xpcall_global);
    lua_setfield(L, w, "xpcall");
    lua_pushcfunction(L, l_err_handler_global);
    lua_setfield(L, w, "__redis__err__handler");
    lua_pushcfunction(L, l_setmetatable);
    lua_setfield(L, w, "setmetatable");
    lua_pushcfunction(L, l_loadstring);
    lua_setfield(L, w, "loadstring");
    lua_pushcfunction(L, l_load);
    lua_setfield(L, w, "load");
    static const char *const tables[] = {"string", "table", "math", "cjson", "bit", "redis",
                                         "coroutine", "cmsgpack", "struct", NULL};
    for (int i = 0; tables[i] != NULL; i++) {
        lua_getglobal(L, tables[i]);
        make_proxy(L, e);
        lua_setfield(L, w, tables[i]);
    }
    /* D: W with the real library tables, for scripts that cannot write to them. The real
     * tables join the read-only set, and table.insert checks it. */
    lua_newtable(L);
    int d = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, w) != 0) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, d);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->ro_ref);
    for (int i = 0; tables[i] != NULL; i++) {
        lua_getglobal(L, tables[i]);
        lua_pushvalue(L, -1);
        lua_setfield(L, d, tables[i]);
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
    }
    lua_pushvalue(L, d);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_getglobal(L, LUA_TABLIBNAME);
    wrap(L, lua_gettop(L), "insert", l_tinsert);
    lua_pop(L, 1);

    /* The string metatable's __index is the real string table: hide the metatable so that
     * table cannot be reached and changed through it. What getmetatable('') shows instead is
     * a read-only {__index = <string's proxy>}. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);
    lua_createtable(L, 0, 1);
    lua_getfield(L, w, LUA_STRLIBNAME);
    lua_setfield(L, -2, "__index");
    make_proxy(L, e);
    e->strmt_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    /* W's own metatable turns a read of an unknown name into Redis's error; a known name is
     * found by Lua's table lookup, without a C call. */
    lua_newtable(L);
    lua_pushcfunction(L, globals_index);
    lua_setfield(L, -2, "__index");
    lua_pushvalue(L, -1);
    lua_setmetatable(L, d);
    lua_setmetatable(L, w);

    /* The globals proxy G: empty; reads go to W, writes fail. */
    lua_newtable(L);
    int g = lua_gettop(L);
    lua_newtable(L);
    lua_pushvalue(L, w);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_newtable(L); /* what getmetatable(_G) shows: an empty read-only table */
    make_proxy(L, e);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, g);
    lua_pushvalue(L, g);
    lua_setfield(L, w, "_G");
    lua_pushvalue(L, g);
    lua_setfield(L, d, "_G");
    e->g = lua_topointer(L, g);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->ro_ref);
    lua_pushvalue(L, g);
    lua_pushvalue(L, w);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_pushvalue(L, w);
    e->globals_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, d);
    e->direct_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_replace(L, LUA_GLOBALSINDEX); /* from here on every chunk sees G */
    lua_pop(L, 2);                    /* W, D */
    return 0;
}

static struct fn_slot *fn_slot_of(struct engine *e, const char *sha)
{
    char c = sha[0];
    return &e->fns[(c <= '9' ? c - '0' : c - 'a' + 10) & (FN_SLOTS - 1)];
}

/* The slot of sha, filled from the registry's tables if need be, or NULL if this engine has
 * not compiled sha (since the last SCRIPT FLUSH). */
static struct fn_slot *fn_find(struct engine *e, const char *sha)
{
    struct fn_slot *slot = fn_slot_of(e, sha);
    if (slot->ref != 0 && memcmp(slot->sha, sha, 40) == 0)
        return slot;
    lua_State *L = e->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->flags_ref);
    lua_getfield(L, -1, sha);
    int flags = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : -1;
    lua_pop(L, 2);
    if (flags < 0)
        return NULL;
    if (slot->ref != 0)
        luaL_unref(L, LUA_REGISTRYINDEX, slot->ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->fns_ref);
    lua_getfield(L, -1, sha);
    slot->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
    memcpy(slot->sha, sha, 40);
    slot->flags = flags;
    return slot;
}

/* Forgets every slot (SCRIPT FLUSH). */
static void fn_slots_clear(struct engine *e)
{
    for (int i = 0; i < FN_SLOTS; i++) {
        if (e->fns[i].ref != 0)
            luaL_unref(e->L, LUA_REGISTRYINDEX, e->fns[i].ref);
        e->fns[i].ref = 0;
    }
}

static struct engine *engine_get(void)
{
    struct engine *e = tl_engine;
    if (e == NULL) {
        e = xcalloc(1, sizeof(*e));
        rbuf_init(&e->reply);
        script_pool_init(&e->pool);
        e->L = lua_newstate(lua_alloc, e);
        if (e->L == NULL)
            abort();
        lua_pushcfunction(e->L, open_libs);
        if (lua_pcall(e->L, 0, 0, 0) != 0)
            abort(); /* only out of memory, far below the limit: nothing sane to do */
        lua_pushcfunction(e->L, guard_libs);
        if (lua_pcall(e->L, 0, 0, 0) != 0)
            abort();
        lua_pushcfunction(e->L, err_handler);
        e->handler_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
        lua_pushliteral(e->L, "err");
        e->err_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
        lua_pushliteral(e->L, "ok");
        e->ok_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
        lua_pushliteral(e->L, "KEYS");
        e->keys_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
        lua_pushliteral(e->L, "ARGV");
        e->argv_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
        lua_gc(e->L, LUA_GCSETPAUSE, GC_PAUSE_SMALL);
        e->small_pause = 1;
        e->gen = script_cache_generation();
        e->thread = pthread_self();
        rand48_seed(e, 0);
        static pthread_once_t signal_once = PTHREAD_ONCE_INIT;
        pthread_once(&signal_once, install_kill_signal);
        pthread_mutex_lock(&engines_lock);
        e->next = engines;
        engines = e;
        pthread_mutex_unlock(&engines_lock);
        tl_engine = e;
    }
    uint64_t gen = script_cache_generation();
    if (e->gen != gen) {
        /* SCRIPT FLUSH since this state compiled: drop its functions. */
        fn_slots_clear(e);
        lua_newtable(e->L);
        lua_rawseti(e->L, LUA_REGISTRYINDEX, e->fns_ref);
        lua_newtable(e->L);
        lua_rawseti(e->L, LUA_REGISTRYINDEX, e->flags_ref);
        lua_gc(e->L, LUA_GCCOLLECT, 0);
        e->mem_gc = e->mem;
        e->gen = gen;
    }
    return e;
}

int script_lookup(const char *sha)
{
    struct fn_slot *slot = fn_find(engine_get(), sha);
    return slot != NULL ? slot->flags : -1;
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    rbuf_append(ud, p, n);
    return 0;
}

/* Gives the function just compiled (at the top) the environment its code allows (see the
 * sandbox at the top of this file): G unless its bytecode shows it cannot assign globals. */
static void choose_env(lua_State *L, struct engine *e)
{
    struct rbuf chunk;
    rbuf_init(&chunk);
    unsigned facts = BC_UNKNOWN;
    if (lua_dump(L, dump_writer, &chunk) == 0)
        facts = script_bytecode_scan((const unsigned char *)chunk.p, chunk.len);
    rbuf_free(&chunk);
    if (facts & BC_SETS_GLOBALS)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, facts == 0 ? e->direct_ref : e->globals_ref);
    lua_setfenv(L, -2);
}

int script_compile(const char *sha, const char *body, size_t len, struct rbuf *out)
{
    char err[256];
    unsigned flags;
    if (script_shebang(body, len, &flags, err, sizeof(err)) != 0) {
        reply_error(out, err);
        return -1;
    }
    struct engine *e = engine_get();
    lua_State *L = e->L;
    int rc;
    if (flags & SCRIPT_FLAG_SHEBANG) {
        /* The shebang line becomes a comment, so line numbers stay the script's. */
        char *copy = xmalloc(len);
        memcpy(copy, body, len);
        copy[0] = copy[1] = '-';
        rc = luaL_loadbuffer(L, copy, len, "@user_script");
        free(copy);
    } else if (len > 0 && body[0] == '\033') {
        lua_pushliteral(L, "user_script:1: unexpected symbol near 'char(27)'");
        rc = LUA_ERRSYNTAX;
    } else {
        rc = luaL_loadbuffer(L, body, len, "@user_script");
    }
    if (rc != 0) {
        const char *m = lua_tostring(L, -1);
        reply_errorf(out, "ERR Error compiling script (new function): %s", m ? m : "?");
        lua_pop(L, 1);
        return -1;
    }
    choose_env(L, e);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->fns_ref);
    lua_insert(L, -2);
    lua_setfield(L, -2, sha);
    lua_pop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->flags_ref);
    lua_pushinteger(L, (lua_Integer)flags);
    lua_setfield(L, -2, sha);
    lua_pop(L, 1);
    mem_publish(e);
    return (int)flags;
}

/* The length of the value at the top if it is a plain array (a table with no metatable and no
 * key past its length), else -1. */
static int plain_length(lua_State *L)
{
    if (!lua_istable(L, -1))
        return -1;
    if (lua_getmetatable(L, -1)) {
        lua_pop(L, 1);
        return -1;
    }
    size_t len = lua_objlen(L, -1);
    if (len > INT32_MAX)
        return -1;
    if (len == 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)len);
    if (lua_next(L, -2) != 0) {
        lua_pop(L, 2);
        return -1;
    }
    return (int)len;
}

/* Sets env[name] (name a registry reference to the interned key) to the array v, in the table
 * the last script left there when that table is still a plain array: no metatable and no key
 * past its length (what a script can do to it is add keys, remove them or set a metatable, and
 * nothing but env refers to it once its script ended, so a plain array is as good as new). Its
 * strings stay alive between calls, so the same arguments are not allocated again. */
static void set_array(lua_State *L, int env, int name, char **v, const size_t *lens, int n)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, name);
    lua_pushvalue(L, -1);
    lua_rawget(L, env);
    int old = plain_length(L);
    if (old < 0) {
        lua_pop(L, 1);
        lua_createtable(L, n, 0);
    }
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, v[i], lens[i]);
        lua_rawseti(L, -2, i + 1);
    }
    for (int i = n + 1; i <= old; i++) {
        lua_pushnil(L);
        lua_rawseti(L, -2, i);
    }
    if (old >= 0)
        lua_pop(L, 2);
    else
        lua_rawset(L, env);
}

void script_run(const char *sha, script_call_fn call, void *call_ud, int64_t start_ns,
                char **keys, const size_t *klens, int nkeys, char **args, const size_t *alens,
                int nargs, struct rbuf *out)
{
    struct engine *e = engine_get();
    lua_State *L = e->L;
    int base = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->handler_ref);
    struct fn_slot *slot = fn_find(e, sha); /* the caller looked it up: never NULL */
    lua_rawgeti(L, LUA_REGISTRYINDEX, slot->ref);
    /* KEYS and ARGV go to the environment the function reads its globals from (W behind G). */
    lua_getfenv(L, -1);
    if (lua_topointer(L, -1) == e->g) {
        lua_pop(L, 1);
        lua_rawgeti(L, LUA_REGISTRYINDEX, e->globals_ref);
    }
    set_array(L, base + 3, e->keys_ref, keys, klens, nkeys);
    set_array(L, base + 3, e->argv_ref, args, alens, nargs);
    lua_pop(L, 1);
    e->sha = sha;
    e->call = call;
    e->call_ud = call_ud;
    e->handled = 0;
    atomic_store(&e->wrote, 0);
#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
    fuzz_budget_start(L);
#else
    lua_sethook(L, NULL, 0, 0); /* a kill's hook from an earlier run; before run_start */
#endif
    int64_t start = start_ns;
    if (start <= e->last_start)
        start = e->last_start + 1;
    e->last_start = e->cur_start = start;
    atomic_store(&e->run_start, start); /* after wrote: SCRIPT KILL reads them in this order */
    int rc = lua_pcall(L, 0, 1, base + 1);
    atomic_store(&e->run_start, 0);
    e->cur_start = 0;
    e->call = NULL;
    e->call_ud = NULL;
    if (rc == 0) {
        lua_to_reply(L, -1, out, 0);
    } else if (e->handled && lua_isstring(L, -1)) {
        reply_error(out, lua_tostring(L, -1));
    } else {
        /* Out of memory, or the handler itself failed (e.g. Lua's stack overflow). */
        const char *m = lua_tostring(L, -1);
        reply_errorf(out, "ERR %s script: %s.", m ? m : "error running script", sha);
    }
    lua_settop(L, base);
    /* Garbage is collected incrementally as scripts allocate; a script that left a large
     * heap behind (a failed memory bomb, a big reply) gets a full collection now, so the next
     * script starts with the memory it is allowed. */
    if (e->mem < e->mem_gc)
        e->mem_gc = e->mem;
    if (e->mem > e->mem_gc + GC_FULL_AFTER) {
        lua_gc(L, LUA_GCCOLLECT, 0);
        e->mem_gc = e->mem;
    }
    if (!e->small_pause && e->mem < GC_SMALL_HEAP / 2) {
        lua_gc(L, LUA_GCSETPAUSE, GC_PAUSE_SMALL);
        e->small_pause = 1;
    }
    mem_publish(e);
}
