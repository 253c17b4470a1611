#!/usr/bin/python3
"""The server commands issue 4 asks for (COMMANDS.md), byte for byte over a raw socket: AUTH and
requirepass, MULTI/EXEC/DISCARD, CLIENT LIST/KILL/INFO, maxclients, idle timeout, maxmemory,
CONFIG GET/SET, SLOWLOG, LATENCY LATEST, INFO everything. These are what the client libraries
and tools in the other scripts lean on."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compat import Closed, Conn, Daemon, Results, wait_for  # noqa: E402

T = Results("test_commands")

OK = b"+OK\r\n"
NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"


def raw(c, *args):
    return c.call(*args, raw=True)[1]


def info_fields(c, section="everything"):
    text = c.call("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def client_list(c):
    return [dict(kv.split("=", 1) for kv in line.split())
            for line in c.call("CLIENT", "LIST").decode().splitlines() if line]


def test_auth():
    with Daemon("--requirepass", "p4ss") as d:
        c = Conn(d.port)
        T.eq("requirepass: command before AUTH", raw(c, "CL.THROTTLE", "a", 1, 1, 1), NOAUTH)
        T.eq("requirepass: PING before AUTH", raw(c, "PING"), NOAUTH)
        # redis-server 7.0.15's text, word for word (7.2 added "<proto>").
        T.eq("requirepass: HELLO 2 before AUTH", raw(c, "HELLO", "2"),
             b"-NOAUTH HELLO must be called with the client already authenticated, otherwise "
             b"the HELLO AUTH <user> <pass> option can be used to authenticate the "
             b"client and select the RESP protocol version at the same time\r\n")
        T.eq("requirepass: wrong AUTH", raw(c, "AUTH", "p4sS"), WRONGPASS)
        T.eq("requirepass: wrong length AUTH", raw(c, "AUTH", "p4ss\x00"), WRONGPASS)
        T.eq("requirepass: AUTH of another user", raw(c, "AUTH", "admin", "p4ss"), WRONGPASS)
        T.eq("requirepass: AUTH", raw(c, "AUTH", "p4ss"), OK)
        T.eq("requirepass: command after AUTH", raw(c, "CL.THROTTLE", "a", 15, 30, 60),
             b"*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n")
        T.eq("requirepass: RESET de-authenticates", (raw(c, "RESET"), raw(c, "PING")),
             (b"+RESET\r\n", NOAUTH))
        T.eq("requirepass: AUTH default <pass>", raw(c, "AUTH", "default", "p4ss"), OK)
        hello = c.call("HELLO", "2", "AUTH", "default", "p4ss", "SETNAME", "h")
        T.eq("requirepass: HELLO 2 AUTH SETNAME", (hello[:2], c.call("CLIENT", "GETNAME")),
             ([b"server", b"rlimitd"], b"h"))
        T.eq("requirepass: QUIT before AUTH is allowed", raw(Conn(d.port), "QUIT"), OK)
        T.eq("requirepass: CONFIG SET requirepass '' opens the server",
             (raw(c, "CONFIG", "SET", "requirepass", ""), raw(Conn(d.port), "PING")),
             (OK, b"+PONG\r\n"))
        c.close()
    with Daemon() as d:
        c = Conn(d.port)
        T.eq("no requirepass: AUTH <pass>: Redis's sentence", raw(c, "AUTH", "x"),
             b"-ERR AUTH <password> called without any password configured for the default "
             b"user. Are you sure your configuration is correct?\r\n")
        T.eq("no requirepass: CONFIG SET requirepass applies to new connections",
             (raw(c, "CONFIG", "SET", "requirepass", "later"), raw(Conn(d.port), "PING"),
              raw(c, "PING")), (OK, NOAUTH, b"+PONG\r\n"))
        c.close()


def test_transactions(c):
    T.eq("MULTI", raw(c, "MULTI"), OK)
    T.eq("MULTI: commands are QUEUED", [raw(c, "INCR", "tx:w"), raw(c, "EXPIRE", "tx:w", 60, "NX"),
                                        raw(c, "CL.THROTTLE", "tx:k", 15, 30, 60)],
         [b"+QUEUED\r\n"] * 3)
    T.eq("MULTI: nested MULTI", raw(c, "MULTI"), b"-ERR MULTI calls can not be nested\r\n")
    T.eq("EXEC: the replies in order", raw(c, "EXEC"),
         b"*3\r\n:1\r\n:1\r\n*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n")
    T.eq("EXEC without MULTI", raw(c, "EXEC"), b"-ERR EXEC without MULTI\r\n")
    T.eq("DISCARD without MULTI", raw(c, "DISCARD"), b"-ERR DISCARD without MULTI\r\n")
    raw(c, "MULTI")
    raw(c, "INCR", "tx:w")
    T.eq("DISCARD drops the queue", (raw(c, "DISCARD"), c.call("GET", "tx:w")), (OK, b"1"))
    raw(c, "MULTI")
    T.eq("MULTI: unknown command while queueing", raw(c, "NOSUCH", "x"),
         b"-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n")
    raw(c, "INCR", "tx:w")
    T.eq("EXEC after a queueing error: EXECABORT, nothing run",
         (raw(c, "EXEC"), c.call("GET", "tx:w")),
         (b"-EXECABORT Transaction discarded because of previous errors.\r\n", b"1"))


def test_clients(d, c):
    a, b = Conn(d.port), Conn(d.port)
    a.call("CLIENT", "SETNAME", "victim-a")
    b.call("CLIENT", "SETNAME", "victim-b")
    ids = {e.get("name"): e for e in client_list(c)}
    T.check("CLIENT LIST: one line per client, with id, addr, name",
            {"victim-a", "victim-b"} <= set(ids) and all("addr" in e for e in ids.values()),
            repr(ids))
    me = c.call("CLIENT", "INFO").decode()
    T.check("CLIENT INFO: this connection's line", me.startswith("id=%d " % c.call("CLIENT", "ID"))
            and me.count("\n") == 1, repr(me))
    T.eq("CLIENT KILL ID", raw(c, "CLIENT", "KILL", "ID", ids["victim-a"]["id"]), b":1\r\n")
    T.check("CLIENT KILL ID: that connection is closed", a.closed_by_server(10), "still open")
    T.eq("CLIENT KILL ADDR", raw(c, "CLIENT", "KILL", "ADDR", ids["victim-b"]["addr"]), b":1\r\n")
    T.check("CLIENT KILL ADDR: that connection is closed", b.closed_by_server(10), "still open")
    # The killed connections' sockets close first; their threads drop them from the registry
    # right after (a loop iteration later), so wait for that, bounded.
    gone = wait_for(lambda: not {"victim-a", "victim-b"} & {e.get("name") for e in
                                                            client_list(c)}, 10)
    T.check("CLIENT LIST: killed clients are gone", gone, repr(client_list(c)))
    T.eq("CLIENT KILL of no client (old form)", raw(c, "CLIENT", "KILL", "127.0.0.1:1"),
         b"-ERR No such client\r\n")
    T.eq("CLIENT KILL ID of no client", raw(c, "CLIENT", "KILL", "ID", "99999999"), b":0\r\n")
    a.close()
    b.close()


def test_maxclients(d, c):
    T.eq("CONFIG SET maxclients (live)", raw(c, "CONFIG", "SET", "maxclients", "2"), OK)
    other = Conn(d.port)
    T.eq("maxclients 2: second client served", raw(other, "PING"), b"+PONG\r\n")
    extra = Conn(d.port)
    reply = None
    try:
        reply = extra.read_reply(raw=True)[1]
    except (Closed, OSError) as e:
        reply = repr(e)
    T.eq("maxclients 2: third client is told", reply, b"-ERR max number of clients reached\r\n")
    T.check("maxclients 2: and closed", extra.closed_by_server(10), "still open")
    extra.close()
    T.check("maxclients: INFO rejected_connections", int(info_fields(c, "stats").get(
        "rejected_connections", 0)) >= 1, "")
    other.close()
    T.eq("CONFIG SET maxclients back", raw(c, "CONFIG", "SET", "maxclients", "10000"), OK)


def test_timeout(d, c):
    T.eq("CONFIG SET timeout 1 (live)", raw(c, "CONFIG", "SET", "timeout", "1"), OK)
    idle = Conn(d.port)
    idle.call("PING")
    # This connection must not go idle meanwhile: it pings while it waits (at most 15 s).
    closed = False
    for _ in range(75):
        c.call("PING")
        if idle.closed_by_server(0.2):
            closed = True
            break
    T.check("timeout 1: an idle client is closed", closed, "still open")
    T.eq("timeout 1: an active client is not", c.call("PING"), "PONG")
    idle.close()
    T.eq("CONFIG SET timeout 0", raw(c, "CONFIG", "SET", "timeout", "0"), OK)


def test_maxmemory(c):
    c.call("SET", "mm:old", "1")
    c.call("CL.THROTTLE", "mm:gcra", 15, 30, 600)
    T.eq("CONFIG SET maxmemory 1 (live)", raw(c, "CONFIG", "SET", "maxmemory", "1"), OK)
    T.eq("maxmemory: SET of a new key", raw(c, "SET", "mm:new", "1"), OOM)
    T.eq("maxmemory: CL.THROTTLE on a new key", raw(c, "CL.THROTTLE", "mm:new", 15, 30, 60), OOM)
    T.eq("maxmemory: ISALLOWED for a new key", raw(c, "ISALLOWED", "mm", "new", 60, 5), OOM)
    T.eq("maxmemory: INCR of a new key", raw(c, "INCR", "mm:newc"), OOM)
    T.eq("maxmemory: writes to an existing key refused too (denyoom, as Redis)",
         raw(c, "SET", "mm:old", "2"), OOM)
    T.eq("maxmemory: existing limiter keeps working",
         c.call("CL.THROTTLE", "mm:gcra", 15, 30, 600)[:3], [0, 16, 14])
    T.eq("maxmemory: reads and deletes work", (c.call("GET", "mm:old"), c.call("DEL", "mm:old")),
         (b"1", 1))
    T.eq("maxmemory: INFO shows it", info_fields(c, "memory").get("maxmemory"), "1")
    T.eq("CONFIG SET maxmemory 0", raw(c, "CONFIG", "SET", "maxmemory", "0"), OK)
    T.eq("maxmemory 0: new keys again", raw(c, "SET", "mm:new", "1"), OK)


def test_config(c):
    T.eq("CONFIG GET save (as a Redis without RDB)", c.call("CONFIG", "GET", "save"),
         [b"save", b""])
    T.eq("CONFIG GET appendonly", c.call("CONFIG", "GET", "appendonly"), [b"appendonly", b"no"])
    got = c.call("CONFIG", "GET", "max*", "timeout")
    T.eq("CONFIG GET globs, several patterns", got[0::2],
         [b"maxclients", b"maxmemory", b"maxmemory-policy", b"maxmemory-samples", b"timeout"])
    # Redis 7.0 answers a name asked for without glob characters under the spelling asked.
    T.eq("CONFIG GET is case-insensitive", c.call("CONFIG", "GET", "MAXCLIENTS")[0],
         b"MAXCLIENTS")
    T.eq("CONFIG GET glob is case-insensitive", c.call("CONFIG", "GET", "MAXCLIENT?")[0],
         b"maxclients")
    T.eq("CONFIG SET of a non-live setting", raw(c, "CONFIG", "SET", "port", "1"),
         b"-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable "
         b"config\r\n")
    T.eq("CONFIG SET save '' (as test scripts do)", raw(c, "CONFIG", "SET", "save", ""), OK)
    T.eq("CONFIG SET several at once", raw(c, "CONFIG", "SET", "slowlog-max-len", "64",
                                           "loglevel", "verbose"), OK)
    T.eq("CONFIG SET is all or nothing",
         (raw(c, "CONFIG", "SET", "slowlog-max-len", "65", "maxclients", "x"),
          c.call("CONFIG", "GET", "slowlog-max-len")),
         (b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument "
          b"couldn't be parsed into an integer\r\n", [b"slowlog-max-len", b"64"]))


def test_slowlog(d, c):
    raw(c, "CONFIG", "SET", "slowlog-log-slower-than", "0")
    raw(c, "SLOWLOG", "RESET")
    c.call("CLIENT", "SETNAME", "slowpoke")
    c.call("CL.THROTTLE", "slow:k", 15, 30, 60)
    c.call("AUTH", "default", "secret-not-set")
    entries = c.call("SLOWLOG", "GET", "3")
    T.check("SLOWLOG GET: Redis 7's 6-element entries, newest first",
            isinstance(entries, list) and len(entries) == 3 and
            all(len(e) == 6 for e in entries) and entries[0][0] > entries[1][0], repr(entries))
    by_cmd = {e[3][0].lower(): e for e in entries}
    T.eq("SLOWLOG GET: the arguments", by_cmd.get(b"cl.throttle", [0] * 6)[3],
         [b"CL.THROTTLE", b"slow:k", b"15", b"30", b"60"])
    T.eq("SLOWLOG GET: AUTH arguments redacted", by_cmd.get(b"auth", [0] * 6)[3],
         [b"AUTH", b"(redacted)", b"(redacted)"])
    T.eq("SLOWLOG GET: client name", by_cmd.get(b"cl.throttle", [0] * 6)[5], b"slowpoke")
    me = [e for e in client_list(c) if e.get("name") == "slowpoke"]
    T.eq("SLOWLOG GET: client address", by_cmd.get(b"cl.throttle", [0] * 6)[4].decode(),
         me[0]["addr"] if me else "?")
    T.check("SLOWLOG LEN", c.call("SLOWLOG", "LEN") >= 3, "")
    raw(c, "CONFIG", "SET", "slowlog-log-slower-than", "-1")
    raw(c, "SLOWLOG", "RESET")
    T.eq("SLOWLOG RESET empties it", c.call("SLOWLOG", "LEN"), 0)
    raw(c, "CONFIG", "SET", "slowlog-log-slower-than", "10000")


def test_info_latency(c):
    T.eq("LATENCY LATEST: an empty array", raw(c, "LATENCY", "LATEST"), b"*0\r\n")
    text = c.call("INFO", "everything").decode()
    for header in ("# Server", "# Clients", "# Memory", "# Persistence", "# Stats",
                   "# Replication", "# CPU", "# Commandstats", "# Errorstats", "# Keyspace"):
        T.check("INFO everything: " + header, ("\r\n%s\r\n" % header) in "\r\n" + text, "")
    T.check("INFO everything: loading:0", "\r\nloading:0\r\n" in text, "")
    T.check("INFO everything: errorstat_ERR after an error",
            "errorstat_ERR:count=" in text, text[-400:])
    T.check("INFO of an unknown section succeeds", isinstance(c.call("INFO", "nosuch"), bytes),
            "")
    T.eq("SELECT 0", raw(c, "SELECT", "0"), OK)
    T.eq("SELECT 1", raw(c, "SELECT", "1"), b"-ERR DB index is out of range\r\n")


def main():
    T.run("auth", test_auth)
    with Daemon() as d:
        c = Conn(d.port)
        for name, fn in (("transactions", lambda: test_transactions(c)),
                         ("clients", lambda: test_clients(d, c)),
                         ("maxclients", lambda: test_maxclients(d, c)),
                         ("timeout", lambda: test_timeout(d, c)),
                         ("maxmemory", lambda: test_maxmemory(c)),
                         ("config", lambda: test_config(c)),
                         ("slowlog", lambda: test_slowlog(d, c)),
                         ("info", lambda: test_info_latency(c))):
            T.run(name, fn)
        c.close()
    T.finish()


if __name__ == "__main__":
    main()
