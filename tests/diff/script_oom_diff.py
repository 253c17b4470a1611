#!/usr/bin/env python3
"""Scripts over maxmemory against Debian's redis-server 7.0.15 (issue 28), byte for byte.

Each server is filled with no limit, then given a maxmemory 100 KB under its own used memory
(noeviction), then the same scripts: a shebang script without allow-oom that may write is
refused up front (7.0.15's plain OOM text), also by EVALSHA (any case of the sha), EVAL_RO and
inside MULTI; one with flags=no-writes or allow-oom runs; a script without a shebang runs but its
first write is refused from inside (with the script's location), unless it wrote before (here a
DEL, which Redis lets through: it cannot stop a script half-way); redis.pcall hands the error
back. Nothing depends on timing. Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, start_redis, start_rlimitd  # noqa: E402

WRITE = "#!lua\nreturn redis.call('set','a','c')"
SCRIPT = [
    ["EVAL", WRITE, "0"],
    ["EVAL", "#!lua\nreturn 1", "0"],
    ["EVAL", "#!lua flags=no-writes\nreturn redis.call('get','a')", "0"],
    ["EVAL", "#!lua flags=allow-oom\nreturn redis.call('set','a','b')", "0"],
    ["EVAL", "return redis.call('get','a')", "0"],
    ["EVAL", "return redis.call('set','a','b')", "0"],
    ["EVAL", "return redis.pcall('set','a','b')", "0"],
    ["EVAL", "redis.call('del','fill:1') return redis.call('set','a','d')", "0"],
    ["EVAL_RO", "#!lua\nreturn redis.call('get','a')", "0"],
    ["EVAL_RO", "return redis.call('get','a')", "0"],
    ["EVALSHA", "SHA", "0"], ["EVALSHA", "SHAUPPER", "0"], ["EVALSHA_RO", "SHA", "0"],
    ["MULTI"], ["EVAL", WRITE, "0"], ["EXEC"],
    ["GET", "a"],
]


def run_side(srv):
    c = Resp(srv.port)
    c.call("SET", "a", "b")
    sha = c.call("SCRIPT", "LOAD", WRITE).split(b"\r\n")[1].decode()
    for i in range(40):
        c.call("SET", "fill:%d" % i, "x" * 50000)
    used = 0
    for line in c.call("INFO", "memory").split(b"\r\n"):
        if line.startswith(b"used_memory:"):
            used = int(line.split(b":")[1])
    c.call("CONFIG", "SET", "maxmemory", str(used - 100000))
    out = []
    for cmd in SCRIPT:
        cmd = [sha if a == "SHA" else sha.upper() if a == "SHAUPPER" else a for a in cmd]
        out.append(c.call(*cmd))
    return out


def main():
    binary = os.environ.get("RLIMITD_BIN") or sys.argv[1]
    passed = failed = 0
    results = []
    for start in (start_redis, lambda: start_rlimitd(binary)):
        srv = start()
        try:
            results.append(run_side(srv))
        finally:
            srv.stop()
    want, got = results
    for cmd, a, b in zip(SCRIPT, got, want):
        if a == b:
            passed += 1
        else:
            failed += 1
            print("FAIL %r: got %r, want %r" % (" ".join(cmd)[:60], a, b))
    oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    if want[0] == oom and want.count(oom) >= 4:
        passed += 1
    else:
        failed += 1
        print("FAIL the fill did not put redis-server over maxmemory: %r" % want[:2])
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
