/* hashval.h - a hash value (HSET and friends): field -> value, both binary strings.
 *
 * Two encodings, as Redis's listpack and dict. Small hashes (at most HV_PACKED_MAX_ENTRIES
 * fields, every field and value at most HV_PACKED_MAX_LEN bytes) are one malloc block: a header
 * and the pairs back to back, each string prefixed by its length byte, in insertion order (an
 * update keeps the field's place, as Redis's listpack does); lookups scan it. A hash that outgrows
 * either bound becomes a chained table of one node per field (keyed SipHash against flooding),
 * and stays one. Not thread safe: the keyspace's shard lock guards it. */
#ifndef RLIMITD_HASHVAL_H
#define RLIMITD_HASHVAL_H

#include <stddef.h>
#include <stdint.h>

#define HV_PACKED_MAX_ENTRIES 128
#define HV_PACKED_MAX_LEN 64

struct hashval;

/* The SipHash key of the table encoding (the keyspace's seed); before any hv_set. */
void hv_set_seed(const uint8_t seed[16]);

struct hashval *hv_new(void);
/* A copy (same pairs; packed if they fit). */
struct hashval *hv_clone(const struct hashval *h);
void hv_free(struct hashval *h);
size_t hv_count(const struct hashval *h);
/* Bytes allocated for it (malloc_usable_size of every block): memory accounting. */
size_t hv_bytes(const struct hashval *h);
/* 1 if packed (what MEMORY/OBJECT ENCODING would call listpack). */
int hv_is_packed(const struct hashval *h);

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
