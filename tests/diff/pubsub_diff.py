#!/usr/bin/env python3
"""Pub/Sub differential (issue 30): a seeded stream of subscribe, publish, unsubscribe and
PUBSUB commands over several connections, some on RESP2 and some on RESP3 (and switching with
HELLO and RESET), sent to rlimitd (2 I/O threads, so publisher and subscriber are often on
different threads) and to Debian's redis-server 7.0; every frame every connection receives is
compared in order.

One step is one command (or one MULTI ... EXEC block) on one connection. After each step every
connection is sent `PING sync-<step>` and read up to its answer, so each connection's frames of
that step (its own replies, and the messages other connections' PUBLISH delivered to it) are
complete: a message published before the PING reaches its subscriber before the PING's reply,
on redis-server because it is one thread, on rlimitd because a thread delivers what waits for
it before running a connection's next commands.

Compared loosely, where Redis's own order is its hash tables' (random seed per process):
UNSUBSCRIBE / SUNSUBSCRIBE without arguments (the names as a set, the counts in order),
PUBSUB CHANNELS / SHARDCHANNELS (as sets), the pmessages one PUBLISH sends one connection
(ordered by message, then pattern); HELLO's map (server name, version and id differ) only by
its protocol. Everything else byte for byte.

Usage: pubsub_diff.py [--seed N] [--steps N] [--conns N] [--rlimitd PATH]
       pubsub_diff.py --self-check    (redis-server against redis-server)
On a difference: the seed, the step, its command, the connection, the first differing frame of
each server, the last steps; then "0 passed, 1 failed", exit 1."""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, parse, pick_seed, resolve_rlimitd, show, start_redis, \
    start_rlimitd  # noqa: E402

CHANNELS = ["ch1", "ch2", "news.tech", "news.art", "a*b", "", "x\\y", "\x00bin", "h[e]llo",
            "hello", "hallo", "n3ws.tech"]
PATTERNS = ["news.*", "ch?", "*", "ch[12]", "ch[^1]", "n[a-z]ws.*", "a\\*b", "h[ae]llo",
            "h[!a]llo", "[", "\\", "*tech", "", "h?llo", "ch[1-", "x\\\\y", "*\x00*", "n[0-9]ws*",
            "ch[2-1]"]
SHARDS = ["s1", "s2", "{tag}s", ""]
SCRIPT_PUB = "return redis.call('publish', KEYS[1], ARGV[1])"
SCRIPT_PUB2 = ("local a = redis.call('publish', KEYS[1], ARGV[1]) "
               "local b = redis.call('spublish', KEYS[2], ARGV[1]) return {a, b}")
SCRIPT_SUB = "return redis.call('subscribe', KEYS[1])"


class Model:
    """What the generator needs to know of each connection: its protocol and subscriptions
    (only to keep the stream away from what Redis 7.0 itself answers inconsistently, see
    gen())."""

    def __init__(self, resp):
        self.resp = resp
        self.subs = set()
        self.psubs = set()
        self.ssubs = set()

    def subscribed(self):
        return bool(self.subs or self.psubs or self.ssubs)


def pick(rng, pool, lo=1, hi=3):
    return rng.sample(pool, rng.randint(lo, min(hi, len(pool))))


def gen(seed, steps, nconns):
    """The steps: (connection, [commands]) with the per-connection model kept alongside."""
    rng = random.Random(seed)
    models = [Model(3 if rng.random() < 0.5 else 2) for _ in range(nconns)]
    initial = [m.resp for m in models]
    out = []
    msgno = 0
    for _ in range(steps):
        c = rng.randrange(nconns)
        m = models[c]
        r = rng.random()
        msgno += 1
        msg = "m%06d" % msgno
        if r < 0.16:
            names = pick(rng, CHANNELS)
            cmds = [["SUBSCRIBE", *names]]
            m.subs.update(names)
        elif r < 0.26:
            names = pick(rng, PATTERNS)
            cmds = [["PSUBSCRIBE", *names]]
            m.psubs.update(names)
        elif r < 0.31:
            names = pick(rng, SHARDS, 1, 2)
            cmds = [["SSUBSCRIBE", *names]]
            m.ssubs.update(names)
        elif r < 0.37:
            if rng.random() < 0.35:
                cmds = [["UNSUBSCRIBE"]]
                m.subs.clear()
            else:
                names = pick(rng, CHANNELS)
                cmds = [["UNSUBSCRIBE", *names]]
                m.subs.difference_update(names)
        elif r < 0.42:
            if rng.random() < 0.35:
                cmds = [["PUNSUBSCRIBE"]]
                m.psubs.clear()
            else:
                names = pick(rng, PATTERNS)
                cmds = [["PUNSUBSCRIBE", *names]]
                m.psubs.difference_update(names)
        elif r < 0.45:
            if rng.random() < 0.4:
                cmds = [["SUNSUBSCRIBE"]]
                m.ssubs.clear()
            else:
                names = pick(rng, SHARDS, 1, 2)
                cmds = [["SUNSUBSCRIBE", *names]]
                m.ssubs.difference_update(names)
        elif r < 0.68:
            cmds = [["PUBLISH", rng.choice(CHANNELS), msg]]
        elif r < 0.72:
            cmds = [["SPUBLISH", rng.choice(SHARDS), msg]]
        elif r < 0.76:
            cmds = [["PING"] if rng.random() < 0.5 else ["PING", msg]]
        elif r < 0.81:
            sub = rng.choice(["NUMSUB", "NUMPAT", "CHANNELS", "CHANNELS", "SHARDCHANNELS",
                              "SHARDNUMSUB", "HELP", "NOPE", "CHANNELS2", "NUMPATX"])
            if sub == "NUMSUB":
                cmds = [["PUBSUB", "NUMSUB", *pick(rng, CHANNELS, 0, 4)]]
            elif sub == "SHARDNUMSUB":
                cmds = [["PUBSUB", "SHARDNUMSUB", *pick(rng, SHARDS, 0, 3)]]
            elif sub in ("CHANNELS", "SHARDCHANNELS"):
                cmds = [["PUBSUB", sub] + ([rng.choice(PATTERNS)] if rng.random() < 0.6 else [])]
            elif sub == "CHANNELS2":
                cmds = [["PUBSUB", "channels", "*", "x"]]
            elif sub == "NUMPATX":
                cmds = [["PUBSUB", "NUMPAT", "x"]]
            else:
                cmds = [["PUBSUB", sub.lower() if rng.random() < 0.5 else sub]]
        elif r < 0.84:
            cmds = [rng.choice([["GET", "k"], ["SET", "k", msg], ["CLIENT", "GETNAME"],
                                ["SUBSCRIBE"], ["PUBLISH", "ch1"], ["PSUBSCRIBE"],
                                ["ECHO", msg], ["SSUBSCRIBE"], ["SPUBLISH", "s1"]])]
        elif r < 0.87:
            # HELLO is refused in the RESP2 subscribed state; elsewhere it switches protocol.
            v = rng.choice([2, 3])
            cmds = [["HELLO", str(v)]]
            if not (m.resp == 2 and m.subscribed()):
                m.resp = v
        elif r < 0.89:
            cmds = [["RESET"]]
            m.resp = 2
            m.subs.clear()
            m.psubs.clear()
            m.ssubs.clear()
        elif r < 0.94:
            # Scripts publish (and may not subscribe).
            which = rng.random()
            if which < 0.6:
                cmds = [["EVAL", SCRIPT_PUB, "1", rng.choice(CHANNELS), msg]]
            elif which < 0.85:
                cmds = [["EVAL", SCRIPT_PUB2, "2", rng.choice(CHANNELS), rng.choice(SHARDS),
                         msg]]
            else:
                cmds = [["EVAL", SCRIPT_SUB, "1", "ch1"]]
        else:
            # A transaction of publishes (and a subscribe) on a connection holding no
            # subscription: Redis 7.0 writes a message for the connection itself inside EXEC's
            # array, which no client can read, so the stream never asks for one.
            if m.subscribed():
                cmds = [["PUBLISH", rng.choice(CHANNELS), msg]]
            else:
                body = [["PUBLISH", rng.choice(CHANNELS), msg],
                        ["SPUBLISH", rng.choice(SHARDS), msg + "s"],
                        ["PUBLISH", rng.choice(CHANNELS), msg + "b"]]
                if rng.random() < 0.3:
                    body.append(["SSUBSCRIBE", "s1"])
                if rng.random() < 0.3:
                    names = pick(rng, CHANNELS, 1, 2)
                    body.append(["SUBSCRIBE", *names])
                    m.subs.update(names)
                cmds = [["MULTI"], *body, ["EXEC"]]
        out.append((c, cmds))
    return initial, out


# ---- canonical frames ---------------------------------------------------------------------


def canon(frames, cmds):
    """The frames of one step on one connection, with Redis's hash-table orders made
    canonical (see the module's docstring)."""
    frames = list(frames)
    # HELLO: only the protocol is compared.
    for i, f in enumerate(frames):
        if f[:1] in (b"%", b"*") and b"$6\r\nserver\r\n" in f[:40] and b"$5\r\nproto\r\n" in f:
            proto = f.split(b"$5\r\nproto\r\n", 1)[1].split(b"\r\n", 1)[0]
            frames[i] = b"<HELLO " + f[:1] + b" proto " + proto + b">"
    lone = len(cmds) == 1
    if lone and cmds[0][0] in ("UNSUBSCRIBE", "SUNSUBSCRIBE") and len(cmds[0]) == 1:
        kind = cmds[0][0].lower().encode()
        idx = [i for i, f in enumerate(frames)
               if f[1:2] == b"3" and b"\r\n" + kind + b"\r\n" in f[:30]]
        vals = [parse(frames[i]) for i in idx]
        names = sorted(v[1] if v[1] is not None else b"" for v in vals)
        for j, i in enumerate(idx):
            frames[i] = b"<" + kind + b" " + repr(names[j]).encode() + b" " + \
                str(vals[j][2]).encode() + b">"
    if lone and cmds[0][0] == "PUBSUB" and len(cmds[0]) >= 2 and \
            cmds[0][1].upper() in ("CHANNELS", "SHARDCHANNELS"):
        for i, f in enumerate(frames):
            if f[:1] == b"*" and not f.startswith(b"*-"):
                try:
                    v = parse(f)
                except Exception:  # noqa: BLE001 - not the reply: left as it is
                    continue
                if isinstance(v, list) and all(isinstance(x, bytes) for x in v):
                    frames[i] = b"<channels " + repr(sorted(v)).encode() + b">"
                    break
    # Runs of pmessages: by (message, pattern).
    i = 0
    while i < len(frames):
        j = i
        while j < len(frames) and frames[j][1:2] == b"4" and b"$8\r\npmessage\r\n" in frames[j][:20]:
            j += 1
        if j - i > 1:
            run = frames[i:j]
            run.sort(key=lambda f: (parse(f)[3], parse(f)[1]))
            frames[i:j] = run
        i = max(j, i + 1)
    return frames


# ---- running ------------------------------------------------------------------------------


def sync_token(step):
    return "sync-%d" % step


def read_until_sync(conn, token):
    frames = []
    tok = token.encode()
    deadline = time.monotonic() + 120
    while True:
        f = conn.read()
        if f.endswith(b"\r\n" + tok + b"\r\n") and f[:1] in (b"$", b"*") and len(f) < 64 + len(tok):
            return frames
        frames.append(f)
        if time.monotonic() > deadline:
            raise RuntimeError("no sync reply within 120 s")


def run(port, initial, steps):
    """Every step's frames per connection: a list (per step) of lists (per connection)."""
    conns = [Resp(port, resp=r) for r in initial]
    result = []
    try:
        for n, (c, cmds) in enumerate(steps):
            conns[c].send(cmds)
            tok = sync_token(n)
            # The connection that ran the step first, so its publishes are done before the
            # others are asked for their frames.
            order = [c] + [i for i in range(len(conns)) if i != c]
            got = [None] * len(conns)
            for i in order:
                conns[i].send([["PING", tok]])
                got[i] = read_until_sync(conns[i], tok)
            result.append(got)
    finally:
        for x in conns:
            x.close()
    return result


def compare(seed, steps, ra, rb, names):
    for n, (c, cmds) in enumerate(steps):
        for i in range(len(ra[n])):
            fa = canon(ra[n][i], cmds if i == c else [])
            fb = canon(rb[n][i], cmds if i == c else [])
            if fa == fb:
                continue
            k = next((k for k in range(max(len(fa), len(fb)))
                      if k >= len(fa) or k >= len(fb) or fa[k] != fb[k]), 0)
            print("FAIL seed %d step %d: connection %d ran %s; connection %d's frame #%d differs"
                  % (seed, n, c, show(cmds, 300), i, k))
            print("  %-13s %s" % (names[0], show(fa[k], 400) if k < len(fa) else "(no frame)"))
            print("  %-13s %s" % (names[1], show(fb[k], 400) if k < len(fb) else "(no frame)"))
            print("  all of %s: %s" % (names[0], show(fa, 800)))
            print("  all of %s: %s" % (names[1], show(fb, 800)))
            for back in range(max(0, n - 8), n):
                print("    step %d: connection %d ran %s" % (back, steps[back][0],
                                                             show(steps[back][1], 200)))
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--conns", type=int, default=6)
    ap.add_argument("--rlimitd")
    ap.add_argument("--self-check", action="store_true")
    a = ap.parse_args()
    seed = pick_seed(a.seed)
    print("pubsub_diff: seed %d, %d steps, %d connections" % (seed, a.steps, a.conns))
    initial, steps = gen(seed, a.steps, a.conns)
    servers = []
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
        ra = run(other.port, initial, steps)
        rb = run(redis.port, initial, steps)
    finally:
        problems = [s.stop() for s in servers]
    for p in problems:
        if p:
            print(p)
            print("0 passed, 1 failed")
            return 1
    if not compare(seed, steps, ra, rb, names):
        print("0 passed, 1 failed")
        return 1
    frames = sum(len(f) for st in ra for f in st)
    kinds = {}
    for _, cmds in steps:
        for cmd in cmds:
            kinds[cmd[0]] = kinds.get(cmd[0], 0) + 1
    print("pubsub_diff: %d steps, %d frames compared besides the sync replies; commands: %s"
          % (len(steps), frames, ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
