/* script_cmsgpack.h - the `cmsgpack` library Redis 7.0 gives its scripts (script_cmsgpack.c). */
#ifndef RLIMITD_SCRIPT_CMSGPACK_H
#define RLIMITD_SCRIPT_CMSGPACK_H

#include <lua.h>

/* Pushes a new table with pack, unpack, unpack_one, unpack_limit and the library's _NAME,
 * _VERSION, _COPYRIGHT and _DESCRIPTION strings; sets no global. Returns 1. */
int luaopen_cmsgpack(lua_State *L);

#endif
