#!/usr/bin/env python3
"""CLIENT LIST and CLIENT KILL differential (issue 30: the pubsub class of clients): a seeded
stream over several named connections, some on RESP2 and some on RESP3, that subscribe and
unsubscribe (so they move between the normal and pubsub classes), list each other by type and
by id, and kill each other by TYPE, ID, ADDR, LADDR, USER and SKIPME in any combination, valid
and not, sent to rlimitd (2 I/O threads) and to Debian's redis-server 7.0.

Ids and addresses differ between the servers: the stream names them symbolically (connection 3's
id, connection 3's address, the server's address) and each run puts in its own server's. Every
reply is compared byte for byte, except CLIENT LIST's (and CLIENT INFO's) text: there each line
is reduced to the fields both servers fill alike (name, flags, db, sub, psub, ssub, multi, resp,
user), kept in order, so which connections are listed, in which order and in which state is
compared, not their addresses, ages or buffer sizes; and UNSUBSCRIBE without names, whose
frames come in the order of Redis's hash tables, by their names as a set and their counts in
order. After each step every connection is sent
`PING sync-<step>`; which connections answer and which are closed (killed, the caller itself
included) must be the same on both servers; the closed ones are opened again (same name, same
protocol) before the next step.

Usage: client_diff.py [--seed N] [--steps N] [--conns N] [--rlimitd PATH]
       client_diff.py --self-check    (redis-server against redis-server)
On a difference: the seed, the step, its command, both replies, the last steps; then
"0 passed, 1 failed", exit 1."""
import argparse
import os
import random
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ProtocolError, Resp, parse, pick_seed, resolve_rlimitd, show, \
    start_redis, start_rlimitd  # noqa: E402

TYPES = ["normal", "pubsub", "NORMAL", "PubSub", "master", "replica", "slave", "monitor", "",
         "normal\x00x", "pubsubx"]
FIELDS = (b"name", b"flags", b"db", b"sub", b"psub", b"ssub", b"multi", b"resp", b"user")


def gen(seed, steps, nconns):
    """(initial protocols, steps): a step is (connection, command) with symbolic arguments:
    ("id", i), ("addr", i), ("laddr",) are put in per server when the step runs."""
    rng = random.Random(seed)
    initial = [3 if rng.random() < 0.4 else 2 for _ in range(nconns)]
    out = []

    def conn():
        return rng.randrange(nconns)

    def type_name():
        return rng.choice(TYPES[:4]) if rng.random() < 0.8 else rng.choice(TYPES)

    for _ in range(steps):
        c = conn()
        r = rng.random()
        if r < 0.12:
            cmd = [rng.choice(["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"]),
                   *rng.sample(["a", "b", "c*", "d"], rng.randint(1, 2))]
        elif r < 0.20:
            cmd = [rng.choice(["UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"])]
            if rng.random() < 0.4:
                cmd.append(rng.choice(["a", "b", "c*", "d"]))
        elif r < 0.22:
            cmd = ["RESET"]
        elif r < 0.36:
            cmd = ["CLIENT", "LIST"] + (["TYPE", type_name()] if rng.random() < 0.8 else [])
        elif r < 0.46:
            ids = []
            for _ in range(rng.randint(1, 5)):
                x = rng.random()
                ids.append(("id", conn()) if x < 0.7 else
                           rng.choice(["0", "-1", "999999", "9223372036854775807", "x", "1.5",
                                       "9223372036854775808", ""]))
            cmd = ["CLIENT", "LIST", "ID", *ids]
        elif r < 0.50:
            cmd = rng.choice([["CLIENT", "LIST", "TYPE"], ["CLIENT", "LIST", "ID"],
                              ["CLIENT", "LIST", "TYPE", "normal", "ID", ("id", conn())],
                              ["CLIENT", "LIST", "ID", ("id", conn()), "TYPE", "normal"],
                              ["CLIENT", "LIST", "NOPE"], ["CLIENT", "LIST", "type", "normal",
                                                          "x"],
                              ["CLIENT", "INFO"], ["CLIENT", "INFO", "x"], ["CLIENT", "KILL"]])
        elif r < 0.56:
            # The old form: one address, the caller's own included (it may kill itself).
            cmd = ["CLIENT", "KILL", rng.choice([("addr", conn()), ("addr", c),
                                                 "127.0.0.1:1", ("laddr",)])]
        else:
            cmd = ["CLIENT", "KILL"]
            opts = []
            for _ in range(rng.randint(1, 3)):
                k = rng.random()
                if k < 0.35:
                    opts.append(["TYPE", type_name()])
                elif k < 0.55:
                    opts.append(["ID", ("id", conn()) if rng.random() < 0.8 else
                                 rng.choice(["0", "-3", "x", "999999"])])
                elif k < 0.65:
                    opts.append(["ADDR", ("addr", conn()) if rng.random() < 0.8 else
                                 "127.0.0.1:1"])
                elif k < 0.72:
                    opts.append(["LADDR", ("laddr",) if rng.random() < 0.8 else "127.0.0.1:1"])
                elif k < 0.78:
                    opts.append(["USER", rng.choice(["default", "default", "nobody"])])
                elif k < 0.96:
                    opts.append(["SKIPME", rng.choice(["yes", "no", "YES", "No", "maybe"])])
                else:
                    opts.append([rng.choice(["NOPE", "TYPE", "ID", "SKIPME"])])  # no value
            for o in opts:
                cmd += o
        out.append((c, cmd))
    return initial, out


class Run:
    """One server's connections, opened again (same name, same protocol) once closed."""

    def __init__(self, port, initial):
        self.port = port
        self.initial = initial
        self.conns = [None] * len(initial)
        self.ids = [0] * len(initial)
        self.addrs = [""] * len(initial)
        for i in range(len(initial)):
            self.open(i)

    def open(self, i):
        c = Resp(self.port, resp=self.initial[i], timeout=60)
        c.call("CLIENT", "SETNAME", "c%d" % i)
        self.ids[i] = int(c.call("CLIENT", "ID")[1:-2])
        host, port = c.sock.getsockname()[:2]
        self.addrs[i] = "%s:%d" % (host, port)
        self.conns[i] = c

    def resolve(self, cmd):
        out = []
        for a in cmd:
            if isinstance(a, tuple):
                a = {"id": lambda: str(self.ids[a[1]]), "addr": lambda: self.addrs[a[1]],
                     "laddr": lambda: "127.0.0.1:%d" % self.port}[a[0]]()
            out.append(a)
        return out

    @staticmethod
    def frames_until(conn, tok):
        """The frames conn receives up to the reply to `PING tok` (not included), and whether
        it ended closed instead."""
        frames = []
        end = tok.encode() + b"\r\n"
        try:
            while True:
                f = conn.read()
                if f.endswith(end) and f[:1] in b"$*" and len(f) < 40:
                    return frames, False
                frames.append(f)
        except (ProtocolError, ConnectionError, socket.timeout):
            return frames, True

    def step(self, n, c, cmd):
        """The caller's frames and, per connection, whether it is closed after the step (the
        closed ones are opened again)."""
        tok = "sync-%d" % n
        try:
            self.conns[c].send([self.resolve(cmd), ["PING", tok]])
        except OSError:
            pass
        frames, gone = self.frames_until(self.conns[c], tok)
        closed = []
        for i, x in enumerate(self.conns):
            if i != c:
                try:
                    x.send([["PING", tok]])
                except OSError:  # closed already: what the read finds too
                    pass
                extra, gone = self.frames_until(x, tok)
                if extra:
                    frames.append(b"<conn %d got> " + b" ".join(extra))
            closed.append(gone)
        for i, g in enumerate(closed):
            if g:
                self.conns[i].close()
                self.open(i)
        return frames, closed

    def close(self):
        for x in self.conns:
            x.close()


def canon(frames, cmd):
    """CLIENT LIST / INFO text reduced to the fields both servers fill alike; UNSUBSCRIBE's
    frames (without names: Redis answers in its hash tables' order) as a sorted list."""
    if cmd[0] == "CLIENT" and cmd[1] in ("LIST", "INFO") and frames and frames[0][:1] in b"$=":
        text = parse(frames[0])
        lines = []
        for line in text.split(b"\n"):
            if not line:
                continue
            kv = dict(f.split(b"=", 1) for f in line.split(b" ") if b"=" in f)
            lines.append(b" ".join(k + b"=" + kv.get(k, b"?") for k in FIELDS))
        return [b"<list>"] + lines
    if cmd[0].endswith("UNSUBSCRIBE") and len(cmd) == 1 and frames and \
            frames[0][:2] in (b"*3", b">3"):
        n = next((i for i, f in enumerate(frames) if f[:2] not in (b"*3", b">3")), len(frames))
        vals = [parse(f) for f in frames[:n]]
        names = sorted(v[1] or b"" for v in vals)
        return [b"<%s %r %d>" % (v[0], names[i], v[2]) for i, v in enumerate(vals)] + frames[n:]
    return frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--conns", type=int, default=5)
    ap.add_argument("--rlimitd")
    ap.add_argument("--self-check", action="store_true")
    a = ap.parse_args()
    seed = pick_seed(a.seed)
    print("client_diff: seed %d, %d steps, %d connections" % (seed, a.steps, a.conns))
    initial, steps = gen(seed, a.steps, a.conns)
    servers, runs = [], []
    failed = False
    kills = closes = lists = 0
    try:
        redis = start_redis()
        servers.append(redis)
        if a.self_check:
            other = start_redis()
            names = ("redis-server", "redis-server#2")
        else:
            other = start_rlimitd(resolve_rlimitd(a.rlimitd))
            names = ("rlimitd", "redis-server")
        servers.append(other)
        runs = [Run(other.port, initial), Run(redis.port, initial)]
        for n, (c, cmd) in enumerate(steps):
            fa, ca = runs[0].step(n, c, cmd)
            fb, cb = runs[1].step(n, c, cmd)
            ka, kb = canon(fa, cmd), canon(fb, cmd)
            if ka != kb or ca != cb:
                print("FAIL seed %d step %d: connection %d ran %s" % (seed, n, c, show(cmd)))
                print("  %-15s %s closed=%s" % (names[0], show(ka, 1200), ca))
                print("  %-15s %s closed=%s" % (names[1], show(kb, 1200), cb))
                for back in range(max(0, n - 10), n):
                    print("    step %d: connection %d ran %s" % (back, steps[back][0],
                                                                 show(steps[back][1], 200)))
                failed = True
                break
            kills += cmd[:2] == ["CLIENT", "KILL"] and fa[:1] not in ([], [b":0\r\n"]) and \
                fa[0][:1] in b":+"
            closes += sum(ca)
            lists += cmd[:2] == ["CLIENT", "LIST"] and fa[:1] != [] and fa[0][:1] in b"$="
    finally:
        for r in runs:
            r.close()
        problems = [s.stop() for s in servers]
    for p in problems:
        if p:
            print(p)
            failed = True
    if failed:
        print("0 passed, 1 failed")
        return 1
    print("client_diff: %d steps compared; %d CLIENT LIST replies, %d CLIENT KILL that killed "
          "or counted, %d connections closed and opened again" % (len(steps), lists, kills,
                                                                  closes))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
