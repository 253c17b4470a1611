#!/usr/bin/env python3
"""snapfile.py - an independent reader of the rlimitd snapshot format (docs/SNAPSHOT.md), for the
persistence tests. Written from the document, not from src/snap.c, so that the daemon's files are
checked against what the format promises another tool.

  snapfile.py verify FILE         exit 0 if FILE is a valid version-1 to -5 snapshot; prints counts
  snapfile.py dump FILE           one line per record: type key expiry value
  snapfile.py regions FILE        "name offset" for one byte of every region of the file
  snapfile.py flip FILE OFFSET    xor the byte at OFFSET with 0x01 (in place)
  snapfile.py setbyte FILE OFFSET VALUE
  snapfile.py rechecksum FILE     rewrite the trailing XXH3-64 to match the content
  snapfile.py resp-throttle N PREFIX DIGITS   RESP for N CL.THROTTLE calls on distinct keys
                                  PREFIX + zero-padded number (for redis-cli --pipe)

The checksum is XXH3-64 with seed 0, computed through Debian's libxxhash (ctypes).
"""
import ctypes
import ctypes.util
import struct
import sys

TYPES = {1: "gcra", 2: "int", 3: "raw", 4: "wlog", 5: "zset", 6: "hash", 7: "list", 8: "lease"}


def xxh3(data):
    name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
    lib = ctypes.CDLL(name)
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(bytes(data), len(data))


class Bad(Exception):
    def __init__(self, off, why):
        super().__init__("offset %d: %s" % (off, why))


def varint(b, off, end):
    x = shift = 0
    for _ in range(10):
        if off >= end:
            raise Bad(off, "truncated varint")
        c = b[off]
        off += 1
        x |= (c & 0x7F) << shift
        if not c & 0x80:
            return x, off
        shift += 7
    raise Bad(off, "varint longer than 10 bytes")


def parse(b):
    """Returns (header, records, regions); raises Bad."""
    if len(b) < 49:
        raise Bad(0, "shorter than 49 bytes")
    if b[:8] != b"RLIMSNAP":
        raise Bad(0, "bad magic")
    version, flags, created, reserved = struct.unpack_from("<IIqq", b, 8)
    if version not in (1, 2, 3, 4, 5):
        raise Bad(8, "unsupported version %d" % version)
    if flags != 0:
        raise Bad(12, "unknown flags")
    (have,) = struct.unpack_from("<Q", b, len(b) - 8)
    if xxh3(b[:-8]) != have:
        raise Bad(len(b) - 8, "checksum mismatch")
    regions = [("magic", 0), ("version", 8), ("flags", 12), ("created", 16), ("reserved", 24)]
    seen = set()
    records = []
    off, end = 32, len(b) - 8
    while True:
        at = off
        if off >= end:
            raise Bad(off, "no end marker")
        t = b[off]
        off += 1
        if t == 0xFF:
            regions.append(("end-marker", at))
            break
        if (t not in TYPES or (t == 5 and version < 2) or (t == 6 and version < 3) or
                (t == 7 and version < 4) or (t == 8 and version < 5)):
            raise Bad(at, "unknown type %d" % t)
        klen, off = varint(b, off, end)
        if klen > end - off:
            raise Bad(at, "key past the end")
        key = bytes(b[off:off + klen])
        first = t not in seen
        seen.add(t)
        if first:
            regions.append(("%s-type" % TYPES[t], at))
            if klen:
                regions.append(("%s-key" % TYPES[t], off))
        off += klen
        if end - off < 8:
            raise Bad(at, "truncated expiry")
        (expire,) = struct.unpack_from("<q", b, off)
        if first:
            regions.append(("%s-expiry" % TYPES[t], off))
        off += 8
        if t in (1, 2):
            if end - off < 8:
                raise Bad(at, "truncated value")
            (value,) = struct.unpack_from("<q", b, off)
            if first:
                regions.append(("%s-value" % TYPES[t], off))
            off += 8
        elif t == 3:
            n, voff = varint(b, off, end)
            if n > end - voff:
                raise Bad(at, "string past the end")
            if first:
                regions.append(("raw-length", off))
                if n:
                    regions.append(("raw-bytes", voff))
            value = bytes(b[voff:voff + n])
            off = voff + n
        elif t == 6:
            if first:
                regions.append(("hash-count", off))
            n, off = varint(b, off, end)
            if n == 0:
                raise Bad(at, "empty hash")
            value = {}
            for i in range(n):
                flen, off = varint(b, off, end)
                if flen > end - off:
                    raise Bad(at, "hash field past the end")
                f = bytes(b[off:off + flen])
                off += flen
                vlen, off = varint(b, off, end)
                if vlen > end - off:
                    raise Bad(at, "hash value past the end")
                if f in value:
                    raise Bad(at, "duplicate hash field")
                value[f] = bytes(b[off:off + vlen])
                off += vlen
        elif t == 7:
            if first:
                regions.append(("list-count", off))
            n, off = varint(b, off, end)
            if n == 0:
                raise Bad(at, "empty list")
            value = []
            for i in range(n):
                elen, off = varint(b, off, end)
                if elen > end - off:
                    raise Bad(at, "list element past the end")
                if i == 0 and first and elen:
                    regions.append(("list-element", off))
                value.append(bytes(b[off:off + elen]))
                off += elen
        elif t == 8:
            if first:
                regions.append(("lease-count", off))
            n, off = varint(b, off, end)
            if n == 0:
                raise Bad(at, "empty lease set")
            if end - off < 8 + 16 * n:
                raise Bad(at, "lease set past the end")
            if first:
                regions.append(("lease-last-id", off))
                regions.append(("lease-id", off + 8))
                regions.append(("lease-expiry", off + 16))
            (last_id,) = struct.unpack_from("<q", b, off)
            off += 8
            leases = []
            for i in range(n):
                lid, lexp = struct.unpack_from("<qq", b, off)
                off += 16
                if (leases and lid <= leases[-1][0]) or lid > last_id:
                    raise Bad(at, "lease ids not ascending or above the highest id")
                leases.append((lid, lexp))
            value = (last_id, leases)
        elif t == 5:
            if first:
                regions.append(("zset-count", off))
            n, off = varint(b, off, end)
            if n == 0:
                raise Bad(at, "empty sorted set")
            value = []
            for i in range(n):
                mlen, off = varint(b, off, end)
                if mlen > end - off or end - off - mlen < 8:
                    raise Bad(at, "sorted set member past the end")
                if i == 0 and first:
                    if mlen:
                        regions.append(("zset-member", off))
                    regions.append(("zset-score", off + mlen))
                member = bytes(b[off:off + mlen])
                (score,) = struct.unpack_from("<d", b, off + mlen)
                off += mlen + 8
                if score != score or (value and (value[-1][1], value[-1][0]) >= (score, member)):
                    raise Bad(at, "sorted set out of order or NaN")
                value.append((member, score))
        else:
            if first:
                regions.append(("wlog-count", off))
            n, off = varint(b, off, end)
            if n == 0:
                raise Bad(at, "empty window log")
            if end - off < 8:
                raise Bad(at, "truncated window log")
            if first:
                regions.append(("wlog-first", off))
            (ts,) = struct.unpack_from("<q", b, off)
            off += 8
            value = [ts]
            for i in range(1, n):
                if i == 1 and first:
                    regions.append(("wlog-delta", off))
                d, off = varint(b, off, end)
                ts += d
                if ts >= 1 << 63:
                    raise Bad(at, "timestamp overflow")
                value.append(ts)
        records.append((TYPES[t], key, expire, value))
    if end - off != 8:
        raise Bad(off, "trailer is %d bytes, not 16" % (end - off + 8))
    (count,) = struct.unpack_from("<Q", b, off)
    regions.append(("count", off))
    regions.append(("checksum", len(b) - 8))
    if count != len(records):
        raise Bad(off, "count %d, %d records" % (count, len(records)))
    return (version, flags, created), records, regions


def main(argv):
    cmd = argv[1]
    if cmd == "resp-throttle":
        n, prefix, digits = int(argv[2]), argv[3], int(argv[4])
        out = sys.stdout.buffer
        klen = len(prefix) + digits
        head = b"*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n" % klen
        tail = b"\r\n$1\r\n0\r\n$1\r\n1\r\n$5\r\n86400\r\n"
        fmt = ("%s%%0%dd" % (prefix, digits)).encode()
        chunk = []
        for i in range(n):
            chunk.append(head + fmt % i + tail)
            if len(chunk) == 10000:
                out.write(b"".join(chunk))
                chunk = []
        out.write(b"".join(chunk))
        return 0
    path = argv[2]
    with open(path, "rb") as f:
        b = bytearray(f.read())
    if cmd in ("flip", "setbyte"):
        off = int(argv[3])
        b[off] = b[off] ^ 1 if cmd == "flip" else int(argv[4], 0)
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(b[off:off + 1])
        return 0
    if cmd == "rechecksum":
        with open(path, "r+b") as f:
            f.seek(len(b) - 8)
            f.write(struct.pack("<Q", xxh3(b[:-8])))
        return 0
    try:
        (version, flags, created), records, regions = parse(b)
    except Bad as e:
        print("%s: %s" % (path, e), file=sys.stderr)
        return 1
    if cmd == "verify":
        counts = {name: 0 for name in TYPES.values()}
        for r in records:
            counts[r[0]] += 1
        print("%s: valid, %d bytes, %d records %s" % (path, len(b), len(records),
                                                      " ".join("%s=%d" % kv
                                                               for kv in counts.items())))
    elif cmd == "dump":
        for t, key, expire, value in records:
            if isinstance(value, list):
                value = ",".join(v.decode("latin-1") if isinstance(v, bytes) else str(v)
                                 for v in value)
            elif isinstance(value, bytes):
                value = value.decode("latin-1")
            print(t, key.decode("latin-1"), expire, value)
    elif cmd == "regions":
        for name, off in regions:
            print(name, off)
    else:
        print("unknown command " + cmd, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
