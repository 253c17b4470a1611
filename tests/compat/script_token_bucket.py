#!/usr/bin/env python3
"""script_token_bucket.py - a token-bucket limiter script that keeps its bucket in a hash,
sent by redis-py, against the real rlimitd and against redis-server (issue 16).

The script is the common recipe: HMGET the bucket's tokens and last refill time, refill at the
rate for the time passed (the caller passes "now" in ms, as these recipes do, which also makes
the test independent of the machine's speed), take the tokens asked for if there are enough,
HSET the new state (a fractional token count goes through redis.call's number conversion),
PEXPIRE the bucket when it would be full again, and return {allowed, tokens left}.

Checks, on each server: capacity 5, refilled at 5 per 10 s, 7 requests 1 ms apart: exactly 5
allowed and 2 denied; 2 s later one more; the hash holds the numbers the script wrote and
expires within the refill time; SCRIPT FLUSH is survived (redis-py reloads on NOSCRIPT). Then
every reply and every HGETALL must be byte for byte the same on both servers."""
import sys

import redis

from script_servers import check, server, summary

TOKEN_BUCKET = """
local capacity = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2]) / tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local last = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - last) * per_ms)
local allowed = 0
if tokens >= want then
    tokens = tokens - want
    allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / per_ms))
return {allowed, tostring(tokens)}
"""

T0 = 1764000000000  # a fixed "now", in ms


def scenario(kind, r, key):
    """Returns what the scenario saw, for the comparison between servers."""
    script = r.register_script(TOKEN_BUCKET)
    seen = []
    allowed = denied = 0
    for i in range(7):
        reply = script(keys=[key], args=[5, 5, 10000, T0 + i, 1])
        seen.append(reply)
        if reply[0] == 1:
            allowed += 1
        else:
            denied += 1
    check("%s: %s 5 allowed, 2 denied" % (kind, key), (allowed, denied) == (5, 2),
          "%d allowed, %d denied" % (allowed, denied))
    reply = script(keys=[key], args=[5, 5, 10000, T0 + 2006, 1])
    seen.append(reply)
    check("%s: %s refilled after 2 s" % (kind, key), reply[0] == 1, repr(reply))
    state = r.hgetall(key)
    seen.append(sorted(state.items()))
    check("%s: %s hash holds the state" % (kind, key),
          state.get(b"ts") == str(T0 + 2006).encode() and b"tokens" in state, repr(state))
    pttl = r.pttl(key)
    check("%s: %s expires within the refill time" % (kind, key), 0 < pttl <= 10000, pttl)
    return seen


def main():
    runs = {}
    for kind in ("rlimitd", "redis-server"):
        try:
            with server(kind) as (port, _log):
                r = redis.Redis(port=port, socket_timeout=30)
                runs[kind] = scenario(kind, r, "tb:user:1")
                r.script_flush()
                runs[kind] += scenario(kind, r, "tb:user:2")
        except Exception as e:  # noqa: BLE001 - reported as a failure
            check("%s: ran" % kind, False, repr(e))
    if len(runs) == 2:
        a, b = runs["rlimitd"], runs["redis-server"]
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        check("rlimitd and redis-server replied the same", first is None and len(a) == len(b),
              "first difference at step %s: %r vs %r" % (first, a[first] if first is not None
                                                          else None,
                                                          b[first] if first is not None
                                                          else None))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
