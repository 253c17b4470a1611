/* script_sbuf.h - a growable byte buffer in a Lua state's own memory, for the libraries that
 * build output in C (cmsgpack, cjson): its bytes count toward the state's limit like any Lua
 * object's, and running out of them is a Lua error, never a process exit (script_sbuf.c).
 * Private to src/script.
 *
 * A buffer is held by a userdata (a library function's upvalue), not by the C stack: an error
 * halfway through a call leaves it to the next call or to the collector, nothing leaks. */
#ifndef RLIMITD_SCRIPT_SBUF_H
#define RLIMITD_SCRIPT_SBUF_H

#include <lua.h>
#include <stddef.h>
#include <string.h>

struct sbuf {
    char *p;
    size_t len, cap;
};

/* Bytes a buffer keeps between calls; a call that grew it past this gives the rest back. */
#define SBUF_KEEP ((size_t)65536)

/* Pushes a new empty buffer (a userdata that frees its bytes when collected). */
struct sbuf *sbuf_push_new(lua_State *L);
/* Makes room for n more bytes, or raises "not enough memory" (a Lua error). */
void sbuf_grow(lua_State *L, struct sbuf *b, size_t n);
/* Empties the buffer, giving back what a large call left (at the start and end of a call). */
void sbuf_reset(lua_State *L, struct sbuf *b);

static inline char *sbuf_room(lua_State *L, struct sbuf *b, size_t n)
{
    if (b->cap - b->len < n)
        sbuf_grow(L, b, n);
    return b->p + b->len;
}

static inline void sbuf_add(lua_State *L, struct sbuf *b, const void *s, size_t n)
{
    if (n == 0)
        return;
    memcpy(sbuf_room(L, b, n), s, n);
    b->len += n;
}

static inline void sbuf_addchar(lua_State *L, struct sbuf *b, char c)
{
    *sbuf_room(L, b, 1) = c;
    b->len++;
}

#endif
