#!/usr/bin/env python3
"""script_big_reply.py - peak memory of a script's large reply (issue 27), rlimitd beside
redis-server 7.0 in the same run.

    bench/script_big_reply.py [--rlimitd BIN] [--sizes 200,1000,2100] [--piece-mb 45]

For each size (MB of reply) and each server in turn (a fresh server each time, persistence off):
one EVAL returns a table of N references to one string of --piece-mb MB (Lua keeps one copy of
the string; the reply holds it N times), read by a client that drains the socket as fast as it
can. Prints, per server and size, the reply's bytes, the server's peak resident memory during
the run (VmHWM from /proc, minus its value before the call) as a ratio of the reply's size, the
server CPU time the call cost (utime + stime, all threads, from /proc/PID/stat) and the wall
time; then rlimitd/Redis of each. Keep the largest size well below free memory: a server peaks
at about 1.3x it (and rlimitd's output-buffer limit for normal clients must be off, its default).
"""
import argparse
import os
import shutil
import socket
import sys
import tempfile
import time

from server_proc import free_port, start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hwm_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def one(kind, binary, mb, piece_mb):
    port = free_port()
    d = tempfile.mkdtemp(prefix="bigreply-")
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", d]
    else:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", d]
    proc = start(argv, port)
    try:
        piece = piece_mb << 20
        refs = max(1, (mb << 20) // piece)
        body = ("local s = string.rep('x', %d) local t = {} "
                "for i = 1, %d do t[i] = s end return t" % (piece, refs))
        head = b"*%d\r\n" % refs
        item = b"$%d\r\n" % piece
        total = len(head) + refs * (len(item) + piece + 2)
        base, cpu0, t0 = hwm_bytes(proc.pid), cpu_s(proc.pid), time.time()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(encode(["EVAL", body, "0"]))
        buf = bytearray(1 << 22)
        n = s.recv_into(buf)
        if buf[:1] != b"*":
            raise RuntimeError("%s answered %r" % (kind, bytes(buf[:n])))
        while n < total:
            k = s.recv_into(buf)
            if k == 0:
                raise RuntimeError("%s closed the connection after %d of %d bytes"
                                   % (kind, n, total))
            n += k
        wall = time.time() - t0
        s.close()
        peak = hwm_bytes(proc.pid) - base
        return {"bytes": total, "ratio": peak / total, "peak_mb": peak / 2**20,
                "cpu": cpu_s(proc.pid) - cpu0, "wall": wall}
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlimitd", default=os.path.join(ROOT, "build", "rlimitd"))
    ap.add_argument("--sizes", default="200,1000,2100")
    ap.add_argument("--piece-mb", type=int, default=45)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    print("| server | reply MB | peak RSS MB | peak / reply | server CPU s | wall s |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for mb in sizes:
        for kind in ("redis", "rlimitd"):
            r = one(kind, a.rlimitd, mb, a.piece_mb)
            rows[(kind, mb)] = r
            print("| %s | %.0f | %.0f | %.2f | %.2f | %.1f |" % (
                kind, r["bytes"] / 2**20, r["peak_mb"], r["ratio"], r["cpu"], r["wall"]))
            sys.stdout.flush()
    print()
    for mb in sizes:
        rl, rd = rows[("rlimitd", mb)], rows[("redis", mb)]
        print("%d MB: peak/reply rlimitd %.2f, redis %.2f (rlimitd/redis %.2f); "
              "CPU rlimitd/redis %.2f" % (mb, rl["ratio"], rd["ratio"], rl["ratio"] / rd["ratio"],
                                          rl["cpu"] / rd["cpu"] if rd["cpu"] else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
