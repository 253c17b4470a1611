#!/usr/bin/env python3
"""Issue 28's first paragraph, replayed on Debian's redis-server 7.0 and on rlimitd.

With `CONFIG SET maxmemory 20mb`, the server filled with 1 KB strings until a new key is
refused, and the limit then lowered to 19mb (fill() says why), each write that grows memory must be refused with Redis's exact text, as many times as
Redis refuses it: SET of an existing key to 400 KB, 19 APPENDs of 400 KB, HSET of 500 new fields
into an existing hash, a MULTI queuing 400 SETs of 500 KB (EXEC answers EXECABORT and none ran),
and a MULTI of 40 MSETs (the same). Every reply is compared byte for byte, and the replies of
each scenario are counted (how many -OOM, how many accepted) for the failure message. Reads and
a DEL still work, and after the DEL of enough fill keys writes are accepted again. Then, with
200 KB left under the limit, a 400 KB SET or APPEND is refused (the command's own bytes count:
Redis's argv, rlimitd's connection query buffer). (What fits after that differs by design: Redis keeps the 400 KB
query buffer allocated, and counted, for a while.) Nothing here
depends on timing. Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, Tally, start_redis, start_rlimitd  # noqa: E402

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
tally = Tally()
V400K = "a" * 400 * 1024
V500K = "b" * 500 * 1024


def fill(c):
    """Existing keys of the scenarios, then 1 KB strings until one is refused. Returns how
    many went in (differs between the servers: their per-key costs differ)."""
    c.call("SET", "s", "small")
    c.call("SET", "ap", "start")
    c.call("HSET", "h", "f0", "v")
    c.call("CONFIG", "SET", "maxmemory", "20mb")
    n = 0
    while True:
        batch = [["SET", "fill:%d" % (n + i), "x" * 1024] for i in range(200)]
        c.send(batch)
        replies = [c.read() for _ in batch]
        if OOM in replies:
            # Full, then a limit 1 MB lower: over it by far more than any one write, on both.
            # (At the exact edge the servers differ by design: Redis keeps a pipelining
            # client's query buffer allocated, counted in its used memory; an idle rlimitd
            # connection holds none, so a write that fits the last few bytes goes in.)
            c.call("CONFIG", "SET", "maxmemory", "19mb")
            return n + replies.index(OOM)
        n += len(batch)
        if n > 100000:
            raise RuntimeError("never filled")


def scenarios(c):
    out = {}
    out["SET existing key to 400 KB"] = [c.call("SET", "s", V400K)]
    out["19 APPENDs of 400 KB"] = [c.call("APPEND", "ap", V400K) for _ in range(19)]
    out["HSET of 500 new fields"] = [c.call("HSET", "h", "f%d" % i, "v%d" % i)
                                     for i in range(1, 501)]
    r = [c.call("MULTI")] + [c.call("SET", "m:%d" % i, V500K) for i in range(400)]
    r += [c.call("EXEC"), c.call("EXISTS", "m:0")]
    out["MULTI of 400 SETs of 500 KB"] = r
    r = [c.call("MULTI")]
    r += [c.call("MSET", "ms:%d:a" % i, "1", "ms:%d:b" % i, "2") for i in range(40)]
    r += [c.call("EXEC"), c.call("EXISTS", "ms:0:a", "ms:39:b")]
    out["MULTI of 40 MSETs"] = r
    out["reads and DEL still served"] = [c.call("STRLEN", "s"), c.call("HLEN", "h"),
                                         *[c.call("DEL", *["fill:%d" % i for i in range(j, j + 500)])
                                           for j in range(0, 3000, 500)]]
    out["writes accepted after the DEL"] = [c.call("SET", "s", "again"),
                                            c.call("HSET", "h", "f1", "v1")]
    # Just under the limit: a big command's own bytes count, as Redis's argv does (rlimitd: a
    # command over the 64 KB shared read buffer arrives in the connection's own query buffer,
    # which its clients_mem counts).
    c.call("CONFIG", "SET", "maxmemory", "0")
    c.call("SET", "s", "small")
    used = int(c.call("INFO", "memory").split(b"used_memory:")[1].split(b"\r\n")[0])
    c.call("CONFIG", "SET", "maxmemory", str(used + 200 * 1024))
    out["with 200 KB left: SET and APPEND of 400 KB refused"] = [
        c.call("SET", "s", V400K), c.call("APPEND", "s", V400K), c.call("STRLEN", "s")]
    return out


def run_side(srv):
    try:
        c = Resp(srv.port)
        filled = fill(c)
        out = scenarios(c)
        c.close()
        return filled, out
    finally:
        problem = srv.stop()
        if problem:
            tally.check("%s stopped cleanly" % srv.name, problem, None)


def counts(replies):
    return "%d refused, %d other" % (replies.count(OOM), len(replies) - replies.count(OOM))


def main():
    binary = os.environ.get("RLIMITD_BIN") or sys.argv[1]
    n_redis, want = run_side(start_redis())
    n_rlimitd, got = run_side(start_rlimitd(binary))
    print("filled with %d keys (redis-server), %d (rlimitd)" % (n_redis, n_rlimitd))
    for name in want:
        a, b = got[name], want[name]
        if a == b:
            tally.check(name, True, True)
        else:
            first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) \
                if any(x != y for x, y in zip(a, b)) else min(len(a), len(b))
            tally.check("%s (rlimitd %s, redis %s; first difference at reply %d)"
                        % (name, counts(a), counts(b), first),
                        a[first:first + 1], b[first:first + 1])
    tally.check("redis refused the APPENDs and HSETs (the fill worked)",
                (want["19 APPENDs of 400 KB"].count(OOM), want["HSET of 500 new fields"].count(OOM)),
                (19, 500))
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
