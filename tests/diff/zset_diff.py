#!/usr/bin/env python3
"""zset_diff.py - sorted-set commands on rlimitd against Debian's redis-server 7.0, byte for byte.

Usage:
  RLIMITD_BIN=build/rlimitd python3 tests/diff/zset_diff.py        # starts both servers itself
  python3 tests/diff/zset_diff.py --rlimitd build/rlimitd --count 200000 --seed 42
  python3 tests/diff/zset_diff.py --rlimitd-port P --redis-port Q   # servers already running
  python3 tests/diff/zset_diff.py --self-check                      # redis-server vs redis-server
  python3 tests/diff/zset_diff.py --rlimitd build/rlimitd --skip ZRANDMEMBER,ZRANGEBYLEX  # partial

A seeded generator (seed: --seed, else $DIFF_SEED, else the time; printed first) sends the same
stream of commands to both servers in pipelined batches and compares every reply byte for byte;
the first difference is printed with the seed, the command's index, the command, both replies
and the last 20 commands on that key, and the exit status is 1. The stream never depends on the
replies, so one seed is one stream. What is compared other than byte for byte (tests/diff/README.md):
ZRANDMEMBER (random: type, count, membership, distinctness, scores, error texts) and TTL/PTTL
(a clock: same kind of answer, within the time the run took). Ends with `N passed, N failed`.
"""

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Cmd  # noqa: E402

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# ---- values -------------------------------------------------------------------------------

# Members: short ones, the empty string, binary ones, and ones past the 64-byte packed limit
# (zset-max-listpack-value), so a set changes representation when one is added.
SMALL_MEMBERS = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"aa", b"ab", b"b\x00",
                 b"", b"m1", b"m2", b"m10", b"m20", b"1", b"-1", b"1.5", b"inf", b"zz",
                 b"\x00", b"\x00\x01", b"a\r\nb", b"\xff\xfe", b"\xc3\xa9", b" ", b"[a", b"(a",
                 b"-", b"+", b"A", b"Z", b"0", b"5", b"10", b"05", b"-0", b"+5", b"1e1",
                 b"1700000000123", b"9007199254740993", b"-9007199254740991"]
LONG_MEMBERS = [b"x" * 64, b"x" * 65, b"y" * 100 + b"1", b"y" * 100 + b"2", b"\x00" * 70,
                b"L" * 300]

# Scores for ZADD/ZINCRBY: valid ones (ints, fractions, infinities, 17 significant digits,
# values that do not round-trip) and the syntax Redis accepts or refuses.
VALID_SCORES = [b"0", b"1", b"2", b"3", b"-1", b"-2", b"5", b"10", b"100", b"1.5", b"-1.5",
                b"0.1", b"0.2", b"0.3", b"2.5", b"1e3", b"1E3", b"-0", b"+inf", b"-inf", b"inf",
                b"-INF", b"Infinity", b"12345678901234567", b"1.2345678901234567",
                b"9007199254740993", b"1e300", b"-1e300", b"1.7976931348623157e308", b"4e-320",
                b"0x10", b"0X1p4", b"1.", b".5", b"+5", b"3.0000000000000004", b"1700000000123",
                b"0.30000000000000004", b"1e-5", b"123456.789"]
BAD_SCORES = [b"nan", b"NaN", b"-nan", b" 1", b"1 ", b"1e400", b"-1e400", b"1e-400", b"abc",
              b"", b"--1", b"1_0", b"1e", b"0x", b"(1", b"1,5", b"\x001"]

# Score-range endpoints (ZRANGEBYSCORE, ZCOUNT, ZREMRANGEBYSCORE, ZRANGE BYSCORE).
RANGE_OK = [b"-inf", b"+inf", b"inf", b"-INF", b"0", b"1", b"2", b"-1", b"1.5", b"3", b"10",
            b"(0", b"(1", b"(1.5", b"(-inf", b"(+inf", b"(inf", b"(-1", b"1e3", b"(1e3",
            b"0x10", b"-0", b"(-0", b"12345678901234567", b"(3", b"5", b"100", b"(100",
            b"1700000000123", b"(1700000000123", b"1e300", b" 1", b"( 1", b"1.", b".5"]
RANGE_BAD = [b"nan", b"(nan", b"abc", b"(", b"((1", b"[1", b"", b"1 ", b"1e400x", b"(abc",
             b"1e400", b"-1e400"]

# Lex-range endpoints.
LEX_OK = [b"-", b"+", b"[a", b"(a", b"[b", b"(b", b"[c", b"[aa", b"(aa", b"[m1", b"(m2", b"[",
          b"(", b"[\x00", b"(\xff", b"[zz", b"(zz", b"[m", b"[A", b"[-", b"(+", b"[b\x00"]
LEX_BAD = [b"a", b"", b"-a", b"+a", b"{a", b"]a", b"--", b"++"]

# Rank indexes and counts.
INDEXES = [b"0", b"1", b"2", b"3", b"5", b"10", b"-1", b"-2", b"-3", b"-10", b"100", b"-100",
           b"127", b"128", b"129", b"-129", b"1000", b"-1000", str(LONG_MAX).encode(),
           str(LONG_MIN).encode(), b"-0", b"+1"]
BAD_INDEXES = [b"1.5", b"abc", b"", b"9223372036854775808", b"-9223372036854775809", b" 1",
               b"1 ", b"0x10", b"1e3"]

TYPE_KEYS = [b"str", b"cnt"]   # a string key and a counter key among the sorted sets
ZKEYS = [b"z%d" % i for i in range(8)]
LEXKEYS = [b"zl%d" % i for i in range(3)]  # every member scored 0: lex ranges are meaningful
BIGKEYS = [b"zb%d" % i for i in range(2)]  # grown past 128 members
GROWN = BIGKEYS + [LEXKEYS[0]]  # those and a lex key: lex ranges on an unpacked set too
MISSING = b"nokey"
# Lex ranges are only meaningful when every member has the same score (otherwise Redis's answer
# depends on its skiplist's random levels): every key a lex command may see gets score 0 only.
LEXSAFE = LEXKEYS + [MISSING] + TYPE_KEYS


class Gen:
    """The command stream. Deterministic for a seed: it never looks at a reply."""

    def __init__(self, seed, count):
        self.r = random.Random(seed)
        self.count = count
        self.n = 0

    # -- pickers --

    def pick(self, seq):
        return self.r.choice(seq)

    def chance(self, p):
        return self.r.random() < p

    def member(self, key=None):
        r = self.r
        if key in GROWN and r.random() < 0.8:
            return b"m%d" % r.randrange(400)
        if r.random() < 0.06:
            return r.choice(LONG_MEMBERS)
        if r.random() < 0.04:
            return bytes(r.randrange(256) for _ in range(r.randrange(1, 8)))
        return r.choice(SMALL_MEMBERS)

    def score(self, bad=0.04):
        r = self.r
        if r.random() < bad:
            return r.choice(BAD_SCORES)
        x = r.random()
        if x < 0.45:
            return str(r.randrange(-5, 15)).encode()
        if x < 0.55:
            return (b"%.1f" % (r.randrange(-50, 50) / 10))
        return r.choice(VALID_SCORES)

    def srange(self):
        return self.pick(RANGE_BAD) if self.chance(0.05) else self.pick(RANGE_OK)

    def lrange(self):
        if self.chance(0.05):
            return self.pick(LEX_BAD)
        if self.chance(0.3):
            return self.pick([b"[", b"("]) + self.member()
        return self.pick(LEX_OK)

    def index(self):
        r = self.r
        if r.random() < 0.03:
            return r.choice(BAD_INDEXES)
        if r.random() < 0.6:
            return str(r.randrange(-12, 12)).encode()
        return r.choice(INDEXES)

    def count_arg(self):
        r = self.r
        if r.random() < 0.05:
            return r.choice(BAD_INDEXES)
        if r.random() < 0.7:
            return str(r.randrange(-3, 12)).encode()
        return r.choice([b"0", b"-1", b"-5", b"100", b"500", str(LONG_MAX).encode(),
                         str(LONG_MIN).encode(), b"128", b"129"])

    def key(self, lex=False):
        r = self.r
        x = r.random()
        if lex:
            if x < 0.8:
                return r.choice(LEXKEYS)
        elif x < 0.62:
            return r.choice(ZKEYS)
        elif x < 0.8:
            return r.choice(BIGKEYS)
        elif x < 0.86:
            return r.choice(LEXKEYS)
        if x < 0.93:
            return MISSING
        return r.choice(TYPE_KEYS)

    def limit(self):
        return [self.pick([b"LIMIT", b"limit"]), self.index(), self.count_arg()]

    def arity_mangle(self, args):
        """Sometimes drop or add an argument, for the arity and syntax errors."""
        if self.chance(0.03) and len(args) > 1:
            return args[: self.r.randrange(1, len(args))]
        if self.chance(0.02):
            return args + [self.pick([b"x", b"WITHSCORES", b"LIMIT", b"1"])]
        return args

    # -- commands --

    def zadd(self, key, lex=False):
        r = self.r
        flags = []
        for f in (b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"):
            if r.random() < 0.08:
                flags.append(f if r.random() < 0.8 else f.lower())
        if r.random() < 0.03:
            flags.append(r.choice([b"NX", b"FOO", b"CH"]))  # a repeat or an unknown flag
        r.shuffle(flags)
        if key in GROWN and r.random() < 0.5:
            npairs = r.randrange(10, 60)
        else:
            npairs = 1 if r.random() < 0.5 else r.randrange(1, 5)
        args = [b"ZADD", key] + flags
        bad = r.randrange(npairs) if r.random() < 0.05 else -1  # at most one refused score
        for i in range(npairs):
            if i == bad:
                sc = r.choice(BAD_SCORES)
            elif lex:  # one score for all: lex order stays the set's order
                sc = b"0"
            else:
                sc = self.score(bad=0)
            args += [sc, self.member(key)]
        if r.random() < 0.03:
            # An unpaired score (an appended argument may become its member: 0 on lex keys).
            args.append(b"0" if lex else self.score())
        return args

    def rank_range(self, key):
        r = self.r
        name = r.choice([b"ZRANGE", b"ZREVRANGE"])
        args = [name, key, self.index(), self.index()]
        if r.random() < 0.5:
            args.append(r.choice([b"WITHSCORES", b"withscores"]))
        return args

    def zrange_generic(self, key, lex_ok):
        """ZRANGE with BYSCORE/BYLEX/REV/LIMIT/WITHSCORES, options in any order, and the
        conflicts (LIMIT without BY..., WITHSCORES with BYLEX, BYSCORE with BYLEX)."""
        r = self.r
        mode = r.choice([b"", b"BYSCORE", b"BYLEX"] if lex_ok else [b"", b"BYSCORE"])
        if mode == b"BYSCORE":
            lo, hi = self.srange(), self.srange()
        elif mode == b"BYLEX":
            lo, hi = self.lrange(), self.lrange()
        else:
            lo, hi = self.index(), self.index()
        opts = []
        if mode:
            opts.append([mode])
        if r.random() < 0.4:
            opts.append([b"REV"])
        if r.random() < (0.5 if mode else 0.08):
            opts.append(self.limit())
        if r.random() < (0.4 if mode != b"BYLEX" else 0.05):
            opts.append([b"WITHSCORES"])
        if r.random() < 0.02:
            opts.append([r.choice([b"BYSCORE", b"BYLEX", b"FOO", b"LIMIT"])])
        r.shuffle(opts)
        args = [b"ZRANGE", key, lo, hi]
        for o in opts:
            args += o
        return args

    def byscore(self, key):
        r = self.r
        name = r.choice([b"ZRANGEBYSCORE", b"ZREVRANGEBYSCORE"])
        args = [name, key, self.srange(), self.srange()]
        opts = []
        if r.random() < 0.4:
            opts.append([b"WITHSCORES"])
        if r.random() < 0.4:
            opts.append(self.limit())
        r.shuffle(opts)
        for o in opts:
            args += o
        return args

    def bylex(self, key):
        r = self.r
        name = r.choice([b"ZRANGEBYLEX", b"ZREVRANGEBYLEX"])
        args = [name, key, self.lrange(), self.lrange()]
        if r.random() < 0.4:
            args += self.limit()
        if r.random() < 0.03:
            args.append(b"WITHSCORES")  # not an option of the BYLEX commands
        return args

    def zrandmember(self, key):
        r = self.r
        args = [b"ZRANDMEMBER", key]
        if r.random() < 0.75:
            x = r.random()
            if x < 0.8:
                c = str(r.randrange(-12, 12)).encode()
            elif x < 0.9:
                c = r.choice([b"200", b"-200", b"129", b"-300", b"1000"])
            elif x < 0.95:
                c = r.choice(BAD_INDEXES)
            else:
                # Out of range, refused before anything is generated. (Other huge negative
                # counts are not sent: Redis would try to build a reply that large.)
                c = r.choice([str(LONG_MIN).encode(), b"-4611686018427387904"])
            args.append(c)
            if c == b"-4611686018427387904":
                args.append(b"WITHSCORES")  # refused only with WITHSCORES (the doubled size)
            elif r.random() < 0.4:
                args.append(r.choice([b"WITHSCORES", b"withscores", b"FOO"]))
        return args

    def zset_command(self):
        """One sorted-set command on a random key (weights favour writes early on a key)."""
        r = self.r
        x = r.random()
        lexcmd = x >= 0.80 and x < 0.86
        key = self.key(lex=lexcmd)
        lex = key in LEXSAFE
        if x < 0.24:
            args = self.zadd(key, lex)
        elif x < 0.27:
            args = [b"ZREM", key] + [self.member(key) for _ in range(r.randrange(1, 4))]
        elif x < 0.30:
            args = [b"ZCARD", key]
        elif x < 0.33:
            args = [b"ZCOUNT", key, self.srange(), self.srange()]
        elif x < 0.37:
            args = [b"ZSCORE", key, self.member(key)]
        elif x < 0.39:
            args = [b"ZMSCORE", key] + [self.member(key) for _ in range(r.randrange(1, 5))]
        elif x < 0.43:
            inc = b"0" if lex else self.score()
            args = [b"ZINCRBY", key, inc, self.member(key)]
        elif x < 0.47:
            args = [r.choice([b"ZRANK", b"ZREVRANK"]), key, self.member(key)]
            if r.random() < 0.03:
                args.append(b"WITHSCORE")  # Redis 7.2's option: an arity error in 7.0
        elif x < 0.53:
            args = self.rank_range(key)
        elif x < 0.62:
            args = self.zrange_generic(key, lex_ok=lex)
        elif x < 0.70:
            args = self.byscore(key)
        elif x < 0.74:
            args = [b"ZREMRANGEBYSCORE", key, self.srange(), self.srange()]
        elif x < 0.77:
            args = [b"ZREMRANGEBYRANK", key, self.index(), self.index()]
        elif x < 0.80:
            args = [r.choice([b"ZPOPMIN", b"ZPOPMAX"]), key]
            if r.random() < 0.6:
                args.append(self.count_arg())
        elif x < 0.83:
            args = self.bylex(key)
        elif x < 0.845:
            args = [b"ZLEXCOUNT", key, self.lrange(), self.lrange()]
        elif x < 0.86:
            args = [b"ZREMRANGEBYLEX", key, self.lrange(), self.lrange()]
        else:
            return None
        # Lower-case names now and then: command names are case-insensitive.
        if r.random() < 0.05:
            args[0] = args[0].lower()
        return self.arity_mangle(args), key

    def keyspace_command(self):
        """Everything around the sorted sets: types, existence, deletion, expiry."""
        r = self.r
        key = self.key()
        x = r.random()
        if x < 0.15:
            return [b"TYPE", key], key
        if x < 0.25:
            return [b"EXISTS", key], key
        if x < 0.32:
            return [b"DEL", key], key
        if x < 0.40:
            k = r.choice(ZKEYS + BIGKEYS + LEXKEYS)  # turned into a string now and then below
            return [b"DEL", k], k
        if x < 0.45:
            return [b"GET", key], key  # WRONGTYPE on a sorted set
        if x < 0.48:
            return [b"INCR", key], key
        if x < 0.50:
            return [b"SET", key, b"v"], key  # a sorted set becomes a string
        if x < 0.60:
            k = r.choice(TYPE_KEYS)
            return ([b"SET", k, b"hello"] if k == b"str" else [b"INCR", k]), k
        if x < 0.75:
            # An expiry hours away (no run lasts that long, so it never falls between the two
            # servers' clocks): later commands see the key; TTL compares with a tolerance.
            if r.random() < 0.5:
                return [b"EXPIRE", key, r.choice([b"10000", b"100000", b"86400"])], key
            return [b"PEXPIRE", key, r.choice([b"10000000", b"100000000", b"86400000"])], key
        if x < 0.80:
            # Zero or negative: the key goes at once.
            return [r.choice([b"EXPIRE", b"PEXPIRE"]), key, r.choice([b"0", b"-1", b"-100"])], key
        if x < 0.88:
            return [b"PERSIST", key], key
        return [r.choice([b"TTL", b"PTTL"]), key], key

    def sweep(self):
        """Every key's type and whole contents: a write that answered right but stored wrong
        shows here even if no later command happens to read it."""
        for key in ZKEYS + LEXKEYS + BIGKEYS + TYPE_KEYS + [MISSING]:
            self.n += 2
            yield Cmd([b"TYPE", key], key)
            yield Cmd([b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"], key)

    def __iter__(self):
        r = self.r
        next_sweep = 2000
        while self.n < self.count:
            if self.n >= next_sweep:
                next_sweep += 2000
                yield from self.sweep()
            x = r.random()
            if x < 0.01:
                yield from self.multi_block()
                continue
            if x < 0.0015 + 0.01:
                yield from self.expire_barrier()
                continue
            if x < 0.016:
                self.n += 1
                yield Cmd([b"DEL", MISSING], MISSING)  # mostly missing indeed
                continue
            if x < 0.09:
                args, key = self.keyspace_command()
                self.n += 1
                check = check_ttl if args[0] in (b"TTL", b"PTTL") else None
                yield Cmd(args, key, check)
                continue
            if x < 0.11:
                # ZRANDMEMBER, then the whole set: the check needs the set as it was.
                key = self.key()
                args = self.zrandmember(key)
                if b"-4611686018427387904" not in args:  # never without its WITHSCORES
                    args = self.arity_mangle(args)
                self.n += 2
                yield Cmd(args, key, check_zrandmember, follow=1)
                yield Cmd([b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"], key)
                continue
            got = self.zset_command()
            if got is None:
                continue
            self.n += 1
            yield Cmd(got[0], got[1])
        yield from self.sweep()

    def multi_block(self):
        """MULTI, 1-5 commands (sorted-set or keyspace, errors included), EXEC or DISCARD."""
        r = self.r
        yield Cmd([b"MULTI"])
        n = r.randrange(1, 6)
        last = None
        for _ in range(n):
            got = self.zset_command() if r.random() < 0.8 else self.keyspace_command()
            if got is None or got[0][0] in (b"TTL", b"PTTL"):
                got = ([b"ZCARD", r.choice(ZKEYS)], None)
            last = got[1]
            yield Cmd(got[0], got[1])
        self.n += n + 2
        yield Cmd([b"EXEC" if r.random() < 0.9 else b"DISCARD"], last)

    def expire_barrier(self):
        """A key with a short expiry, then a pause longer than it on both servers: afterwards
        the key is gone on both, however slow the machine (a pause can only be longer)."""
        r = self.r
        key = r.choice(ZKEYS + BIGKEYS + LEXKEYS + TYPE_KEYS)
        ms = r.randrange(1, 20)
        self.n += 4
        yield Cmd([b"PEXPIRE", key, str(ms).encode()], key, sleep_after=(ms + 30) / 1000)
        yield Cmd([b"EXISTS", key], key)
        yield Cmd([b"ZCARD", key], key)
        yield Cmd([b"TYPE", key], key)


# ---- the comparisons that are not byte for byte -------------------------------------------

# TTL/PTTL: both servers set the expiry within the same batch, so their answers differ by the
# time between the two servers handling it. Allowed: the same sign class (-2, -1, or >= 0) and a
# difference no larger than the run has lasted so far (bounded, never a race with the clock).
RUN_START = time.monotonic()
RESP = 2  # the protocol both connections speak (--resp3: 3)


def check_ttl(cmds, ra, rb, i):
    a, b = ra[i], rb[i]
    if a == b:
        return None
    pa, pb = common.parse(a), common.parse(b)
    if not (isinstance(pa, int) and isinstance(pb, int)):
        return "TTL replies differ"
    if (pa < 0 or pb < 0) and pa != pb:
        return "TTL: one key has no expiry or does not exist"
    slack = time.monotonic() - RUN_START + 1
    if cmds[i].args[0].upper() == b"PTTL":
        slack *= 1000
    if abs(pa - pb) > slack:
        return "TTL differs by more than the run's duration"
    return None


def check_zrandmember(cmds, ra, rb, i):
    """ZRANDMEMBER is random: compared are the reply's type, its count, that every member is in
    the set (the ZRANGE 0 -1 WITHSCORES that follows it, from the same server, which must itself
    match byte for byte), distinctness for a positive count, each score, and error texts."""
    a, b = ra[i], rb[i]
    if a[:1] == b"-" or b[:1] == b"-":
        return None if a == b else "ZRANDMEMBER errors differ"
    if i + 1 >= len(ra):
        return "internal: ZRANDMEMBER without its ZRANGE"
    args = cmds[i].args
    count = int(args[2]) if len(args) > 2 else None
    withscores = len(args) > 3
    for raw, setraw in ((a, ra[i + 1]), (b, rb[i + 1])):
        s = common.parse(setraw)
        if isinstance(s, tuple):  # WRONGTYPE: ZRANDMEMBER must have failed too
            return "ZRANDMEMBER answered on a key ZRANGE refuses"
        s = common.pairs(s)
        scores = dict(zip(s[0::2], s[1::2]))
        got = common.parse(raw)
        if count is not None and withscores and isinstance(got, list) and got:
            # Redis 7.0: (member, score) pairs, flat in RESP2, two-element arrays in RESP3.
            nested = all(isinstance(x, list) and len(x) == 2 for x in got)
            if nested != (RESP == 3):
                return "ZRANDMEMBER WITHSCORES: pairs not in RESP%d's shape" % RESP
            got = common.pairs(got)
        if count is None:
            if not scores:
                if got is not None:
                    return "ZRANDMEMBER on an empty key: want nil"
            elif got not in scores:
                return "ZRANDMEMBER returned a non-member"
            continue
        if not isinstance(got, list):
            return "ZRANDMEMBER with a count: want an array"
        members = got[0::2] if withscores else got
        if withscores:
            if len(got) % 2:
                return "ZRANDMEMBER WITHSCORES: odd length"
            for m, sc in zip(got[0::2], got[1::2]):
                if scores.get(m) != sc:
                    return "ZRANDMEMBER WITHSCORES: wrong score for a member"
        want = min(count, len(scores)) if count >= 0 else (-count if scores else 0)
        if len(members) != want:
            return "ZRANDMEMBER: %d members, want %d" % (len(members), want)
        if any(m not in scores for m in members):
            return "ZRANDMEMBER returned a non-member"
        if count > 0 and len(set(members)) != len(members):
            return "ZRANDMEMBER with a positive count repeated a member"
    return None


def planted_difference_caught(ca, cb):
    """The comparator's own test (--self-check): a score that differs between the two servers
    must be reported, with ZRANDMEMBER's check too, or a pass proves nothing."""
    ca.call("ZADD", "canary", "1", "a")
    cb.call("ZADD", "canary", "2", "a")
    ok = True
    for cmds in ([Cmd([b"ZSCORE", b"canary", b"a"], b"canary")],
                 [Cmd([b"ZRANDMEMBER", b"canary", b"1", b"WITHSCORES"], b"canary",
                      check_zrandmember, follow=1),
                  Cmd([b"ZRANGE", b"canary", b"0", b"-1", b"WITHSCORES"], b"canary")]):
        try:
            common.run_streams(cmds, ca, cb, names=("redis-a", "redis-b"), seed="planted")
            print("zset_diff: FAIL: a planted difference (%s) was not reported"
                  % cmds[0].args[0].decode())
            ok = False
        except common.Mismatch:
            pass
    # The check itself must see a member that is not in the set, on either side.
    ca.call("ZADD", "canary2", "1", "a")
    cb.call("ZADD", "canary2", "1", "a")
    fake = [Cmd([b"ZRANDMEMBER", b"canary2", b"1"], b"canary2", check_zrandmember, follow=1),
            Cmd([b"ZRANGE", b"canary2", b"0", b"-1", b"WITHSCORES"], b"canary2")]
    if check_zrandmember(fake, [b"*1\r\n$1\r\nb\r\n", b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"],
                         [b"*1\r\n$1\r\na\r\n", b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"], 0) is None:
        print("zset_diff: FAIL: ZRANDMEMBER's check accepted a non-member")
        ok = False
    for c in (ca, cb):
        c.call("DEL", "canary", "canary2")
    if ok:
        print("zset_diff: planted differences are reported (the comparator can fail)")
    return ok


class Coverage:
    """What the stream reached, printed at the end: per command, how many calls answered
    without an error and how many with one; the largest set seen."""

    def __init__(self):
        self.calls = {}
        self.largest = 0
        self.wrongtype = 0

    def __call__(self, cmd, reply):
        name = cmd.args[0].upper().decode() if cmd.args else "?"
        c = self.calls.setdefault(name, [0, 0])
        c[reply[:1] == b"-"] += 1
        if reply.startswith(b"-WRONGTYPE"):
            self.wrongtype += 1
        if name == "ZCARD" and reply[:1] == b":":
            self.largest = max(self.largest, int(reply[1:-2]))

    def print(self):
        print("coverage (ok/error): " + ", ".join(
            "%s %d/%d" % (k, v[0], v[1]) for k, v in sorted(self.calls.items())))
        print("largest ZCARD seen: %d; WRONGTYPE replies: %d" % (self.largest, self.wrongtype))


# ---- main ---------------------------------------------------------------------------------


def main():
    started = []
    try:
        rc = run(started)
    finally:
        problems = [p for p in (s.stop() for s in started) if p]
    for p in problems:  # a server that crashed, leaked or failed to stop cleanly fails the run
        print(p)
    if problems and rc == 0:
        rc = 1
        print("0 passed, 1 failed")
    elif rc == 0:
        print("1 passed, 0 failed")
    return rc


def run(started):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--rlimitd", help="rlimitd binary to start (default: $RLIMITD_BIN)")
    ap.add_argument("--rlimitd-port", type=int, help="compare an rlimitd already running here")
    ap.add_argument("--redis-port", type=int, help="compare a redis-server already running here")
    ap.add_argument("--self-check", action="store_true",
                    help="redis-server against a second redis-server (proves the stream)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--count", type=int, default=int(os.environ.get("DIFF_COUNT", 100000)))
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--resp3", action="store_true",
                    help="both connections open with HELLO 3: every reply compared in RESP3")
    ap.add_argument("--skip", default="",
                    help="commands to leave out of the stream, e.g. ZRANDMEMBER,ZRANGEBYLEX "
                         "(while they are being written; the meson test skips none)")
    opts = ap.parse_args()

    seed = opts.seed
    if seed is None:
        seed = int(os.environ["DIFF_SEED"]) if os.environ.get("DIFF_SEED") else \
            int(time.time() * 1000) % 1000000007
    global RESP
    RESP = 3 if opts.resp3 else 2
    print("zset_diff: seed %d, %d commands, RESP%d (rerun: DIFF_SEED=%d%s)"
          % (seed, opts.count, RESP, seed, " with --resp3" if opts.resp3 else ""), flush=True)

    if opts.self_check:
        names = ("redis-a", "redis-b")
        sa = common.start_redis()
        sb = common.start_redis()
        started += [sa, sb]
        pa, pb = sa.port, sb.port
    else:
        names = ("rlimitd", "redis")
        if opts.rlimitd_port:
            pa = opts.rlimitd_port
        else:
            s = common.start_rlimitd(common.resolve_rlimitd(opts.rlimitd))
            started.append(s)
            pa = s.port
        if opts.redis_port:
            pb = opts.redis_port
        else:
            s = common.start_redis()
            started.append(s)
            pb = s.port
    ca, cb = common.Resp(pa, resp=RESP), common.Resp(pb, resp=RESP)
    # A clean start: whatever an earlier run left behind on servers started by hand.
    for c in (ca, cb):
        for k in ZKEYS + LEXKEYS + BIGKEYS + TYPE_KEYS + [MISSING]:
            c.call("DEL", k)
    t0 = time.monotonic()
    cover = Coverage()
    skip = {w.strip().upper().encode() for w in opts.skip.split(",") if w.strip()}
    stream = Gen(seed, opts.count)
    if skip:
        print("zset_diff: leaving out %s: not a full run" % b",".join(sorted(skip)).decode())
        stream = (c for c in stream if not c.args or c.args[0].upper() not in skip)
    try:
        n = common.run_streams(stream, ca, cb, names=names,
                               batch=opts.batch, seed=seed, observe=cover)
    except common.Mismatch as e:
        print(e, flush=True)
        print("0 passed, 1 failed")
        return 1
    except (common.ProtocolError, OSError) as e:
        print("zset_diff: connection failed (seed %d): %s" % (seed, e))
        for s in started:
            if not s.alive():
                print("%s exited (%s); its log:\n%s" % (s.name, s.proc.returncode,
                                                         s.log_tail()))
        print("0 passed, 1 failed")
        return 1
    for s in started:
        if not s.alive():
            print("%s died during the run:\n%s" % (s.name, s.log_tail()))
            print("0 passed, 1 failed")
            return 1
    print("zset_diff: %d commands, every reply the same, %.1f s (seed %d)"
          % (n, time.monotonic() - t0, seed))
    cover.print()
    if opts.self_check and not planted_difference_caught(ca, cb):
        print("0 passed, 1 failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
