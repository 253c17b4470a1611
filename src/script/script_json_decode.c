/* script_json_decode.c - cjson.decode (script_json.h), answering as lua-cjson 2.1.0 does.
 *
 * The input is read as lua-cjson reads it, as a C string: a zero byte ends it (a Lua string
 * always has one after its last byte, so nothing is read past the string). Objects become
 * tables (a repeated key keeps its last value), arrays tables from 1, null cjson.null (a NULL
 * light userdata). Numbers are read by strtod, so with decode_invalid_numbers (the default)
 * hexadecimal numbers, a leading '+', inf and nan are numbers too. Errors name the token found
 * and its position: "Expected value but found invalid token at character 1". Nesting is bounded
 * by decode_max_depth and by the Lua stack, with lua-cjson's stack use per level (two slots
 * per array, three per object), so the same input fails at the same depth.
 *
 * Unescaped strings are built in a buffer of the state's memory (script_sbuf.h, upvalue 2);
 * a string without escapes is pushed straight from the input. Running out of memory halfway is
 * a Lua error that leaves nothing behind. */
#include "script_json.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum tok {
    T_OBJ_BEGIN,
    T_OBJ_END,
    T_ARR_BEGIN,
    T_ARR_END,
    T_STRING,
    T_NUMBER,
    T_BOOLEAN,
    T_NULL,
    T_COLON,
    T_COMMA,
    T_END,
    T_WHITESPACE,
    T_ERROR,
    T_UNKNOWN,
};

/* How lua-cjson names a token it did not expect. */
static const char *const tok_name[] = {
    "T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING", "T_NUMBER",
    "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END", "T_WHITESPACE", "T_ERROR",
    "T_UNKNOWN",
};

/* The token a byte starts: T_UNKNOWN for those that need reading further, T_ERROR for any
 * byte no token starts with. */
static enum tok tok_of(unsigned char c)
{
    switch (c) {
    case '{': return T_OBJ_BEGIN;
    case '}': return T_OBJ_END;
    case '[': return T_ARR_BEGIN;
    case ']': return T_ARR_END;
    case ',': return T_COMMA;
    case ':': return T_COLON;
    case '\0': return T_END;
    case ' ': case '\t': case '\n': case '\r': return T_WHITESPACE;
    case 'f': case 'i': case 'I': case 'n': case 'N': case 't': case '"': case '+': case '-':
        return T_UNKNOWN;
    default:
        return c >= '0' && c <= '9' ? T_UNKNOWN : T_ERROR;
    }
}

struct token {
    enum tok type;
    size_t index;      /* where it starts (0-based) */
    const char *str;   /* T_STRING: its bytes; T_ERROR: what is wrong */
    size_t len;        /* T_STRING */
    double num;        /* T_NUMBER */
    int boolean;       /* T_BOOLEAN */
};

struct dec {
    lua_State *L;
    const char *data, *ptr;
    struct sbuf *tmp;
    const struct json_cfg *cfg;
    int depth;
};

static void tok_error(struct dec *d, struct token *t, const char *what)
{
    t->type = T_ERROR;
    t->index = (size_t)(d->ptr - d->data);
    t->str = what;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The four hex digits at p (a zero byte is not one, so nothing past the input is read), or -1. */
static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_digit(p[i]);
        if (h < 0)
            return -1;
        v = v << 4 | h;
    }
    return v;
}

/* Appends the UTF-8 of the \uXXXX escape at d->ptr (a surrogate pair takes two escapes) and
 * moves past it. Returns -1 for an invalid escape (d->ptr left at its backslash). */
static int unicode_escape(struct dec *d)
{
    int cp = hex4(d->ptr + 2);
    size_t used = 6;
    if (cp < 0)
        return -1;
    if ((cp & 0xF800) == 0xD800) {
        if (cp & 0x400) /* a low surrogate first */
            return -1;
        if (d->ptr[6] != '\\' || d->ptr[7] != 'u')
            return -1;
        int low = hex4(d->ptr + 8);
        if (low < 0 || (low & 0xFC00) != 0xDC00)
            return -1;
        cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
        used = 12;
    }
    char u[4];
    size_t n;
    if (cp <= 0x7F) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp <= 0x7FF) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp <= 0xFFFF) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sbuf_add(d->L, d->tmp, u, n);
    d->ptr += used;
    return 0;
}

/* The character an escape \c stands for, 'u' for \u, 0 for an invalid one. */
static char escaped(char c)
{
    switch (c) {
    case '"': case '\\': case '/': case 'u': return c;
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

static void string_token(struct dec *d, struct token *t)
{
    d->ptr++; /* the opening quote */
    /* Most strings have no escape: their bytes are used where they are. */
    const char *s = d->ptr;
    while (*s != '"' && *s != '\\' && *s != '\0')
        s++;
    if (*s == '"') {
        t->type = T_STRING;
        t->str = d->ptr;
        t->len = (size_t)(s - d->ptr);
        d->ptr = s + 1;
        return;
    }
    d->tmp->len = 0;
    sbuf_add(d->L, d->tmp, d->ptr, (size_t)(s - d->ptr));
    d->ptr = s;
    char c;
    while ((c = *d->ptr) != '"') {
        if (c == '\0') {
            tok_error(d, t, "unexpected end of string");
            return;
        }
        if (c == '\\') {
            c = escaped(d->ptr[1]);
            if (c == 'u') {
                if (unicode_escape(d) == 0)
                    continue;
                tok_error(d, t, "invalid unicode escape code");
                return;
            }
            if (c == 0) {
                tok_error(d, t, "invalid escape code");
                return;
            }
            d->ptr++;
        }
        sbuf_addchar(d->L, d->tmp, c);
        d->ptr++;
    }
    d->ptr++; /* the closing quote */
    t->type = T_STRING;
    t->str = d->tmp->p;
    t->len = d->tmp->len;
}

/* Whether the number at p is one strict JSON refuses though strtod reads it: a leading '+', a
 * leading zero or 0x, inf, nan. */
static int invalid_number(const char *p)
{
    if (*p == '+')
        return 1;
    if (*p == '-')
        p++;
    if (*p == '0') {
        char c = p[1];
        return (c | 0x20) == 'x' || (c >= '0' && c <= '9');
    }
    if (*p <= '9')
        return 0;
    return strncasecmp(p, "inf", 3) == 0 || strncasecmp(p, "nan", 3) == 0;
}

static void number_token(struct dec *d, struct token *t)
{
    char *end;
    t->type = T_NUMBER;
    t->num = strtod(d->ptr, &end);
    if (end == d->ptr)
        tok_error(d, t, "invalid number");
    else
        d->ptr = end;
}

static void next_token(struct dec *d, struct token *t)
{
    unsigned char c;
    while ((t->type = tok_of(c = (unsigned char)*d->ptr)) == T_WHITESPACE)
        d->ptr++;
    t->index = (size_t)(d->ptr - d->data);
    if (t->type == T_ERROR) {
        tok_error(d, t, "invalid token");
        return;
    }
    if (t->type == T_END)
        return;
    if (t->type != T_UNKNOWN) {
        d->ptr++;
        return;
    }
    if (c == '"') {
        string_token(d, t);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (!d->cfg->decode_invalid && invalid_number(d->ptr))
            tok_error(d, t, "invalid number");
        else
            number_token(d, t);
    } else if (strncmp(d->ptr, "true", 4) == 0) {
        t->type = T_BOOLEAN;
        t->boolean = 1;
        d->ptr += 4;
    } else if (strncmp(d->ptr, "false", 5) == 0) {
        t->type = T_BOOLEAN;
        t->boolean = 0;
        d->ptr += 5;
    } else if (strncmp(d->ptr, "null", 4) == 0) {
        t->type = T_NULL;
        d->ptr += 4;
    } else if (d->cfg->decode_invalid && invalid_number(d->ptr)) {
        number_token(d, t); /* inf, nan, +1 */
    } else {
        tok_error(d, t, "invalid token");
    }
}

static void parse_error(struct dec *d, const char *expected, const struct token *t)
{
    luaL_error(d->L, "Expected %s but found %s at character %d", expected,
               t->type == T_ERROR ? t->str : tok_name[t->type], (int)(t->index + 1));
}

/* One level deeper, with `slots` more of the Lua stack, or lua-cjson's error. */
static void descend(struct dec *d, int slots)
{
    d->depth++;
    if (d->depth > d->cfg->decode_max_depth || !lua_checkstack(d->L, slots))
        luaL_error(d->L, "Found too many nested data structures (%d) at character %d", d->depth,
                   (int)(d->ptr - d->data));
}

static void value(struct dec *d, struct token *t);

static void object(struct dec *d)
{
    struct token t;
    descend(d, 3);
    lua_newtable(d->L);
    next_token(d, &t);
    if (t.type == T_OBJ_END) {
        d->depth--;
        return;
    }
    for (;;) {
        if (t.type != T_STRING)
            parse_error(d, "object key string", &t);
        lua_pushlstring(d->L, t.str, t.len);
        next_token(d, &t);
        if (t.type != T_COLON)
            parse_error(d, "colon", &t);
        next_token(d, &t);
        value(d, &t);
        lua_rawset(d->L, -3);
        next_token(d, &t);
        if (t.type == T_OBJ_END) {
            d->depth--;
            return;
        }
        if (t.type != T_COMMA)
            parse_error(d, "comma or object end", &t);
        next_token(d, &t);
    }
}

static void array(struct dec *d)
{
    struct token t;
    descend(d, 2);
    lua_newtable(d->L);
    next_token(d, &t);
    if (t.type == T_ARR_END) {
        d->depth--;
        return;
    }
    for (int i = 1;; i++) {
        value(d, &t);
        lua_rawseti(d->L, -2, i);
        next_token(d, &t);
        if (t.type == T_ARR_END) {
            d->depth--;
            return;
        }
        if (t.type != T_COMMA)
            parse_error(d, "comma or array end", &t);
        next_token(d, &t);
    }
}

/* Pushes the value token t starts. */
static void value(struct dec *d, struct token *t)
{
    switch (t->type) {
    case T_STRING:
        lua_pushlstring(d->L, t->str, t->len);
        return;
    case T_NUMBER:
        lua_pushnumber(d->L, (lua_Number)t->num);
        return;
    case T_BOOLEAN:
        lua_pushboolean(d->L, t->boolean);
        return;
    case T_OBJ_BEGIN:
        object(d);
        return;
    case T_ARR_BEGIN:
        array(d);
        return;
    case T_NULL:
        lua_pushlightuserdata(d->L, NULL);
        return;
    default:
        parse_error(d, "value", t);
    }
}

int json_decode(lua_State *L)
{
    struct json_cfg *cfg = lua_touserdata(L, lua_upvalueindex(1));
    struct sbuf *tmp = lua_touserdata(L, lua_upvalueindex(2));
    luaL_argcheck(L, lua_gettop(L) == 1, 1, "expected 1 argument");
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (len >= 2 && (s[0] == '\0' || s[1] == '\0'))
        luaL_error(L, "JSON parser does not support UTF-16 or UTF-32");
    if (cfg->stale)
        json_cfg_sync(L, lua_upvalueindex(1), cfg);
    sbuf_reset(L, tmp); /* a call that failed may have left it large */
    struct dec d = {L, s, s, tmp, cfg, 0};
    struct token t;
    next_token(&d, &t);
    value(&d, &t);
    next_token(&d, &t);
    if (t.type != T_END)
        parse_error(&d, "the end", &t);
    sbuf_reset(L, tmp);
    return 1;
}
