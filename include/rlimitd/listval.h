/* listval.h - a list value (LPUSH and friends): a sequence of binary strings.
 *
 * Small lists (at most LV_NODE_MAX_COUNT elements taking at most LV_NODE_MAX_BYTES encoded, or a
 * single element of any size) are one malloc block: a header and the elements back to back, each
 * a tag byte and its bytes; a string that is a canonical int64 in decimal ("1700000000123", not
 * "007" or "+1") is stored as a little-endian integer of 1 to 8 bytes and given back in decimal,
 * so a 13-digit millisecond timestamp takes 6 bytes (listval_internal.h has the encoding). A list
 * that outgrows one block becomes a deque of such blocks (nodes, each within the same bounds)
 * behind an array of node pointers with room at both ends, so pushes and pops at either end are
 * O(1) amortized and a lookup by index walks node counts from the nearer end. A big list that
 * shrinks to half a node's bounds becomes one block again. Not thread safe: the keyspace's shard
 * lock guards it. */
#ifndef RLIMITD_LISTVAL_H
#define RLIMITD_LISTVAL_H

#include <stddef.h>
#include <stdint.h>

#define LV_NODE_MAX_COUNT 128
#define LV_NODE_MAX_BYTES 4096

struct listval;

struct listval *lv_new(void);
/* A copy with the same elements. */
struct listval *lv_clone(const struct listval *l);
void lv_free(struct listval *l);
size_t lv_count(const struct listval *l);
/* Bytes allocated for it (malloc_usable_size of every block), O(1): memory accounting. */
size_t lv_bytes(const struct listval *l);
/* 1 while it is one block. */
int lv_is_packed(const struct listval *l);

/* An element as read: p/len are its bytes, pointing into the list or, for an integer, into buf.
 * Valid until the next change to the list or the element struct. */
struct lv_elem {
    const char *p;
    size_t len;
    char buf[24];
};

/* Reads element idx (0 <= idx < count). */
void lv_get(const struct listval *l, size_t idx, struct lv_elem *e);
/* Inserts s before element idx (idx == count appends). *lp may move. */
void lv_insert(struct listval **lp, size_t idx, const char *s, size_t len);
/* Removes n elements from idx on (idx + n <= count). *lp may move. */
void lv_remove(struct listval **lp, size_t idx, size_t n);
/* Replaces element idx. *lp may move. */
void lv_set(struct listval **lp, size_t idx, const char *s, size_t len);
/* LREM: removes the elements equal to s: the first `count` from the head (count > 0), the last
 * -count from the tail (count < 0), or all (count == 0). Returns how many. *lp may move. */
size_t lv_rem(struct listval **lp, const char *s, size_t len, int64_t count);

/* Walks elements from index start toward the tail (rev = 0) or the head (rev = 1). No change to
 * the list meanwhile. */
struct lv_iter {
    const struct listval *l;
    size_t k;    /* node position */
    size_t w;    /* element within the node: the next to read (forward) or one past it (rev) */
    size_t off;  /* forward: byte offset of element w */
    size_t left; /* elements not visited yet */
    int rev;
    uint32_t offs[LV_NODE_MAX_COUNT]; /* rev: offsets of node k's elements */
};
void lv_iter_init(struct lv_iter *it, const struct listval *l, size_t start, int rev);
int lv_next(struct lv_iter *it, struct lv_elem *e);

/* Equality of an element with a string, as LPOS/LINSERT/LREM compare. */
int lv_elem_eq(const struct lv_elem *e, const char *s, size_t len);

#endif
