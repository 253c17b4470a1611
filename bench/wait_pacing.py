#!/usr/bin/env python3
"""wait_pacing.py - a paced client (CL.THROTTLE ... WAIT) against polling clients, side by side
on one rlimitd (COMMANDS.md, "Waiting for capacity").

W worker threads, each on its own connection, share one limit of R requests a second (burst 0)
and each wants to send as many requests as the limit allows, for S seconds per mode:

  wait         CL.THROTTLE key 0 R 1 1 WAIT 10000: the reply comes when admitted
  poll-retry   CL.THROTTLE key 0 R 1 1; when refused, sleep retry_after (whole seconds, as
               redis-cell's users do) and ask again
  poll-ei      the same, sleeping one emission interval (1/R s) instead: a poller tuned to the
               limit, as chatty as polling gets while staying near the rate

Per mode: admitted requests, the rate achieved against R, commands sent per admitted request,
server CPU time per admitted request (utime+stime of every daemon thread from /proc, so the
cost of the refused polls is in it), and admission lateness: the gaps between consecutive
admissions as the clients saw them, less the emission interval (p50, p99, max; a gap shorter
than the interval, reply jitter, counts 0).

Then memory per waiter: N connections (--waiters, default 10000) held idle, then each sending
CL.THROTTLE ... WAIT 0 on one exhausted key; the daemon's RSS growth from idle to waiting,
divided by N, is what a waiter costs beyond its connection. The blocked_clients INFO field is
read back to check every one waits.

The same three modes then run against Debian's redis-server with rlimit.so (--module, default
build/rlimit.so; "" to skip): the polling clients there are what redis-cell's users run today.

Then release lateness: the N waiters again on one fresh key of --release-rate a second
(default 1000), all sent at once; one epoll loop reads the replies as the daemon releases them,
and lateness is each reply's gap to the previous less the emission interval (p50, p99, max),
with the load average at the end (the client's own scheduling is in the figure).

Usage: bench/wait_pacing.py [--bin build/rlimitd] [--rate 200] [--workers 20] [--seconds 5]
                            [--waiters 10000] [--release-rate 1000] [--modes wait,poll-retry,poll-ei]
                            [--module build/rlimit.so]
Needs redis-py (Debian's python3-redis). Prints Markdown tables."""
import argparse
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.append("/usr/lib/python3/dist-packages")
import redis  # noqa: E402
from server_proc import free_port, start  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (all threads)


def worker(port, mode, key, rate, stop_at, out, sent):
    r = redis.Redis(port=port)
    ei = 1.0 / rate
    n = 0
    while time.monotonic() < stop_at:
        if mode == "wait":
            rep = r.execute_command("CL.THROTTLE", key, 0, rate, 1, 1, "WAIT", 10000)
        else:
            rep = r.execute_command("CL.THROTTLE", key, 0, rate, 1, 1)
        n += 1
        if rep[0] == 0:
            out.append(time.monotonic())
        elif mode == "poll-retry":
            time.sleep(max(rep[3], 0))
        elif mode == "poll-ei":
            time.sleep(ei)
    sent.append(n)
    r.close()


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def run_mode(pid, port, mode, rate, workers, seconds):
    key = f"bench:{mode}"
    out, sent = [], []
    stop_at = time.monotonic() + seconds
    c0 = cpu_ticks(pid)
    ths = [threading.Thread(target=worker, args=(port, mode, key, rate, stop_at, out, sent))
           for _ in range(workers)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    cpu_s = (cpu_ticks(pid) - c0) / TICK
    out.sort()
    ei = 1.0 / rate
    late = [max(0.0, (b - a) - ei) * 1000 for a, b in zip(out, out[1:])]
    span = out[-1] - out[0] if len(out) > 1 else 0
    achieved = (len(out) - 1) / span if span > 0 else 0
    adm = max(len(out), 1)
    return {
        "mode": mode, "admitted": len(out), "rate": achieved / rate,
        "cmds": sum(sent) / adm, "cpu_us": cpu_s * 1e6 / adm,
        "p50": pct(late, 50), "p99": pct(late, 99), "max": max(late) if late else 0,
    }


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def waiter_memory(pid, port, n):
    """RSS growth per waiter: n idle connections, then each one waiting on one key."""
    r = redis.Redis(port=port)
    r.execute_command("CL.THROTTLE", "mem", 0, 1, 3600, 1)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
    for _ in range(200):
        if r.info("clients")["connected_clients"] >= n + 1:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    idle = rss_kib(pid)
    req = b"CL.THROTTLE mem 0 1 3600 1 WAIT 0\r\n"
    for s in socks:
        s.sendall(req)
    for _ in range(600):
        if r.info("clients")["blocked_clients"] >= n:
            break
        time.sleep(0.05)
    blocked = r.info("clients")["blocked_clients"]
    time.sleep(0.5)
    waiting = rss_kib(pid)
    for s in socks:
        s.close()
    for _ in range(600):
        if r.info("clients")["blocked_clients"] == 0:
            break
        time.sleep(0.05)
    after = r.info("clients")["blocked_clients"]
    r.close()
    return idle, waiting, blocked, after


def waiter_lateness(port, n, rate):
    """n connections each send CL.THROTTLE ... WAIT on one key of rate/s (burst 0) at once, so
    the daemon releases them one per emission interval; one epoll loop reads the replies.
    Lateness of each release: its reply's arrival less the previous one's, less the interval
    (0 when shorter). Also how many replies came in the order the requests were sent (FIFO)."""
    import selectors
    key = "late"
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    sel = selectors.DefaultSelector()
    req = f"CL.THROTTLE {key} 0 {rate} 1 1 WAIT 600000\r\n".encode()
    for i, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
    for s in socks:
        s.sendall(req)
    got, order, bad = [], [], 0
    deadline = time.monotonic() + n / rate * 3 + 30
    while len(got) < n and time.monotonic() < deadline:
        for k, _ in sel.select(timeout=1):
            data = k.fileobj.recv(256)
            t = time.monotonic()
            if not data.startswith(b"*5\r\n:0\r\n"):
                bad += 1
            sel.unregister(k.fileobj)
            got.append(t)
            order.append(k.data)
    for s in socks:
        s.close()
    got.sort()
    ei = 1.0 / rate
    late = [max(0.0, (b - a) - ei) * 1000 for a, b in zip(got, got[1:])]
    in_order = sum(1 for a, b in zip(order, order[1:]) if a < b)
    span = got[-1] - got[0] if len(got) > 1 else 0
    return {"released": len(got), "bad": bad, "rate": (len(got) - 1) / span / rate if span else 0,
            "p50": pct(late, 50), "p99": pct(late, 99), "max": max(late) if late else 0,
            "in_order": in_order, "load": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(root, "build", "rlimitd"))
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--workers", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--waiters", type=int, default=10000)
    ap.add_argument("--module", default=os.path.join(root, "build", "rlimit.so"))
    ap.add_argument("--release-rate", type=int, default=1000)
    ap.add_argument("--modes", default="wait,poll-retry,poll-ei")
    a = ap.parse_args()
    port = free_port()
    tmp = tempfile.mkdtemp()
    log = open(os.path.join(tmp, "rlimitd.log"), "w")
    d = start([a.bin, "--port", str(port), "--bind", "127.0.0.1", "--threads", "2",
               "--maxclients", str(a.waiters + 100), "--save", "", "--dir", tmp], port, log)
    try:
        modes = [m for m in a.modes.split(",") if m]
        rows = [run_mode(d.pid, port, m, a.rate, a.workers, a.seconds) for m in modes]
        mem = waiter_memory(d.pid, port, a.waiters) if a.waiters > 0 else None
        rel = waiter_lateness(port, a.waiters, a.release_rate) if a.waiters > 0 else None
    finally:
        d.terminate()
        d.wait()
    mrows = []
    if a.module:
        mport = free_port()
        rs = start(["redis-server", "--port", str(mport), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", tmp, "--loadmodule", os.path.abspath(a.module)],
                   mport, log)
        try:
            mrows = [run_mode(rs.pid, mport, m, a.rate, a.workers, a.seconds) for m in modes]
        finally:
            rs.terminate()
            rs.wait()
    print(f"{a.workers} workers sharing {a.rate}/s (burst 0), {a.seconds:g} s per mode, "
          f"2 I/O threads, load {os.getloadavg()[0]:.2f}\n")
    print("| mode | admitted | rate / limit | commands per admitted | server CPU per admitted "
          "(us) | lateness p50 (ms) | p99 (ms) | max (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows + [dict(y, mode="redis-server+rlimit.so " + y["mode"]) for y in mrows]:
        print(f"| {x['mode']} | {x['admitted']} | {x['rate']:.3f} | {x['cmds']:.2f} | "
              f"{x['cpu_us']:.1f} | {x['p50']:.2f} | {x['p99']:.2f} | {x['max']:.2f} |")
    if mem is not None:
        idle, waiting, blocked, after = mem
        print(f"\n{a.waiters} waiters on one key: RSS {idle} KiB with the connections idle, "
              f"{waiting} KiB with all waiting (blocked_clients {blocked}), "
              f"{(waiting - idle) * 1024 / max(blocked, 1):.0f} bytes per waiter; "
              f"blocked_clients {after} after they closed")
    if rel is not None:
        print(f"\n{a.waiters} waiters on one key released at {a.release_rate}/s: "
              f"{rel['released']} released ({rel['bad']} not admitted), rate / limit "
              f"{rel['rate']:.3f}, lateness p50 {rel['p50']:.3f} ms, p99 {rel['p99']:.3f} ms, "
              f"max {rel['max']:.2f} ms; {rel['in_order']} of {rel['released'] - 1} consecutive "
              f"releases in send order; load average "
              f"{' '.join('%.2f' % x for x in rel['load'])}")


if __name__ == "__main__":
    main()
