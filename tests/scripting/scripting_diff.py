#!/usr/bin/env python3
"""scripting_diff.py - EVAL/EVALSHA/SCRIPT on rlimitd against Debian's redis-server 7.0, byte
for byte.

Each case is a list of commands sent, in order, on one connection to each server (both start
empty and each case uses its own keys). Every reply must be identical. On a mismatch it prints
the case, the command and both replies. A case may touch only keys it declares in KEYS: rlimitd
refuses undeclared keys (docs/COMMANDS.md, Scripting), Redis does not.

    scripting_diff.py RLIMITD_BINARY"""
import hashlib
import os
import random
import sys

from resp import Server

E, ES, SL = "EVAL", "EVALSHA", "SCRIPT"


def ev(body, keys=(), args=()):
    return [E, body, str(len(keys))] + list(keys) + list(args)


def ev_ro(body, keys=(), args=()):
    return ["EVAL_RO", body, str(len(keys))] + list(keys) + list(args)


CASES = {
    # ---- Lua -> reply conversions ----
    "int": [ev("return 42"), ev("return -7"), ev("return 0")],
    "float truncated": [ev("return 3.99"), ev("return -3.99"), ev("return 0.5"),
                        ev("return 1e20"), ev("return -1e20"), ev("return 0/0"),
                        ev("return 2^53")],
    "booleans and nil": [ev("return true"), ev("return false"), ev("return nil"), ev("return")],
    "strings": [ev("return 'hello'"), ev("return ''"), ev("return 'a\\0b'"),
                ev("return ARGV[1]", (), ["x" * 1000])],
    "tables": [ev("return {1,2.7,true,false,'x'}"), ev("return {1,nil,3}"),
               ev("local t = {} t[1]=1 t[3]=3 return t"), ev("return {}"),
               ev("return {a=1,b=2}"), ev("return {1,{2,{3,{4,{}}}},'x'}"),
               ev("local t = {} for i=1,100 do t[i]=i*i end return t")],
    "status and error tables": [ev("return {ok='fine'}"), ev("return {err='bad thing'}"),
                                ev("return {err='WRONGTYPE custom'}"),
                                ev("return {err='x',ok='y'}"), ev("return {err=5}"),
                                ev("return {ok=5}"), ev("return {1,{err='nested'},{ok='st'}}"),
                                ev("return {err='a\\r\\nb'}"), ev("return {err=''}")],
    "error_reply and status_reply": [ev("return redis.error_reply('My Error')"),
                                     ev("return redis.error_reply('-My Error')"),
                                     ev("return redis.error_reply('x')"),
                                     ev("return redis.error_reply('x').err"),
                                     ev("return redis.error_reply()"),
                                     ev("return redis.status_reply('X')"),
                                     ev("return redis.status_reply('X').ok"),
                                     ev("return redis.status_reply()")],
    # ---- reply -> Lua conversions ----
    "call results": [ev("return redis.call('set',KEYS[1],'v')", ["c:1"]),
                     ev("return type(redis.call('set',KEYS[1],'v'))", ["c:1"]),
                     ev("return redis.call('set',KEYS[1],'v').ok", ["c:1"]),
                     ev("return redis.call('get',KEYS[1])", ["c:1"]),
                     ev("return redis.call('get',KEYS[1])", ["c:none"]),
                     ev("return type(redis.call('get',KEYS[1]))", ["c:none"]),
                     ev("return redis.call('incr',KEYS[1])", ["c:n"]),
                     ev("return type(redis.call('incr',KEYS[1]))", ["c:n"]),
                     ev("return redis.call('exists',KEYS[1],KEYS[2])", ["c:1", "c:n"]),
                     ev("return redis.call('ping')"), ev("return redis.call('echo','x')"),
                     ev("return redis.call('GeT',KEYS[1])", ["c:1"]),
                     ev("return redis.call('set',KEYS[1],'v','NX')", ["c:1"]),
                     ev("return type(redis.call('time'))"),
                     ev("return #redis.call('time')")],
    "number arguments": [ev("redis.call('set',KEYS[1],0.1) return redis.call('get',KEYS[1])",
                            ["n:1"]),
                         ev("redis.call('set',KEYS[1],1.5) return redis.call('get',KEYS[1])",
                            ["n:1"]),
                         ev("redis.call('set',KEYS[1],1e20) return redis.call('get',KEYS[1])",
                            ["n:1"]),
                         ev("redis.call('set',KEYS[1],42) return redis.call('get',KEYS[1])",
                            ["n:1"]),
                         ev("return redis.call('expire',KEYS[1],1.5)", ["n:1"]),
                         ev("return redis.call('incrby',KEYS[1],-3)", ["n:2"])],
    "KEYS and ARGV": [ev("return #KEYS + #ARGV * 10", ["a", "b"], ["c"]),
                      ev("return {KEYS[1], ARGV[1], ARGV[2]}", ["k"], ["x", "y"]),
                      ev("KEYS[1]='z' return KEYS[1]", ["a"]),
                      ev("return ARGV", (), ["1", "2", "3"])],
    # ---- errors and their texts ----
    "runtime errors": [ev("error('boom')"), ev("error('boom',0)"), ev("error()"),
                       ev("error(true)"), ev("error(42)"), ev("local x = nil + 1"),
                       ev("\n\nlocal x = {} .. 'a'"), ev("error({err='tbl'})"),
                       ev("error({err='MYCODE tbl'})"), ev("assert(false)"),
                       ev("assert(false, 'why')"), ev("return ('x'):bad()"),
                       ev("local function f() error('deep') end\nf()"),
                       ev("local t = setmetatable({}, {__index=function() error('mt') end})"
                          " return t.x")],
    "compile errors": [ev("return +"), ev("x ="), ev("return 'unterminated"),
                       [SL, "LOAD", "return +"], ev("\n\nfor")],
    "globals": [ev("x=1"), ev("return y"), ev("print('x')"), ev("return tostring(io)"),
                ev("return os"), ev("return require"), ev("return loadfile"),
                ev("return dofile"), ev("return debug"), ev("return module"),
                ev("return setfenv"), ev("return newproxy"), ev("return package"),
                ev("rawset(_G,'zz',1) return zz"), ev("setmetatable(_G,nil)"),
                ev("return getmetatable(_G)"), ev("_G.x = 1"), ev("return _G.nothing"),
                ev("redis.call = nil"), ev("string.foo = 1"), ev("math.pi = 3"),
                ev("table.insert = nil"), ev("cjson.x = 1"), ev("bit.x = 1"),
                ev("rawset(redis, 'x', 1)"), ev("return _VERSION"),
                ev("local x = 1 return x"), ev("local t = {} t.a = 1 return t.a"),
                ev("return type(coroutine.create)")],
    "bytecode": [ev("return select(2, loadstring(string.dump(function() return 1 end)))"),
                 ev("return {loadstring(string.dump(function() return 1 end))}"),
                 ev("return loadstring('return 5')()"),
                 ev("return select(2, loadstring('return +'))"),
                 ev("return select(2, load(function() return nil end))"),
                 ev("local s = 'return 7' local done = false "
                    "return load(function() if done then return nil end done = true "
                    "return s end)()"),
                 ev("\x1bLuaQ")],
    "call errors": [ev("redis.call('set',KEYS[1],'abc') return redis.call('incr',KEYS[1])",
                       ["e:1"]),
                    ev("return redis.pcall('incr',KEYS[1])", ["e:1"]),
                    ev("return {redis.pcall('incr',KEYS[1])}", ["e:1"]),
                    ev("local r = redis.pcall('incr',KEYS[1]) return r.err", ["e:1"]),
                    ev("return redis.call('nosuch')"), ev("return redis.pcall('nosuch')"),
                    ev("return redis.call('set',KEYS[1])", ["e:1"]),
                    ev("return redis.pcall('set',KEYS[1])", ["e:1"]),
                    ev("return redis.call()"), ev("return redis.pcall()"),
                    ev("return redis.call(1)"), ev("return redis.call({})"),
                    ev("return redis.call('get',{})"), ev("return redis.call('get',nil)"),
                    ev("return redis.pcall('get',{})"), ev("return redis.call('set','f',true)"),
                    ev("return redis.call('get',KEYS[1],'extra')", ["e:1"])],
    "pcall catching a failed call": [
        ev("redis.call('set',KEYS[1],'abc') "
           "local ok, e = pcall(redis.call, 'incr', KEYS[1]) return {tostring(ok), e.err}",
           ["p:1"]),
        ev("local ok, e = pcall(redis.call, 'nosuch') return e.err"),
        ev("local ok, e = pcall(error, 'x') return e"),
        ev("local ok, e = pcall(redis.call, 'incr', KEYS[1]) error(e)", ["p:1"]),
        ev("return {pcall(redis.call,'incr',KEYS[1])}", ["p:2"]),
        ev("local ok, e = pcall(redis.call, 'nosuch') return {type(e), tostring(e)}"),
        ev("local ok, e = pcall(redis.call, 'nosuch') error(e, 0)"),
        ev("local ok, e = pcall(error, {err='X y'}) return {type(e), e.err}"),
        ev("local ok, e = pcall(redis.call) return e"),
        ev("local ok, e = pcall(redis.call, 'get', {}) return e"),
        ev("local ok, e = pcall(redis.call, 'multi') return e"),
        ev("local ok, e = xpcall(function() redis.call('nosuch') end, "
           "function(m) return m end) return {type(e), e.err}"),
        ev("return {pcall(function() return 1, 2 end)}"),
        ev("return {pcall(function() error('x', 0) end)}")],
    "not allowed from scripts": [ev("return redis.call('%s')" % c) for c in
                                 ("multi", "exec", "discard", "save", "bgsave", "shutdown",
                                  "hello", "quit", "reset")] +
                                [ev("return redis.call('eval','return 1','0')"),
                                 ev("return redis.call('evalsha','x','0')"),
                                 ev("return redis.call('script','load','return 1')"),
                                 ev("return redis.call('config','get','x')"),
                                 ev("return redis.call('client','list')"),
                                 ev("return redis.call('auth','x')"),
                                 ev("return redis.pcall('multi')")],
    "WRONGTYPE from inside a script": [
        ev("redis.call('set',KEYS[1],'str') return redis.call('incr',KEYS[1])", ["w:1"]),
        ev("return redis.pcall('incr',KEYS[1])", ["w:1"])],
    # ---- the redis library ----
    "redis library": [ev("return redis.sha1hex('')"), ev("return redis.sha1hex('abc')"),
                      ev("return redis.sha1hex(1)"), ev("return redis.sha1hex()"),
                      ev("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, "
                         "redis.LOG_WARNING, redis.REPL_ALL, redis.REPL_AOF, redis.REPL_NONE, "
                         "redis.REPL_REPLICA, redis.REPL_SLAVE}"),
                      ev("return redis.log(redis.LOG_WARNING,'hello','world',1)"),
                      ev("return redis.log(redis.LOG_DEBUG,'quiet')"),
                      ev("return redis.log(redis.LOG_WARNING)"),
                      ev("return redis.log(99,'x')"), ev("return redis.log('x','x')"),
                      ev("return redis.setresp(2)"), ev("return redis.setresp(4)"),
                      ev("return redis.setresp()"), ev("return redis.replicate_commands()"),
                      ev("return redis.set_repl(redis.REPL_ALL)"),
                      ev("return redis.set_repl(99)"), ev("return redis.set_repl()"),
                      ev("return type(redis.REDIS_VERSION)"),
                      ev("return redis.REDIS_VERSION_NUM > 0x070000")],
    "cjson": [ev("return cjson.encode({1,2,{a=1}})"),
              ev("return cjson.encode({a={b={c='d'}}})"),
              ev("return cjson.decode('[1,2,{\"a\":1.5}]')[3].a"),
              ev("return cjson.decode('{\"x\":[1,2,3]}').x"),
              ev("return cjson.encode(cjson.decode('[1,\"two\",true,null]'))"),
              ev("return cjson.decode('{')"), ev("return cjson.encode(1/3)"),
              ev("return cjson.encode('a\"b')"),
              ev("return type(cjson.null)")],
    "bit": [ev("return {bit.band(7,3), bit.bor(1,2), bit.bxor(5,1), bit.lshift(1,40), "
               "bit.tohex(255), bit.bnot(0), bit.rshift(-1,28), bit.arshift(-256,4), "
               "bit.rol(1,33), bit.ror(1,1), bit.bswap(1), bit.tobit(2^32+5)}"),
            ev("return bit.tohex(-1, -4)")],
    "string, table, math": [ev("return string.format('%d-%s-%5.2f', 7, 'x', 3.14159)"),
                            ev("return string.rep('ab', 3)"), ev("return ('abc'):upper()"),
                            ev("return {string.find('hello world', 'o w')}"),
                            ev("return string.gsub('abc', 'b', 'X')"),
                            ev("local t = {3,1,2} table.sort(t) return t"),
                            ev("return table.concat({1,2,3}, ',')"),
                            ev("return {math.floor(3.7), math.max(1,5,3), math.huge > 0}"),
                            ev("return tonumber('0x10')"), ev("return unpack({1,2,3})"),
                            ev("return select('#', 1, 2, 3)")],
    # tonumber: the integer shortcut and everything it hands on to Lua's own function.
    "tonumber": [ev("return {type(tonumber(ARGV[1])), tostring(tonumber(ARGV[1]))}", (), [a])
                 for a in ["12", "-0", "007", "-42", "123456789012345", "-123456789012345",
                           "1234567890123456", "12345678901234567890", " 12", "12 ", "+5",
                           "-", "", "1e3", "0x1F", "1.5", "--1", "12a", "inf", "nan", "\t7\n",
                           "9007199254740993"]] +
                [ev("return tonumber()"), ev("return tonumber(nil)"), ev("return tonumber({})"),
                 ev("return tonumber('ff', 16)"), ev("return tonumber('12', 99)"),
                 ev("return tonumber('12', nil)"), ev("return tonumber(12.5)"),
                 ev("return tonumber('z', 36)"), ev("return tonumber('12', 'x')"),
                 ev("return tostring(-tonumber('0'))"), ev("return 1/tonumber('-0') < 0")],
    # string.format: the integer shortcut and everything it hands on to Lua's own function.
    "string.format": [ev("return string.format(ARGV[1], 7, -42, 0, 123456789012345)", (), [f])
                      for f in ["%d", "%d %d %d %d", "%05d|%5d|%02d|%1d", "%09d%09d", "%d%%",
                                "x%%%d%%y", "%010d", "%-5d|", "%+d", "% d", "%#x", "%5.2d",
                                "%100d", "%00d", "%001d", "%0001d", "%", "abc%", "%s", "%i",
                                "%d%d%d%d%d", "%99d", "%-05d"]] +
                     [ev("return string.format('%d', ARGV[1])", (), [a])
                      for a in ["12", "x", "1.5"]] +
                     [ev("return string.format('%d|%05d', " + v + ", " + v + ")")
                      for v in ["-0", "0/0", "1/0", "-1/0", "2^53", "-2^53", "2^53-1",
                                "-(2^53-1)", "2^63", "3.7", "-3.7", "1e15", "-1e15"]] +
                     [ev("return string.format()"), ev("return string.format(5)"),
                      ev("return ('%03d'):format(5)"), ev("return string.format('%d')"),
                      ev("return string.format('%d', nil)"), ev("return string.format('%d', {})"),
                      ev("return string.format('%d%s', 1, 'a\0b')"),
                      ev("local t = {} for i = 1, 300 do t[i] = i end "
                         "return string.format(string.rep('%03d', 300), unpack(t))"),
                      ev("return string.format(string.rep('%99d', 10), 1, 2, 3, 4, 5, 6, 7, 8, "
                         "9, 10)")],
    # ---- shebang, EVAL_RO ----
    "shebang": [ev("#!lua\nreturn 1"), ev("#!lua flags=no-writes\nreturn redis.call('set',"
                                          "KEYS[1],'b')", ["s:1"]),
                ev("#!lua flags=no-writes,allow-oom\nreturn 1"),
                ev("#!lua flags=bogus\nreturn 1"), ev("#!lua name=x\nreturn 1"),
                ev("#!luax\nreturn 1"), ev("#!lua   flags=no-writes  \nreturn 1"),
                ev("#!lua flags=\nreturn 1"), ev("#!lua\nerror('x')"),
                ev("#!lua flags=no-writes\nreturn redis.call('get',KEYS[1])", ["s:1"])],
    "EVAL_RO": [ev_ro("return redis.call('set',KEYS[1],'b')", ["r:1"]),
                ev_ro("return redis.pcall('set',KEYS[1],'b')", ["r:1"]),
                ev_ro("return redis.call('get',KEYS[1])", ["r:1"]),
                ev_ro("return redis.call('incr',KEYS[1])", ["r:1"]),
                ["EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]],
    # ---- EVAL, EVALSHA, SCRIPT ----
    "eval arguments": [[E, "return 1", "-1"], [E, "return 1", "x"],
                       [E, "return 1", "2", "a"], [E, "return 1"], [E],
                       [E, "return 1", "99999999999999999999"]],
    "evalsha and the cache": [
        [ES, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        [ES, "abc", "0"], [ES, "0" * 40, "0"],
        [SL, "LOAD", "return 1"],
        [ES, "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
        [ES, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        [SL, "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "abc",
         "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"],
        ev("return 'via eval'"),
        [ES, "6b1bf486c81ceb7edf3c093f4c48582e38c0e791", "0"],
        [SL, "FLUSH"], [ES, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        [SL, "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"],
        [SL, "LOAD", "return 1"], [SL, "FLUSH", "ASYNC"],
        [SL, "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"],
        [SL, "LOAD", "return 1"], [SL, "FLUSH", "sync"],
        [SL, "FLUSH", "x"], [SL, "FLUSH", "sync", "x"]],
    "script subcommands": [[SL, "EXISTS"], [SL, "LOAD"], [SL, "LOAD", "a", "b"],
                           [SL, "KILL"], [SL, "KILL", "x"], [SL, "FOO"], [SL],
                           [SL, "LOAD", "#!lua flags=bogus\nreturn 1"]],
    # ---- the seeds' fixed-window limiter ----
    "fixed window": [ev("local c = redis.call('INCR', KEYS[1]) "
                        "if c == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end "
                        "local ttl = redis.call('TTL', KEYS[1]) "
                        "redis.log(redis.LOG_VERBOSE, 'window', KEYS[1], c) "
                        "return {c, ttl}", ["fw:1"], ["60"]) for _ in range(3)],
    "limiter commands": [ev("redis.call('set',KEYS[1],'0','EX','100') "
                            "return {redis.call('incrby',KEYS[1],5), "
                            "redis.call('pexpire',KEYS[1],100000), "
                            "redis.call('pttl',KEYS[1]) > 99000, redis.call('ttl',KEYS[1]), "
                            "redis.call('decr',KEYS[1]), redis.call('decrby',KEYS[1],2), "
                            "redis.call('persist',KEYS[1]), redis.call('ttl',KEYS[1]), "
                            "redis.call('type',KEYS[1]).ok, redis.call('del',KEYS[1]), "
                            "redis.call('exists',KEYS[1])}", ["lim:1"]),
                         ev("return redis.call('set',KEYS[1],'v','PX','100000','NX')",
                            ["lim:2"]),
                         ev("return redis.call('set',KEYS[1],'v','PX','100000','NX')",
                            ["lim:2"])],
}


def redis_rate(key, burst, rate, period, cost):
    """go-redis/redis_rate's GCRA script (redis_rate.lua) run whole inside a wrapper that rounds
    what depends on the clock: with periods of hours, the microseconds between two calls never
    change the rounded numbers, so both servers must answer alike."""
    wrapped = ("local function allow()\n" + REDIS_RATE + "\nend\n"
               "local r = allow()\n"
               "return {r[1], r[2], math.ceil(tonumber(r[3])), math.ceil(tonumber(r[4])), "
               "redis.call('ttl', KEYS[1])}")
    return ev(wrapped, [key], [str(burst), str(rate), str(period), str(cost)])


with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis_rate.lua")) as f:
    REDIS_RATE = f.read()
CASES["redis_rate"] = (
    [redis_rate("rr:1", 3, 1, 3600, 1) for _ in range(5)] +
    [redis_rate("rr:2", 10, 5, 7200, 4) for _ in range(4)] +
    [redis_rate("rr:3", 5, 1, 3600, 0), redis_rate("rr:3", 5, 1, 3600, 6),
     redis_rate("rr:3", 5, 1, 3600, 5), redis_rate("rr:3", 5, 1, 3600, 0),
     redis_rate("rr:3", 5, 1, 3600, 1)] +
    [ev("return redis.replicate_commands()")])


# A compare-and-swap of opaque binary state (bucket_cas.lua), as JVM limiters keep a bucket:
# every byte value, NULs, CR LF and RESP-looking bytes, an empty value, a 1 MB value; an absent
# key, a stale expected value, prefixes either way. After a swap, GET returns the bytes and
# PTTL_CHECK reduces PTTL to what does not depend on the clock: -1/-2 as is, else whether it
# lies in (0, the PX given].
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bucket_cas.lua")) as f:
    BUCKET_CAS = f.read()
PTTL_CHECK = ("local t = redis.call('PTTL', KEYS[1]) "
              "if t < 0 then return t end "
              "if t <= tonumber(ARGV[1]) then return 'in (0, px]' end "
              "return 'above px: ' .. t")


def cas(key, expected, new, ttl_ms, how=None):
    return ev(BUCKET_CAS, [key], [expected, new, str(ttl_ms)] + ([how] if how else []))


def cas_sha(key, expected, new, ttl_ms):
    return [ES, SHA1_BUCKET_CAS, "1", key, expected, new, str(ttl_ms)]


def ttl_in(key, px):
    return ev(PTTL_CHECK, [key], [str(px)])


SHA1_BUCKET_CAS = hashlib.sha1(BUCKET_CAS.encode()).hexdigest()
ALL_BYTES = bytes(range(256))
NULS = b"\x00a\x00\x00b\x00"
CRLF = b"\r\n$3\r\nset\r\n*1\r\n"
BIG = random.Random(4).randbytes(1 << 20)
BIG2 = BIG[:-1] + bytes([BIG[-1] ^ 1])
CASES["binary compare-and-swap"] = [
    # absent key: no match, even for an empty expected value; nothing is created
    cas("cas:a", b"", b"x", 1000), cas("cas:a", ALL_BYTES, b"x", 1000), ["EXISTS", "cas:a"],
    # every byte value, then a swap to NULs and to CR LF, each checked by GET
    ["SET", "cas:b", ALL_BYTES], cas("cas:b", ALL_BYTES, NULS, 600000), ["GET", "cas:b"],
    ttl_in("cas:b", 600000),
    cas("cas:b", ALL_BYTES, b"stale", 600000), ["GET", "cas:b"],
    cas("cas:b", b"\x00a", CRLF, 600000), cas("cas:b", NULS + b"\x00", CRLF, 600000),
    cas("cas:b", b"\x00a\x00\x00b\x01", CRLF, 600000), ["GET", "cas:b"],
    cas("cas:b", NULS, CRLF, 500000), ["GET", "cas:b"], ttl_in("cas:b", 500000),
    # through the cache, with the PEXPIRE form and with no expiry
    [SL, "LOAD", BUCKET_CAS], cas_sha("cas:b", CRLF, ALL_BYTES[::-1], 400000),
    ["GET", "cas:b"], ttl_in("cas:b", 400000),
    cas("cas:b", ALL_BYTES[::-1], b"\xff", 300000, "pexpire"), ["GET", "cas:b"],
    ttl_in("cas:b", 300000),
    cas("cas:b", b"\xff", b"\xfe", 0), ["GET", "cas:b"], ttl_in("cas:b", 1),
    # the empty value is a value: it matches an empty expected value, an absent key does not
    ["SET", "cas:e", b""], cas("cas:e", b"x", b"y", 1000), cas("cas:e", b"", b"", 700000),
    ["GET", "cas:e"], ["STRLEN", "cas:e"], ttl_in("cas:e", 700000),
    cas("cas:e", b"", ALL_BYTES, 700000), ["GET", "cas:e"],
    # 1 MB: a mismatch in the last byte, then the swap and the bytes back
    ["SET", "cas:m", BIG], cas("cas:m", BIG2, b"small", 1000), ["STRLEN", "cas:m"],
    cas("cas:m", BIG, BIG2, 900000), ["GET", "cas:m"], ttl_in("cas:m", 900000),
    cas("cas:m", BIG2, b"", 900000), ["GET", "cas:m"],
    # the classic lost update: two readers of one state, only the first writer wins
    ["SET", "cas:r", b"\x01\x00state"], cas("cas:r", b"\x01\x00state", b"\x02\x00w1", 60000),
    cas("cas:r", b"\x01\x00state", b"\x02\x00w2", 60000), ["GET", "cas:r"],
    # hostile input: a wrong type, a bad or negative ttl
    ["HSET", "cas:h", "f", "v"], cas("cas:h", b"", b"x", 1000),
    ["SET", "cas:t", b"v"], cas("cas:t", b"v", b"w", -5), cas("cas:t", b"v", b"w", "abc"),
    cas("cas:t", b"v", b"w", -5, "pexpire"), ["GET", "cas:t"], ttl_in("cas:t", 1),
]


def short(cmd):
    """The command for a failure message, each argument cut to 80 bytes (one is 1 MB)."""
    return "[%s]" % ", ".join(repr(a[:80]) + ("...(%d bytes)" % len(a) if len(a) > 80 else "")
                              for a in cmd)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    # The 1 MB compare-and-swap sends two 1 MB arguments in one EVAL: above rlimitd's default
    # limits (512kb per argument, 1mb per command; Redis's are 512mb and 1gb), so they are raised.
    rl = Server("rlimitd", sys.argv[1], extra=["--client-query-buffer-limit", "4mb",
                                               "--proto-max-bulk-len", "2mb"])
    rd = Server("redis")
    failed = 0
    total = 0
    try:
        for name, cmds in CASES.items():
            a, b = rl.conn(), rd.conn()
            for cmd in cmds:
                total += 1
                ra, rb = a.call(*cmd), b.call(*cmd)
                if ra != rb:
                    failed += 1
                    print("FAIL [%s] %s\n  rlimitd: %r\n  redis:   %r" % (name, short(cmd),
                                                                          ra[:300], rb[:300]))
            a.close()
            b.close()
        if not rl.alive():
            print("FAIL rlimitd died")
            failed += 1
    finally:
        report = rl.stop()
        rd.stop()
    if report:
        failed += 1
        print("FAIL sanitizer report from rlimitd:\n" + report[:4000])
    print("scripting_diff: %d commands in %d cases, %d differ" % (total, len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
