/* script_json_cfg.c - reading a lua-cjson instance's configuration through its own functions
 * (json_cfg_sync, script_json.h), for the encoder and the decoder alike. */
#include "script_json.h"

/* Calls the instance's function `name` with no arguments (a query: it returns the setting). */
static void query(lua_State *L, int fenv, const char *name, int nresults)
{
    lua_getfield(L, fenv, name);
    lua_call(L, 0, nresults);
}

static int query_int(lua_State *L, int fenv, const char *name)
{
    query(L, fenv, name, 1);
    int v = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

void json_cfg_sync(lua_State *L, int cfg_idx, struct json_cfg *cfg)
{
    lua_getfenv(L, cfg_idx);
    int fenv = lua_gettop(L);
    query(L, fenv, "encode_sparse_array", 3);
    cfg->sparse_convert = lua_toboolean(L, -3);
    cfg->sparse_ratio = (int)lua_tointeger(L, -2);
    cfg->sparse_safe = (int)lua_tointeger(L, -1);
    lua_pop(L, 3);
    cfg->encode_max_depth = query_int(L, fenv, "encode_max_depth");
    cfg->decode_max_depth = query_int(L, fenv, "decode_max_depth");
    cfg->precision = query_int(L, fenv, "encode_number_precision");
    query(L, fenv, "encode_invalid_numbers", 1); /* false, true or "null" */
    cfg->encode_invalid = lua_type(L, -1) == LUA_TSTRING ? 2 : lua_toboolean(L, -1);
    lua_pop(L, 1);
    query(L, fenv, "decode_invalid_numbers", 1);
    cfg->decode_invalid = lua_toboolean(L, -1);
    lua_pop(L, 2); /* and the fenv */
    cfg->stale = 0;
}
