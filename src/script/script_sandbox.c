/* script_sandbox.c - the globals and libraries a script sees.
 *
 * Sandbox. Redis 7 patches its Lua to make tables read-only; Debian's liblua5.1 has no such
 * patch, so rlimitd gets the same behaviour from proxies: the globals table every script sees
 * (LUA_GLOBALSINDEX, also _G) is an empty table whose metatable reads from a whitelist of
 * Redis 7.0's globals and refuses new or unknown names, and each library table (string, math,
 * table, redis, cjson, bit, cmsgpack, struct, coroutine) is likewise an empty proxy over the
 * real one. rawset, setmetatable and table.insert refuse the proxies and the real tables.
 * Bytecode never loads: loadstring and load compile text only.
 *
 * Proxies cost two table lookups per access, so a script runs without them when its compiled
 * code shows it cannot write where they guard (script_bytecode.h): without SETGLOBAL its
 * functions' environment is W itself, and without SETTABLE either and without naming _G, load
 * or loadstring (the ways to reach G or code not scanned) it is D, W with the real library
 * tables. Such a script writes tables only through table constructors and C functions, and
 * the C functions that write a table argument (rawset, setmetatable, table.insert) refuse them. */
#include "script_sandbox.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include <lua-bitop.h>
#include <lua-cjson.h>

#include "script_cmsgpack.h"
#include "script_harden.h"
#include "script_json.h"
#include "script_kill.h"
#include "script_redis.h"
#include "script_engine.h"
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

/* next, rawget, table.foreach and cjson.encode: the functions that read a table's own
 * contents (not through __index) see through proxies, so a script reads the globals and
 * libraries as it would in Redis. */
static int l_see_through(lua_State *L)
{
    see_through(L);
    return original(L)(L);
}

/* pairs(t): Lua's, except over a proxy. Lua's pairs hands back its argument as the loop's state,
 * so a pairs that saw through a proxy would give the script the table the proxy guards, which
 * has no metatable to refuse a write: one script could then change what every later script of
 * the state sees (string.rep, a global). Over a proxy the state stays the proxy and the
 * iterator is the wrapped next, which reads through it. Upvalues: Lua's next, the wrapped one. */
static int l_pairs(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_rawgeti(L, LUA_REGISTRYINDEX, engine_of(L)->ro_ref);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    int proxy = lua_istable(L, -1); /* a proxy maps to what it shows, a guarded table to true */
    lua_pushvalue(L, lua_upvalueindex(proxy ? 2 : 1));
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
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

int compile_chunk(lua_State *L, const char *s, size_t n, const char *name)
{
    char id[80];
    if (n > 0 && s[0] == '\033') {
        chunk_id(id, sizeof(id), name);
        lua_pushfstring(L, "%s:1: unexpected symbol near 'char(27)'", id);
        return LUA_ERRSYNTAX;
    }
    if (n > SCRIPT_SOURCE_MAX) {
        chunk_id(id, sizeof(id), name);
        lua_pushfstring(L, "%s:1: source too large", id);
        return LUA_ERRSYNTAX;
    }
    lua_pushstring(L, name); /* the parser's chunk name stays reachable while it runs */
    int rc = luaL_loadbuffer(L, s, n, name);
    lua_remove(L, -2);
    return rc;
}

/* loadstring and load: a function, or nil and the error text. */
static int load_text(lua_State *L, const char *s, size_t n, const char *name)
{
    if (compile_chunk(L, s, n, name) != 0) {
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

/* load(reader [, name]): the reader's pieces are read to the end before anything is parsed, so
 * no script code runs while the parser works (Lua's own load calls the reader from inside the
 * parser: a reader that collects garbage there freed the parser's chunk name, CVE-2025-49844,
 * and one that streams without end could feed it 2^31 lines, CVE-2025-46819); the source is a
 * string of the state, within its memory limit. */
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

int open_libs(lua_State *L)
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
    harden_libs(L);
    lua_getglobal(L, LUA_STRLIBNAME);
    wrap(L, lua_gettop(L), "format", l_format);
    lua_getglobal(L, LUA_TABLIBNAME);
    wrap(L, lua_gettop(L), "foreach", l_see_through);
    lua_getglobal(L, "cjson");
    json_instrument(L, lua_gettop(L));
    wrap(L, lua_gettop(L), "encode", l_see_through);
    lua_pop(L, 3);
    lua_getglobal(L, "next");
    wrap(L, LUA_GLOBALSINDEX, "next", l_see_through);
    lua_getglobal(L, "next");
    lua_pushcclosure(L, l_pairs, 2);
    lua_setglobal(L, "pairs");
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
