/* hash.c - SipHash-1-3 (Aumasson and Bernstein), keyed hashing of keys.
 *
 * A per-process random seed makes bucket positions unpredictable, so a client cannot aim many
 * keys at one chain (DESIGN.md, "Keyspace"). SipHash-1-3 (one compression round per 8-byte word,
 * three finalization rounds) is the variant Redis and Rust use for hash tables: fast on short keys
 * and still keyed. Written from the published description; words are read little-endian (one
 * unaligned load, byte-swapped on a big-endian host), so the result is the same on every host. */
#include "rlimitd/hash.h"

#include <string.h>

#define C_ROUNDS 1
#define D_ROUNDS 3

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

/* One unaligned 8-byte load; byte-swapped on a big-endian host, so words are little-endian
 * everywhere. */
static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

struct sip {
    uint64_t v0, v1, v2, v3;
};

/* Inlined: called once per word and three times per hash, a call each costs more than the
 * round's own dozen instructions. */
static inline __attribute__((always_inline)) void sip_round(struct sip *s)
{
    s->v0 += s->v1;
    s->v1 = rotl(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = rotl(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = rotl(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = rotl(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = rotl(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = rotl(s->v2, 32);
}

static inline __attribute__((always_inline)) void compress(struct sip *s, uint64_t m)
{
    int r;

    s->v3 ^= m;
    for (r = 0; r < C_ROUNDS; r++)
        sip_round(s);
    s->v0 ^= m;
}

uint64_t hash_siphash13(const void *data, size_t len, const uint8_t seed[16])
{
    const uint8_t *p = data;
    const uint64_t k0 = load_le64(seed), k1 = load_le64(seed + 8);
    struct sip s = {
        /* The initial constants spell "somepseudorandomlygeneratedbytes". */
        .v0 = k0 ^ 0x736f6d6570736575ULL,
        .v1 = k1 ^ 0x646f72616e646f6dULL,
        .v2 = k0 ^ 0x6c7967656e657261ULL,
        .v3 = k1 ^ 0x7465646279746573ULL,
    };
    size_t left = len;
    uint64_t last;
    int r;

    for (; left >= 8; left -= 8, p += 8)
        compress(&s, load_le64(p));
    /* The final word holds the 0..7 remaining bytes and, in its top byte, len mod 256. */
    last = (uint64_t)(len & 0xff) << 56;
    if (left > 0) {
        uint8_t tail[8] = {0};
        memcpy(tail, p, left);
        last |= load_le64(tail);
    }
    compress(&s, last);
    s.v2 ^= 0xff;
    for (r = 0; r < D_ROUNDS; r++)
        sip_round(&s);
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
