/* hashval.h - a hash value (HSET and friends): field -> value, both binary strings.
 *
 * Two encodings, as Redis's listpack and dict. Small hashes are packed: a header and the pairs
 * back to back, each string prefixed by its length, in insertion order (an update keeps the
 * field's place, as Redis's listpack does); lookups scan it. A packed hash lives in one malloc
 * block, or in a caller's struct hv_local (no malloc until it outgrows it). hv_set makes it a
 * chained table of one node per field (keyed SipHash against flooding) exactly where Redis 7.0
 * converts a listpack hash: a field or value longer than hash-max-listpack-value, or more fields
 * than hash-max-listpack-entries after the set (hv_watch_limits; HV_PACKED_MAX_* until then). A
 * table stays one; a copy (hv_clone, which a load or RESTORE makes) is packed again if it fits.
 *
 * A packed hash also has a compact form for storage (hv_compact_write / hv_compact_load), which
 * the keyspace keeps inside the key's entry: the same pairs without the header, each value that
 * is a canonical int64 (what util_parse_i64 accepts, so its decimal form is exactly the string
 * given) stored as a 1- to 8-byte integer. Loading gives back the same strings in the same order.
 * Not thread safe: the keyspace's shard lock guards it. */
#ifndef RLIMITD_HASHVAL_H
#define RLIMITD_HASHVAL_H

#include <stddef.h>
#include <stdint.h>

/* The bounds before hv_watch_limits (Redis's defaults); HV_PACKED_MAX_LEN is also the longest
 * string value of the compact form. */
#define HV_PACKED_MAX_ENTRIES 512
#define HV_PACKED_MAX_LEN 64

struct hashval;

/* Room for a packed hash outside the heap (a handler's stack, via struct ks_href): enough for
 * any compact form loaded, as an integer's text is at most 2.25 times its stored bytes (an
 * empty field and a 6-byte integer: 8 stored bytes, 18 as text). */
#define HV_LOCAL_BYTES 640
struct hv_local {
    _Alignas(8) unsigned char b[HV_LOCAL_BYTES];
};

/* The longest compact form (its length must fit a byte where it is stored). */
#define HV_COMPACT_MAX 255

/* The SipHash key of the table encoding (the keyspace's seed); before any hv_set. */
void hv_set_seed(const uint8_t seed[16]);

/* Reads the packed bounds from then on at *entries and *value (the configuration's
 * hash-max-listpack-entries and -value, which it may change at any time: read relaxed, once per
 * set); NULLs restore the defaults. */
void hv_watch_limits(const int64_t *entries, const int64_t *value);

struct hashval *hv_new(void);
/* A copy (same pairs; packed if they fit). */
struct hashval *hv_clone(const struct hashval *h);
void hv_free(struct hashval *h);
size_t hv_count(const struct hashval *h);
/* Bytes allocated for it (malloc_usable_size of every block): memory accounting. */
size_t hv_bytes(const struct hashval *h);
/* 1 if packed (what MEMORY/OBJECT ENCODING would call listpack). */
int hv_is_packed(const struct hashval *h);
/* 1 if h is packed in a struct hv_local (hv_free does nothing to it; hv_bytes is 0). */
int hv_is_local(const struct hashval *h);
/* h itself if it is on the heap, else a heap copy of it (h is left as it was). */
struct hashval *hv_to_heap(struct hashval *h);

/* Writes the compact form of h into out (cap bytes) and returns its length: 0 if h is not
 * packed, is empty, or its compact form is longer than cap or than HV_COMPACT_MAX. */
size_t hv_compact_write(const struct hashval *h, unsigned char *out, size_t cap);
/* A packed hash in buf holding what the n bytes at c (from hv_compact_write) encode. */
struct hashval *hv_compact_load(struct hv_local *buf, const unsigned char *c, size_t n);
/* HSET's common case on a compact form (n bytes at c): if field f is there, value v's encoding
 * is exactly as long as the current one's, and hv_set would keep the hash packed, rewrites it in
 * place and returns 1; else
 * returns 0 and c is unchanged (the caller loads, sets and writes the hash instead). */
int hv_compact_update(unsigned char *c, size_t n, const char *f, size_t flen, const char *v,
                      size_t vlen);
/* HMGET's read of a compact form (n bytes at c) without loading it: 1 and field f's value in
 * *v / *vlen (pointing into c, or at its text written into num), or 0 if f is not there. */
#define HV_NUM_BYTES 24
int hv_compact_get(const unsigned char *c, size_t n, const char *f, size_t flen, const char **v,
                   size_t *vlen, char num[HV_NUM_BYTES]);
/* The field count of a compact form (without loading it). */
size_t hv_compact_count(const unsigned char *c, size_t n);

/* 1 and the value if the field exists, else 0. The pointer is valid until the next change. */
int hv_get(const struct hashval *h, const char *f, size_t flen, const char **v, size_t *vlen);
/* Sets field to value. Returns 1 if the field is new, 0 if it was updated. *hp may move. */
int hv_set(struct hashval **hp, const char *f, size_t flen, const char *v, size_t vlen);
/* 1 if the field was there and is removed, 0 otherwise. *hp may move. */
int hv_del(struct hashval **hp, const char *f, size_t flen);

/* Visits every pair: packed in insertion order, tables in bucket order. No change meanwhile. */
struct hv_iter {
    const struct hashval *h;
    size_t pos;
    const void *node;
};
void hv_iter_init(struct hv_iter *it, const struct hashval *h);
int hv_next(struct hv_iter *it, const char **f, size_t *flen, const char **v, size_t *vlen);

#endif
