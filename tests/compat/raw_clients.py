#!/usr/bin/python3
"""go-redis v9 and Jedis 5 cannot be installed here (no Go module or Maven access), so their
connect sequences are replayed byte for byte over a raw socket, and the replies are checked as
those clients parse them (issue 4).

What they send, from their sources:
- go-redis v9 (redis.go, baseClient.initConn): `HELLO 3 [AUTH <user|default> <pass>]
  [SETNAME <name>]` (rlimitd answers it with the RESP3 map, as Redis 7.0); on any RESP error
  reply it stays on RESP2 and, if it has a password, sends
  `AUTH <pass>` (or `AUTH <user> <pass>`). Then, pipelined, `CLIENT SETNAME <name>` if it has a
  name, and, pipelined, `CLIENT SETINFO LIB-NAME go-redis(<suffix>,<go version>)` and
  `CLIENT SETINFO LIB-VER <version>`, whose error replies it ignores. Cluster and ring clients
  read `COMMAND` once (command.go, CommandsInfoCmd.readReply): every entry must be an array of
  6, 7 or 10 elements: name, arity, flags, first key, last key, step, ACL categories, then three
  elements it skips (tips, key specs, subcommands); routing uses the first key position.
- Jedis 5 (Connection.initializeFromClientConfig): `AUTH [<user>] <pass>` if it has a password
  (no HELLO unless RESP3 is asked for), then `CLIENT SETNAME <name>`, `CLIENT SETINFO LIB-NAME
  jedis` and `CLIENT SETINFO LIB-VER <version>` written together and read together, errors
  kept as values. Pools check connections with `PING`.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compat import Conn, Daemon, Error, Results, Status, encode  # noqa: E402

T = Results("raw_clients")

NOPROTO = b"-NOPROTO unsupported protocol version\r\n"


def hello3_ok(raw):
    """HELLO 3's reply as go-redis reads it: Redis 7.0's 7-field map with proto 3."""
    return raw.startswith(b"%7\r\n$6\r\nserver\r\n") and b"$5\r\nproto\r\n:3\r\n" in raw
NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
OK = b"+OK\r\n"
THROTTLE_FIRST = b"*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"

GO_LIB_NAME = "go-redis(,go1.22.5)"
GO_LIB_VER = "9.7.0"


def replies(c, n):
    """The exact bytes of the next n replies."""
    return [c.read_reply(raw=True)[1] for _ in range(n)]


def client_info(c):
    info = c.call("CLIENT", "INFO")
    return dict(kv.split("=", 1) for kv in info.decode().split())


# ---- go-redis v9 ----

def go_redis_connect(port, password=None, name=None):
    """baseClient.initConn. Returns the connection and the replies of each step."""
    c = Conn(port)
    hello = ["HELLO", "3"]
    if password:
        hello += ["AUTH", "default", password]
    if name:
        hello += ["SETNAME", name]
    steps = {"hello": c.call(*hello, raw=True)[1]}
    if steps["hello"].startswith(b"-") and password:
        steps["auth"] = c.call("AUTH", password, raw=True)[1]
    if name:
        steps["setname"] = c.call("CLIENT", "SETNAME", name, raw=True)[1]
    c.send_raw(encode("CLIENT", "SETINFO", "LIB-NAME", GO_LIB_NAME) +
               encode("CLIENT", "SETINFO", "LIB-VER", GO_LIB_VER))
    steps["setinfo"] = replies(c, 2)
    return c, steps


def test_go_redis(d):
    c, steps = go_redis_connect(d.port)
    T.check("go-redis: HELLO 3 gets the RESP3 map", hello3_ok(steps["hello"]), steps["hello"])
    T.eq("go-redis: CLIENT SETINFO LIB-NAME / LIB-VER pipelined", steps["setinfo"], [OK, OK])
    T.eq("go-redis: CL.THROTTLE on RESP3 (the same array)",
         c.call("CL.THROTTLE", "go:user", 15, 30, 60, 1, raw=True)[1], THROTTLE_FIRST)
    info = client_info(c)
    T.eq("go-redis: CLIENT INFO shows lib-name and lib-ver",
         (info.get("lib-name"), info.get("lib-ver")), (GO_LIB_NAME, GO_LIB_VER))
    c.close()

    c, steps = go_redis_connect(d.port, name="go-app")
    T.check("go-redis with ClientName: HELLO 3 SETNAME", hello3_ok(steps["hello"]),
            steps["hello"])
    T.eq("go-redis with ClientName: CLIENT SETNAME", steps["setname"], OK)
    T.eq("go-redis with ClientName: name is set", c.call("CLIENT", "GETNAME"), b"go-app")
    c.close()

    # Protocol: 2 in go-redis options sends HELLO 2 and reads a map (an even array in RESP2).
    c = Conn(d.port)
    hello = c.call("HELLO", "2")
    fields = dict(zip(hello[0::2], hello[1::2])) if isinstance(hello, list) else {}
    T.eq("go-redis Protocol 2: HELLO 2 map keys", list(fields),
         [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"])
    T.eq("go-redis Protocol 2: proto, mode, role, modules",
         [fields.get(k) for k in (b"proto", b"mode", b"role", b"modules")],
         [2, b"standalone", b"master", []])
    c.close()


def test_go_redis_password():
    with Daemon("--requirepass", "gopass") as d:
        c, steps = go_redis_connect(d.port, password="gopass")
        T.check("go-redis with Password: HELLO 3 AUTH default ... authenticates",
                hello3_ok(steps["hello"]), steps["hello"])
        T.eq("go-redis with Password: no AUTH fallback needed", steps.get("auth"), None)
        T.eq("go-redis with Password: SETINFO after AUTH", steps["setinfo"], [OK, OK])
        T.eq("go-redis with Password: CL.THROTTLE",
             c.call("CL.THROTTLE", "go:pw", 15, 30, 60, raw=True)[1], THROTTLE_FIRST)
        c.close()

        c, steps = go_redis_connect(d.port, password="wrong")
        T.eq("go-redis wrong Password: AUTH fails with WRONGPASS", steps.get("auth"), WRONGPASS)
        T.eq("go-redis wrong Password: later commands get NOAUTH",
             c.call("CL.THROTTLE", "go:pw", 15, 30, 60, raw=True)[1], NOAUTH)
        c.close()

        c, steps = go_redis_connect(d.port)
        T.eq("go-redis no Password: SETINFO errors are NOAUTH (go-redis ignores them)",
             steps["setinfo"], [NOAUTH, NOAUTH])
        T.eq("go-redis no Password: command gets NOAUTH",
             c.call("CL.THROTTLE", "go:pw", 15, 30, 60, raw=True)[1], NOAUTH)
        T.eq("go-redis no Password: connection still usable, HELLO AUTH works",
             c.call("HELLO", "2", "AUTH", "default", "gopass")[:2], [b"server", b"rlimitd"])
        c.close()


def go_redis_parse_command(entries):
    """CommandsInfoCmd.readReply: {name: (arity, flags, first, last, step, acl)}, or raises."""
    out = {}
    for e in entries:
        if not isinstance(e, list) or len(e) not in (6, 7, 10):
            raise ValueError("got %r elements in COMMAND reply, wanted 6/7/10" %
                             (len(e) if isinstance(e, list) else e))
        name, arity, flags, first, last, step = e[:6]
        if not isinstance(name, (bytes, str)) or not all(
                isinstance(v, int) for v in (arity, first, last, step)):
            raise ValueError("bad types in %r" % e[:6])
        if not isinstance(flags, list) or not all(isinstance(f, (bytes, str)) for f in flags):
            raise ValueError("flags of %r" % name)
        acl = e[6] if len(e) >= 7 else []
        if not isinstance(acl, list) or not all(isinstance(f, (bytes, str)) for f in acl):
            raise ValueError("ACL categories of %r" % name)
        out[name.decode() if isinstance(name, bytes) else name] = (arity, flags, first, last,
                                                                   step, acl)
    return out


# Redis 7.0.15's `COMMAND INFO get`, byte for byte: rlimitd's entry for a command Redis also has
# must be the same.
REDIS7_GET = (
    b"*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
    b"*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n"
    b"*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n"
    b"$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n"
    b"*2\r\n$5\r\nindex\r\n:1\r\n"
    b"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n"
    b"*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n")


def keyspec(flags, notes=None):
    """A Redis 7 key spec for one key at argument 1, as RESP2 bytes."""
    head = b""
    if notes is not None:
        head = b"$5\r\nnotes\r\n$%d\r\n%s\r\n" % (len(notes), notes)
    flag_bytes = b"*%d\r\n" % len(flags) + b"".join(b"+%s\r\n" % f for f in flags)
    return (b"*1\r\n*%d\r\n" % (8 if notes is not None else 6) + head +
            b"$5\r\nflags\r\n" + flag_bytes +
            b"$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n"
            b"*2\r\n$5\r\nindex\r\n:1\r\n"
            b"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n"
            b"*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n")


def test_command_entries(d):
    c = Conn(d.port)
    entries = c.call("COMMAND")
    T.check("COMMAND: every entry is Redis 7's 10 elements",
            isinstance(entries, list) and entries and all(
                isinstance(e, list) and len(e) == 10 for e in entries),
            repr([e[0] for e in entries if not isinstance(e, list) or len(e) != 10]))
    try:
        parsed = go_redis_parse_command(entries)
        T.check("COMMAND: go-redis's CommandsInfoCmd parser accepts it", True)
    except ValueError as e:
        parsed = {}
        T.check("COMMAND: go-redis's CommandsInfoCmd parser accepts it", False, str(e))
    T.eq("COMMAND COUNT matches COMMAND", c.call("COMMAND", "COUNT"), len(entries))
    for name in ("cl.throttle", "gcra", "isallowed"):
        got = parsed.get(name)
        T.eq("COMMAND: go-redis routes %s by its first argument" % name,
             got and got[2:5], (1, 1, 1))
    # Every element's RESP type, for every entry: name bulk, ints, arrays of status replies,
    # tips as bulk strings, key specs as flat maps with bulk keys, no subcommands
    # (tests/diff/command_diff.py compares the entries themselves with redis-server's).
    bad = []
    for e in entries:
        name, arity, flags, first, last, step, acl, tips, specs, subs = e
        if not (isinstance(name, bytes) and name == name.lower() and
                all(isinstance(f, Status) for f in flags) and
                all(isinstance(a, Status) and a.startswith("@") for a in acl) and
                all(isinstance(t, bytes) for t in tips) and
                all(isinstance(s, list) and len(s) % 2 == 0 and
                    all(isinstance(k, bytes) for k in s[0::2]) for s in specs) and
                subs == [] and
                # a key spec per differently flagged key (RENAME: 2), or one key-count spec
                # (EVAL: movablekeys, first key 0); none for a command without keys
                (len(specs) >= 1) == (first > 0 or "movablekeys" in flags)):
            bad.append(name)
    T.eq("COMMAND: every entry's element types are Redis 7's", bad, [])

    T.eq("COMMAND INFO get: byte for byte Redis 7.0's",
         c.call("COMMAND", "INFO", "get", raw=True)[1], b"*1\r\n" + REDIS7_GET)
    want = (b"*10\r\n$11\r\ncl.throttle\r\n:-5\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n"
            b":1\r\n:1\r\n:1\r\n*2\r\n+@write\r\n+@fast\r\n*0\r\n" +
            keyspec([b"RW", b"access", b"update"]) + b"*0\r\n")
    T.eq("COMMAND INFO cl.throttle: exact bytes",
         c.call("COMMAND", "INFO", "CL.THROTTLE", raw=True)[1], b"*1\r\n" + want)
    want = (b"*10\r\n$9\r\nisallowed\r\n:5\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n"
            b":1\r\n:1\r\n:1\r\n*2\r\n+@write\r\n+@fast\r\n*0\r\n" +
            keyspec([b"RW", b"access", b"update"],
                    b"The state key is hist:{user}:action; the user is its hash tag, "
                    b"so route by it") + b"*0\r\n")
    T.eq("COMMAND INFO isallowed: exact bytes",
         c.call("COMMAND", "INFO", "isallowed", raw=True)[1], b"*1\r\n" + want)
    T.eq("COMMAND INFO of an unknown name: null", c.call("COMMAND", "INFO", "nosuch"), [None])
    T.eq("COMMAND GETKEYS CL.THROTTLE", c.call("COMMAND", "GETKEYS", "CL.THROTTLE", "k", 1, 2,
                                                3), [b"k"])
    T.eq("COMMAND GETKEYS ISALLOWED routes by the user",
         c.call("COMMAND", "GETKEYS", "ISALLOWED", "alice", "login", 60, 3), [b"alice"])
    c.close()


# ---- Jedis 5 ----

def test_jedis(d):
    c = Conn(d.port)
    c.send_raw(encode("CLIENT", "SETINFO", "LIB-NAME", "jedis") +
               encode("CLIENT", "SETINFO", "LIB-VER", "5.1.0"))
    T.eq("Jedis: CLIENT SETINFO pair, written and read together", replies(c, 2), [OK, OK])
    T.eq("Jedis pool validation: PING", c.call("PING", raw=True)[1], b"+PONG\r\n")
    T.eq("Jedis: sendCommand(CL.THROTTLE)",
         c.call("CL.THROTTLE", "jedis:user", 15, 30, 60, 1, raw=True)[1], THROTTLE_FIRST)
    info = client_info(c)
    T.eq("Jedis: CLIENT INFO shows lib-name and lib-ver",
         (info.get("lib-name"), info.get("lib-ver")), ("jedis", "5.1.0"))
    # Jedis 3/4 send QUIT when a pooled connection is destroyed.
    T.eq("Jedis 3/4 disconnect: QUIT answers OK", c.call("QUIT", raw=True)[1], OK)
    T.check("Jedis 3/4 disconnect: server closes after QUIT", c.closed_by_server(10), "still open")
    c.close()

    # A client-name with a suffix, as ClientSetInfoConfig.withLibNameSuffix builds it.
    c = Conn(d.port)
    c.send_raw(encode("CLIENT", "SETNAME", "jedis-app") +
               encode("CLIENT", "SETINFO", "LIB-NAME", "jedis(spring-data)") +
               encode("CLIENT", "SETINFO", "LIB-VER", "5.1.0"))
    T.eq("Jedis with clientName: three replies", replies(c, 3), [OK, OK, OK])
    T.eq("Jedis with clientName: name is set", c.call("CLIENT", "GETNAME"), b"jedis-app")
    c.close()


def test_jedis_password():
    with Daemon("--requirepass", "jpass") as d:
        c = Conn(d.port)
        T.eq("Jedis with password: AUTH <pass>", c.call("AUTH", "jpass", raw=True)[1], OK)
        c.send_raw(encode("CLIENT", "SETINFO", "LIB-NAME", "jedis") +
                   encode("CLIENT", "SETINFO", "LIB-VER", "5.1.0"))
        T.eq("Jedis with password: SETINFO after AUTH", replies(c, 2), [OK, OK])
        c.close()
        c = Conn(d.port)
        T.eq("Jedis with user and password: AUTH default <pass>",
             c.call("AUTH", "default", "jpass", raw=True)[1], OK)
        c.close()
        c = Conn(d.port)
        T.eq("Jedis with another user: WRONGPASS",
             c.call("AUTH", "admin", "jpass", raw=True)[1], WRONGPASS)
        T.eq("Jedis wrong password: WRONGPASS", c.call("AUTH", "nope", raw=True)[1], WRONGPASS)
        c.close()
        # RESP3 asked for with a user: HELLO 3 AUTH ... authenticates and switches; a protocol
        # rlimitd (and Redis 7.0) does not speak is still NOPROTO, not a password error.
        c = Conn(d.port)
        r = c.call("HELLO", "3", "AUTH", "default", "jpass", raw=True)[1]
        T.check("Jedis RESP3 + user: HELLO 3 AUTH gets the RESP3 map", hello3_ok(r), r)
        T.eq("Jedis RESP4 + user: HELLO 4 AUTH gets NOPROTO",
             c.call("HELLO", "4", "AUTH", "default", "jpass", raw=True)[1], NOPROTO)
        c.close()


def main():
    with Daemon() as d:
        T.run("go-redis", lambda: test_go_redis(d))
        T.run("COMMAND entries", lambda: test_command_entries(d))
        T.run("Jedis", lambda: test_jedis(d))
        # The error replies parse as errors (no client library would see garbage).
        c = Conn(d.port)
        T.check("HELLO 4 reply parses as a RESP error", isinstance(c.call("HELLO", "4"), Error),
                "")
        T.check("HELLO 3 reply parses as a map", isinstance(c.call("HELLO", "3"), dict), "")
        c.close()
    T.run("go-redis password", test_go_redis_password)
    T.run("Jedis password", test_jedis_password)
    T.finish()


if __name__ == "__main__":
    main()
