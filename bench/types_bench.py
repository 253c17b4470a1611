#!/usr/bin/env python3
"""types_bench.py - hashes and lists against Redis in one run (issue 17). Driven by
bench/types.sh; prints a Markdown table per workload and round.

For each workload and round, both servers side by side, fresh processes on free ports (rlimitd
with 1 I/O thread, redis-server with persistence off); the request phase alternates between them
in 10 slices, so the load of a shared machine weighs on both alike:
  hash:   KEYS token-bucket hashes (HSET k tokens <n> ts <13-digit ms>), used_memory growth per
          key (INFO memory); then REQS requests of HMGET k tokens ts + HSET k tokens <n> ts <ms>
          over those keys at pipeline 16;
  list:   KEYS moving-window lists (ten 13-digit timestamps each, LPUSH then LTRIM 0 9), used
          memory growth per key; then REQS requests of LPUSH k <ms> + LTRIM k 0 9 at pipeline 16.
Targets: rlimitd <= 0.5x Redis's bytes per key, <= 0.7x its server CPU per request pair. Server
CPU is utime+stime of the server process, all threads, from /proc/PID/stat. The client is
Python: throughput is the client's, CPU per request is the server's and is what counts.
"""
import os
import random
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


def used_memory(c, field=b"used_memory"):
    info = c.run([["INFO", "memory"]])[0]
    for line in info.split(b"\r\n"):
        if line.startswith(field + b":"):
            return int(line.split(b":")[1])
    raise RuntimeError("no %s" % field.decode())


def fill_hash(k, now):
    return [["HSET", "tb:%d" % k, "tokens", str(k % 100), "ts", str(now + k)]]


def pair_hash(rnd, keys, now):
    k = "tb:%d" % rnd.randrange(keys)
    return [["HMGET", k, "tokens", "ts"],
            ["HSET", k, "tokens", str(rnd.randrange(100)), "ts", str(now)]]


def fill_list(k, now):
    return [["RPUSH", "mw:%d" % k] + [str(now - 10 * k - j) for j in range(10)]]


def pair_list(rnd, keys, now):
    k = "mw:%d" % rnd.randrange(keys)
    return [["LPUSH", k, str(now + rnd.randrange(1000))], ["LTRIM", k, "0", "9"]]


WORKLOADS = {
    "hash": ("token-bucket hash (2 fields)", "HMGET+HSET", fill_hash, pair_hash),
    "list": ("moving-window list (10 timestamps of 13 digits)", "LPUSH+LTRIM", fill_list,
             pair_list),
}


def fill(c, keys, fill_fn, now):
    """Fills one server; returns used_memory growth per key."""
    base = used_memory(c)
    batch = []
    for k in range(keys):
        batch += fill_fn(k, now)
        if len(batch) >= 1000:
            c.run(batch)
            batch = []
    if batch:
        c.run(batch)
    return (used_memory(c) - base) / keys


def measure(argvs, ports, keys, reqs, fill_fn, pair_fn, slices=10):
    """Both servers run side by side; the request phase alternates between them in `slices`
    slices (the first server of a slice alternating too), so that the load of this shared
    machine weighs on both alike. Returns per server: bytes per key, server CPU per request pair
    (us), pairs per second."""
    procs = [start(a, p) for a, p in zip(argvs, ports)]
    try:
        conns = [Conn(p) for p in ports]
        now = int(time.time() * 1000)
        mem = [fill(c, keys, fill_fn, now) for c in conns]
        rnd = random.Random(1)
        cmds = []
        for _ in range(reqs):
            cmds += pair_fn(rnd, keys, now)
        cpu, wall = [0.0, 0.0], [0.0, 0.0]
        step = len(cmds) // slices
        step -= step % 32  # whole pipelines of 16 pairs
        for i in range(slices):
            part = cmds[i * step:(i + 1) * step]
            for j in ((0, 1) if i % 2 == 0 else (1, 0)):
                c0 = cpu_seconds(procs[j].pid)
                t0 = time.monotonic()
                blast_conn(conns[j], part, 32)
                wall[j] += time.monotonic() - t0
                cpu[j] += cpu_seconds(procs[j].pid) - c0
        pairs = step * slices / 2
        return [{"mem": mem[j], "cpu_us": cpu[j] / pairs * 1e6, "rate": pairs / wall[j]}
                for j in (0, 1)]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def blast_conn(c, cmds, depth):
    for i in range(0, len(cmds), depth):
        c.run(cmds[i:i + depth])


def main():
    rbin = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    reqs = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    which = sys.argv[5].split(",") if len(sys.argv) > 5 else list(WORKLOADS)
    tmp = tempfile.mkdtemp(prefix="types-bench.")
    for w in which:
        title, pair_name, fill_fn, pair = WORKLOADS[w]
        print("| %s, %d keys | round | rlimitd | redis-server 7.0 | ratio | target |" % (title, keys))
        print("|---|---|---|---|---|---|")
        for rnd in range(1, rounds + 1):
            rp, op = free_port(), free_port()
            r, o = measure([[rbin, "--port", str(rp), "--bind", "127.0.0.1", "--dir", tmp,
                             "--save-interval", "0", "--threads", "1", "--busy-poll-us", "0"],
                            ["redis-server", "--port", str(op), "--bind", "127.0.0.1", "--save",
                             "", "--appendonly", "no", "--dir", tmp]],
                           [rp, op], keys, reqs, fill_fn, pair)
            print("| used_memory per key (bytes) | %d | %.1f | %.1f | %.2f | <= 0.5 |"
                  % (rnd, r["mem"], o["mem"], r["mem"] / o["mem"]))
            print("| server CPU per %s (us), pipeline 16 | %d | %.2f | %.2f | %.2f | <= 0.7 |"
                  % (pair_name, rnd, r["cpu_us"], o["cpu_us"], r["cpu_us"] / o["cpu_us"]))
            print("| %s pairs/s (Python client bound) | %d | %.0f | %.0f | | |"
                  % (pair_name, rnd, r["rate"], o["rate"]))
            sys.stdout.flush()
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
