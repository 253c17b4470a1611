/* script_bytecode.h - what a compiled script can do to tables, read from its Lua 5.1 bytecode.
 *
 * The sandbox (script_sandbox.c) makes every table a script can reach but does not own read-only
 * by proxies, which cost table lookups on every global and library access. A script whose
 * code provably cannot write to such tables runs without the proxies: this scan proves it. */
#ifndef RLIMITD_SCRIPT_BYTECODE_H
#define RLIMITD_SCRIPT_BYTECODE_H

#include <stddef.h>

#define BC_SETS_GLOBALS 0x1u /* a SETGLOBAL: assigns a global variable */
#define BC_SETS_TABLES 0x2u  /* a SETTABLE: assigns a field of a table it did not construct */
#define BC_NAMES_GLOBALS 0x4u /* a string constant naming _G, load or loadstring */
#define BC_UNKNOWN 0x7u      /* the chunk could not be read: assume everything */

/* Scans a binary chunk as lua_dump writes it on this machine (a Lua 5.1 chunk of the host's
 * sizes; anything else is BC_UNKNOWN) and returns the BC_* facts of the function and every
 * function nested in it. Reads at most n bytes. */
unsigned script_bytecode_scan(const unsigned char *chunk, size_t n);

#endif
