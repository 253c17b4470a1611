#!/usr/bin/python3
"""redis-py (Debian's python3-redis) against the real rlimitd (issue 4).

Run with Debian's /usr/bin/python3, which is the interpreter python3-redis installs for.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402

import compat  # noqa: E402
from compat import Daemon, Results  # noqa: E402

T = Results("test_redis_py")


def cmdstat(r, name):
    """calls= of cmdstat_<name>, 0 if absent."""
    return r.info("commandstats").get("cmdstat_" + name, {}).get("calls", 0)


def test_connect_and_throttle(d):
    r = redis.Redis(host="127.0.0.1", port=d.port, socket_timeout=10)
    T.eq("connect: ping", r.ping(), True)
    T.eq("execute_command CL.THROTTLE: first call", r.execute_command(
        "CL.THROTTLE", "user123", 15, 30, 60, 1), [0, 16, 15, -1, 2])
    T.eq("execute_command CL.THROTTLE: peek on an absent key", r.execute_command(
        "CL.THROTTLE", "absent", 15, 30, 60, 0), [0, 16, 16, -1, 0])
    T.eq("execute_command CL.THROTTLE: binary-safe key", r.execute_command(
        "CL.THROTTLE", b"k\x00\xff\r\n", 1, 1, 60), [0, 2, 1, -1, 60])
    T.eq("execute_command ISALLOWED", [r.execute_command("ISALLOWED", "alice", "login", 60, 2)
                                       for _ in range(3)], [1, 1, 0])
    try:
        r.execute_command("CL.THROTTLE", "k", 1)
        T.check("CL.THROTTLE arity error raises", False, "no exception")
    except redis.ResponseError as e:
        T.eq("CL.THROTTLE arity error text", str(e),
             "wrong number of arguments for 'cl.throttle' command")
    T.eq("connection usable after an error", r.ping(), True)
    dr = redis.Redis(host="127.0.0.1", port=d.port, decode_responses=True)
    dr.set("greeting", "hello")
    T.eq("decode_responses client: GET", dr.get("greeting"), "hello")
    r.close()
    dr.close()


def test_worked_example(d):
    """COMMANDS.md "CL.THROTTLE": 20 quick calls, sent in one write by a non-transactional pipeline. Every reply
    must fit the GCRA model for a server time within the pipeline's run; when that took under a
    second (as it nearly always does) the replies must be exactly COMMANDS.md "CL.THROTTLE"'s."""
    r = redis.Redis(host="127.0.0.1", port=d.port)
    p = r.pipeline(transaction=False)
    for _ in range(20):
        p.execute_command("CL.THROTTLE", "worked", 15, 30, 60, 1)
    before = time.time_ns()
    got = p.execute()
    after = time.time_ns()
    fits, why = compat.gcra_fits([("worked", 15, 30, 60, 1, before, after, g) for g in got])
    T.check("pipeline: the 20 replies fit the GCRA model", fits, why)
    want = [[0, 16, 15 - i, -1, 2 * (i + 1)] for i in range(16)] + [[1, 16, 0, 2, 32]] * 4
    if after - before < 1_000_000_000:
        T.eq("pipeline: COMMANDS.md "CL.THROTTLE" worked example, 20 calls", got, want)
    else:
        print("# the pipeline took %.3f s: checked by the model only" % ((after - before) / 1e9))


def test_pipelines(d):
    r = redis.Redis(host="127.0.0.1", port=d.port)
    multi0, exec0 = cmdstat(r, "multi"), cmdstat(r, "exec")
    p = r.pipeline()  # transaction=True: MULTI ... EXEC
    p.execute_command("CL.THROTTLE", "tx", 15, 30, 60)
    p.incr("window:1")
    p.expire("window:1", 60, nx=True)
    p.expire("window:1", 30, nx=True)
    since = time.monotonic()
    T.eq("pipeline() (MULTI/EXEC): replies", p.execute(), [[0, 16, 15, -1, 2], 1, True, False])
    T.eq("pipeline() sent MULTI and EXEC once each",
         (cmdstat(r, "multi") - multi0, cmdstat(r, "exec") - exec0), (1, 1))
    # 60 s from the EXEC, no less than the time since allows (30 would mean the second won).
    ttl = r.ttl("window:1")
    low = int(60 - (time.monotonic() - since)) - 1
    T.check("pipeline(): EXPIRE NX kept the first TTL", low <= ttl <= 60,
            "ttl %r, want [%d, 60]" % (ttl, low))

    # A queueing error aborts the whole transaction (EXECABORT), as in Redis.
    before = r.get("window:1")
    p = r.pipeline()
    p.incr("window:1")
    p.execute_command("CL.THROTTLE", "tx", 1)
    try:
        p.execute()
        T.check("pipeline(): queueing error raises", False, "no exception")
    except redis.ResponseError as e:
        T.check("pipeline(): queueing error names the command",
                "wrong number of arguments for 'cl.throttle' command" in str(e), str(e))
    T.eq("pipeline(): aborted transaction changed nothing", r.get("window:1"), before)

    # A run-time error inside EXEC fails that command only.
    r.execute_command("ISALLOWED", "bob", "post", 60, 5)
    p = r.pipeline()
    p.incr("window:1")
    p.execute_command("CL.THROTTLE", "hist:{bob}:post", 15, 30, 60)
    res = p.execute(raise_on_error=False)
    T.eq("pipeline(): run-time error is per command", (res[0], type(res[1]).__name__, str(res[1])),
         (int(before) + 1, "ResponseError",
          "WRONGTYPE Operation against a key holding the wrong kind of value"))

    multi0 = cmdstat(r, "multi")
    p = r.pipeline(transaction=False)
    p.execute_command("CL.THROTTLE", "notx", 15, 30, 60)
    p.incr("window:2")
    p.ttl("window:2")
    T.eq("pipeline(transaction=False): replies", p.execute(), [[0, 16, 15, -1, 2], 1, -1])
    T.eq("pipeline(transaction=False) sent no MULTI", cmdstat(r, "multi") - multi0, 0)

    with r.pipeline() as p:
        p.multi()
        p.incr("ctx")
        p.incr("ctx")
        T.eq("pipeline as context manager with explicit multi()", p.execute(), [1, 2])


def test_scan(d):
    r = redis.Redis(host="127.0.0.1", port=d.port)
    want = {("scan:%d" % i).encode() for i in range(300)}
    p = r.pipeline(transaction=False)
    for k in want:
        p.set(k, 1)
    for i in range(20):
        p.execute_command("ISALLOWED", "u%d" % i, "act", 600, 3)
    p.execute()
    got = list(r.scan_iter(match="scan:*"))
    T.eq("scan_iter(match): every key, exactly once", (len(got), set(got)), (len(want), want))
    got = set(r.scan_iter(match="scan:*", count=7))
    T.eq("scan_iter(count=7)", got, want)
    got = set(r.scan_iter(_type="zset"))
    logs = {("hist:{u%d}:act" % i).encode() for i in range(20)}
    T.check("scan_iter(_type='zset'): the window logs, nothing else",
            logs <= got and all(k.startswith(b"hist:{") for k in got), repr(got))
    T.eq("scan_iter(match) with no match", list(r.scan_iter(match="nomatch:*")), [])


def test_info(d):
    r = redis.Redis(host="127.0.0.1", port=d.port)
    r.execute_command("CL.THROTTLE", "info:k", 15, 30, 60)
    info = r.info()
    T.check("info(): redis_version", isinstance(info.get("redis_version"), str) and
            info["redis_version"].startswith("7."), repr(info.get("redis_version")))
    T.eq("info(): loading", info.get("loading"), 0)
    T.eq("info(): tcp_port", info.get("tcp_port"), d.port)
    T.eq("info(): redis_mode", info.get("redis_mode"), "standalone")
    T.check("info(): connected_clients >= 1", isinstance(info.get("connected_clients"), int) and
            info["connected_clients"] >= 1, repr(info.get("connected_clients")))
    T.check("info(): used_memory > 0", isinstance(info.get("used_memory"), int) and
            info["used_memory"] > 0, repr(info.get("used_memory")))
    T.eq("info(): db0 keys match DBSIZE", info.get("db0", {}).get("keys"), r.dbsize())
    for field in ("run_id", "uptime_in_seconds", "total_commands_processed",
                  "instantaneous_ops_per_sec", "rdb_last_save_time", "role"):
        T.check("info(): has " + field, field in info, "missing")
    every = r.info("everything")
    T.check("info('everything'): cmdstat_cl.throttle calls",
            every.get("cmdstat_cl.throttle", {}).get("calls", 0) >= 1,
            repr(every.get("cmdstat_cl.throttle")))
    T.eq("info('everything'): loading", every.get("loading"), 0)
    T.eq("info('server'): only that section", "used_memory" in r.info("server"), False)
    T.check("info('nosuchsection') succeeds", isinstance(r.info("nosuchsection"), dict), "")


def test_client_names(d):
    r = redis.Redis(host="127.0.0.1", port=d.port, single_connection_client=True)
    T.eq("client_getname() before", r.client_getname(), None)
    T.eq("client_setname()", r.client_setname("rate-app"), True)
    T.eq("client_getname()", r.client_getname(), "rate-app")  # redis-py decodes it
    try:
        r.client_setname("has space")
        T.check("client_setname() with a space raises", False, "no exception")
    except redis.ResponseError as e:
        T.eq("client_setname() with a space: Redis's text", str(e),
             "Client names cannot contain spaces, newlines or special characters.")
    mine = [c for c in r.client_list() if c.get("name") == "rate-app"]
    T.eq("client_list(): shows the name once", len(mine), 1)
    T.eq("client_id() matches CLIENT LIST", mine and int(mine[0]["id"]), r.client_id())
    T.run("client_info() parses", lambda: T.eq(
        "client_info() parses", r.client_info().get("name"), "rate-app"))
    named = redis.Redis(host="127.0.0.1", port=d.port, client_name="from-pool")
    T.eq("Redis(client_name=) sets the name on connect", named.client_getname(), "from-pool")
    r.close()
    named.close()


def test_password():
    with Daemon("--requirepass", "s3cret pass") as d:
        ok = redis.Redis(host="127.0.0.1", port=d.port, password="s3cret pass")
        T.eq("requirepass: password= connects", ok.ping(), True)
        T.eq("requirepass: CL.THROTTLE after AUTH",
             ok.execute_command("CL.THROTTLE", "pw", 15, 30, 60), [0, 16, 15, -1, 2])
        ok.close()
        # What redis-py raises against Redis 7 too: it maps NOAUTH to AuthenticationError, and
        # WRONGPASS (which it does not know) to a plain ResponseError.
        for label, pw, cls, text in (
                ("without a password", None, redis.AuthenticationError,
                 "Authentication required."),
                ("with a wrong password", "nope", redis.ResponseError,
                 "WRONGPASS invalid username-password pair or user is disabled.")):
            bad = redis.Redis(host="127.0.0.1", port=d.port, password=pw)
            try:
                bad.ping()
                T.check("requirepass: %s fails" % label, False, "no exception")
            except redis.RedisError as e:
                T.eq("requirepass: %s fails cleanly" % label, (type(e), str(e)), (cls, text))
            bad.close()
        user = redis.Redis(host="127.0.0.1", port=d.port, username="default",
                           password="s3cret pass")
        T.eq("requirepass: username='default' + password", user.ping(), True)
        user.close()


def main():
    with Daemon() as d:
        for name, fn in (("connect", test_connect_and_throttle), ("worked", test_worked_example),
                         ("pipelines", test_pipelines), ("scan", test_scan),
                         ("info", test_info), ("client names", test_client_names)):
            T.run(name, lambda fn=fn: fn(d))
        rc = d.stop()
        T.eq("daemon exits 0 on SIGTERM", rc, 0)
    T.run("password", test_password)
    T.finish()


if __name__ == "__main__":
    main()
