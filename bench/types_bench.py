#!/usr/bin/env python3
"""types_bench.py - hashes (and lists, once rlimitd has them) against Redis in one run (issue 17).
Driven by bench/types.sh; prints a Markdown table.

Both servers run at once, each a fresh process on a free port (rlimitd with 1 I/O thread and busy
polling off, as Redis has one thread and no spinning: a spinning thread's CPU time is not work
done for a request; redis-server with persistence off):
  memory: KEYS token-bucket hashes (HSET k tokens <n> ts <13-digit ms>) loaded into each,
          used_memory growth per key (INFO memory; RSS growth beside it), target rlimitd <= 0.5x
          Redis;
  CPU:    REQS requests of HMGET k tokens ts + HSET k tokens <n> ts <ms> over those keys at
          pipeline 16, sent to the two servers in alternating slices (SLICES of them, the order
          swapped each time) so that both see the same machine: a shared, busy CPU changes the
          cost of a request from minute to minute. Server CPU (utime+stime of the server
          process, all threads, from /proc/PID/stat) per request pair, summed over the slices,
          target rlimitd <= 0.7x Redis. The client is Python: throughput is the client's, CPU
          per request is the server's and is what counts.
"""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "diff"))
from types_diff import Conn, encode, free_port, start  # noqa: E402

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


def blast(c, batches):
    """Sends each pre-encoded batch and reads its replies (parsed by the Conn: bulk replies
    cannot be counted by lines)."""
    for data, n in batches:
        c.sock.sendall(data)
        for _ in range(n):
            c.reply()


def load(c, keys, now):
    """Loads the hashes; returns used_memory and RSS growth per key."""
    base = used_memory(c)
    base_rss = used_memory(c, b"used_memory_rss")
    batch = []
    for k in range(keys):
        batch.append(["HSET", "tb:%d" % k, "tokens", str(k % 100), "ts", str(now + k)])
        if len(batch) == 1000:
            c.run(batch)
            batch = []
    if batch:
        c.run(batch)
    return ((used_memory(c) - base) / keys,
            (used_memory(c, b"used_memory_rss") - base_rss) / keys)


SLICES = 10


def measure(servers, keys, reqs):
    """servers: name -> (argv, port). Returns name -> {mem, cpu_us, rate}."""
    procs, conns, res = {}, {}, {}
    try:
        for name, (argv, port) in servers.items():
            procs[name] = start(argv, port)
            conns[name] = Conn(port)
        now = int(time.time() * 1000)
        for name in servers:
            mem, rss = load(conns[name], keys, now)
            res[name] = {"mem": mem, "rss": rss, "cpu": 0.0, "dt": 0.0}
        rnd = random.Random(1)
        batches = []
        for i in range(0, reqs, 8):
            cmds = []
            for _ in range(min(8, reqs - i)):
                k = "tb:%d" % rnd.randrange(keys)
                cmds.append(["HMGET", k, "tokens", "ts"])
                cmds.append(["HSET", k, "tokens", str(rnd.randrange(100)), "ts", str(now)])
            batches.append((b"".join(encode(c) for c in cmds), len(cmds)))
        per = (len(batches) + SLICES - 1) // SLICES
        names = list(servers)
        for s in range(SLICES):
            part = batches[s * per:(s + 1) * per]
            for name in (names if s % 2 == 0 else names[::-1]):
                pid = procs[name].pid
                c0 = cpu_seconds(pid)
                t0 = time.monotonic()
                blast(conns[name], part)
                res[name]["dt"] += time.monotonic() - t0
                res[name]["cpu"] += cpu_seconds(pid) - c0
        for r in res.values():
            r["cpu_us"] = r["cpu"] / reqs * 1e6
            r["rate"] = reqs / r["dt"]
        return res
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def main():
    rbin = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    reqs = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    tmp = tempfile.mkdtemp(prefix="types-bench.")
    rp, op = free_port(), free_port()
    res = measure({
        "rlimitd": ([rbin, "--port", str(rp), "--bind", "127.0.0.1", "--dir", tmp,
                     "--save-interval", "0", "--threads", "1", "--busy-poll-us", "0"], rp),
        "redis": (["redis-server", "--port", str(op), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", tmp], op)}, keys, reqs)
    r, o = res["rlimitd"], res["redis"]
    print("| token-bucket hash (2 fields), %d keys | rlimitd | redis-server 7.0 | ratio | target |"
          % keys)
    print("|---|---|---|---|---|")
    print("| used_memory per key (bytes) | %.1f | %.1f | %.2f | <= 0.5 |"
          % (r["mem"], o["mem"], r["mem"] / o["mem"]))
    print("| RSS growth per key (bytes) | %.1f | %.1f | %.2f | |"
          % (r["rss"], o["rss"], r["rss"] / o["rss"]))
    print("| server CPU per HMGET+HSET (us), pipeline 16 | %.2f | %.2f | %.2f | <= 0.7 |"
          % (r["cpu_us"], o["cpu_us"], r["cpu_us"] / o["cpu_us"]))
    print("| HMGET+HSET pairs/s (Python client bound) | %.0f | %.0f | | |" % (r["rate"], o["rate"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
