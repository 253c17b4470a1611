#!/usr/bin/env python3
"""maxmemory_soak.py - every maxmemory-policy held at the limit under mixed traffic (issue 28).

    bench/maxmemory_soak.py [--rlimitd BIN] [--old-build BIN] [--seconds N] [--maxmemory 64mb]
                            [--threads 2] [--policies a,b,...] [--no-redis]

For each of the 8 policies, redis-server 7.0 and rlimitd in turn (fresh servers, persistence
off, maxmemory and the policy set): for --seconds (default 20; $SOAK_MINUTES overrides it in
minutes, for the long run the issue asks for) four writers keep writing past the limit (strings
of 100..4000 bytes, half with a TTL of 10 s .. 1 h so the volatile policies have candidates,
hash fields, list elements, sorted-set members, APPENDs; pipelined 200 at a time), a reader
GETs and HGETALLs, and a limiter client sends CL.THROTTLE and GCRA on 2,000 keys (on Redis,
which has neither, INCR and EXPIRE on the same keys as a stand-in of the same cost) one request
at a time, timing each. A monitor reads INFO memory and the server's RSS every 50 ms.

With --old-build, another rlimitd binary runs the same soak after each policy's new one (its
rows say "rlimitd (old)"), so a change is judged against the build before it in the same run.

Prints one markdown row per policy and server: the highest used_memory seen as a percentage of
maxmemory, the highest RSS and the RSS when the traffic stopped, writes accepted and refused
(-OOM), evicted_keys, the limiter requests answered and refused (-OOM: a key that expired and
came back while nothing could be evicted) or failed otherwise, the limiter's slowest answer, any
other error, whether the server was still alive at the end, and the 1-minute load average when
its soak ended. Exits 1 if rlimitd died, answered any request with an error other than -OOM,
refused a limiter request under an allkeys policy, or went more than 10% over maxmemory. Needs
redis-py.
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

import redis

from server_proc import free_port, rss_mb, start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["noeviction", "allkeys-lru", "volatile-lru", "allkeys-lfu", "volatile-lfu",
            "allkeys-random", "volatile-random", "volatile-ttl"]
LIMITER_KEYS = 2000


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {}

    def add(self, what, k=1):
        with self.lock:
            self.n[what] = self.n.get(what, 0) + k

    def get(self, what):
        return self.n.get(what, 0)


def is_oom(e):
    return str(e).startswith("OOM ") or "EXECABORT" in str(e) and "OOM" in str(e)


def writer(port, wid, stop, counts):
    r = redis.Redis(port=port)
    rng = random.Random(wid)
    i = 0
    while not stop.is_set():
        p = r.pipeline(transaction=False)
        for _ in range(200):
            i += 1
            k = "w%d:%d" % (wid, i)
            kind = rng.randrange(10)
            if kind < 5:
                v = "x" * rng.randrange(100, 4000)
                if kind < 3:
                    p.set("s" + k, v, ex=rng.randrange(10, 3600))
                else:
                    p.set("s" + k, v)
            elif kind == 5:
                p.hset("h%d:%d" % (wid, i // 50), k, "y" * rng.randrange(10, 300))
            elif kind == 6:
                p.rpush("l%d:%d" % (wid, i // 100), "z" * rng.randrange(10, 200))
            elif kind == 7:
                p.zadd("z%d:%d" % (wid, i // 100), {k: i})
            elif kind == 8:
                p.append("a%d:%d" % (wid, rng.randrange(500)), "q" * rng.randrange(10, 500))
            else:
                p.expire("s" + "w%d:%d" % (wid, rng.randrange(1, i + 1)), rng.randrange(5, 600))
        try:
            res = p.execute(raise_on_error=False)
        except redis.exceptions.ConnectionError:
            counts.add("conn_errors")
            return
        for x in res:
            if isinstance(x, Exception):
                counts.add("write_oom" if is_oom(x) else "write_other")
            else:
                counts.add("write_ok")


def reader(port, stop, counts):
    r = redis.Redis(port=port)
    rng = random.Random(99)
    while not stop.is_set():
        p = r.pipeline(transaction=False)
        for _ in range(100):
            w, i = rng.randrange(4), rng.randrange(1, 200000)
            if rng.randrange(2):
                p.get("sw%d:%d" % (w, i))
            else:
                p.hgetall("h%d:%d" % (w, i // 50))
        try:
            res = p.execute(raise_on_error=False)
        except redis.exceptions.ConnectionError:
            counts.add("conn_errors")
            return
        counts.add("read_errors", sum(isinstance(x, Exception) for x in res))


def limiter(port, is_redis, stop, counts, slow):
    r = redis.Redis(port=port)
    rng = random.Random(7)
    while not stop.is_set():
        k = "lim:%d" % rng.randrange(LIMITER_KEYS)
        t0 = time.perf_counter()
        try:
            if is_redis:
                p = r.pipeline(transaction=False)
                p.incr(k)
                p.expire(k, 60)
                res = p.execute(raise_on_error=False)
                err = next((x for x in res if isinstance(x, Exception)), None)
            else:
                cmd = ("CL.THROTTLE", k, 100, 1000, 60) if rng.randrange(2) else \
                      ("GCRA", "g" + k, 100, 1000, 60)
                err = None
                try:
                    r.execute_command(*cmd)
                except redis.exceptions.ResponseError as e:
                    err = e
        except redis.exceptions.ConnectionError:
            counts.add("conn_errors")
            return
        dt = time.perf_counter() - t0
        slow[0] = max(slow[0], dt)
        if err is None:
            counts.add("lim_ok")
        else:
            counts.add("lim_oom" if is_oom(err) else "lim_other")


def monitor(port, pid, maxmem, stop, peaks):
    r = redis.Redis(port=port)
    while not stop.is_set():
        try:
            used = int(r.info("memory")["used_memory"])
        except redis.exceptions.ConnectionError:
            return
        peaks["used"] = max(peaks["used"], used / maxmem)
        peaks["rss"] = max(peaks["rss"], rss_mb(pid))
        time.sleep(0.05)


def parse_mem(s):
    s = s.lower()
    for suf, m in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if s.endswith(suf):
            return int(s[:-len(suf)]) * m
    return int(s)


def soak(name, argv, port, policy, seconds, maxmemory, is_redis):
    proc = start(argv, port)
    counts, peaks, slow = Counts(), {"used": 0.0, "rss": 0.0}, [0.0]
    stop = threading.Event()
    try:
        r = redis.Redis(port=port)
        maxmem = parse_mem(maxmemory)
        r.config_set("maxmemory", maxmem)
        r.config_set("maxmemory-policy", policy)
        ts = [threading.Thread(target=writer, args=(port, w, stop, counts)) for w in range(4)]
        ts.append(threading.Thread(target=reader, args=(port, stop, counts)))
        ts.append(threading.Thread(target=limiter, args=(port, is_redis, stop, counts, slow)))
        ts.append(threading.Thread(target=monitor, args=(port, proc.pid, maxmem, stop, peaks)))
        # The limiter's keys exist before the server fills (a new key is refused when full).
        p = r.pipeline(transaction=False)
        for i in range(LIMITER_KEYS):
            if is_redis:
                p.incr("lim:%d" % i)
            else:
                p.execute_command("CL.THROTTLE", "lim:%d" % i, 100, 1000, 60)
                p.execute_command("GCRA", "glim:%d" % i, 100, 1000, 60)
        p.execute()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join(60)
        rss_end = rss_mb(proc.pid)
        load = os.getloadavg()[0]
        alive = proc.poll() is None
        evicted = 0
        if alive:
            try:
                evicted = int(r.info("stats")["evicted_keys"])
                alive = r.ping()
            except redis.exceptions.ConnectionError:
                alive = False
    finally:
        stop.set()
        proc.kill()
        proc.wait()
    return dict(name=name, policy=policy, used=peaks["used"], rss=peaks["rss"], rss_end=rss_end,
                load=load,
                write_ok=counts.get("write_ok"), write_oom=counts.get("write_oom"),
                evicted=evicted, lim_ok=counts.get("lim_ok"),
                lim_oom=counts.get("lim_oom"), lim_other=counts.get("lim_other"), slow=slow[0],
                other=counts.get("write_other") + counts.get("read_errors") +
                counts.get("conn_errors"), alive=alive)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlimitd", default=os.path.join(ROOT, "build-bench", "rlimitd"))
    ap.add_argument("--old-build", help="another rlimitd binary to soak beside it")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--maxmemory", default="64mb")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--no-redis", action="store_true")
    a = ap.parse_args()
    if os.environ.get("SOAK_MINUTES"):
        a.seconds = float(os.environ["SOAK_MINUTES"]) * 60
    if not os.path.exists(a.rlimitd):
        sys.exit("maxmemory_soak.py: no rlimitd at %s (--rlimitd BIN)" % a.rlimitd)
    d = tempfile.mkdtemp(prefix="maxmemory-soak.")
    rows = []
    try:
        for policy in a.policies.split(","):
            if not a.no_redis:
                p = free_port()
                rows.append(soak("redis-server 7.0", ["redis-server", "--port", str(p),
                                 "--save", "", "--appendonly", "no", "--dir", d], p, policy,
                                 a.seconds, a.maxmemory, True))
            builds = [("rlimitd", a.rlimitd)]
            if a.old_build:
                builds.append(("rlimitd (old)", a.old_build))
            for name, binary in builds:
                p = free_port()
                rows.append(soak(name, [binary, "--port", str(p), "--bind", "127.0.0.1",
                                 "--threads", str(a.threads), "--save-interval", "0", "--dir",
                                 d], p, policy, a.seconds, a.maxmemory, False))
            print("%s done: %s" % (policy, "; ".join(
                "%s used %.1f%% RSS max %.1f end %.1f MiB" % (x["name"], 100 * x["used"], x["rss"],
                                                              x["rss_end"])
                for x in rows if x["policy"] == policy)), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("## Every policy at maxmemory %s, %.0f s each under mixed traffic (load %s)\n" %
          (a.maxmemory, a.seconds, " ".join("%.2f" % x for x in os.getloadavg())))
    print("| policy | server | max used / maxmemory | max RSS (MiB) | RSS at end (MiB) "
          "| writes ok | writes -OOM | evicted | limiter ok | limiter -OOM "
          "| limiter other errors | limiter slowest (ms) | other errors | alive | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for x in rows:
        print("| %s | %s | %.1f%% | %.1f | %.1f | %d | %d | %d | %d | %d | %d | %.1f | %d | %s "
              "| %.1f |" % (
            x["policy"], x["name"], 100 * x["used"], x["rss"], x["rss_end"], x["write_ok"],
            x["write_oom"],
            x["evicted"], x["lim_ok"], x["lim_oom"], x["lim_other"], 1000 * x["slow"],
            x["other"],
            "yes" if x["alive"] else "NO", x["load"]))
        # A limiter request may be refused only for a key that expired and came back while
        # nothing could be evicted (noeviction, or a volatile policy out of keys with a TTL).
        if x["name"] == "rlimitd" and (not x["alive"] or x["used"] > 1.10 or x["other"] or
                                       x["lim_other"] or
                                       (x["policy"].startswith("allkeys") and x["lim_oom"])):
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
