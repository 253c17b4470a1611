#!/usr/bin/env python3
"""Hostile input for issue 17's commands on the real daemon: a hash grown to a million fields,
a list grown to millions of elements (LRANGE 0 -1 of all of it, huge counts and indexes,
maxmemory reached in the middle of pushing), maxmemory reached before an MSET (all or nothing), KEYS with patterns built to backtrack and
nest, and a hash deleted giving its memory back. Each check says what it expects; prints
"N passed, N failed" and exits 1 on any failure. No assertion depends on timing."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Tally, info_int  # noqa: E402
from types_diff import Conn, flat, free_port, start, stop  # noqa: E402

tally = Tally()
check = tally.check


def used_memory(c):
    return info_int(c.run([["INFO", "memory"]])[0], "used_memory")


def main():
    rbin = os.environ.get("RLIMITD_BIN")
    if not rbin:
        print("need RLIMITD_BIN")
        return 1
    fields = int(os.environ.get("HOSTILE_FIELDS", "1000000"))
    tmp = tempfile.mkdtemp(prefix="types-hostile.")
    port = free_port()
    p = start([rbin, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp,
               "--save-interval", "0"], port)
    try:
        c = Conn(port)
        base = used_memory(c)
        # A hash of a million fields: every command on one field still answers.
        # (500 pairs a command: proto-max-args is 1024 by default)
        for i in range(0, fields, 500):
            c.run([["HSET", "big"] + [x for j in range(i, min(i + 500, fields))
                                      for x in ("f%d" % j, "v%d" % j)]])
        check("HLEN of the big hash", flat(c.run([["HLEN", "big"]])[0]), b":%d\r\n" % fields)
        check("HGET in it", flat(c.run([["HGET", "big", "f777"]])[0]), b"$4\r\nv777\r\n")
        check("HINCRBY in it", flat(c.run([["HINCRBY", "big", "n", "5"]])[0]), b":5\r\n")
        check("HDEL in it", flat(c.run([["HDEL", "big", "f1", "f2", "nope"]])[0]), b":2\r\n")
        grown = used_memory(c)
        check("the big hash is accounted", grown - base > fields * 16, True)
        check("DEL of the big hash", flat(c.run([["DEL", "big"]])[0]), b":1\r\n")
        check("its memory is given back", used_memory(c) - base < (grown - base) // 100, True)

        # A list of millions of elements: pushes at both ends, reads anywhere, huge counts.
        n = int(os.environ.get("HOSTILE_LIST", "2000000"))
        for i in range(0, n, 1000):
            c.run([["RPUSH" if i % 2000 else "LPUSH", "biglist"] +
                   [str(1700000000000 + j) for j in range(i, i + 1000)]])
        check("LLEN of the big list", flat(c.run([["LLEN", "biglist"]])[0]), b":%d\r\n" % n)
        whole = c.run([["LRANGE", "biglist", "0", "-1"]])[0]
        check("LRANGE 0 -1 returns every element", len(whole), n)
        check("LINDEX in the middle", flat(c.run([["LINDEX", "biglist", str(n // 2)]])[0]),
              flat(whole[n // 2]))
        del whole
        check("LINDEX past the end", flat(c.run([["LINDEX", "biglist", "9223372036854775807"]])[0]),
              b"$-1\r\n")
        check("LRANGE with huge bounds", len(c.run([["LRANGE", "biglist", "-9223372036854775808",
                                                     "-9223372036854775807"]])[0]), 0)
        check("LPOS with MAXLEN 0 over all of it",
              flat(c.run([["LPOS", "biglist", "nope", "COUNT", "0", "MAXLEN", "0"]])[0]),
              b"*0\r\n")
        check("LREM of nothing over all of it", flat(c.run([["LREM", "biglist", "0", "x"]])[0]),
              b":0\r\n")
        popped = c.run([["RPOP", "biglist", "9223372036854775807"]])[0]
        check("RPOP with a huge count pops everything", len(popped), n)
        check("...and deletes the key", flat(c.run([["EXISTS", "biglist"]])[0]), b":0\r\n")
        check("a big list's memory is given back", used_memory(c) - base < n, True)
        c.run([["RPUSH", "l2"] + ["x"] * 1000])
        check("LTRIM to nothing", flat(c.run([["LTRIM", "l2", "9223372036854775807", "0"]])[0]),
              b"+OK\r\n")
        check("...deletes the key", flat(c.run([["TYPE", "l2"]])[0]), b"+none\r\n")

        # maxmemory reached in the middle of pushing: Redis's -OOM, the list stays as it was.
        c.run([["RPUSH", "pushed", "a"]])
        cap = used_memory(c) + 2000000
        check("CONFIG SET maxmemory", flat(c.run([["CONFIG", "SET", "maxmemory", str(cap)]])[0]),
              b"+OK\r\n")
        oom = None
        for i in range(2000):
            r = flat(c.run([["RPUSH", "pushed"] + ["y" * 100] * 100])[0])
            if not r.startswith(b":"):
                oom = r
                break
        check("pushing past maxmemory gets -OOM", (oom or b"")[:4], b"-OOM")
        size = flat(c.run([["LLEN", "pushed"]])[0])
        check("the refused push added nothing", flat(c.run([["RPUSH", "pushed", "z"]])[0])[:4],
              b"-OOM")
        check("...the list is intact", flat(c.run([["LLEN", "pushed"]])[0]), size)
        check("LINSERT and LSET are refused too",
              [flat(x)[:4] for x in c.run([["LINSERT", "pushed", "BEFORE", "a", "b"],
                                           ["LSET", "pushed", "0", "b"]])], [b"-OOM", b"-OOM"])
        check("reads and pops still work", flat(c.run([["LPOP", "pushed"]])[0]), b"$1\r\na\r\n")
        c.run([["CONFIG", "SET", "maxmemory", "0"], ["DEL", "pushed"]])

        # maxmemory reached: an MSET that would create a key writes nothing at all.
        c.run([["MSET", "m1", "a", "m2", "b"]])
        limit = used_memory(c)
        check("CONFIG SET maxmemory", flat(c.run([["CONFIG", "SET", "maxmemory",
                                                   str(limit)]])[0]), b"+OK\r\n")
        c.run([["HSET", "filler", "f", "x" * 4000]])  # over the limit now (an update-free key)
        r = flat(c.run([["MSET", "m1", "new", "m3", "c", "m2", "new"]])[0])
        check("MSET over maxmemory is refused", r.startswith(b"-OOM"), True)
        check("...and wrote nothing", flat(c.run([["MGET", "m1", "m2", "m3"]])[0]),
              b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n")
        check("MSET of existing keys only is refused as well (denyoom, as Redis)",
              flat(c.run([["MSET", "m1", "x", "m2", "y"]])[0])[:4], b"-OOM")
        check("HSET creating a hash is refused",
              flat(c.run([["HSET", "h-new", "f", "v"]])[0])[:4], b"-OOM")
        c.run([["CONFIG", "SET", "maxmemory", "0"]])

        # KEYS with hostile patterns over many keys: bounded work, exact answers.
        for i in range(0, 200000, 500):
            c.run([["MSET"] + [x for j in range(i, i + 500) for x in ("a" * 30 + str(j), "1")]])
        check("KEYS backtracking pattern", flat(c.run([["KEYS", "*a*a*a*a*a*a*a*a*a*b"]])[0]),
              b"*0\r\n")
        check("KEYS nesting past Redis's limit", flat(c.run([["KEYS", "a*" * 1001 + "x"]])[0]),
              b"*0\r\n")
        check("KEYS long pattern", flat(c.run([["KEYS", "*" * 100000 + "a" * 30 + "7"]])[0]),
              b"*1\r\n$31\r\n" + b"a" * 30 + b"7\r\n")
        check("KEYS matching many", len(c.run([["KEYS", "a*"]])[0]), 200000)
        check("server alive", flat(c.run([["PING"]])[0]), b"+PONG\r\n")
    finally:
        stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
