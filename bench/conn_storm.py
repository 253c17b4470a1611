#!/usr/bin/env python3
"""conn_storm.py - one server's side of bench/connections.sh (issue 19).

    conn_storm.py PORT PID CONNS ROUNDS CMD

Opens CONNS connections to 127.0.0.1:PORT, each sends CMD (a RESP request, "-" for none: connect
only) and reads its reply, then stays idle; reads the server's VmRSS
from /proc/PID/status while they are held, closes them all, and reads it again 2 s later. Does
this ROUNDS times and prints one line per round:

    round held_bytes_per_conn growth_after_2s_bytes

both measured against the RSS before the first round."""
import resource
import socket
import sys
import time

port, pid, conns, rounds = (int(a) for a in sys.argv[1:5])
cmd = sys.argv[5].encode()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS")


base = rss()
for r in range(rounds):
    socks = []
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        if cmd != b"-":
            s.sendall(cmd)
        socks.append(s)
    if cmd != b"-":
        for s in socks:
            if not s.recv(4096):
                raise SystemExit("a connection was closed")
    time.sleep(1)  # accepted (connect-only), settled
    held = rss()
    for s in socks:
        s.close()
    time.sleep(2)
    print(r, (held - base) // conns, rss() - base, flush=True)
