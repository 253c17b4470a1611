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
 * Sketches of the same kind of key merge (topk_merge): the daemon keeps one per I/O thread and
 * merges them on read. A part's floor F (topk_floor) bounds the count of every key it does not
 * list: 0 while no counter was taken over, else its smallest count (<= its N / k). A merged
 * key's count is the sum over the parts of its count there, or F where it is not listed; its
 * error likewise (error there, or F). With parts of size k and N = the sum of their totals:
 *   - every merged count is >= the true count and over it by at most the sum of the floors,
 *     so by at most N / k (each floor is at most its part's N / k);
 *   - a key added more than N / k times is listed by some part, and fewer than k merged
 *     counts exceed N / k, so it is among the k highest merged counts.
 * (Agarwal et al., "Mergeable summaries", 2012: such summaries merge; this is the one-shot
 * form, which keeps the whole union instead of shrinking it back to k counters.)
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
#define TOPK_MAX_MERGED (TOPK_MAX_SIZE * 64) /* counters of a merged sketch */

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
/* The same with a hash computed by the caller: topk_hash(seed, key, len), or any other keyed
 * 64-bit hash of the key (the daemon reuses its keyspace's SipHash), as long as every add to
 * this sketch and to every sketch merged with it uses the same function. */
uint64_t topk_hash(const uint8_t seed[16], const char *key, size_t len);
void topk_add_hashed(struct topk *t, const char *key, size_t len, uint64_t hash);

/* A bound on the count of every key the sketch does not list: 0 while no counter has been
 * taken over, else the smallest count. For a merged sketch, the sum of its parts' floors. */
uint64_t topk_floor(const struct topk *t);

/* A merged sketch: the union of parts added by topk_merge, listed by topk_list with the
 * counts and errors above; topk_add must not be used on it. It never takes a counter over, so
 * k must be at least the sum of the parts' sizes (TOPK_MIN_SIZE <= k <= TOPK_MAX_MERGED; bytes
 * 0 if out of range). topk_clear empties it. */
size_t topk_merged_bytes(uint32_t k);
struct topk *topk_merged_init(void *mem, uint32_t k);
/* Adds the sketch part (filled by topk_add, not itself merged) to into. Returns 0, or -1 if
 * part is a merged sketch or into has no counter left for a key of part (then into holds a
 * partial union). */
int topk_merge(struct topk *into, const struct topk *part);

/* Events added since init or the last clear (N above; for a merged sketch, its parts'). */
uint64_t topk_total(const struct topk *t);
uint32_t topk_size(const struct topk *t);

/* Writes the up to max listed keys with the highest counts into out, highest first (equal
 * counts: lower error first, then key bytes). Returns how many were written. */
uint32_t topk_list(const struct topk *t, struct topk_item *out, uint32_t max);

#endif
