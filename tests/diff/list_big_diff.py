#!/usr/bin/env python3
"""Differential test of lists far past one block (issue 17): a 30,000-element list (about 300
blocks in rlimitd's deque, integers, 13-digit timestamps, 300- and 5000-byte strings mixed) goes
through a seeded stream of LINSERT, LSET, LREM, LRANGE, LINDEX, LPOS with RANK/COUNT/MAXLEN,
LPOP/RPOP with counts, bulk LPUSH/RPUSH and LTRIM at random positions, on rlimitd and on
redis-server 7.0; every reply is compared byte for byte, and the whole list every 2,000 commands
and at the end. On the first difference it prints the seed, the command number, the command and
both replies. Prints "N passed, N failed"; exits 1 on a difference.

Usage: list_big_diff.py [--seed N] [--count N] [--resp3]; RLIMITD_BIN names the daemon. With
--resp3 both connections speak RESP3 (nulls are _)."""
import argparse
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from types_diff import Conn, flat, free_port, show, start, stop  # noqa: E402

SIZE = 30000


def element(r):
    x = r.random()
    if x < 0.4:
        return str(r.randint(0, 50))
    if x < 0.6:
        return str(1700000000000 + r.randint(0, 50))
    if x < 0.65:
        return "z" * r.choice([300, 5000])
    return "e%d" % r.randint(0, 50)


def command(r):
    n = SIZE
    x = r.random()
    if x < 0.2:
        return ["LINSERT", "L", r.choice(["BEFORE", "AFTER"]), element(r), element(r)]
    if x < 0.35:
        return ["LSET", "L", str(r.randint(-n, n)), element(r)]
    if x < 0.45:
        return ["LREM", "L", str(r.randint(-3, 3)), element(r)]
    if x < 0.6:
        i = r.randint(-n, n)
        return ["LRANGE", "L", str(i), str(i + r.randint(0, 50))]
    if x < 0.7:
        return ["LINDEX", "L", str(r.randint(-n, n))]
    if x < 0.8:
        return ["LPOS", "L", element(r), "RANK", str(r.choice([1, 2, -1, -3])), "COUNT",
                str(r.randint(0, 3)), "MAXLEN", str(r.randint(0, 20000))]
    if x < 0.85:
        return [r.choice(["LPOP", "RPOP"]), "L", str(r.randint(0, 200))]
    if x < 0.95:
        return [r.choice(["LPUSH", "RPUSH"]), "L"] + [element(r) for _ in range(r.randint(1, 200))]
    return ["LTRIM", "L", str(r.randint(0, 50)), str(r.randint(-50, -1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DIFF_SEED", "0")) or
                    random.randrange(1, 2 ** 31))
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--resp3", action="store_true")
    a = ap.parse_args()
    resp = 3 if a.resp3 else 2
    rbin = os.environ.get("RLIMITD_BIN")
    redis = shutil.which("redis-server")
    if not rbin or not redis:
        print("need RLIMITD_BIN and redis-server")
        return 1
    print("list_big_diff: seed %d, %d commands, RESP%d" % (a.seed, a.count, resp))
    tmp = tempfile.mkdtemp(prefix="list-big-diff.")
    rport, oport = free_port(), free_port()
    procs = []
    passed = 0
    try:
        procs.append(start([rbin, "--port", str(rport), "--bind", "127.0.0.1", "--dir", tmp,
                            "--save-interval", "0"], rport))
        procs.append(start([redis, "--port", str(oport), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", tmp], oport))
        mine, oracle = Conn(rport, resp), Conn(oport, resp)
        r = random.Random(a.seed)
        for _ in range(0, SIZE, 500):
            fill = [["RPUSH", "L"] + [element(r) for _ in range(500)]]
            mine.run(fill)
            oracle.run(fill)
        for i in range(a.count + 1):
            c = command(r) if i < a.count else ["LRANGE", "L", "0", "-1"]
            batch = [c] + ([["LRANGE", "L", "0", "-1"]] if i % 2000 == 1999 else [])
            got, want = mine.run(batch), oracle.run(batch)
            for cmd, x, y in zip(batch, got, want):
                if flat(x) != flat(y):
                    print("FAIL seed %d: command %d differs: %s" % (a.seed, i + 1, show(cmd)))
                    print("  rlimitd: %r" % flat(x)[:400])
                    print("  redis:   %r" % flat(y)[:400])
                    print("%d passed, 1 failed" % passed)
                    return 1
                passed += 1
        print("list_big_diff: final length %s" % flat(mine.run([["LLEN", "L"]])[0]).decode().strip())
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, 0 failed" % passed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
