/* fuzz_lua.c - libFuzzer target for the Lua surface: what a client that may send EVAL can make
 * the engine (src/script) and Debian's Lua libraries do.
 *
 * An input is read line by line; each line is one step on a scratch keyspace, through
 * cmd_execute as a client's command would go:
 *   E<source>  EVAL of the rest of the line (numkeys 1), the CVE triggers' seeds among them;
 *   L<source>  SCRIPT LOAD, remembered for S;
 *   S          EVALSHA of the last script loaded or evaluated (NOSCRIPT after a flush);
 *   F          SCRIPT FLUSH (ASYNC or SYNC);
 *   X          SCRIPT KILL and SCRIPT EXISTS (nothing runs: NOTBUSY);
 *   K<n>       the next script may run about n VM instructions before it is killed as SCRIPT
 *              KILL kills (script_fuzz_budget): kills land anywhere, in a sort comparator, a
 *              gsub callback, a metamethod, a pcall;
 *   f<n>       the next script's hook flushes the script cache once its remaining budget falls
 *              to n, as a SCRIPT FLUSH from another connection does mid-run;
 *   any other  a generated script: every 4 bytes after the first make one statement, a
 *              template of a hostile library call (string, table, bit, cjson, cmsgpack, struct,
 *              redis.call with odd arguments, loaders, coroutines, metatables) filled with
 *              extreme arguments and results of earlier statements, run under pcall; the first
 *              byte picks what the script returns (the reply conversion), and its low bits may
 *              give it a small budget (a kill) or a mid-run flush.
 * Each input starts on a fresh Lua state (cmd_env) and the fuzz build's budget bounds every
 * script (tests/fuzz/meson.build). Besides ASan and UBSan, the target aborts when a command
 * answers nothing or a type RESP2 does not have, and when, after the input, a plain script does
 * not answer exactly what it should: whatever a script did (metatables, globals, collector
 * settings, kills, flushes) must not reach the next one. FUZZ_LUA_TRACE=1 prints every script
 * and reply. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/script.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAKE_T0 (1800000000LL * 1000000000LL)
#define NSLOTS 8 /* v[1] .. v[8], the results later statements reuse */
/* A script's budget unless K gives another: a tenth of the build's, so an input that loops ends
 * in milliseconds (ASan) and the fuzzer tries more inputs per second. */
#define BUDGET (RLIMITD_FUZZ_SCRIPT_BUDGET / 10)

/* Arguments: extreme numbers, format strings and patterns, strings that are malformed JSON,
 * msgpack and struct formats, tables that are sparse, self-referencing or have metamethods,
 * command names, and earlier results. */
static const char *const values[] = {
    "nil", "true", "false", "0", "1", "-1", "2", "3", "7", "8", "16", "31", "32", "33", "100",
    "255", "256", "65535", "65536", "1e5", "2147483647", "-2147483647", "-2147483648",
    "2147483648", "4294967295", "4294967296", "-4294967297", "2^52", "2^53", "2^63", "-2^63",
    "2^64", "1e308", "-1e308", "1e-320", "0/0", "1/0", "-1/0", "0.5", "-0.5", "3.14159",
    "''", "'a'", "'abc'", "'0'", "'-1'", "'1e999'", "'0x10'", "' 12 '", "'%'", "'%d'", "'%s'",
    "'%5.2f'", "'%-99s'", "'%c%c'", "'%q'", "'%i'", "'%99.99f'", "'\\0'", "'\\255\\0\\1'",
    "'a\\0b'", "'[=['", "']]'", "'[==[ x ]=]'", "'--[['", "'return [=['", "'(.-)'", "'%a+'",
    "'(()'", "'[^'", "'%b()'", "'%f[%w]'", "'.*'", "'%'", "'(a*(.)%w(%s*))'", "'>i4'", "'<I8'",
    "'!4h'", "'c0'", "'s'", "'d'", "'Bhl'", "'i16'", "'c2147483647'", "'!2147483647'",
    "'{\"a\":[1,2,{\"b\":null}]}'", "'[1,2,3]'", "'\"\\\\u0000\\\\ud800\"'", "'1e400'",
    "'[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]'", "'{'", "'\\147\\1\\2\\3'",
    "'\\220\\255\\255'", "'\\221\\127\\255\\255\\255'", "'\\218\\255\\255'",
    "'\\219\\127\\255\\255\\255'", "'\\223\\127\\255\\255\\255'", "'\\222\\255\\255'",
    "'\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145\\145'",
    "string.rep('x', 1000)", "string.rep('a', 70000)", "string.rep('\\0', 300)",
    "string.rep('{', 2000)", "string.rep('[', 300)", "string.rep('a?', 30)",
    "{}", "{1,2,3}", "{a=1,b={c=2}}", "{[1]=1,[2]=2,[1000000]=3}", "{n=1}", "{1,nil,3}",
    "{err='boom'}", "{ok='fine'}", "{'set','k','v'}", "{1.5,-2,'x',{true}}", "{[0]=1,[-1]=2}",
    "cjson.null", "v", "v[1]", "v[2]", "v[3]", "v[4]", "v[5]", "v[6]", "v[7]", "v[8]",
    "KEYS", "ARGV", "KEYS[1]", "ARGV[1]", "redis", "string", "_G", "math.huge", "'k'",
    "function() return 1 end", "function(a, b) return a < b end", "function(a) error(a) end",
    "function() return {} end", "function(...) return ... end", "error",
    "setmetatable({}, {__index = function(t, k) return k end})",
    "setmetatable({}, {__tostring = function() return 'x' end})",
    "setmetatable({}, {__lt = function() error('lt') end})",
    "setmetatable({1}, {__len = function() return 2^31 end})",
    "coroutine.create(function() coroutine.yield(1) end)",
    "'set'", "'get'", "'incr'", "'eval'", "'evalsha'", "'script'", "'ping'", "'echo'", "'del'",
    "'lpush'", "'lrange'", "'hset'", "'hgetall'", "'mget'", "'cl.throttle'", "'throttle'",
    "'config'", "'info'", "'shutdown'", "'multi'", "'exec'", "'subscribe'", "'select'",
    "'debug'", "'client'", "'object'", "'keys'", "'flushall'", "'dbsize'", "'wait'",
    "'nosuchcmd'", "'SeT'", "'expire'", "'zadd'", "'sort'",
};
#define NVALUES (sizeof(values) / sizeof(values[0]))

/* Calls and expressions; each '@' takes the next argument; '!' marks a statement. */
static const char *const templates[] = {
    "string.rep(@, @)", "string.sub(@, @, @)", "string.byte(@, @, @)", "string.char(@, @, @)",
    "string.format(@, @, @)", "string.format('%d %s', @, @)", "string.format('%q', @)",
    "string.format('%.14g', @)", "string.format(@, @)", "string.find(@, @, @)",
    "string.find(@, @, @, true)", "string.match(@, @, @)", "string.gsub(@, @, @)",
    "string.gsub(@, '.', @)", "string.gmatch(@, @)()", "string.len(@)", "string.lower(@)",
    "string.upper(@)", "string.reverse(@)", "(@):rep(@)", "#@", "@ .. @", "@ + @", "@ * @",
    "@ % @", "@ ^ @", "-@", "@ < @", "@ == @", "@[@]", "tostring(@)", "tonumber(@, @)",
    "tonumber(@)", "type(@)", "table.concat(@, @, @, @)", "table.concat(@, ',', 1, @)",
    "table.insert(@, @, @)", "table.insert(@, @)", "table.remove(@, @)", "table.sort(@, @)",
    "table.sort(@)", "table.getn(@)", "table.maxn(@)", "unpack(@, @, @)", "{unpack(@, @, @)}",
    "select(@, @, @)", "select('#', unpack(@))", "next(@, @)", "rawget(@, @)", "rawset(@, @, @)",
    "rawequal(@, @)", "setmetatable(@, @)", "getmetatable(@)", "getmetatable(@).__index",
    "loadstring(@, @)", "loadstring(@)", "(loadstring(@) or print)()",
    "load(function() return @ end)", "error(@, @)", "assert(@, @)", "pcall(@, @, @)",
    "xpcall(@, @)", "coroutine.wrap(@)(@)", "coroutine.resume(@, @)", "coroutine.status(@)",
    "collectgarbage(@, @)", "collectgarbage('step', @)", "collectgarbage('setpause', @)",
    "gcinfo()", "ipairs(@)", "pairs(@)", "math.floor(@)", "math.fmod(@, @)", "math.pow(@, @)",
    "math.ldexp(@, @)", "math.frexp(@)", "math.max(@, @, @)", "math.random(@, @)",
    "math.randomseed(@)", "math.modf(@)", "math.log(@)", "math.sqrt(@)", "bit.tohex(@, @)",
    "bit.band(@, @, @)", "bit.bor(@, @)", "bit.bxor(@, @)", "bit.bnot(@)", "bit.lshift(@, @)",
    "bit.rshift(@, @)", "bit.arshift(@, @)", "bit.rol(@, @)", "bit.ror(@, @)", "bit.bswap(@)",
    "bit.tobit(@)", "cjson.encode(@)", "cjson.decode(@)", "cjson.decode(cjson.encode(@))",
    "cjson.encode_max_depth(@)", "cjson.decode_max_depth(@)",
    "cjson.encode_number_precision(@)", "cjson.encode_sparse_array(@, @, @)",
    "cjson.encode_invalid_numbers(@)", "cjson.decode_invalid_numbers(@)",
    "cjson.encode_keep_buffer(@)", "cjson.new().encode(@)", "cmsgpack.pack(@, @, @)",
    "cmsgpack.unpack(@)", "cmsgpack.unpack_one(@, @)", "cmsgpack.unpack_limit(@, @, @)",
    "cmsgpack.unpack(cmsgpack.pack(@))", "struct.pack(@, @, @)", "struct.unpack(@, @, @)",
    "struct.size(@)", "struct.unpack(@, struct.pack(@, @))", "redis.call(@, @, @)",
    "redis.pcall(@, @, @)", "redis.call(@, KEYS[1], @)", "redis.pcall(@, KEYS[1], @, @)",
    "redis.call('set', KEYS[1], @)", "redis.call('get', @)", "redis.call(@)",
    "redis.pcall(unpack(@))", "redis.sha1hex(@)", "redis.error_reply(@)",
    "redis.status_reply(@)", "redis.log(@, @)", "redis.setresp(@)", "redis.set_repl(@)",
    "redis.replicate_commands()", "redis.call('eval', @, 0)",
    ("(function() local t = {} for i = 1, math.min(tonumber(@) or 0, 100000) do t[i] = @ end "
     "return t end)()"),
    "(function() local s = tostring(@) for i = 1, 20 do s = s .. s end return #s end)()",
    "(function() local t = {} t.t = t t[1] = @ return t end)()",
    "(function() for i = 1, math.min(tonumber(@) or 0, 1e6) do end return @ end)()",
    "(function() local t = {} for k, x in pairs(@) do t[#t + 1] = k end return t end)()",
    "string.dump(@)", "getfenv(@)", "setfenv(@, @)", "newproxy(@)", "dofile(@)", "require(@)",
    "module(@)", "print(@)", "@.x", "!@.x = @", "string.x", "KEYS[1] .. @",
    "cjson.encode(setmetatable({}, {__index = @}))", "cmsgpack.pack(unpack(@))",
    "redis.call(unpack(@))", "{redis.call('lrange', KEYS[1], @, @)}",
};
#define NTEMPLATES (sizeof(templates) / sizeof(templates[0]))

/* A growable text buffer for the script being built. */
struct text {
    char *p;
    size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        if (t->p == NULL)
            abort();
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

struct lua_run {
    struct keyspace *ks;
    struct conf conf;
    struct cmd_env env;
    struct session session;
    struct rbuf out;
    char sha[41];
};

static int trace;

static void exec(struct lua_run *r, int argc, char **argv, const size_t *lens)
{
    r->out.len = 0;
    cmd_execute(&r->env, &r->session, argc, argv, lens, &r->out);
    if (r->out.len == 0 || strchr("+-:$*", r->out.p[0]) == NULL)
        abort(); /* every command answers, in RESP2's types */
    if (trace)
        fprintf(stderr, "%s %.*s -> %.*s\n", argv[0], (int)(argc > 1 && lens[1] < 400 ? lens[1] : 0),
                argc > 1 ? argv[1] : "", (int)(r->out.len < 300 ? r->out.len : 300), r->out.p);
    clock_advance_fake(1000000);
    script_fuzz_budget = BUDGET; /* K and f last one script */
    script_fuzz_flush_at = -1;
}

static void eval(struct lua_run *r, const char *src, size_t n)
{
    char cmd[] = "EVAL", one[] = "1", key[] = "k", arg[] = "a";
    char *argv[] = {cmd, (char *)src, one, key, arg};
    const size_t lens[] = {4, n, 1, 1, 1};
    script_sha1hex(src, n, r->sha);
    exec(r, 5, argv, lens);
}

static void script_cmd(struct lua_run *r, const char *sub, const char *arg, size_t n)
{
    char cmd[] = "SCRIPT";
    char *argv[] = {cmd, (char *)sub, (char *)arg};
    const size_t lens[] = {6, strlen(sub), n};
    exec(r, arg != NULL ? 3 : 2, argv, lens);
}

static long long number(const uint8_t *p, size_t n)
{
    long long x = 0;
    for (size_t i = 0; i < n && i < 12 && p[i] >= '0' && p[i] <= '9'; i++)
        x = x * 10 + (p[i] - '0');
    return x;
}

/* One statement: the template with its arguments, under pcall, its result kept in a slot. */
static void statement(struct text *t, const uint8_t b[4])
{
    char head[64];
    snprintf(head, sizeof(head), "v[%d] = select(2, pcall(function() ",
             (b[1] ^ b[2] ^ b[3]) % NSLOTS + 1);
    puts_(t, head);
    const char *tmpl = templates[b[0] % NTEMPLATES];
    if (tmpl[0] == '!') /* a statement (an assignment), not an expression to return */
        tmpl++;
    else
        puts_(t, "return ");
    int arg = 0;
    for (const char *c = tmpl; *c != '\0'; c++) {
        if (*c == '@')
            puts_(t, values[b[1 + arg++ % 3] % NVALUES]);
        else
            put(t, c, 1);
    }
    puts_(t, " end))\n");
}

static void generated(struct lua_run *r, const uint8_t *p, size_t n)
{
    static const char *const returns[] = {
        "return v", "return v[1]", "return v[2]", "return {v[1], v[2], v[3], v[4]}",
        "return redis.status_reply(tostring(v[3]))", "return redis.error_reply(tostring(v[4]))",
        "return #v", "return cjson.encode({v[5], v[6]})",
    };
    struct text t = {0};
    puts_(&t, "local v = {KEYS[1], ARGV[1], 0, '', {}, 1.5, -1, 'x'}\n");
    for (size_t i = 1; i + 4 <= n; i += 4)
        statement(&t, p + i);
    puts_(&t, returns[p[0] % (sizeof(returns) / sizeof(returns[0]))]);
    switch (p[0] >> 5) {
    case 6: /* killed early: after a few statements at most */
        script_fuzz_budget = 100 + 40 * (long long)n;
        break;
    case 7: /* flushed mid-run */
        script_fuzz_flush_at = BUDGET - 200 * (long long)n;
        break;
    }
    eval(r, t.p, t.len);
    free(t.p);
}

static void step(struct lua_run *r, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    switch (p[0]) {
    case 'E':
        eval(r, (const char *)p + 1, n - 1);
        break;
    case 'L':
        script_sha1hex(p + 1, n - 1, r->sha);
        script_cmd(r, "LOAD", (const char *)p + 1, n - 1);
        break;
    case 'S': {
        char cmd[] = "EVALSHA", zero[] = "0";
        char *argv[] = {cmd, r->sha, zero};
        const size_t lens[] = {7, 40, 1};
        exec(r, 3, argv, lens);
        break;
    }
    case 'F':
        script_cmd(r, "FLUSH", n % 2 ? "ASYNC" : "SYNC", n % 2 ? 5 : 4);
        break;
    case 'X':
        script_cmd(r, "KILL", NULL, 0);
        script_cmd(r, "EXISTS", r->sha, 40);
        break;
    case 'K':
        script_fuzz_budget = number(p + 1, n - 1);
        break;
    case 'f':
        script_fuzz_flush_at = number(p + 1, n - 1);
        break;
    default:
        generated(r, p, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t seed[16] = {7};
    struct lua_run r;

    trace = getenv("FUZZ_LUA_TRACE") != NULL;
    memset(&r, 0, sizeof(r));
    memset(r.sha, '0', 40);
    r.ks = ks_create(4, seed);
    conf_init(&r.conf);
    cmd_env_init(&r.env, r.ks, &r.conf);
    session_init(&r.session, 1, NULL);
    r.session.authed = 1;
    rbuf_init(&r.out);
    clock_set_fake(FAKE_T0);
    script_fuzz_budget = BUDGET;
    script_fuzz_flush_at = -1;

    size_t at = 0;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl != NULL ? (size_t)(nl - (data + at)) : size - at;
        step(&r, data + at, n);
        at += n + 1;
    }

    /* Nothing a script did reaches the next one: the libraries, the string metatable and the
     * globals answer as in a fresh state. */
    static const char check[] =
        "return {1, ('a'):rep(2), string.format('%d', 2), cjson.encode({1}), #KEYS, "
        "type(redis.call), tostring(rawget(_G, 'x')), bit.tohex(255, 2)}";
    static const char want[] = "*8\r\n:1\r\n$2\r\naa\r\n$1\r\n2\r\n$3\r\n[1]\r\n:1\r\n"
                               "$8\r\nfunction\r\n$3\r\nnil\r\n$2\r\nff\r\n";
    script_fuzz_budget = BUDGET; /* a K or f on the last line is for no script */
    script_fuzz_flush_at = -1;
    eval(&r, check, sizeof(check) - 1);
    if (r.out.len != sizeof(want) - 1 || memcmp(r.out.p, want, r.out.len) != 0) {
        fprintf(stderr, "fuzz_lua: a plain script answered differently after this input:\n%.*s\n",
                (int)(r.out.len < 2000 ? r.out.len : 2000), r.out.p);
        abort();
    }

    rbuf_free(&r.out);
    session_deinit(&r.session);
    cmd_env_deinit(&r.env);
    conf_free(&r.conf);
    ks_destroy(&r.ks);
    return 0;
}
