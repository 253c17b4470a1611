#!/usr/bin/env python3
"""test_big_reply.py - a script's reply of tens of megabytes, read slowly, arrives whole and in
order, with the replies pipelined behind it, on rlimitd and on redis-server alike.

The reply is far more than a socket takes at once, so rlimitd writes the rest from its reply
buffer taken over by the write (src/net/client.c, client_flush) while the replies of the commands
pipelined after the EVAL start a new buffer; the client reads in small pieces with pauses, so
several writes are pending in turn. Both servers' byte streams must be identical.

    test_big_reply.py RLIMITD_BINARY"""
import socket
import sys
import time

from resp import Server, encode, stop_pair

# 12 distinct strings of 3 MB (each its own bytes, so a misplaced piece shows), 36 MB in all.
BODY = ("local t = {} for i = 1, 12 do "
        "t[i] = string.rep(string.char(64 + i) .. tostring(i % 7), 1572864) end return t")
PIPE = [["EVAL", BODY, "0"], ["PING"], ["ECHO", "after"], ["EVAL", BODY, "0"], ["INCR", "n"]]


def stream(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"".join(encode(c) for c in PIPE))
    one = 12 * (len(b"$3145728\r\n") + 3145728 + 2) + len(b"*12\r\n")
    want = 2 * one + len(b"+PONG\r\n") + len(b"$5\r\nafter\r\n") + len(b":1\r\n")
    got = bytearray()
    reads = 0
    while len(got) < want:
        b = s.recv(65536)
        if not b:
            break
        got += b
        reads += 1
        if reads % 64 == 0:
            time.sleep(0.01)  # the socket fills: the server's writes wait in turn
    s.close()
    return bytes(got), want


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rl = Server("rlimitd", sys.argv[1])
    rd = Server("redis")
    failed = 0
    try:
        a, want = stream(rl)
        b, _ = stream(rd)
        if len(a) != want or a != b:
            first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
            print("FAIL big reply: rlimitd %d bytes, redis %d, expected %d, first difference "
                  "at %r" % (len(a), len(b), want, first))
            failed += 1
        if not rl.conn().call("PING") == b"+PONG\r\n":
            print("FAIL rlimitd does not answer after the big replies")
            failed += 1
    finally:
        failed += stop_pair(rl, rd)
    print("test_big_reply: %d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
