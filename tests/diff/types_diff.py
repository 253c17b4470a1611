#!/usr/bin/env python3
"""Differential test of the data commands (issue 17): one seeded stream of commands, valid and
invalid, goes to rlimitd and to a real redis-server 7.0, and every reply is compared byte for
byte. On the first difference it prints the seed, the command number, the command and both
replies, and exits 1.

Only these replies are compared loosely, each for a stated reason:
  - KEYS: Redis returns keys in its hash table's order, rlimitd in its own; compared sorted.
  - HGETALL, HKEYS, HVALS of a hash that may have outgrown the packed encoding (only the keys
    "big0" and "big1" get long values or many fields, keys HINCRBYFLOAT ran on (a huge result
    is a long value), and keys renamed from those): Redis's dict order; compared as multisets
    (of pairs for HGETALL). Other hashes must match in order.
  - TTL, PTTL, EXPIRETIME, PEXPIRETIME: depend on when each server read its clock; integers
    compared within a tolerance (1 s, 2000 ms), the special -1 / -2 exactly. Expiry times reach
    past the year 2262 (past int64 nanoseconds) up to the last ms Redis accepts (EXPIREAT,
    PEXPIREAT, EXPIRE, PEXPIRE, SET/GETEX EXAT/PXAT/EX/PX) and just over it (its error).

With --resp3 both connections open with HELLO 3 and every reply is compared in RESP3 (maps,
nulls, doubles, ... byte for byte as well; the loose comparisons above read both protocols).

Usage: types_diff.py [--seed N] [--count N] [--resp3]; RLIMITD_BIN names the daemon. redis-server must be
on PATH. Both servers run on free loopback ports and are killed at the end.
"""
import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode("latin-1")
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Agg(list):
    """An aggregate reply: its elements' replies, and its header line (*n, %n, ~n) as sent."""

    def __init__(self, head, items):
        super().__init__(items)
        self.head = head


class Conn:
    """A raw RESP connection: commands out, each reply back as its exact bytes. resp=3: opened
    with HELLO 3, whose reply must be RESP3's map."""

    def __init__(self, port, resp=2):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""
        self.pos = 0
        if resp == 3:
            hello = flat(self.run([["HELLO", "3"]])[0])
            if not hello.startswith(b"%7\r\n") or b"proto\r\n:3\r\n" not in hello:
                raise ConnectionError("HELLO 3 answered %r" % hello[:200])

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf = self.buf[self.pos:] + data
        self.pos = 0

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i + 2]
                self.pos = i + 2
                return line
            self._fill()

    def _take(self, n):
        while len(self.buf) - self.pos < n:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def reply(self):
        """One reply, as bytes; aggregates (RESP2 arrays, RESP3 arrays, maps, sets) as an Agg of
        their elements' replies (a map's keys and values alternate)."""
        line = self._line()
        kind = line[:1]
        if kind in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return line
        n = int(line[1:-2])
        if kind in (b"$", b"="):
            return line if n < 0 else line + self._take(n + 2)
        if kind in (b"*", b"~", b"%"):
            if n < 0:
                return line
            return Agg(line, [self.reply() for _ in range(2 * n if kind == b"%" else n)])
        raise ValueError("bad reply type %r" % line)

    def run(self, cmds):
        self.sock.sendall(b"".join(encode(c) for c in cmds))
        return [self.reply() for _ in cmds]


def flat(r):
    if isinstance(r, Agg):
        return r.head + b"".join(flat(x) for x in r)
    return r


TIME_TOLERANCE = {b"TTL": 1, b"EXPIRETIME": 1, b"PTTL": 2000, b"PEXPIRETIME": 2000}


def same(cmd, a, b, queued=None, big=frozenset()):
    """queued: for EXEC, the commands its array answers, compared each by its own rule. big: keys
    whose hash may be in table encoding."""
    name = cmd[0].upper() if isinstance(cmd[0], bytes) else cmd[0].upper().encode()
    if name == b"EXEC" and queued and isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) == len(queued) and all(
            same(q, x, y, None, big) for q, x, y in zip(queued, a, b))
    if (name in (b"HGETALL", b"HKEYS", b"HVALS") and len(cmd) > 1 and cmd[1] in big and
            isinstance(a, list) and isinstance(b, list)):
        if name == b"HGETALL":
            return (sorted(zip(a[0::2], a[1::2])) == sorted(zip(b[0::2], b[1::2])) and
                    len(a) == len(b))
        return sorted(a) == sorted(b)
    if name == b"KEYS" and isinstance(a, list) and isinstance(b, list):
        return sorted(flat(x) for x in a) == sorted(flat(x) for x in b)
    if name in TIME_TOLERANCE and a[:1] == b":" and b[:1] == b":":
        x, y = int(a[1:-2]), int(b[1:-2])
        if x < 0 or y < 0:
            return x == y
        return abs(x - y) <= TIME_TOLERANCE[name]
    return flat(a) == flat(b)


# ---- the generator ----

KEYS = ["k%d" % i for i in range(6)] + ["a*b", "a?c", "[x]", "h\\y", "ab", "Ab", "a-b", "\xe9t\xe9",
                                        "a" * 1100, "big0", "big1", "h0", "h1", "h2"]
BIG_KEYS = ("big0", "big1")
FIELDS = ["tokens", "ts", "f", "g", "", "1", "a b", "x" * 64, "F"]
# Redis 7's glob nesting limit: star groups past the 1000th, trailing or not.
DEEP = ["a*" * n + t for n in (999, 1000, 1001, 1002) for t in ("", "a")] + ["*a" * 1001]
INT_EDGES = ["0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808",
             "9223372036854775808", "-9223372036854775809", "007", "+5", " 5", "5 ", "1e3", "",
             "12345678901234567890"]
FLOAT_EDGES = ["0", "1.5", "-1.5", "0.1", "3.0e3", "1e-20", "5.0e3", "-0", "-0.0", ".5", "5.",
               "inf", "-inf", "+inf", "nan", "1e400", "1e-400", "0x10", "1.7976931348623157e308",
               "1e308", "abc", "", " 1", "1 ", "10.50000", "3.14159265358979323846", "1e17",
               "123456789012345678901234567890", "-1e-5", "2.5e-7", "99999999999999999999.5",
               "1\x002", "1.5\x00"]  # a NUL inside: not a number (ends no parse early)


class Gen:
    def __init__(self, seed, slices):
        self.r = random.Random(seed)
        self.slices = slices
        self.cmds = [c for c in COMMANDS if c[0] in slices]
        self.big = set(BIG_KEYS)  # keys whose hash may be a table (see the module's docstring)

    def key(self):
        return self.r.choice(KEYS)

    def int_arg(self):
        r = self.r.random()
        if r < 0.3:
            return self.r.choice(INT_EDGES)
        return str(self.r.randint(-1000, 1000))

    def float_arg(self):
        r = self.r.random()
        if r < 0.5:
            return self.r.choice(FLOAT_EDGES)
        if r < 0.75:
            return "%.*f" % (self.r.randint(0, 6), self.r.uniform(-1e6, 1e6))
        return str(self.r.randint(-10 ** 6, 10 ** 6))

    def value(self):
        r = self.r.random()
        if r < 0.35:
            return self.int_arg()
        if r < 0.6:
            return self.float_arg()
        return "".join(self.r.choice("abcxyz*?[]\\-01") for _ in range(self.r.randint(0, 8)))

    def ttl_arg(self, unit_ms):
        """Far enough out that nothing expires during the run (no race with the clock); sometimes
        invalid."""
        r = self.r.random()
        if r < 0.1:
            return self.r.choice(["0", "-1", "abc", "", "9223372036854775807", "1.5"])
        if r < 0.16:
            # Past the year 2262 (int64 nanoseconds), up to where Redis's ms sum overflows.
            if unit_ms == 1000:
                return str(self.r.choice([10 ** 10, 9223372036854, 9000000000000000,
                                          9223372036854775 - 10 ** 9 - self.r.randint(0, 10 ** 6),
                                          9223372036854775, 9223372036854774]))
            return str(self.r.choice([10 ** 13, 9223372036854775807 - 2 * 10 ** 12,
                                      self.r.randint(10 ** 13, 9 * 10 ** 18),
                                      9223372036854775807 - 1000]))
        return str(self.r.randint(1000, 100000) * (1000 // unit_ms if unit_ms < 1000 else 1))

    def abs_time(self, unit_ms):
        now_ms = int(time.time() * 1000)
        r = self.r.random()
        if r < 0.1:
            return str((now_ms - self.r.randint(1, 100000)) // unit_ms)  # past: deletes
        if r < 0.15:
            return self.r.choice(["0", "-5", "x"])
        if r < 0.22:
            # Past the year 2262 (int64 nanoseconds) to the last ms Redis takes, and just over.
            if unit_ms == 1000:
                return str(self.r.choice([99999999999, 9223372036, 9223372037, 9223372036854,
                                          9223372036854775, 9223372036854776,
                                          self.r.randint(10 ** 10, 9223372036854775)]))
            return str(self.r.choice([9223372036854, 9223372036855, 9223372036854775807,
                                      9223372036854775806, 9223372036854775307,
                                      9223372036854775308,
                                      self.r.randint(9223372036855, 9223372036854775807)]))
        return str((now_ms + self.r.randint(100000, 10 ** 7)) // unit_ms)

    def expiry_opts(self, allow_keepttl=True, allow_persist=False):
        words = []
        for _ in range(self.r.choice([0, 0, 1, 1, 1, 2])):
            w = self.r.choice(["EX", "PX", "EXAT", "PXAT"] + (["KEEPTTL"] if allow_keepttl else [])
                              + (["PERSIST"] if allow_persist else []))
            if self.r.random() < 0.2:
                w = w.lower()
            words.append(w)
            if w.upper() in ("EX", "PX"):
                words.append(self.ttl_arg(1000 if w.upper() == "EX" else 1))
            elif w.upper() in ("EXAT", "PXAT"):
                words.append(self.abs_time(1000 if w.upper() == "EXAT" else 1))
        if self.r.random() < 0.03 and words:
            words.pop()  # a dangling option: syntax error
        return words

    def rename(self):
        src, dst = self.key(), self.key()
        if src in self.big:
            self.big.add(dst)
        return [self.r.choice(["RENAME", "RENAMENX"]), src, dst]

    def field(self):
        return self.r.choice(FIELDS)

    def hkey(self):
        return self.r.choice(["h0", "h1", "h2", "h0", "h1"] + list(BIG_KEYS) + KEYS[:3])

    def hvalue(self, key):
        if key in self.big and self.r.random() < 0.1:
            return "v" * self.r.randint(60, 100)
        return self.value()

    def hset(self):
        k = self.hkey()
        n = self.r.randint(1, 3)
        if k in self.big and self.r.random() < 0.05:
            n = self.r.randint(100, 140)
            fields = ["n%d" % self.r.randint(0, 300) for _ in range(n)]
        else:
            fields = [self.field() for _ in range(n)]
        args = []
        for f in fields:
            args += [f, self.hvalue(k)]
        if self.r.random() < 0.03:
            args.pop()
        return [self.r.choice(["HSET", "HSET", "HMSET"]), k] + args

    def hincrbyfloat(self):
        # A huge result is written in full (%.17Lf: 309 digits for 1e308), past the packed
        # bound: the hash becomes a table in both servers, so its order is free from here on.
        k = self.hkey()
        self.big.add(k)
        return ["HINCRBYFLOAT", k, self.field(), self.float_arg()]

    def next(self):
        c = self.r.choice(self.cmds)
        return c[1](self)

    # ---- lists ----

    def lkey(self):
        return self.r.choice(LKEYS)

    def lelem(self):
        r = self.r.random()
        if r < 0.35:
            return self.r.choice(LPOOL)
        if r < 0.55:
            return "17000000000%02d" % self.r.randint(0, 20)
        if r < 0.62:
            return self.r.choice(INT_EDGES)
        if r < 0.66:
            # Either side of the one-byte length tag (239) and of a node's 4096 bytes.
            return self.r.choice("vw") * self.r.choice([238, 239, 240, 241, 300, 4095, 5000])
        return self.value()

    def lindex_arg(self):
        r = self.r.random()
        if r < 0.12:
            return self.r.choice(["0", "-1", "x", "", "9223372036854775807", "-9223372036854775808",
                                  "9223372036854775808", "+1", " 1", "1.5", "-0"])
        if r < 0.2:
            return str(self.r.randint(-400, 400))
        return str(self.r.randint(-12, 12))

    def lpush(self, name):
        k = self.lkey()
        n = self.r.randint(1, 4)
        if k == "lbig" and self.r.random() < 0.3:
            n = self.r.randint(50, 300)
        return [name, k] + [self.lelem() for _ in range(n)]

    def lpop(self):
        c = [self.r.choice(["LPOP", "RPOP", "lpop", "rpop"]), self.lkey()]
        r = self.r.random()
        if r < 0.5:
            c.append(self.r.choice(["0", "1", "2", "3", "-1", "x", "", "9223372036854775807",
                                    "-9223372036854775808", "1.5"]) if r < 0.1 else
                     str(self.r.randint(0, 20) if c[1] != "lbig" else self.r.randint(0, 200)))
        if self.r.random() < 0.02:
            c.append("1")  # too many arguments
        return c

    def lpos(self):
        c = ["LPOS", self.lkey(), self.lelem() if self.r.random() < 0.3 else self.r.choice(LPOOL)]
        opts = [["RANK", lambda: self.r.choice(["1", "2", "-1", "-2", "0", "3", "-3", "x",
                                                 "-9223372036854775808", "9223372036854775807",
                                                 "-9223372036854775807"])],
                ["COUNT", lambda: self.r.choice(["0", "1", "2", "5", "-1", "x", "100"])],
                ["MAXLEN", lambda: self.r.choice(["0", "1", "3", "10", "-1", "x", "1000"])]]
        for name, val in self.r.sample(opts, self.r.randint(0, 3)):
            c += [name if self.r.random() < 0.8 else name.lower(), val()]
        if self.r.random() < 0.04:
            c.append(self.r.choice(["RANK", "FOO", "COUNT"]))  # dangling or unknown
        return c

    def ltrim(self):
        k = self.lkey()
        if self.r.random() < 0.4:
            return ["LTRIM", k, "0", str(self.r.randint(5, 12))]  # the moving window recipe
        return ["LTRIM", k, self.lindex_arg(), self.lindex_arg()]


def g_set(g):
    opts = []
    if g.r.random() < 0.4:
        opts.append(g.r.choice(["NX", "XX", "nx", "xx"]))
    if g.r.random() < 0.3:
        opts.append("GET")
    opts += g.expiry_opts()
    if g.r.random() < 0.03:
        opts.append(g.r.choice(["NX", "XX", "FOO", "GET"]))
    g.r.shuffle(opts) if g.r.random() < 0.1 else None
    return ["SET", g.key(), g.value()] + opts


def g_mset(g):
    n = g.r.randint(1, 4)
    args = []
    for _ in range(n):
        args += [g.key(), g.value()]
    if g.r.random() < 0.05:
        args.pop()
    return [g.r.choice(["MSET", "MSETNX"])] + args


def g_keys_pattern(g):
    pats = ["*", "k*", "k?", "a\\*b", "a*b", "[a-c]*", "[^k]*", "[]", "[", "[^", "[!a]*", "*\\",
            "\\", "a[\\-]b", "[z-a]*", "h\\\\y", "*[x]*", "???", "?", "*?*?*", "[a-]*", "k[0-3",
            "A*", "[\xe0-\xef]*", "*b", "**", "*k*", "\\[x\\]"]
    if g.r.random() < 0.05:
        return g.r.choice(DEEP)
    if g.r.random() < 0.7:
        return g.r.choice(pats)
    return "".join(g.r.choice("*?[]^-\\ak0b") for _ in range(g.r.randint(0, 7)))


# Lists: their own keys, some shared with the string and hash commands (WRONGTYPE both ways).
LKEYS = ["l0", "l1", "l2", "l3", "lbig", "lbig", "k0", "k1", "h0"]
LPOOL = ["a", "b", "c", "1", "2", "-1", "007", "", "1700000000005", "x y"]

COMMANDS = [
    (1, g_set),
    (1, g_set),
    (1, lambda g: ["GET", g.key()]),
    (1, lambda g: ["SETEX", g.key(), g.ttl_arg(1000), g.value()]),
    (1, lambda g: ["PSETEX", g.key(), g.ttl_arg(1), g.value()]),
    (1, lambda g: ["SETNX", g.key(), g.value()]),
    (1, lambda g: ["MGET"] + [g.key() for _ in range(g.r.randint(1, 4))]),
    (1, g_mset),
    (1, lambda g: ["GETSET", g.key(), g.value()]),
    (1, lambda g: ["GETDEL", g.key()]),
    (1, lambda g: ["GETEX", g.key()] + g.expiry_opts(False, True)),
    (1, lambda g: ["INCRBYFLOAT", g.key(), g.float_arg()]),
    (1, lambda g: ["INCRBYFLOAT", g.key(), g.float_arg()]),
    (1, lambda g: ["APPEND", g.key(), g.value()]),
    (1, lambda g: ["STRLEN", g.key()]),
    (1, lambda g: ["INCRBY", g.key(), g.int_arg()]),
    (1, lambda g: ["INCR", g.key()]),
    (1, lambda g: ["DECRBY", g.key(), g.int_arg()]),
    (1, lambda g: ["DEL", g.key()]),
    (1, lambda g: ["EXISTS", g.key()]),
    (1, lambda g: ["TYPE", g.key()]),
    (1, lambda g: ["TTL", g.key()]),
    (1, lambda g: ["PTTL", g.key()]),
    (1, lambda g: [g.r.choice(["SET", "GETEX", "MSET", "MGET", "SETEX", "INCRBYFLOAT",
                               "APPEND", "GETDEL"])] + [g.key()] * g.r.randint(0, 1)),
    (2, lambda g: ["KEYS", g_keys_pattern(g)]),
    (2, lambda g: [g.r.choice(["EXPIRE", "PEXPIRE"]), g.key(), g.ttl_arg(1000)] +
     g.r.sample(["NX", "XX", "GT", "LT", "xx", "FOO"], g.r.choice([0, 0, 1, 1, 2]))),
    (2, lambda g: [g.r.choice(["EXPIREAT"]), g.key(), g.abs_time(1000)] +
     g.r.sample(["NX", "XX", "GT", "LT"], g.r.choice([0, 0, 1, 2]))),
    (2, lambda g: [g.r.choice(["PEXPIREAT"]), g.key(), g.abs_time(1)] +
     g.r.sample(["NX", "XX", "GT", "LT"], g.r.choice([0, 0, 1, 2]))),
    (2, lambda g: [g.r.choice(["EXPIRETIME", "PEXPIRETIME"]), g.key()]),
    (2, lambda g: g.rename()),
    (2, lambda g: ["TOUCH"] + [g.key() for _ in range(g.r.randint(1, 3))]),
    (2, lambda g: ["PERSIST", g.key()]),
    (2, lambda g: ["WATCH"] + [g.key() for _ in range(g.r.randint(0, 2))]),
    (3, lambda g: g.hset()),
    (3, lambda g: g.hset()),
    # Sorted sets, for WRONGTYPE across every value type.
    (3, lambda g: ["ZADD", g.hkey(), str(g.r.randint(0, 9)), g.field()]),
    (3, lambda g: ["ZCARD", g.hkey()]),
    (3, lambda g: ["HSETNX", g.hkey(), g.field(), g.value()]),
    (3, lambda g: ["HGET", g.hkey(), g.field()]),
    (3, lambda g: ["HMGET", g.hkey()] + [g.field() for _ in range(g.r.randint(1, 3))]),
    (3, lambda g: ["HDEL", g.hkey()] + [g.field() for _ in range(g.r.randint(1, 3))]),
    (3, lambda g: ["HEXISTS", g.hkey(), g.field()]),
    (3, lambda g: ["HLEN", g.hkey()]),
    (3, lambda g: ["HSTRLEN", g.hkey(), g.field()]),
    (3, lambda g: [g.r.choice(["HGETALL", "HKEYS", "HVALS"]), g.hkey()]),
    (3, lambda g: ["HINCRBY", g.hkey(), g.field(), g.int_arg()]),
    (3, lambda g: ["HINCRBY", g.hkey(), g.field(), g.int_arg()]),
    (3, lambda g: g.hincrbyfloat()),
    (3, lambda g: g.hincrbyfloat()),
    (3, lambda g: [g.r.choice(["HSET", "HGET", "HMGET", "HDEL", "HINCRBY", "HSETNX",
                               "HINCRBYFLOAT", "HGETALL"])] + [g.hkey()] * g.r.randint(0, 1)),
    (2, lambda g: [g.r.choice(["MULTI", "EXEC", "EXEC", "DISCARD", "UNWATCH"])]),
    (4, lambda g: g.lpush("LPUSH")),
    (4, lambda g: g.lpush("LPUSH")),
    (4, lambda g: g.lpush("RPUSH")),
    (4, lambda g: g.lpush("RPUSH")),
    (4, lambda g: g.lpush(g.r.choice(["LPUSHX", "RPUSHX"]))),
    (4, lambda g: g.lpop()),
    (4, lambda g: g.lpop()),
    (4, lambda g: ["LLEN", g.lkey()]),
    (4, lambda g: ["LINDEX", g.lkey(), g.lindex_arg()]),
    (4, lambda g: ["LINDEX", g.lkey(), g.lindex_arg()]),
    (4, lambda g: ["LRANGE", g.lkey(), g.lindex_arg(), g.lindex_arg()]),
    (4, lambda g: ["LRANGE", g.lkey(), "0", "-1"]),
    (4, lambda g: g.ltrim()),
    (4, lambda g: ["LSET", g.lkey(), g.lindex_arg(), g.lelem()]),
    (4, lambda g: ["LREM", g.lkey(), g.r.choice(["0", "1", "-1", "2", "-2", "5", "x",
                                                  "-9223372036854775808"]), g.r.choice(LPOOL)]),
    (4, lambda g: ["LINSERT", g.lkey(), g.r.choice(["BEFORE", "AFTER", "before", "after", "MID"]),
                   g.r.choice(LPOOL), g.lelem()]),
    (4, lambda g: g.lpos()),
    (4, lambda g: g.lpos()),
    (4, lambda g: [g.r.choice(["TYPE", "EXISTS", "DEL", "PERSIST", "TTL"]), g.lkey()]),
    (4, lambda g: ["RENAME", g.lkey(), g.lkey()]),
    (4, lambda g: [g.r.choice(["EXPIRE", "PEXPIRE"]), g.lkey(), g.ttl_arg(1000)]),
    (4, lambda g: [g.r.choice(["LPUSH", "RPUSH", "LPUSHX", "LPOP", "RPOP", "LLEN", "LINDEX",
                               "LRANGE", "LTRIM", "LSET", "LREM", "LINSERT", "LPOS"])] +
     [g.lkey()] * g.r.randint(0, 1) + ["1"] * g.r.randint(0, 5)),
    (4, lambda g: [g.r.choice(["GET", "HGET", "ZCARD", "INCR", "HLEN", "APPEND"])] +
     [g.lkey()] + ["f"] * g.r.randint(0, 1)),
]


def start(cmd, port):
    # stderr is the test's: a sanitizer report of the server lands in the test log.
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    p.port = port
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("%s exited with %s" % (cmd[0], p.returncode))
            time.sleep(0.025)
    p.kill()
    raise RuntimeError("%s did not listen on %d" % (cmd[0], port))


def stop(p):
    """SHUTDOWN NOSAVE, so a sanitizer build can check for leaks at exit; SIGKILL if that fails."""
    if p.poll() is None:
        try:
            s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
            s.sendall(encode(["SHUTDOWN", "NOSAVE"]))
            p.wait(timeout=30)
            s.close()
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
    p.wait()


def show(c):
    return " ".join(repr(a) if (not a or any(ch in a for ch in " \"'\\")) else a for a in c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DIFF_SEED", "0")) or
                    random.randrange(1, 2 ** 31))
    ap.add_argument("--count", type=int, default=int(os.environ.get("DIFF_COUNT", "100000")))
    ap.add_argument("--slices", default=os.environ.get("DIFF_SLICES", "1,2,3,4"))
    ap.add_argument("--resp3", action="store_true", help="compare every reply in RESP3")
    a = ap.parse_args()
    resp = 3 if a.resp3 else 2
    slices = {int(s) for s in a.slices.split(",")}
    rbin = os.environ.get("RLIMITD_BIN")
    redis = shutil.which("redis-server")
    if not rbin or not redis:
        print("need RLIMITD_BIN and redis-server")
        return 1
    tmp = tempfile.mkdtemp(prefix="types-diff.")
    rport, oport = free_port(), free_port()
    procs = []
    try:
        procs.append(start([rbin, "--port", str(rport), "--bind", "127.0.0.1", "--dir", tmp,
                            "--save-interval", "0"], rport))
        procs.append(start([redis, "--port", str(oport), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", tmp], oport))
        mine, oracle = Conn(rport, resp), Conn(oport, resp)
        for c in (mine, oracle):
            c.run([["FLUSHALL"]])
        print("types_diff: seed %d, %d commands, slices %s, RESP%d" % (a.seed, a.count, a.slices,
                                                                      resp))
        g = Gen(a.seed, slices)
        done = 0
        queued = None
        # What the stream covered: replies per command (plain / error), WRONGTYPE replies, the
        # longest list seen; printed at the end so a generator that stopped reaching a case shows.
        cover, wrongtype, longest = {}, 0, 0
        while done < a.count:
            batch = [g.next() for _ in range(min(64, a.count - done))]
            bigb = frozenset(k.encode("latin-1") for k in g.big)
            got, want = mine.run(batch), oracle.run(batch)
            for i, c in enumerate(batch):
                # The transaction state, followed from the oracle's replies, for EXEC's array.
                name = c[0].upper()
                if name == "MULTI" and want[i] == b"+OK\r\n":
                    queued = []
                elif queued is not None and want[i] == b"+QUEUED\r\n":
                    queued.append([x.encode("latin-1") for x in c])
                if not same([x.encode("latin-1") for x in c], got[i], want[i],
                            queued if name == "EXEC" else None, bigb):
                    print("FAIL seed %d: command %d differs: %s" % (a.seed, done + i + 1, show(c)))
                    print("  rlimitd: %r" % flat(got[i]))
                    print("  redis:   %r" % flat(want[i]))
                    print("  rerun: DIFF_SEED=%d DIFF_COUNT=%d%s" % (a.seed, done + i + 1,
                                                                    " --resp3" if a.resp3 else ""))
                    return 1
                if name in ("EXEC", "DISCARD") and flat(want[i])[:4] != b"-ERR":
                    queued = None
                w = flat(want[i])
                cnt = cover.setdefault(name, [0, 0])
                cnt[w[:1] == b"-"] += 1
                wrongtype += w.startswith(b"-WRONGTYPE")
                if name in ("LPUSH", "RPUSH", "LPUSHX", "RPUSHX") and w[:1] == b":":
                    longest = max(longest, int(w[1:-2]))
            done += len(batch)
        print("covered (plain/error): " + ", ".join(
            "%s %d/%d" % (n, v[0], v[1]) for n, v in sorted(cover.items())))
        print("WRONGTYPE replies: %d; longest list: %d" % (wrongtype, longest))
        print("types_diff: %d commands, all replies equal (seed %d, RESP%d)" % (done, a.seed,
                                                                                resp))
        return 0
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
