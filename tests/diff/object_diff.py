#!/usr/bin/env python3
"""OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP against Debian's redis-server 7.0 (issue 28).

The same commands go to both servers and the replies are compared byte for byte: HELP, the
arity and unknown-subcommand errors, missing keys, the encoding Redis reports for integers,
short and long strings, lists, hashes and sorted sets on both sides of the listpack thresholds
(defaults and lowered by CONFIG SET), REFCOUNT of shared integers, FREQ's and IDLETIME's errors
under the policies that do not track them, and FREQ's exact counts under allkeys-lfu with
lfu-decay-time 0 (no decay, so no minute boundary can change them; the first hits of a new key
raise its counter with probability 1), and that OBJECT, TYPE, EXISTS and the TTL family do not
count as accesses (Redis's LOOKUP_NOTOUCH). IDLETIME right after a write is checked to be at most the
seconds measured around the calls, not compared (the two servers' clocks tick apart).
Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, start_redis, start_rlimitd  # noqa: E402

passed = failed = 0


def check(what, got, want):
    global passed, failed
    if got == want:
        passed += 1
    else:
        failed += 1
        print("FAIL %s: got %r, want %r" % (what, got, want))


def script():
    s = [["OBJECT"], ["OBJECT", "HELP"], ["OBJECT", "HELP", "x"], ["OBJECT", "foo"],
         ["OBJECT", "foo", "k"], ["object", "encoding"], ["OBJECT", "ENCODING", "a", "b"],
         ["OBJECT", "REFCOUNT"], ["OBJECT", "IDLETIME"], ["OBJECT", "FREQ"],
         ["OBJECT", "ENCODING", "nokey"], ["OBJECT", "REFCOUNT", "nokey"],
         ["OBJECT", "IDLETIME", "nokey"], ["OBJECT", "FREQ", "nokey"]]
    vals = ["0", "123", "9999", "10000", "-5", "9223372036854775807", "12345678901234567890",
            "007", "1.5", "", "x" * 44, "x" * 45, "y" * 200]
    for i, v in enumerate(vals):
        s += [["SET", "s%d" % i, v], ["OBJECT", "ENCODING", "s%d" % i],
              ["OBJECT", "REFCOUNT", "s%d" % i]]
    s += [["RPUSH", "l", "a"], ["OBJECT", "ENCODING", "l"],
          ["RPUSH", "lbig", *("e%d" % i for i in range(300))], ["OBJECT", "ENCODING", "lbig"]]
    # Hashes: within and past 512 entries and 64-byte values.
    s += [["HSET", "h", "f", "v"], ["OBJECT", "ENCODING", "h"],
          ["HSET", "hv", "f", "v" * 64], ["OBJECT", "ENCODING", "hv"],
          ["HSET", "hv2", "f", "v" * 65], ["OBJECT", "ENCODING", "hv2"],
          ["HSET", "hf", "f" * 65, "v"], ["OBJECT", "ENCODING", "hf"]]
    big = []
    for i in range(513):
        big += ["f%d" % i, "v"]
    # In slices: the shipped proto-max-args is 1024.
    for at in range(0, 1024, 256):
        s.append(["HSET", "h512", *big[at:at + 256]])
        s.append(["HSET", "h513", *big[at:at + 256]])
    s += [["OBJECT", "ENCODING", "h512"], ["HSET", "h513", *big[1024:]],
          ["OBJECT", "ENCODING", "h513"]]
    # Sorted sets: within and past 128 members and 64-byte members.
    zs = []
    for i in range(129):
        zs += [str(i), "m%d" % i]
    s += [["ZADD", "z", "1", "a"], ["OBJECT", "ENCODING", "z"],
          ["ZADD", "z128", *zs[:256]], ["OBJECT", "ENCODING", "z128"],
          ["ZADD", "z129", *zs], ["OBJECT", "ENCODING", "z129"],
          ["ZADD", "zm", "1", "m" * 64], ["OBJECT", "ENCODING", "zm"],
          ["ZADD", "zm2", "1", "m" * 65], ["OBJECT", "ENCODING", "zm2"]]
    # Lowered thresholds apply to values built after.
    s += [["CONFIG", "SET", "zset-max-listpack-entries", "3"],
          ["CONFIG", "SET", "hash-max-listpack-value", "4"],
          ["ZADD", "zlow", "1", "a", "2", "b", "3", "c", "4", "d"], ["OBJECT", "ENCODING", "zlow"],
          ["HSET", "hlow", "f", "12345"], ["OBJECT", "ENCODING", "hlow"],
          ["CONFIG", "SET", "zset-max-listpack-entries", "128"],
          ["CONFIG", "SET", "hash-max-listpack-value", "64"]]
    # The policy decides what IDLETIME and FREQ answer.
    s += [["OBJECT", "FREQ", "s1"],
          ["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"], ["OBJECT", "FREQ", "s1"],
          ["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"], ["OBJECT", "IDLETIME", "s1"],
          ["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"], ["OBJECT", "IDLETIME", "s1"],
          ["CONFIG", "SET", "lfu-decay-time", "0"],
          ["SET", "fresh", "v"], ["OBJECT", "FREQ", "fresh"], ["GET", "fresh"],
          ["OBJECT", "FREQ", "fresh"], ["OBJECT", "ENCODING", "fresh"],
          ["OBJECT", "FREQ", "fresh"], ["OBJECT", "REFCOUNT", "s1"],
          ["CONFIG", "SET", "maxmemory", "1gb"], ["SET", "shared", "5"],
          ["OBJECT", "REFCOUNT", "shared"], ["CONFIG", "SET", "maxmemory", "0"],
          ["CONFIG", "SET", "maxmemory-policy", "noeviction"], ["OBJECT", "FREQ", "fresh"]]
    # Commands that only look at a key (Redis's LOOKUP_NOTOUCH) leave its LFU counter alone: at
    # 6 a counted access would raise it with probability 1/11, so 40 of each would show it.
    s += [["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"], ["SET", "look", "v"],
          ["GET", "look"], ["OBJECT", "FREQ", "look"]]
    for cmd in (["OBJECT", "ENCODING"], ["OBJECT", "REFCOUNT"], ["TYPE"], ["EXISTS"], ["TTL"],
                ["PTTL"], ["EXPIRETIME"], ["PEXPIRETIME"]):
        s += [cmd + ["look"]] * 40 + [["OBJECT", "FREQ", "look"]]
    s += [["CONFIG", "SET", "maxmemory-policy", "noeviction"]]
    return s


def run(c):
    c.call("FLUSHALL")
    return [c.call(*cmd) for cmd in script()]


def idle_side(c):
    """IDLETIME under allkeys-lru right after a write: at most the seconds that passed."""
    c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    t0 = time.monotonic()
    c.call("SET", "idle", "v")
    idle = int(c.call("OBJECT", "IDLETIME", "idle")[1:-2])
    bound = int(time.monotonic() - t0) + 1
    c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
    return idle, bound


def main():
    binary = os.environ.get("RLIMITD_BIN") or sys.argv[1]
    srv = start_redis()
    try:
        c = Resp(srv.port)
        want = run(c)
        ri, rb = idle_side(c)
    finally:
        srv.stop()
    srv = start_rlimitd(binary)
    try:
        c = Resp(srv.port)
        got = run(c)
        gi, gb = idle_side(c)
    finally:
        srv.stop()
    for cmd, a, b in zip(script(), got, want):
        check(" ".join(x[:30] for x in cmd)[:100], a, b)
    check("redis IDLETIME after a write within the time measured", 0 <= ri <= rb, True)
    check("rlimitd IDLETIME after a write within the time measured", 0 <= gi <= gb, True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
