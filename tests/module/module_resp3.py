#!/usr/bin/env python3
"""rlimit.so's replies on a RESP3 connection (issue 29): Debian's redis-server with the module
loaded and the daemon get the same limiter commands after HELLO 3, and each reply must have the
same shape on both (the type of every element, nested arrays expanded; the numbers in them
depend on the clock, so they are not compared), with nulls as RESP3's `_`. Errors are compared
byte for byte. Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "diff"))
from common import Resp, Tally, resolve_rlimitd, split, start_redis, start_rlimitd  # noqa: E402

tally = Tally()
check = tally.ok


def shape(raw):
    t = raw[:1]
    if t in (b"*", b"%", b"~"):
        return (t, [shape(i) for i in split(raw)[1]])
    if t == b"-":
        return raw  # errors byte for byte
    return t


CALLS = [
    ["CL.THROTTLE", "m:t", "5", "10", "60"],
    ["CL.THROTTLE", "m:t", "5", "10", "60", "3"],
    ["CL.THROTTLE", "m:t", "0", "1", "60", "100"],
    ["CL.THROTTLE", "m:t", "x", "10", "60"],
    ["GCRA", "m:g", "5", "10", "60"],
    ["GCRA", "m:g", "5", "10", "60", "NUM_REQUESTS", "2"],
    ["GCRA", "m:g", "0", "1", "60", "NUM_REQUESTS", "5"],
    ["THROTTLE.ALL", "2", "m:a", "m:b", "LIMIT", "5", "10", "60", "1", "LIMIT", "3", "3", "60",
     "1"],
    ["THROTTLE.ALL", "1", "m:c", "LIMIT", "0", "1", "60", "5"],
    ["THROTTLE.ALL", "0", "LIMIT", "1", "1", "1", "1"],
    ["LEASE.ACQUIRE", "m:l", "1", "60000"],
    ["LEASE.ACQUIRE", "m:l", "1", "60000"],  # full: a null
    ["LEASE.COUNT", "m:l"],
    ["LEASE.RENEW", "m:l", "999999", "1000"],
    ["LEASE.RELEASE", "m:l", "999999"],
    ["LEASE.ACQUIRE", "m:l", "0", "1"],
    ["LEASE.COUNT", "m:none"],
]


def main():
    module = os.environ.get("RLIMIT_MODULE")
    if not module:
        print("RLIMIT_MODULE is not set (the path of rlimit.so)")
        return 1
    rl = start_rlimitd(resolve_rlimitd())
    # A sanitized module needs its runtimes loaded first in the uninstrumented redis-server, with
    # leak checking off (the server's own allocations are not the module's), as redis_harness.c.
    preload = os.environ.get("RLIMIT_REDIS_PRELOAD", "")
    saved = {k: os.environ.get(k) for k in ("LD_PRELOAD", "ASAN_OPTIONS")}
    if preload:
        os.environ["LD_PRELOAD"] = preload
        os.environ["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    try:
        rd = start_redis(("--loadmodule", module))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        a, b = Resp(rl.port, resp=3), Resp(rd.port, resp=3)
        for cmd in CALLS:
            ra, rb = a.call(*cmd), b.call(*cmd)
            check(" ".join(cmd), shape(ra) == shape(rb),
                  "\n  rlimitd %r\n  module  %r" % (ra, rb))
        # The held lease's id releases it on both (a bulk string in RESP3 too).
        for c in (a, b):
            c.call("DEL", "m:l")
        ida, idb = a.call("LEASE.ACQUIRE", "m:l", "2", "60000"), b.call(
            "LEASE.ACQUIRE", "m:l", "2", "60000")
        check("LEASE.ACQUIRE id is a bulk string", ida[:1] == b"$" and idb[:1] == b"$",
              "%r %r" % (ida, idb))
        for c, raw in ((a, ida), (b, idb)):
            lid = raw.split(b"\r\n")[1]
            check("LEASE.RELEASE of the id", c.call("LEASE.RELEASE", "m:l", lid) == b":1\r\n")
    finally:
        for s in (rl, rd):
            problem = s.stop()
            if problem:
                check("server exit", False, problem)
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
