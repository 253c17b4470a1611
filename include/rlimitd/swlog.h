/* swlog.h - the sliding-window log of ISALLOWED (COMMANDS.md, ISALLOWED).
 *
 * A ring of attempt timestamps (int64 milliseconds), oldest to newest, kept sorted: an attempt is
 * recorded at max(now, newest) so a wall clock stepping backwards cannot unsort it. Only the newest
 * max_count + 1 attempts can change a decision, so no more are kept.
 *
 * Pure: no I/O, no allocation. swlog_update is the one sequence both owners of a log (the daemon's
 * keyspace, src/store/ks_swlog.c, and the Redis module, src/module/module_state.c) run per attempt;
 * when the ring must change size it asks the owner's allocation callback for the new ring and
 * hands the moved log back, and the owner frees the old one. */
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

/* What one attempt decided (swlog_update). */
enum swlog_verdict {
    SWLOG_DENIED = 0,  /* more than max_count attempts in the window, this one included */
    SWLOG_ALLOWED = 1, /* at most max_count: the log holds exactly the window's attempts */
};

/* One attempt for swlog_update. */
struct swlog_attempt {
    int64_t now_ms;    /* attempts at or before now_ms - period_ms leave the log first */
    int64_t period_ms; /* (0 makes now_ms the cutoff itself, as RLIMIT.LOGPUSH passes it) */
    int64_t at_ms;     /* the attempt's time: recorded at max(at_ms, newest) */
    int64_t max_count; /* >= 0 */
};

/* What swlog_update leaves. */
struct swlog_outcome {
    struct swlog *log; /* the log now: the one passed in, or the new ring from alloc */
    enum swlog_verdict verdict;
    uint32_t len;      /* attempts held after the update (the window's count when allowed) */
    int64_t newest_ms; /* the newest timestamp, the attempt's own: the key expires period after */
};

/* Memory of swlog_bytes(cap) bytes for the log to move into (never NULL; swlog_update
 * initializes it). ud is swlog_update's. */
typedef struct swlog *(*swlog_alloc_fn)(void *ud, uint32_t cap);

/* One attempt: swlog_trim, then moves the log into a ring of swlog_fit_cap slots from alloc if
 * its size must change, then swlog_record. When outcome.log differs from log the caller owns both
 * and frees the old one (or its storage); nothing is allocated otherwise. */
struct swlog_outcome swlog_update(struct swlog *log, const struct swlog_attempt *a,
                                  swlog_alloc_fn alloc, void *ud);

/* The newest timestamp, or INT64_MIN when empty. */
int64_t swlog_newest(const struct swlog *log);

/* The i-th oldest timestamp, i < len (for snapshots and tests). */
int64_t swlog_at(const struct swlog *log, uint32_t i);

#endif
