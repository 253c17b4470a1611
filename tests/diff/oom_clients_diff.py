#!/usr/bin/env python3
"""Client buffers count toward maxmemory, against Debian's redis-server 7.0 (issue 28).

Redis 7.0's used_memory includes what its normal clients hold (INFO mem_clients_normal): their
query buffers, their unsent replies and their queued transactions. Each scenario runs on both
servers: maxmemory is set MARGIN above the used memory measured before one connection starts
holding much more than MARGIN (an unread 16 MB reply, a 16 MB command not yet complete, a MULTI
of 10 x 1 MB SETs), then a small SET on another connection must be refused with Redis's exact
OOM text on both, and once the holder lets go (reads its replies, closes, EXEC answers
EXECABORT) the same SET must be accepted again. Every wait is for a figure the server reports
(mem_clients_normal), with a generous deadline; nothing depends on the machine being fast.
Prints "N passed, N failed"; exits 1 on any failure."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Resp, Tally, encode, info_int, start_redis, start_rlimitd  # noqa: E402

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
OK = b"+OK\r\n"
BIG = 16 * 1024 * 1024
MARGIN = 3 * 1024 * 1024
tally = Tally()


def mem(c, field):
    return info_int(c.call("INFO", "memory"), field)


def wait_for(c, cond, what):
    """Polls mem_clients_normal until cond(value) holds (the holder's bytes reach the server's
    books after its batch); a deadline of 60 s only turns a hang into a failure."""
    deadline = time.monotonic() + 60
    while True:
        v = mem(c, "mem_clients_normal")
        if cond(v):
            return v
        if time.monotonic() > deadline:
            raise RuntimeError("mem_clients_normal never %s (last %d)" % (what, v))
        time.sleep(0.02)


def raw_conn(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect: the window stays small
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s


def limit_above(c):
    """maxmemory MARGIN above what is used now; the clients' own share measured with it."""
    base = mem(c, "mem_clients_normal")
    c.call("CONFIG", "SET", "maxmemory", str(mem(c, "used_memory") + MARGIN))
    return base


def unread_reply(c, port):
    """A connection asks for a 16 MB value and does not read it."""
    c.call("SET", "big", "x" * BIG)
    # Redis keeps this connection's 16 MB query buffer until its cron shrinks it: measured
    # with it, the base would fall while the reply grows.
    wait_for(c, lambda v: v < 2 * 1024 * 1024, "settled after the 16 MB SET")
    base = limit_above(c)
    r = raw_conn(port, rcvbuf=4096)
    r.sendall(encode(["GET", "big"]))
    wait_for(c, lambda v: v > base + 2 * MARGIN, "grew by the unread reply")
    out = [c.call("SET", "k", "v"), c.call("EVAL", "return 1", "0")]
    # The reader takes the whole reply: its buffer is freed and writes go in again.
    want = len(b"$%d\r\n" % BIG) + BIG + 2
    got = 0
    r.settimeout(60)
    while got < want:
        chunk = r.recv(1 << 20)
        if not chunk:
            raise RuntimeError("the reader's connection closed")
        got += len(chunk)
    wait_for(c, lambda v: v < base + MARGIN, "fell back once the reply was read")
    out.append(c.call("SET", "k", "v"))
    r.close()
    c.call("CONFIG", "SET", "maxmemory", "0")
    c.call("DEL", "big")
    return out


def partial_command(c, port):
    """A connection sends most of a 16 MB SET and stops: its query buffer holds it."""
    base = limit_above(c)
    r = raw_conn(port)
    head = b"*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$%d\r\n" % BIG
    r.sendall(head + b"y" * (BIG - 1024))
    wait_for(c, lambda v: v > base + 2 * MARGIN, "grew by the query buffer")
    out = [c.call("SET", "k", "v")]
    r.close()
    wait_for(c, lambda v: v < base + MARGIN, "fell back once the connection closed")
    out.append(c.call("SET", "k", "v"))
    c.call("CONFIG", "SET", "maxmemory", "0")
    return out


def queued_multi(c, port):
    """A connection queues 10 SETs of 1 MB in MULTI while there is no limit (with one, the
    queueing itself is refused once it has filled the room): the queue counts, for everyone."""
    base = mem(c, "mem_clients_normal")
    used = mem(c, "used_memory")
    m = Resp(port)
    out = [m.call("MULTI")]
    for i in range(10):
        out.append(m.call("SET", "q:%d" % i, "z" * (1 << 20)))
    wait_for(c, lambda v: v > base + 2 * MARGIN, "grew by the queued transaction")
    c.call("CONFIG", "SET", "maxmemory", str(used + MARGIN))
    out.append(c.call("SET", "k", "v"))
    out.append(m.call("SET", "q:x", "v"))  # refused at queue time ...
    out.append(m.call("EXEC"))  # ... so EXEC aborts, and the queue is freed
    wait_for(c, lambda v: v < base + MARGIN, "fell back once EXEC discarded the queue")
    out.append(c.call("SET", "k", "v"))
    out.append(c.call("EXISTS", "q:0"))
    m.close()
    c.call("CONFIG", "SET", "maxmemory", "0")
    return out


SCENARIOS = [("unread reply", unread_reply), ("partial command", partial_command),
             ("queued MULTI", queued_multi)]


def run_side(srv):
    try:
        c = Resp(srv.port)
        results = [fn(c, srv.port) for _, fn in SCENARIOS]
        c.close()
        return results
    finally:
        problem = srv.stop()
        if problem:
            tally.check("%s stopped cleanly" % srv.name, problem, None)


def main():
    binary = os.environ.get("RLIMITD_BIN") or sys.argv[1]
    want = run_side(start_redis())
    # A 16 MB argument needs larger input limits than rlimitd's defaults (Redis's are 512 MB).
    got = run_side(start_rlimitd(binary, ("--client-query-buffer-limit", "64mb",
                                          "--proto-max-bulk-len", "32mb")))
    for (name, _), a, b in zip(SCENARIOS, got, want):
        tally.check(name, a, b)
        after = b[-2] if name == "queued MULTI" else b[-1]
        tally.check(name + ": redis refused while held, accepted after", (OOM in b, after),
                    (True, OK))
    return tally.done()


if __name__ == "__main__":
    sys.exit(main())
