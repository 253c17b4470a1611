/* script_sandbox.h - the globals and libraries a script sees, read-only as in Redis 7
 * (script_sandbox.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_SANDBOX_H
#define RLIMITD_SCRIPT_SANDBOX_H

#include <lua.h>
#include <stddef.h>

/* The longest source handed to Lua's parser. Lua 5.1's lexer holds a long bracket's level (its
 * count of '=') in an int and cuts the brackets off a long string with 2 * (2 + level): at a
 * level of 2^30 - 2 that overflows and the string is copied from before its buffer
 * (CVE-2025-46819; Redis counts in size_t since). The lexer copies every '=' it reads into its
 * token buffer, which grows by doubling in the state's memory (lua_alloc), so a level past
 * 2^27 already fails with "not enough memory" under the 256 MB limit: the overflow is out of
 * reach. This bound keeps it so whatever the state's limit: EVAL bodies are far shorter
 * (proto-max-bulk-len is at most 512 MB) and load/loadstring sources are strings of a state. */
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
