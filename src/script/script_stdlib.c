/* script_stdlib.c - Lua's standard library as scripts see it: the wrapping of a library's C
 * functions, the tonumber and string.format shortcuts, and math.random as Redis's. */
#include "script_stdlib.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rlimitd/util.h"
#include "script_engine.h"

/* ---- wrapped library functions ----
 * A wrapper replaces a library's C function and, after its own work, runs the original on its
 * own frame (same arguments, errors named as the original's). The wrapper closure holds the
 * original's upvalues, which the original reads as its 1..n, and then the original itself. */

/* Replaces the C function t[name] (t at the absolute or pseudo index idx) with wrapper. */
void wrap(lua_State *L, int idx, const char *name, lua_CFunction wrapper)
{
    lua_getfield(L, idx, name);
    int n = 0;
    while (lua_getupvalue(L, -1 - n, n + 1) != NULL)
        n++;
    lua_pushvalue(L, -1 - n);
    lua_pushcclosure(L, wrapper, n + 1);
    lua_setfield(L, idx, name);
    lua_pop(L, 1);
}

/* wrap() on lib.name in the real library table (the one its proxy reads, as the library
 * registered it in _LOADED). */
void wrap_lib_fn(lua_State *L, const char *lib, const char *name, lua_CFunction fn)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, lib);
    luaL_checktype(L, -1, LUA_TTABLE);
    wrap(L, lua_gettop(L), name, fn);
    lua_pop(L, 2);
}

/* tonumber with a shortcut for what scripts mostly convert, a decimal integer of at most 15
 * digits (exact in a double: the value strtod would give), read without strtod; anything else
 * goes to Lua's own function (wrap), so its errors name 'tonumber' as before. */
int l_tonumber(lua_State *L)
{
    if (lua_gettop(L) == 1 && lua_type(L, 1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, 1, &n);
        size_t i = n > 0 && s[0] == '-';
        if (n > i && n - i <= 15) {
            uint64_t v = 0;
            while (i < n && s[i] >= '0' && s[i] <= '9')
                v = v * 10 + (uint64_t)(s[i++] - '0');
            if (i == n) {
                lua_Number d = (lua_Number)v;
                lua_pushnumber(L, s[0] == '-' ? -d : d);
                return 1;
            }
        }
    }
    return original(L)(L);
}

#define FORMAT_OUT 1024 /* string.format's shortcut: the longest result it writes */

/* One "%d" conversion of string.format: flag '0' or none, width of at most two digits. */
struct int_spec {
    int zero, width;
};

/* Reads the spec after a '%' at f; returns its length up to and including 'd', or 0 if it is
 * anything else. */
static size_t int_spec_at(const char *f, const char *end, struct int_spec *sp)
{
    const char *p = f;
    sp->zero = p < end && *p == '0';
    p += sp->zero;
    sp->width = 0;
    for (int i = 0; i < 2 && p < end && *p >= '0' && *p <= '9'; i++)
        sp->width = sp->width * 10 + (*p++ - '0');
    return p < end && *p == 'd' ? (size_t)(p + 1 - f) : 0;
}

/* string.format with a shortcut for a format whose every conversion is "%d" ('0' flag and a
 * width allowed) applied to a number that is an integer below 2^53 in magnitude: written here as
 * sprintf's "%ld" of it would write it. Any other format or argument goes to Lua's own function
 * (wrap), so its errors name 'format' as before. */
int l_format(lua_State *L)
{
    size_t flen;
    const char *f = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &flen) : NULL;
    int fast = f != NULL;
    int arg = 1;
    for (size_t i = 0; fast && i < flen; i++) {
        if (f[i] != '%')
            continue;
        struct int_spec sp;
        size_t n;
        if (i + 1 < flen && f[i + 1] == '%') {
            i++;
        } else if ((n = int_spec_at(f + i + 1, f + flen, &sp)) == 0) {
            fast = 0;
        } else {
            arg++;
            lua_Number v = lua_tonumber(L, arg);
            fast = lua_type(L, arg) == LUA_TNUMBER && v > -9007199254740992.0 &&
                   v < 9007199254740992.0 && v == (lua_Number)(int64_t)v;
            i += n;
        }
    }
    /* The result fits FORMAT_OUT: each conversion writes at most 99 (width) + 17 bytes. */
    if (!fast || flen + (size_t)(arg - 1) * 116 > FORMAT_OUT)
        return original(L)(L);
    char out[FORMAT_OUT], *o = out;
    arg = 1;
    for (size_t i = 0; i < flen; i++) {
        if (f[i] != '%') {
            *o++ = f[i];
            continue;
        }
        if (f[i + 1] == '%') {
            *o++ = '%';
            i++;
            continue;
        }
        struct int_spec sp;
        i += int_spec_at(f + i + 1, f + flen, &sp);
        int64_t v = (int64_t)lua_tonumber(L, ++arg);
        char digits[24];
        size_t nd = util_fmt_i64(digits, v < 0 ? -v : v);
        int pad = sp.width - (int)nd - (v < 0);
        if (!sp.zero)
            for (; pad > 0; pad--)
                *o++ = ' ';
        if (v < 0)
            *o++ = '-';
        for (; pad > 0; pad--)
            *o++ = '0';
        memcpy(o, digits, nd);
        o += nd;
    }
    lua_pushlstring(L, out, (size_t)(o - out));
    return 1;
}

/* ---- math.random as Redis's: rand48 seeded with 0, one sequence per thread's state (Redis
 * has one per server: neither is reproducible across a server's history) ---- */

static int32_t rand48_next(struct engine *e)
{
    e->rand48 = (e->rand48 * 0x5DEECE66Dull + 0xB) & ((1ull << 48) - 1);
    return (int32_t)(e->rand48 >> 17);
}

void rand48_seed(struct engine *e, int32_t seed)
{
    e->rand48 = ((uint64_t)(uint32_t)seed << 16) | 0x330E;
}

int l_random(lua_State *L)
{
    struct engine *e = engine_of(L);
    lua_Number r = (lua_Number)(rand48_next(e) % INT32_MAX) / (lua_Number)INT32_MAX;
    switch (lua_gettop(L)) {
    case 0:
        lua_pushnumber(L, r);
        break;
    case 1: {
        int u = luaL_checkint(L, 1);
        luaL_argcheck(L, 1 <= u, 1, "interval is empty");
        lua_pushnumber(L, floor(r * u) + 1);
        break;
    }
    case 2: {
        int l = luaL_checkint(L, 1);
        int u = luaL_checkint(L, 2);
        luaL_argcheck(L, l <= u, 2, "interval is empty");
        /* u - l + 1 wraps in 32 bits as in Redis's Lua (an int overflow there, which its
         * compiler wraps): computed unsigned here, without the undefined signed overflow. */
        int span = (int)((uint32_t)u - (uint32_t)l + 1u);
        lua_pushnumber(L, floor(r * span) + l);
        break;
    }
    default:
        return luaL_error(L, "wrong number of arguments");
    }
    return 1;
}

int l_randomseed(lua_State *L)
{
    rand48_seed(engine_of(L), (int32_t)luaL_checkint(L, 1));
    return 0;
}
