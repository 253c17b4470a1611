#!/usr/bin/env python3
"""maxmemory-policy against Debian's redis-server 7.0 (issue 28).

Both servers are filled with the same keys (persistent "p:", volatile "v:" with TTLs growing with
the index, and for the LRU/LFU runs "cold:" and "hot:" keys), then given a maxmemory a quarter of
the fill under their own used memory and a policy, then the same writes of new keys. Eviction is
sampled in both, so which keys go is compared by class, as properties each server must show:
the write replies are byte-equal, noeviction refuses, volatile-* never deletes a persistent key
and refuses once no key with an expiry is left, volatile-ttl deletes the nearest expiries first,
LRU keeps the keys touched last and LFU the keys hit most, evicted_keys counts exactly the keys
that went, INFO memory names the policy set, and an evicted key that is WATCHed aborts the
transaction.

Timing: the LRU run needs the hot keys touched at least 2 s after the cold ones (the LRU clock of
both servers counts seconds); that is measured with the server's TIME, waited for, never assumed.
Prints "N passed, N failed"; exits 1 on any failure."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, parse, start_redis, start_rlimitd  # noqa: E402

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
passed = failed = 0
VAL = "x" * 100


def short(x):
    """A list of replies as runs ("+OK x12, -OOM... x288"), so a failure prints readably."""
    if not isinstance(x, list):
        return repr(x)
    runs = []
    for r in x:
        if runs and runs[-1][0] == r:
            runs[-1][1] += 1
        else:
            runs.append([r, 1])
    return ", ".join("%r x%d" % (r[:40], n) for r, n in runs)


def check(what, got, want):
    global passed, failed
    if got == want:
        passed += 1
    else:
        failed += 1
        print("FAIL %s: got %s, want %s" % (what, short(got), short(want)))


def info_field(c, section, field):
    for line in c.call("INFO", section).split(b"\r\n"):
        if line.startswith(field.encode() + b":"):
            return line.split(b":", 1)[1]
    raise RuntimeError("no %s in INFO" % field)


def info_int(c, section, field):
    return int(info_field(c, section, field))


def server_seconds(c):
    raw = c.call("TIME")  # *2 $n secs $n usecs
    parts = raw.split(b"\r\n")
    return int(parts[2]) + int(parts[4]) / 1e6


def pipeline(c, cmds):
    c.send(cmds)
    return [c.read() for _ in cmds]


def exists(c, keys):
    return [r == b":1\r\n" for r in pipeline(c, [["EXISTS", k] for k in keys])]


def scenario(c, policy, persistent=1000, volatile=3000, lru=False, lfu=False, writes=300):
    """Fills, limits, writes; returns what the properties are checked on."""
    # The policy is set before the fill: an LFU policy counts hits only while it is set (in
    # both servers); with maxmemory 0 it deletes nothing yet.
    c.call("CONFIG", "SET", "maxmemory", "0")
    c.call("CONFIG", "SET", "maxmemory-policy", policy)
    c.call("FLUSHALL")
    # Each eviction is published as the keyspace event `evicted` (class e): a subscriber counts
    # them against evicted_keys below.
    c.call("CONFIG", "SET", "notify-keyspace-events", "Ee")
    sub = Resp(c.port)
    sub.call("SUBSCRIBE", "__keyevent@0__:evicted")
    base = info_int(c, "memory", "used_memory")
    evicted0 = info_int(c, "stats", "evicted_keys")
    p = ["p:%d" % i for i in range(persistent)]
    v = ["v:%d" % i for i in range(volatile)]
    cold = ["cold:%d" % i for i in range(1500 if (lru or lfu) else 0)]
    hot = ["hot:%d" % i for i in range(300 if (lru or lfu) else 0)]
    pipeline(c, [["SET", k, VAL] for k in p])
    pipeline(c, [["SET", k, VAL, "EX", str(100000 + 10 * i)] for i, k in enumerate(v)])
    pipeline(c, [["SET", k, VAL] for k in cold])
    if lru:
        start = server_seconds(c)
        while server_seconds(c) < start + 2.2:
            time.sleep(0.2)
    pipeline(c, [["SET", k, VAL] for k in hot])
    if lfu:
        for _ in range(60):
            pipeline(c, [["GET", k] for k in hot])
    used = info_int(c, "memory", "used_memory")
    # Redis evicts before any command once maxmemory is set (DBSIZE too), so the keys there
    # were are counted, not asked for.
    before = len(p) + len(v) + len(cold) + len(hot)
    c.call("CONFIG", "SET", "maxmemory", str(used - (used - base) // 4))
    new = ["new:%d" % i for i in range(writes)]
    replies = pipeline(c, [["SET", k, VAL] for k in new])
    # Redis goes on evicting between commands after a pass that ran out of time (its eviction
    # time event): the limit is lifted before anything is counted, so the counts agree.
    c.call("CONFIG", "SET", "maxmemory", "0")
    after = int(c.call("DBSIZE")[1:-2])
    evicted = info_int(c, "stats", "evicted_keys") - evicted0
    # Exactly that many events, each naming a key that is gone (read one by one: a missing
    # event would block until the connection's timeout and fail the run).
    events = [parse(sub.read()) for _ in range(evicted)]
    named = [e[2].decode() for e in events if isinstance(e, list) and len(e) == 3
             and e[0] == b"message" and e[1] == b"__keyevent@0__:evicted"]
    sub.close()
    c.call("CONFIG", "SET", "notify-keyspace-events", "")
    out = {
        "replies": replies,
        "info_policy": info_field(c, "memory", "maxmemory_policy"),
        "evicted": evicted,
        "events_named_gone": len(named) == evicted and not any(exists(c, named)),
        "gone": before + sum(r == b"+OK\r\n" for r in replies) - after,
        "p": exists(c, p), "v": exists(c, v), "cold": exists(c, cold), "hot": exists(c, hot),
    }
    c.call("CONFIG", "SET", "maxmemory", "0")
    return out


def rate(flags):
    return sum(flags) / len(flags) if flags else 1.0


def properties(name, policy, r):
    check("%s %s: evicted_keys counts the keys that went" % (name, policy), r["evicted"], r["gone"])
    check("%s %s: one `evicted` event per evicted key, naming it" % (name, policy),
          r["events_named_gone"], True)
    if policy == "noeviction":
        check("%s noeviction: nothing evicted" % name, r["evicted"], 0)
        return
    check("%s %s: something was evicted" % (name, policy), r["evicted"] > 0, True)
    if policy.startswith("volatile"):
        check("%s %s: no persistent key evicted" % (name, policy), all(r["p"]), True)
    if policy == "volatile-ttl":
        gone = [i for i, ok in enumerate(r["v"]) if not ok]
        kept = [i for i, ok in enumerate(r["v"]) if ok]
        # The nearest expiries go first: most of what went is in the lowest TTLs.
        low = sum(1 for i in gone if i < 2 * len(gone))
        check("%s volatile-ttl: evicted the nearest TTLs (%d of %d in the lowest %d)"
              % (name, low, len(gone), 2 * len(gone)), low >= 0.8 * len(gone), True)
        check("%s volatile-ttl: survivors are the far TTLs" % name,
              bool(kept) and sum(kept) / len(kept) > sum(gone) / max(len(gone), 1), True)
    if policy.startswith("allkeys-") and (policy.endswith("-lru") or policy.endswith("-lfu")):
        # Every key written before the hot ones is as cold (the p: and v: ones too).
        hot, cold = rate(r["hot"]), rate(r["cold"] + r["p"] + r["v"])
        check("%s %s: hot keys kept (%.2f) over older ones (%.2f)" % (name, policy, hot, cold),
              hot >= 0.9 and hot > cold, True)


def watch_side(c):
    """An evicted WATCHed key aborts EXEC (the deletion is a write)."""
    c.call("CONFIG", "SET", "maxmemory", "0")
    c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
    c.call("FLUSHALL")
    base = info_int(c, "memory", "used_memory")
    pipeline(c, [["SET", "p:%d" % i, VAL] for i in range(2000)])
    c.call("SET", "w", VAL, "EX", "100")  # the only key with an expiry: volatile-ttl's pick
    w = Resp(c.port)
    w.call("WATCH", "w")
    used = info_int(c, "memory", "used_memory")
    c.call("CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
    c.call("CONFIG", "SET", "maxmemory", str(used - (used - base) // 50))
    first = c.call("SET", "new", VAL)  # evicts w, still over: refused
    out = [first, c.call("EXISTS", "w")]
    c.call("CONFIG", "SET", "maxmemory", "0")  # else MULTI's commands are refused (full)
    out += [w.call("MULTI"), w.call("GET", "p:0"), w.call("EXEC"), c.call("DBSIZE")]
    w.close()
    return out


POLICIES = ["noeviction", "volatile-ttl", "volatile-random", "volatile-lru", "volatile-lfu",
            "allkeys-random", "allkeys-lru", "allkeys-lfu"]


def run_all(c, name):
    res = {}
    for pol in POLICIES:
        lru = pol.endswith("-lru")
        lfu = pol.endswith("-lfu")
        # Hot and cold keys only for allkeys-lru/lfu: persistent, volatile-* never picks them.
        res[pol] = scenario(c, pol, lru=lru and pol.startswith("allkeys"),
                            lfu=lfu and pol.startswith("allkeys"))
        properties(name, pol, res[pol])
    res["watch"] = watch_side(c)
    return res


def main():
    binary = os.environ.get("RLIMITD_BIN") or sys.argv[1]
    srv = start_redis()
    try:
        want = run_all(Resp(srv.port), "redis")
    finally:
        srv.stop()
    srv = start_rlimitd(binary)
    try:
        got = run_all(Resp(srv.port), "rlimitd")
    finally:
        srv.stop()
    for pol in POLICIES:
        check("%s: the write replies" % pol, got[pol]["replies"], want[pol]["replies"])
        check("%s: INFO memory's maxmemory_policy" % pol, got[pol]["info_policy"],
              want[pol]["info_policy"])
    check("volatile-ttl with one volatile key: evicted, refused, WATCH aborted",
          got["watch"], want["watch"])
    check("the WATCH case is what it claims", want["watch"][:2] + want["watch"][4:5],
          [OOM, b":0\r\n", b"*-1\r\n"])
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
