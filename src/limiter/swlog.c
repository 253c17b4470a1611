/* swlog.c - the sliding-window log of ISALLOWED (COMMANDS.md, ISALLOWED).
 *
 * The Redis recipe keeps every attempt of the last period in a sorted set. Here the attempts are a
 * ring of ms timestamps in ascending order: new attempts go at the tail, expired ones leave at the
 * head, and since the ring is sorted the expired prefix is found by binary search. Only the newest
 * max_count + 1 attempts can change a decision (once there are max_count + 1 in the window the
 * answer is "no" whatever came before), so no more are kept and the counting is bounded too. */
#include "rlimitd/swlog.h"

#include <assert.h>
#include <string.h>

size_t swlog_bytes(uint32_t cap)
{
    return sizeof(struct swlog) + (size_t)cap * sizeof(int64_t);
}

void swlog_init(struct swlog *log, uint32_t cap)
{
    log->cap = cap;
    log->len = 0;
    log->head = 0;
    log->pad_ = 0;
}

/* Ring slot of the i-th oldest attempt (i <= len, the slot after the newest when i == len).
 * head < cap and i <= cap, so the sum fits in 64 bits even when it does not in 32. */
static uint32_t slot(const struct swlog *log, uint32_t i)
{
    uint64_t s = (uint64_t)log->head + i;

    return (uint32_t)(s >= log->cap ? s - log->cap : s);
}

static void drop_oldest(struct swlog *log, uint32_t n)
{
    assert(n <= log->len);
    log->head = slot(log, n);
    log->len -= n;
    if (log->len == 0)
        log->head = 0;
}

int64_t swlog_at(const struct swlog *log, uint32_t i)
{
    assert(i < log->len);
    return log->ts[slot(log, i)];
}

int64_t swlog_newest(const struct swlog *log)
{
    return log->len ? swlog_at(log, log->len - 1) : INT64_MIN;
}

void swlog_trim(struct swlog *log, int64_t now_ms, int64_t period_ms)
{
    int64_t cutoff;
    uint32_t lo = 0, hi = log->len;

    /* COMMANDS.md, ISALLOWED counts timestamps > now - period; those at or before the cutoff are gone for good.
     * A cutoff below INT64_MIN cannot drop anything. */
    if (__builtin_sub_overflow(now_ms, period_ms, &cutoff))
        return;
    /* First index whose timestamp is after the cutoff: everything before it is expired. */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (swlog_at(log, mid) <= cutoff)
            lo = mid + 1;
        else
            hi = mid;
    }
    drop_oldest(log, lo);
}

uint32_t swlog_needed(const struct swlog *log, int64_t max_count)
{
    uint64_t grow = (uint64_t)log->len + 1;
    uint64_t most = (uint64_t)max_count + 1;
    uint64_t want = grow < most ? grow : most;

    assert(max_count >= 0);
    return want > UINT32_MAX ? UINT32_MAX : (uint32_t)want;
}

void swlog_copy(struct swlog *dst, const struct swlog *src)
{
    uint32_t n = src->len < dst->cap ? src->len : dst->cap;
    uint32_t skip = src->len - n;
    uint32_t i;

    assert(dst->len == 0);
    for (i = 0; i < n; i++)
        dst->ts[i] = swlog_at(src, skip + i);
    dst->head = 0;
    dst->len = n;
}

int swlog_record(struct swlog *log, int64_t now_ms, int64_t max_count)
{
    int64_t newest = swlog_newest(log);
    int64_t at = now_ms > newest ? now_ms : newest;

    assert(max_count >= 0);
    /* Make room: keep at most max_count older attempts, so that with this one the log never
     * holds more than max_count + 1 (COMMANDS.md, ISALLOWED). max_count may have shrunk since the last call. */
    if ((uint64_t)log->len > (uint64_t)max_count)
        drop_oldest(log, log->len - (uint32_t)max_count);
    assert(log->len < log->cap);
    /* Recording at max(now, newest) keeps the ring sorted if the wall clock steps back. Every
     * attempt is recorded, denied ones too, and two in the same millisecond are two entries. */
    log->ts[slot(log, log->len)] = at;
    log->len++;
    return (uint64_t)log->len <= (uint64_t)max_count;
}

/* Geometric growth keeps the copies amortized O(1) per attempt; the max_count + 1 ceiling is
 * ISALLOWED's bound (COMMANDS.md); shrinking only below a quarter full avoids copying back and forth. */
uint32_t swlog_fit_cap(uint32_t cap, uint32_t needed, int64_t max_count)
{
    uint64_t ceiling = (uint64_t)max_count + 1;
    if (needed > cap) {
        uint64_t grown = (uint64_t)cap * 2;
        if (grown < needed)
            grown = needed;
        if (grown > ceiling)
            grown = ceiling;
        return (uint32_t)grown;
    }
    if (cap > ceiling || (cap > 8 && needed < cap / 4)) {
        uint64_t shrunk = (uint64_t)needed * 2;
        if (shrunk < 4)
            shrunk = 4;
        if (shrunk > ceiling)
            shrunk = ceiling;
        if (shrunk < needed)
            shrunk = needed;
        return (uint32_t)shrunk;
    }
    return cap;
}

uint32_t swlog_initial_cap(int64_t max_count)
{
    /* Most limits see a few attempts per key; growing from 4 costs few copies (swlog_fit_cap
     * doubles) and wastes little on keys that never get more. */
    assert(max_count >= 0);
    return max_count + 1 < 4 ? (uint32_t)(max_count + 1) : 4;
}

struct swlog_outcome swlog_update(struct swlog *log, const struct swlog_attempt *a,
                                  swlog_alloc_fn alloc, void *ud)
{
    struct swlog_outcome out;
    uint32_t cap;

    swlog_trim(log, a->now_ms, a->period_ms);
    cap = swlog_fit_cap(log->cap, swlog_needed(log, a->max_count), a->max_count);
    if (cap != log->cap) {
        struct swlog *to = alloc(ud, cap);

        swlog_init(to, cap);
        swlog_copy(to, log);
        log = to;
    }
    out.verdict = swlog_record(log, a->at_ms, a->max_count) ? SWLOG_ALLOWED : SWLOG_DENIED;
    out.log = log;
    out.len = log->len;
    out.newest_ms = swlog_newest(log);
    return out;
}
