/* script_json.h - cjson.encode and cjson.decode as rlimitd runs them: its own encoder and
 * decoder, answering as lua-cjson 2.1.0 (the library Debian ships and Redis bundles) does, in
 * the Lua state's own memory (script_json.c, script_json_decode.c). Private to src/script.
 *
 * lua-cjson builds its output, and a copy of every decoded input, in malloc'd buffers the state
 * does not count: an output past 2 GiB ended the process ("BUG: Invalid strbuf length
 * requested", CVE-2022-24834's class), and a decode that ran out of Lua memory halfway leaked
 * its copy of the input, call after call. Debian's library stays linked for what it does
 * safely (its configuration functions, their argument checks and texts, cjson.null, new);
 * encode and decode are replaced in every instance (cjson itself and each cjson.new()), and
 * read that instance's configuration through its own functions. */
#ifndef RLIMITD_SCRIPT_JSON_H
#define RLIMITD_SCRIPT_JSON_H

#include <lua.h>

#include "script_sbuf.h"

/* One instance's configuration, as its lua-cjson functions last reported it. A configuration
 * function marks it stale before it runs (so even one that fails halfway is read again); encode
 * and decode read it again when stale. */
struct json_cfg {
    int stale;
    int sparse_convert, sparse_ratio, sparse_safe; /* encode_sparse_array */
    int encode_max_depth, decode_max_depth;
    int encode_invalid; /* encode_invalid_numbers: 0 off, 1 on, 2 "null" */
    int decode_invalid; /* decode_invalid_numbers */
    int precision;      /* encode_number_precision */
};

/* Replaces encode, decode and new of the lua-cjson instance table at idx, and wraps its
 * configuration functions (json_cfg.stale). */
void json_instrument(lua_State *L, int idx);
/* Reads the instance's configuration again if it is stale (cfg_idx: its json_cfg userdata). */
void json_cfg_sync(lua_State *L, int cfg_idx, struct json_cfg *cfg);
/* cjson.decode(s): upvalue 1 the instance's json_cfg, 2 a struct sbuf for unescaped strings. */
int json_decode(lua_State *L);

#endif
