#!/usr/bin/env python3
"""Every value type of issue 17 survives a snapshot and a restart: strings, counters, hashes
(packed and table-encoded, with and without TTL), lists (one block, a deque of blocks, with a
TTL, binary and integer-looking elements), next to limiter state. The daemon saves, is
killed with SIGKILL, restarts on the same directory, and must answer the same reads. Also checks
that --check-snapshot accepts the file and counts the hashes and lists. Prints "N passed, N failed";
exits 1 on any failure."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from types_diff import Conn, flat, free_port, start, stop  # noqa: E402


def reads(c):
    """The replies that must be the same after the restart (hash pairs sorted: a table's order
    may change when it is rebuilt)."""
    out = {}
    for k in ["s", "n", "f", "hs", "hbig", "hlong", "httl", "gone", "lw", "lbig", "lttl", "lbin"]:
        out["TYPE " + k] = flat(c.run([["TYPE", k]])[0])
        t = out["TYPE " + k]
        if t == b"+hash\r\n":
            pairs = c.run([["HGETALL", k]])[0]
            out["HGETALL " + k] = sorted(zip(pairs[0::2], pairs[1::2]))
            out["HLEN " + k] = flat(c.run([["HLEN", k]])[0])
        elif t == b"+list\r\n":
            out["LRANGE " + k] = flat(c.run([["LRANGE", k, "0", "-1"]])[0])
            out["LINDEX -1 " + k] = flat(c.run([["LINDEX", k, "-1"]])[0])
        elif t == b"+string\r\n":
            out["GET " + k] = flat(c.run([["GET", k]])[0])
        ttl = c.run([["TTL", k]])[0]
        out["has TTL " + k] = int(ttl[1:-2]) > 0
    out["small hash order"] = flat(c.run([["HKEYS", "hs"]])[0])
    # SCAN TYPE list, the whole iteration: exactly the list keys.
    cursor, found = b"0", []
    while True:
        r = c.run([["SCAN", cursor, "TYPE", "list", "COUNT", "7"]])[0]
        cursor = r[0].split(b"\r\n")[1]
        found += [flat(x) for x in r[1]]
        if cursor == b"0":
            break
    out["SCAN TYPE list"] = sorted(found)
    return out


def main():
    rbin = os.environ.get("RLIMITD_BIN")
    if not rbin:
        print("need RLIMITD_BIN")
        return 1
    tmp = tempfile.mkdtemp(prefix="types-persist.")
    port = free_port()
    cmd = [rbin, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save-interval", "0"]
    passed = failed = 0
    p = None
    try:
        p = start(cmd, port)
        c = Conn(port)
        c.run([["SET", "s", "hello"], ["SET", "n", "42"], ["INCRBYFLOAT", "f", "1.5"],
               ["HSET", "hs", "tokens", "9", "ts", "1700000000123", "z", ""],
               ["HSET", "hlong", "f", "x" * 300],
               ["HSET", "httl", "a", "1"], ["EXPIRE", "httl", "100000"],
               ["CL.THROTTLE", "lim", "5", "10", "60"],
               ["SET", "gone", "x", "PX", "1"],
               ["RPUSH", "lttl", "a", "b"], ["EXPIRE", "lttl", "100000"],
               ["RPUSH", "lbin", "", "\x00\r\n\xff", "007", "-0", "9223372036854775807",
                "-9223372036854775808", "9223372036854775808", "x" * 5000, "y" * 239, "12"]])
        for i in range(12):  # the moving-window recipe: ten 13-digit timestamps
            c.run([["LPUSH", "lw", str(1700000000000 + i)], ["LTRIM", "lw", "0", "9"]])
        for i in range(0, 20000, 500):
            c.run([["RPUSH", "lbig"] + ["e%d" % j for j in range(i, i + 500)]])
        c.run([["LPUSH", "lbig", "head"], ["LSET", "lbig", "7000", "mid"],
               ["LINSERT", "lbig", "BEFORE", "e9000", "ins"]])
        for i in range(0, 1000, 100):
            args = ["HSET", "hbig"]
            for j in range(i, i + 100):
                args += ["field%d" % j, "value%d" % j]
            c.run([args])
        # A list that expires for real: after its 50 ms (any slowness only makes the wait
        # longer), every read sees no key and LPUSHX does not bring it back.
        c.run([["RPUSH", "lexp", "a", "b"], ["PEXPIRE", "lexp", "50"]])
        time.sleep(0.3)
        got = [flat(x) for x in c.run([["LLEN", "lexp"], ["TYPE", "lexp"], ["LPUSHX", "lexp", "z"],
                                       ["EXISTS", "lexp"]])]
        if got == [b":0\r\n", b"+none\r\n", b":0\r\n", b":0\r\n"]:
            passed += 1
        else:
            failed += 1
            print("FAIL: an expired list: %r" % got)
        before = reads(c)
        want = sorted(b"$%d\r\n%s\r\n" % (len(k), k) for k in (b"lw", b"lbig", b"lttl", b"lbin"))
        if before["SCAN TYPE list"] == want:
            passed += 1
        else:
            failed += 1
            print("FAIL: SCAN TYPE list gave %r" % before["SCAN TYPE list"])
        if flat(c.run([["SAVE"]])[0]) != b"+OK\r\n":
            print("FAIL: SAVE")
            return 1
        p.send_signal(signal.SIGKILL)
        p.wait()
        check = subprocess.run([rbin, "--check-snapshot", os.path.join(tmp, "rlimitd.snap")],
                               capture_output=True, text=True)
        if check.returncode == 0 and "hashes 4, lists 4, lease sets 0 with 0 leases)" in check.stdout:
            passed += 1
        else:
            failed += 1
            print("FAIL: --check-snapshot: %s %s" % (check.stdout, check.stderr))
        p = start(cmd, port)
        after = reads(Conn(port))
        for k in before:
            if before[k] == after[k]:
                passed += 1
            else:
                failed += 1
                print("FAIL %s: before %r, after %r" % (k, before[k], after[k]))
    finally:
        if p is not None:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
