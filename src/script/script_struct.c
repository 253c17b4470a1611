/* script_struct.c - `struct`, binary packing for scripts, answering as the struct library
 * bundled with Redis 7.0 does, byte for byte (docs/COMMANDS.md, Scripting).
 *
 * A format is read up to its first NUL byte, one option at a time:
 *   >  <  big / little endian from here on (the default is the machine's own)
 *   !n  align fields to at most n bytes (a power of 2; "!" alone: 8); the default is 1
 *   x  one zero byte          b B  char, signed / unsigned       h H  short
 *   l L  long (8)             T  size_t (8)                      i I  int, or in ni bytes
 *   (n up to 32)              f d  float / double                s  string and a zero byte
 *   cn  n bytes of string (c0 in pack: the whole string; in unpack: as many as the value
 *   read just before it says)                                    ' '  ignored
 * A field of size k is aligned to min(k, alignment) with Redis's formula, which for a size
 * that is not a power of 2 (i3, i5...) pads oddly; it is kept as it is.
 *
 * Redis's library converts numbers with C casts; on x86-64 those give defined results that
 * differ from what C promises (out-of-range values, NaN). double_to_u64 spells them out, so
 * the same bytes come out here without undefined behaviour. Sizes are parsed as ints with an
 * overflow check ("integral size overflow"); pack's output grows only with its format and
 * arguments, unpack reads nothing past its data and checks its stack for every result. */
#include "script_struct.h"

#include <float.h>
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAXINTSIZE 32
#define INDEFINITE ((uint64_t)1 << 63) /* x86's result of an invalid conversion */

/* The largest alignment "!" means alone: that of the strictest of these types. */
struct align_probe {
    char c;
    union {
        double d;
        void *p;
        lua_Number n;
        long l;
    } u;
};
#define MAXALIGN ((int)offsetof(struct align_probe, u))

struct hdr {
    int little; /* byte order */
    int align;  /* largest alignment */
};

static int native_little(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(int c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* (uint64_t)n as x86-64 code computes it for every n: exact below 2^63 (negatives wrap),
 * 2^63 and up through the subtract-and-flip-the-top-bit sequence, INDEFINITE for NaN and below
 * -2^63. */
static uint64_t double_to_u64(double n)
{
    if (n >= 9223372036854775808.0) {
        double m = n - 9223372036854775808.0;
        return (m < 9223372036854775808.0 ? (uint64_t)(int64_t)m : INDEFINITE) ^ INDEFINITE;
    }
    if (n >= -9223372036854775808.0)
        return (uint64_t)(int64_t)n;
    return INDEFINITE;
}

/* (float)d as the FPU rounds it: beyond FLT_MAX, to FLT_MAX or infinity. */
static float double_to_float(double d)
{
    if (isnan(d) || isinf(d) || fabs(d) <= FLT_MAX)
        return (float)d;
    if (fabs(d) < 0x1.ffffffp+127) /* below halfway to 2^128 */
        return d > 0 ? FLT_MAX : -FLT_MAX;
    return d > 0 ? INFINITY : -INFINITY;
}

/* The decimal number at *fmt (advancing past it), or df if there is none. */
static int getnum(lua_State *L, const char **fmt, int df)
{
    if (!is_digit(**fmt))
        return df;
    int a = 0;
    do {
        int d = **fmt - '0';
        if (a > INT_MAX / 10 || a * 10 > INT_MAX - d)
            luaL_error(L, "integral size overflow");
        a = a * 10 + d;
        (*fmt)++;
    } while (is_digit(**fmt));
    return a;
}

/* The size of option opt (reading its number, if it takes one); 0 for the options that have
 * none ('s', the control options, unknown ones). */
static size_t optsize(lua_State *L, int opt, const char **fmt)
{
    switch (opt) {
    case 'B':
    case 'b':
        return sizeof(char);
    case 'H':
    case 'h':
        return sizeof(short);
    case 'L':
    case 'l':
        return sizeof(long);
    case 'T':
        return sizeof(size_t);
    case 'f':
        return sizeof(float);
    case 'd':
        return sizeof(double);
    case 'x':
        return 1;
    case 'c':
        return (size_t)getnum(L, fmt, 1);
    case 'i':
    case 'I': {
        int sz = getnum(L, fmt, sizeof(int));
        if (sz > MAXINTSIZE)
            luaL_error(L, "integral size %d is larger than limit of %d", sz, MAXINTSIZE);
        return (size_t)sz;
    }
    default:
        return 0;
    }
}

/* Padding before a field of `size` bytes at offset len. */
static size_t toalign(size_t len, const struct hdr *h, int opt, size_t size)
{
    if (size == 0 || opt == 'c')
        return 0;
    if (size > (size_t)h->align)
        size = (size_t)h->align;
    return (size - (len & (size - 1))) & (size - 1);
}

/* Applies a control option, or raises "invalid format option". */
static void controloptions(lua_State *L, int opt, const char **fmt, struct hdr *h)
{
    switch (opt) {
    case ' ':
        return;
    case '>':
        h->little = 0;
        return;
    case '<':
        h->little = 1;
        return;
    case '!': {
        int a = getnum(L, fmt, MAXALIGN);
        if (a <= 0 || (a & (a - 1)) != 0)
            luaL_error(L, "alignment %d is not a power of 2", a);
        h->align = a;
        return;
    }
    default:
        luaL_argerror(L, 1, lua_pushfstring(L, "invalid format option '%c'", opt));
    }
}

static void defaultoptions(struct hdr *h)
{
    h->little = native_little();
    h->align = 1;
}

/* ---- pack ---- */

/* The low `size` bytes of the number at arg, in byte order (zeros past the 8th). */
static void putinteger(lua_State *L, luaL_Buffer *b, int arg, int little, size_t size)
{
    uint64_t v = double_to_u64((double)luaL_checknumber(L, arg));
    char buf[MAXINTSIZE];
    for (size_t i = 0; i < size; i++, v >>= 8)
        buf[little ? i : size - 1 - i] = (char)(v & 0xff);
    luaL_addlstring(b, buf, size);
}

/* Adds the n bytes of p (the machine's order) in the chosen order. */
static void add_ordered(luaL_Buffer *b, const void *p, size_t n, int little)
{
    const char *s = p;
    if (little == native_little()) {
        luaL_addlstring(b, s, n);
    } else {
        for (size_t i = n; i > 0; i--)
            luaL_addchar(b, s[i - 1]);
    }
}

static int b_pack(lua_State *L)
{
    const char *fmt = luaL_checkstring(L, 1);
    struct hdr h;
    defaultoptions(&h);
    int arg = 2;
    size_t total = 0;
    /* Arguments end here: a missing one reads as this nil, never as the buffer's pieces. */
    lua_pushnil(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    while (*fmt != '\0') {
        int opt = *fmt++;
        size_t size = optsize(L, opt, &fmt);
        size_t pad = toalign(total, &h, opt, size);
        total += pad;
        while (pad-- > 0)
            luaL_addchar(&b, '\0');
        switch (opt) {
        case 'b':
        case 'B':
        case 'h':
        case 'H':
        case 'l':
        case 'L':
        case 'T':
        case 'i':
        case 'I':
            putinteger(L, &b, arg++, h.little, size);
            break;
        case 'x':
            luaL_addchar(&b, '\0');
            break;
        case 'f': {
            float f = double_to_float((double)luaL_checknumber(L, arg++));
            add_ordered(&b, &f, sizeof(f), h.little);
            break;
        }
        case 'd': {
            double d = (double)luaL_checknumber(L, arg++);
            add_ordered(&b, &d, sizeof(d), h.little);
            break;
        }
        case 'c':
        case 's': {
            size_t l;
            const char *s = luaL_checklstring(L, arg++, &l);
            if (size == 0)
                size = l;
            /* Redis names the argument after the string's (arg has moved on). */
            luaL_argcheck(L, l >= size, arg, "string too short");
            luaL_addlstring(&b, s, size);
            if (opt == 's') {
                luaL_addchar(&b, '\0');
                size++;
            }
            break;
        }
        default:
            controloptions(L, opt, &fmt, &h);
        }
        total += size;
    }
    luaL_pushresult(&b);
    return 1;
}

/* ---- unpack ---- */

/* The integer of `size` bytes at p: the last 8 read when there are more; sign-extended from
 * bit size*8-1 taken modulo 64, the shift x86 performs (so i9..i32 extend from odd bits). */
static lua_Number getinteger(const unsigned char *p, int little, int issigned, size_t size)
{
    uint64_t l = 0;
    for (size_t i = 0; i < size; i++)
        l = l << 8 | p[little ? size - 1 - i : i];
    if (!issigned)
        return (lua_Number)l;
    uint64_t mask = ~(uint64_t)0 << (((int)size * 8 - 1) & 63);
    if (l & mask)
        l |= mask;
    return (lua_Number)(int64_t)l;
}

static void get_ordered(void *out, const char *p, size_t n, int little)
{
    char *o = out;
    if (little == native_little()) {
        memcpy(o, p, n);
    } else {
        for (size_t i = 0; i < n; i++)
            o[i] = p[n - 1 - i];
    }
}

static int b_unpack(lua_State *L)
{
    const char *fmt = luaL_checkstring(L, 1);
    size_t ld;
    const char *data = luaL_checklstring(L, 2, &ld);
    /* The offset as Redis reads it, unsigned: a negative one is huge (too short), 0 is not. */
    size_t pos = (size_t)luaL_optinteger(L, 3, 1);
    luaL_argcheck(L, pos > 0, 3, "offset must be 1 or greater");
    pos--;
    struct hdr h;
    defaultoptions(&h);
    int n = 0;
    while (*fmt != '\0') {
        int opt = *fmt++;
        size_t size = optsize(L, opt, &fmt);
        pos += toalign(pos, &h, opt, size);
        luaL_argcheck(L, size <= ld && pos <= ld - size, 2, "data string too short");
        luaL_checkstack(L, 2, "too many results"); /* this result and the final position */
        switch (opt) {
        case 'b':
        case 'B':
        case 'h':
        case 'H':
        case 'l':
        case 'L':
        case 'T':
        case 'i':
        case 'I':
            lua_pushnumber(L, getinteger((const unsigned char *)data + pos, h.little,
                                         opt >= 'a', size));
            n++;
            break;
        case 'x':
            break;
        case 'f': {
            float f;
            get_ordered(&f, data + pos, sizeof(f), h.little);
            lua_pushnumber(L, (lua_Number)f);
            n++;
            break;
        }
        case 'd': {
            double d;
            get_ordered(&d, data + pos, sizeof(d), h.little);
            lua_pushnumber(L, (lua_Number)d);
            n++;
            break;
        }
        case 'c':
            if (size == 0) {
                if (n == 0 || !lua_isnumber(L, -1))
                    luaL_error(L, "format 'c0' needs a previous size");
                size = (size_t)double_to_u64((double)lua_tonumber(L, -1));
                lua_pop(L, 1);
                n--;
                luaL_argcheck(L, size <= ld && pos <= ld - size, 2, "data string too short");
            }
            lua_pushlstring(L, data + pos, size);
            n++;
            break;
        case 's': {
            const char *e = memchr(data + pos, '\0', ld - pos);
            if (e == NULL)
                luaL_error(L, "unfinished string in data");
            size = (size_t)(e - (data + pos)) + 1;
            lua_pushlstring(L, data + pos, size - 1);
            n++;
            break;
        }
        default:
            controloptions(L, opt, &fmt, &h);
        }
        pos += size;
    }
    lua_pushinteger(L, (lua_Integer)(pos + 1)); /* the next position */
    return n + 1;
}

/* ---- size ---- */

static int b_size(lua_State *L)
{
    const char *fmt = luaL_checkstring(L, 1);
    struct hdr h;
    defaultoptions(&h);
    size_t pos = 0;
    while (*fmt != '\0') {
        int opt = *fmt++;
        size_t size = optsize(L, opt, &fmt);
        pos += toalign(pos, &h, opt, size);
        if (opt == 's')
            luaL_argerror(L, 1, "option 's' has no fixed size");
        else if (opt == 'c' && size == 0)
            luaL_argerror(L, 1, "option 'c0' has no fixed size");
        /* Letters and digits are never control options: an unknown one has size 0 here. */
        if (!is_alnum(opt))
            controloptions(L, opt, &fmt, &h);
        pos += size;
    }
    lua_pushinteger(L, (lua_Integer)pos);
    return 1;
}

int luaopen_struct(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"pack", b_pack},
        {"unpack", b_unpack},
        {"size", b_size},
        {NULL, NULL},
    };
    lua_createtable(L, 0, 3);
    for (const luaL_Reg *r = fns; r->name != NULL; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    return 1;
}
