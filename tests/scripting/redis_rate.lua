-- redis_rate.lua - the GCRA limiter go-redis/redis_rate runs as a script, written for this
-- corpus from the algorithm's description (not its source): a key holds the theoretical arrival
-- time (TAT) as a Lua number, in seconds since 2017-01-01 so microseconds survive in a double.
--
--   EVAL <this> 1 <key> <burst> <rate> <period seconds> <cost>
--
-- Returns {allowed, remaining, retry_after, reset_after}: allowed is cost, or 0 when refused;
-- the two times are seconds as strings, retry_after "-1" when allowed.
redis.replicate_commands()

local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local interval = period / rate -- seconds between two requests at the steady rate
local step = interval * cost -- how far this request moves the TAT
local tolerance = interval * burst -- how far past now the TAT may run

local clock = redis.call("TIME")
local now = (clock[1] - 1483228800) + clock[2] / 1000000

local tat = now
local stored = redis.call("GET", key)
if stored then
    tat = math.max(tonumber(stored), now)
end

local new_tat = tat + step
local slack = now - (new_tat - tolerance) -- how early this request is allowed
local remaining = slack / interval
if remaining < 0 then
    return {0, 0, tostring(-slack), tostring(tat - now)}
end

local reset_after = new_tat - now
if reset_after > 0 then
    redis.call("SET", key, new_tat, "EX", math.ceil(reset_after))
end
return {cost, remaining, tostring(-1), tostring(reset_after)}
