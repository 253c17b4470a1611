/* zset_internal.h - what the files of the sorted set share, private to src/store: the two
 * encodings' layouts and the decoding and lookups both reads (zset_read.c) and writes (zset.c)
 * run. The helpers are static inline, as they were inside one file: a ZADD or a ZSCORE decodes
 * a packed set or probes a big set's index without a call across files.
 *
 * Packed block: [header 8][entries], entries in (score, member) order, each
 *   tag 0: the member is the canonical decimal of the integral score |s| < 2^53; then the
 *          zigzag varint of (score - previous tag-0 score), the first against 0.
 *   tag 1: 8-byte double, 1-byte member length (<= ZS_PACK_CAP_MEMBER), member bytes.
 * Every write decodes the block into arrays (at most 128 entries), changes them and encodes a
 * new block: O(n) with n <= 128, as Redis's listpack is, and the delta coding needs no in-place
 * fix-ups. A score of -0 is stored as 0 in a packed set (Redis's listpack does the same).
 *
 * Big set: a skip list ordered by (score, member bytes) where every forward link carries its
 * span (members it skips), so rank <-> node is O(log n); a backward link on level 0 for
 * reverse walks. Members live inside their nodes; the hash index maps member -> node (linear
 * probing, backward-shift deletion, at most half full). Invariants are checked by zs_check. */
#ifndef RLIMITD_ZSET_INTERNAL_H
#define RLIMITD_ZSET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rlimitd/hash.h"
#include "rlimitd/util.h"
#include "rlimitd/zset.h"

#define KIND_PACKED 0
#define KIND_BIG 1
#define MAX_LEVEL 32
#define INT_EXACT 9007199254740992.0 /* 2^53: integers below are exact doubles */

/* ---- the common head; a packed set is this and its entries ---- */

struct zset {
    uint8_t kind;
    uint8_t pad_;
    uint16_t n;    /* packed: entries */
    uint32_t used; /* packed: bytes of entries after the header */
};

/* ---- big: a skip list with spans, and a hash index member -> node ---- */

struct zlevel {
    struct znode *fwd;
    size_t span;
};

struct znode {
    double score;
    struct znode *back;
    uint32_t len;
    uint32_t nlev;
    struct zlevel lv[]; /* nlev levels, then the member bytes */
};

struct zbig {
    struct zset hdr;
    int level;
    size_t n;
    struct znode *head, *tail;
    struct znode **tab; /* hash index, mask + 1 slots */
    size_t mask;
    size_t bytes;
    uint64_t rnd;
};

/* The members of either encoding (zs_card, inline for these files' own use). */
static inline size_t zcard(const struct zset *z)
{
    return z->kind == KIND_PACKED ? z->n : ((const struct zbig *)z)->n;
}

/* The seed of the big sets' member hash (zs_set_seed, zset.c). */
extern uint8_t zs_member_seed[16];

/* ---- order and integers ---- */

static inline int cmp_member(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl;
}

/* (s1, m1) vs (s2, m2) in set order. */
static inline int cmp_entry(double s1, const char *m1, size_t l1, double s2, const char *m2,
                            size_t l2)
{
    if (s1 < s2)
        return -1;
    if (s1 > s2)
        return 1;
    return cmp_member(m1, l1, m2, l2);
}

static inline int i64_to_str(char *buf, int64_t v)
{
    size_t len = util_fmt_i64(buf, v);
    buf[len] = '\0';
    return (int)len;
}

/* Whether m is the canonical decimal ("-" only before a non-zero value, no leading zeros) of
 * an integer v with |v| < 2^53: then *out = v. util_parse_i64 accepts exactly the canonical
 * forms, so m == the decimal util_fmt_i64 gives for v. */
static inline int canon_int(const char *m, size_t len, int64_t *out)
{
    int64_t v;
    if (len == 0 || len > 17 || util_parse_i64(m, len, &v) != 0 ||
        !(v > -(int64_t)INT_EXACT && v < (int64_t)INT_EXACT))
        return 0;
    *out = v;
    return 1;
}

/* ---- packed: decoding, and finding a member ---- */

/* Decoded entries. A lazy view (pdecode with full 0) leaves m[i] NULL for a tag-0 entry until
 * pmember formats it into ib[i]: most writes compare and re-encode integer members by value and
 * never need their text. isint/iv (NULL in a zs_iter's full view) keep each entry's tag and, for
 * tag 0, its integer, so pencode writes tag-0 entries without formatting or parsing them. */
struct pview {
    uint32_t n;
    double *s;
    const char **m;
    uint8_t *len;
    char (*ib)[24];
    uint8_t *isint;
    int64_t *iv;
};

static inline const uint8_t *pdata(const struct zset *z)
{
    return (const uint8_t *)(z + 1);
}

static inline uint64_t get_varint(const uint8_t **q)
{
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b = *(*q)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return x;
    }
}

static inline int64_t unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* full: every member's text is set (integer members formatted); else a lazy view. */
static inline void pdecode(const struct zset *z, struct pview *v, int full)
{
    const uint8_t *q = pdata(z);
    int64_t prev = 0;
    v->n = z->n;
    for (uint32_t i = 0; i < z->n; i++) {
        if (*q++ == 0) {
            int64_t val = prev + unzigzag(get_varint(&q));
            prev = val;
            v->s[i] = (double)val;
            if (v->isint != NULL) {
                v->isint[i] = 1;
                v->iv[i] = val;
            }
            if (full) {
                v->len[i] = (uint8_t)i64_to_str(v->ib[i], val);
                v->m[i] = v->ib[i];
            } else {
                v->len[i] = 0;
                v->m[i] = NULL;
            }
        } else {
            memcpy(&v->s[i], q, 8);
            q += 8;
            v->len[i] = *q++;
            v->m[i] = (const char *)q;
            q += v->len[i];
            if (v->isint != NULL)
                v->isint[i] = 0;
        }
    }
}

/* A pview whose arrays live in a zs_iter (the same layout, already sized for 128 + 1). */
struct pbuf {
    double s[ZS_PACK_MAX_ENTRIES + 1];
    const char *m[ZS_PACK_MAX_ENTRIES + 1];
    uint8_t len[ZS_PACK_MAX_ENTRIES + 1];
    char ib[ZS_PACK_MAX_ENTRIES + 1][24];
    uint8_t isint[ZS_PACK_MAX_ENTRIES + 1];
    int64_t iv[ZS_PACK_MAX_ENTRIES + 1];
};

static inline void pview_on(struct pview *v, struct pbuf *b)
{
    v->n = 0;
    v->s = b->s;
    v->m = b->m;
    v->len = b->len;
    v->ib = b->ib;
    v->isint = b->isint;
    v->iv = b->iv;
}

/* A member's identity for pfind: its bytes and, when it is a canonical integer, the value (a
 * tag-0 entry's member is the canonical decimal of iv, so it matches exactly such a member). */
struct pkey {
    const char *m;
    size_t len;
    int isint;
    int64_t iv;
};

static inline void pkey_of(struct pkey *k, const char *m, size_t len)
{
    k->m = m;
    k->len = len;
    k->iv = 0; /* read only when isint, but copied always (pinsert_at): never indeterminate */
    k->isint = canon_int(m, len, &k->iv);
}

static inline int64_t pfind(const struct pview *v, const struct pkey *k)
{
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->isint[i] ? k->isint && v->iv[i] == k->iv
                        : v->len[i] == k->len && memcmp(v->m[i], k->m, k->len) == 0)
            return i;
    }
    return -1;
}

/* ---- big: finding a member, the path to a place in order ---- */

static inline const char *node_member(const struct znode *x)
{
    return (const char *)&x->lv[x->nlev];
}

static inline size_t hslot(const struct zbig *b, const char *m, size_t len)
{
    return (size_t)hash_siphash13(m, len, zs_member_seed) & b->mask;
}

static inline int64_t hfind(const struct zbig *b, const char *m, size_t len)
{
    for (size_t i = hslot(b, m, len);; i = (i + 1) & b->mask) {
        const struct znode *x = b->tab[i];
        if (x == NULL)
            return -1;
        if (x->len == len && memcmp(node_member(x), m, len) == 0)
            return (int64_t)i;
    }
}

/* Fills update[] with the last node before (score, m) on every level, rank[] their ranks
 * (1-based; the head is 0). */
static inline void sl_path(const struct zbig *b, double score, const char *m, size_t len,
                           struct znode **update, size_t *rank)
{
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        rank[i] = i == b->level - 1 ? 0 : rank[i + 1];
        while (x->lv[i].fwd != NULL &&
               cmp_entry(x->lv[i].fwd->score, node_member(x->lv[i].fwd), x->lv[i].fwd->len,
                         score, m, len) < 0) {
            rank[i] += x->lv[i].span;
            x = x->lv[i].fwd;
        }
        update[i] = x;
    }
}

#endif
