/* script_struct.h - the `struct` library Redis 7.0 gives its scripts (script_struct.c). */
#ifndef RLIMITD_SCRIPT_STRUCT_H
#define RLIMITD_SCRIPT_STRUCT_H

#include <lua.h>

/* Pushes a new table with pack, unpack and size; sets no global. Returns 1. */
int luaopen_struct(lua_State *L);

#endif
