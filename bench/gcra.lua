-- gcra.lua - CL.THROTTLE as a Redis script, for bench/compare.sh (COMMANDS.md "CL.THROTTLE").
--
--   EVALSHA <sha> 1 <key> <max_burst> <count> <period> [<quantity>]
--
-- Answers CL.THROTTLE's reply, [limited, limit, remaining, retry_after, reset_after], with COMMANDS.md "CL.THROTTLE"'s
-- arithmetic in integer nanoseconds. Lua numbers are doubles, exact only below 2^53, and a
-- wall-clock time in ns is about 1.8e18, so a time is kept as two numbers: whole seconds and
-- nanoseconds. Differences of times (ttl, the wait) are bounded by the tolerance, which this script
-- requires to be under 2^53 ns (104 days); larger arguments get an error instead of a rounded
-- answer.
--
-- The key holds the TAT as a decimal integer in ns (what redis-cell and rlimitd's GET show), which
-- Redis stores as an integer-encoded string, and expires when the bucket is full again.

local NS = 1000000000
local EXACT = 9007199254740992 -- 2^53

local function err(msg)
    return redis.error_reply(msg)
end

-- A base-10 integer argument, or nil (like Redis's string2ll, without '+' or spaces).
local function int_arg(s)
    if s == nil or not string.match(s, '^%-?%d+$') or #s > 16 then
        return nil
    end
    return tonumber(s)
end

-- COMMANDS.md "CL.THROTTLE" rounding: ns -> whole ms (floor) -> seconds rounded up. ns >= 0.
local function ceil_seconds(ns)
    local ms = math.floor(ns / 1000000)
    local s = math.floor(ms / 1000)
    if ms % 1000 ~= 0 then
        s = s + 1
    end
    return s
end

-- a - b in ns for times (sec, ns); exact while the difference is under 2^53.
local function diff(as, an, bs, bn)
    return (as - bs) * NS + (an - bn)
end

if #KEYS ~= 1 or #ARGV < 3 or #ARGV > 4 then
    return err("ERR wrong number of arguments for 'cl.throttle' command")
end
local max_burst = int_arg(ARGV[1])
local count = int_arg(ARGV[2])
local period = int_arg(ARGV[3])
local quantity = 1
if #ARGV == 4 then
    quantity = int_arg(ARGV[4])
end
if max_burst == nil or count == nil or period == nil or quantity == nil then
    return err('ERR value is not an integer or out of range')
end
if max_burst < 0 then
    return err('ERR invalid max_burst: must be >= 0')
end
if count < 1 then
    return err('ERR invalid count: must be >= 1')
end
if period < 1 then
    return err('ERR invalid period: must be >= 1')
end
if quantity < 0 then
    return err('ERR invalid quantity: must be >= 0')
end
local period_ns = period * NS
if period_ns >= EXACT then
    return err('ERR period too large for this script')
end
local ei = math.floor(period_ns / count)
if ei < 1 then
    return err('ERR count too large for period: emission interval below 1ns')
end
local limit = max_burst + 1
local dvt = ei * limit
local inc = ei * quantity
if dvt >= EXACT or inc >= EXACT then
    return err('ERR max_burst or quantity too large for this script')
end

local t = redis.call('TIME')
local now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000

-- tat = the stored TAT, or now if absent or passed.
local tat_s, tat_n = now_s, now_n
local stored = redis.call('GET', KEYS[1])
if stored then
    local s = tonumber(string.sub(stored, 1, -10))
    local n = tonumber(string.sub(stored, -9))
    if s ~= nil and n ~= nil and diff(s, n, now_s, now_n) > 0 then
        tat_s, tat_n = s, n
    end
end

-- new = tat + inc, as (seconds, ns).
local new_n = tat_n + inc % NS
local new_s = tat_s + math.floor(inc / NS)
if new_n >= NS then
    new_n = new_n - NS
    new_s = new_s + 1
end

local ttl = diff(tat_s, tat_n, now_s, now_n) -- in [0, dvt]
local wait = ttl + inc - dvt -- (new - dvt) - now
local limited = 0
local retry = -1
if wait > 0 then
    limited = 1
    if inc <= dvt then
        retry = ceil_seconds(wait)
    end
else
    ttl = ttl + inc -- new - now
    if inc > 0 then
        -- The key expires at the new TAT: whole ms, rounded up so it never expires early.
        local px = math.ceil(ttl / 1000000)
        if px < 1 then
            px = 1
        end
        redis.call('SET', KEYS[1], string.format('%d%09d', new_s, new_n), 'PX', px)
    end
end

local remaining = 0
local next_ = dvt - ttl
if next_ > -ei then
    remaining = math.floor(next_ / ei)
    if remaining < 0 then
        remaining = 0
    elseif remaining > limit then
        remaining = limit
    end
end

return {limited, limit, remaining, retry, ceil_seconds(ttl)}
