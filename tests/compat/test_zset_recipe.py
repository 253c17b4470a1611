#!/usr/bin/python3
"""The sorted-set rate-limit recipe in redis-py, against rlimitd and redis-server (issue 14).

    /usr/bin/python3 tests/compat/test_zset_recipe.py                  # both (what run.sh does)
    TARGET=redis /usr/bin/python3 tests/compat/test_zset_recipe.py     # redis-server only
    TARGET=rlimitd RLIMITD=build/rlimitd /usr/bin/python3 tests/compat/test_zset_recipe.py

The recipe, one redis-py transaction pipeline per call (now and the window in ms):
    MULTI; ZREMRANGEBYSCORE key 0 now-window; ZADD key now now; ZCARD key; PEXPIRE key window; EXEC
allowed when ZCARD <= limit. 5 per 10 s on a fresh key, 7 calls: exactly 5 allowed, 2 denied;
remaining = max(0, 5 - ZCARD); reset = the oldest entry + the window, between the clock read
before the first call and after the last, plus the window. The member is the ms timestamp, so two
calls in the same millisecond would be one entry (the recipe's flaw, not the server's): the test
waits for the clock to move on between calls. If the 7 calls took longer than the window (a
stalled machine) the count checks are skipped, never asserted.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat  # noqa: E402

import redis  # noqa: E402  (python3-redis, installed by run.sh)

WINDOW_MS = 10000
LIMIT = 5
CALLS = 7
TARGETS = os.environ.get("TARGET", "rlimitd redis").replace(",", " ").split()


class RedisServer:
    """Debian's redis-server on a free port, persistence off; killed at the end."""

    def __init__(self):
        self.port = compat.free_port()
        self.dir = tempfile.mkdtemp(prefix="zset-recipe-redis-")
        self.log = open(os.path.join(self.dir, "redis.log"), "wb")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        if not compat.wait_for(lambda: self.proc.poll() is not None or
                               compat.port_open(self.port), 15):
            self.stop()
            raise RuntimeError("redis-server did not listen on %d" % self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def now_ms():
    return int(time.time() * 1000)


_last = [0]


def recipe(r, key):
    """One call; returns (allowed, count, the EXEC replies). Never two in the same millisecond:
    they would be one member."""
    now = now_ms()
    while now <= _last[0]:
        time.sleep(0.001)
        now = now_ms()
    _last[0] = now
    p = r.pipeline(transaction=True)
    p.zremrangebyscore(key, 0, now - WINDOW_MS)
    p.zadd(key, {str(now): now})
    p.zcard(key)
    p.pexpire(key, WINDOW_MS)
    replies = p.execute()
    count = replies[2]
    return count <= LIMIT, count, replies


def test(res, target, port):
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30, decode_responses=True)
    key = "recipe:user-1"
    name = "%s: recipe" % target
    t0 = now_ms()
    calls = []
    for _ in range(CALLS):
        calls.append(recipe(r, key))
    t1 = now_ms()
    if t1 - t0 >= WINDOW_MS:
        print("skip   %s counts: the calls took %d ms, longer than the window" % (name, t1 - t0))
        res.skipped += 1
        return
    allowed = [c[0] for c in calls]
    res.eq(name + ": 5 allowed, 2 denied", (allowed.count(True), allowed.count(False)), (5, 2))
    res.eq(name + ": allowed pattern", allowed, [True] * 5 + [False] * 2)
    res.eq(name + ": ZCARD after each call", [c[1] for c in calls], [1, 2, 3, 4, 5, 6, 7])
    res.eq(name + ": remaining", [max(0, LIMIT - c[1]) for c in calls], [4, 3, 2, 1, 0, 0, 0])
    res.eq(name + ": ZREMRANGEBYSCORE removed nothing, ZADD added one, PEXPIRE set",
           [(c[2][0], c[2][1], c[2][3]) for c in calls], [(0, 1, True)] * CALLS)
    oldest = r.zrange(key, 0, 0, withscores=True)
    ok = len(oldest) == 1 and oldest[0][0] == str(int(oldest[0][1]))
    res.check(name + ": the oldest member is its own ms score", ok, repr(oldest))
    if ok:
        reset = int(oldest[0][1]) + WINDOW_MS
        res.check(name + ": reset within [first call, last call] + window",
                  t0 + WINDOW_MS <= reset <= t1 + WINDOW_MS, "reset %d, t0 %d, t1 %d" % (reset, t0, t1))
    pttl = r.pttl(key)
    res.check(name + ": PTTL within the window", 0 < pttl <= WINDOW_MS, "pttl %r" % pttl)
    scores = r.zrange(key, 0, -1, withscores=True)
    res.check(name + ": members are 13-digit ms equal to their scores",
              len(scores) == CALLS and all(m == str(int(s)) and len(m) == 13 for m, s in scores),
              repr(scores))
    # Entries older than the window go: a ZADD with an old score, then the recipe's trim.
    r.zadd(key, {"1": 1})
    _, count, _ = recipe(r, key)
    res.check(name + ": the trim removes entries older than the window",
              r.zscore(key, "1") is None and count == CALLS + 1, "count %d" % count)
    r.close()


def main():
    res = compat.Results("test_zset_recipe")
    for target in TARGETS:
        if target not in ("rlimitd", "redis"):
            sys.exit("TARGET: rlimitd and/or redis, not %r" % target)
        server = None
        try:
            if target == "rlimitd":
                server = compat.Daemon("--save-interval", "0")
            else:
                server = RedisServer()
            test(res, target, server.port)
        except Exception as e:  # noqa: BLE001 - any failure is a test failure
            res.check("%s: recipe" % target, False, "%s: %s" % (type(e).__name__, e))
        finally:
            if server is not None:
                server.stop()
    res.finish()


if __name__ == "__main__":
    main()
