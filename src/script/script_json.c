/* script_json.c - cjson.encode, and the wiring of rlimitd's encoder and decoder into every
 * lua-cjson instance (script_json.h; the decoder is script_json_decode.c).
 *
 * The encoder answers as lua-cjson 2.1.0 does, byte for byte and error for error: strings with
 * '"', '\', '/', DEL and the control characters escaped (\b \t \n \f \r, else \u00xx); numbers
 * as printf's "%.14g" (encode_number_precision digits), NaN and the infinities refused, written
 * as nan/inf or as null (encode_invalid_numbers); a table whose keys are all positive integers
 * is an array up to its largest key (holes as null) unless it is excessively sparse
 * (encode_sparse_array: an error, or an object), any other table an object with number or
 * string keys in lua_next's order; nesting past encode_max_depth, or past what the Lua stack
 * holds, is an error. Its Lua stack use is lua-cjson's (one slot per array level, two per
 * object level, three checked at each table), so the stack limit stops the same nesting.
 *
 * The output is built in a buffer of the state's own memory (script_sbuf.h): it counts toward
 * the state's limit, and an output that does not fit fails with "not enough memory". */
#include "script_json.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rlimitd/util.h"

/* The configuration functions a json_cfg reads (lua-cjson's own, kept in the fenv of the
 * json_cfg userdata); encode_keep_buffer concerns only lua-cjson's encoder and stays as it is. */
static const char *const cfg_fns[] = {
    "encode_sparse_array", "encode_max_depth", "decode_max_depth", "encode_number_precision",
    "encode_invalid_numbers", "decode_invalid_numbers", NULL,
};

/* ---- encode ---- */

/* What each byte becomes inside a JSON string: 0 itself, else the length of its escape. */
static const unsigned char esc_len[256] = {
    [0 ... 7] = 6, ['\b'] = 2, ['\t'] = 2, ['\n'] = 2, [11] = 6, ['\f'] = 2, ['\r'] = 2,
    [14 ... 31] = 6, ['"'] = 2, ['/'] = 2, ['\\'] = 2, [127] = 6,
};

static void add_escape(lua_State *L, struct sbuf *b, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    char e[6] = {'\\', 0};
    switch (c) {
    case '\b': e[1] = 'b'; break;
    case '\t': e[1] = 't'; break;
    case '\n': e[1] = 'n'; break;
    case '\f': e[1] = 'f'; break;
    case '\r': e[1] = 'r'; break;
    case '"': case '\\': case '/': e[1] = (char)c; break;
    default:
        memcpy(e + 1, "u00", 3);
        e[4] = hex[c >> 4];
        e[5] = hex[c & 15];
    }
    sbuf_add(L, b, e, esc_len[c]);
}

struct enc {
    lua_State *L;
    struct sbuf *b;
    const struct json_cfg *cfg;
};

/* "Cannot serialise <type of the value at idx>: <reason>", lua-cjson's error. */
static void enc_fail(struct enc *e, int idx, const char *reason)
{
    luaL_error(e->L, "Cannot serialise %s: %s", lua_typename(e->L, lua_type(e->L, idx)),
               reason);
}

static void enc_string(struct enc *e, int idx)
{
    size_t n;
    const unsigned char *s = (const unsigned char *)lua_tolstring(e->L, idx, &n);
    sbuf_addchar(e->L, e->b, '"');
    size_t run = 0; /* bytes before s[i] not yet written */
    for (size_t i = 0; i < n; i++) {
        if (esc_len[s[i]] == 0)
            continue;
        sbuf_add(e->L, e->b, s + run, i - run);
        add_escape(e->L, e->b, s[i]);
        run = i + 1;
    }
    sbuf_add(e->L, e->b, s + run, n - run);
    sbuf_addchar(e->L, e->b, '"');
}

static void enc_number(struct enc *e, int idx)
{
    double num = (double)lua_tonumber(e->L, idx);
    if (e->cfg->encode_invalid == 0) {
        if (isinf(num) || isnan(num))
            enc_fail(e, idx, "must not be NaN or Inf");
    } else if (e->cfg->encode_invalid == 1) {
        if (isnan(num)) {
            sbuf_add(e->L, e->b, "nan", 3); /* not "-nan" */
            return;
        }
    } else if (isinf(num) || isnan(num)) {
        sbuf_add(e->L, e->b, "null", 4);
        return;
    }
    char buf[32];
    size_t len;
    /* An integer of at most `precision` digits is printed whole by "%g": written directly. */
    if (fabs(num) < 1e15 && num == (double)(int64_t)num && !(num == 0 && signbit(num))) {
        int64_t v = (int64_t)num;
        len = util_fmt_i64(buf, v);
        if ((int)(len - (v < 0)) <= e->cfg->precision) {
            sbuf_add(e->L, e->b, buf, len);
            return;
        }
    }
    len = (size_t)snprintf(buf, sizeof(buf), "%.*g", e->cfg->precision, num);
    sbuf_add(e->L, e->b, buf, len);
}

/* (int)k as lua-cjson's x86 build computes it for a key k >= 1: exact below 2^31, else the
 * conversion's "indefinite" INT_MIN. */
static int key_to_int(double k)
{
    return k < 2147483648.0 ? (int)k : INT_MIN;
}

/* The length of the table on top as an array: its largest key when every key is a positive
 * integer (0 for an empty table), or -1 for an object (also an excessively sparse array when
 * encode_sparse_array converts those). lua-cjson keeps these in ints, with their wrap-arounds. */
static int array_length(struct enc *e)
{
    lua_State *L = e->L;
    int max = 0, items = 0;
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
        double k;
        if (lua_type(L, -2) == LUA_TNUMBER && (k = (double)lua_tonumber(L, -2)) != 0 &&
            floor(k) == k && k >= 1) {
            if (k > (double)max)
                max = key_to_int(k);
            items++;
            lua_pop(L, 1);
            continue;
        }
        lua_pop(L, 2);
        return -1;
    }
    const struct json_cfg *c = e->cfg;
    int limit = (int)((uint32_t)items * (uint32_t)c->sparse_ratio);
    if (c->sparse_ratio > 0 && max > limit && max > c->sparse_safe) {
        if (!c->sparse_convert)
            enc_fail(e, -1, "excessively sparse array");
        return -1;
    }
    return max;
}

static void enc_value(struct enc *e, int depth);

static void enc_array(struct enc *e, int depth, int n)
{
    sbuf_addchar(e->L, e->b, '[');
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            sbuf_addchar(e->L, e->b, ',');
        lua_rawgeti(e->L, -1, i);
        enc_value(e, depth);
        lua_pop(e->L, 1);
    }
    sbuf_addchar(e->L, e->b, ']');
}

static void enc_object(struct enc *e, int depth)
{
    lua_State *L = e->L;
    sbuf_addchar(L, e->b, '{');
    int first = 1;
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
        if (!first)
            sbuf_addchar(L, e->b, ',');
        first = 0;
        int t = lua_type(L, -2);
        if (t == LUA_TNUMBER) {
            sbuf_addchar(L, e->b, '"');
            enc_number(e, -2);
            sbuf_add(L, e->b, "\":", 2);
        } else if (t == LUA_TSTRING) {
            enc_string(e, -2);
            sbuf_addchar(L, e->b, ':');
        } else {
            enc_fail(e, -2, "table key must be a number or string");
        }
        enc_value(e, depth);
        lua_pop(L, 1);
    }
    sbuf_addchar(L, e->b, '}');
}

/* Encodes the value on top of the stack (left there). */
static void enc_value(struct enc *e, int depth)
{
    lua_State *L = e->L;
    switch (lua_type(L, -1)) {
    case LUA_TSTRING:
        enc_string(e, -1);
        return;
    case LUA_TNUMBER:
        enc_number(e, -1);
        return;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, -1))
            sbuf_add(L, e->b, "true", 4);
        else
            sbuf_add(L, e->b, "false", 5);
        return;
    case LUA_TTABLE: {
        depth++;
        if (depth > e->cfg->encode_max_depth || !lua_checkstack(L, 3))
            luaL_error(L, "Cannot serialise, excessive nesting (%d)", depth);
        int n = array_length(e);
        if (n > 0)
            enc_array(e, depth, n);
        else
            enc_object(e, depth);
        return;
    }
    case LUA_TNIL:
        sbuf_add(L, e->b, "null", 4);
        return;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, -1) == NULL) { /* cjson.null */
            sbuf_add(L, e->b, "null", 4);
            return;
        }
        break;
    default:
        break;
    }
    enc_fail(e, -1, "type not supported");
}

/* cjson.encode(v): upvalue 1 the instance's json_cfg, 2 the output buffer. */
static int json_encode(lua_State *L)
{
    struct json_cfg *cfg = lua_touserdata(L, lua_upvalueindex(1));
    struct sbuf *b = lua_touserdata(L, lua_upvalueindex(2));
    luaL_argcheck(L, lua_gettop(L) == 1, 1, "expected 1 argument");
    if (cfg->stale)
        json_cfg_sync(L, lua_upvalueindex(1), cfg);
    sbuf_reset(L, b); /* a call that failed may have left it large */
    struct enc e = {L, b, cfg};
    enc_value(&e, 0);
    lua_pushlstring(L, b->p, b->len);
    sbuf_reset(L, b);
    return 1;
}

/* ---- instances ---- */

/* A configuration function of an instance: marks the instance's json_cfg stale, then runs
 * lua-cjson's function on this frame (its upvalue 1, lua-cjson's configuration, is this
 * closure's too), so its argument checks and texts are its own. Upvalues: lua-cjson's
 * configuration, its function, the json_cfg. */
static int json_setting(lua_State *L)
{
    struct json_cfg *cfg = lua_touserdata(L, lua_upvalueindex(3));
    cfg->stale = 1;
    return lua_tocfunction(L, lua_upvalueindex(2))(L);
}

/* cjson.new(): lua-cjson's new instance (upvalue 1), with rlimitd's encoder and decoder. */
static int json_new(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_call(L, 0, 1);
    json_instrument(L, lua_gettop(L));
    return 1;
}

void json_instrument(lua_State *L, int idx)
{
    struct json_cfg *cfg = lua_newuserdata(L, sizeof(*cfg));
    memset(cfg, 0, sizeof(*cfg));
    cfg->stale = 1;
    int cfg_idx = lua_gettop(L);
    lua_newtable(L); /* the fenv: lua-cjson's configuration functions of this instance */
    for (int i = 0; cfg_fns[i] != NULL; i++) {
        lua_getfield(L, idx, cfg_fns[i]);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, cfg_fns[i]);
        lua_getupvalue(L, -1, 1); /* lua-cjson's configuration */
        lua_insert(L, -2);
        lua_pushvalue(L, cfg_idx);
        lua_pushcclosure(L, json_setting, 3);
        lua_setfield(L, idx, cfg_fns[i]);
    }
    lua_setfenv(L, cfg_idx);
    lua_pushvalue(L, cfg_idx);
    sbuf_push_new(L);
    lua_pushcclosure(L, json_encode, 2);
    lua_setfield(L, idx, "encode");
    lua_pushvalue(L, cfg_idx);
    sbuf_push_new(L);
    lua_pushcclosure(L, json_decode, 2);
    lua_setfield(L, idx, "decode");
    lua_getfield(L, idx, "new");
    lua_pushcclosure(L, json_new, 1);
    lua_setfield(L, idx, "new");
    lua_pop(L, 1); /* the json_cfg */
}
