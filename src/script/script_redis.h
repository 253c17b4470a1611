/* script_redis.h - the `redis` library scripts call and Redis's conversions between Lua
 * values and replies, errors included (script_redis.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_REDIS_H
#define RLIMITD_SCRIPT_REDIS_H

#include <lua.h>
#include <stddef.h>

struct rbuf;

/* Pushes {err = "<CODE> <msg>"} as Redis builds it from an error text: "-CODE msg" keeps its
 * code, a text without the dash gets "ERR", trailing CR/LF are trimmed. */
void push_error(lua_State *L, const char *s, size_t n);
/* Raises msg as a bare error, without a position (as Redis raises its own). */
int raw_error(lua_State *L, const char *msg);
/* Appends the Lua value at idx to out as Redis converts a script's reply (depth 0 for the
 * script's own reply). */
void lua_to_reply(lua_State *L, int idx, struct rbuf *out, int depth);
/* Sets the global `redis`: the library's functions and constants. */
void redis_lib_open(lua_State *L);
/* Fills ar ("Sl") for the function that raised the error an error handler was called with: its
 * caller, or the caller's caller when that is a C function (error, redis.call). 0 if none. */
int raiser(lua_State *L, lua_Debug *ar);
/* The handler every script runs under: turns any error into Redis's final text,
 * "<msg> script: <sha>, on @user_script:<line>." */
int err_handler(lua_State *L);

#endif
