#!/usr/bin/env python3
"""WATCH across clients (issue 17): scenarios of two connections, each run on rlimitd and on
redis-server 7.0, where every reply must be equal byte for byte; then the rlimitd-only writers
(CL.THROTTLE, GCRA, ISALLOWED) must abort a transaction watching their key as any write does.
With --resp3 every connection opens with HELLO 3 (an aborted EXEC is then RESP3's null).
Prints one line per failure and "N passed, N failed"; exits 1 on any failure."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from types_diff import Conn, flat, free_port, start, stop  # noqa: E402

# Each scenario: a list of (client, command) steps; client 0 watches, client 1 interferes.
FUTURE_MS = str(int(time.time() * 1000) + 10 ** 9)
SCENARIOS = {
    "write by another client aborts": [
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (1, ["SET", "w", "2"]), (0, ["MULTI"]),
        (0, ["INCR", "w"]), (0, ["EXEC"]), (0, ["GET", "w"])],
    "a write to another key does not": [
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (1, ["SET", "other", "2"]),
        (1, ["SET", "w2", "2"]), (0, ["MULTI"]), (0, ["INCR", "w"]), (0, ["EXEC"])],
    "creating an absent watched key aborts": [
        (0, ["WATCH", "new"]), (1, ["SET", "new", "x"]), (0, ["MULTI"]), (0, ["GET", "new"]),
        (0, ["EXEC"])],
    "a failed SET NX is no write": [
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (1, ["SET", "w", "9", "NX"]),
        (1, ["EXPIRE", "w", "100", "XX"]), (0, ["MULTI"]), (0, ["GET", "w"]), (0, ["EXEC"])],
    "DEL, EXPIRE, PERSIST, RENAME onto it, FLUSHALL abort": [
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (1, ["DEL", "w"]), (0, ["MULTI"]),
        (0, ["EXEC"]),
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (1, ["EXPIRE", "w", "1000"]),
        (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "w"]), (1, ["PERSIST", "w"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (1, ["SET", "src", "s"]), (0, ["WATCH", "w"]), (1, ["RENAME", "src", "w"]),
        (0, ["MULTI"]), (0, ["EXEC"]), (0, ["GET", "w"]),
        (0, ["WATCH", "w"]), (1, ["FLUSHALL"]), (0, ["MULTI"]), (0, ["EXEC"])],
    "the watch ends at EXEC, DISCARD and UNWATCH": [
        (0, ["SET", "w", "1"]), (0, ["WATCH", "w"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (1, ["SET", "w", "2"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "w"]), (0, ["MULTI"]), (0, ["DISCARD"]), (1, ["SET", "w", "3"]),
        (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "w"]), (0, ["UNWATCH"]), (1, ["SET", "w", "4"]), (0, ["MULTI"]),
        (0, ["EXEC"])],
    "an expiry after WATCH aborts": [
        (0, ["SET", "w", "1", "PXAT", FUTURE_MS]), (0, ["WATCH", "w"]),
        (1, ["PEXPIREAT", "w", "1"]), (0, ["MULTI"]), (0, ["EXEC"])],
    "WATCH inside MULTI is refused, the transaction goes on": [
        (0, ["MULTI"]), (0, ["WATCH", "w"]), (0, ["SET", "w", "5"]), (0, ["EXEC"])],
    "MSET across shards touching a watched key aborts": [
        (0, ["WATCH", "a1", "b2", "c3"]), (1, ["MSET", "x1", "1", "y2", "2", "c3", "3"]),
        (0, ["MULTI"]), (0, ["MGET", "a1", "b2", "c3"]), (0, ["EXEC"])],
    "a sorted-set write that changes nothing is no write": [
        (0, ["ZADD", "z", "1", "a", "2", "b"]), (0, ["WATCH", "z"]),
        (1, ["ZADD", "z", "1", "a"]), (1, ["ZADD", "z", "XX", "5", "nope"]),
        (1, ["ZADD", "z", "NX", "9", "a"]), (1, ["ZINCRBY", "z", "0", "a"]),
        (1, ["ZREM", "z", "nope"]), (1, ["ZREMRANGEBYSCORE", "z", "10", "20"]),
        (1, ["ZREMRANGEBYRANK", "z", "5", "9"]), (1, ["ZREMRANGEBYLEX", "z", "[x", "[y"]),
        (1, ["ZPOPMIN", "z", "0"]), (0, ["MULTI"]), (0, ["ZCARD", "z"]), (0, ["EXEC"])],
    "each sorted-set write that changes the set aborts": [
        (0, ["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]),
        (0, ["WATCH", "z"]), (1, ["ZADD", "z", "7", "a"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "z"]), (1, ["ZINCRBY", "z", "1", "b"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "z"]), (1, ["ZREM", "z", "a"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "z"]), (1, ["ZREMRANGEBYSCORE", "z", "0", "3"]), (0, ["MULTI"]),
        (0, ["EXEC"]),
        (0, ["WATCH", "z"]), (1, ["ZPOPMAX", "z"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "z"]), (1, ["ZPOPMIN", "z"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["EXISTS", "z"])],
    "list writes abort, list no-ops do not": [
        (0, ["RPUSH", "wl", "a", "b", "c"]), (0, ["WATCH", "wl"]), (1, ["LPUSH", "wl", "x"]),
        (0, ["MULTI"]), (0, ["LRANGE", "wl", "0", "-1"]), (0, ["EXEC"]),
        (0, ["WATCH", "wl"]), (1, ["LTRIM", "wl", "0", "-1"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "wl"]), (1, ["LREM", "wl", "0", "nope"]), (1, ["LPOP", "wl", "0"]),
        (1, ["LINSERT", "wl", "BEFORE", "nope", "y"]), (1, ["LPUSHX", "nol", "y"]),
        (0, ["MULTI"]), (0, ["LLEN", "wl"]), (0, ["EXEC"]),
        (0, ["WATCH", "wl"]), (1, ["LSET", "wl", "0", "x"]), (0, ["MULTI"]), (0, ["EXEC"]),
        (0, ["WATCH", "wl"]), (1, ["RPOP", "wl", "9"]), (0, ["MULTI"]), (0, ["EXISTS", "wl"]),
        (0, ["EXEC"])],
    "lists in MULTI and in Lua scripts": [
        (0, ["MULTI"]), (0, ["RPUSH", "ml", "1", "2", "3"]), (0, ["LPOP", "ml", "2"]),
        (0, ["LPUSH", "ms", "x"]), (0, ["SET", "ms", "v"]), (0, ["LPUSH", "ms", "y"]),
        (0, ["EXEC"]),
        (0, ["EVAL", "redis.call('LPUSH', KEYS[1], ARGV[1]); redis.call('LTRIM', KEYS[1], 0, 2);"
             " return redis.call('LRANGE', KEYS[1], 0, -1)", "1", "sl", "1700000000001"]),
        (0, ["EVAL", "for i = 1, 5 do redis.call('RPUSH', KEYS[1], i) end;"
             " return {redis.call('LPOS', KEYS[1], '3'), redis.call('LINDEX', KEYS[1], -1),"
             " redis.call('LLEN', KEYS[1]), redis.call('TYPE', KEYS[1])}", "1", "sl"]),
        (0, ["EVAL", "return redis.pcall('LPUSH', KEYS[1], 'x')", "1", "ms"]),
        (0, ["EVAL", "return redis.call('LPOP', KEYS[1], 100)", "1", "sl"]),
        (0, ["EVAL", "return redis.call('LPOP', KEYS[1])", "1", "sl"])],
}

# rlimitd only: limiter commands are writes to their key like any other.
LIMITERS = [
    ["CL.THROTTLE", "lim", "5", "10", "60"],
    ["GCRA", "lim", "5", "10", "60"],
]


RESP = 3 if "--resp3" in sys.argv[1:] else 2
NULL_ARRAY = b"_\r\n" if RESP == 3 else b"*-1\r\n"
NULL = b"_\r\n" if RESP == 3 else b"$-1\r\n"


def run_scenario(port, steps):
    conns = [Conn(port, RESP), Conn(port, RESP)]
    conns[0].run([["FLUSHALL"]])
    out = [flat(conns[c].run([cmd])[0]) for c, cmd in steps]
    for c in conns:
        c.sock.close()
    return out


def main():
    rbin = os.environ.get("RLIMITD_BIN")
    redis = shutil.which("redis-server")
    if not rbin or not redis:
        print("need RLIMITD_BIN and redis-server")
        return 1
    tmp = tempfile.mkdtemp(prefix="watch-test.")
    rport, oport = free_port(), free_port()
    procs = []
    passed = failed = 0
    try:
        procs.append(start([rbin, "--port", str(rport), "--bind", "127.0.0.1", "--dir", tmp,
                            "--save-interval", "0"], rport))
        procs.append(start([redis, "--port", str(oport), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", tmp], oport))
        for name, steps in SCENARIOS.items():
            got, want = run_scenario(rport, steps), run_scenario(oport, steps)
            if got == want and want[-1] is not None:
                passed += 1
            else:
                failed += 1
                for (c, cmd), x, y in zip(steps, got, want):
                    if x != y:
                        print("FAIL %s: client %d %s: rlimitd %r, redis %r" %
                              (name, c, " ".join(cmd), x, y))
                        break
        for cmd in LIMITERS:
            steps = [(0, ["SET", "lim", "0"]), (0, ["DEL", "lim"]), (0, ["WATCH", "lim"]),
                     (1, cmd), (0, ["MULTI"]), (0, ["GET", "lim"]), (0, ["EXEC"])]
            got = run_scenario(rport, steps)
            if got[-1] == NULL_ARRAY:
                passed += 1
            else:
                failed += 1
                print("FAIL %s on a watched key: EXEC answered %r" % (cmd[0], got[-1]))
        # ... and a limiter call on another key leaves the transaction alone.
        steps = [(0, ["WATCH", "lim"]), (1, ["CL.THROTTLE", "other", "5", "10", "60"]),
                 (0, ["MULTI"]), (0, ["GET", "lim"]), (0, ["EXEC"])]
        got = run_scenario(rport, steps)
        if got[-1] == b"*1\r\n" + NULL:
            passed += 1
        else:
            failed += 1
            print("FAIL CL.THROTTLE on another key: EXEC answered %r" % got[-1])
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    print("watch (RESP%d): %d passed, %d failed" % (RESP, passed, failed))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
