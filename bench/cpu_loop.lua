-- cpu_loop.lua - a deterministic CPU-bound script for bench/script_scale.sh.
-- KEYS[1]: the one key it writes; ARGV[1]: loop iterations (50000 is about 1 ms on one core).
-- The loop only does Lua arithmetic, so the call's cost is the script engine's and not the
-- client's or the network's; the result depends on ARGV[1] only, so every server must answer
-- the same number (the bench checks that before measuring).
local n = tonumber(ARGV[1])
local x = 0
for i = 1, n do
    x = (x * 31 + i) % 1000003
end
redis.call('SET', KEYS[1], x)
return x
