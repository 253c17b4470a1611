/* script_sandbox.h - the globals and libraries a script sees, read-only as in Redis 7
 * (script_sandbox.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_SANDBOX_H
#define RLIMITD_SCRIPT_SANDBOX_H

#include <lua.h>
#include <stddef.h>

/* The longest source handed to Lua's parser. Lua 5.1's lexer counts lines and the '=' of a long
 * bracket in ints: a source of 2^31 lines or brackets of 2^30 '=' made it read out of bounds
 * (CVE-2025-46819). EVAL bodies are far shorter (proto-max-bulk-len is at most 512 MB) and
 * load/loadstring sources are strings of a state (256 MB at most); the check keeps it so. */
#define SCRIPT_SOURCE_MAX ((size_t)1 << 30)

/* Opens the libraries Redis gives scripts and builds the sandbox over them: the globals proxy
 * G becomes LUA_GLOBALSINDEX, and the engine's registry references (W, D, the read-only set,
 * the string metatable shown) are set. Run once per state, protected (a lua_CFunction). */
int open_libs(lua_State *L);
/* Compiles source text (never bytecode: a chunk starting with ESC fails as Redis's Lua fails it)
 * with the chunk name anchored on the stack while the parser runs. Returns 0 with the function
 * on the stack, or Lua's error code with the message. */
int compile_chunk(lua_State *L, const char *s, size_t n, const char *name);

#endif
