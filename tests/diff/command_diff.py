#!/usr/bin/env python3
"""COMMAND's view of every command, against redis-server 7.0: for each command in rlimitd's
COMMAND LIST that Redis also has, COMMAND INFO must be byte for byte Redis's (name, arity,
flags, key positions, ACL categories, tips, key specs) except the subcommands of container
commands (CLIENT, CONFIG, ...), which rlimitd does not list (docs/COMMANDS.md, "COMMAND");
and COMMAND GETKEYSANDFLAGS must find the same keys with the same flags for sample calls.
Cluster-aware clients read both to route commands. Entries are compared as bytes, element by
element; with --resp3 both connections speak RESP3 (flags, categories, tips and key specs are
sets and maps there). Prints one line per difference and "N passed, N failed"; exits 1 on any
difference."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, parse, resolve_rlimitd, split, start_redis, start_rlimitd  # noqa: E402

# Sample calls for GETKEYSANDFLAGS: fixed key positions, ranges, steps, options that change the
# flags (SET ... GET), different flags per key (RENAME), key counts (EVAL), bad counts.
GETKEYS = [
    "get k", "set k v", "set k v GET", "set k v EX 10 get", "del a b c", "exists a b",
    "mget a b c", "mset a 1 b 2", "msetnx a 1 b 2", "rename a b", "renamenx a b",
    "expire k 10", "incrby k 2", "getex k PERSIST", "getdel k", "hset h f v", "hmget h a b",
    "zadd z 1 m", "zrange z 0 -1", "zremrangebyscore z 0 1", "watch a b", "touch a b",
    "eval s 2 a b x", "eval s 0", "eval s abc", "eval s 5 a", "eval s -1",
    "evalsha_ro s 1 k", "eval_ro s 1 k a", "ping", "get", "set k",
    "lpush l a", "lrange l 0 -1", "ltrim l 0 9", "lindex l 0", "lpos l a",
]


def main():
    rl = start_rlimitd(resolve_rlimitd())
    rd = start_redis()
    passed = failed = 0
    resp = 3 if "--resp3" in sys.argv[1:] else 2
    try:
        a = Resp(rl.port, resp=resp)
        b = Resp(rd.port, resp=resp)
        names = sorted(n.decode() for n in parse(a.call("COMMAND", "LIST")))
        for name in names:
            xb = split(b.call("COMMAND", "INFO", name))[1][0]
            if parse(xb) is None:
                continue  # rlimitd's own command (CL.THROTTLE, ISALLOWED, ...)
            ha, ra = split(split(a.call("COMMAND", "INFO", name))[1][0])
            hb, rb = split(xb)
            if parse(rb[9]) and ra[9] == b"*0\r\n":
                rb = rb[:9] + [ra[9]]  # a container: Redis lists its subcommands, rlimitd not
            if (ha, ra) == (hb, rb):
                passed += 1
            else:
                failed += 1
                print("FAIL COMMAND INFO %s:\n  rlimitd %r\n  redis   %r" % (name, ra, rb))
        for call in GETKEYS:
            args = call.split()
            if parse(b.call("COMMAND", "INFO", args[0]))[0] is None:
                continue
            if parse(a.call("COMMAND", "INFO", args[0]))[0] is None:
                continue  # a command this build does not have yet
            xa = a.call("COMMAND", "GETKEYSANDFLAGS", *args)
            xb = b.call("COMMAND", "GETKEYSANDFLAGS", *args)
            if xa == xb:
                passed += 1
            else:
                failed += 1
                print("FAIL COMMAND GETKEYSANDFLAGS %s:\n  rlimitd %r\n  redis   %r"
                      % (call, xa, xb))
        a.close()
        b.close()
    finally:
        for s in (rl, rd):
            problem = s.stop()
            if problem:
                failed += 1
                print("FAIL " + problem)
    print("command_diff (RESP%d): %d passed, %d failed" % (resp, passed, failed))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
