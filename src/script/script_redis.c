/* script_redis.c - the `redis` library a script calls (redis.call and pcall, sha1hex,
 * error_reply, status_reply, log, setresp, ...) and Redis's conversions: a command's RESP2 or
 * RESP3 reply to Lua values for redis.call, a script's Lua value to its reply in its caller's
 * protocol, errors to Redis's error tables and texts (docs/COMMANDS.md, Scripting). redis.call
 * runs its command through the function the caller of script_run handed the engine (script.h,
 * script_call_fn). */
#include "script_redis.h"
#include "rlimitd/alloc.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/log.h"
#include "rlimitd/reply.h"
#include "rlimitd/script.h"
#include "rlimitd/util.h"
#include "script_engine.h"

#define REPLY_MAX_DEPTH 1000                 /* nesting of a script's reply */
#define REPLY_KEEP 64 /* elements of a script's reply array read once (lua_to_reply) */
#define REDIS_VERSION_STR "7.0.15"
#define REDIS_VERSION_NUM 0x07000f

/* ---- Redis's error tables ---- */

/* Pushes {err = "<CODE> <msg>"} as Redis builds it from an error text: "-CODE msg" keeps its
 * code, a text without the dash gets "ERR", trailing CR/LF are trimmed. */
void push_error(lua_State *L, const char *s, size_t n)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (n > 0 && s[0] == '-') {
        const char *sp = memchr(s, ' ', n);
        if (sp == NULL) {
            luaL_addstring(&b, "ERR ");
            s++, n--;
        } else {
            luaL_addlstring(&b, s + 1, (size_t)(sp - s - 1));
            luaL_addchar(&b, ' ');
            n -= (size_t)(sp + 1 - s);
            s = sp + 1;
        }
    } else {
        luaL_addstring(&b, "ERR ");
    }
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    luaL_addlstring(&b, s, n);
    lua_createtable(L, 0, 1); /* the layout lua_newtable and a rawset end with */
    push_err_key(L);
    luaL_pushresult(&b);
    lua_rawset(L, -3);
}

/* Marks the error table on top as one whose error was counted where it happened (a command a
 * script ran, or could not run): Redis 7.0's ignore_error_stats_update field, which scripts see
 * too. A script's reply carrying such a table does not count the error again (INFO errorstats,
 * total_error_replies); one built by the script (redis.error_reply, {err = ...}) does. */
static void mark_counted(lua_State *L)
{
    lua_pushliteral(L, "ignore_error_stats_update");
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
}

/* Whether the table at t is so marked (read as Redis reads it, through a metatable too). */
static int counted(lua_State *L, int t)
{
    lua_getfield(L, t, "ignore_error_stats_update");
    int yes = lua_type(L, -1) == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1);
    return yes;
}

/* Raises (call) or returns (pcall) an error table. */
static int fail(lua_State *L, int raise, const char *msg)
{
    push_error(L, msg, strlen(msg));
    return raise ? lua_error(L) : 1;
}

/* ---- the typed reply tables ---- */

/* The fields RESP3 values travel in between Lua and replies, both ways: {double = n},
 * {big_number = "digits"}, {verbatim_string = {format = "txt", string = s}}, {map = {k = v}},
 * {set = {member = true}}. Interned once per state (redis_lib_open); a reply table of a script
 * is looked up for each, so RESP2 scripts pay a registry read and a lookup per field. */
enum reply_field { F_DOUBLE, F_BIG_NUMBER, F_VERBATIM, F_MAP, F_SET };
static const char *const field_names[] = {"double", "big_number", "verbatim_string", "map",
                                          "set"};

/* ---- RESP reply -> Lua ---- */

/* The integer of a RESP line s..crlf after its type byte (what strtoll reads there). */
static long long resp_int(const char *s, const char *crlf)
{
    int64_t v;
    if (util_parse_i64(s + 1, (size_t)(crlf - s - 1), &v) == 0)
        return v;
    return strtoll(s + 1, NULL, 10);
}

/* Pushes {<field> = <the value at the top>}, popping the value. */
static void wrap_field(lua_State *L, enum reply_field f)
{
    lua_createtable(L, 0, 1);
    push_field_key(L, f);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_replace(L, -2);
}

/* Converts the RESP2 or RESP3 value at *p (a handler's well-formed reply, in the protocol the
 * script chose with redis.setresp) as Redis does, and advances *p. An attribute is skipped
 * (depth past REPLY_MAX_DEPTH or a malformed reply gives false; neither happens). */
static void resp_to_lua(lua_State *L, const char **p, const char *end, int depth)
{
    const char *s = *p;
    const char *crlf = memchr(s, '\r', (size_t)(end - s));
    if (crlf == NULL || !lua_checkstack(L, 6) || depth > REPLY_MAX_DEPTH) {
        lua_pushboolean(L, 0);
        *p = end;
        return;
    }
    *p = crlf + 2;
    switch (s[0]) {
    case '+':
        lua_createtable(L, 0, 1);
        push_ok_key(L);
        lua_pushlstring(L, s + 1, (size_t)(crlf - s - 1));
        lua_rawset(L, -3);
        break;
    case '-':
        lua_createtable(L, 0, 1);
        push_err_key(L);
        lua_pushlstring(L, s + 1, (size_t)(crlf - s - 1));
        lua_rawset(L, -3);
        break;
    case ':':
        lua_pushnumber(L, (lua_Number)resp_int(s, crlf));
        break;
    case '$':
    case '=': {
        long long n = resp_int(s, crlf);
        if (n < 0) {
            lua_pushboolean(L, 0);
        } else if (s[0] == '$' || n < 4) {
            lua_pushlstring(L, *p, (size_t)n);
            *p += n + 2;
        } else { /* a verbatim string: "fmt:" then the text */
            lua_createtable(L, 0, 2);
            lua_pushliteral(L, "string");
            lua_pushlstring(L, *p + 4, (size_t)n - 4);
            lua_rawset(L, -3);
            lua_pushliteral(L, "format");
            lua_pushlstring(L, *p, 3);
            lua_rawset(L, -3);
            wrap_field(L, F_VERBATIM);
            *p += n + 2;
        }
        break;
    }
    case '*':
    case '~':
    case '%': {
        long long n = resp_int(s, crlf);
        if (n < 0) {
            lua_pushboolean(L, 0);
            break;
        }
        if (s[0] == '*') {
            lua_createtable(L, n < 1024 ? (int)n : 1024, 0);
            for (long long i = 1; i <= n; i++) {
                resp_to_lua(L, p, end, depth + 1);
                lua_rawseti(L, -2, (int)i);
            }
            break;
        }
        /* {set = {member = true, ...}} or {map = {key = value, ...}}, the table grown from
         * empty as Redis grows it: its size decides lua_next's order, which a script that
         * returns the table shows in its reply. */
        lua_newtable(L);
        for (long long i = 0; i < n; i++) {
            resp_to_lua(L, p, end, depth + 1);
            if (s[0] == '%')
                resp_to_lua(L, p, end, depth + 1);
            else
                lua_pushboolean(L, 1);
            if (lua_isnil(L, -2))
                lua_pop(L, 2); /* a null key: no table can hold it (no command sends one) */
            else
                lua_rawset(L, -3);
        }
        wrap_field(L, s[0] == '%' ? F_MAP : F_SET);
        break;
    }
    case '_':
        lua_pushnil(L);
        break;
    case '#':
        lua_pushboolean(L, s + 1 < crlf && s[1] == 't');
        break;
    case ',':
        lua_pushnumber(L, strtod(s + 1, NULL));
        wrap_field(L, F_DOUBLE);
        break;
    case '(':
        lua_pushlstring(L, s + 1, (size_t)(crlf - s - 1));
        wrap_field(L, F_BIG_NUMBER);
        break;
    case '|': { /* an attribute: its pairs are skipped, the value after it is the reply */
        long long n = resp_int(s, crlf);
        for (long long i = 0; i < 2 * n && *p < end; i++) {
            resp_to_lua(L, p, end, depth + 1);
            lua_pop(L, 1);
        }
        resp_to_lua(L, p, end, depth + 1);
        break;
    }
    default:
        lua_pushboolean(L, 0);
        break;
    }
}

/* ---- Lua -> reply ---- */

/* Redis converts numbers with a C cast; an out-of-range or NaN double comes out as INT64_MIN
 * there (x86's conversion result), spelled out here without undefined behaviour. */
static int64_t num_to_i64(lua_Number n)
{
    if (!(n >= -9223372036854775808.0 && n < 9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)n;
}

/* {err = s} as Redis 7.0 answers it ("-%s"): s up to its first NUL, CR and LF at its end dropped
 * (reply_error makes those inside it spaces). A leading '-' of s stays: {err = '-X y'} is
 * "--X y", of error code "-X" (INFO errorstats). */
static void error_string_reply(struct rbuf *out, const char *s, size_t n)
{
    n = strnlen(s, n);
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    char *msg = xmalloc(n + 1);
    memcpy(msg, s, n);
    msg[n] = '\0';
    reply_error(out, msg);
    free(msg);
}

/* {map = m} and {set = m} as Redis writes them: each pair of m in lua_next's order, the key
 * then (for a map) the value; a set's values are ignored. */
static void pairs_reply(lua_State *L, int m, struct rbuf *out, int depth, int is_map)
{
    int64_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, m) != 0) {
        n++;
        lua_pop(L, 1);
    }
    if (is_map)
        reply_map(out, n);
    else
        reply_set(out, n);
    lua_pushnil(L);
    while (lua_next(L, m) != 0) { /* lua_to_reply reads a key without converting it in place */
        lua_to_reply(L, -2, out, depth + 1);
        if (is_map)
            lua_to_reply(L, -1, out, depth + 1);
        lua_pop(L, 1);
    }
}

/* The RESP3 reply tables Redis 7.0 recognises after err and ok, in its order: {double = n},
 * {big_number = s}, {verbatim_string = {format = f, string = s}}, {map = t}, {set = t}. Each
 * is written in the caller's protocol (a double as a bulk string in RESP2, a map as a flat
 * array, ...). Returns 1 if the table at t was one of them (and is answered). */
static int typed_reply(lua_State *L, int t, struct rbuf *out, int depth)
{
    push_field_key(L, F_DOUBLE);
    lua_rawget(L, t);
    if (lua_type(L, -1) == LUA_TNUMBER) {
        reply_double(out, (double)lua_tonumber(L, -1));
        lua_pop(L, 1);
        return 1;
    }
    lua_pop(L, 1);
    push_field_key(L, F_BIG_NUMBER);
    lua_rawget(L, t);
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        reply_bignum(out, s, n); /* CR and LF become spaces, as Redis maps them */
        lua_pop(L, 1);
        return 1;
    }
    lua_pop(L, 1);
    push_field_key(L, F_VERBATIM);
    lua_rawget(L, t);
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_pushliteral(L, "format");
        lua_rawget(L, -2);
        lua_pushliteral(L, "string");
        lua_rawget(L, -3);
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            reply_verbatim(out, lua_tostring(L, -2), s, n);
            lua_pop(L, 3);
            return 1;
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    for (int f = F_MAP; f <= F_SET; f++) {
        push_field_key(L, f);
        lua_rawget(L, t);
        if (lua_type(L, -1) == LUA_TTABLE) {
            pairs_reply(L, lua_gettop(L), out, depth, f == F_MAP);
            lua_pop(L, 1);
            return 1;
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* A table's err and ok fields, then the typed ones, as Redis checks them in that order.
 * Returns 1 if the table at t was one of them (and is answered). */
static int keyed_reply(lua_State *L, int t, struct rbuf *out, int depth)
{
    push_err_key(L);
    lua_rawget(L, t);
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        error_string_reply(out, s, n);
        lua_pop(L, 1);
        if (depth == 0 && counted(L, t))
            tl_engine->err_counted = 1;
        return 1;
    }
    lua_pop(L, 1);
    push_ok_key(L);
    lua_rawget(L, t);
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        char *msg = xmalloc(n + 1);
        memcpy(msg, s, n);
        msg[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if (msg[i] == '\r' || msg[i] == '\n')
                msg[i] = ' ';
        reply_simple(out, msg);
        free(msg);
        lua_pop(L, 1);
        return 1;
    }
    lua_pop(L, 1);
    return typed_reply(L, t, out, depth);
}

/* Whether the table at t has no key but 1..n, for a small n (a larger one answers 0, and the
 * caller looks its string keys up instead: counting would cost more than the lookups). */
static int only_array(lua_State *L, int t, int64_t n)
{
    if (n > 8)
        return 0;
    int64_t keys = 0; /* at least n: 1..n are all there */
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        lua_pop(L, 1); /* the value; the key stays, for the next call */
        if (++keys > n) {
            lua_pop(L, 1);
            return 0;
        }
    }
    return 1;
}

void lua_to_reply(lua_State *L, int idx, struct rbuf *out, int depth)
{
    if (depth > REPLY_MAX_DEPTH || !lua_checkstack(L, 4)) {
        reply_error(out, "ERR reached lua stack limit");
        return;
    }
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        reply_bulk(out, s, n);
        return;
    }
    case LUA_TBOOLEAN:
        /* Redis: a script still in RESP2 answers true as 1 and false as a null (each in the
         * caller's protocol); after redis.setresp(3) a boolean is a boolean. */
        if (tl_engine->resp == 3)
            reply_bool(out, lua_toboolean(L, idx));
        else if (lua_toboolean(L, idx))
            reply_int(out, 1);
        else
            reply_nil(out);
        return;
    case LUA_TNUMBER:
        reply_int(out, num_to_i64(lua_tonumber(L, idx)));
        return;
    case LUA_TTABLE:
        break;
    default:
        reply_nil(out);
        return;
    }
    int t = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    /* An array up to its first nil, as Redis walks it. The script's own reply (depth 0) keeps
     * its first REPLY_KEEP elements on the stack while counting, so they are read once. */
    int keep = depth == 0 && lua_checkstack(L, REPLY_KEEP + 4) ? REPLY_KEEP : 0;
    int64_t n = 0;
    for (;;) {
        lua_rawgeti(L, t, (int)(n + 1));
        int nil = lua_isnil(L, -1);
        if (nil || n == INT32_MAX) {
            lua_pop(L, 1);
            break;
        }
        n++;
        if (n > keep)
            lua_pop(L, 1);
    }
    int kept = n < keep ? (int)n : keep;
    /* err, ok and the RESP3 fields are string keys: a table holding nothing but its n array
     * elements has none of them, and the lookups are skipped. */
    if (!only_array(L, t, n) && keyed_reply(L, t, out, depth)) {
        lua_pop(L, kept);
        return;
    }
    reply_array(out, n);
    for (int64_t i = 1; i <= n; i++) {
        int at; /* the element's stack index */
        if (i <= kept) {
            at = lua_gettop(L) - kept + (int)i;
        } else {
            lua_rawgeti(L, t, (int)i);
            at = lua_gettop(L);
        }
        /* Numbers and strings inline: what the recursive call would write. */
        int type = depth + 1 > REPLY_MAX_DEPTH ? LUA_TNONE : lua_type(L, at);
        if (type == LUA_TNUMBER) {
            reply_int(out, num_to_i64(lua_tonumber(L, at)));
        } else if (type == LUA_TSTRING) {
            size_t len;
            const char *str = lua_tolstring(L, at, &len);
            reply_bulk(out, str, len);
        } else {
            lua_to_reply(L, at, out, depth + 1);
        }
        if (i > kept)
            lua_pop(L, 1);
    }
    lua_pop(L, kept);
}

/* ---- the redis library ---- */

static int redis_call(lua_State *L, int raise)
{
    struct engine *e = engine_of(L);
    int argc = lua_gettop(L);
    if (argc == 0)
        return fail(L, raise, "Please specify at least one argument for this redis lib call");
    if (argc > e->cap) {
        int cap = argc < 16 ? 16 : argc;
        char **argv = xrealloc(e->argv, sizeof(char *) * (size_t)cap);
        size_t *lens = xrealloc(e->lens, sizeof(size_t) * (size_t)cap);
        e->argv = argv;
        e->lens = lens;
        e->cap = cap;
    }
    for (int i = 1; i <= argc; i++) {
        int t = lua_type(L, i);
        if (t == LUA_TNUMBER) {
            /* Redis formats numbers with %.17g, not Lua's %.14g; for an integer below 2^53
             * that is its plain decimal digits, written here without printf. */
            char buf[64];
            double v = (double)lua_tonumber(L, i);
            int n;
            if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v &&
                !(v == 0 && signbit(v)))
                n = (int)util_fmt_i64(buf, (int64_t)v);
            else
                n = snprintf(buf, sizeof(buf), "%.17g", v);
            lua_pushlstring(L, buf, (size_t)n);
            lua_replace(L, i);
        } else if (t != LUA_TSTRING) {
            return fail(L, raise, "Lua redis lib command arguments must be strings or integers");
        }
        e->argv[i - 1] = (char *)lua_tolstring(L, i, &e->lens[i - 1]);
    }
    if (e->call == NULL)
        return fail(L, raise, "redis.call is only available while a script runs");
    e->reply.len = 0;
    e->reply.resp = (unsigned char)e->resp; /* the command answers in the script's protocol */
    e->call(e->call_ud, argc, e->argv, e->lens, &e->reply);
    /* The arguments are spent (the reply is in e->reply): dropping them gives the reply the
     * call's stack, which thousands of arguments (unpack of a big table) may have filled. */
    lua_settop(L, 0);
    const char *p = e->reply.p, *end = e->reply.p + e->reply.len;
    if (e->reply.len == 0) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (p[0] == '-') {
        const char *crlf = memchr(p, '\r', e->reply.len);
        push_error(L, p, crlf ? (size_t)(crlf - p) : e->reply.len);
        mark_counted(L); /* the dispatcher counted it (script_call_fn) */
        return raise ? lua_error(L) : 1;
    }
    resp_to_lua(L, &p, end, 0);
    return 1;
}

static int l_call(lua_State *L)
{
    return redis_call(L, 1);
}

static int l_pcall(lua_State *L)
{
    return redis_call(L, 0);
}

/* Errors Redis raises without a position: a bare message. */
int raw_error(lua_State *L, const char *msg)
{
    lua_pushstring(L, msg);
    return lua_error(L);
}

static int l_sha1hex(lua_State *L)
{
    if (lua_gettop(L) != 1)
        return raw_error(L, "wrong number of arguments");
    size_t n = 0;
    const char *s = lua_tolstring(L, 1, &n);
    char hex[41];
    script_sha1hex(s ? s : "", s ? n : 0, hex);
    lua_pushstring(L, hex);
    return 1;
}

static int l_error_reply(lua_State *L)
{
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
        return fail(L, 0, "wrong number or type of arguments");
    size_t n;
    const char *s = lua_tolstring(L, 1, &n);
    if (n > 0 && s[0] == '-') {
        push_error(L, s, n);
    } else {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        luaL_addchar(&b, '-');
        luaL_addlstring(&b, s, n);
        luaL_pushresult(&b);
        size_t m;
        const char *t = lua_tolstring(L, -1, &m);
        push_error(L, t, m);
    }
    return 1;
}

static int l_status_reply(lua_State *L)
{
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
        return fail(L, 0, "wrong number or type of arguments");
    lua_createtable(L, 0, 1);
    push_ok_key(L);
    lua_pushvalue(L, 1);
    lua_rawset(L, -3);
    return 1;
}

static int l_log(lua_State *L)
{
    int argc = lua_gettop(L);
    if (argc < 2)
        return raw_error(L, "redis.log() requires two arguments or more.");
    if (!lua_isnumber(L, 1))
        return raw_error(L, "First argument must be a number (log level).");
    lua_Integer level = lua_tointeger(L, 1);
    if (level < LOG_DEBUG || level > LOG_WARNING)
        return raw_error(L, "Invalid debug level.");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 2; i <= argc; i++) {
        size_t n;
        const char *s = lua_tolstring(L, i, &n);
        if (s == NULL)
            continue;
        if (i > 2)
            luaL_addchar(&b, ' ');
        luaL_addlstring(&b, s, n);
    }
    luaL_pushresult(&b);
    log_msg((enum log_level)level, "%s", lua_tostring(L, -1));
    return 0;
}

/* redis.setresp(2 | 3): the protocol redis.call's replies are produced in from now on (and so
 * how they convert to Lua), and whether a boolean the script returns stays one. Redis takes
 * the number with a C cast to int (2.9 is 2); its errors are error tables. */
static int l_setresp(lua_State *L)
{
    struct engine *e = engine_of(L);
    if (e->call == NULL)
        return fail(L, 1, "redis.setresp can only be called inside a script invocation");
    if (lua_gettop(L) != 1)
        return fail(L, 1, "redis.setresp() requires one argument.");
    double d = (double)lua_tonumber(L, 1);
    int v = d > -2147483649.0 && d < 2147483648.0 ? (int)d : 0;
    if (v != 2 && v != 3)
        return fail(L, 1, "RESP version must be 2 or 3.");
    e->resp = v;
    return 0;
}

static int l_replicate_commands(lua_State *L)
{
    lua_pushboolean(L, 1);
    return 1;
}

static int l_set_repl(lua_State *L)
{
    if (lua_gettop(L) != 1)
        return raw_error(L, "redis.set_repl() requires two arguments.");
    lua_Integer v = lua_tointeger(L, 1);
    if (v < 0 || v > 3)
        return raw_error(L,
                         "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or "
                         "REPL_NONE.");
    return 0; /* rlimitd has no replication: accepted and nothing else */
}

/* Fills ar ("Sl") for the function that raised the error an error handler was called with: its
 * caller, or the caller's caller when that is a C function (error, redis.call). 0 if none. */
int raiser(lua_State *L, lua_Debug *ar)
{
    if (!lua_getstack(L, 1, ar) || !lua_getinfo(L, "Sl", ar))
        return 0;
    if (strcmp(ar->what, "C") == 0)
        return lua_getstack(L, 2, ar) && lua_getinfo(L, "Sl", ar);
    return 1;
}

/* The top-level error handler: turns any error into Redis's final text,
 * "<msg> script: <sha>, on @user_script:<line>." (msg "ERR <text>" unless the error is a
 * table with an err field, as redis.call raises; an error object that is not a string, number,
 * boolean or nil is "(error object is a <type> value)"). */
int err_handler(lua_State *L)
{
    struct engine *e = engine_of(L);
    const char *msg = NULL;
    size_t n = 0;
    int prefix = 1;
    if (lua_istable(L, 1)) {
        lua_getfield(L, 1, "err");
        if (lua_type(L, -1) == LUA_TSTRING) {
            msg = lua_tolstring(L, -1, &n);
            prefix = 0;
            e->err_counted = counted(L, 1);
        } else {
            lua_pop(L, 1);
        }
    }
    if (msg == NULL) {
        int t = lua_type(L, 1);
        if (t == LUA_TSTRING || t == LUA_TNUMBER) {
            lua_pushvalue(L, 1);
        } else if (t == LUA_TNIL) {
            lua_pushliteral(L, "nil");
        } else if (t == LUA_TBOOLEAN) {
            lua_pushstring(L, lua_toboolean(L, 1) ? "true" : "false");
        } else {
            /* A table (without a string err field), function, coroutine or userdata: named by
             * its type only. Its address would show an attacker where the heap is, and its
             * __tostring would run script code inside the handler. */
            lua_pushfstring(L, "(error object is a %s value)", lua_typename(L, t));
        }
        msg = lua_tolstring(L, -1, &n);
    }
    lua_Debug ar;
    int have = raiser(L, &ar);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (prefix)
        luaL_addstring(&b, "ERR ");
    luaL_addlstring(&b, msg, n);
    luaL_addstring(&b, " script: ");
    luaL_addstring(&b, e->sha);
    if (have) {
        lua_pushfstring(L, ", on %s:%d.", ar.source, ar.currentline);
        luaL_addvalue(&b);
    } else {
        luaL_addchar(&b, '.');
    }
    luaL_pushresult(&b);
    e->handled = 1;
    return 1;
}

static const luaL_Reg redis_fns[] = {
    {"call", l_call},
    {"pcall", l_pcall},
    {"sha1hex", l_sha1hex},
    {"error_reply", l_error_reply},
    {"status_reply", l_status_reply},
    {"log", l_log},
    {"setresp", l_setresp},
    {"replicate_commands", l_replicate_commands},
    {"set_repl", l_set_repl},
    {NULL, NULL},
};

/* Sets the global `redis`: the library's functions and constants (open_libs). */
void redis_lib_open(lua_State *L)
{
    lua_newtable(L);
    luaL_register(L, NULL, redis_fns);
    static const struct {
        const char *name;
        int v;
    } consts[] = {
        {"LOG_DEBUG", LOG_DEBUG}, {"LOG_VERBOSE", LOG_VERBOSE}, {"LOG_NOTICE", LOG_NOTICE},
        {"LOG_WARNING", LOG_WARNING}, {"REPL_NONE", 0}, {"REPL_AOF", 1}, {"REPL_SLAVE", 2},
        {"REPL_REPLICA", 2}, {"REPL_ALL", 3}, {"REDIS_VERSION_NUM", REDIS_VERSION_NUM},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++) {
        lua_pushinteger(L, consts[i].v);
        lua_setfield(L, -2, consts[i].name);
    }
    lua_pushliteral(L, REDIS_VERSION_STR);
    lua_setfield(L, -2, "REDIS_VERSION");
    lua_setglobal(L, "redis");
    struct engine *e = engine_of(L);
    for (int f = 0; f < (int)(sizeof(field_names) / sizeof(field_names[0])); f++) {
        lua_pushstring(L, field_names[f]);
        e->field_ref[f] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
}
