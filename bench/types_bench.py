#!/usr/bin/env python3
"""types_bench.py - hashes (and lists, once rlimitd has them) against Redis in one run (issue 17).
Driven by bench/types.sh; prints a Markdown table.

For each server in turn, a fresh process on a free port (rlimitd with 1 I/O thread, redis-server
with persistence off):
  memory: KEYS token-bucket hashes (HSET k tokens <n> ts <13-digit ms>), used_memory growth per
          key (INFO memory), target rlimitd <= 0.5x Redis;
  CPU:    REQS requests of HMGET k tokens ts + HSET k tokens <n> ts <ms> over those keys at
          pipeline 16: server CPU (utime+stime of the server process, all threads, from
          /proc/PID/stat) per request pair, target rlimitd <= 0.7x Redis. The client is Python:
          throughput is the client's, CPU per request is the server's and is what counts.
"""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "diff"))
from types_diff import Conn, free_port, start  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def used_memory(c):
    info = c.run([["INFO", "memory"]])[0]
    for line in info.split(b"\r\n"):
        if line.startswith(b"used_memory:"):
            return int(line.split(b":")[1])
    raise RuntimeError("no used_memory")


def blast(port, cmds, depth):
    """Sends cmds with `depth` requests in flight, reading replies as raw bytes (counted by
    lines is not safe for bulk replies, so a Conn parses them)."""
    c = Conn(port)
    for i in range(0, len(cmds), depth):
        c.run(cmds[i:i + depth])


def measure(name, argv, port, keys, reqs):
    p = start(argv, port)
    try:
        c = Conn(port)
        base = used_memory(c)
        now = int(time.time() * 1000)
        batch = []
        for k in range(keys):
            batch.append(["HSET", "tb:%d" % k, "tokens", str(k % 100), "ts", str(now + k)])
            if len(batch) == 1000:
                c.run(batch)
                batch = []
        if batch:
            c.run(batch)
        mem = (used_memory(c) - base) / keys
        rnd = random.Random(1)
        cmds = []
        for _ in range(reqs):
            k = "tb:%d" % rnd.randrange(keys)
            cmds.append(["HMGET", k, "tokens", "ts"])
            cmds.append(["HSET", k, "tokens", str(rnd.randrange(100)), "ts", str(now)])
        c0 = cpu_seconds(p.pid)
        t0 = time.monotonic()
        blast(port, cmds, 16)
        dt = time.monotonic() - t0
        cpu = cpu_seconds(p.pid) - c0
        return {"mem": mem, "cpu_us": cpu / reqs * 1e6, "rate": reqs / dt}
    finally:
        p.kill()
        p.wait()


def main():
    rbin = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    reqs = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    tmp = tempfile.mkdtemp(prefix="types-bench.")
    rp, op = free_port(), free_port()
    r = measure("rlimitd", [rbin, "--port", str(rp), "--bind", "127.0.0.1", "--dir", tmp,
                            "--save-interval", "0", "--threads", "1", "--busy-poll-us", "0"], rp, keys, reqs)
    o = measure("redis", ["redis-server", "--port", str(op), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", tmp], op, keys, reqs)
    print("| token-bucket hash (2 fields), %d keys | rlimitd | redis-server 7.0 | ratio | target |"
          % keys)
    print("|---|---|---|---|---|")
    print("| used_memory per key (bytes) | %.1f | %.1f | %.2f | <= 0.5 |"
          % (r["mem"], o["mem"], r["mem"] / o["mem"]))
    print("| server CPU per HMGET+HSET (us), pipeline 16 | %.2f | %.2f | %.2f | <= 0.7 |"
          % (r["cpu_us"], o["cpu_us"], r["cpu_us"] / o["cpu_us"]))
    print("| HMGET+HSET pairs/s (Python client bound) | %.0f | %.0f | | |" % (r["rate"], o["rate"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
