#!/usr/bin/env python3
"""CONFIG SET and CONFIG GET against Debian's redis-server 7.0 (issue 29).

Every live directive both servers have gets the same hostile values (negative, past int64,
units, booleans, blanks, signs, hex, enum words); the replies must be byte for byte Redis's,
and CONFIG GET must then show the same value on both. The one allowed difference is a narrower
range: where rlimitd's range is smaller than Redis's (RANGES below, docs/CONFIG.md), a value
Redis takes or refuses with its own bounds may be refused by rlimitd, and then only with Redis's
sentence carrying rlimitd's bounds. Then CONFIG SET's multi-pair rules byte for byte (arity,
syntax, unknown, immutable and repeated names in Redis's order, all or nothing), and CONFIG GET
patterns (exact names answered as spelled, globs case-insensitive, duplicates once) compared
on the directives both have. Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, Tally, parse, resolve_rlimitd, start_redis, start_rlimitd  # noqa: E402

tally = Tally()
check = tally.ok


# rlimitd's ranges where they are narrower than Redis 7.0's (docs/CONFIG.md gives the reasons).
RANGES = {
    "maxclients": (1, 1000000),
    "tcp-keepalive": (0, 32767),
    "maxmemory": (0, 9223372036854775807),
    "slowlog-max-len": (0, 1000000),
    "client-query-buffer-limit": (1024, 1073741824),
    "proto-max-bulk-len": (1, 536870912),
    "busy-reply-threshold": (0, 9223372036854),
    "lua-time-limit": (0, 9223372036854),
}
# Shared but not compared here: the password would lock this test's connections out; save and
# appendonly (and databases, immutable in Redis) are rlimitd's fixed pseudo-directives
# (docs/CONFIG.md); client-output-buffer-limit has its own case table (tests/unit/test_conf.c).
SKIP = {"requirepass", "save", "appendonly", "databases", "client-output-buffer-limit"}
VALUES = ["-1", "0", "1", "7", "99999999999999999999", "-9223372036854775809",
          "9223372036854775807", "9223372036854775808", "1gb", "100kb", "1k", "1KB", "2mb",
          "yes", "no", "foo", "", "1.5", " 5", "0x10", "+5", "-0", "010", "warning", "DEBUG",
          "notice ", "1b", "-1mb", "4294967295"]
# Values that differ between the two servers from the start (paths, ports, buffer defaults).
DEFAULTS_DIFFER = {"bind", "port", "dir", "dbfilename", "pidfile", "databases",
                   "client-query-buffer-limit", "proto-max-bulk-len"}


def get(c, name):
    v = parse(c.call("CONFIG", "GET", name))
    return v[1] if v else None


def range_err(name):
    lo, hi = RANGES[name]
    return ("-ERR CONFIG SET failed (possibly related to argument '%s') - argument must be "
            "between %d and %d inclusive\r\n" % (name, lo, hi)).encode()


def values(a, b, shared):
    for name in shared:
        if name in SKIP or "immutable" in a.call("CONFIG", "SET", name, get(a, name)).decode():
            continue
        start_a, start_b = get(a, name), get(b, name)
        for v in VALUES:
            if name == "maxclients" and v == "4294967295":
                continue  # Redis would try to raise its file limit that far
            if name == "proto-max-bulk-len" and v in ("1", "7", "1b", "010"):
                continue  # rlimitd would take it, and then refuse this test's next command
            ra, rb = a.call("CONFIG", "SET", name, v), b.call("CONFIG", "SET", name, v)
            ga, gb = get(a, name), get(b, name)
            what = "CONFIG SET %s %r" % (name, v)
            if ra == rb:
                check(what, ra.startswith(b"-") or ga == gb or name in DEFAULTS_DIFFER,
                      "both OK but CONFIG GET shows %r / %r" % (ga, gb))
            else:
                # Only where the ranges differ, and each side refusing with its own range's
                # words (or rlimitd's rule that a bulk fits in the query buffer).
                own = name in RANGES and ra in (range_err(name), b"+OK\r\n") or (
                    b"must not exceed client-query-buffer-limit" in ra)
                narrower = name in RANGES and own and (
                    rb == b"+OK\r\n" or b"argument must be between" in rb)
                check(what, narrower, "\n  rlimitd %r\n  redis   %r" % (ra, rb))
            a.call("CONFIG", "SET", name, start_a)
            b.call("CONFIG", "SET", name, start_b)


# CONFIG SET's rules between pairs, byte for byte.
MULTI = [
    ["CONFIG", "SET"], ["CONFIG", "SET", "maxclients"], ["CONFIG", "SET", "maxclients", "1", "x"],
    ["CONFIG", "SET", "nosuch", "1"], ["CONFIG", "SET", "NoSuch", "1", "maxclients", "x"],
    ["CONFIG", "SET", "maxclients", "x", "nosuch", "1"],
    ["CONFIG", "SET", "unixsocket", "/x", "nosuch", "1"],
    ["CONFIG", "SET", "nosuch", "1", "unixsocket", "/x"],
    ["CONFIG", "SET", "maxclients", "100", "MAXCLIENTS", "200"],
    ["CONFIG", "SET", "maxclients", "x", "maxclients", "200"],
    ["CONFIG", "SET", "slowlog-max-len", "64", "maxclients", "x"],
    ["CONFIG", "SET", "slowlog-log-slower-than", "-2", "maxclients", "x"],
    ["CONFIG", "SET", "Slowlog-Log-Slower-Than", "-5"],
    ["CONFIG", "SET", "hash-max-ziplist-entries", "-1"],
    ["CONFIG", "SET", "lua-time-limit", "100", "busy-reply-threshold", "200"],
    ["CONFIG", "SET", "loglevel", "loud"], ["CONFIG", "SET", "loglevel", "warning"],
    ["CONFIG", "SET", "unixsocketperm", "700"], ["CONFIG", "SET", "supervised", "no"],
    ["CONFIG", "SET", "logfile", "x"],
    ["CONFIG", "SET", "maxmemory", "1gb", "maxmemory-nosuch", "1"],
    ["CONFIG", "SET", "maxmemory", "-1"], ["CONFIG", "SET", "maxmemory", "0"],
    ["CONFIG", "SET", "slowlog-max-len", "128", "loglevel", "notice", "busy-reply-threshold",
     "5000"],
]
GETS = ["*", "*max*", "MAXCLIENTS", "maxclients MaxClients", "[hz]*-entries", "?ort",
        "lua-time-limit", "LUA-TIME*", "nosuch", "hash-max-*-entries", "maxmemory maxmemory",
        "max* timeout", "max*clients", "slowlog-*", "*-ziplist-*", "list-*", "m\\axclients",
        "[^a-l]*", "[!a-l]*"]


def multi(a, b, shared):
    for cmd in MULTI:
        ra, rb = a.call(*cmd), b.call(*cmd)
        check(" ".join(cmd), ra == rb, "\n  rlimitd %r\n  redis   %r" % (ra, rb))
        for name in ("slowlog-max-len", "maxclients", "busy-reply-threshold", "lua-time-limit",
                     "hash-max-listpack-entries", "maxmemory", "loglevel"):
            check("after %s: %s" % (" ".join(cmd), name), get(a, name) == get(b, name),
                  "%r / %r" % (get(a, name), get(b, name)))
    low = {n.lower() for n in shared}
    for pats in GETS:
        ra = parse(a.call("CONFIG", "GET", *pats.split()))
        rb = parse(b.call("CONFIG", "GET", *pats.split()))
        pa = sorted((k, v) for k, v in zip(ra[::2], ra[1::2]) if k.lower() in low)
        pb = sorted((k, v) for k, v in zip(rb[::2], rb[1::2]) if k.lower() in low)
        na, nb = [k for k, _ in pa], [k for k, _ in pb]
        same_vals = all(x == y for x, y in zip(pa, pb)
                        if x[0].decode().lower() not in DEFAULTS_DIFFER)
        check("CONFIG GET %s" % pats, na == nb and same_vals,
              "\n  rlimitd %r\n  redis   %r" % (pa, pb))


def main():
    rl = start_rlimitd(resolve_rlimitd())
    rd = start_redis()
    try:
        a, b = Resp(rl.port), Resp(rd.port)
        va, vb = parse(a.call("CONFIG", "GET", "*")), parse(b.call("CONFIG", "GET", "*"))
        names_b = set(vb[::2])
        shared = [n.decode() for n in va[::2] if n in names_b]
        check("at least 30 directives shared", len(shared) >= 30, str(shared))
        values(a, b, [s.encode() and s for s in shared])
        multi(a, b, [s.encode() for s in shared])
        a.close()
        b.close()
    finally:
        for s in (rl, rd):
            problem = s.stop()
            if problem:
                check("server exit", False, problem)
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
