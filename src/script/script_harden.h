/* script_harden.h - the wrappers and replacements that close the holes of the stock Lua
 * libraries (script_harden.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_HARDEN_H
#define RLIMITD_SCRIPT_HARDEN_H

#include <lua.h>

struct engine;

/* Replaces unpack and wraps bit.tohex and collectgarbage in the real globals and libraries;
 * open_libs runs it before it builds the sandbox over them. */
void harden_libs(lua_State *L);
/* Gives the collector back the engine's settings after a run that changed them
 * (engine->gc_tuned). */
void harden_gc_restore(struct engine *e);

#endif
