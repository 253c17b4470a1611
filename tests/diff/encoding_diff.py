#!/usr/bin/env python3
"""encoding_diff.py - the encoding tunables honoured by storage, against Debian's redis-server 7.0.

Usage:
  RLIMITD_BIN=build/rlimitd python3 tests/diff/encoding_diff.py [--rounds N] [--seed S] [--resp3]

Each round sets hash-max-listpack-entries/-value and zset-max-listpack-entries/-value (or their
ziplist aliases) on both servers to seeded values (0, 1 and small ones often, past a length byte
sometimes), then sends the same seeded stream of hash and sorted-set writes and reads to both,
comparing every reply byte for byte: HGETALL/HKEYS/HVALS order (a packed hash's is insertion
order), OBJECT ENCODING, ZRANGE ... WITHSCORES and ZSCORE (a -0 score reads back as "0" from a
packed set, "-0" from a big one, so the moment of conversion shows). Keys live across rounds, so
a hash that converted and shrank, or whose bounds were lowered under it, is exercised too. The
one reply compared loosely: HGETALL/HKEYS/HVALS of a hash Redis reports as "hashtable" (its
order is its dict's, seeded at random), compared as multisets. Some rounds end with a reload:
redis-server DEBUG RELOAD, rlimitd SAVE and a restart from its snapshot with the same tunables;
the encodings and contents must then agree again (a hash that fits is packed again after a load,
in both).

A sorted set's bounds stay within what rlimitd's packed set holds (128 members of 255 bytes;
docs/CONFIG.md). The seed (--seed, else $DIFF_SEED, else the time) is printed first; a
difference prints it with the command and the key's recent history. Ends "N passed, N failed".
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Cmd  # noqa: E402

HKEYS = ["h%d" % i for i in range(4)]
ZKEYS = ["z%d" % i for i in range(4)]
RESP = 2


def unordered(cmds, ra, rb, i):
    """HGETALL/HKEYS/HVALS: byte equality, or the same multiset when Redis stores the hash as a
    table (the OBJECT ENCODING right after it, which is compared exactly itself)."""
    if ra[i] == rb[i]:
        return None
    if b"hashtable" not in rb[i + 1]:
        return "replies differ (listpack: insertion order)"
    a, b = common.parse(ra[i]), common.parse(rb[i])
    if not isinstance(a, list) or not isinstance(b, list):
        return "replies differ"
    if cmds[i].args[0] == "HGETALL":
        a, b = list(zip(a[::2], a[1::2])), list(zip(b[::2], b[1::2]))
    return None if sorted(a) == sorted(b) else "different contents"


def pick_len(rng, limit):
    """A length around the bound: often at it or one past it."""
    r = rng.random()
    if r < 0.3:
        return max(0, limit + rng.choice((-1, 0, 0, 1)))
    if r < 0.5:
        return rng.randrange(0, 3)
    return rng.randrange(0, min(limit, 300) + 3)


def rand_str(rng, n):
    return "".join(rng.choice("abcxyz0123") for _ in range(n))


def tunables(rng):
    def pick(small, big):
        r = rng.random()
        if r < 0.25:
            return rng.choice((0, 1))
        if r < 0.7:
            return rng.randrange(2, small)
        return rng.randrange(small, big)
    he, hv = pick(12, 700), pick(12, 400)
    ze, zv = pick(12, 129), pick(12, 256)
    return he, hv, ze, zv


def config_cmds(rng, t):
    he, hv, ze, zv = t
    alias = rng.random() < 0.3
    kind = "ziplist" if alias else "listpack"
    out = []
    for name, v in (("hash-max-%s-entries", he), ("hash-max-%s-value", hv),
                    ("zset-max-%s-entries", ze), ("zset-max-%s-value", zv)):
        out.append(Cmd(["CONFIG", "SET", name % kind, str(v)]))
    return out


def round_cmds(rng, t, n):
    he, hv, ze, zv = t
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            k = rng.choice(HKEYS)
            op = rng.random()
            if op < 0.45:
                args = ["HSET", k]
                for _ in range(rng.choice((1, 1, 2, 5))):
                    args += [rand_str(rng, pick_len(rng, hv))[:40] if rng.random() < 0.8
                             else rand_str(rng, pick_len(rng, hv)),
                             rand_str(rng, pick_len(rng, hv))]
                yield Cmd(args, key=k)
            elif op < 0.5:
                # HSETNX of a long pair converts even when the field exists (Redis checks the
                # lengths first); kept within the bound here (docs/COMMANDS.md).
                yield Cmd(["HSETNX", k, rand_str(rng, min(hv, rng.randrange(0, 4))),
                           rand_str(rng, rng.randrange(0, hv + 1) if hv < 300 else 5)], key=k)
            elif op < 0.6:
                yield Cmd(["HINCRBY", k, "n%d" % rng.randrange(3), str(rng.randrange(-99, 99))],
                          key=k)
            elif op < 0.72:
                yield Cmd(["HDEL", k] + [rand_str(rng, rng.randrange(0, 3))
                                         for _ in range(rng.choice((1, 3, 8)))], key=k)
            elif op < 0.74:
                yield Cmd(["DEL", k], key=k)
            else:
                read = rng.choice(("HGETALL", "HKEYS", "HVALS"))
                yield Cmd([read, k], key=k, check=unordered, follow=1)
                yield Cmd(["OBJECT", "ENCODING", k], key=k)
                yield Cmd(["HLEN", k], key=k)
        else:
            k = rng.choice(ZKEYS)
            op = rng.random()
            if op < 0.45:
                args = ["ZADD", k]
                for _ in range(rng.choice((1, 1, 2, 4))):
                    args += [rng.choice(("-0", "0", "1", "-1.5", "2", "1e3", "-0.0")),
                             rand_str(rng, pick_len(rng, zv))]
                yield Cmd(args, key=k)
            elif op < 0.55:
                yield Cmd(["ZINCRBY", k, rng.choice(("-0", "0", "1")),
                           rand_str(rng, rng.randrange(0, 3))], key=k)
            elif op < 0.68:
                yield Cmd(["ZREM", k] + [rand_str(rng, rng.randrange(0, 3))
                                         for _ in range(rng.choice((1, 4, 10)))], key=k)
            elif op < 0.7:
                yield Cmd(["DEL", k], key=k)
            else:
                yield Cmd(["ZRANGE", k, "0", "-1", "WITHSCORES"], key=k)
                yield Cmd(["OBJECT", "ENCODING", k], key=k)
                yield Cmd(["ZSCORE", k, rand_str(rng, rng.randrange(0, 2))], key=k)


def conf_args(t):
    he, hv, ze, zv = t
    return ["--hash-max-listpack-entries", str(he), "--hash-max-listpack-value", str(hv),
            "--zset-max-listpack-entries", str(ze), "--zset-max-listpack-value", str(zv)]


class Rlimitd:
    """rlimitd with a snapshot directory that outlives its restarts."""

    def __init__(self, binary):
        self.binary = binary
        self.data = tempfile.mkdtemp(prefix="rlimitd-enc-data.")
        self.srv = None

    def start(self, extra=()):
        port = common.free_port()
        work = tempfile.mkdtemp(prefix="rlimitd-enc.")
        argv = [self.binary, "-c", os.path.join(common.ROOT, "conf", "rlimitd.conf"),
                "--port", str(port), "--bind", "127.0.0.1", "--dir", self.data,
                "--save-interval", "0", "--threads", "2", *extra]
        self.srv = common.Server("rlimitd", argv, port, work)
        return self.srv

    def stop(self):
        problem = self.srv.stop() if self.srv is not None else None
        self.srv = None
        return problem

    def remove(self):
        shutil.rmtree(self.data, ignore_errors=True)


def connect(port):
    c = common.Resp(port, resp=RESP)
    if RESP == 3:
        c.call("HELLO", "3")
    return c


def run(opts, seed, tally):
    rng = random.Random(seed)
    red = common.start_redis(["--enable-debug-command", "yes"])
    rl = Rlimitd(opts.rlimitd)
    compared = 0
    try:
        rl.start()
        a, b = connect(rl.srv.port), connect(red.port)
        for rnd in range(opts.rounds):
            t = tunables(rng)
            cmds = config_cmds(rng, t) + list(round_cmds(rng, t, opts.per_round))
            reload = rng.random() < 0.25
            try:
                compared += common.run_streams(cmds, a, b, seed=seed)
                if reload:
                    # A hash that was a table may come back packed, in its dict's order there:
                    # its HGETALL is compared as a multiset (Redis says hashtable before), then
                    # the hashes start over so insertion order is comparable again.
                    if a.call("SAVE") != b"+OK\r\n" or b.call("DEBUG", "RELOAD") != b"+OK\r\n":
                        raise common.Mismatch("SAVE or DEBUG RELOAD failed")
                    a.close()
                    problem = rl.stop()
                    if problem:
                        raise common.Mismatch(problem)
                    rl.start(conf_args(t))
                    a = connect(rl.srv.port)
                    compared += common.run_streams(
                        list(reads_after_reload()) + [Cmd(["DEL", *HKEYS])], a, b, seed=seed)
            except common.Mismatch as e:
                print("round %d, tunables %r%s" % (rnd, t, ", after a reload" if reload else ""))
                print(e)
                tally.ok("round %d" % rnd, False)
                return compared
            tally.ok("round %d" % rnd, True)
        a.close()
        b.close()
    finally:
        problem = rl.stop()
        rl.remove()
        red.stop()
    tally.ok("rlimitd stopped cleanly", problem is None, problem or "")
    return compared


def reads_after_reload():
    for k in HKEYS:
        yield Cmd(["HGETALL", k], key=k, check=reloaded_hash, follow=1)
        yield Cmd(["OBJECT", "ENCODING", k], key=k)
        yield Cmd(["HLEN", k], key=k)
    for k in ZKEYS:
        yield Cmd(["ZRANGE", k, "0", "-1", "WITHSCORES"], key=k)
        yield Cmd(["OBJECT", "ENCODING", k], key=k)


def reloaded_hash(cmds, ra, rb, i):
    """After a reload a hash's pairs come in the order its save wrote them, which for a hash that
    was a table is its dict's: the same multiset is asked for, the encoding exactly."""
    a, b = common.parse(ra[i]), common.parse(rb[i])
    if not isinstance(a, list) or not isinstance(b, list):
        return None if ra[i] == rb[i] else "replies differ"
    a, b = list(zip(a[::2], a[1::2])), list(zip(b[::2], b[1::2]))
    return None if sorted(a) == sorted(b) else "different contents"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rlimitd", help="rlimitd binary (default: $RLIMITD_BIN)")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--per-round", type=int, default=400)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--resp3", action="store_true")
    opts = ap.parse_args()
    opts.rlimitd = common.resolve_rlimitd(opts.rlimitd)
    global RESP
    RESP = 3 if opts.resp3 else 2
    seed = opts.seed
    if seed is None:
        seed = int(os.environ["DIFF_SEED"]) if os.environ.get("DIFF_SEED") else \
            int(time.time() * 1000) % 1000000007
    print("encoding_diff: seed %d, %d rounds, RESP%d (rerun: DIFF_SEED=%d)"
          % (seed, opts.rounds, RESP, seed), flush=True)
    tally = common.Tally()
    n = run(opts, seed, tally)
    print("%d commands compared" % n)
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
