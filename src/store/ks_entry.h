/* ks_entry.h - the layout of a keyspace entry, private to src/store (ks_*.c and keyspace.c).
 *
 * An entry lives in its shard's slabs (ks_slab.c) and is reached through a 32-bit reference
 * (ks_internal.h ref_ptr). It is
 *     [8 value][1 flags][1 key length; 255 = a 4-byte length follows][4 length?][8 expiry?][key]
 * The value is the TAT or integer, or a pointer to a malloc'd blob (KS_RAW string, KS_SWLOG ring,
 * sorted set, hash), or the start of a small hash kept in the entry (below). The expiry field exists only when the expiry is not implied: a GCRA key
 * expires at its TAT (COMMANDS.md, CL.THROTTLE), so F_EXP_IS_VAL says "expiry == value" and a GCRA
 * entry with a 14-byte key is 24 bytes. EXPIRE/PERSIST on such a key, or a type change, moves the
 * entry to the class of its new shape and updates its slot (ks_table.c reshape). Nothing outside
 * src/store ever holds an entry pointer across a call that could move it.
 *
 * Everything here is static inline: these are read on every command (lookups, expiry checks). */
#ifndef RLIMITD_KS_ENTRY_H
#define RLIMITD_KS_ENTRY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rlimitd/keyspace.h"

#define E_FLAGS 8
#define E_KLEN 9
#define E_HDR 10
#define KLEN_LONG 255
#define F_TYPE 0x07       /* enum ks_type; KS_LEASE (8) is stored as 0, see e_type */
#define F_HAS_EXP 0x08    /* an 8-byte expiry field follows the key length */
#define F_EXP_IS_VAL 0x10 /* the expiry is the value (GCRA: the TAT) */
#define F_EPOCH 0x20      /* dump epoch of the entry (see "Sliced dumps" at ks_dump_begin) */
#define F_CRING 0x40      /* KS_SWLOG: the value is a struct cring, not a struct swlog */
#define F_HINLINE 0x80    /* KS_HASH: the hash is in the entry (see "Hashes in the entry") */
#define MIN_ENTRY 16u     /* the smallest slab class: no entry is shorter */

/* A KS_RAW value: the string's bytes in one malloc block. */
struct rawstr {
    size_t len;
    char data[];
};

/* ---- entries: field access (unaligned fields go through memcpy; x86 makes that a load) ---- */

static inline int64_t e_val(const uint8_t *e)
{
    int64_t v;
    memcpy(&v, e, 8);
    return v;
}

static inline void e_set_val(uint8_t *e, int64_t v)
{
    memcpy(e, &v, 8);
}

static inline void *e_ptr(const uint8_t *e)
{
    void *p;
    memcpy(&p, e, sizeof(p));
    return p;
}

static inline void e_set_ptr(uint8_t *e, void *p)
{
    memcpy(e, &p, sizeof(p));
}

/* An entry never holds KS_NONE, so its code 0 stores KS_LEASE, the one type past the three
 * bits (storing `type & F_TYPE` writes 0 for it): the flags keep their layout. */
static inline enum ks_type e_type(const uint8_t *e)
{
    unsigned t = e[E_FLAGS] & F_TYPE;
    return (enum ks_type)(t != 0 ? t : KS_LEASE);
}

static inline size_t e_klen(const uint8_t *e)
{
    if (e[E_KLEN] != KLEN_LONG)
        return e[E_KLEN];
    uint32_t n;
    memcpy(&n, e + E_HDR, 4);
    return n;
}

/* Offset of the expiry field (when F_HAS_EXP) for a key of klen bytes. */
static inline size_t exp_off(size_t klen)
{
    return E_HDR + (klen >= KLEN_LONG ? 4 : 0);
}

static inline size_t key_off(uint8_t flags, size_t klen)
{
    return exp_off(klen) + ((flags & F_HAS_EXP) ? 8 : 0);
}

static inline const char *e_key(const uint8_t *e, size_t klen)
{
    return (const char *)e + key_off(e[E_FLAGS], klen);
}

static inline size_t entry_size(uint8_t flags, size_t klen)
{
    size_t n = key_off(flags, klen) + klen;
    return n < MIN_ENTRY ? MIN_ENTRY : n;
}

static inline int64_t e_expire(const uint8_t *e)
{
    uint8_t f = e[E_FLAGS];
    if (f & F_EXP_IS_VAL)
        return e_val(e);
    if (f & F_HAS_EXP) {
        int64_t x;
        memcpy(&x, e + exp_off(e_klen(e)), 8);
        return x;
    }
    return 0;
}

/* x != 0 && x <= now for expiry stamps (keyspace.h): as unsigned, 0 wraps to the largest value
 * and a far stamp (negative) is above every now. */
static inline int e_expired(const uint8_t *e, int64_t now)
{
    int64_t x = e_expire(e);
    return (uint64_t)x - 1 < (uint64_t)now;
}

/* ---- Hashes in the entry ----
 * A packed hash whose compact form (hashval.h: no header, 1-byte lengths, integers as 1-8 byte
 * ints) is at most HV_COMPACT_MAX bytes and keeps the entry within MAX_SMALL is stored in the
 * entry itself (F_HINLINE): value byte 0 is the compact length n, bytes 1..7 its first bytes, and
 * the other n - 7 follow the key. A token-bucket hash (tokens, a 13-digit ms ts: 19 compact
 * bytes) under a 9-byte key is one 32-byte slab slot, where it was a 24-byte entry pointing to a
 * 40-byte malloc chunk; a lookup reads one cache line fewer, and nothing is malloc'd. Other
 * hashes keep the value as a pointer to a struct hashval. */
#define INLINE_HEAD 7

static inline size_t inline_tail(size_t n)
{
    return n > INLINE_HEAD ? n - INLINE_HEAD : 0;
}

static inline int e_inline_hash(const uint8_t *e)
{
    return (e[E_FLAGS] & F_HINLINE) && e_type(e) == KS_HASH;
}

/* Size of an existing entry, an inline hash's tail included. */
static inline size_t e_size(const uint8_t *e)
{
    size_t klen = e_klen(e);
    if (!e_inline_hash(e))
        return entry_size(e[E_FLAGS], klen);
    size_t n = key_off(e[E_FLAGS], klen) + klen + inline_tail(e[0]);
    return n < MIN_ENTRY ? MIN_ENTRY : n;
}

/* Copies an inline hash's compact form to out (HV_COMPACT_MAX bytes); returns its length. */
static inline size_t inline_read(const uint8_t *e, unsigned char *out)
{
    size_t n = e[0];
    size_t head = n < INLINE_HEAD ? n : INLINE_HEAD;
    memcpy(out, e + 1, INLINE_HEAD); /* a constant size: two loads (out has room) */
    if (n > head) {
        size_t klen = e_klen(e);
        memcpy(out + head, e + key_off(e[E_FLAGS], klen) + klen, n - head);
    }
    return n;
}

/* Writes n compact bytes into an entry sized for exactly n (set_inline_room). */
static inline void inline_write(uint8_t *e, const unsigned char *c, size_t n)
{
    size_t head = n < INLINE_HEAD ? n : INLINE_HEAD;
    e[0] = (uint8_t)n;
    memcpy(e + 1, c, head);
    if (n > head) {
        size_t klen = e_klen(e);
        memcpy(e + key_off(e[E_FLAGS], klen) + klen, c + head, n - head);
    }
}

#endif
