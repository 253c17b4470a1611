/* listval_internal.h - what the files of the list value share, private to src/store: the block
 * and deque layouts, reading an element, and finding element idx. Writes (listval.c) and reads
 * (listval_read.c) both run these, static inline as they were inside one file: LPUSH, LINDEX and
 * LRANGE pay no call across files for them. */
#ifndef RLIMITD_LISTVAL_INTERNAL_H
#define RLIMITD_LISTVAL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/listval.h"
#include "rlimitd/util.h"

/* Common head. A node (one block) uses all of it; a big list only `big`. */
struct listval {
    uint16_t used; /* node: bytes of encoded elements; USED_WIDE: see used_of (listval.c) */
    uint16_t cap;  /* node: room for elements; USED_WIDE: see node_room (listval.c) */
    uint8_t count; /* node: elements (<= LV_NODE_MAX_COUNT) */
    uint8_t big;
};

/* One block: the 6-byte head, then the elements back to back. Each element is a tag byte, then:
 *   0x00..0xBF  a string of that many bytes, the bytes;
 *   0xC0..0xDF  a canonical decimal integer of 41 to 45 bits (13-digit millisecond timestamps):
 *               its low 40 bits as 5 little-endian bytes, bits 40..44 in the tag's low 5 bits;
 *   0xE0..0xE7  any other canonical decimal int64, as (tag - 0xDF) little-endian two's
 *               complement bytes, the fewest that hold it;
 *   0xF8        a string, its length as 4 little-endian bytes, the bytes.
 * A node holds at most LV_NODE_MAX_BYTES of elements unless it holds one element only, so only
 * such a node can exceed the 16-bit `used`: it stores USED_WIDE and used_of measures the element.
 * Capacity is what malloc gave (malloc_usable_size), read once per allocation and kept in `cap`:
 * asking malloc on every command costs a look at the next chunk's header, a cache miss of its
 * own. Memory accounting counts a node as its head plus `cap`. */
struct node {
    struct listval h;
    unsigned char data[];
};

/* A deque of nodes: v[head .. head + n) in list order, each node non-empty. */
struct big {
    struct listval h;
    size_t count; /* elements in all */
    struct node **v;
    size_t head, n, cap;
    size_t bytes; /* malloc_usable_size of v and of every node: lv_bytes stays O(1) */
};

#define TAG_STR_MAX 0xBFu
#define TAG_INT45 0xC0u
#define TAG_INT 0xE0u
#define TAG_STR32 0xF8u
#define USED_WIDE 0xFFFFu

#define B(l) ((struct big *)(l))
#define CB(l) ((const struct big *)(l))

/* lv_count, inline for these files' own use. */
static inline size_t lcount(const struct listval *l)
{
    return l->big ? CB(l)->count : l->count;
}

/* ---- reading an element ---- */

static inline size_t rd32(const unsigned char *d)
{
    return (size_t)d[0] | (size_t)d[1] << 8 | (size_t)d[2] << 16 | (size_t)d[3] << 24;
}

/* The integer of an element whose tag t is TAG_INT45.. or TAG_INT..; d is the tag. */
static inline int64_t rd_int(const unsigned char *d)
{
    unsigned t = d[0], n, bits;
    uint64_t u = 0;
    if (t < TAG_INT) {
        n = 5;
        bits = 45;
        u = (uint64_t)(t & 0x1f) << 40;
    } else {
        n = t - TAG_INT + 1;
        bits = 8 * n;
    }
    for (unsigned i = 0; i < n; i++)
        u |= (uint64_t)d[1 + i] << (8 * i);
    if (bits < 64 && (u >> (bits - 1)) & 1)
        u |= ~UINT64_C(0) << bits;
    return (int64_t)u;
}

static inline size_t elem_size(const unsigned char *d)
{
    unsigned t = d[0];
    if (t <= TAG_STR_MAX)
        return 1 + t;
    if (t < TAG_INT)
        return 6;
    if (t < TAG_STR32)
        return 1 + (t - TAG_INT + 1);
    return 5 + rd32(d + 1);
}

static inline size_t elem_read(const unsigned char *d, struct lv_elem *e)
{
    unsigned t = d[0];
    if (t <= TAG_STR_MAX) {
        e->p = (const char *)d + 1;
        e->len = t;
        return 1 + t;
    }
    if (t < TAG_STR32) {
        e->len = util_fmt_i64(e->buf, rd_int(d));
        e->p = e->buf;
        return elem_size(d);
    }
    e->len = rd32(d + 1);
    e->p = (const char *)d + 5;
    return 5 + e->len;
}

/* ---- views shared by both forms ---- */

static inline size_t node_offset(const struct node *n, size_t w)
{
    size_t off = 0;
    while (w-- > 0)
        off += elem_size(n->data + off);
    return off;
}

static inline struct node *node_at(const struct listval *l, size_t k)
{
    return l->big ? CB(l)->v[CB(l)->head + k] : (struct node *)l;
}

/* The node holding element idx (< count) and its place in it, walking from the nearer end. */
static inline size_t locate(const struct listval *l, size_t idx, size_t *w)
{
    if (!l->big) {
        *w = idx;
        return 0;
    }
    const struct big *b = CB(l);
    if (idx < b->count / 2) {
        for (size_t k = 0;; k++) {
            size_t c = b->v[b->head + k]->h.count;
            if (idx < c) {
                *w = idx;
                return k;
            }
            idx -= c;
        }
    }
    size_t r = b->count - idx; /* elements from idx to the tail, >= 1 */
    for (size_t k = b->n - 1;; k--) {
        size_t c = b->v[b->head + k]->h.count;
        if (r <= c) {
            *w = c - r;
            return k;
        }
        r -= c;
    }
}

#endif
