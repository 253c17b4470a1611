-- bucket_cas.lua - compare-and-swap of an opaque binary value, the way the Redis backends of
-- some JVM rate limiters (Bucket4j's, for one) keep a bucket: the client serializes the bucket's
-- state to bytes, and writes a new state only if the stored one is still the one it read.
-- Written for this corpus from that description (not from any project's source).
--
--   EVAL <this> 1 <key> <expected bytes> <new bytes> <ttl ms> [px|pexpire]
--
-- Returns 1 if the key held exactly <expected> (compared as bytes: NULs, CR LF and any byte
-- value included) and now holds <new>; 0 if it held anything else or was absent (an absent key
-- never matches, not even an empty <expected>: creating the bucket is a separate SET NX).
-- <ttl ms> > 0 sets the expiry, with SET's PX option (default) or a SET then PEXPIRE;
-- 0 leaves the key without one.
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
    return 0
end
local ttl = tonumber(ARGV[3])
if ttl == 0 then
    redis.call('SET', KEYS[1], ARGV[2])
elseif ARGV[4] == 'pexpire' then
    redis.call('SET', KEYS[1], ARGV[2])
    redis.call('PEXPIRE', KEYS[1], ttl)
else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
end
return 1
