/* test_script_json.c - rlimitd's cjson.encode and cjson.decode (src/script/script_json.h)
 * against Debian's lua-cjson itself, in one Lua state: two instances of the library, one as
 * Debian ships it and one with rlimitd's encoder and decoder, get the same seeded random values,
 * JSON texts (valid, mutated, cut, deeply nested) and configurations, and must answer the same
 * string, the same decoded value or the same error text. A mismatch prints its seed and case.
 *
 * And what lua-cjson could not do: output and decoding memory come from the state's allocator,
 * so a state with a small limit fails a large encode or decode with "not enough memory" and
 * holds nothing afterwards (lua-cjson ended the process past 2 GiB, and leaked its copy of the
 * input when decoding ran out of memory). */
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include <lua-cjson.h>

#include "../../src/script/script_json.h"

/* The comparison, in Lua: ref and ours are the two instances. Returns nil, or a description of
 * the first difference. */
static const char diff_lua[] =
    "local ref, ours, seed, cases = ...\n"
    "math.randomseed(seed)\n"
    "local R = math.random\n"
    "local function canon(v, seen)\n"
    "  local t = type(v)\n"
    "  if t == 'number' then\n"
    "    if v ~= v then return 'n:nan' end\n"
    "    return 'n:' .. string.format('%.17g', v)\n"
    "  elseif t == 'string' then return 's:' .. string.format('%q', v)\n"
    "  elseif t == 'userdata' then return v == ref.null and 'null' or 'ud'\n"
    "  elseif t ~= 'table' then return t .. ':' .. tostring(v) end\n"
    "  local ks = {}\n"
    "  for k, x in pairs(v) do ks[#ks + 1] = canon(k) .. '=' .. canon(x) end\n"
    "  table.sort(ks)\n"
    "  return '{' .. table.concat(ks, ',') .. '}'\n"
    "end\n"
    "local bytes = {0, 1, 8, 9, 10, 12, 13, 31, 32, 34, 47, 92, 127, 128, 200, 255}\n"
    "local function rstring()\n"
    "  local n, t = R(0, 12), {}\n"
    "  for i = 1, n do\n"
    "    t[i] = string.char(R(2) == 1 and bytes[R(#bytes)] or R(32, 126))\n"
    "  end\n"
    "  return table.concat(t)\n"
    "end\n"
    "local specials = {0, -0.0, 1, -1, 0.5, 0.1, 1/3, 1e14, 1e15 - 1, 123456789012345,\n"
    "  2^31, 2^31 - 1, -2^31, 2^53, 2^63, 1e300, -1e-300, 5e-324, 1/0, -1/0, 0/0,\n"
    "  99999999999999, 100000000000000, 1e-5, 123.456}\n"
    "local function rnumber()\n"
    "  local k = R(4)\n"
    "  if k == 1 then return specials[R(#specials)] end\n"
    "  if k == 2 then return R(-1000000, 1000000) end\n"
    "  if k == 3 then return (R() - 0.5) * 10 ^ R(-20, 20) end\n"
    "  return R(-2^31 + 1, 2^31 - 1) * 2^R(0, 40)\n"
    "end\n"
    "local keys = {1, 2, 3, 0, -1, 1.5, 1000, 2^31 + 0.5, 1/0, 'a', 'b', '', 'x/y', true}\n"
    /* No integer key near 2^31: with encode_sparse_array ratio 0 both libraries would walk
     * that many array slots. */
    "local function rvalue(d)\n"
    "  local k = R(d > 4 and 5 or 9)\n"
    "  if k == 1 then return rstring() end\n"
    "  if k == 2 then return rnumber() end\n"
    "  if k == 3 then return R(2) == 1 end\n"
    "  if k == 4 then return R(3) == 1 and ref.null or (R(2) == 1 and print or nil) end\n"
    "  if k == 5 then return R(2) == 1 and 'x' or 7 end\n"
    "  local t = {}\n"
    "  if k == 6 then for i = 1, R(0, 6) do t[i] = rvalue(d + 1) end\n"
    "  elseif k == 7 then for i = 1, R(0, 4) do t[R(1, 40)] = rvalue(d + 1) end\n"
    "  elseif k == 8 then for i = 1, R(0, 4) do t[rstring()] = rvalue(d + 1) end\n"
    "  else for i = 1, R(0, 3) do t[keys[R(#keys)]] = rvalue(d + 1) end end\n"
    "  if R(40) == 1 then t[#t + 1] = t end\n"
    "  return t\n"
    "end\n"
    "local function configure()\n"
    "  local s = {R(2) == 1, ({0, 1, 2, 3, 10, 2147483647})[R(6)], R(0, 20)}\n"
    "  local p = R(1, 14)\n"
    "  local inv = ({false, true, 'null'})[R(3)]\n"
    "  local ed = ({1, 2, 5, 1000, 100000})[R(5)]\n"
    "  local dd = ({1, 2, 5, 1000, 100000})[R(5)]\n"
    "  local di = R(2) == 1\n"
    "  for _, c in ipairs({ref, ours}) do\n"
    "    c.encode_sparse_array(s[1], s[2], s[3])\n"
    "    c.encode_number_precision(p)\n"
    "    c.encode_invalid_numbers(inv)\n"
    "    c.encode_max_depth(ed)\n"
    "    c.decode_max_depth(dd)\n"
    "    c.decode_invalid_numbers(di)\n"
    "  end\n"
    "end\n"
    "local noise = {'[', ']', '{', '}', ':', ',', '\"', '\\\\', 'u', '0', '9', 'e', 'E', '+',\n"
    "  '-', '.', 'x', 'X', 'i', 'n', 'f', 'a', 't', 'r', 'u', 'l', 's', 'N', 'I', ' ', '\\t',\n"
    "  '\\n', '\\0', 'D83D', 'DE00', 'DC00', '\\\\u', 'true', 'null', 'inf', 'nan', '0x1F'}\n"
    "local function mutate(s)\n"
    "  for _ = 1, R(1, 3) do\n"
    "    local i = R(0, #s)\n"
    "    local k = R(3)\n"
    "    if k == 1 then s = s:sub(1, i) .. noise[R(#noise)] .. s:sub(i + 1)\n"
    "    elseif k == 2 then s = s:sub(1, i) .. s:sub(i + 2)\n"
    "    else s = s:sub(1, i) end\n"
    "  end\n"
    "  return s\n"
    "end\n"
    "local function same(what, f1, f2, arg)\n"
    "  local a = {pcall(f1, arg)}\n"
    "  local b = {pcall(f2, arg)}\n"
    "  local ca, cb = canon(a), canon(b)\n"
    "  if ca ~= cb then\n"
    "    return string.format('%s of %s: lua-cjson %s, rlimitd %s', what, canon(arg), ca, cb)\n"
    "  end\n"
    "  return nil, a[1] and a[2]\n"
    "end\n"
    "for case = 1, cases do\n"
    "  if case % 50 == 1 then configure() end\n"
    "  local v = rvalue(0)\n"
    "  local e, text = same('encode', ref.encode, ours.encode, v)\n"
    "  if e then return 'case ' .. case .. ': ' .. e end\n"
    "  local inputs = {text or rstring()}\n"
    "  if text then\n"
    "    inputs[2] = mutate(text)\n"
    "    inputs[3] = '[' .. string.rep('[', R(0, 12)) .. text\n"
    "  end\n"
    "  inputs[#inputs + 1] = '\"' .. rstring() .. '\\\\u' .. ({'00e9', 'D83D\\\\uDE00', 'DE00',\n"
    "    'D83D', 'D83D\\\\u0041', '12', 'zzzz', '0000'})[R(8)] .. '\"'\n"
    "  for _, s in ipairs(inputs) do\n"
    "    e = same('decode', ref.decode, ours.decode, s)\n"
    "    if e then return 'case ' .. case .. ': ' .. e end\n"
    "  end\n"
    "end\n"
    "for _, n in ipairs({999, 1000, 1001, 3999, 4000, 7997, 7998, 7999, 8000}) do\n"
    "  for _, c in ipairs({ref, ours}) do c.decode_max_depth(100000) c.encode_max_depth(100000) end\n"
    "  local e = same('decode', ref.decode, ours.decode, string.rep('[', n))\n"
    "  e = e or same('decode', ref.decode, ours.decode, string.rep('{\"k\":', n))\n"
    "  local t = {} local u = t\n"
    "  for i = 1, n do u[1] = {} u = u[1] end\n"
    "  e = e or same('encode', ref.encode, ours.encode, t)\n"
    "  t = {} u = t\n"
    "  for i = 1, n do u.k = {} u = u.k end\n"
    "  e = e or same('encode', ref.encode, ours.encode, t)\n"
    "  if e then return 'depth ' .. n .. ': ' .. e end\n"
    "end\n"
    "for _, args in ipairs({{}, {1, 2}}) do\n"
    "  local a = {pcall(ref.encode, unpack(args))}\n"
    "  local b = {pcall(ours.encode, unpack(args))}\n"
    "  if canon(a) ~= canon(b) then return 'encode arguments: ' .. canon(a) .. ' ' .. canon(b) end\n"
    "  a = {pcall(ref.decode, unpack(args))}\n"
    "  b = {pcall(ours.decode, unpack(args))}\n"
    "  if canon(a) ~= canon(b) then return 'decode arguments: ' .. canon(a) .. ' ' .. canon(b) end\n"
    "end\n"
    "return nil\n";

/* A state with the libraries the comparison uses and two lua-cjson instances on the stack:
 * [1] as Debian ships it, [2] with rlimitd's encoder and decoder. */
static lua_State *two_instances(lua_Alloc f, void *ud)
{
    lua_State *L = f != NULL ? lua_newstate(f, ud) : luaL_newstate();
    cr_assert(L != NULL);
    luaL_openlibs(L);
    lua_settop(L, 0);
    lua_pushcfunction(L, luaopen_cjson);
    lua_call(L, 0, 1);
    lua_pushcfunction(L, luaopen_cjson);
    lua_call(L, 0, 1);
    json_instrument(L, 2);
    return L;
}

static void compare(unsigned seed, int cases)
{
    lua_State *L = two_instances(NULL, NULL);
    cr_assert(luaL_loadbuffer(L, diff_lua, sizeof(diff_lua) - 1, "=diff") == 0, "%s",
              lua_tostring(L, -1));
    lua_insert(L, 1);
    lua_pushinteger(L, seed);
    lua_pushinteger(L, cases);
    int rc = lua_pcall(L, 4, 1, 0);
    cr_assert(rc == 0, "seed %u: the comparison failed: %s", seed, lua_tostring(L, -1));
    cr_assert(lua_isnil(L, -1), "seed %u: %s", seed, lua_tostring(L, -1));
    lua_close(L);
}

Test(script_json, same_as_lua_cjson_seed_1) { compare(1, 3000); }
Test(script_json, same_as_lua_cjson_seed_2) { compare(2, 3000); }
Test(script_json, same_as_lua_cjson_seed_3) { compare(3, 3000); }

/* cjson.new() instances get rlimitd's encoder and decoder too, with their own configuration. */
Test(script_json, new_instances_are_rlimitds)
{
    lua_State *L = two_instances(NULL, NULL);
    static const char src[] =
        "local ref, ours = ...\n"
        "local n = ours.new()\n"
        "if n.encode == ref.encode or n.decode == ref.decode then return 'new: lua-cjson' end\n"
        "n.encode_number_precision(3)\n"
        "if n.encode(1/3) ~= '0.333' then return 'new precision: ' .. n.encode(1/3) end\n"
        "if ours.encode(1/3) ~= '0.33333333333333' then return 'shared: ' .. ours.encode(1/3) end\n"
        "local nn = n.new()\n"
        "if nn.encode(1/3) ~= '0.33333333333333' then return 'new of new: ' .. nn.encode(1/3) end\n"
        "return nil\n";
    cr_assert(luaL_loadbuffer(L, src, sizeof(src) - 1, "=new") == 0);
    lua_insert(L, 1);
    cr_assert(lua_pcall(L, 2, 1, 0) == 0, "%s", lua_tostring(L, -1));
    cr_assert(lua_isnil(L, -1), "%s", lua_tostring(L, -1));
    lua_close(L);
}

/* A counting allocator with a ceiling, as the engine's (script_engine.c). */
struct limited {
    size_t used, limit;
};

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct limited *m = ud;
    if (nsize == 0) {
        free(ptr);
        m->used -= osize;
        return NULL;
    }
    if (nsize > osize && m->used - osize + nsize > m->limit)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p != NULL)
        m->used = m->used - osize + nsize;
    return p;
}

/* Output and decoding past the state's limit fail with Lua's memory error and leave the
 * state's memory where it was: nothing is held outside the state's count. */
Test(script_json, memory_is_the_states)
{
    struct limited m = {0, (size_t)64 << 20};
    lua_State *L = two_instances(limited_alloc, &m);
    static const char src[] =
        "local _, ours = ...\n"
        "collectgarbage()\n"
        "local before = collectgarbage('count')\n"
        "local s = string.rep('x', 4 * 1024 * 1024)\n"
        "local t = {}\n"
        "for i = 1, 20 do t[i] = s end\n"
        "local ok, e = pcall(ours.encode, t)\n"
        "if ok or e ~= 'not enough memory' then return 'encode 80 MB: ' .. tostring(e) end\n"
        "local j = '[' .. string.rep('{},', 1000000) .. '1]'\n"
        "for i = 1, 3 do\n"
        "  ok, e = pcall(ours.decode, j)\n"
        "  if ok or not tostring(e):find('not enough memory') then\n"
        "    return 'decode 1M tables: ' .. tostring(e)\n"
        "  end\n"
        "end\n"
        "j, s, t = nil, nil, nil\n"
        /* each full cycle halves what Lua's own string table and concat buffer keep */
        "for i = 1, 4 do collectgarbage() end\n"
        "local after = collectgarbage('count')\n"
        "if after > before + 128 then return 'held ' .. (after - before) .. ' KB' end\n"
        "local ok2, small = pcall(ours.encode, {string.rep('y', 1024 * 1024)})\n"
        "if not ok2 or #small ~= 1024 * 1024 + 4 then return 'then 1 MB: ' .. tostring(small) end\n"
        "return nil\n";
    cr_assert(luaL_loadbuffer(L, src, sizeof(src) - 1, "=mem") == 0);
    lua_insert(L, 1);
    cr_assert(lua_pcall(L, 2, 1, 0) == 0, "%s", lua_tostring(L, -1));
    cr_assert(lua_isnil(L, -1), "%s", lua_tostring(L, -1));
    lua_close(L);
    cr_assert_eq(m.used, 0, "%zu bytes left after lua_close", m.used);
}
