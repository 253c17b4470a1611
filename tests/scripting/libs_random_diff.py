#!/usr/bin/env python3
"""libs_random_diff.py - seeded random differential check of the cmsgpack and struct
libraries: rlimitd against Debian's redis-server 7.0, reply bytes compared.

Three kinds of case, each named by its seed:
  bytes  random MessagePack (every type byte, truncated, mutated, several values in a row,
         headers claiming more than follows) through cmsgpack.unpack, a walk with unpack_one,
         and unpack_limit at a random limit and offset; results serialised canonically (keys
         sorted) and errors as their texts.
  value  a random Lua value built inside the script from math.random (seeded by the case:
         boundary integers, floats that fit a float 32 or not, strings around every length
         boundary, arrays and maps around 15/16 elements, holes, nesting past 16, cycles)
         through cmsgpack.pack, then unpack of the result. Map keys are numbers, booleans and
         strings under 32 bytes: Lua places a longer string key by a hash that differs between
         Debian's Lua and Redis's, so such a map iterates (and packs) in another order
         (docs/COMMANDS.md, Scripting).
  struct a random format (every option, sizes, alignments, byte orders, invalid options)
         through struct.size, struct.pack of random numbers and strings (boundary and
         out-of-range values, NaN, infinities), unpack of what pack made, and unpack of
         random bytes at a random offset.
On a difference it prints the case's kind, seed and both replies; rerun one case with
    libs_random_diff.py RLIMITD_BINARY [CASES [FIRST_SEED]]"""
import random
import struct
import sys

from resp import Server, stop_pair

UNPACK_SCRIPT = r"""
local function ser(v, d)
  local t = type(v)
  if t == 'table' then
    if d > 60 then return '{deep}' end
    local parts = {}
    for k, x in pairs(v) do parts[#parts + 1] = ser(k, d + 1) .. '=' .. ser(x, d + 1) end
    table.sort(parts)
    return '{' .. table.concat(parts, ',') .. '}'
  elseif t == 'string' then return string.format('%q', v)
  elseif t == 'number' then return string.format('%.17g', v)
  end
  return tostring(v)
end
local function all(...)
  local n = select('#', ...)
  local out = {tostring(n)}
  for i = 1, n do out[#out + 1] = ser((select(i, ...)), 0) end
  return table.concat(out, ' ')
end
local s = ARGV[1]
local res = {}
local ok, r = pcall(function() return all(cmsgpack.unpack(s)) end)
res[1] = tostring(ok) .. ' ' .. r
local off, steps, walk = 0, 0, {}
while steps < 40 do
  local ok2, a, b = pcall(cmsgpack.unpack_one, s, off)
  if not ok2 then walk[#walk + 1] = 'E ' .. a break end
  walk[#walk + 1] = tostring(a) .. ':' .. ser(b, 0)
  if a == -1 or a == off then break end
  off = a
  steps = steps + 1
end
res[2] = table.concat(walk, ' ')
local ok3, r3 = pcall(function()
  return all(cmsgpack.unpack_limit(s, tonumber(ARGV[2]), tonumber(ARGV[3])))
end)
res[3] = tostring(ok3) .. ' ' .. r3
return res
"""

PACK_SCRIPT = r"""
math.randomseed(tonumber(ARGV[1]))
local R = math.random
local ints = {0, 1, 127, 128, 255, 256, 65535, 65536, 2^31 - 1, 2^31, 2^32 - 1, 2^32, 2^53,
  2^63, 2^64, -1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31 - 1, -2^53, -2^63,
  2^63 - 1024}
local specials = {1/0, -1/0, 0/0, -(0/0), 0.5, 0.1, -0.0, 3.4028234663852886e38, 1e39, 1e300,
  1.401298464324817e-45, 2.5e-324, 16777217, 1/3}
local lens = {0, 1, 31, 32, 33, 255, 256, 257, 65535, 65536, 65537}
local counts = {0, 1, 2, 15, 16, 17}
local function num()
  local k = R(6)
  if k == 1 then return ints[R(#ints)] + R(-1, 1)
  elseif k == 2 then return (R() - 0.5) * 10 ^ R(-40, 40)
  elseif k == 3 then return R(-4000, 4000) / 8
  elseif k == 4 then return specials[R(#specials)]
  elseif k == 5 then return -ints[R(#ints)]
  end
  return R(-100000, 100000)
end
local function str(short)
  local n = R(3) == 1 and lens[R(#lens)] or R(0, 40)
  if short then n = n % 32 end
  if n > 64 then return string.rep(string.char(R(0, 255)), n) end
  local c = {}
  for i = 1, n do c[i] = string.char(R(0, 255)) end
  return table.concat(c)
end
local gen
local function key()
  local k = R(4)
  if k == 1 then return num() end
  if k == 2 then return R(-3, 40) end
  if k == 3 then return R(2) == 1 end
  return str(true)
end
local function tbl(d)
  local k = R(5)
  local n = R(2) == 1 and counts[R(#counts)] or R(0, 6)
  local t = {}
  if k == 1 or k == 2 then
    for i = 1, n do t[i] = gen(d + 1) end
  elseif k == 3 then
    for i = 1, n do local x = key() if x == x then t[x] = gen(d + 1) end end
  elseif k == 4 then
    for i = 1, n do t[i] = gen(d + 1) end
    if n > 0 then t[R(n)] = nil end
    t[n + R(1, 3)] = R(9)
  else
    local c = t
    for i = 1, R(12, 20) do c[R(2) == 1 and 1 or 'k'] = {} c = c[R(2) == 1 and 1 or 'k'] or {} end
    if R(3) == 1 then t[#t + 1] = t end
  end
  return t
end
gen = function(d)
  local k = R(d > 3 and 4 or 6)
  if k == 1 then return num() end
  if k == 2 then return str() end
  if k == 3 then local b = {true, false, nil} return b[R(3)] end
  if k == 4 then return R(-40, 300) end
  return tbl(d)
end
local vals, n = {}, R(1, 3)
for i = 1, n do vals[i] = gen(0) end
local p = cmsgpack.pack(unpack(vals, 1, n))
local back = {pcall(cmsgpack.unpack, p)}
return {p, tostring(back[1]), #back}
"""

STRUCT_SCRIPT = r"""
local function ser(v)
  if type(v) == 'number' then return string.format('%.17g', v) end
  if type(v) == 'string' then return string.format('%q', v) end
  return tostring(v)
end
local function all(...)
  local out = {tostring(select('#', ...))}
  for i = 1, select('#', ...) do out[#out + 1] = ser((select(i, ...))) end
  return table.concat(out, ' ')
end
local fmt, data, off = ARGV[1], ARGV[2], tonumber(ARGV[3])
local args = {}
for i = 4, #ARGV do
  local v = ARGV[i]
  if v:sub(1, 1) == '#' then args[#args + 1] = tonumber(v:sub(2)) else args[#args + 1] = v end
end
local res = {}
local ok, p = pcall(struct.pack, fmt, unpack(args))
res[1] = tostring(ok) .. ' ' .. ser(p)
if ok then
  local ok2, r = pcall(function() return all(struct.unpack(fmt, p)) end)
  res[2] = tostring(ok2) .. ' ' .. r
else
  res[2] = '-'
end
local ok3, r3 = pcall(function() return all(struct.unpack(fmt, data, off)) end)
res[3] = tostring(ok3) .. ' ' .. r3
local ok4, r4 = pcall(struct.size, fmt)
res[4] = tostring(ok4) .. ' ' .. ser(r4)
return res
"""

STRUCT_OPTS = ["<", ">", "!", "!1", "!2", "!4", "!8", "!16", "!3", "!0", " ", "x", "b", "B", "h",
               "H", "l", "L", "T", "i", "I", "i1", "i2", "i3", "i5", "i7", "i8", "i9", "i12",
               "i16", "i32", "i33", "I3", "I7", "I9", "f", "d", "s", "c", "c0", "c1", "c3", "z",
               "5", "i0"]
STRUCT_NUMS = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536,
               2**31, -2**31 - 1, 2**32, 2**53, 2**63, -2**63, 2**64, 1e30, -1e30, 1.5, -1.9,
               0.1, 3.5e38, 1e300]


def struct_case(rng):
    fmt = "".join(rng.choice(STRUCT_OPTS) for _ in range(rng.randrange(1, 7)))
    args = []
    for _ in range(rng.randrange(0, 8)):
        k = rng.randrange(4)
        if k == 0:
            args.append("#" + repr(float(rng.choice(STRUCT_NUMS))))
        elif k == 1:
            args.append("#" + rng.choice(["inf", "-inf", "nan", str(rng.randrange(-300, 300))]))
        elif k == 2:
            args.append("#" + repr(rng.uniform(-1e20, 1e20)))
        else:
            args.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 6))))
    data = bytes(rng.choice([0, rng.randrange(256)]) for _ in range(rng.randrange(0, 40)))
    off = rng.choice([1, 1, 2, 3, 0, -1, len(data), len(data) + 1, 2**53])
    return [fmt, data, str(off)] + args


def rand_value(rng, depth):
    """Bytes of one random (mostly well-formed) MessagePack value."""
    k = rng.randrange(12 if depth < 4 else 8)
    if k == 0:
        return bytes([rng.randrange(0x80)])
    if k == 1:
        return bytes([rng.randrange(0xe0, 0x100)])
    if k == 2:
        t = rng.choice([0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3])
        n = 1 << (t & 3)
        edge = rng.choice([0, 0xff, 0x7f, 0x80])
        body = bytes([edge] + [rng.randrange(256) for _ in range(n - 1)])
        return bytes([t]) + (body if rng.random() < 0.5 else bytes(rng.randrange(256)
                                                                    for _ in range(n)))
    if k == 3:
        if rng.random() < 0.5:
            f = rng.choice([0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"),
                            rng.uniform(-1e10, 1e10), 3.4028234663852886e38])
            return b"\xca" + struct.pack(">f", f)
        return b"\xcb" + bytes(rng.randrange(256) for _ in range(8))
    if k == 4:
        return bytes([rng.choice([0xc0, 0xc2, 0xc3])])
    if k in (5, 6):
        n = rng.choice([0, 1, 5, 31, 32, 33, 255, 256, 300])
        s = bytes(rng.randrange(256) for _ in range(min(n, 40))) * (n // 40 + 1)
        s = s[:n]
        if n < 32 and rng.random() < 0.5:
            return bytes([0xa0 | n]) + s
        t = rng.choice([0xd9, 0xda, 0xdb])
        if t == 0xd9 and n > 255:
            t = 0xda
        return bytes([t]) + n.to_bytes({0xd9: 1, 0xda: 2, 0xdb: 4}[t], "big") + s
    if k == 7:  # a byte that is no (supported) type: 0xc1, bin, ext
        t = rng.choice([0xc1, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8])
        return bytes([t]) + bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
    n = rng.choice([0, 1, 2, 3, 15, 16, 17])
    if k in (8, 9):
        items = b"".join(rand_value(rng, depth + 1) for _ in range(n))
        if n < 16 and rng.random() < 0.6:
            return bytes([0x90 | n]) + items
        t = rng.choice([0xdc, 0xdd])
        return bytes([t]) + n.to_bytes(2 if t == 0xdc else 4, "big") + items
    items = b""
    for _ in range(n):
        if rng.random() < 0.9:
            items += rand_key(rng)
        else:  # anything: a table key, nil (an error), NaN (an error)
            items += rand_value(rng, depth + 1)
        items += rand_value(rng, depth + 1)
    if n < 16 and rng.random() < 0.6:
        return bytes([0x80 | n]) + items
    t = rng.choice([0xde, 0xdf])
    return bytes([t]) + n.to_bytes(2 if t == 0xde else 4, "big") + items


def rand_key(rng):
    """A scalar key: its table's order is then the same on both servers (a table key is
    placed by its address)."""
    k = rng.randrange(3)
    if k == 0:
        return bytes([rng.randrange(0x80)])
    if k == 1:
        return b"\xcb" + struct.pack(">d", rng.choice([0.5, -2.0, 1e300, 3.0]))
    n = rng.randrange(6)
    return bytes([0xa0 | n]) + bytes(rng.randrange(97, 123) for _ in range(n))


def rand_bytes(rng):
    """A stream of values, then maybe damaged."""
    out = b"".join(rand_value(rng, 0) for _ in range(rng.choice([1, 1, 2, 3, 5])))
    k = rng.randrange(8)
    if k == 0 and out:
        out = out[:rng.randrange(len(out))]
    elif k == 1 and out:
        i = rng.randrange(len(out))
        out = out[:i] + bytes([rng.randrange(256)]) + out[i + 1:]
    elif k == 2:
        out += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
    elif k == 3:
        hdr = rng.choice([b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                          b"\xdc\xff\xff", b"\xde\x01\x00"])
        out = hdr + out
    elif k == 4:
        out = bytes([rng.choice([0x91, 0x81])]) * rng.randrange(1, 40) + out
    return out


def cases(first, count):
    for seed in range(first, first + count):
        rng = random.Random(seed)
        if seed % 3 == 0:
            data = rand_bytes(rng)
            limit = rng.choice([0, 1, 2, 3, 5, -1])
            offset = rng.choice([0, 0, 1, 2, len(data), len(data) + 1, -1])
            yield "bytes", seed, ["EVALSHA", None, "0", data, str(limit), str(offset)]
        elif seed % 3 == 1:
            yield "value", seed, ["EVALSHA", None, "0", str(seed)]
        else:
            yield "struct", seed, ["EVALSHA", None, "0"] + struct_case(rng)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rl = Server("rlimitd", sys.argv[1])
    rd = Server("redis")
    failed = 0
    total = 0
    try:
        a, b = rl.conn(), rd.conn()
        shas = {}
        for name, body in (("bytes", UNPACK_SCRIPT), ("value", PACK_SCRIPT),
                           ("struct", STRUCT_SCRIPT)):
            sa, sb = a.value("SCRIPT", "LOAD", body), b.value("SCRIPT", "LOAD", body)
            assert sa == sb and isinstance(sa, bytes), (sa, sb)
            shas[name] = sa.decode()
        batch = []
        for kind, seed, cmd in cases(first, count):
            cmd[1] = shas[kind]
            batch.append((kind, seed, cmd))
            if len(batch) < 100:
                continue
            failed += run_batch(a, b, batch)
            total += len(batch)
            batch = []
        if batch:
            failed += run_batch(a, b, batch)
            total += len(batch)
    finally:
        failed += stop_pair(rl, rd)
    print("libs_random_diff: %d passed, %d failed (seeds %d..%d)" %
          (total - failed, failed, first, first + count - 1))
    return 1 if failed else 0


def run_batch(a, b, batch):
    """Sends the batch pipelined to both servers; returns the number of differing cases."""
    for _, _, cmd in batch:
        a.send(*cmd)
        b.send(*cmd)
    failed = 0
    for kind, seed, cmd in batch:
        ra, rb = a.raw(), b.raw()
        if ra != rb:
            failed += 1
            if failed <= 5:
                print("FAIL %s case, seed %d (rerun: libs_random_diff.py BIN 1 %d)\n  args: %r\n"
                      "  rlimitd: %r\n  redis:   %r" % (kind, seed, seed, cmd[3:], ra[:400],
                                                         rb[:400]))
    return failed


if __name__ == "__main__":
    sys.exit(main())
