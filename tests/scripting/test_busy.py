#!/usr/bin/env python3
"""test_busy.py - the BUSY contract on the real rlimitd, against redis-server 7.0 where Redis
defines the answer: once a script runs past busy-reply-threshold, every connection, including
fresh ones landing on the script's own I/O thread, is answered (BUSY for what Redis refuses),
SCRIPT KILL and SHUTDOWN NOSAVE work from any connection, and MULTI/EXEC while busy answer as
Redis 7.0's tests/unit/multi.tcl "MULTI and script timeout" and "EXEC and script timeout".

    test_busy.py RLIMITD_BINARY [TEST...]

With --threads 1 every connection shares the script's thread, so each check there goes through
the busy thread's own serving (a silent thread would time the test out: the socket timeout, not
the clock, decides). Nothing waits on a fixed sleep: a script is known busy when a probe's PING
is answered BUSY."""
import sys
import time

from resp import Server

BIN = None
BUSY = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
KILLED = b"-ERR Script killed by user with SCRIPT KILL..."
UNKILLABLE = (b"-UNKILLABLE Sorry the script already executed write commands against the dataset. "
              b"You can either wait the script termination or kill the server in a hard way "
              b"using the SHUTDOWN NOSAVE command.\r\n")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def start(kind, threads=1):
    if kind == "redis":
        return Server("redis", None, ["--lua-time-limit", "50"])
    return Server("rlimitd", BIN, ["--threads", str(threads), "--busy-reply-threshold", "50"])


def wait_busy(srv):
    """Returns once a fresh connection's PING is answered BUSY (bounded)."""
    deadline = time.monotonic() + 60
    r = None
    while time.monotonic() < deadline:
        p = srv.conn(timeout=60)
        r = p.call("PING")
        p.close()
        if r == BUSY:
            return
        time.sleep(0.01)
    raise AssertionError("no BUSY within 60 s (last %r)" % r)


def kill_and_wait(srv, runner):
    """SCRIPT KILL from a fresh connection; returns the killed script's reply."""
    k = srv.conn(timeout=60)
    r = k.call("SCRIPT", "KILL")
    check(r == b"+OK\r\n", "SCRIPT KILL: %r" % r)
    k.close()
    return runner.raw()


def scenario_multi_timeout(srv):
    """multi.tcl "MULTI and script timeout"."""
    out = []
    r = srv.conn()
    r.call("SET", "xx", "1")
    rd1 = srv.conn()
    rd1.send("EVAL", "while true do end", "0")
    wait_busy(srv)
    r2 = srv.conn()
    out.append(r2.call("MULTI"))
    out.append(r2.call("INCR", "xx"))
    out.append(kill_and_wait(srv, rd1)[:len(KILLED)])
    out.append(r2.call("INCR", "xx"))
    out.append(r2.call("EXEC"))
    out.append(r.call("GET", "xx"))
    out.append(r2.call("PING", "asdf"))
    return out


def scenario_exec_timeout(srv):
    """multi.tcl "EXEC and script timeout" and "just EXEC and script timeout"."""
    out = []
    r = srv.conn()
    r.call("SET", "xx", "1")
    r2 = srv.conn()
    out.append(r2.call("MULTI"))
    out.append(r2.call("INCR", "xx"))
    rd1 = srv.conn()
    rd1.send("EVAL", "while true do end", "0")
    wait_busy(srv)
    out.append(r2.call("INCR", "xx"))
    out.append(r2.call("EXEC"))
    out.append(r2.call("EXEC"))  # the transaction is gone
    out.append(kill_and_wait(srv, rd1)[:len(KILLED)])
    out.append(r.call("GET", "xx"))
    out.append(r2.call("PING", "asdf"))
    return out


def scenario_every_connection(srv):
    """Fresh connections get BUSY for everything Redis refuses, pipelined or not, and the
    commands Redis allows (MULTI, DISCARD, AUTH's answer without a password) still run; the
    script's own connection keeps its pipelined command for after the script."""
    out = []
    rd = srv.conn()
    rd.sock.sendall(b"*3\r\n$4\r\nEVAL\r\n$17\r\nwhile true do end\r\n$1\r\n0\r\n"
                    b"*2\r\n$4\r\nPING\r\n$5\r\nafter\r\n")
    wait_busy(srv)
    conns = [srv.conn(timeout=60) for _ in range(8)]
    for c in conns:
        out.append(c.call("PING"))
    c = conns[0]
    out.append(c.call("SET", "k", "v"))
    out.append(c.call("GET", "k"))
    out.append(c.call("SCRIPT", "LOAD", "return 1"))
    c.sock.sendall(b"PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$5\r\nMULTI\r\n"
                   b"*1\r\n$7\r\nDISCARD\r\n")
    out += [c.raw() for _ in range(4)]
    out.append(c.call("AUTH", "nopass"))
    out.append(kill_and_wait(srv, rd)[:len(KILLED)])
    out.append(rd.raw())
    out += [c.call("PING") for c in conns]
    return out


def scenario_unkillable_shutdown(srv):
    """A script that wrote: SCRIPT KILL answers UNKILLABLE, SHUTDOWN (saving) BUSY, SHUTDOWN
    NOSAVE from a fresh connection stops the server."""
    out = []
    rd = srv.conn()
    rd.send("EVAL", "redis.call('set', KEYS[1], '1') while true do end", "1", "uk")
    wait_busy(srv)
    c = srv.conn(timeout=60)
    out.append(c.call("SCRIPT", "KILL"))
    out.append(c.call("PING"))
    out.append(c.call("SHUTDOWN"))
    d = srv.conn(timeout=60)
    d.send("SHUTDOWN", "NOSAVE")
    try:
        out.append(d.raw())
    except (ConnectionError, OSError):
        out.append("closed")
    srv.proc.wait(60)
    out.append(srv.proc.returncode is not None)
    return out


def differential(scenario):
    def t():
        results = {}
        for kind, threads in (("redis", 1), ("rlimitd", 1), ("rlimitd", 2)):
            srv = start(kind, threads)
            try:
                results[(kind, threads)] = scenario(srv)
            finally:
                report = srv.stop()  # redis-server too: it must not outlive the test
                if kind != "rlimitd":
                    report = ""
            check(not report, "sanitizer report:\n" + report[:4000])
        want = results[("redis", 1)]
        for key, got in results.items():
            for i, (w, g) in enumerate(zip(want, got)):
                check(w == g, "%s, threads %d, step %d: redis %r, rlimitd %r" %
                      (scenario.__name__, key[1], i, w, g))
            check(len(want) == len(got), "%s: %d replies vs %d" % (key, len(want), len(got)))
    t.__name__ = scenario.__name__
    return t


TESTS = [differential(s) for s in (scenario_multi_timeout, scenario_exec_timeout,
                                    scenario_every_connection, scenario_unkillable_shutdown)]


def main():
    global BIN
    BIN = sys.argv[1]
    only = set(sys.argv[2:])
    passed = failed = 0
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        try:
            t()
            passed += 1
            print("ok   %s" % t.__name__)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failed += 1
            print("FAIL %s: %s" % (t.__name__, e))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
