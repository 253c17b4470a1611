#!/usr/bin/env python3
"""MEMORY against Debian's redis-server 7.0, on RESP2 and RESP3 connections (issue 29).

The byte counts differ legitimately (rlimitd measures its own entries, Redis its own objects),
so what is compared is everything else: errors, HELP, PURGE and a missing key's null byte for
byte; MEMORY STATS' field names, their order, the type of each value (integer, double, nested
map) and its shape (flat array in RESP2, map in RESP3); DOCTOR's and MALLOC-STATS' reply type
(bulk string in RESP2, verbatim "txt" in RESP3); MEMORY USAGE an integer on both. Then rlimitd's
numbers must mean something: for every value type MEMORY USAGE grows with the value's size (by
at least the bytes added), shrinks back when the value is replaced by a small one, SAMPLES does
not change it, and MEMORY STATS' keys.count and dataset.bytes follow the keys written.
Prints "N passed, N failed"; exits 1 on any failure. Nothing depends on timing."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, Tally, parse, resolve_rlimitd, split, start_redis, start_rlimitd  # noqa: E402

tally = Tally()
check = tally.ok


# Compared byte for byte: every error path, HELP, PURGE, a missing key.
EXACT = [
    ["MEMORY"], ["MEMORY", "USAGE"], ["MEMORY", "USAGE", "k", "b"],
    ["MEMORY", "USAGE", "k", "SAMPLES"], ["MEMORY", "USAGE", "k", "SAMPLES", "-1"],
    ["MEMORY", "USAGE", "k", "SAMPLES", "x"], ["MEMORY", "USAGE", "k", "SAMPLES", "1", "x"],
    ["MEMORY", "USAGE", "k", "samples", "99999999999999999999"],
    ["MEMORY", "USAGE", "nokey"], ["MEMORY", "USAGE", "nokey", "SAMPLES", "0"],
    ["MEMORY", "USAGE", "nokey", "SAMPLES", "x"], ["MEMORY", "USAGE", "nokey", "foo"],
    ["MEMORY", "foo"], ["MEMORY", "STATS", "x"], ["MEMORY", "DOCTOR", "x"],
    ["MEMORY", "MALLOC-STATS", "x"], ["MEMORY", "PURGE", "x"], ["MEMORY", "HELP", "x"],
    ["MEMORY", "HELP"], ["memory", "help"], ["MEMORY", "PURGE"],
]


def shape(raw):
    """A reply's type skeleton: the type byte of each element, nested aggregates expanded."""
    t = raw[:1]
    if t in (b"*", b"%", b"~"):
        head, items = split(raw)
        return (t, [shape(i) for i in items])
    if t == b"=":
        return (t, raw[raw.index(b"\r\n") + 2:][:4])  # the "txt:" format
    return t


def stats_names(raw):
    v = parse(raw)
    return [v[i] for i in range(0, len(v), 2)]


def same_everywhere(a, b, resp):
    for cmd in EXACT:
        ra, rb = a.call(*cmd), b.call(*cmd)
        check("RESP%d %s" % (resp, " ".join(cmd)), ra == rb, "\n  rlimitd %r\n  redis   %r"
              % (ra, rb))
    for c in (a, b):
        c.call("SET", "k", "v")
    for cmd in (["MEMORY", "USAGE", "k"], ["MEMORY", "USAGE", "k", "SAMPLES", "0"]):
        ra, rb = a.call(*cmd), b.call(*cmd)
        check("RESP%d %s is an integer" % (resp, " ".join(cmd)),
              ra[:1] == b":" and rb[:1] == b":", "%r %r" % (ra, rb))
    # With and without a key in the database (Redis lists db.0 only when it holds keys).
    for phase in ("with keys", "empty"):
        ra, rb = a.call("MEMORY", "STATS"), b.call("MEMORY", "STATS")
        check("RESP%d MEMORY STATS (%s) names" % (resp, phase),
              stats_names(ra) == stats_names(rb), "\n  rlimitd %r\n  redis   %r"
              % (stats_names(ra), stats_names(rb)))
        check("RESP%d MEMORY STATS (%s) types" % (resp, phase), shape(ra) == shape(rb),
              "\n  rlimitd %r\n  redis   %r" % (shape(ra), shape(rb)))
        for c in (a, b):
            c.call("FLUSHALL")
    for sub in ("DOCTOR", "MALLOC-STATS"):
        ra, rb = a.call("MEMORY", sub), b.call("MEMORY", sub)
        check("RESP%d MEMORY %s type" % (resp, sub), shape(ra) == shape(rb) and
              len(parse(ra)) > 0, "%r %r" % (ra[:40], rb[:40]))


def usage(c, key, *extra):
    return parse(c.call("MEMORY", "USAGE", key, *extra))


def stat(c, name):
    v = parse(c.call("MEMORY", "STATS"))
    return v[v.index(name.encode()) + 1]


# Each type written small, then grown by `grow` bytes of payload; name, writer(size). The string's
# SET replaces its 1-byte value, so it gains GROW - 1 bytes: exactly that where the allocator sizes
# blocks exactly (ASan), more where it rounds up.
GROW = 200000
def chunked(c, cmd, key, items, per):
    """cmd key items... in calls of at most `per` items (under proto-max-args)."""
    for i in range(0, len(items), per):
        c.call(cmd, key, *items[i:i + per])


TYPES = [
    ("string", lambda c, n: c.call("SET", "m:string", "x" * n)),
    ("hash", lambda c, n: chunked(c, "HSET", "m:hash", [x for i in range(max(1, n // 100))
                                                        for x in ("f%d" % i, "v" * 100)], 500)),
    ("list", lambda c, n: chunked(c, "RPUSH", "m:list", ["e" * 100] * max(1, n // 100), 500)),
    # 60-byte members: the small zset is packed (Redis's 64-byte listpack limit), so its size is
    # fixed; a one-member skiplist's node has a random height, and its size with it.
    ("zset", lambda c, n: chunked(c, "ZADD", "m:zset", [x for i in range(max(1, n // 64))
                                                        for x in (i, "m%059d" % i)], 500)),
]


def growth(a):
    for name, write in TYPES:
        key = "m:" + name
        a.call("DEL", key)
        write(a, 1)
        small = usage(a, key)
        write(a, GROW)
        big = usage(a, key)
        check("MEMORY USAGE %s grows with its value (%s -> %s bytes)" % (name, small, big),
              isinstance(small, int) and isinstance(big, int) and big - small >= GROW - 1,
              "added at least %d bytes of payload" % (GROW - 1))
        check("MEMORY USAGE %s SAMPLES leaves it alone" % name,
              usage(a, key, "SAMPLES", "1") == big and usage(a, key, "SAMPLES", "0") == big)
        a.call("DEL", key)
        write(a, 1)
        again = usage(a, key)
        # Within 32 bytes of the first small value: the value's blocks are counted as the
        # allocator sized them, and a block carved from memory the big value gave back may be
        # up to a chunk larger than a fresh one (glibc does not split off a remainder under 32).
        check("MEMORY USAGE %s back to small (%s after %s, first %s)" % (name, again, big, small),
              isinstance(again, int) and abs(again - small) <= 32)
        a.call("DEL", key)
        check("MEMORY USAGE %s deleted is null" % name, usage(a, key) is None)
    # A limiter key is a key like the others.
    a.call("CL.THROTTLE", "m:gcra", "10", "20", "60")
    g = usage(a, "m:gcra")
    check("MEMORY USAGE of a CL.THROTTLE key is a small positive integer (%s)" % g,
          isinstance(g, int) and 0 < g < 256)
    a.call("FLUSHALL")
    before = stat(a, "dataset.bytes")
    for i in range(1000):
        a.call("SET", "m:s%d" % i, "y" * 1000)
    after = stat(a, "dataset.bytes")
    check("MEMORY STATS keys.count follows the keys", stat(a, "keys.count") == 1000)
    check("MEMORY STATS dataset.bytes grows by at least the payload (%d -> %d)"
          % (before, after), after - before >= 1000 * 1000)
    check("MEMORY STATS peak.allocated >= total.allocated",
          stat(a, "peak.allocated") >= stat(a, "total.allocated"))


def main():
    rl = start_rlimitd(resolve_rlimitd())
    rd = start_redis()
    try:
        for resp in (2, 3):
            a, b = Resp(rl.port, resp=resp), Resp(rd.port, resp=resp)
            same_everywhere(a, b, resp)
            a.close()
            b.close()
        growth(Resp(rl.port))
    finally:
        for s in (rl, rd):
            problem = s.stop()
            if problem:
                check("server exit", False, problem)
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
