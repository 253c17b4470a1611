#!/usr/bin/env python3
"""test_scripting.py - EVAL on the real rlimitd: atomicity and key declaration, one Lua state per
I/O thread running in parallel, the limiter commands from scripts, hostile scripts, INFO.

    test_scripting.py RLIMITD_BINARY [TEST...]

Prints one line per test and "N passed, N failed"; exits 1 on any failure. Nothing here
depends on the machine's speed: parallelism is shown by the overlap of the scripts' own run
intervals as the server measured them (TIME inside the script for the start, SLOWLOG for the
duration), not by wall-clock speed."""
import hashlib
import os
import select
import sys
import threading
import time

from resp import Conn, Server, parse

BIN = None
SPIN = "local n = tonumber(ARGV[1]) local x = 0 for i = 1, n do x = x + i end " \
       "return redis.call('TIME')"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def err(v):
    return isinstance(v, Exception)


def t_undeclared_keys(srv):
    """Keys a script did not pass in KEYS work as in Redis standalone; whole-keyspace commands
    stay refused inside scripts."""
    c = srv.conn()
    check(c.value("EVAL", "return redis.call('incr', 'undeclared:g')", "0") == 1,
          "numkeys 0, a constant key")
    check(c.value("EVAL", "redis.call('set', KEYS[1] .. 'x', 5) return redis.call('get', "
                  "KEYS[1] .. 'x')", "1", "undeclared:k") == b"5", "a key built from KEYS[1]")
    check(c.value("EVAL", "return redis.call('exists', KEYS[1], 'undeclared:g')", "1",
                  "undeclared:k") == 1, "declared and undeclared keys in one call")
    check(c.value("GET", "undeclared:kx") == b"5", "the write is there")
    v = c.value("EVAL", "return redis.call('dbsize')", "0")
    check(err(v) and "every shard" in str(v), "whole-keyspace command refused: %r" % v)
    check(c.value("EVAL", "return redis.call('ping')", "0") == b"PONG", "keyless command")


def t_undeclared_atomic(srv):
    """Four clients run read-then-write scripts over twelve undeclared keys (numkeys 0): each run
    reads every key before writing, so a shard another run holds is met before any write and
    the run starts again holding every shard. No update is lost and the pairs never split."""
    keys = []
    for i in range(6):
        keys += ["ua:%d" % i, "ub:%d" % i]
    body = ("for i = 1, #ARGV do redis.call('get', ARGV[i]) end "
            "for i = 1, #ARGV, 2 do local a = tonumber(redis.call('get', ARGV[i]) or 0) "
            "redis.call('set', ARGV[i], a + 1) redis.call('set', ARGV[i + 1], a + 1) end "
            "return 1")
    errors = []

    def worker():
        try:
            d = srv.conn()
            for _ in range(200):
                v = d.value("EVAL", body, "0", *keys)
                if v != 1:
                    errors.append(v)
            d.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ths = [threading.Thread(target=worker) for _ in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(not errors, "errors: %r" % errors[:3])
    c = srv.conn()
    got = [c.value("GET", k) for k in keys]
    check(got == [b"800"] * len(keys), "800 increments on every key: %r" % got)


def t_undeclared_in_multi_atomic(srv):
    """Four clients run transactions of INCR on a declared key around a read-then-write script
    over twelve undeclared keys (numkeys 0). A script that meets a shard held elsewhere before
    anything in its transaction wrote makes the transaction run again holding every shard; no
    transaction fails, no update is lost and the pairs never split."""
    keys = []
    for i in range(6):
        keys += ["mx:a%d" % i, "mx:b%d" % i]
    body = ("for i = 1, #ARGV do redis.call('get', ARGV[i]) end "
            "for i = 1, #ARGV, 2 do local a = tonumber(redis.call('get', ARGV[i]) or 0) "
            "redis.call('set', ARGV[i], a + 1) redis.call('set', ARGV[i + 1], a + 1) end "
            "return 1")
    errors = []

    def worker(n):
        try:
            d = srv.conn()
            for _ in range(150):
                d.value("MULTI")
                d.value("GET", "mx:count%d" % n)
                d.value("EVAL", body, "0", *keys)
                d.value("INCR", "mx:count%d" % n)
                r = d.value("EXEC")
                if not isinstance(r, list) or len(r) != 3 or r[1] != 1:
                    errors.append(r)
            d.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ths = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(not errors, "errors: %r" % errors[:3])
    c = srv.conn()
    got = [c.value("GET", k) for k in keys]
    check(got == [b"600"] * len(keys), "600 increments on every key: %r" % got)
    counts = [c.value("GET", "mx:count%d" % n) for n in range(4)]
    check(counts == [b"150"] * 4, "every transaction ran once: %r" % counts)


def t_undeclared_waits_for_a_holder(srv):
    """A script reaching an undeclared key whose shard another script holds waits for it (or
    runs again holding every shard) and never fails: it sees the other script's write or runs
    before it. Once the holder is past busy-reply-threshold, it gets BUSY like a command on
    that key."""
    c = srv.conn()
    c.value("CONFIG", "SET", "busy-reply-threshold", "600000")
    a, b = find_other_thread_pair(srv)
    spin = "redis.call('set', KEYS[1], 'A') local x = 0 for i = 1, tonumber(ARGV[1]) do " \
           "x = x + i end return 1"
    probes = ["uw:q%d" % i for i in range(32)]
    reader = "for i = 1, #ARGV do redis.call('get', ARGV[i]) end return redis.call('get', 'uw:p')"
    try:
        a.send("EVAL", spin, "1", "uw:p", "3000000")
        v = b.value("EVAL", reader, "0", *probes)
        check(v in (None, b"A"), "before or after the holder, never an error: %r" % v)
        check(parse(a.raw()) == 1, "the holder's reply")
        c.value("CONFIG", "SET", "busy-reply-threshold", "200")
        c.value("DEL", "uw:p")
        a.send("EVAL", spin, "1", "uw:p", "300000000")
        wait_busy(b, "uw:p")
        r = b.call("EVAL", reader, "0", *probes)
        check(r == BUSY, "a busy holder: %r" % r)
        check(parse(a.raw()) == 1, "the holder ran to its end")
        check(b.value("EVAL", reader, "0", *probes) == b"A", "its write, after it")
    finally:
        c.value("CONFIG", "SET", "busy-reply-threshold", "5000")


def t_atomic_counter(srv):
    """Two clients each run 300 read-modify-write scripts on one key: no update is lost."""
    body = "local v = tonumber(redis.call('get', KEYS[1]) or '0') " \
           "for i = 1, 2000 do end redis.call('set', KEYS[1], v + 1) return v + 1"
    errors = []

    def worker():
        try:
            c = srv.conn()
            for _ in range(300):
                v = c.value("EVAL", body, "1", "atomic:ctr")
                if err(v):
                    errors.append(v)
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ths = [threading.Thread(target=worker) for _ in range(3)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(not errors, "errors: %r" % errors[:3])
    check(srv.conn().value("GET", "atomic:ctr") == b"900", "900 increments, no lost update")


def t_multi_key_no_deadlock(srv):
    """Scripts declaring the same keys in opposite orders never deadlock (ascending locks)."""
    body = "redis.call('incr', KEYS[1]) redis.call('incr', KEYS[2]) return 1"
    errors = []

    def worker(keys):
        try:
            c = srv.conn()
            for _ in range(300):
                v = c.value("EVAL", body, "2", *keys)
                if v != 1:
                    errors.append(v)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ths = [threading.Thread(target=worker, args=(k,)) for k in
           (("dl:a", "dl:b"), ("dl:b", "dl:a"), ("dl:a", "dl:b"), ("dl:b", "dl:a"))]
    for t in ths:
        t.start()
    for t in ths:
        t.join(60)
    check(not any(t.is_alive() for t in ths), "a script deadlocked")
    check(not errors, "errors: %r" % errors[:3])
    c = srv.conn()
    check(c.value("GET", "dl:a") == b"1200" and c.value("GET", "dl:b") == b"1200", "1200 each")


def t_one_clock(srv):
    """Every call inside a script sees the same "now"."""
    c = srv.conn()
    v = c.value("EVAL", "local a = redis.call('TIME') for i = 1, 3000000 do end "
                "local b = redis.call('TIME') return {a[1], a[2], b[1], b[2]}", "0")
    check(v[0:2] == v[2:4], "TIME moved inside one script: %r" % v)
    # Two CL.THROTTLE in one script agree on "now": the second sees the first's state exactly.
    v = c.value("EVAL", "local a = redis.call('CL.THROTTLE', KEYS[1], 1, 1, 60) "
                "local b = redis.call('CL.THROTTLE', KEYS[1], 1, 1, 60) "
                "local d = redis.call('CL.THROTTLE', KEYS[1], 1, 1, 60) return {a, b, d}",
                "1", "clock:gcra")
    check(v[0][0] == 0 and v[1][0] == 0 and v[2][0] == 1, "burst 2 then denied: %r" % v)
    # With one "now", the third call's retry is exactly one emission interval (60 s) past the
    # second's TAT minus the burst: the same 60 s every run, whatever the machine's speed.
    check(v[2][3] == 60, "retry after: %r" % v)


def t_limiters_from_scripts(srv):
    c = srv.conn()
    v = c.value("EVAL", "return redis.call('CL.THROTTLE', KEYS[1], 4, 5, 10)", "1", "lim:g")
    check(isinstance(v, list) and v[:3] == [0, 5, 4], "CL.THROTTLE from a script: %r" % v)
    got = [c.value("EVAL", "return redis.call('ISALLOWED', KEYS[1], ARGV[1], ARGV[2], ARGV[3])",
                   "1", "lim:i", "3", "60", "2") for _ in range(4)]
    direct = Conn(srv.port)
    check(got == [1, 1, 0, 0], "ISALLOWED from a script: %r" % got)
    check(direct.value("ISALLOWED", "lim:i", "3", "60", "2") == 0, "same state as direct")
    v = c.value("EVAL", "return redis.call('ISALLOWED', 'lim:u', '3', '60', '2')", "0")
    check(v == 1, "ISALLOWED on an undeclared key: %r" % v)
    v = c.value("EVAL", "redis.call('CL.THROTTLE', KEYS[1], 1, 1, 60) "
                "return redis.pcall('INCR', KEYS[1])", "1", "lim:wt")
    check(err(v) and str(v).startswith("WRONGTYPE"), "WRONGTYPE on a GCRA key: %r" % v)


def cmdstat_calls(c):
    out = {}
    for line in c.value("INFO", "commandstats").decode().split("\r\n"):
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            out[name] = int(rest.split(",")[0].split("=")[1])
    return out


def t_commandstats(srv):
    c = srv.conn()
    before = cmdstat_calls(c)
    c.value("EVAL", "redis.call('incr', KEYS[1]) redis.call('incr', KEYS[1]) "
            "return redis.call('get', KEYS[1])", "1", "cs:1")
    after = cmdstat_calls(c)
    for name, n in (("incr", 2), ("get", 1), ("eval", 1)):
        check(after.get(name, 0) - before.get(name, 0) == n,
              "%s counted %d times: %r -> %r" % (name, n, before.get(name), after.get(name)))
    # A command its script could not run (arity, read-only script, not allowed from scripts)
    # counts as a rejected call of that command, as in Redis 7.0.
    def rejected(name):
        for line in c.value("INFO", "commandstats").decode().split("\r\n"):
            if line.startswith("cmdstat_%s:" % name):
                return int(line.split("rejected_calls=")[1].split(",")[0])
        return 0
    was = (rejected("get"), rejected("set"), rejected("multi"))
    c.value("EVAL", "return redis.pcall('get', KEYS[1], 'extra')", "1", "cs:1")
    c.value("EVAL_RO", "return redis.pcall('set', KEYS[1], 'v')", "1", "cs:1")
    c.value("EVAL", "return redis.pcall('multi')", "0")
    now = (rejected("get"), rejected("set"), rejected("multi"))
    check(tuple(b - a for a, b in zip(was, now)) == (1, 1, 1),
          "rejected calls of get, set, multi: %r -> %r" % (was, now))


def t_redis_log(srv):
    c = srv.conn()
    c.value("EVAL", "redis.log(redis.LOG_WARNING, 'scripted', 'hello', 42)", "0")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(srv.log, errors="replace") as f:
            if "scripted hello 42" in f.read():
                return
        time.sleep(0.05)
    raise AssertionError("redis.log line not in the log file")


def find_other_thread_pair(srv):
    """Two connections served by different I/O threads: while conn a runs a long script, a
    PING on b is answered before a's reply exists. The threshold is raised meanwhile: past it,
    the script's own thread answers its other connections (BUSY) too, and every thread answers
    PING BUSY."""
    setter = srv.conn()
    old = setter.value("CONFIG", "GET", "busy-reply-threshold")[1]
    setter.value("CONFIG", "SET", "busy-reply-threshold", "600000")
    try:
        return find_pair(srv)
    finally:
        setter.value("CONFIG", "SET", "busy-reply-threshold", old)
        setter.close()


def find_pair(srv):
    for attempt in range(6):
        n = 400000 * (4 ** min(attempt, 3))
        a = srv.conn()
        others = [srv.conn() for _ in range(6)]
        a.send("EVAL", SPIN, "0", str(n * 50))
        time.sleep(0.02)
        found = None
        # Every other connection PINGs at once and the first answer is taken: one on a's thread
        # cannot answer before the spin ends, so waiting on them in turn could outlast it.
        for b in others:
            b.send("PING")
        socks = {b.sock: b for b in others}
        r, _, _ = select.select(list(socks), [], [], 10)
        ra, _, _ = select.select([a.sock], [], [], 0)
        if r and not ra:  # answered while a's reply did not exist yet: another thread
            found = socks[r[0]]
            check(found.raw() == b"+PONG\r\n", "PING on another thread")
        a.raw()
        for o in others:
            if o is not found:
                o.close()
        if found is not None:
            return a, found
        a.close()
    raise AssertionError("no two connections on different I/O threads found")


def t_parallel_threads(srv):
    """Two scripts on different keys on different I/O threads run at the same time."""
    a, b = find_other_thread_pair(srv)
    c = srv.conn()
    c.value("CONFIG", "SET", "slowlog-log-slower-than", "0")
    c.value("SLOWLOG", "RESET")
    n = "15000000"  # long enough that the clients' start skew is small beside it
    res = {}

    def run(name, conn, key):
        res[name] = conn.value("EVAL", SPIN + " -- " + name, "1", key, n)

    ta = threading.Thread(target=run, args=("A", a, "par:a"))
    tb = threading.Thread(target=run, args=("B", b, "par:b"))
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    log = c.value("SLOWLOG", "GET", "100")
    c.value("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    iv = {}
    for entry in log:
        args = entry[3]
        if args and args[0].upper() == b"EVAL" and b"-- " in args[1]:
            name = args[1].rsplit(b"-- ", 1)[1].decode()[:1]
            start = int(res[name][0]) * 1000000 + int(res[name][1])
            iv[name] = (start, start + entry[2])
    check(set(iv) == {"A", "B"}, "both scripts in the slow log: %r" % log)
    overlap = min(iv["A"][1], iv["B"][1]) - max(iv["A"][0], iv["B"][0])
    shorter = min(iv["A"][1] - iv["A"][0], iv["B"][1] - iv["B"][0])
    print("    run intervals (us): A %s, B %s, overlap %d us of %d" %
          (iv["A"], iv["B"], overlap, shorter))
    check(overlap > shorter // 4, "scripts on two threads did not overlap")


def t_same_shard_serialises(srv):
    """Two scripts on the same key never overlap, even on two threads. Each increments the key,
    spins, and reads it back: a script that ran while the other held the key would see the
    other's increment. No timing is assumed: the spins only make an overlap likely if the
    shard lock did not keep them apart."""
    a, b = find_other_thread_pair(srv)
    res = {}
    script = ("local mine = redis.call('INCR', KEYS[1]) "
              "local n = tonumber(ARGV[1]) local x = 0 for i = 1, n do x = x + i end "
              "return {mine, tonumber(redis.call('GET', KEYS[1]))}")

    def run(name, conn):
        res[name] = conn.value("EVAL", script, "1", "ser:k", "3000000")

    ths = [threading.Thread(target=run, args=(n, cn)) for n, cn in (("A", a), ("B", b))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(sorted(int(r[0]) for r in res.values()) == [1, 2], "both ran once: %r" % res)
    check(all(int(r[0]) == int(r[1]) for r in res.values()),
          "same-key scripts overlapped (one saw the other's INCR mid-run): %r" % res)


def t_hostile(srv):
    c = srv.conn(timeout=900)  # a 1M-element reply and 256 MB of allocations: slow under ASan
    v = c.value("EVAL", "local s = string.rep('x', 1024*1024*1024) return #s", "0")
    check(err(v) and "not enough memory" in str(v), "memory bomb: %r" % v)
    v = c.value("EVAL", "local t = {} local s = string.rep('y', 1000000) "
                "for i = 1, 1000 do t[i] = s .. i end return #t", "0")
    check(err(v) and "not enough memory" in str(v), "table of strings bomb: %r" % v)
    v = c.value("EVAL", "local function f(n) return f(n+1)+1 end return f(1)", "0")
    check(err(v) and "stack overflow" in str(v), "deep recursion: %r" % v)
    v = c.value("EVAL", "local t = {} t[1] = t return t", "0")
    check(isinstance(v, list), "cyclic table: %r" % type(v))
    d = v
    depth = 0
    while isinstance(d, list):
        d = d[0]
        depth += 1
    check(err(d) and "reached lua stack limit" in str(d), "cyclic table ends in an error")
    v = c.value("EVAL", "local t = {} for i = 1, 1000000 do t[i] = i end return t", "0")
    check(isinstance(v, list) and len(v) == 1000000 and v[-1] == 1000000, "1M-element reply")
    v = c.value("EVAL", "return loadstring(string.dump(function() return 1 end))", "0")
    check(v is None, "bytecode refused")
    v = c.value("EVAL", "\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00", "0")
    check(err(v) and "Error compiling script" in str(v), "bytecode as a script: %r" % v)
    v = c.value("EVAL", "x = 1", "0")
    check(err(v) and "readonly table" in str(v), "global write: %r" % v)
    for bad in ("redis.call('set', KEYS[1], {})", "redis.call('set', KEYS[1], nil)",
                "redis.call(nil)", "redis.call('set', KEYS[1], function() end)"):
        v = c.value("EVAL", bad, "1", "h:1")
        check(err(v) and ("must be strings or integers" in str(v) or
                          "Unknown Redis command" in str(v)), "%s: %r" % (bad, v))
    check(c.value("PING") == b"PONG" and srv.alive(), "server alive")
    # The engine still works after all that.
    check(c.value("EVAL", "return 1 + 1", "0") == 2, "engine usable")


def info_field(c, name):
    for line in c.value("INFO", "memory").decode().split("\r\n"):
        if line.startswith(name + ":"):
            return int(line.split(":")[1])
    raise AssertionError("INFO has no " + name)


def t_many_scripts(srv):
    c = srv.conn(timeout=900)
    c.value("SCRIPT", "FLUSH")
    c.value("EVAL", "return 1", "0")  # this thread's state drops what it held
    base_lua = info_field(c, "used_memory_lua")
    n = 100000
    batch = 1000
    for i in range(0, n, batch):
        for j in range(i, i + batch):
            c.send("SCRIPT", "LOAD", "return %d" % j)
        for j in range(i, i + batch):
            c.raw()
    check(info_field(c, "number_of_cached_scripts") == n, "100k scripts cached")
    lua = info_field(c, "used_memory_lua")
    scripts = info_field(c, "used_memory_scripts_eval")
    used = info_field(c, "used_memory")
    print("    100k scripts: used_memory_lua %d -> %d, used_memory_scripts_eval %d" %
          (base_lua, lua, scripts))
    check(lua > base_lua + n * 100, "compiled scripts show in used_memory_lua")
    check(scripts > n * 40 and used >= lua + scripts, "cache in used memory")
    sha = c.value("SCRIPT", "LOAD", "return 99999")
    check(c.value("EVALSHA", sha, "0") == 99999, "one of them runs")
    check(c.value("SCRIPT", "FLUSH") == b"OK", "flush")
    check(info_field(c, "number_of_cached_scripts") == 0, "flushed")
    c.value("EVAL", "return 1", "0")  # this thread's state drops its functions now
    lua2 = info_field(c, "used_memory_lua")
    print("    after SCRIPT FLUSH: used_memory_lua %d" % lua2)
    check(lua - lua2 > n * 100, "SCRIPT FLUSH frees the compiled scripts")
    check(info_field(c, "used_memory_scripts_eval") < 4096, "and the sources")


def t_maxmemory(srv):
    """Lua memory counts toward maxmemory: with a small limit, loading scripts past it makes
    key creation fail with OOM."""
    c = srv.conn()
    c.value("SCRIPT", "FLUSH")
    c.value("FLUSHALL")
    used = info_field(c, "used_memory")
    c.value("CONFIG", "SET", "maxmemory", str(used + 4 * 1024 * 1024))
    try:
        check(c.value("SET", "mm:before", "1") == b"OK", "room before")
        for j in range(0, 40000, 500):
            for k in range(j, j + 500):
                c.send("SCRIPT", "LOAD", "return 'padding padding padding %d'" % k)
            for k in range(j, j + 500):
                c.raw()
        v = c.value("SET", "mm:after", "1")
        check(err(v) and str(v).startswith("OOM"), "new key refused over maxmemory: %r" % v)
        c.value("SCRIPT", "FLUSH")
        c.value("EVAL", "return 1", "0")
        check(c.value("SET", "mm:after", "1") == b"OK", "room again after SCRIPT FLUSH")
    finally:
        c.value("CONFIG", "SET", "maxmemory", "0")


def t_scripts_shared_across_threads(srv):
    """A script loaded on one connection runs by SHA on every other (any thread)."""
    c = srv.conn()
    sha = c.value("SCRIPT", "LOAD", "return 'shared ' .. ARGV[1]")
    conns = [srv.conn() for _ in range(8)]
    for i, x in enumerate(conns):
        check(x.value("EVALSHA", sha, "0", str(i)) == b"shared %d" % i, "EVALSHA on conn %d" % i)
    c.value("SCRIPT", "FLUSH")
    for x in conns:
        v = x.value("EVALSHA", sha, "0", "1")
        check(err(v) and str(v).startswith("NOSCRIPT"), "flushed for every thread: %r" % v)


def t_multi_exec(srv):
    c = srv.conn()
    c.value("MULTI")
    c.value("EVAL", "return redis.call('incr', KEYS[1])", "1", "mx:1")
    c.value("EVAL", "return redis.call('incr', KEYS[1])", "1", "mx:1")
    v = c.value("EXEC")
    check(v == [1, 2], "EVAL inside MULTI: %r" % v)


BUSY = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
UNKILLABLE = (b"-UNKILLABLE Sorry the script already executed write commands against the dataset. "
              b"You can either wait the script termination or kill the server in a hard way "
              b"using the SHUTDOWN NOSAVE command.\r\n")


def wait_busy(b, key):
    """Polls a command on the script's key until it answers BUSY (bounded)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = b.call("GET", key)
        if r == BUSY:
            return
        time.sleep(0.02)
    raise AssertionError("no BUSY within 60 s (last %r)" % r)


def t_busy_and_kill(srv):
    c = srv.conn()
    check(c.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n",
          "NOTBUSY when idle")
    check(c.value("CONFIG", "SET", "busy-reply-threshold", "200") == b"OK", "set threshold")
    check(c.value("CONFIG", "GET", "lua-time-limit") == [b"lua-time-limit", b"200"], "alias")
    a, b = find_other_thread_pair(srv)
    try:
        body = "while true do end"
        sha = parse(b.call("SCRIPT", "LOAD", body))  # before: BUSY while the script runs
        a.send("EVAL", body, "1", "busy:k")
        wait_busy(b, "busy:k")
        check(b.value("SET", free_key(b, "busy:other"), "1") == b"OK",
              "other keys keep being served")
        check(b.value("EVAL", "return redis.call('incr', KEYS[1])", "1",
                      free_key(b, "busy:other2")) == 1,
              "other scripts keep running")
        # Keyless commands get BUSY as in Redis once the engine's watcher has seen the run pass
        # the threshold (it wakes at most 100 ms late): polled, bounded.
        deadline = time.monotonic() + 60
        while b.call("PING") != BUSY and time.monotonic() < deadline:
            time.sleep(0.01)
        check(b.call("PING") == BUSY, "keyless commands get BUSY, as in Redis")
        check(b.call("SCRIPT", "KILL") == b"+OK\r\n", "SCRIPT KILL")
        check(a.raw() == b"-ERR Script killed by user with SCRIPT KILL... script: %s, on "
              b"@user_script:1.\r\n" % sha, "the killed script's reply")
        check(b.value("GET", "busy:k") is None, "its key is free again")
        # pcall cannot catch the kill.
        a.send("EVAL", "while true do pcall(function() while true do end end) end", "1",
               "busy:k")
        wait_busy(b, "busy:k")
        check(b.call("SCRIPT", "KILL") == b"+OK\r\n", "SCRIPT KILL of a pcall loop")
        check(b"Script killed by user" in a.raw(), "pcall loop killed")
        check(srv.conn().value("PING") == b"PONG", "server alive")
    finally:
        c.value("CONFIG", "SET", "busy-reply-threshold", "5000")


def t_kill_reaches_handlers_and_coroutines(srv):
    """SCRIPT KILL ends a script looping in an xpcall handler (Lua runs a handler with hooks off
    when the error came from the kill's hook) or inside a coroutine (the kill hooks the main
    thread; each coroutine checks for a kill itself)."""
    c = srv.conn()
    check(c.value("CONFIG", "SET", "busy-reply-threshold", "200") == b"OK", "set threshold")
    a, b = find_other_thread_pair(srv)
    bodies = [
        "return xpcall(function() while true do end end, function(e) while true do end end)",
        "return xpcall(function() error('first') end, function(e) while true do end end)",
        "return coroutine.wrap(function() while true do end end)()",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        "return coroutine.wrap(function() return coroutine.wrap(function() "
        "while true do pcall(function() while true do end end) end end)() end)()",
    ]
    try:
        for body in bodies:
            a.send("EVAL", body, "1", "kill:k")
            wait_busy(b, "kill:k")
            check(b.call("SCRIPT", "KILL") == b"+OK\r\n", "SCRIPT KILL of " + body)
            reply = a.raw()
            check(reply.startswith(b"-ERR Script killed by user with SCRIPT KILL..."),
                  "%s: killed, not %r" % (body, reply))
            check(b.value("GET", "kill:k") is None, "its key is free again")
        check(a.value("EVAL", "return coroutine.wrap(function() local n = 0 "
                      "for i = 1, 100000 do n = n + i end return n end)()", "0") == 5000050000,
              "a coroutine runs to its end after the kills")
    finally:
        c.value("CONFIG", "SET", "busy-reply-threshold", "5000")


def t_deep_patterns(srv):
    """Lua 5.1's matcher recurses once per pattern item with no limit: a pattern of 300000
    optional items overflowed the C stack and killed the server (Redis 7.0 dies the same way).
    A pattern that may recurse more than 10000 deep answers Lua 5.2's error instead."""
    c = srv.conn()
    deep = "string.rep('a?', 300000)"
    for call in ("string.find(string.rep('a', 300000), %s .. 'b')" % deep,
                 "string.match(string.rep('a', 300000), %s)" % deep,
                 "string.gsub('x', string.rep('(', 20000), 'y')",
                 "string.gmatch('x', string.rep('a*', 10001))",
                 "(string.rep('a', 50000)):find(string.rep('a-', 20000))"):
        r = c.call("EVAL", "return " + call, "0")
        check(r.startswith(b"-ERR user_script:1: pattern too complex script: "),
              "%s: %r" % (call, r[:200]))
        check(c.value("PING") == b"PONG", "alive after " + call)
    check(c.value("EVAL", "return #string.match(string.rep('a', 10000), "
                  "string.rep('a?', 10000))", "0") == 10000, "10000 deep still matches")
    check(c.value("EVAL", "return string.find(string.rep('a', 30000) .. '?', "
                  "string.rep('?', 1), 30001, true)", "0") == 30001, "plain find")
    check(c.value("EVAL", "return string.find(string.rep('?', 20000), string.rep('?', 20000), "
                  "1, true)", "0") == 1, "a plain find is not bounded")


def free_key(b, prefix):
    """A key whose shard the busy script does not hold (GET answers at once, not BUSY): keys
    hash to shards with a per-process seed, so any fixed name may share the script's shard."""
    for i in range(64):
        k = "%s:%d" % (prefix, i)
        if b.call("GET", k) != BUSY:
            return k
    raise AssertionError("every candidate key answered BUSY")


def t_large_live_heap_with_garbage(srv):
    """A script that keeps about 80 MB of tables alive while it makes 300 MB of garbage runs to
    the end: the collector's pause, wide on small heaps, narrows once the heap passes 8 MB
    (src/script/script_engine.c), so garbage never grows to four times the live data and past the state's
    256 MB (with the wide pause kept, this script answers 'not enough memory')."""
    c = srv.conn()
    body = ("local t = {} for i = 1, 600000 do t[i] = {i, i, i, i} end "
            "local n = 0 for i = 1, 3000000 do local g = {i, i, i, i} n = n + g[1] end "
            "return {#t, n}")
    r = c.value("EVAL", body, "0")
    check(r == [600000, 3000000 * 3000001 // 2], "large live heap: %r" % (r,))
    check(c.value("EVAL", "return 1", "0") == 1, "later scripts run")


def t_cmsgpack_struct_hostile(srv):
    """cmsgpack and struct (Redis 7.0's bundled libraries) under hostile input: lengths and
    counts that claim more than the input holds, nesting past the Lua stack, results past it,
    sizes, offsets and alignments at their limits, output past the Lua state's memory. Each
    call answers an error (or a bounded result); the server stays up, other keys keep their
    values and both libraries work afterwards."""
    c = srv.conn()
    check(c.value("SET", "hostile:keep", "v") == b"OK", "SET")

    def fails(body, text, *args):
        v = c.value("EVAL", body, "0", *args)
        check(err(v) and text in str(v), "%s: %r" % (body[:60], v))

    unpack = "return cmsgpack.unpack(ARGV[1])"
    # counts and lengths claiming up to 2^32-1 on a few bytes: nothing sized from them
    for hdr in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdc\xff\xff",
                b"\xde\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xda\xff\xff", b"\xd9\xff"):
        fails(unpack, "Missing bytes in input.", hdr + b"\x01\x02")
    fails(unpack, "Missing bytes in input.", b"\xdd\xff\xff\xff\xff" + b"\xc0" * 100000)
    # nesting and results past the stack (8000 slots): errors, not a C stack overflow (the
    # inputs are built in the script: they exceed a request's bulk length)
    for rep in ("'\\145', 1000000", "'\\129', 1000000", "'\\129\\161a', 300000",
                "'\\220\\0\\1', 300000"):
        fails("return cmsgpack.unpack(string.rep(%s))" % rep, "stack overflow")
    fails("return cmsgpack.unpack(string.rep('\\1', 1000000))",
          "too many return values at once")
    fails("return cmsgpack.unpack_limit(string.rep('\\1', 1000000), 2^40)", "stack overflow")
    v = c.value("EVAL", "return {cmsgpack.unpack_limit(string.rep('\\1', 1000000), 3, 999997)}",
                "0")
    check(v == [-1, 1, 1, 1], "unpack_limit at the end of a long input: %r" % v)
    for off in ("-1", "2^31", "2^32", "2^53", "-2^63", "1e300", "0/0"):
        v = c.value("EVAL", "return cmsgpack.unpack_one(ARGV[1], %s)" % off, "0", b"\x01")
        check(err(v) and ("Invalid request" in str(v) or "Start offset" in str(v)),
              "unpack_one at %s: %r" % (off, v))
    # 16 million empty tables: past the state's memory, "not enough memory"
    fails("return cmsgpack.unpack('\\221\\0\\255\\255\\255' .. string.rep('\\144', 2^24))",
          "not enough memory")
    # packing: tables nested without end stop at 16, cycles too; too many arguments
    v = c.value("EVAL", "local t = {} t[1] = t t.x = t return #cmsgpack.pack(t)", "0")
    check(isinstance(v, int) and v > 0, "a cycle packs: %r" % v)
    fails("local t = {} for i = 1, 7000 do t[i] = i end return cmsgpack.pack(unpack(t))",
          "Too many arguments for MessagePack pack.")
    # output past the state's memory (256 MB): an error, and the buffer is given back
    fails("local s = string.rep('x', 100 * 2^20) return #cmsgpack.pack(s, s)",
          "not enough memory")
    v = c.value("EVAL", "return #cmsgpack.pack(string.rep('x', 2^20))", "0")
    check(v == 1048581, "pack after the failure: %r" % v)
    # struct: sizes at and past their limits, huge repeat counts, offsets anywhere
    fails("return struct.pack('c2147483647', 'a')", "string too short")
    fails("return struct.pack('i2147483648', 1)", "integral size overflow")
    fails("return struct.pack('!4294967296', 1)", "integral size overflow")
    fails("return struct.unpack('c2147483647', 'abc')", "data string too short")
    fails("return struct.unpack('!1073741824xd', 'abcdefghijkl')", "data string too short")
    fails("return struct.unpack(string.rep('b', 100000), string.rep('a', 100000))",
          "too many results")
    fails("return struct.pack(string.rep('i32', 100000), 1)", "number expected")
    for off in ("-1", "2^53", "2^63", "-2^63", "1e300", "0/0"):
        fails("return struct.unpack('b', 'a', %s)" % off, "data string too short")
    fails("return struct.unpack('bc0', '\\255abc')", "data string too short")
    v = c.value("EVAL", "return struct.size(string.rep('c2147483647', 1000))", "0")
    check(v == 2147483647 * 1000, "size of a huge format: %r" % v)
    v = c.value("EVAL", "return #struct.pack(string.rep('!8bd', 10000), " +
                "unpack((function() local t = {} for i = 1, 7000 do t[i] = 1 end return t "
                "end)()))", "0")
    check(err(v) and "number expected" in str(v), "pack runs out of arguments: %r" % v)
    # the server, the other keys and the libraries are intact
    check(srv.alive() and c.value("PING") == b"PONG", "server alive")
    check(c.value("GET", "hostile:keep") == b"v", "other keys intact")
    v = c.value("EVAL", "return cmsgpack.unpack(cmsgpack.pack({1, {2}, x = 'y'}))[2][1] + "
                "struct.unpack('>i', struct.pack('>i', 40))", "0")
    check(v == 42, "libraries still work: %r" % v)


def t_exec_on_a_busy_shard(srv):
    """EXEC whose queued commands touch a key of a shard a script has held past
    busy-reply-threshold answers as Redis does while busy (EXECABORT ... BUSY, the transaction
    discarded) instead of waiting for the script; one on other keys runs."""
    c = srv.conn()
    check(c.value("CONFIG", "SET", "busy-reply-threshold", "200") == b"OK", "set threshold")
    a, b = find_other_thread_pair(srv)
    try:
        a.send("EVAL", "while true do end", "1", "bx:k")
        wait_busy(b, "bx:k")
        other = free_key(b, "bx:other")
        check(b.value("MULTI") == b"OK", "MULTI")
        check(b.call("SET", other, "1") == b"+QUEUED\r\n", "queued")
        check(b.value("EXEC") == [b"OK"], "EXEC on free shards runs")
        check(b.value("MULTI") == b"OK", "MULTI")
        check(b.call("SET", other, "2") == b"+QUEUED\r\n", "queued")
        check(b.call("SET", "bx:k", "1") == b"+QUEUED\r\n", "queued")
        r = b.call("EXEC")
        check(r == b"-EXECABORT Transaction discarded because of: " + BUSY[1:], "EXEC: %r" % r)
        check(b.call("EXEC") == b"-ERR EXEC without MULTI\r\n", "the transaction is gone")
        check(b.call("SCRIPT", "KILL") == b"+OK\r\n", "SCRIPT KILL")
        check(b"Script killed by user" in a.raw(), "killed")
        check(b.value("GET", "bx:k") is None and b.value("GET", other) == b"1",
              "nothing of the aborted transaction ran")
    finally:
        c.value("CONFIG", "SET", "busy-reply-threshold", "5000")


def t_unkillable_then_shutdown_nosave(_srv):
    """A script that wrote cannot be killed; SHUTDOWN NOSAVE still stops the server. Run with
    the script on each of two connections served by different I/O threads in turn (threads 2),
    so once it runs on thread 0, the one that also watches the listeners and the cron."""
    for swap in (False, True):
        srv = Server("rlimitd", BIN, ["--threads", "2", "--busy-reply-threshold", "200"])
        try:
            a, b = find_other_thread_pair(srv)
            if swap:
                a, b = b, a
            a.send("EVAL", "redis.call('set', KEYS[1], '1') while true do end", "1", "uk:k")
            wait_busy(b, "uk:k")
            check(b.call("SCRIPT", "KILL") == UNKILLABLE, "UNKILLABLE")
            r = b.call("SHUTDOWN")
            check(r == BUSY, "SHUTDOWN (saving) refused while busy: %r" % r)
            b.send("SHUTDOWN", "NOSAVE")
            try:
                b.raw()
            except (ConnectionError, OSError):
                pass
            srv.proc.wait(30)
            check(srv.proc.returncode is not None, "server exited")
        finally:
            report = srv.stop()
        check(not report, "sanitizer report:\n" + report[:4000])


def cpu_ticks(pid):
    """utime + stime of a process, all threads (fields 14 and 15 of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_spinning(srv, ticks=20):
    """Waits (bounded) until the server has burnt `ticks` more CPU ticks: an idle server uses
    next to none, so the script sent just before is running."""
    start = cpu_ticks(srv.pid())
    deadline = time.monotonic() + 60
    while cpu_ticks(srv.pid()) - start < ticks:
        check(time.monotonic() < deadline, "the script never ran")
        time.sleep(0.02)


def t_sigterm_during_script_on_thread0(_srv):
    """With one I/O thread every script runs on thread 0, whose loop cannot read anything
    while the script runs: SIGTERM is answered on a thread of its own. A script that has not
    written is stopped and the server saves and exits; one that wrote runs on after the first
    SIGTERM, and a second one stops it and the server exits without saving."""
    srv = Server("rlimitd", BIN, ["--threads", "1"])
    try:
        a = srv.conn()
        a.send("EVAL", "while true do end", "1", "st:k")
        wait_spinning(srv)
        srv.proc.terminate()
        srv.proc.wait(30)
        check(srv.proc.returncode == 0, "exit status %r" % srv.proc.returncode)
        check(b"Script killed by user" in a.raw(), "the script was stopped")
        check(os.path.exists(os.path.join(srv.dir, "rlimitd.snap")), "final snapshot saved")
    finally:
        report = srv.stop()
    check(not report, "sanitizer report:\n" + report[:4000])

    srv = Server("rlimitd", BIN, ["--threads", "1"])
    try:
        a = srv.conn()
        a.send("EVAL", "redis.call('set', KEYS[1], '1') while true do end", "1", "st:k")
        wait_spinning(srv)
        srv.proc.terminate()
        wait_log(srv, "Received SIGTERM, scheduling shutdown")
        check(srv.alive(), "a script that wrote runs on after the first SIGTERM")
        srv.proc.terminate()
        srv.proc.wait(30)
        check(srv.proc.returncode == 0, "exit status %r" % srv.proc.returncode)
        check(b"Script killed by user" in a.raw(), "the script was stopped")
        check(not os.path.exists(os.path.join(srv.dir, "rlimitd.snap")),
              "no snapshot of a script stopped halfway")
    finally:
        report = srv.stop()
    check(not report, "sanitizer report:\n" + report[:4000])


def wait_log(srv, text):
    deadline = time.monotonic() + 60
    while True:
        with open(srv.log, errors="replace") as f:
            if text in f.read():
                return
        check(time.monotonic() < deadline, "no %r in the log" % text)
        time.sleep(0.02)


def t_flush_during_eval(srv):
    """Four clients run EVAL and EVALSHA while a fifth sends SCRIPT FLUSH in a loop (SCRIPT
    FLUSH between a command's lookup and its run crashed the daemon within a few thousand
    calls). Every call answers its value or NOSCRIPT; SCRIPT KILL answers NOTBUSY or OK."""
    body = "local x = 0 for i = 1, 50 do x = x + i end return x + tonumber(ARGV[1])"
    sha = hashlib.sha1(body.encode()).hexdigest()
    errors = []
    done = threading.Event()

    def worker(i):
        try:
            c = srv.conn()
            for n in range(1500):
                v = c.value("EVALSHA", sha, "0", str(n)) if n % 2 else \
                    c.value("EVAL", body, "0", str(n))
                if err(v) and "NOSCRIPT" in str(v) and n % 2:
                    continue
                if v != 1275 + n:
                    errors.append((i, n, v))
                    return
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def flusher():
        c = srv.conn()
        while not done.is_set():
            v = c.value("SCRIPT", "FLUSH")
            k = c.value("SCRIPT", "KILL")
            if v != b"OK" or not (k == b"OK" or (err(k) and "NOTBUSY" in str(k))):
                errors.append(("flush/kill", v, k))
                return
        c.close()

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    fl = threading.Thread(target=flusher)
    fl.start()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    done.set()
    fl.join()
    check(not errors, "errors: %r" % errors[:3])
    check(srv.alive(), "server alive")


def t_gc_across_flush(srv):
    """CVE-2024-46981: scripts that stop or retune the collector and leave objects with
    metatables behind (weak tables, __index closures, cycles through metatables) while SCRIPT
    FLUSH [ASYNC] resets the engine under them, from two connections that may land on either
    I/O thread. Under ASan a use-after-free in the collector or the reset fails the run. Then
    the collector must run again: a script that makes 320 MB of garbage in 1 MB pieces succeeds
    under the 256 MB state limit only if the settings a flushed script left did not survive."""
    setup = ("collectgarbage('stop') collectgarbage('setpause', %s) collectgarbage('setstepmul', %s) "
             "local weak = setmetatable({}, {__mode = ARGV[1]}) "
             "local mt = {__index = function(t, k) return k end, __mode = 'k'} "
             "for i = 1, 500 do local o = setmetatable({}, mt) o.self = o weak[o] = {o} "
             "weak[i] = setmetatable({i}, {__index = o, __metatable = false}) end "
             "collectgarbage('step', 1) return #string.rep('z', 1000)")
    errors = []

    def runner(i):
        try:
            c = srv.conn()
            for n in range(24):
                body = setup % ((n * 37) % 500, (n * 53) % 1000 + 1)
                v = c.value("EVAL", body, "0", ("k", "v", "kv")[n % 3])
                if v != 1000:
                    errors.append((i, n, v))
                    return
                if n % 4 == i:
                    f = c.value("SCRIPT", "FLUSH", "ASYNC" if n % 8 < 4 else "SYNC")
                    if f != b"OK":
                        errors.append((i, n, "flush", f))
                        return
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "errors: %r" % errors[:3])
    check(srv.alive(), "server alive")
    for _ in range(4):  # enough connections to reach both threads' states
        c = srv.conn(timeout=900)
        check(c.value("EVAL", "collectgarbage('stop') return 1", "0") == 1, "stop")
        check(c.value("SCRIPT", "FLUSH") == b"OK", "flush")
        v = c.value("EVAL", "local n = 0 for i = 1, 320 do n = n + #string.rep('g', 1048576 - i) "
                    "end return n", "0")
        check(v == 320 * 1048576 - 320 * 321 // 2, "garbage after a stopped collector: %r" % v)
        check(c.value("EVAL", "collectgarbage('collect') return collectgarbage('count') < 65536",
                      "0") == 1, "heap back to small after a full collection")
        c.close()
    check(srv.alive(), "server alive")


TESTS = [t_undeclared_keys, t_undeclared_atomic, t_undeclared_in_multi_atomic,
         t_undeclared_waits_for_a_holder,
         t_atomic_counter, t_multi_key_no_deadlock, t_one_clock,
         t_limiters_from_scripts, t_commandstats, t_redis_log, t_parallel_threads,
         t_same_shard_serialises, t_hostile, t_many_scripts, t_maxmemory,
         t_scripts_shared_across_threads, t_multi_exec, t_busy_and_kill,
         t_kill_reaches_handlers_and_coroutines, t_deep_patterns, t_cmsgpack_struct_hostile,
         t_large_live_heap_with_garbage,
         t_exec_on_a_busy_shard,
         t_unkillable_then_shutdown_nosave, t_sigterm_during_script_on_thread0,
         t_flush_during_eval, t_gc_across_flush]


def main():
    global BIN
    sys.setrecursionlimit(20000)  # the cyclic-table reply nests 1000 deep
    BIN = sys.argv[1]
    only = set(sys.argv[2:])
    srv = Server("rlimitd", BIN, ["--threads", "2", "--loglevel", "verbose"])
    passed = failed = 0
    try:
        for t in TESTS:
            if only and t.__name__ not in only:
                continue
            try:
                t(srv)
                passed += 1
                print("ok   %s" % t.__name__)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print("FAIL %s: %s" % (t.__name__, e))
            if not srv.alive():
                print("FAIL server died after %s" % t.__name__)
                failed += 1
                break
    finally:
        report = srv.stop()
    if report:
        failed += 1
        print("FAIL sanitizer report from the server:\n" + report[:4000])
    print("test_scripting: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
