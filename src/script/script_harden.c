/* script_harden.c - the holes of the stock Lua libraries closed at the functions scripts call
 * (docs/COMMANDS.md "Scripting", the hardening list). rlimitd links Debian's liblua5.1 and
 * lua-bitop unpatched; where Redis patched its bundled copy, the function a script reaches is
 * wrapped or replaced here instead, with the answer Redis's fixed versions give:
 *
 *   unpack          replaced: Lua 5.1 counts the range in a signed int whose overflow check the
 *                   compiler may drop, and then pushes up to 2^31 values past the stack
 *                   (CVE-2025-46817); here the count is unsigned and checked first.
 *   bit.tohex       a width of INT32_MIN is negated into itself and indexes a stack buffer
 *                   backwards (CVE-2024-31449); it is replaced by -INT32_MAX, which gives the
 *                   same digits Redis's fix gives.
 *   collectgarbage  a script that stops the collector or changes its pause or step size does
 *                   so for itself only: the engine's settings come back after its run.
 *
 * The other entries of the list live where the boundary is: the globals and metatables a script
 * can reach (script_sandbox.c), the chunk names and sizes handed to the parser (script_run.c,
 * script_sandbox.c), the JSON codec (script_json.c), SCRIPT FLUSH (script_run.c). */
#include "script_harden.h"

#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "script_engine.h"
#include "script_stdlib.h"

/* unpack(t [, i [, j]]): t[i], ..., t[j] (j defaults to #t), as Lua 5.1's, with the count of
 * results taken as j - i in unsigned arithmetic and checked against the stack before anything
 * is pushed. The argument errors are Lua's own (luaL_opt*), naming 'unpack'. */
static int l_unpack(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int i = luaL_optint(L, 2, 1);
    int e = luaL_opt(L, luaL_checkint, 3, (int)lua_objlen(L, 1));
    if (i > e)
        return 0;
    unsigned n = (unsigned)e - (unsigned)i; /* the number of results minus one */
    if (n >= (unsigned)INT_MAX || !lua_checkstack(L, (int)(n + 1)))
        return luaL_error(L, "too many results to unpack");
    for (unsigned k = 0; k <= n; k++)
        lua_rawgeti(L, 1, (int)((unsigned)i + k));
    return (int)(n + 1);
}

/* The 32-bit value LuaBitOp's barg reads from a number: the low word of n + 2^52 + 2^51. */
static int32_t bitop_arg(lua_Number n)
{
    double d = (double)n + 6755399441055744.0;
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    return (int32_t)(uint32_t)bits;
}

/* bit.tohex(x [, n]): LuaBitOp's, with a width of INT32_MIN (any number that reads as it, such
 * as -2^31 or 2^31) passed on as -INT32_MAX: upper case and eight digits, as Redis answers. */
static int l_tohex(lua_State *L)
{
    if (lua_isnumber(L, 2) && bitop_arg(lua_tonumber(L, 2)) == INT32_MIN) {
        lua_pushnumber(L, -(lua_Number)INT32_MAX);
        lua_replace(L, 2);
    }
    return original(L)(L);
}

/* collectgarbage: Lua's own (wrap), noting the options that change how the collector runs for
 * every script of the state after this one; script_run restores them (harden_gc_restore). */
static int l_collectgarbage(lua_State *L)
{
    const char *opt = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    if (opt != NULL && (strcmp(opt, "stop") == 0 || strcmp(opt, "setpause") == 0 ||
                        strcmp(opt, "setstepmul") == 0))
        engine_of(L)->gc_tuned = 1;
    return original(L)(L);
}

void harden_gc_restore(struct engine *e)
{
    lua_gc(e->L, LUA_GCRESTART, 0);
    lua_gc(e->L, LUA_GCSETPAUSE, e->small_pause ? GC_PAUSE_SMALL : GC_PAUSE);
    lua_gc(e->L, LUA_GCSETSTEPMUL, GC_STEPMUL);
    e->gc_tuned = 0;
}

void harden_libs(lua_State *L)
{
    lua_pushcfunction(L, l_unpack);
    lua_setglobal(L, "unpack");
    wrap(L, LUA_GLOBALSINDEX, "collectgarbage", l_collectgarbage);
    wrap_lib_fn(L, "bit", "tohex", l_tohex);
}
