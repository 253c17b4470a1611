-- window.lua - the sorted-set sliding-window recipe as a Redis script, for bench/compare.sh.
--
--   EVALSHA <sha> 1 hist:{<user>}:<action> <period> <max_count>
--
-- Answers ISALLOWED's reply (COMMANDS.md "ISALLOWED"): 1 if the attempts in the last <period> seconds, this one
-- included, number at most <max_count>, else 0. The classic recipe: drop members older than the
-- window (ZREMRANGEBYSCORE), record this attempt (ZADD), count (ZCARD), and let the key expire a
-- period after the newest attempt (PEXPIRE). Scores are ms timestamps; the member is the
-- microsecond timestamp, so two attempts on one key in the same millisecond are both kept, as
-- ISALLOWED keeps them (attempts in the same microsecond still collapse into one). Like the recipe,
-- and unlike ISALLOWED, the set is not capped at max_count + 1 members.

local function int_arg(s)
    if s == nil or not string.match(s, '^%-?%d+$') or #s > 16 then
        return nil
    end
    return tonumber(s)
end

if #KEYS ~= 1 or #ARGV ~= 2 then
    return redis.error_reply("ERR wrong number of arguments for 'isallowed' command")
end
local period = int_arg(ARGV[1])
local max_count = int_arg(ARGV[2])
if period == nil or max_count == nil then
    return redis.error_reply('ERR value is not an integer or out of range')
end
if period < 1 or period > 3153600000 then
    return redis.error_reply('ERR invalid period: must be between 1 and 3153600000 seconds')
end
if max_count < 0 then
    return redis.error_reply('ERR invalid max_count: must be >= 0')
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period_ms = period * 1000

-- COMMANDS.md "ISALLOWED" counts attempts with a timestamp > now - period: those at or before it leave.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - period_ms)
redis.call('ZADD', KEYS[1], now_ms, t[1] .. string.format('%06d', tonumber(t[2])))
local n = redis.call('ZCARD', KEYS[1])
redis.call('PEXPIRE', KEYS[1], period_ms)
if n <= max_count then
    return 1
end
return 0
