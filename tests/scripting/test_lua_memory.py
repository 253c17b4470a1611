#!/usr/bin/env python3
"""test_lua_memory.py - used_memory_lua after SCRIPT FLUSH and after many scripts (Redis's
"EVAL does not leak in the Lua stack", on every I/O thread).

rlimitd runs one Lua state per I/O thread; SCRIPT FLUSH closes every state no script is running
in, as Redis's flush resets its one VM. So with scripts run before on every thread (big tables,
many compiled scripts), a flush leaves used_memory_lua at 0 until the next script, and 10,000
EVALs on one connection afterwards leave one state's worth (Redis's test: under 100 KB), on
whichever thread that connection lands. Scripts keep running while another connection flushes
in a loop (no error but NOSCRIPT, the daemon alive).

    test_lua_memory.py RLIMITD_BINARY"""
import re
import sys
import threading

from resp import Server

THREADS = 3


def lua_mem(c):
    return int(re.search(rb"used_memory_lua:(\d+)", c.call("INFO", "memory")).group(1))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rl = Server("rlimitd", sys.argv[1], extra=["--threads", str(THREADS)])
    failed = 0
    try:
        r = rl.conn()
        for rnd in range(3):
            # Connections spread over the threads: each leaves a state with garbage and functions.
            conns = [rl.conn() for _ in range(2 * THREADS)]
            for i, c in enumerate(conns):
                for j in range(50):
                    c.call("EVAL", "local t = {} for i = 1, 2000 do t[i] = tostring(i) end "
                           "return #t + %d" % (i * 100 + j), "0")
            before = lua_mem(r)
            if r.call("SCRIPT", "FLUSH") != b"+OK\r\n":
                print("FAIL SCRIPT FLUSH")
                failed += 1
            after = lua_mem(r)
            if after != 0:
                print("FAIL round %d: used_memory_lua %d after SCRIPT FLUSH (%d before), "
                      "expected 0" % (rnd, after, before))
                failed += 1
            r.call("SET", "x", "0")
            d = conns[rnd % len(conns)]
            for _ in range(10000):
                d.send("EVAL", "return redis.call('incr', KEYS[1])", "1", "x")
            for _ in range(10000):
                d.raw()
            used = lua_mem(r)
            if not 0 < used < 100 * 1024:
                print("FAIL round %d: used_memory_lua %d after 10000 EVALs" % (rnd, used))
                failed += 1
            if r.call("GET", "x") != b"$5\r\n10000\r\n":
                print("FAIL round %d: x is not 10000" % rnd)
                failed += 1
            for c in conns:
                c.close()

        # Flushes racing scripts on every thread: each script answers its value or NOSCRIPT.
        stop = threading.Event()
        bad = []

        def flusher():
            c = rl.conn()
            while not stop.is_set():
                c.call("SCRIPT", "FLUSH")
            c.close()

        def runner(k):
            c = rl.conn()
            sha = c.call("SCRIPT", "LOAD", "return %d" % k)[5:45].decode()
            for i in range(1500):
                a = c.call("EVALSHA", sha, "0")
                b = c.call("EVAL", "return %d" % k, "0")
                if a not in (b":%d\r\n" % k,) and not a.startswith(b"-NOSCRIPT"):
                    bad.append(a)
                if b != b":%d\r\n" % k:
                    bad.append(b)
            c.close()

        f = threading.Thread(target=flusher)
        f.start()
        ts = [threading.Thread(target=runner, args=(k,)) for k in range(2 * THREADS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        stop.set()
        f.join()
        if bad:
            print("FAIL scripts racing SCRIPT FLUSH answered %r" % bad[:3])
            failed += 1
    finally:
        if not rl.alive():
            print("FAIL rlimitd died")
            failed += 1
        # A flush last, so states are closed at shutdown: the daemon must exit cleanly.
        if rl.alive():
            rl.conn().call("SCRIPT", "FLUSH")
        report = rl.stop()
        if rl.proc.returncode != 0:
            print("FAIL rlimitd exited with %s at SIGTERM" % rl.proc.returncode)
            failed += 1
        if report:
            print("FAIL sanitizer report:\n" + report[:4000])
            failed += 1
    print("test_lua_memory: %d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
