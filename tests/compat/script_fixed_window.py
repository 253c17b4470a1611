#!/usr/bin/env python3
"""script_fixed_window.py - the seeds' fixed-window limiter script, sent by redis-py, against
the real rlimitd and against redis-server (issue 16).

The script: INCR the window's counter; on the first hit EXPIRE it after the window; read TTL;
redis.log the hit; return {count, ttl}. redis-py's register_script runs it by EVALSHA and falls
back to EVAL on NOSCRIPT. Checks: 5 per 10 s gives exactly 5 allowed and 2 denied, the TTL is
within the window, the log line reaches the server's log, and SCRIPT FLUSH is survived."""
import sys
import time

import redis

from script_servers import check, server, summary

FIXED_WINDOW = """
local current = redis.call('INCR', KEYS[1])
if current == 1 then
    redis.call('EXPIRE', KEYS[1], ARGV[1])
end
local ttl = redis.call('TTL', KEYS[1])
redis.log(redis.LOG_NOTICE, 'fixed-window', KEYS[1], current)
return {current, ttl}
"""


def scenario(kind, r, log, key):
    script = r.register_script(FIXED_WINDOW)
    allowed = denied = 0
    ttls = []
    for i in range(7):
        count, ttl = script(keys=[key], args=[10])
        ttls.append(ttl)
        if count != i + 1:
            check("%s: count %d" % (kind, i + 1), False, "got %r" % count)
        if count <= 5:
            allowed += 1
        else:
            denied += 1
    check("%s: %s 5 allowed, 2 denied" % (kind, key), (allowed, denied) == (5, 2),
          "%d allowed, %d denied" % (allowed, denied))
    check("%s: %s TTL within the window" % (kind, key), all(0 < t <= 10 for t in ttls), ttls)
    deadline = time.monotonic() + 10
    found = False
    while time.monotonic() < deadline and not found:
        with open(log, errors="replace") as f:
            found = ("fixed-window %s 7" % key) in f.read()
        if not found:
            time.sleep(0.05)
    check("%s: %s redis.log in the server log" % (kind, key), found)


def main():
    for kind in ("rlimitd", "redis-server"):
        try:
            with server(kind) as (port, log):
                r = redis.Redis(port=port, socket_timeout=30)
                scenario(kind, r, log, "fw:user:1")
                r.script_flush()
                scenario(kind, r, log, "fw:user:2")
        except Exception as e:  # noqa: BLE001 - reported as a failure
            check("%s: ran" % kind, False, repr(e))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
