/* script_stdlib.h - Lua's standard library as scripts see it: replacing a library's C function
 * by a wrapper that runs the original (used by the sandbox and the kill path too), tonumber
 * and string.format with shortcuts, math.random as Redis's (script_stdlib.c). Private to
 * src/script. */
#ifndef RLIMITD_SCRIPT_STDLIB_H
#define RLIMITD_SCRIPT_STDLIB_H

#include <lua.h>
#include <stdint.h>

struct engine;

/* Replaces the C function t[name] (t at the absolute or pseudo index idx) with wrapper, which
 * runs the original through original(). */
void wrap(lua_State *L, int idx, const char *name, lua_CFunction wrapper);
/* wrap() on lib.name in the real library table (the one its proxy reads). */
void wrap_lib_fn(lua_State *L, const char *lib, const char *name, lua_CFunction fn);

/* The original a wrapper runs: its last upvalue. */
static inline lua_CFunction original(lua_State *L)
{
    int i = 1;
    while (lua_type(L, lua_upvalueindex(i + 1)) != LUA_TNONE)
        i++;
    return lua_tocfunction(L, lua_upvalueindex(i));
}

/* tonumber and string.format with their shortcuts (each wraps Lua's own). */
int l_tonumber(lua_State *L);
int l_format(lua_State *L);
/* math.random and math.randomseed as Redis's, over the engine's rand48 state. */
int l_random(lua_State *L);
int l_randomseed(lua_State *L);
void rand48_seed(struct engine *e, int32_t seed);

#endif
