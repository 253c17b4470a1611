/* script_bytecode.c - reads the facts script_bytecode.h names off a Lua 5.1 binary chunk.
 *
 * The chunk layout is Lua 5.1's (lundump.c reads it): a 12-byte header, then a function:
 * source (string), linedefined, lastlinedefined (int), nups, numparams, is_vararg,
 * maxstacksize (byte), code (int n, n instructions), constants (int n, each a type byte and a
 * value), nested functions (int n, each a function), debug info (line info, locals, upvalue
 * names). A string is a size_t length (counting a trailing NUL; 0 for none) and its bytes.
 * The opcode is an instruction's low 6 bits. */
#include "script_bytecode.h"

#include <stdint.h>
#include <string.h>

#define OP_MASK 0x3Fu
#define OP_SETGLOBAL 7u
#define OP_SETTABLE 9u
#define T_NIL 0
#define T_BOOLEAN 1
#define T_NUMBER 3
#define T_STRING 4
#define MAX_NESTING 256 /* the parser stops far sooner (LUAI_MAXCCALLS) */

struct reader {
    const unsigned char *p, *end;
    unsigned facts;
};

static int take(struct reader *r, void *out, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return -1;
    if (out != NULL)
        memcpy(out, r->p, n);
    r->p += n;
    return 0;
}

static int take_int(struct reader *r, int *v)
{
    return take(r, v, sizeof(*v)) == 0 && *v >= 0 ? 0 : -1;
}

/* A string; *s and *len describe it without its NUL (len 0 and s NULL for none). */
static int take_string(struct reader *r, const unsigned char **s, size_t *len)
{
    size_t n;
    if (take(r, &n, sizeof(n)) != 0 || n > (size_t)(r->end - r->p))
        return -1;
    *s = n > 0 ? r->p : NULL;
    *len = n > 0 ? n - 1 : 0;
    r->p += n;
    return 0;
}

static int names_globals(const unsigned char *s, size_t len)
{
    static const char *const names[] = {"_G", "load", "loadstring"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (len == strlen(names[i]) && memcmp(s, names[i], len) == 0)
            return 1;
    return 0;
}

/* Skips n items of `size` bytes after an int count. */
static int skip_vector(struct reader *r, size_t size)
{
    int n;
    if (take_int(r, &n) != 0 || (size_t)n > (size_t)(r->end - r->p) / size)
        return -1;
    r->p += (size_t)n * size;
    return 0;
}

static int read_function(struct reader *r, int depth)
{
    const unsigned char *s;
    size_t len;
    int n;
    if (depth > MAX_NESTING || take_string(r, &s, &len) != 0 || take(r, NULL, 2 * sizeof(int) + 4))
        return -1;
    /* code */
    if (take_int(r, &n) != 0 || (size_t)n > (size_t)(r->end - r->p) / sizeof(uint32_t))
        return -1;
    for (int i = 0; i < n; i++) {
        uint32_t ins;
        memcpy(&ins, r->p + (size_t)i * sizeof(ins), sizeof(ins));
        if ((ins & OP_MASK) == OP_SETGLOBAL)
            r->facts |= BC_SETS_GLOBALS;
        else if ((ins & OP_MASK) == OP_SETTABLE)
            r->facts |= BC_SETS_TABLES;
    }
    r->p += (size_t)n * sizeof(uint32_t);
    /* constants */
    if (take_int(r, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        unsigned char type;
        if (take(r, &type, 1) != 0)
            return -1;
        if (type == T_BOOLEAN) {
            if (take(r, NULL, 1) != 0)
                return -1;
        } else if (type == T_NUMBER) {
            if (take(r, NULL, sizeof(double)) != 0)
                return -1;
        } else if (type == T_STRING) {
            if (take_string(r, &s, &len) != 0)
                return -1;
            if (s != NULL && names_globals(s, len))
                r->facts |= BC_NAMES_GLOBALS;
        } else if (type != T_NIL) {
            return -1;
        }
    }
    /* nested functions */
    if (take_int(r, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (read_function(r, depth + 1) != 0)
            return -1;
    /* debug: line info, locals (name, startpc, endpc), upvalue names */
    if (skip_vector(r, sizeof(int)) != 0 || take_int(r, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (take_string(r, &s, &len) != 0 || take(r, NULL, 2 * sizeof(int)) != 0)
            return -1;
    if (take_int(r, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (take_string(r, &s, &len) != 0)
            return -1;
    return 0;
}

unsigned script_bytecode_scan(const unsigned char *chunk, size_t n)
{
    /* ESC "Lua", version 5.1, official format, little endian, then the sizes of int, size_t,
     * Instruction and lua_Number, and 0 for a floating-point lua_Number. */
    const unsigned char header[12] = {
        0x1B, 'L', 'u', 'a', 0x51, 0, 1, sizeof(int), sizeof(size_t), 4, sizeof(double), 0,
    };
    const uint16_t one = 1;
    if (n < sizeof(header) || memcmp(chunk, header, sizeof(header)) != 0 ||
        *(const unsigned char *)&one != 1)
        return BC_UNKNOWN;
    struct reader r = {chunk + sizeof(header), chunk + n, 0};
    if (read_function(&r, 0) != 0 || r.p != r.end)
        return BC_UNKNOWN;
    return r.facts;
}
