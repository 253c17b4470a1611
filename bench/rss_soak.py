#!/usr/bin/env python3
"""rss_soak.py - does RSS follow used memory? (issue 28)

    bench/rss_soak.py [--rlimitd BIN] [--cycles N] [--maxmemory 64mb] [--threads 2]

For redis-server 7.0 and rlimitd in turn (fresh servers, persistence off, maxmemory set): four
clients fill the server with strings, hash fields, list elements and sorted-set members (one
type each, pipelined 500 commands at a time) until writes are refused with -OOM, then FLUSHALL;
N cycles (default 4). Prints, per server and cycle, used memory when full, the peak RSS seen
while filling, and RSS 1.5 s after FLUSHALL, as a markdown table; then each server's worst
RSS-after-flush as a ratio of maxmemory. Needs redis-py (tests/deps.sh installs it).
"""
import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import redis

from server_proc import free_port, rss_mb, start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def filler(port, kind, cycle):
    r = redis.Redis(port=port)
    i = 0
    while i < 5000000:
        p = r.pipeline(transaction=False)
        for j in range(500):
            k = "%d:%d" % (cycle, i + j)
            bucket = "%d:%d" % (cycle, (i + j) // 100)
            if kind == 0:
                p.set("s" + k, "x" * (100 + (j % 7) * 150))
            elif kind == 1:
                p.hset("h" + bucket, k, "y" * (50 + j % 300))
            elif kind == 2:
                p.rpush("l" + bucket, "z" * (20 + j % 200))
            else:
                p.zadd("z" + bucket, {k: j})
        try:
            p.execute()
        except redis.exceptions.ResponseError:
            return
        i += 500


def soak(name, argv, port, cycles, maxmemory):
    proc = start(argv, port)
    rows = []
    try:
        r = redis.Redis(port=port)
        r.config_set("maxmemory", maxmemory)
        for cycle in range(cycles):
            ts = [threading.Thread(target=filler, args=(port, kind, cycle)) for kind in range(4)]
            for t in ts:
                t.start()
            peak = 0.0
            while any(t.is_alive() for t in ts):
                peak = max(peak, rss_mb(proc.pid))
                time.sleep(0.1)
            used = int(r.info("memory")["used_memory"]) / (1 << 20)
            r.flushall()
            time.sleep(1.5)
            rows.append((name, cycle + 1, used, peak, rss_mb(proc.pid)))
    finally:
        proc.kill()
        proc.wait()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlimitd", default=os.path.join(ROOT, "build-bench", "rlimitd"))
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--maxmemory", default="64mb")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(a.rlimitd):
        sys.exit("rss_soak.py: no rlimitd at %s (--rlimitd BIN)" % a.rlimitd)
    d = tempfile.mkdtemp(prefix="rss-soak.")
    try:
        p1, p2 = free_port(), free_port()
        rows = soak("redis-server 7.0", ["redis-server", "--port", str(p1), "--save", "",
                                         "--appendonly", "no", "--dir", d], p1, a.cycles,
                    a.maxmemory)
        rows += soak("rlimitd, %d threads" % a.threads,
                     [a.rlimitd, "--port", str(p2), "--bind", "127.0.0.1", "--threads",
                      str(a.threads), "--save-interval", "0", "--dir", d], p2, a.cycles,
                     a.maxmemory)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("## RSS across fill / FLUSHALL cycles (maxmemory %s, load %s)\n" %
          (a.maxmemory, " ".join("%.2f" % x for x in os.getloadavg())))
    print("| server | cycle | used when full (MiB) | peak RSS filling (MiB) | RSS after FLUSHALL (MiB) |")
    print("|---|---|---|---|---|")
    for name, cycle, used, peak, after in rows:
        print("| %s | %d | %.1f | %.1f | %.1f |" % (name, cycle, used, peak, after))
    print()
    for name in dict.fromkeys(r[0] for r in rows):
        worst = max(r[4] for r in rows if r[0] == name)
        print("- %s: worst RSS after FLUSHALL %.1f MiB" % (name, worst))


if __name__ == "__main__":
    main()
