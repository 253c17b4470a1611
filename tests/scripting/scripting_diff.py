#!/usr/bin/env python3
"""scripting_diff.py - EVAL/EVALSHA/SCRIPT on rlimitd against Debian's redis-server 7.0, byte
for byte.

Each case is a list of commands sent, in order, on one connection to each server (both start
empty and each case uses its own keys). Every reply must be identical. On a mismatch it prints
the case, the command and both replies. Scripts may use keys they do not declare, as in Redis
standalone (the "undeclared keys" case). With --resp3 every connection opens with HELLO 3, so
each script's reply is compared in RESP3 (the caller's protocol) while the script itself starts
in RESP2 and may switch with redis.setresp(3).

    scripting_diff.py RLIMITD_BINARY [--resp3]"""
import hashlib
import os
import random
import sys

from resp import Server, stop_pair

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
    # A script runs with the globals and library tables as proxies, or directly when its
    # bytecode shows it cannot write to them (script_sandbox.c): the prefixes put each probe on
    # the direct path, the one for scripts that assign table fields, and the one for scripts
    # that name _G. Every path must read and refuse as Redis does.
    "sandbox paths": [ev(pre + probe) for pre in ("", "local t = {} t.x = 1 ", "local g = _G ")
                      for probe in (
                          "return tostring(getmetatable(string))",
                          "local n = 0 for k, v in pairs(string) do n = n + 1 end return n",
                          "return type(rawget(string, 'len'))",
                          "return type(next(math))",
                          "return type(rawget(_G, 'redis'))",
                          "return tostring(getmetatable(getmetatable(_G)))",
                          "local n = 0 table.foreach(bit, function() n = n + 1 end) return n",
                          "return cjson.encode(bit)",
                          "local n = 0 for k in pairs(_G) do n = n + 1 end return n",
                          "local n = 0 for k in pairs(cmsgpack) do n = n + 1 end return n",
                          "table.insert(struct, 1)", "return tostring(getmetatable(struct))",
                          "table.insert(string, 1)", "table.insert(math, 1, 2)",
                          "table.insert(_G, 'x')", "table.insert(redis)",
                          "table.insert(cjson, 'a', 1)", "return {#string, rawget(string, 1)}",
                          "rawset(bit, 'x', 1)", "setmetatable(table, {})",
                          "local function f(t) t.x = 1 end f(string)",
                          "local function f() y = 1 end f()",
                          "loadstring('local t = ... t.x = 1')(math)",
                          "return next()", "return getmetatable()", "return pairs(nil)",
                          "return cjson.encode()", "return rawget(string)",
                          "return __redis__err__handler('x')",
                          "local t = __redis__err__handler('x') return {t.source, t.line, t.err}",
                          "local e = __redis__err__handler({err = 'E1'}) return {e.line, e.err}",
                          "local ok, t = pcall(__redis__err__handler, 'q') "
                          "return {t.source, t.line, t.err}",
                          "return __redis__err__handler()",
                          "__redis__err__handler = 1",
                          "return type(getmetatable(''))",
                          "return getmetatable('').__index.len('abc')",
                          "getmetatable('').__index = 1", "getmetatable('').__index.x = 1",
                          "rawset(getmetatable(''), 'a', 1)",
                          "return getmetatable(getmetatable(''))",
                          "local n = 0 for k in pairs(getmetatable('')) do n = n + 1 end "
                          "return n",
                          "return KEYS[1] .. ARGV[1]")],
    # KEYS and ARGV are fresh for every script, whatever the last one did to its own.
    "KEYS and ARGV between scripts": [
        ev("table.insert(KEYS, 'x') return #KEYS", ["ka:1"]),
        ev("return {#KEYS, KEYS[1], tostring(KEYS[2])}", ["ka:2"]),
        ev("rawset(ARGV, 'foo', 1) return 1", [], ["a"]),
        ev("return {#ARGV, tostring(ARGV.foo), ARGV[1], ARGV[2]}", [], ["b", "c"]),
        ev("setmetatable(KEYS, {__index = function() return 'mt' end}) return KEYS[5]",
           ["ka:3"]),
        ev("return {tostring(KEYS[5]), tostring(getmetatable(KEYS))}", ["ka:4"]),
        ev("table.remove(ARGV) return #ARGV", [], ["p", "q", "r"]),
        ev("return {#ARGV, ARGV[1], ARGV[2], ARGV[3], tostring(ARGV[4])}", [], ["s", "t", "u"]),
        ev("rawset(KEYS, 1, nil) return #KEYS", ["ka:5"]),
        ev("return {#KEYS, KEYS[1]}", ["ka:6"]),
        ev("table.sort(ARGV) return ARGV", [], ["z", "y", "x"]),
        ev("return ARGV", [], ["only"]),
        ev("return {#ARGV, #KEYS}"),
        ev("KEYS[3] = 'z' ARGV[9] = 'w' return {#KEYS, #ARGV}", ["ka:7"], ["v"]),
        ev("return {#KEYS, #ARGV, tostring(KEYS[3]), tostring(ARGV[9])}", ["ka:8"], ["v"]),
        ev("for i = 1, 100 do table.insert(ARGV, i) end return #ARGV", [], ["a"]),
        ev("return {#ARGV, tostring(ARGV[2])}", [], ["a"]),
    ],
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
    # xpcall's handler and coroutine.create/wrap are rlimitd's wrappers (so a kill ends them).
    "xpcall and coroutines": [
        ev("return {xpcall(function() error('x') end, function(m) return 'h:' .. m end)}"),
        ev("return {xpcall(function() return 1, 2 end, print)}"),
        ev("return {xpcall(function() error({1}) end, function(m) return type(m) end)}"),
        ev("return {xpcall(function() error('x') end, function(m) error('again') end)}"),
        ev("return {xpcall(function() error('x') end, 1)}"),
        ev("return {xpcall(function() error('x') end, function(a, b) return tostring(b) end)}"),
        ev("return {xpcall(function() error('x') end, function() return 1, 2 end)}"),
        ev("return {xpcall(function() return xpcall(error, function(m) return 'in' end) end, "
           "function() return 'out' end)}"),
        ev("local co = coroutine.create(function(a, b) local c = coroutine.yield(a + b) "
           "error('x' .. c) end) local r = {coroutine.resume(co, 1, 2)} "
           "r[#r + 1] = coroutine.status(co) local ok, e = coroutine.resume(co, 'y') "
           "return {r, tostring(ok), e, coroutine.status(co), "
           "{coroutine.resume(co)}}"),
        ev("local f = coroutine.wrap(function(a) coroutine.yield(a) return 'done' end) "
           "return {f(5), f(), pcall(f)}"),
        ev("return coroutine.wrap(function() error('in wrap') end)()"),
        ev("return coroutine.wrap(function() redis.call('nosuch') end)()"),
        ev("return {pcall(coroutine.create, print)}"),
        ev("return {pcall(coroutine.wrap, 1)}"),
        ev("return {pcall(coroutine.create)}"),
        ev("return type(coroutine.wrap(function() end))"),
        ev("local co = coroutine.create(function() return coroutine.running() end) "
           "local ok, r = coroutine.resume(co) return {tostring(ok), r == co}"),
        ev("return coroutine.resume(coroutine.create(function() "
           "return coroutine.resume(coroutine.create(function() return 7 end)) end))")],
    # The interval's size wraps in 32 bits as Redis's Lua computes it (UBSan in tests/fuzz reported the int overflow).
    "math.random at the int limits": [
        ev("math.randomseed(7) return {math.random(-2147483648, 2147483647), "
           "math.random(0, 2147483647), math.random(-2147483648, 0), "
           "math.random(-2147483647, 2147483647), math.random(5, 5), math.random(2147483647), "
           "math.random(1, 2147483647), math.random(-3, -1)}"),
        ev("math.randomseed(-1) return {math.random(-2147483648, -2147483648), "
           "math.random(2147483647, 2147483647)}")],
    # string.find/match/gmatch/gsub are rlimitd's wrappers (bounding a pattern's recursion).
    "patterns": [
        ev("return {string.find('hello world', 'o', 6)}"),
        ev("return {string.find('a.b', '.', 1, true), string.find('a.b', '%.')}"),
        ev("return {string.find('key:12:x', '(%a+):(%d+)')}"),
        ev("return {string.match('  trim  ', '^%s*(.-)%s*$'), string.match('x=1', '()=()')}"),
        ev("return {string.gsub('hello world', '(%w+)', '<%1>')}"),
        ev("return {string.gsub('abc', '%w', {a='1', b=true})}"),
        ev("return {string.gsub('abc', '.', function(c) return c:upper() end, 2)}"),
        ev("local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do "
           "t[#t + 1] = k .. v end return t"),
        ev("return {string.match('f(a(b)c)d', '%b()'), string.find('THE (quick)', '%f[%a]%a+')}"),
        ev("return {('abc'):find('b'), ('abc'):match('(b)(c)'), ('abc'):gsub('', '-')}"),
        ev("return string.find('x', '[a')"), ev("return string.gsub('x', '(', 'y')"),
        ev("return string.gsub('x', 'x', '%2')"), ev("return string.match('x', '%')"),
        ev("return string.find()"), ev("return string.find('x', {})"),
        ev("return string.gsub('x', 'x', 1, 'n')"), ev("return {string.find(12345, 34)}"),
        ev("return {string.find('a+b', '+', 1, 1)}"),
        ev("return #string.match(string.rep('a', 900), string.rep('a?', 900))")],
    "string.rep": [ev("return {string.rep('', 5), string.rep('', -1), string.rep('ab', 3), "
                      "string.rep(12, 2), string.rep('', '3'), ('x'):rep(0)}"),
                   ev("return string.rep('', 'x')"), ev("return string.rep('')"),
                   ev("return string.rep({}, 1)"), ev("return string.rep('', {})"),
                   ev("return #string.rep('', 100000000)")],
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
    # ---- RESP3 (redis.setresp), both ways ----
    "setresp": [ev("return redis.setresp(3)"), ev("return redis.setresp(1)"),
                ev("return redis.setresp('3')"), ev("return redis.setresp('x')"),
                ev("return redis.setresp(2.9)"), ev("return redis.setresp(3.9)"),
                ev("return redis.setresp(2, 3)"), ev("return redis.setresp(1e300)"),
                ev("return {pcall(redis.setresp, 7)}"),
                ev("local ok, e = pcall(redis.setresp, 7) return {tostring(ok), e.err}"),
                # each script starts in RESP2 again
                ev("redis.setresp(3) return type(redis.call('get', KEYS[1]))", ["r3:none"]),
                ev("return type(redis.call('get', KEYS[1]))", ["r3:none"])],
    "RESP3 replies to Lua": [
        ["HSET", "r3:h", "a", "1", "b", "2", "c", "3"],
        ["ZADD", "r3:z", "1.5", "a", "2", "b", "0.1", "c", "-inf", "d"],
        ev("redis.setresp(3) return redis.call('hgetall', KEYS[1])", ["r3:h"]),
        ev("redis.setresp(2) return redis.call('hgetall', KEYS[1])", ["r3:h"]),
        # a map that grows the Lua table through several sizes: lua_next's order then
        # depends on how the table was built, which must be as Redis builds it
        ev("for i = 1, 60 do redis.call('hset', KEYS[1], 'f' .. i, i) end "
           "redis.setresp(3) return redis.call('hgetall', KEYS[1])", ["r3:big"]),
        ev("redis.setresp(3) return redis.call('hgetall', KEYS[1])", ["r3:none"]),
        ev("redis.setresp(3) local r = redis.call('hgetall', KEYS[1]) "
           "return {type(r), type(r.map), r.map.a, r.map.b, r.map.c, #r}", ["r3:h"]),
        ev("redis.setresp(3) return redis.call('zscore', KEYS[1], 'a')", ["r3:z"]),
        ev("redis.setresp(3) local r = redis.call('zscore', KEYS[1], 'c') "
           "return {type(r), tostring(r.double), r.double * 10}", ["r3:z"]),
        ev("redis.setresp(3) return redis.call('zrange', KEYS[1], 0, -1, 'withscores')",
           ["r3:z"]),
        ev("redis.setresp(2) return redis.call('zrange', KEYS[1], 0, -1, 'withscores')",
           ["r3:z"]),
        ev("redis.setresp(3) local r = redis.call('zrange', KEYS[1], 0, 0, 'withscores') "
           "return {#r, #r[1], r[1][1], tostring(r[1][2].double)}", ["r3:z"]),
        ev("redis.setresp(3) return redis.call('zmscore', KEYS[1], 'a', 'x', 'd')", ["r3:z"]),
        ev("redis.setresp(3) return redis.call('zrandmember', KEYS[1], -3, 'withscores')",
           ["r3:one"]),
        ev("redis.setresp(3) return redis.call('get', KEYS[1])", ["r3:none"]),
        ev("redis.setresp(3) return {redis.call('get', KEYS[1]), 'after'}", ["r3:none"]),
        ev("redis.setresp(3) return {1, redis.call('zscore', KEYS[1], 'x'), 2}", ["r3:z"]),
        ev("redis.setresp(3) return type(redis.call('lpop', KEYS[1], 3))", ["r3:none"]),
        ev("redis.setresp(3) return redis.call('set', KEYS[1], 'v')", ["r3:s"]),
        ev("redis.setresp(3) return redis.call('incrbyfloat', KEYS[1], '1.5')", ["r3:f"]),
        ev("redis.setresp(3) return redis.call('hincrbyfloat', KEYS[1], 'a', '0.5')", ["r3:h"]),
        ev("redis.setresp(3) return redis.call('zincrby', KEYS[1], '1', 'a')", ["r3:z"]),
        ev("redis.setresp(3) return redis.call('zpopmax', KEYS[1])", ["r3:z"]),
        ev("redis.setresp(3) return redis.call('zpopmin', KEYS[1], 2)", ["r3:z"]),
        # (not COMMAND INFO returned whole: its sets of statuses become tables keyed by
        # tables, whose order is their addresses', different on every server)
        ev("redis.setresp(3) local r = redis.call('command', 'info', 'set')[1] "
           "return {type(r[3].set), r[3].set.write, r[3].set.denyoom, type(r[9].set)}"),
        ev("redis.setresp(3) local r = redis.call('info', 'keyspace') "
           "return {type(r.verbatim_string), r.verbatim_string.format, "
           "type(r.verbatim_string.string)}"),
        ev("redis.setresp(3) return redis.pcall('hgetall', KEYS[1])", ["r3:s"]),
        ev("redis.setresp(3) return redis.call('hgetall', KEYS[1])", ["r3:s"])],
    "typed tables to replies": [
        ev("return {double=1.5}"), ev("return {double=0.1}"), ev("return {double=3}"),
        ev("return {double=-0.0}"), ev("return {double=1/0}"), ev("return {double=-1/0}"),
        ev("return {double=1e300}"), ev("return {double=2^-1074}"),
        ev("return {double='1.5'}"), ev("return {double={}}"),
        ev("return {big_number='123456789012345678901234567890'}"),
        ev("return {big_number='-1'}"), ev("return {big_number='1\r\n2'}"),
        ev("return {big_number=5}"), ev("return {big_number=''}"),
        ev("return {verbatim_string={format='txt', string='hello\r\nworld'}}"),
        ev("return {verbatim_string={format='mkd', string=''}}"),
        ev("return {verbatim_string={format='x', string='s'}}"),
        ev("return {verbatim_string={format='toolong', string='s'}}"),
        ev("return {verbatim_string={format='txt'}}"),
        ev("return {verbatim_string={string='s'}}"),
        ev("return {verbatim_string={format=1, string='s'}}"),
        ev("return {verbatim_string='s'}"),
        ev("return {map={a=1}}"), ev("return {map={}}"),
        ev("return {map={a={1, 2}, b={map={c='d'}}, e={set={f=true}}}}"),
        ev("return {map={[1]='one', [2.5]='x'}}"),
        ev("return {map={a=true, b=false}}"),
        ev("return {map={k={double=2.5}}}"),
        ev("return {map=5}"),
        ev("return {set={a=true, b=true, c=false}}"), ev("return {set={}}"),
        ev("return {set={[1]=true, [2]=true}}"), ev("return {set={x=1}}"),
        ev("local t = {} for i = 1, 50 do t['k' .. i] = i end return {map=t}"),
        ev("local t = {} for i = 1, 50 do t['m' .. i] = true end return {set=t}"),
        # precedence: err, ok, double, big_number, verbatim_string, map, set, then an array
        ev("return {err='E x', map={}}"), ev("return {ok='fine', double=1}"),
        ev("return {double=1, big_number='2'}"), ev("return {big_number='2', map={}}"),
        ev("return {map={a=1}, set={b=true}}"), ev("return {set={b=true}, 7}"),
        ev("return {map={a=1}, 1, 2}"), ev("return {1, {double=2.5}, {map={}}}")],
    "booleans by setresp": [
        ev("return true"), ev("return false"), ev("return {true, false, 1}"),
        ev("redis.setresp(3) return true"), ev("redis.setresp(3) return false"),
        ev("redis.setresp(3) return {true, false, 1}"),
        ev("redis.setresp(3) redis.setresp(2) return {true, false}"),
        ev("redis.setresp(3) return {map={a=false}, set={}}"),
        ev("return {map={a=false}}")],
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
    "undeclared keys": [
        ev("return redis.call('incr', 'u:global')"),
        ev("return redis.call('incr', 'u:global')"),
        ev("redis.call('set', KEYS[1] .. ':x', ARGV[1]) return redis.call('get', KEYS[1] .. ':x')",
           ["u:k"], ["v1"]),
        ev("return redis.call('mget', KEYS[1] .. ':x', 'u:global', 'u:none')", ["u:k"]),
        ev("for i = 1, 20 do redis.call('rpush', 'u:l' .. (i % 5), i) end "
           "local r = {} for i = 0, 4 do r[#r + 1] = redis.call('llen', 'u:l' .. i) end "
           "return r"),
        ev("return redis.call('del', 'u:l0', 'u:l1', 'u:l2', 'u:l3', 'u:l4', KEYS[1])", ["u:k"]),
        ev_ro("return redis.call('get', 'u:global')"),
        ev_ro("return redis.pcall('incr', 'u:global')"),
        ev("#!lua flags=no-writes\nreturn redis.call('get', 'u:global')"),
        ev("#!lua flags=no-writes\nreturn redis.call('incr', 'u:global')"),
        ev("return redis.call('hset', ARGV[1], 'f', 'v')", [], ["u:h"]),
        ev("return redis.call('hgetall', ARGV[1])", [], ["u:h"])],
    "undeclared keys inside MULTI": [
        ["SET", "ux:a", "1"], ["MULTI"], ["INCR", "ux:a"],
        ev("return redis.call('incr', 'ux:global')"),
        ev("redis.call('set', KEYS[1], 5) return redis.call('get', 'ux:other')", ["ux:b"]),
        ev("return redis.call('mget', 'ux:a', 'ux:global', 'ux:b')"),
        ev("for i = 1, 40 do redis.call('incr', 'ux:n' .. i) end return redis.call('get', 'ux:n7')"),
        ["GET", "ux:n40"], ["EXEC"],
        ["MULTI"], ev_ro("return redis.call('get', 'ux:n3')"),
        ev("return redis.pcall('hset', 'ux:a', 'f', 'v')"), ["EXEC"],
        ["WATCH", "ux:w"], ["SET", "ux:w", "1"], ["MULTI"],
        ev("return redis.call('incr', 'ux:w2')"), ["EXEC"], ["GET", "ux:w2"]],
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


# ---- cmsgpack and struct ----
# SER turns any values into one canonical string (table keys sorted), so decoded tables compare
# whatever their iteration order; only map keys under 32 bytes are packed (a longer string key
# iterates in another order than in Redis: docs/COMMANDS.md, Scripting).
SER = ("local function ser(v, d) d = d or 0 local t = type(v) "
       "if t == 'table' then if d > 40 then return '{deep}' end local p = {} "
       "for k, x in pairs(v) do p[#p + 1] = ser(k, d + 1) .. '=' .. ser(x, d + 1) end "
       "table.sort(p) return '{' .. table.concat(p, ',') .. '}' "
       "elseif t == 'string' then return string.format('%q', v) "
       "elseif t == 'number' then return string.format('%.17g', v) end return tostring(v) end "
       "local function all(...) local o = {tostring(select('#', ...))} "
       "for i = 1, select('#', ...) do o[#o + 1] = ser((select(i, ...))) end "
       "return table.concat(o, ' ') end ")


def evs(body, keys=(), args=()):
    return ev(SER + body, keys, args)


MP_INTS = ["0", "1", "127", "128", "255", "256", "65535", "65536", "2^31-1", "2^31", "2^32-1",
           "2^32", "2^53", "2^63-1024", "2^63", "2^64", "-1", "-32", "-33", "-127", "-128",
           "-129", "-32768", "-32769", "-2^31", "-2^31-1", "-2^53", "-2^63", "-2^63-2048"]
MP_FLOATS = ["0.5", "-0.5", "1.5", "0.1", "1/3", "3.4028234663852886e38", "3.5e38", "1e39",
             "1e300", "1.401298464324817e-45", "4.9e-324", "1/0", "-1/0", "0/0", "-(0/0)",
             "-0.0", "16777217", "16777216", "-2.5"]
MP_LENS = [0, 1, 31, 32, 33, 255, 256, 257, 65535, 65536, 65537]
MP_TABLES = ["{}", "{1,2,3}", "{1,nil,3}", "{nil,2}", "{[2]=1}", "{[0]=1}", "{[-1]=1}",
             "{[1.5]=1}", "{[2^31]=1}", "{[2^31-1]=1}", "{1,2,x=3}", "{[true]=1,[false]=2}",
             "{a={b={c={}}}}", "{x='y'}", "{{},{{}},{{{}}}}", "{1,'a',true,false,1.5,{k='v'}}",
             "setmetatable({1,2,3},{__index=function() return 9 end})",
             "setmetatable({},{__index=function() return 9 end})",
             "(function() local t = {} t[1] = t return t end)()",
             "(function() local t = {1,2,3} t[2] = nil return t end)()",
             "(function() local t = {} t.a = 1 t.a = nil return t end)()",
             "{[{}]=1}", "{[{1,{2}}]='x'}", "{0/0, 1/0}", "{[1/0]=1}"]


def mp_n(n, kind, depth_key="1"):
    """A Lua expression: an array or a map of n elements, or n nested tables."""
    if kind == "array":
        return "(function() local t = {} for i = 1, %d do t[i] = i %% 200 - 50 end return t " \
               "end)()" % n
    if kind == "map":
        return "(function() local t = {} for i = 1, %d do t['k' .. i] = i end return t " \
               "end)()" % n
    return "(function() local t = {} local c = t for i = 1, %d do c[%s] = {} c = c[%s] end " \
           "return t end)()" % (n, depth_key, depth_key)


def mp_bytes(h):
    return bytes.fromhex(h.replace(" ", ""))


MP_UNPACK = [
    # every type byte Redis knows, and the ones it refuses
    "00", "7f", "e0", "ff", "cc ff", "cd ff ff", "ce ff ff ff ff", "cf ff ff ff ff ff ff ff ff",
    "cf 00 20 00 00 00 00 00 01", "cf 7f ff ff ff ff ff ff ff", "d0 80", "d0 7f", "d1 80 00",
    "d2 80 00 00 00", "d3 80 00 00 00 00 00 00 00", "d3 ff ff ff ff ff ff ff ff",
    "ca 3f c0 00 00", "ca 7f 80 00 00", "ca ff c0 00 01", "ca 00 00 00 01",
    "cb 3f b9 99 99 99 99 99 9a", "cb 7f f8 00 00 00 00 00 01", "cb 80 00 00 00 00 00 00 00",
    "c0", "c2", "c3", "c0 c2 c3", "a0", "a3 61 62 63", "bf" + " 61" * 31, "d9 00",
    "d9 03 61 62 63", "da 00 02 61 62", "db 00 00 00 01 61", "90", "93 01 02 03",
    "dc 00 02 01 02", "dd 00 00 00 01 c3", "80", "81 a1 61 01", "82 01 02 03 04",
    "de 00 01 a1 61 c0", "df 00 00 00 01 a1 61 90", "93 c0 c0 01", "93 01 c0 c0",
    "81 c2 01", "81 90 01", "81 01 01 81 01 02", "92 81 a1 61 91 01 80",
    "c1", "c4 01 61", "c5 00 01 61", "c6 00 00 00 01 61", "c7 01 01 61", "c8 00 01 01 61",
    "c9 00 00 00 01 01 61", "d4 01 61", "d5 01 61 62", "d6 01 61 62 63 64", "d7 01" + " 00" * 8,
    "d8 01" + " 00" * 16, "01 02 03", "01 c1",
    # truncated
    "cc", "cd ff", "ce ff ff ff", "cf ff", "d0", "d1 00", "d2 00 00", "d3 00", "ca 00 00",
    "cb 00", "a3 61", "d9", "d9 05 61", "da 00", "da 00 05 61", "db 00 00 00", "db 00 00 00 05",
    "92 01", "dc 00", "dc 00 02 01", "dd 00 00 00", "dd ff ff ff ff 01", "81", "81 01",
    "de 00 01 01", "df ff ff ff ff 01 01", "db ff ff ff ff 61 62",
    # keys Lua refuses
    "81 c0 01", "81 cb 7f f8 00 00 00 00 00 00 01", "81 ca 7f c0 00 00 01",
    # an empty input
    "",
]

STRUCT_PACK = [
    "'b', -1", "'B', 255", "'B', 256", "'b', 200", "'b', 1.9", "'b', -1.9", "'h', -2",
    "'>h', -2", "'<H', 65535", "'>H', 65536", "'l', -1", "'>L', 1", "'T', 5", "'i', 1",
    "'>i', -1", "'I', 2^32", "'i1', 300", "'i3', 2^24+5", "'>i3', -2", "'i8', -1", "'i9', -1",
    "'>i9', 1", "'i16', -2", "'i32', 1", "'i0', 5", "'f', 1.5", "'>f', 1.5", "'d', 1.5",
    "'>d', -0.1", "'f', 1e300", "'f', 3.4028235e38", "'f', 3.40282357e38", "'f', 0/0",
    "'d', 0/0", "'f', -1/0", "'s', 'abc'", "'s', 'a\\0b'", "'c', 'abc'", "'c3', 'abc'",
    "'c0', 'abc'", "'c2', 'abc'", "'x'", "'xx'", "'bxh', 1, 2", "'!bxh', 1, 2", "'!bh', 1, 2",
    "'!bi', 1, 2", "'!bd', 1, 2", "'!4bd', 1, 2", "'!2bd', 1, 2", "'!bi3i', 1, 2, 3",
    "'!8bi3i', 1, 2, 3", "'!bc3i', 1, 'abc', 3", "'!bsi', 1, 'ab', 3", "'!bf', 1, 2",
    "'!b!2h', 1, 2", "'!16bd', 1, 2", "'!64bi32', 1, 2", "'!bl!1bl', 1, 2, 3, 4", "'!bT', 1, 2",
    "'>!4bhi', 1, 2, 3", "'<!4bhi', 1, 2, 3", "'<>b', 1", "' b ', 1", "''", "'b', '12'",
    "'s', 12", "'!1073741824b', 1", "'b\\0b', 1, 2",
    "'b', 2^63", "'b', 1e30", "'b', -1e30", "'b', 1/0", "'b', -1/0", "'b', 0/0", "'i8', 2^63",
    "'i8', 2^64", "'i8', 2^64+2^12", "'i8', 1e30", "'i8', -1e30", "'i8', 0/0", "'i8', 1/0",
    "'i8', -1/0", "'i8', 2^63+2^11", "'>i8', -2^63", "'i10', 2^63", "'i10', -2^63-2^12",
    "'i12', 2^64+2^13",
    # errors
    "'c5', 'abc'", "'!3bd', 1, 2", "'!0b', 1", "' b '", "'bq', 1", "'b5', 1", "'s5', 'a'",
    "'x3'", "'z'", "'%'", "'\\200'", "", "1, 2", "'b'", "'b', 'x'", "'s', {}", "'c', nil",
    "'i', {}", "'d', 'x'", "'f'", "'i33', 1", "'i99999999999', 1", "'c99999999999', 'a'",
    "'!99999999999'", "'i2147483647', 1", "'c2147483647', 'a'", "'!2147483648'",
]

STRUCT_SIZE = [
    "'b'", "'bhlLTiIfdx'", "'!bhlLTiIfdx'", "'!bd'", "'!4bd'", "'c5'", "'z'", "'!bi3'",
    "'!bi3b'", "'!b!8d'", "'c2147483647c2147483647'", "'q1'", "'5'", "'i'", "12", "'<>'",
    "'!i3i'", "'!bi5'", "'!8bi5'", "'!bi6'", "'!bi7'", "'!bi12'", "'!bi0b'", "'!bh3'", "'bi0'",
    "' '", "'!b i'", "'x!'", "'c'", "'!16bi16'", "'!32bi24'", "'!32bi20'", "'!4bi20'",
    "'b\\0b'", "'c2147483647'", "'c02147483647'", "'c0000000000000000000005'",
    "'c0'", "'s'", "'bs'", "'i40'", "'!3'", "'!7'", "'i33'", "", "'\\200'", "'c2147483648'",
    "'!2147483647'",
]

STRUCT_UNPACK_FMTS = [
    "b", "B", "<h", ">h", "<H", ">l", "<L", "T", "i", ">I", "i3", ">i3", "<i9", ">i9", "<I9",
    "<i12", ">i12", "i16", ">i16", "I16", "i0", "I0", "i1", "<i2", "<i7", ">i7", "i32", "f",
    ">f", "d", ">d", "s", "bs", "c", "c3", "c40", "c41", "c0", "bc0", "Bc0", "bc0b", "xxb",
    "!bi", "!bh", "!bi3", "!bd", "!4bd", "z", "i33", "", "x",
]
STRUCT_DATA = bytes(range(0x80, 0x94)) + b"\x00" + bytes(range(1, 20))
STRUCT_UNPACK = (
    [evs("return all(struct.unpack(ARGV[1], ARGV[2]))", (), [f, STRUCT_DATA])
     for f in STRUCT_UNPACK_FMTS] +
    [evs("return all(struct.unpack(ARGV[1], ARGV[2], %s))" % off, (), [f, STRUCT_DATA])
     for f, off in [("b", "2"), ("b", "0"), ("b", "-1"), ("b", "40"), ("b", "41"), ("b", "42"),
                    ("b", "'x'"), ("b", "'3'"), ("b", "1.9"), ("b", "2^53"), ("b", "2^64"),
                    ("b", "1e300"), ("b", "0/0"), ("b", "nil"), ("c41", "2"), ("!bd", "2"),
                    ("!bi", "2"), ("x", "40"), ("x", "41"), ("", "41"), ("", "42"),
                    ("", "100"), ("", "-5"), ("", "2^63")]] +
    [evs("return all(struct.unpack(ARGV[1], ARGV[2]))", (), [f, d])
     for f, d in [("bc0", b"\x05abcdefgh"), ("bc0", b"\xffabcdefgh"), ("bc0", b"\x00abcdefgh"),
                  ("fc0", b"\x00\x00\xc0\x3fabcdefgh"),
                  ("dc0", b"\x00\x00\x00\x00\x00\x00\xf8\x7fabcdefgh"),
                  ("dc0", b"\x00\x00\x00\x00\x00\x00\xf0\x7fabcdefgh"),
                  ("dc0", b"\x00\x00\x00\x00\x00\x00\xf0\xffabcdefgh"),
                  ("dc0", b"\x00\x00\x00\x00\x00\x00\x04\x40abcdefgh"),
                  ("sc0", b"12\x00abcdefgh"), ("sc0", b"1a\x00abcdefgh"), ("c1c0", b"3abcdefgh"),
                  ("s", b"abc"), ("s", b""), ("ss", b"abc\x00def\x00"), ("ss", b"abc\x00def"),
                  ("b\x00b", b"ab"), ("c0", b"abc")]] +
    [evs("return all(struct.unpack(%s))" % a)
     for a in ["'b'", "", "'b', {}", "'b', 12", "'ic0', 'abc'", "'b', 'a', 1, 'extra'"]] +
    # the stack: 7997 results fit beside the final position, 7998 do not
    [ev("return select('#', struct.unpack(string.rep('b', %d), string.rep('a', %d)))" % (n, m))
     for n, m in [(7996, 9000), (7997, 9000), (7998, 9000), (7998, 7997), (9000, 9000)]] +
    [ev("return select('#', struct.unpack(string.rep('x', 7996), string.rep('a', 9000)))")])

CASES.update({
    "cmsgpack integers": [ev("return cmsgpack.pack(%s)" % v) for v in MP_INTS] +
                         [ev("return cmsgpack.pack(%s)" % ", ".join(MP_INTS))],
    "cmsgpack floats": [ev("return cmsgpack.pack(%s)" % v) for v in MP_FLOATS],
    "cmsgpack strings": [ev("local p = cmsgpack.pack(string.rep('s', %d)) "
                            "return {#p, p:sub(1, 6), redis.sha1hex(p)}" % n) for n in MP_LENS] +
                        [ev("return cmsgpack.pack('a\\0b', '', 12)")],
    "cmsgpack other values": [ev("return cmsgpack.pack(true, false, nil)"),
                              ev("return cmsgpack.pack(nil)"),
                              ev("return cmsgpack.pack(function() end, "
                                 "coroutine.create(function() end))"),
                              ev("return cmsgpack.pack()"),
                              ev("return cmsgpack.pack(1, 'a', {}, {1}, {a=1})")],
    "cmsgpack tables": [ev("return cmsgpack.pack(%s)" % t) for t in MP_TABLES] +
                       [ev("local p = cmsgpack.pack(%s) return {#p, p:sub(1, 8), "
                           "redis.sha1hex(p)}" % mp_n(n, k))
                        for k in ("array", "map") for n in (15, 16, 17, 65535, 65536)] +
                       [ev("return cmsgpack.pack(%s)" % mp_n(n, "nest", key))
                        for key in ("1", "'k'") for n in (15, 16, 17, 40)],
    "cmsgpack round trips": [evs("return all(cmsgpack.unpack(cmsgpack.pack(%s)))" % v)
                             for v in MP_INTS + MP_FLOATS + MP_TABLES[:18]] +
                            [evs("return all(cmsgpack.unpack(cmsgpack.pack(string.rep('r', %d))))"
                                 % n) for n in (0, 31, 32, 255, 256)] +
                            [evs("return all(cmsgpack.unpack(cmsgpack.pack(%s)))" % mp_n(n, k))
                             for k in ("array", "map") for n in (15, 16, 17)] +
                            [evs("return all(cmsgpack.unpack(cmsgpack.pack(1, 'two', {3}, "
                                 "{four=4}, true, false, 2.5)))")],
    "cmsgpack unpack": [evs("return all(cmsgpack.unpack(ARGV[1]))", (), [mp_bytes(h)])
                        for h in MP_UNPACK] +
                       [evs("return all(cmsgpack.unpack(%s))" % a)
                        for a in ["", "{}", "12", "nil", "'\\1\\2', 'extra', 3"]],
    "cmsgpack unpack_one and unpack_limit": [
        evs("return all(cmsgpack.%s)" % call, (), [mp_bytes("01 a3 61 62 63 92 01 02 c3")])
        for call in ["unpack_one(ARGV[1])", "unpack_one(ARGV[1], 0)", "unpack_one(ARGV[1], 1)",
                     "unpack_one(ARGV[1], 2)", "unpack_one(ARGV[1], 5)", "unpack_one(ARGV[1], 8)",
                     "unpack_one(ARGV[1], 9)", "unpack_one(ARGV[1], 10)",
                     "unpack_one(ARGV[1], -1)", "unpack_one(ARGV[1], 'x')",
                     "unpack_one(ARGV[1], '3')", "unpack_one(ARGV[1], 1.7)",
                     "unpack_one(ARGV[1], 2^32+1)", "unpack_one(ARGV[1], 2^31)",
                     "unpack_one(ARGV[1], 1e300)", "unpack_one(ARGV[1], 0/0)",
                     "unpack_one(ARGV[1], nil)", "unpack_one(ARGV[1], 1, 2, 3)", "unpack_one()",
                     "unpack_one('', 0)", "unpack_one('', 1)", "unpack_one({}, 'x')",
                     "unpack_limit(ARGV[1])", "unpack_limit(ARGV[1], 0)",
                     "unpack_limit(ARGV[1], 0, 0)", "unpack_limit(ARGV[1], 0, 1)",
                     "unpack_limit(ARGV[1], 2)", "unpack_limit(ARGV[1], 2, 1)",
                     "unpack_limit(ARGV[1], 10)", "unpack_limit(ARGV[1], 10, 5)",
                     "unpack_limit(ARGV[1], -1)", "unpack_limit(ARGV[1], -1, -5)",
                     "unpack_limit(ARGV[1], 1, 100)", "unpack_limit(ARGV[1], 1, 9)",
                     "unpack_limit(ARGV[1], 'a')", "unpack_limit(ARGV[1], 1, 'b')",
                     "unpack_limit(ARGV[1], 2^32)", "unpack_limit(ARGV[1], 2^32, 2^32)",
                     "unpack_limit(ARGV[1], 2^32+2, 2^32+1)", "unpack_limit(ARGV[1], 2^31+2)",
                     "unpack_limit('', 3)", "unpack_limit({}, 'a')"]] + [
        # walking a stream of values with unpack_one until it answers -1
        evs("local s, off, out = ARGV[1], 0, {} repeat local v local n = off "
            "off, v = cmsgpack.unpack_one(s, off) out[#out + 1] = n .. '>' .. off .. ':' .. "
            "ser(v) until off == -1 return table.concat(out, ' ')", (),
            [mp_bytes("01 a3 61 62 63 92 01 02 c3 81 a1 6b 90 cb 3f b9 99 99 99 99 99 9a c0")]),
        evs("local s, off, out = ARGV[1], 0, {} repeat local a, b local n = off "
            "off, a, b = cmsgpack.unpack_limit(s, 2, off) out[#out + 1] = n .. '>' .. off .. "
            "':' .. ser(a) .. ',' .. ser(b) until off == -1 return table.concat(out, ' ')", (),
            [mp_bytes("01 a3 61 62 63 92 01 02 c3 81 a1 6b 90 cb 3f b9 99 99 99 99 99 9a")])],
    # Where the Lua stack (8000 slots a call) runs out, Redis's texts at Redis's counts.
    "cmsgpack stack limits": [
        ev("return select('#', cmsgpack.unpack(ARGV[1]))", (), [b"\x01" * n])
        for n in (7998, 7999, 8000, 100000)] + [
        ev("local ok, e = pcall(cmsgpack.unpack, ARGV[1]) return {tostring(ok), type(e), "
           "type(e) == 'string' and e or ''}", (), [b"\x91" * n + b"\x01"])
        for n in (3999, 4000, 100000)] + [
        ev("return type(cmsgpack.unpack(ARGV[1]))", (), [b"\x81\xa1a" * n + b"\x01"])
        for n in (3999, 4000)] + [
        ev("return type(cmsgpack.unpack(ARGV[1]))", (), [b"\x81" * n + b"\x01" * (n + 1)])
        for n in (7997, 7998)] + [
        ev("return cmsgpack.unpack(ARGV[1])", (), [b"\x81" * n]) for n in (7998, 7999)] + [
        ev("return select('#', cmsgpack.unpack_limit(ARGV[1], 9000))", (), [b"\x01" * n])
        for n in (7998, 7999, 8000)] + [
        ev("local t = {} for i = 1, %d do t[i] = 1 end %s return #cmsgpack.pack(unpack(t))"
           % (n, last)) for n in (3999, 4000, 4001)
        for last in ("", "t[%d] = {a={b=1}}" % n, "t[%d] = {{1}}" % n, "t[1] = {a={b=1}}")],
    "struct pack": [ev("return struct.pack(%s)" % a) for a in STRUCT_PACK],
    "struct size": [ev("return struct.size(%s)" % a) for a in STRUCT_SIZE],
    "struct unpack": STRUCT_UNPACK,
    "struct round trips": [
        evs("return all(struct.unpack(ARGV[1], struct.pack(ARGV[1], %s)))" % vals, (), [f])
        for f, vals in [("<bBhHlLTiI", "-1, 255, -2, 65535, -3, 2^53, 7, -4, 2^32-1"),
                        (">bBhHlLTiI", "-1, 255, -2, 65535, -3, 2^53, 7, -4, 2^32-1"),
                        ("!<bi3d", "1, -2, 0.1"), ("!>bi5hfd", "1, -2, 3, 1.5, -1/0"),
                        ("Bc0c2", "3, 'xyz', 'ab'"), ("!4 > i16 < I7 x b", "-9, 2^50, 5")]],
})

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
# ---- the Lua CVEs Redis closed (docs/COMMANDS.md, Scripting hardening): each trigger answers
# as Redis does, and the next command on the same connection shows the server alive ----
CASES.update({
    "CVE-2024-31449 bit.tohex": [ev("return bit.tohex(65535, -2147483648)"),
                                 ev("return bit.tohex(65535, 2147483647)"),
                                 ev("return bit.tohex(-1, -8)"), ev("return 1")],
    "CVE-2025-46817 unpack ranges": [ev("return {unpack({1,2,3}, -2, 2147483647)}"),
                                     ev("return {unpack({1,2,3}, 0, 2147483647)}"),
                                     ev("return {unpack({1,2,3}, -2147483648, -2)}"),
                                     ev("return {unpack({1,2,3}, 2147483647, -2147483648)}"),
                                     ev("return {unpack({1,2,3}, 2, 3)}"), ev("return 1")],
    "CVE-2025-46819 malformed long strings": [
        ev("return [=["), ev("return [==[ x ]=]"), ev("return [[ x"), ev("return [=x"),
        ev("--[==[ x"), ev("return loadstring('return [=[')"),
        ev("return loadstring('[' .. string.rep('=', 100000) .. '[')"),
        ev("return select(2, loadstring('x = [=== a ]=]'))"),
        # deep levels, well formed and not: the lexer's arithmetic on the level, both sides of
        # the closing bracket's match, and the level as the start of the next token
        ev("local q = string.rep('=', 100000) "
           "return #loadstring('return [' .. q .. '[x]' .. q .. ']')()"),
        ev("local q = string.rep('=', 100000) "
           "return select(2, loadstring('return [' .. q .. '[x]' .. q .. '=]'))"),
        ev("local q = string.rep('=', 100000) "
           "return select(2, loadstring('return [' .. q .. '[x]' .. q:sub(2) .. ']'))"),
        ev("return select(2, loadstring('--[' .. string.rep('=', 100000) .. 'x\\n+'))"),
        ev("return select(2, loadstring('return [==[a]==] .. [=[' .. string.rep('\\n', 1000)))"),
        ev("return 1")],
    "CVE-2025-49844 chunk names while parsing": [
        ev("return select(2, loadstring('return 1 +', string.rep('n', 1000)))"),
        ev("collectgarbage('step', 1000) return select(2, loadstring(string.rep('a = 1 ', 1000) .. ' +'))"),
        ev("local f = loadstring('return 7') collectgarbage() return f()"), ev("return 1")],
    "CVE-2021-32626 stack growth": [
        ev("local t = {} for i = 1, 7999 do t[i] = i end return #{unpack(t)}"),
        ev("local t = {} for i = 1, 100000 do t[i] = i end return #{unpack(t)}"),
        ev("local t = {} for i = 1, 100000 do t[i] = 'x' end return redis.call('echo', unpack(t))"),
        ev("local t = {} for i = 1, 10000 do t[i] = i end return t"),
        ev("local t = {} for i = 1, 7999 do t[i] = 'x' end return #redis.call('echo', 'a', unpack(t))"),
        ev("return 1")],
    # A command whose arguments fill the call's stack still answers: its arguments are not
    # needed once it has run, so its reply (a number, an array, an error) has room.
    "redis.call with thousands of arguments": [
        ev("local t = {} for i = 1, %d do t[i] = i end return redis.call('lpush', KEYS[1], unpack(t))"
           % n, ["big:l%d" % n]) for n in (7990, 7995, 7997, 7998, 7999)] + [
        ev("local t = {} for i = 1, 7998 do t[i] = 'k' .. i end return redis.call('del', unpack(t))"),
        ev("local t = {} for i = 1, 7998 do t[i] = 'x' end return redis.call('mget', unpack(t))"),
        ev("local t = {} for i = 1, 7998 do t[i] = 'x' end return redis.pcall('hset', 'big:l7999', unpack(t))"),
        ev("local t = {} for i = 1, 7997 do t[i] = 'x' end return redis.call('hset', 'big:h', unpack(t))"),
        ["LLEN", "big:l7999"], ["LRANGE", "big:l7999", "0", "2"]],
})

# INFO errorstats after each script: the error of a command a script ran or could not run is
# counted once, where it happened, whether the script raises it, returns it or swallows it; the
# tables redis.call and redis.pcall make of it say so (ignore_error_stats_update).
ERRSTATS = ["INFO", "errorstats"]
RESET = ["CONFIG", "RESETSTAT"]
CASES["error stats of script calls"] = [["SET", "es:s", "abc"]] + [
    c for body, keys, ro in (
        ("return redis.call('incr', KEYS[1])", ["es:s"], 0),
        ("local t = redis.pcall('incr', KEYS[1]) return 1", ["es:s"], 0),
        ("return redis.pcall('incr', KEYS[1])", ["es:s"], 0),
        ("return redis.call('set', KEYS[1], 'y')", ["es:x"], 1),
        ("local t = redis.pcall('set', KEYS[1], 'y') return 1", ["es:x"], 1),
        ("return {err = 'ERR y'}", [], 0),
        ("return redis.pcall('nosuch')", [], 0),
        ("local t = redis.pcall('nosuch') return 1", [], 0),
        ("local t = redis.pcall('get', 'a', 'b') return 1", [], 0),
        ("local t = redis.pcall('multi') return 1", [], 0),
        ("error('boom')", [], 0),
        ("local t = redis.pcall('nosuch') t.ignore_error_stats_update = nil return t", [], 0),
        ("local t = redis.pcall('get', 'a', 'b') local k = {} "
         "for x in pairs(t) do k[#k + 1] = x end table.sort(k) return k", [], 0))
    for c in ([RESET, (ev_ro if ro else ev)(body, keys), ERRSTATS])] + [
    ["CONFIG", "SET", "maxmemory", "1"]] + [
    c for body in ("return redis.call('set', KEYS[1], 'y')",
                   "local t = redis.pcall('set', KEYS[1], 'y') return t['err']",
                   "return redis.pcall('set', KEYS[1], 'y')")
    for c in ([RESET, ev(body, ["es:x"]), ERRSTATS])] + [
    ["CONFIG", "SET", "maxmemory", "0"]]

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
    resp = 3 if "--resp3" in sys.argv[2:] else 2
    if len(sys.argv) != 2 + (resp == 3):
        print(__doc__)
        return 2
    sys.setrecursionlimit(20000)  # a reply may nest 1000 deep
    # The 1 MB compare-and-swap sends two 1 MB arguments in one EVAL: above rlimitd's default
    # limits (512kb per argument, 1mb per command; Redis's are 512mb and 1gb), so they are raised.
    rl = Server("rlimitd", sys.argv[1], extra=["--client-query-buffer-limit", "4mb",
                                               "--proto-max-bulk-len", "2mb"])
    rd = Server("redis")
    failed = 0
    total = 0
    try:
        for name, cmds in CASES.items():
            a, b = rl.conn(resp=resp), rd.conn(resp=resp)
            for cmd in cmds:
                total += 1
                ra, rb = a.call(*cmd), b.call(*cmd)
                if ra != rb:
                    failed += 1
                    print("FAIL [%s] %s\n  rlimitd: %r\n  redis:   %r" % (name, short(cmd),
                                                                          ra[:300], rb[:300]))
            a.close()
            b.close()
    finally:
        failed += stop_pair(rl, rd)
    print("scripting_diff: %d commands in %d cases, RESP%d, %d differ"
          % (total, len(CASES), resp, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
