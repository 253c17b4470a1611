/* test_script_bytecode.c - the bytecode scan that lets a script run without sandbox proxies
 * (src/script/script_bytecode.h): each fact is found wherever it hides (nested functions,
 * constants), a script without them scans clean, and a damaged chunk never reads out of
 * bounds and always answers BC_UNKNOWN or facts no weaker than the whole chunk's. */
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/script/script_bytecode.h"

struct chunk {
    unsigned char *p;
    size_t len;
};

static int writer(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    struct chunk *c = ud;
    c->p = realloc(c->p, c->len + n);
    cr_assert(c->p != NULL);
    memcpy(c->p + c->len, p, n);
    c->len += n;
    return 0;
}

static struct chunk compile(const char *src)
{
    lua_State *L = luaL_newstate();
    cr_assert(luaL_loadstring(L, src) == 0, "compiles: %s", src);
    struct chunk c = {NULL, 0};
    cr_assert(lua_dump(L, writer, &c) == 0);
    lua_close(L);
    return c;
}

static unsigned scan(const char *src)
{
    struct chunk c = compile(src);
    unsigned facts = script_bytecode_scan(c.p, c.len);
    free(c.p);
    return facts;
}

Test(script_bytecode, clean_scripts)
{
    cr_assert_eq(scan("return 1"), 0u);
    cr_assert_eq(scan("local t = {1, 2, KEYS[1]} return t"), 0u);
    cr_assert_eq(scan("local x = redis.call('GET', KEYS[1]) return string.format('%d', x)"), 0u);
    cr_assert_eq(scan("local function f(a) local b = a + 1 return b end return f(2)"), 0u);
    cr_assert_eq(scan("local n = 0 for i = 1, 10 do n = n + i end return {n, 'loadstrin'}"), 0u);
}

Test(script_bytecode, global_assignment)
{
    cr_assert_eq(scan("x = 1"), BC_SETS_GLOBALS);
    cr_assert_eq(scan("local function f() local function g() y = 2 end g() end f()"),
                 BC_SETS_GLOBALS);
    cr_assert_eq(scan("function f() end"), BC_SETS_GLOBALS);
}

Test(script_bytecode, field_assignment)
{
    cr_assert_eq(scan("local t = {} t.x = 1"), BC_SETS_TABLES);
    cr_assert_eq(scan("local t = {a = 1}"), BC_SETS_TABLES);
    cr_assert_eq(scan("local function f(t) t[1] = 2 end f({})"), BC_SETS_TABLES);
    cr_assert_eq(scan("string.x = 1"), BC_SETS_TABLES);
    cr_assert_eq(scan("local t = {} t.x = 1 y = 2"), BC_SETS_TABLES | BC_SETS_GLOBALS);
}

Test(script_bytecode, names_that_reach_the_globals)
{
    cr_assert_eq(scan("return _G.redis"), BC_NAMES_GLOBALS);
    cr_assert_eq(scan("return loadstring('return 1')()"), BC_NAMES_GLOBALS);
    cr_assert_eq(scan("local function f() return load end return f"), BC_NAMES_GLOBALS);
    cr_assert_eq(scan("return redis['load']"), BC_NAMES_GLOBALS);
}

Test(script_bytecode, foreign_or_damaged_chunks)
{
    cr_assert_eq(script_bytecode_scan((const unsigned char *)"", 0), BC_UNKNOWN);
    cr_assert_eq(script_bytecode_scan((const unsigned char *)"return 1", 8), BC_UNKNOWN);
    struct chunk c = compile("local t = {1, 2} local function f(a) return a .. 'x' end "
                             "return f(t[1])");
    cr_assert_eq(script_bytecode_scan(c.p, c.len), 0u);
    /* Every proper prefix, and the chunk with a byte more, is rejected. */
    for (size_t n = 0; n < c.len; n++) {
        unsigned char *copy = malloc(n + 1); /* exact size: ASan sees any overread */
        memcpy(copy, c.p, n);
        cr_assert_eq(script_bytecode_scan(copy, n), BC_UNKNOWN, "prefix %zu", n);
        free(copy);
    }
    unsigned char *longer = malloc(c.len + 1);
    memcpy(longer, c.p, c.len);
    longer[c.len] = 0;
    cr_assert_eq(script_bytecode_scan(longer, c.len + 1), BC_UNKNOWN);
    free(longer);
    /* Random damage past the header: never a crash, never an overread. */
    srand(7);
    for (int i = 0; i < 20000; i++) {
        unsigned char *copy = malloc(c.len);
        memcpy(copy, c.p, c.len);
        for (int k = 0; k < 3; k++)
            copy[12 + (size_t)rand() % (c.len - 12)] = (unsigned char)rand();
        (void)script_bytecode_scan(copy, c.len);
        free(copy);
    }
    free(c.p);
}
