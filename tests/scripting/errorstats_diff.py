#!/usr/bin/env python3
"""errorstats_diff.py - INFO errorstats on rlimitd against Debian's redis-server 7.0, byte for
byte, then the cap on distinct codes (rlimitd only: 7.0.15 has none).

A seeded generator sends the same stream to both servers over three connections each (on
rlimitd they land on different I/O threads, whose counters INFO merges): errors a script makes
up (redis.error_reply, {err = ...} tables, error texts with '#', ':', lower case, no space, a
space at byte 31 or 32 of the line, an empty code), errors of rlimitd's own codes (ERR,
WRONGTYPE, NOSCRIPT, EXECABORT) and the counted-once errors of redis.call, with CONFIG RESETSTAT
now and then and INFO errorstats (and total_error_replies) compared after every few commands.
Each stream stays under 128 distinct codes between resets. A failure prints the seed and the
first differing command.

    errorstats_diff.py RLIMITD_BINARY [SEED]"""
import random
import re
import sys
import time

from resp import Server, stop_pair

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcxyz0123456789#:-!"


def code(rnd):
    n = rnd.choice([0, 1, 2, 5, 8, 11, 29, 30, 31, 33])
    return "".join(rnd.choice(ALPHABET) for _ in range(n))


def lua_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Error texts at the edges of Redis's formatting: a NUL ends them, CR and LF at the end go, a
# leading '-' of an {err = ...} table stays (a code "-X"), empty texts, a space first.
EDGES = ["return {err = '-6 x'}", "return {err = 'x\\r\\n'}", "return {err = '\\r\\nCR x\\r\\n'}",
         "return {err = ''}", "return {err = 'NUL\\0b c'}", "return {err = '-'}",
         "return redis.error_reply('-')", "return redis.error_reply('- x')",
         "return redis.error_reply('LF\\n')", "return {err = '\\n'}", "return redis.error_reply('')",
         "return {err = ' lead'}"]


def one(rnd, codes):
    """One command that answers an error (or, now and then, does not)."""
    k = rnd.randrange(12)
    if k < 4:
        c = rnd.choice(codes)
        msg = rnd.choice(["", " custom msg", " x", " with: colon", "no_space_tail"])
        text = c + msg if rnd.randrange(4) else "-" + c + msg
        return ["EVAL", "return redis.error_reply(%s)" % lua_str(text), "0"]
    if k < 6:
        c = rnd.choice(codes)
        return ["EVAL", "return {err = %s}" % lua_str(c + " table error"), "0"]
    if k == 6:
        return ["EVAL", "return redis.call('incr', KEYS[1])", "1", "es:str"]
    if k == 7:
        return ["EVAL", "local t = redis.pcall('lpush', KEYS[1], 'x') return t", "1", "es:str"]
    if k == 8:
        return ["EVALSHA", "%040x" % rnd.getrandbits(160), "0"]
    if k == 9:
        return ["INCR", "es:str"]
    if k == 10:
        # a long line: the code window is the first 32 bytes
        n = rnd.choice([28, 29, 30, 31, 32])
        return ["EVAL", "return redis.error_reply('%s tail')" % ("Q" * n), "0"]
    if rnd.randrange(2):
        return ["EVAL", rnd.choice(EDGES), "0"]
    return ["EVAL", "return redis.status_reply('NOTERR fine')", "0"]


BUILT_IN = {"errorstat_" + c for c in ("ERR", "WRONGTYPE", "NOSCRIPT")}


def stats_lines(reply):
    text = reply.decode(errors="replace")
    return [ln for ln in text.split("\r\n") if ln.startswith("errorstat_")]


def total_errors(conn):
    text = conn.call("INFO", "stats").decode(errors="replace")
    m = re.search(r"total_error_replies:(\d+)", text)
    return int(m.group(1)) if m else None


def differential(rl, rd, seed, steps):
    rnd = random.Random(seed)
    ca = [rl.conn() for _ in range(3)]
    cb = [rd.conn() for _ in range(3)]
    ca[0].call("CONFIG", "RESETSTAT")
    cb[0].call("CONFIG", "RESETSTAT")
    for a, b in zip(ca, cb):
        assert a.call("SET", "es:str", "abc") == b.call("SET", "es:str", "abc")
    codes = [code(rnd) for _ in range(40)] + ["ERR", "WRONGTYPE", "NOSCRIPT", "OTHER"]
    sent = []
    saw_made_up = False
    for i in range(steps):
        j = rnd.randrange(3)
        if rnd.randrange(40) == 0:
            cmd = ["CONFIG", "RESETSTAT"]
        elif rnd.randrange(5) == 0:
            cmd = ["INFO", "errorstats"]
        else:
            cmd = one(rnd, codes)
        sent.append(cmd)
        ra, rb = ca[j].call(*cmd), cb[j].call(*cmd)
        if cmd[0] == "INFO":
            ra, rb = stats_lines(ra), stats_lines(rb)
            saw_made_up = saw_made_up or any(
                ln.split(":")[0] not in BUILT_IN for ln in ra)
        if ra == rb and i % 50 == 49:
            ra, rb = total_errors(ca[j]), total_errors(cb[j])
            cmd = ["INFO", "stats"]
        if ra != rb:
            print("FAIL seed %d, command %d of the stream: %r\n  rlimitd: %r\n  redis:   %r"
                  % (seed, i, cmd, ra, rb))
            return 1
    ra, rb = stats_lines(ca[0].call("INFO", "errorstats")), stats_lines(cb[0].call("INFO", "errorstats"))
    if ra != rb:
        print("FAIL seed %d, final INFO errorstats\n  rlimitd: %r\n  redis:   %r" % (seed, ra, rb))
        return 1
    if not saw_made_up:
        print("FAIL seed %d: no INFO of the stream showed a made-up code" % seed)
        return 1
    for c in ca + cb:
        c.close()
    return 0


def error_reply(conn, c):
    return conn.call("EVAL", "return redis.error_reply('%s x')" % c, "0")


def cap(rl):
    """128 distinct names, then the 129th empties the table and stops the counting of codes
    until CONFIG RESETSTAT; total_error_replies counts on."""
    c = rl.conn()
    failed = 0
    c.call("CONFIG", "RESETSTAT")
    c.call("INCR", "x")  # not an error: a name only once there is one
    c.call("SET", "s", "a")
    c.call("INCR", "s")  # ERR: one name
    for i in range(127):
        error_reply(c, "C%03d" % i)
    lines = stats_lines(c.call("INFO", "errorstats"))
    if len(lines) != 128 or "errorstat_ERR:count=1" not in lines:
        print("FAIL cap: 128 names expected, got %d: %r" % (len(lines), lines[:4]))
        failed += 1
    error_reply(c, "C000")  # a known name still counts
    if "errorstat_C000:count=2" not in stats_lines(c.call("INFO", "errorstats")):
        print("FAIL cap: a known name was not counted at 128 names")
        failed += 1
    before = total_errors(c)
    error_reply(c, "NEWONE")  # the 129th name
    c.call("INCR", "s")
    error_reply(c, "C001")
    lines = stats_lines(c.call("INFO", "errorstats"))
    if lines != ["errorstat_ERRORSTATS_DISABLED:count=1"]:
        print("FAIL cap: past 128 names INFO shows %r" % lines[:4])
        failed += 1
    if total_errors(c) != before + 3:
        print("FAIL cap: total_error_replies %r, expected %d" % (total_errors(c), before + 3))
        failed += 1
    c.call("CONFIG", "RESETSTAT")
    error_reply(c, "AFTER")
    lines = stats_lines(c.call("INFO", "errorstats"))
    if lines != ["errorstat_AFTER:count=1"]:
        print("FAIL cap: after CONFIG RESETSTAT: %r" % lines)
        failed += 1
    c.close()
    return failed


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    seed = int(sys.argv[2]) if len(sys.argv) == 3 else int(time.time())
    rl = Server("rlimitd", sys.argv[1], extra=["--threads", "3"])
    rd = Server("redis")
    failed = 0
    try:
        for s in range(seed, seed + 4):
            failed += differential(rl, rd, s, 600)
        failed += cap(rl)
    finally:
        failed += stop_pair(rl, rd)
    print("errorstats_diff: seeds %d-%d, %d failed" % (seed, seed + 3, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
