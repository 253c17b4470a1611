/* swlog.h - the sliding-window log of ISALLOWED (COMMANDS.md "ISALLOWED").
 *
 * A ring of attempt timestamps (int64 milliseconds), oldest to newest, kept sorted: an attempt is
 * recorded at max(now, newest) so a wall clock stepping backwards cannot unsort it. Only the newest
 * max_count + 1 attempts can change a decision, so no more are kept.
 *
 * Pure: no I/O, no allocation. The caller (keyspace.c) allocates swlog_bytes(cap) bytes and moves
 * the log to a bigger or smaller ring with swlog_copy when swlog_needed_cap says so. */
#ifndef RLIMITD_SWLOG_H
#define RLIMITD_SWLOG_H

#include <stddef.h>
#include <stdint.h>

struct swlog {
    uint32_t cap;  /* slots in ts[] */
    uint32_t len;  /* attempts stored */
    uint32_t head; /* index of the oldest attempt */
    uint32_t pad_;
    int64_t ts[];  /* ring of ms timestamps */
};

/* Bytes to allocate for a ring of cap slots. */
size_t swlog_bytes(uint32_t cap);

/* Makes an empty log of cap slots in memory of swlog_bytes(cap) bytes. */
void swlog_init(struct swlog *log, uint32_t cap);

/* Drops attempts at or before now_ms - period_ms (they can no longer count). */
void swlog_trim(struct swlog *log, int64_t now_ms, int64_t period_ms);

/* Slots the log must have before swlog_record can add one attempt under max_count:
 * min(len + 1, max_count + 1). Call after swlog_trim. */
uint32_t swlog_needed(const struct swlog *log, int64_t max_count);

/* Copies the newest min(src->len, dst->cap) attempts of src into the empty log dst. */
void swlog_copy(struct swlog *dst, const struct swlog *src);

/* The ring size of a new log: room for 4 attempts, or max_count + 1 if that is fewer. Shared by
 * every owner of a log, as swlog_fit_cap is. */
uint32_t swlog_initial_cap(int64_t max_count);

/* The ring size to hold `needed` slots under max_count, given the current cap: grows
 * geometrically but never past max_count + 1, shrinks when mostly empty (so a burst does not pin
 * memory forever). Returns cap itself when no move is worth it. Shared by every owner of a log
 * (the daemon's keyspace, the Redis module) so they size rings alike. */
uint32_t swlog_fit_cap(uint32_t cap, uint32_t needed, int64_t max_count);

/* Records one attempt at now_ms (or at the newest timestamp if the clock went back), dropping
 * the oldest if the log already holds max_count + 1, and returns 1 if the attempts in
 * (now - period, now] number at most max_count, else 0. Requires cap >= swlog_needed() and
 * a prior swlog_trim with the same now/period: every attempt left after the trim counts, those
 * recorded "ahead" of a clock that stepped back included. */
int swlog_record(struct swlog *log, int64_t now_ms, int64_t max_count);

/* The newest timestamp, or INT64_MIN when empty. */
int64_t swlog_newest(const struct swlog *log);

/* The i-th oldest timestamp, i < len (for snapshots and tests). */
int64_t swlog_at(const struct swlog *log, uint32_t i);

#endif
