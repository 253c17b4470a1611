#!/usr/bin/env python3
"""Keyspace notifications differential (issue 30): a seeded stream of write and read commands
over strings, hashes, lists and sorted sets is sent to rlimitd (2 I/O threads) and to Debian's
redis-server 7.0, each with one connection PSUBSCRIBEd to `__key*__:*`; every notification frame
is compared in order, byte for byte, and so is every command reply.

notify-keyspace-events is set from the seed (and changed now and then inside the stream) among
class sets that cover every letter rlimitd raises events for, K and E alone and together.

Synchronisation without the clock: after each batch the command connection PUBLISHes a marker on
a channel the subscriber also holds; the subscriber reads up to that marker. On both servers the
events of a connection's commands reach a subscriber in the order they were raised, and before
the marker that connection publishes after them (rlimitd delivers one publisher's messages in
order across threads), so the frames before a marker are exactly that batch's.

Expiry is left out of the stream on purpose (when a key expires is the clock's business): every
TTL set is hours away, or in the past (deleting at once, which both servers do). The expiry
events are tested by keyspace_events_expiry.py.

Usage: keyspace_events_diff.py [--seed N] [--steps N] [--rlimitd PATH]
       keyspace_events_diff.py --self-check    (redis-server against redis-server)
On a difference: the seed, the batch, its commands, the first differing frame of each server;
then "0 passed, 1 failed", exit 1."""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, resolve_rlimitd, show, start_redis, start_rlimitd  # noqa: E402

KEYS = ["s1", "s2", "n1", "h1", "h2", "l1", "l2", "z1", "z2", "k\x00bin", "key:{x}"]
FIELDS = ["f1", "f2", "f3", "tokens", "ts"]
MEMBERS = ["a", "b", "c", "d", "e"]
# Class sets: Redis's letters only (what both servers accept), with K, E or both.
CLASSES = ["KEA", "KA", "EA", "KEAn", "KEg", "KE$", "KEl", "KEh", "KEz", "KEgx", "Eg$lhzn",
           "K$hn", "KE", "", "AKE", "KEgl$", "KEm", "KEAm", "Em$x"]
HOURS = 3600 * 5


def pick(rng, seq):
    return seq[rng.randrange(len(seq))]


def gen_command(rng):
    """One command; values and counts small so that keys empty and refill often."""
    k = pick(rng, KEYS)
    k2 = pick(rng, KEYS)
    v = str(rng.randrange(0, 20))
    f = pick(rng, FIELDS)
    m = pick(rng, MEMBERS)
    r = rng.random
    c = rng.randrange(49)
    if c == 0:
        return ["SET", k, v]
    if c == 1:
        return ["SET", k, v, pick(rng, ["EX", "PX"]), str(HOURS * (1000 if r() < 0.5 else 1))]
    if c == 2:
        return ["SET", k, v, pick(rng, ["NX", "XX", "GET", "KEEPTTL"])]
    if c == 3:
        return ["SETNX", k, v]
    if c == 4:
        return ["SETEX", k, str(HOURS), v]
    if c == 5:
        return ["GETSET", k, v]
    if c == 6:
        return ["GETDEL", k]
    if c == 7:
        return pick(rng, [["GETEX", k, "EX", str(HOURS)], ["GETEX", k, "PERSIST"],
                          ["GETEX", k, "PXAT", "1"], ["GETEX", k]])
    if c == 8:
        return ["MSET", k, v, k2, v]
    if c == 9:
        return ["MSETNX", k, v, k2, v]
    if c == 10:
        return pick(rng, [["INCR", k], ["DECR", k], ["INCRBY", k, "5"], ["DECRBY", k, "3"]])
    if c == 11:
        return ["INCRBYFLOAT", k, pick(rng, ["1.5", "-0.25", "3"])]
    if c == 12:
        return ["APPEND", k, v]
    if c == 13:
        return ["DEL", k, k2] if r() < 0.5 else ["UNLINK", k]
    if c == 14:
        return [pick(rng, ["EXPIRE", "PEXPIRE"]), k,
                pick(rng, [str(HOURS), "-1", "0", str(HOURS * 1000)])] + \
            ([pick(rng, ["NX", "XX", "GT", "LT"])] if r() < 0.3 else [])
    if c == 15:
        if r() < 0.4:
            # Past the year 2262 (past int64 nanoseconds) up to the last ms Redis takes, and
            # just over it (an error, no event); GT/LT/NX/XX against each other.
            unit, t = pick(rng, [("s", "99999999999"), ("ms", "9223372036855"),
                                 ("ms", "9223372036854775807"), ("s", "9223372036854775"),
                                 ("ms", "9223372036854"), ("s", "9223372036854776")])
            how = pick(rng, ["EXPIREAT", "SET", "GETEX", "PAIR"])
            if how == "PAIR":  # two far times on one key, the second with GT or LT (gen_batch)
                return ["PAIR", k, t, pick(rng, ["9223372036854775807", "9223372036855",
                                                 "99999999999000"]), pick(rng, ["GT", "LT"])]
            if how == "EXPIREAT":
                return [("" if unit == "s" else "P") + "EXPIREAT", k, t] + \
                    ([pick(rng, ["GT", "LT", "NX", "XX"])] if r() < 0.5 else [])
            word = "EXAT" if unit == "s" else "PXAT"
            return ["SET", k, v, word, t] if how == "SET" else ["GETEX", k, word, t]
        return pick(rng, [["EXPIREAT", k, "1"], ["PEXPIREAT", k, "1"],
                          ["EXPIREAT", k, "4102444800"], ["PEXPIREAT", k, "4102444800000"]])
    if c == 16:
        return ["PERSIST", k]
    if c == 17:
        return [pick(rng, ["RENAME", "RENAMENX"]), k, k2]
    if c in (18, 19):
        return ["HSET", k, f, v] + ([pick(rng, FIELDS), v] if r() < 0.4 else [])
    if c == 20:
        return ["HMSET", k, f, v]
    if c == 21:
        return ["HSETNX", k, f, v]
    if c == 22:
        return ["HDEL", k, f] + ([pick(rng, FIELDS)] if r() < 0.5 else [])
    if c == 23:
        return ["HINCRBY", k, f, "2"]
    if c == 24:
        return ["HINCRBYFLOAT", k, f, "0.5"]
    if c in (25, 26):
        return [pick(rng, ["LPUSH", "RPUSH"]), k, v] + ([v] if r() < 0.3 else [])
    if c == 27:
        return [pick(rng, ["LPUSHX", "RPUSHX"]), k, v]
    if c == 28:
        return [pick(rng, ["LPOP", "RPOP"]), k] + ([pick(rng, ["0", "1", "3"])] if r() < 0.4
                                                   else [])
    if c == 29:
        return ["LSET", k, pick(rng, ["0", "-1", "5"]), v]
    if c == 30:
        return ["LTRIM", k, pick(rng, ["0", "1", "-2"]), pick(rng, ["-1", "0", "2"])]
    if c == 31:
        return ["LREM", k, pick(rng, ["0", "1", "-1"]), v]
    if c == 32:
        return ["LINSERT", k, pick(rng, ["BEFORE", "AFTER"]), v, v]
    if c in (33, 34):
        return ["ZADD", k] + ([pick(rng, ["NX", "XX", "GT", "LT", "CH"])] if r() < 0.3 else []) \
            + [v, m] + ([str(rng.randrange(9)), pick(rng, MEMBERS)] if r() < 0.4 else [])
    if c == 35:
        return ["ZADD", k, "INCR", v, m]
    if c == 36:
        return ["ZINCRBY", k, pick(rng, ["1", "-2", "0.5"]), m]
    if c == 37:
        return ["ZREM", k, m] + ([pick(rng, MEMBERS)] if r() < 0.5 else [])
    if c == 38:
        return ["ZREMRANGEBYSCORE", k, pick(rng, ["-inf", "0", "(3"]), pick(rng, ["+inf", "5"])]
    if c == 39:
        return ["ZREMRANGEBYRANK", k, pick(rng, ["0", "1", "-1"]), pick(rng, ["0", "-1", "2"])]
    if c == 40:
        return ["ZREMRANGEBYLEX", k, pick(rng, ["-", "[b", "(a"]), pick(rng, ["+", "[c"])]
    if c == 41:
        return [pick(rng, ["ZPOPMIN", "ZPOPMAX"]), k] + ([pick(rng, ["0", "1", "2"])]
                                                         if r() < 0.5 else [])
    if c == 42:
        return pick(rng, [["GET", k], ["HGET", k, f], ["LRANGE", k, "0", "-1"],
                          ["ZRANGE", k, "0", "-1", "WITHSCORES"], ["TYPE", k], ["EXISTS", k]])
    if c == 47:  # the read commands' keymiss (class m) on missing keys, as Redis raises it
        return pick(rng, [["MGET", k, k2], ["STRLEN", k], ["HMGET", k, f, f], ["HLEN", k],
                          ["HEXISTS", k, f], ["HSTRLEN", k, f], ["HGETALL", k], ["HKEYS", k],
                          ["HVALS", k], ["LLEN", k], ["LINDEX", k, "0"], ["LPOS", k, v],
                          ["ZCARD", k], ["ZSCORE", k, m], ["ZMSCORE", k, m], ["ZRANK", k, m],
                          ["ZREVRANK", k, m], ["ZCOUNT", k, "-inf", "+inf"],
                          ["ZLEXCOUNT", k, "-", "+"], ["ZRANGEBYSCORE", k, "-inf", "+inf"],
                          ["ZREVRANGE", k, "0", "-1"],
                          ["GETEX", k], ["GETDEL", k], ["SET", k, v, "GET"], ["GETSET", k, v],
                          ["TOUCH", k, k2], ["ZPOPMIN", k, "0"], ["LPOP", k], ["HINCRBY", k, f, "1"]])
    if c == 43:  # TTL's value would depend on when each server ran it
        return ["EXISTS", k, k2]
    if c == 44:
        return ["MULTI"]  # closed by the batch builder
    if c == 45:
        return ["EVAL", "redis.call('set', KEYS[1], ARGV[1]) "
                "return redis.call('incr', KEYS[1])", "1", k, v]
    if c == 46:
        return ["TOUCH", k]
    return ["CONFIG", "SET", "notify-keyspace-events", pick(rng, CLASSES)]


def gen_batch(rng):
    """A few commands; a MULTI gets two to four commands and its EXEC."""
    out = []
    for _ in range(rng.randrange(1, 6)):
        cmd = gen_command(rng)
        if cmd[0] == "PAIR":
            _, k, t1, t2, opt = cmd
            out += [["SET", k, "1"], ["PEXPIREAT", k, t1], ["PEXPIREAT", k, t2, opt]]
        elif cmd == ["MULTI"]:
            out.append(cmd)
            for _ in range(rng.randrange(2, 5)):
                inner = gen_command(rng)
                while inner[0] in ("MULTI", "CONFIG", "PAIR"):
                    inner = gen_command(rng)
                out.append(inner)
            out.append(["EXEC"])
        else:
            out.append(cmd)
    return out


class Side:
    """One server: a command connection and a subscriber connection."""

    def __init__(self, name, port):
        self.name = name
        self.cmd = Resp(port)
        self.sub = Resp(port)
        self.sub.send([["PSUBSCRIBE", "__key*__:*"], ["SUBSCRIBE", "ks-diff-sync"]])
        self.sub.read()
        self.sub.read()

    def run(self, batch, marker):
        self.cmd.send(batch + [["PUBLISH", "ks-diff-sync", marker]])
        replies = [self.cmd.read() for _ in range(len(batch) + 1)]
        end = b"$12\r\nks-diff-sync\r\n$%d\r\n%s\r\n" % (len(marker), marker.encode())
        frames = []
        while True:
            f = self.sub.read()
            if f.endswith(end) and f.startswith(b"*3\r\n$7\r\nmessage\r\n"):
                break
            frames.append(f)
        return replies, frames

    def close(self):
        self.cmd.close()
        self.sub.close()


def first_diff(a, b):
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return i, x, y
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DIFF_SEED", "0")) or None)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--rlimitd")
    ap.add_argument("--self-check", action="store_true")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1000000007
    print("seed %d" % seed, flush=True)
    rng = random.Random(seed)
    servers = []
    try:
        if args.self_check:
            servers = [start_redis(), start_redis()]
            names = ("redis-a", "redis-b")
        else:
            servers = [start_rlimitd(resolve_rlimitd(args.rlimitd)), start_redis()]
            names = ("rlimitd", "redis")
        sides = [Side(n, s.port) for n, s in zip(names, servers)]
        first = pick(rng, [c for c in CLASSES if c])
        for s in sides:
            s.cmd.call("CONFIG", "SET", "notify-keyspace-events", first)
        events = 0
        recent = []
        for step in range(args.steps):
            batch = gen_batch(rng)
            marker = "sync-%d" % step
            (ra, fa), (rb, fb) = (sides[0].run(batch, marker), sides[1].run(batch, marker))
            recent = (recent + [batch])[-5:]
            d = first_diff(ra, rb)
            what = "reply"
            if d is None:
                d = first_diff(fa, fb)
                what = "notification frame"
            if d is not None:
                i, x, y = d
                print("seed %d: step %d, %s %d differs" % (seed, step, what, i))
                print("  batch: %s" % show(batch))
                print("  %s: %s" % (names[0], "(none)" if x is None else show(x)))
                print("  %s: %s" % (names[1], "(none)" if y is None else show(y)))
                print("  %s frames: %s" % (names[0], show(fa, 2000)))
                print("  %s frames: %s" % (names[1], show(fb, 2000)))
                print("  last batches: %s" % show(recent[:-1], 2000))
                print("0 passed, 1 failed")
                return 1
            events += len(fa)
        for s in sides:
            s.close()
        print("%d steps, %d notification frames identical in order (seed %d)"
              % (args.steps, events, seed))
        if events < args.steps // 4:
            print("too few events for the stream to mean anything (%d)" % events)
            print("0 passed, 1 failed")
            return 1
        print("1 passed, 0 failed")
        return 0
    finally:
        for s in servers:
            problem = s.stop()
            if problem:
                print(problem)


if __name__ == "__main__":
    sys.exit(main())
