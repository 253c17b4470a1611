#!/usr/bin/env python3
"""Keyspace notifications that the clock or rlimitd's own commands raise (issue 30):

1. notify-keyspace-events read back by CONFIG GET for a list of values, and the error for a bad
   letter, byte for byte as redis-server 7.0 answers them.
2. `expired` from lazy expiry: a key set with PX 1 is read (GET) once PTTL has said it is gone;
   the subscriber's frames for it are the same on both servers (Redis may expire it actively
   first: the frames are the same either way, and nothing else is raised).
3. `expired` from active expiry: 200 keys with PX 1 that nobody reads; each server's active cycle
   raises one `expired` per key, on both channels, waited for with a generous bound, compared as
   sets of keys (the cycle's order is its table's).
4. rlimitd's own events (class r, COMMANDS.md "Keyspace notifications"): CL.THROTTLE, GCRA,
   ISALLOWED, THROTTLE.ALL and LEASE.* raise the documented names, allowed and limited, and
   `new`/`expired`/`del` on their keys; nothing when r is off.

No assertion depends on the machine's speed: waits are bounded at tens of seconds and end as soon
as what is expected has arrived. Prints "N passed, N failed"; exit 1 on any failure."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, parse, resolve_rlimitd, start_redis, start_rlimitd  # noqa: E402

WAIT = 60.0


def subscriber(port, classes):
    c = Resp(port)
    c.call("CONFIG", "SET", "notify-keyspace-events", classes)
    s = Resp(port, timeout=WAIT)
    s.send([["PSUBSCRIBE", "__key*__:*"]])
    s.read()
    return c, s


def frames_until(s, n, deadline):
    """n pmessages as (channel, payload), or fewer if the deadline passes."""
    out = []
    s.sock.settimeout(1.0)
    while len(out) < n and time.monotonic() < deadline:
        try:
            v = parse(s.read())
        except (TimeoutError, OSError):
            continue
        out.append((v[2], v[3]))
    return out


def drain(s, quiet=0.3):
    """Everything that arrives until the connection is quiet for `quiet` seconds (used only to
    check that nothing more came; a late frame would be a failure caught elsewhere)."""
    out = []
    s.sock.settimeout(quiet)
    while True:
        try:
            v = parse(s.read())
        except (TimeoutError, OSError):
            return out
        out.append((v[2], v[3]))


def check_config(rl, rd):
    fails = []
    values = ["KEA", "AKE", "g$lshzxetdKE", "g$lshzxetd", "An", "nKE", "Km", "mKEA", "", "E",
              "xK", "gg$$", "AAg", "d", "t", "s", "KEsn"]
    a, b = Resp(rl.port), Resp(rd.port)
    for v in values:
        ra = a.call("CONFIG", "SET", "notify-keyspace-events", v)
        rb = b.call("CONFIG", "SET", "notify-keyspace-events", v)
        ga = a.call("CONFIG", "GET", "notify-keyspace-events")
        gb = b.call("CONFIG", "GET", "notify-keyspace-events")
        if ra != rb or ga != gb:
            fails.append("CONFIG SET/GET %r: rlimitd %r %r, redis %r %r" % (v, ra, ga, rb, gb))
    for bad in ["KEQ", "x!", "x y", "Z"]:
        ra = a.call("CONFIG", "SET", "notify-keyspace-events", bad)
        rb = b.call("CONFIG", "SET", "notify-keyspace-events", bad)
        if ra != rb:
            fails.append("CONFIG SET %r: rlimitd %r, redis %r" % (bad, ra, rb))
    # rlimitd's r reads back after Redis's letters.
    a.call("CONFIG", "SET", "notify-keyspace-events", "rKEA")
    g = parse(a.call("CONFIG", "GET", "notify-keyspace-events"))
    if g != [b"notify-keyspace-events", b"AKEr"]:
        fails.append("rKEA reads back as %r, not AKEr" % (g,))
    a.call("CONFIG", "SET", "notify-keyspace-events", "")
    b.call("CONFIG", "SET", "notify-keyspace-events", "")
    a.close()
    b.close()
    return fails


def lazy_frames(port):
    c, s = subscriber(port, "KEx")
    c.call("SET", "lazy", "v", "PX", "1")
    deadline = time.monotonic() + WAIT
    # PTTL answers -2 once the key is past its expiry (it also expires it, as GET would).
    while parse(c.call("PTTL", "lazy")) != -2 and time.monotonic() < deadline:
        time.sleep(0.005)
    c.call("GET", "lazy")
    got = frames_until(s, 2, deadline)
    got += drain(s)
    c.close()
    s.close()
    return got


def active_frames(port, n):
    c, s = subscriber(port, "Ex")
    c.send([["SET", "act:%d" % i, "v", "PX", "1"] for i in range(n)])
    for _ in range(n):
        c.read()
    got = frames_until(s, n, time.monotonic() + WAIT)
    got += drain(s)
    c.close()
    s.close()
    return got


def check_limiter(rl):
    fails = []
    c, s = subscriber(rl.port, "KEr")

    def expect(cmds, want, what):
        for cmd in cmds:
            c.call(*cmd)
        got = frames_until(s, len(want), time.monotonic() + WAIT)
        got += drain(s, 0.2)
        if got != want:
            fails.append("%s: got %r, want %r" % (what, got, want))

    def both(key, ev):
        return [(b"__keyspace@0__:" + key, ev), (b"__keyevent@0__:" + ev, key)]

    expect([["CL.THROTTLE", "t1", "0", "1", "60"]], both(b"t1", b"cl.throttle"),
           "CL.THROTTLE allowed")
    expect([["CL.THROTTLE", "t1", "0", "1", "60"]], both(b"t1", b"limited"),
           "CL.THROTTLE limited")
    expect([["GCRA", "g1", "0", "1", "60"], ["GCRA", "g1", "0", "1", "60"]],
           both(b"g1", b"gcra") + both(b"g1", b"limited"), "GCRA")
    expect([["ISALLOWED", "u", "a", "60", "1"], ["ISALLOWED", "u", "a", "60", "1"]],
           both(b"hist:{u}:a", b"isallowed") + both(b"hist:{u}:a", b"limited"), "ISALLOWED")
    expect([["THROTTLE.ALL", "2", "ta", "tb", "LIMIT", "0", "1", "60", "1",
             "LIMIT", "5", "1", "60", "1"]],
           both(b"ta", b"throttle.all") + both(b"tb", b"throttle.all"), "THROTTLE.ALL allowed")
    expect([["THROTTLE.ALL", "2", "ta", "tb", "LIMIT", "0", "1", "60", "1",
             "LIMIT", "5", "1", "60", "1"]], both(b"ta", b"limited"), "THROTTLE.ALL limited")
    c.call("CONFIG", "SET", "notify-keyspace-events", "KErg")
    rid = parse(c.call("LEASE.ACQUIRE", "lk", "1", "60000"))
    got = frames_until(s, 2, time.monotonic() + WAIT)
    if got != both(b"lk", b"lease.acquire"):
        fails.append("LEASE.ACQUIRE: got %r" % (got,))
    expect([["LEASE.ACQUIRE", "lk", "1", "60000"]], both(b"lk", b"limited"), "LEASE full")
    expect([["LEASE.RENEW", "lk", rid, "60000"]], both(b"lk", b"lease.renew"), "LEASE.RENEW")
    expect([["LEASE.RELEASE", "lk", rid]], both(b"lk", b"lease.release") + both(b"lk", b"del"),
           "LEASE.RELEASE of the last lease")
    expect([["LEASE.RELEASE", "lk", rid]], [], "LEASE.RELEASE of no lease")
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEn")
    expect([["CL.THROTTLE", "t2", "0", "1", "60"]], both(b"t2", b"new"), "new on a limiter key")
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
    expect([["CL.THROTTLE", "t3", "0", "1", "60"], ["LEASE.ACQUIRE", "lk2", "1", "60000"]], [],
           "A leaves r out")
    c.call("CONFIG", "SET", "notify-keyspace-events", "")
    c.close()
    s.close()
    return fails


def main():
    passed = failed = 0
    rl = start_rlimitd(resolve_rlimitd(sys.argv[1] if len(sys.argv) > 1 else None))
    rd = start_redis()
    try:
        results = []
        results.append(("CONFIG notify-keyspace-events as redis-server", check_config(rl, rd)))
        la, lb = lazy_frames(rl.port), lazy_frames(rd.port)
        want = [(b"__keyspace@0__:lazy", b"expired"), (b"__keyevent@0__:expired", b"lazy")]
        results.append(("lazy expiry", [] if la == lb == want else
                        ["rlimitd %r, redis %r, want %r" % (la, lb, want)]))
        n = 200
        aa, ab = active_frames(rl.port, n), active_frames(rd.port, n)
        keys = {b"act:%d" % i for i in range(n)}
        ok = (len(aa) == len(ab) == n and {f[1] for f in aa} == {f[1] for f in ab} == keys
              and all(f[0] == b"__keyevent@0__:expired" for f in aa + ab))
        results.append(("active expiry (%d keys)" % n, [] if ok else
                        ["rlimitd %d frames, redis %d: %r / %r" % (len(aa), len(ab), aa[:4],
                                                                  ab[:4])]))
        results.append(("limiter commands' events", check_limiter(rl)))
        for name, fails in results:
            if fails:
                failed += 1
                print("FAIL %s" % name)
                for f in fails:
                    print("  " + f)
            else:
                passed += 1
                print("ok %s" % name)
    finally:
        for srv in (rl, rd):
            problem = srv.stop()
            if problem:
                print(problem)
                failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
