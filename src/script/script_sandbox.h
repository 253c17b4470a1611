/* script_sandbox.h - the globals and libraries a script sees, read-only as in Redis 7
 * (script_sandbox.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_SANDBOX_H
#define RLIMITD_SCRIPT_SANDBOX_H

#include <lua.h>

/* Opens the libraries Redis gives scripts and builds the sandbox over them: the globals proxy
 * G becomes LUA_GLOBALSINDEX, and the engine's registry references (W, D, the read-only set,
 * the string metatable shown) are set. Run once per state, protected (a lua_CFunction). */
int open_libs(lua_State *L);

#endif
