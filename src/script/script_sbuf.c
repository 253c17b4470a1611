/* script_sbuf.c - byte buffers in a Lua state's memory (script_sbuf.h). */
#include "script_sbuf.h"

#include <lauxlib.h>
#include <stdint.h>

static void resize(lua_State *L, struct sbuf *b, size_t cap)
{
    void *ud;
    lua_Alloc f = lua_getallocf(L, &ud);
    void *p = f(ud, b->p, b->cap, cap);
    if (p == NULL && cap != 0) {
        /* Lua's own text for a failed allocation, interned when the state was created. */
        lua_pushliteral(L, "not enough memory");
        lua_error(L);
    }
    b->p = cap != 0 ? p : NULL;
    b->cap = cap;
}

void sbuf_grow(lua_State *L, struct sbuf *b, size_t n)
{
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            lua_pushliteral(L, "not enough memory");
            lua_error(L);
        }
        cap *= 2;
    }
    resize(L, b, cap);
}

void sbuf_reset(lua_State *L, struct sbuf *b)
{
    b->len = 0;
    if (b->cap > SBUF_KEEP)
        resize(L, b, 0);
}

static int sbuf_gc(lua_State *L)
{
    struct sbuf *b = lua_touserdata(L, 1);
    b->len = 0;
    if (b->cap != 0)
        resize(L, b, 0);
    return 0;
}

struct sbuf *sbuf_push_new(lua_State *L)
{
    struct sbuf *b = lua_newuserdata(L, sizeof(*b));
    memset(b, 0, sizeof(*b));
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, sbuf_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    return b;
}
