/* script_cmsgpack.c - `cmsgpack`, MessagePack for scripts, answering as Redis 7.0's bundled
 * library (lua-cmsgpack 0.4.0) does, byte for byte (docs/COMMANDS.md, Scripting).
 *
 * pack(v1, ...) encodes each value and returns the concatenation. A number that is an integer
 * in int64's range takes the smallest integer encoding; other numbers are float 32 when that
 * holds them exactly (infinities too), else float 64. A table whose keys are exactly 1..n is an
 * array (the empty table too), any other a map in lua_next's order. Tables nested 16 deep, and
 * values of other types, are nil. Strings are str (fixstr, str 8/16/32), never bin.
 * unpack(s) decodes every value in s; unpack_one(s [, offset]) and unpack_limit(s, limit
 * [, offset]) decode one or `limit` values from byte `offset` (0-based) and return first the
 * offset of the next value, or -1 when s is used up. bin and ext types are "Bad data format".
 *
 * The Lua stack is used exactly as Redis's library uses it (the same pushes, and the same
 * luaL_checkstack calls with the same texts, at the same points), so a stack that runs out
 * (LUAI_MAXCSTACK, 8000 slots per call) fails where and as Redis's does: too many arguments or
 * results, input nested about 4000 deep. That bound also bounds the decoder's C recursion
 * (every level of nesting holds at least one more stack slot). Nothing is sized from a count
 * read in the input: a header claiming 2^32 elements fails at the first missing byte. */
#include "script_cmsgpack.h"

#include <float.h>
#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "script_sbuf.h"

#define MP_MAX_NESTING 16 /* tables this deep are encoded as nil */

/* ---- pack ----
 * The encoder writes into a buffer in the state's memory (script_sbuf.h) held by pack's
 * upvalue: it uses no stack slot, counts toward the state's limit, and an error halfway leaves
 * nothing behind. */

/* Writes the n low bytes of v big-endian after the type byte t. */
static void add_be(lua_State *L, struct sbuf *b, unsigned char t, uint64_t v, int n)
{
    unsigned char h[9];
    h[0] = t;
    for (int i = n; i >= 1; i--, v >>= 8)
        h[i] = (unsigned char)(v & 0xff);
    sbuf_add(L, b, h, (size_t)n + 1);
}

static void enc_int(lua_State *L, struct sbuf *b, int64_t v)
{
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        if (u <= 127)
            add_be(L, b, (unsigned char)u, 0, 0);
        else if (u <= 0xff)
            add_be(L, b, 0xcc, u, 1);
        else if (u <= 0xffff)
            add_be(L, b, 0xcd, u, 2);
        else if (u <= 0xffffffff)
            add_be(L, b, 0xce, u, 4);
        else
            add_be(L, b, 0xcf, u, 8);
    } else {
        uint64_t u = (uint64_t)v; /* two's complement: the low bytes are the encoding */
        if (v >= -32)
            add_be(L, b, (unsigned char)(u & 0xff), 0, 0);
        else if (v >= -128)
            add_be(L, b, 0xd0, u, 1);
        else if (v >= -32768)
            add_be(L, b, 0xd1, u, 2);
        else if (v >= -2147483648LL)
            add_be(L, b, 0xd2, u, 4);
        else
            add_be(L, b, 0xd3, u, 8);
    }
}

/* float 32 when the number survives the round trip through a float, else float 64. */
static void enc_double(lua_State *L, struct sbuf *b, double d)
{
    if (isinf(d) || fabs(d) <= FLT_MAX) { /* (float)d is defined */
        float f = (float)d;
        if ((double)f == d) {
            uint32_t u;
            memcpy(&u, &f, 4);
            add_be(L, b, 0xca, u, 4);
            return;
        }
    }
    uint64_t u;
    memcpy(&u, &d, 8);
    add_be(L, b, 0xcb, u, 8);
}

/* Whether d is an integer that int64 holds (what Redis's (int64_t)d == d tests). */
static int is_int64(double d)
{
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 && (double)(int64_t)d == d;
}

static void enc_string(lua_State *L, struct sbuf *b)
{
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    if (n < 32)
        add_be(L, b, (unsigned char)(0xa0 | n), 0, 0);
    else if (n <= 0xff)
        add_be(L, b, 0xd9, n, 1);
    else if (n <= 0xffff)
        add_be(L, b, 0xda, n, 2);
    else
        add_be(L, b, 0xdb, n, 4);
    sbuf_add(L, b, s, n);
}

/* Array or map header: fix (type | n) up to 15, else the 16- or 32-bit form. */
static void enc_header(lua_State *L, struct sbuf *b, unsigned char fix, unsigned char t16,
                       size_t n)
{
    if (n <= 15)
        add_be(L, b, (unsigned char)(fix | n), 0, 0);
    else if (n <= 0xffff)
        add_be(L, b, t16, n, 2);
    else
        add_be(L, b, (unsigned char)(t16 + 1), n, 4);
}

/* Whether the table on top has exactly the keys 1..n (n >= 0). */
static int table_is_array(lua_State *L)
{
    int top = lua_gettop(L);
    double count = 0, max = 0;
    luaL_checkstack(L, 2, "in function table_is_an_array");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        double k = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
        /* a positive integer that an int holds */
        if (!(k > 0 && k <= 2147483647.0 && floor(k) == k)) {
            lua_settop(L, top);
            return 0;
        }
        if (k > max)
            max = k;
        count++;
    }
    lua_settop(L, top);
    return max == count;
}

static void enc_value(lua_State *L, struct sbuf *b, int level);

static void enc_table(lua_State *L, struct sbuf *b, int level)
{
    if (table_is_array(L)) {
        size_t n = lua_objlen(L, -1);
        enc_header(L, b, 0x90, 0xdc, n);
        luaL_checkstack(L, 1, "in function mp_encode_lua_table_as_array");
        for (size_t i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, (int)i); /* keys 1..n are all there: no metamethod */
            enc_value(L, b, level + 1);
        }
        return;
    }
    size_t n = 0;
    luaL_checkstack(L, 3, "in function mp_encode_lua_table_as_map");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        n++;
    }
    enc_header(L, b, 0x80, 0xde, n);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        enc_value(L, b, level + 1); /* the key's copy */
        enc_value(L, b, level + 1); /* the value; the key stays for lua_next */
    }
}

/* Encodes the value on top of the stack and pops it. */
static void enc_value(lua_State *L, struct sbuf *b, int level)
{
    unsigned char c;
    switch (lua_type(L, -1)) {
    case LUA_TSTRING:
        enc_string(L, b);
        break;
    case LUA_TBOOLEAN:
        c = lua_toboolean(L, -1) ? 0xc3 : 0xc2;
        sbuf_add(L, b, &c, 1);
        break;
    case LUA_TNUMBER: {
        double d = (double)lua_tonumber(L, -1);
        if (is_int64(d))
            enc_int(L, b, (int64_t)d);
        else
            enc_double(L, b, d);
        break;
    }
    case LUA_TTABLE:
        if (level < MP_MAX_NESTING) {
            enc_table(L, b, level);
        } else { /* too deep: nil */
            c = 0xc0;
            sbuf_add(L, b, &c, 1);
        }
        break;
    default:
        c = 0xc0;
        sbuf_add(L, b, &c, 1);
        break;
    }
    lua_pop(L, 1);
}

static int mp_pack(lua_State *L)
{
    int nargs = lua_gettop(L);
    if (nargs == 0)
        return luaL_argerror(L, 0, "MessagePack pack needs input.");
    if (!lua_checkstack(L, nargs))
        return luaL_argerror(L, 0, "Too many arguments for MessagePack pack.");
    struct sbuf *b = lua_touserdata(L, lua_upvalueindex(1));
    sbuf_reset(L, b); /* a call that failed may have left it large */
    /* Each value's encoding is pushed, then all are joined: the stack Redis's pack uses. */
    for (int i = 1; i <= nargs; i++) {
        lua_pushvalue(L, i);
        b->len = 0;
        enc_value(L, b, 0);
        lua_pushlstring(L, b->p, b->len);
    }
    sbuf_reset(L, b);
    lua_concat(L, nargs);
    return 1;
}

/* ---- unpack ---- */

enum { MP_OK, MP_EOF, MP_BADFMT };

struct mp_cur {
    const unsigned char *p;
    size_t left;
    int err;
};

#define NEED(c, n)                 \
    do {                           \
        if ((c)->left < (n)) {     \
            (c)->err = MP_EOF;     \
            return;                \
        }                          \
    } while (0)

static uint64_t get_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static void consume(struct mp_cur *c, size_t n)
{
    c->p += n;
    c->left -= n;
}

static void dec_value(lua_State *L, struct mp_cur *c);

/* An array of n elements (its header consumed): t[1..n] set in order, each index pushed
 * before its value is decoded, as Redis does. */
static void dec_array(lua_State *L, struct mp_cur *c, uint64_t n)
{
    lua_newtable(L);
    luaL_checkstack(L, 1, "in function mp_decode_to_lua_array");
    for (double i = 1; n > 0; n--, i++) {
        lua_pushnumber(L, i);
        dec_value(L, c);
        if (c->err)
            return;
        lua_rawset(L, -3);
    }
}

/* A map of n pairs: a nil or NaN key is Lua's own error, as in Redis. */
static void dec_map(lua_State *L, struct mp_cur *c, uint64_t n)
{
    lua_newtable(L);
    for (; n > 0; n--) {
        dec_value(L, c);
        if (c->err)
            return;
        dec_value(L, c);
        if (c->err)
            return;
        lua_rawset(L, -3);
    }
}

static void dec_string(lua_State *L, struct mp_cur *c, size_t hdr, size_t n)
{
    NEED(c, hdr + n);
    lua_pushlstring(L, (const char *)c->p + hdr, n);
    consume(c, hdr + n);
}

/* Decodes one value at c onto the stack, or sets c->err (then what it pushed is garbage the
 * caller's error discards). */
static void dec_value(lua_State *L, struct mp_cur *c)
{
    NEED(c, 1);
    luaL_checkstack(L, 1,
                    "too many return values at once; use unpack_one or unpack_limit instead.");
    const unsigned char *p = c->p;
    unsigned char t = p[0];
    switch (t) {
    case 0xc0:
        lua_pushnil(L);
        consume(c, 1);
        return;
    case 0xc2:
    case 0xc3:
        lua_pushboolean(L, t == 0xc3);
        consume(c, 1);
        return;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: { /* uint 8/16/32/64: through int64, as Redis (2^64-1 is -1) */
        int n = 1 << (t - 0xcc);
        NEED(c, (size_t)n + 1);
        lua_pushnumber(L, (lua_Number)(int64_t)get_be(p + 1, n));
        consume(c, (size_t)n + 1);
        return;
    }
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: { /* int 8/16/32/64: sign-extended from the top bit */
        int n = 1 << (t - 0xd0);
        NEED(c, (size_t)n + 1);
        uint64_t u = get_be(p + 1, n);
        int shift = 64 - 8 * n;
        int64_t v = shift ? (int64_t)(u << shift) / ((int64_t)1 << shift) : (int64_t)u;
        lua_pushnumber(L, (lua_Number)v);
        consume(c, (size_t)n + 1);
        return;
    }
    case 0xca: {
        NEED(c, 5);
        uint32_t u = (uint32_t)get_be(p + 1, 4);
        float f;
        memcpy(&f, &u, 4);
        lua_pushnumber(L, (lua_Number)f);
        consume(c, 5);
        return;
    }
    case 0xcb: {
        NEED(c, 9);
        uint64_t u = get_be(p + 1, 8);
        double d;
        memcpy(&d, &u, 8);
        lua_pushnumber(L, (lua_Number)d);
        consume(c, 9);
        return;
    }
    case 0xd9:
        NEED(c, 2);
        dec_string(L, c, 2, p[1]);
        return;
    case 0xda:
        NEED(c, 3);
        dec_string(L, c, 3, (size_t)get_be(p + 1, 2));
        return;
    case 0xdb:
        NEED(c, 5);
        dec_string(L, c, 5, (size_t)get_be(p + 1, 4));
        return;
    case 0xdc:   /* array 16 */
    case 0xdd:   /* array 32 */
    case 0xde:   /* map 16 */
    case 0xdf: { /* map 32 */
        size_t width = (t & 1) ? 4 : 2;
        NEED(c, 1 + width);
        uint64_t n = get_be(p + 1, (int)width);
        consume(c, 1 + width);
        if (t <= 0xdd)
            dec_array(L, c, n);
        else
            dec_map(L, c, n);
        return;
    }
    default:
        break;
    }
    if (t < 0x80) { /* positive fixint */
        lua_pushnumber(L, t);
        consume(c, 1);
    } else if (t >= 0xe0) { /* negative fixint */
        lua_pushnumber(L, (int)t - 256);
        consume(c, 1);
    } else if ((t & 0xe0) == 0xa0) {
        dec_string(L, c, 1, t & 0x1f);
    } else if ((t & 0xf0) == 0x90) {
        consume(c, 1);
        dec_array(L, c, t & 0x0f);
    } else if ((t & 0xf0) == 0x80) {
        consume(c, 1);
        dec_map(L, c, t & 0x0f);
    } else {
        c->err = MP_BADFMT; /* 0xc1, bin, ext */
    }
}

/* Decodes up to `limit` values from byte `offset` of argument 1 (every value when both are 0,
 * then without the next offset first). The texts print the 64-bit numbers through %d, as
 * Redis's do: their low 32 bits (and the input's length where the limit is named). */
static int unpack_full(lua_State *L, lua_Integer limit, lua_Integer offset)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (offset < 0 || limit < 0)
        return luaL_error(L, "Invalid request to unpack with offset of %d and limit of %d.",
                          (int)(uint32_t)offset, (int)(uint32_t)len);
    if ((size_t)offset > len)
        return luaL_error(L, "Start offset %d greater than input length %d.",
                          (int)(uint32_t)offset, (int)(uint32_t)len);
    int all = limit == 0 && offset == 0;
    struct mp_cur c = {(const unsigned char *)s + offset, len - (size_t)offset, MP_OK};
    int cnt;
    for (cnt = 0; c.left > 0 && (all || cnt < limit); cnt++) {
        dec_value(L, &c);
        if (c.err == MP_EOF)
            return luaL_error(L, "Missing bytes in input.");
        if (c.err == MP_BADFMT)
            return luaL_error(L, "Bad data format in input.");
    }
    if (!all) {
        luaL_checkstack(L, 1, "in function mp_unpack_full");
        lua_pushinteger(L, c.left == 0 ? -1 : (lua_Integer)(len - c.left));
        lua_insert(L, 2);
        cnt++;
    }
    return cnt;
}

static int mp_unpack(lua_State *L)
{
    return unpack_full(L, 0, 0);
}

static int mp_unpack_one(lua_State *L)
{
    lua_Integer offset = luaL_optinteger(L, 2, 0);
    lua_settop(L, lua_gettop(L) > 0 ? 1 : 0);
    return unpack_full(L, 1, offset);
}

static int mp_unpack_limit(lua_State *L)
{
    lua_Integer limit = luaL_checkinteger(L, 2);
    lua_Integer offset = luaL_optinteger(L, 3, 0);
    lua_settop(L, 1);
    return unpack_full(L, limit, offset);
}

int luaopen_cmsgpack(lua_State *L)
{
    lua_createtable(L, 0, 8);
    sbuf_push_new(L);
    lua_pushcclosure(L, mp_pack, 1);
    lua_setfield(L, -2, "pack");
    static const luaL_Reg fns[] = {
        {"unpack", mp_unpack},
        {"unpack_one", mp_unpack_one},
        {"unpack_limit", mp_unpack_limit},
        {NULL, NULL},
    };
    for (const luaL_Reg *r = fns; r->name != NULL; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    /* The fields Redis's library carries, as it spells them. */
    static const char *const info[][2] = {
        {"_NAME", "cmsgpack"},
        {"_VERSION", "lua-cmsgpack 0.4.0"},
        {"_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo"},
        {"_DESCRIPTION", "MessagePack C implementation for Lua"},
    };
    for (size_t i = 0; i < sizeof(info) / sizeof(info[0]); i++) {
        lua_pushstring(L, info[i][1]);
        lua_setfield(L, -2, info[i][0]);
    }
    return 1;
}
