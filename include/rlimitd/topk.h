/* topk.h - the most frequent keys of a stream in bounded memory: the space-saving heavy-hitter
 * sketch (Metwally, Agrawal, El Abbadi, 2005), for LIMITER TOP and RLIMIT.TOP.
 *
 * A sketch of size k keeps k counters. A key that has a counter gets it incremented; a new key
 * takes a free counter, or else the counter with the smallest count m, which it inherits as
 * count m + 1 with error m. With N = the number of events added (topk_total):
 *   - every listed count is an overestimate by at most its error, and every error is <= N / k;
 *   - a key added more than N / k times is always listed.
 * So the true count of a listed key lies in [count - error, count].
 *
 * Keys are compared by a keyed 64-bit hash (SipHash-1-3, seeded by the caller) plus their length
 * and first TOPK_KEY_MAX bytes; a longer key is listed by those bytes. The key table is probed
 * linearly with a random seed, so a client cannot aim keys at one probe run.
 *
 * Pure: no I/O, no allocation, no locking. The caller provides topk_bytes(k) bytes (aligned as
 * malloc does), and serializes calls. */
#ifndef RLIMITD_TOPK_H
#define RLIMITD_TOPK_H

#include <stddef.h>
#include <stdint.h>

#define TOPK_KEY_MAX 256 /* bytes of a key kept and listed */
#define TOPK_MIN_SIZE 10 /* limiter-top-size's range */
#define TOPK_MAX_SIZE 100000

struct topk;

/* One listed key. key points into the sketch: valid until the next call that changes it. */
struct topk_item {
    const char *key;
    size_t len;     /* bytes at key (at most TOPK_KEY_MAX) */
    uint64_t count; /* estimated count: true count <= count */
    uint64_t error; /* true count >= count - error */
};

/* Bytes needed for a sketch of k counters (TOPK_MIN_SIZE <= k <= TOPK_MAX_SIZE), 0 if k is out
 * of range. */
size_t topk_bytes(uint32_t k);

/* Makes an empty sketch of k counters in mem (topk_bytes(k) bytes). Returns it, or NULL if k is
 * out of range. */
struct topk *topk_init(void *mem, uint32_t k, const uint8_t seed[16]);

/* Forgets every key and the total; keeps the size and the seed. */
void topk_clear(struct topk *t);

/* Counts one event of key. */
void topk_add(struct topk *t, const char *key, size_t len);
/* The same with hash = topk_hash(seed, key, len) computed beforehand (seed: the one given to
 * topk_init), so that a caller serializing calls with a lock can hash outside it. */
uint64_t topk_hash(const uint8_t seed[16], const char *key, size_t len);
void topk_add_hashed(struct topk *t, const char *key, size_t len, uint64_t hash);

/* Events added since init or the last clear (N above). */
uint64_t topk_total(const struct topk *t);
uint32_t topk_size(const struct topk *t);

/* Writes the up to max listed keys with the highest counts into out, highest first (equal
 * counts: lower error first, then key bytes). Returns how many were written. */
uint32_t topk_list(const struct topk *t, struct topk_item *out, uint32_t max);

#endif
