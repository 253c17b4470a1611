/* zset.h - a sorted set of (member, score) pairs ordered by score, then member bytes
 * (docs/DESIGN.md "Sorted sets"). Pure: no locks, no I/O; allocation failure aborts.
 *
 * Two encodings behind one interface:
 * - packed: one malloc'd block, entries sorted, no per-entry allocation. Used while the set has
 *   at most zset-max-listpack-entries members of at most zset-max-listpack-value bytes, as
 *   Redis 7.0 converts (zs_watch_limits; Redis's defaults ZS_PACK_MAX_ENTRIES and
 *   ZS_PACK_MAX_MEMBER until then), bounds a packed set can hold up to ZS_PACK_MAX_ENTRIES
 *   members of ZS_PACK_CAP_MEMBER bytes (higher settings act as those). A member that is the
 *   canonical decimal of its integral score (a millisecond timestamp stored as its own score,
 *   the rate-limit recipe's shape) is stored as a varint delta from the previous such score:
 *   3-4 bytes instead of 9 + 13.
 * - big: a skip list with spans (rank in O(log n)) plus an open-addressing hash index from
 *   member to node (ZSCORE, ZADD of an existing member in O(1)). A set converts packed -> big
 *   when it outgrows the limits, never back.
 * Ranks are 0-based in ascending order. Scores are never NaN (zs_add refuses it). */
#ifndef RLIMITD_ZSET_H
#define RLIMITD_ZSET_H

#include <stddef.h>
#include <stdint.h>

#define ZS_PACK_MAX_ENTRIES 128
#define ZS_PACK_MAX_MEMBER 64
#define ZS_PACK_CAP_MEMBER 255 /* a packed member's length is one byte */

struct zset;

/* The seed of the member hash of big sets (hash flooding resistance); set once at start. */
void zs_set_seed(const uint8_t seed[16]);

/* Reads the packed bounds from then on at *entries and *value (the configuration's
 * zset-max-listpack-entries and -value, which it may change at any time: read relaxed, once per
 * add); NULLs restore the defaults. */
void zs_watch_limits(const int64_t *entries, const int64_t *value);

/* An empty set; packed unless the caller already knows it will hold more members or a longer
 * one than the packed bounds allow (Redis 7 does the same, which decides whether a score of -0
 * reads back as "0" or "-0"). */
struct zset *zs_new(size_t size_hint, size_t max_member_hint);
void zs_free(struct zset *z);
/* A deep copy (snapshots, conversions). */
struct zset *zs_dup(const struct zset *z);

size_t zs_card(const struct zset *z);
/* Bytes allocated for the set (malloc_usable_size of every block). */
size_t zs_bytes(const struct zset *z);
/* 1 if packed (tests, OBJECT-like introspection). */
int zs_is_packed(const struct zset *z);

/* 1 and *score if member is in the set, else 0. */
int zs_score(const struct zset *z, const char *m, size_t len, double *score);
/* 1 and *rank (0-based ascending) if member is in the set, else 0. */
int zs_rank(const struct zset *z, const char *m, size_t len, size_t *rank);

/* ZADD's options. */
#define ZS_NX 1u
#define ZS_XX 2u
#define ZS_GT 4u
#define ZS_LT 8u
#define ZS_INCR 16u

/* Results of zs_add. */
#define ZS_NOP 0     /* nothing changed: same score, or NX/XX/GT/LT prevented it */
#define ZS_ADDED 1   /* a new member */
#define ZS_UPDATED 2 /* an existing member's score changed */
#define ZS_NAN (-1)  /* INCR would make the score NaN; nothing changed */

/* ZADD of one pair with Redis 7's rules for the options (INCR adds score to the current one,
 * absent = 0). *z may be reallocated or converted. *newscore is the member's score afterwards
 * (unset on ZS_NAN; on ZS_NOP *skipped says whether an option prevented the change, which makes
 * ZADD INCR answer nil). score must not be NaN. */
int zs_add(struct zset **z, const char *m, size_t len, double score, unsigned flags,
           double *newscore, int *skipped);
/* 1 if member was removed, 0 if absent. */
int zs_del(struct zset **z, const char *m, size_t len);
/* Removes the members of ranks [start, end). */
void zs_del_range(struct zset **z, size_t start, size_t end);

/* A score bound: value, exclusive or not. */
struct zs_score_range {
    double min, max;
    int minex, maxex;
};
/* A lex bound: p/len the member; inf -1 = "-", +1 = "+", 0 = a member, ex = '(' */
struct zs_lex_bound {
    const char *p;
    size_t len;
    int inf;
    int ex;
};

/* The ranks [*start, *end) of the members in the range (empty: *start == *end). */
void zs_range_score(const struct zset *z, const struct zs_score_range *r, size_t *start,
                    size_t *end);
/* Lex ranges assume every member has the same score, as Redis documents. When they do not,
 * the range is empty unless the highest member is >= min and the lowest <= max (both
 * encodings, as Redis), and packed sets then give listpack's answer: forward, it runs from the first member >= min (scanning up) while
 * members are <= max; reverse (ZREVRANGEBYLEX), from the last member <= max (scanning down)
 * while members are >= min. */
void zs_range_lex(const struct zset *z, const struct zs_lex_bound *min,
                  const struct zs_lex_bound *max, int reverse, size_t *start, size_t *end);

/* One member as a cursor yields it. m may point into the set, or into buf for members stored
 * as numbers: valid until the next call on the cursor or any change to the set. */
struct zs_item {
    const char *m;
    size_t len;
    double score;
};

/* A cursor over ranks, in either direction. A packed set is decoded once into the cursor,
 * so it is a few KiB: keep it on the stack, not in a loop's allocation. */
struct zs_iter {
    const struct zset *z;
    size_t rank;  /* of the next member to yield */
    int reverse;
    const void *node; /* big sets: the node of rank `rank`, NULL at the end */
    uint32_t n;       /* packed: the decoded members */
    double s[ZS_PACK_MAX_ENTRIES];
    const char *m[ZS_PACK_MAX_ENTRIES];
    uint8_t len[ZS_PACK_MAX_ENTRIES];
    char ib[ZS_PACK_MAX_ENTRIES][24];
};

/* Positions the cursor at rank (ascending order) and sets the direction: next yields rank,
 * then rank - 1 (reverse) or rank + 1. rank >= card: nothing to yield. */
void zs_iter_init(struct zs_iter *it, const struct zset *z, size_t rank, int reverse);
/* Moves the cursor to rank, keeping the direction (O(log n) for big sets, O(1) packed). */
void zs_iter_seek(struct zs_iter *it, size_t rank);
/* 1 and *out for the next member, 0 at the end. */
int zs_iter_next(struct zs_iter *it, struct zs_item *out);

/* Formats a score as Redis 7.0 replies it: "inf", "-inf", else printf's %.17g. Returns the
 * length (at most 24 bytes plus NUL). */
int zs_format_score(char *buf, double d);

/* Checks the internal invariants (order, spans, index, counts); 0 if sound. For tests. */
int zs_check(const struct zset *z);

#endif
