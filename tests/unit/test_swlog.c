/* test_swlog.c - COMMANDS.md, ISALLOWED: the sliding-window log of ISALLOWED.
 *
 * attempt() spells the sequence out by hand: trim, grow the ring geometrically up to what
 * swlog_needed asks for (never past max_count + 1), then record; swlog_update, the one sequence
 * the keyspace and the module run, is checked against it at the end. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>

#include "rlimitd/swlog.h"

#define T0 1700000000000LL /* an arbitrary wall clock reading, in ms */

static struct swlog *swlog_new(uint32_t cap)
{
    struct swlog *log = malloc(swlog_bytes(cap));

    cr_assert_not_null(log);
    swlog_init(log, cap);
    return log;
}

/* Moves *log into a ring of cap slots (keeping the newest attempts). */
static void resize(struct swlog **log, uint32_t cap)
{
    struct swlog *bigger = swlog_new(cap);

    swlog_copy(bigger, *log);
    free(*log);
    *log = bigger;
}

static int attempt(struct swlog **log, int64_t now_ms, int64_t period_ms, int64_t max_count)
{
    uint32_t need;

    swlog_trim(*log, now_ms, period_ms);
    need = swlog_needed(*log, max_count);
    if (need > (*log)->cap) {
        uint32_t cap = (*log)->cap * 2 > need ? (*log)->cap * 2 : need;
        uint64_t most = (uint64_t)max_count + 1;

        resize(log, cap > most ? (uint32_t)most : cap);
    }
    return swlog_record(*log, now_ms, max_count);
}

static void expect_sorted(const struct swlog *log)
{
    uint32_t i;

    for (i = 1; i < log->len; i++)
        cr_expect_leq(swlog_at(log, i - 1), swlog_at(log, i), "not sorted at %u", i);
}

Test(swlog, empty_log)
{
    struct swlog *log = swlog_new(4);

    cr_expect_eq(log->len, 0);
    cr_expect_eq(log->cap, 4);
    cr_expect_eq(swlog_newest(log), INT64_MIN);
    cr_expect_eq(swlog_needed(log, 10), 1);
    cr_expect_eq(swlog_needed(log, 0), 1);
    cr_expect_eq(swlog_bytes(0), sizeof(struct swlog));
    cr_expect_eq(swlog_bytes(3), sizeof(struct swlog) + 3 * sizeof(int64_t));
    free(log);
}

Test(swlog, max_count_zero_always_denies)
{
    struct swlog *log = swlog_new(0);
    int i;

    for (i = 0; i < 10; i++) {
        cr_expect_eq(attempt(&log, T0 + i * 5000, 1000, 0), 0, "attempt %d", i);
        cr_expect_eq(log->len, 1);
        cr_expect_eq(log->cap, 1);
    }
    free(log);
}

Test(swlog, allows_max_count_then_denies)
{
    static const int want[6] = {1, 1, 1, 0, 0, 0};
    struct swlog *log = swlog_new(0);
    int i;

    for (i = 0; i < 6; i++)
        cr_expect_eq(attempt(&log, T0 + i, 10000, 3), want[i], "attempt %d", i);
    free(log);
}

Test(swlog, denied_attempts_count)
{
    /* max 2 per second, an attempt every 400 ms: once blocked, hammering keeps it blocked,
     * because each denied attempt stays in the window (COMMANDS.md, ISALLOWED). */
    static const struct {
        int64_t at;
        int allowed;
    } steps[] = {
        {0, 1},
        {400, 1},
        {800, 0},
        {1200, 0},
        {1600, 0},
        {2000, 0},
        {2400, 0},
        /* Quiet for a full period: the window is empty again. */
        {3400, 1},
        {3401, 1},
        {3402, 0},
    };
    struct swlog *log = swlog_new(1);
    size_t i;

    for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        cr_expect_eq(attempt(&log, T0 + steps[i].at, 1000, 2), steps[i].allowed,
                     "attempt at +%lld ms", (long long)steps[i].at);
    free(log);
}

Test(swlog, window_slides)
{
    /* Counted are attempts with timestamp > now - period: one exactly period ms old is out. */
    static const struct {
        int64_t at;
        int allowed;
        uint32_t len;
    } steps[] = {
        /* clang-format off */
        {0, 1, 1},
        {10, 1, 2},
        {1000, 1, 2}, /* the one at 0 has left */
        {1001, 0, 3},
        {2001, 1, 1}, /* 10, 1000 and 1001 have left */
        /* clang-format on */
    };
    struct swlog *log = swlog_new(1);
    size_t i;

    for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        cr_expect_eq(attempt(&log, T0 + steps[i].at, 1000, 2), steps[i].allowed,
                     "attempt at +%lld ms", (long long)steps[i].at);
        cr_expect_eq(log->len, steps[i].len, "len after +%lld ms", (long long)steps[i].at);
    }
    cr_expect_eq(swlog_newest(log), T0 + 2001);
    free(log);
}

Test(swlog, same_ms_attempts_are_distinct)
{
    struct swlog *log = swlog_new(1);

    cr_expect_eq(attempt(&log, T0, 1000, 2), 1);
    cr_expect_eq(attempt(&log, T0, 1000, 2), 1);
    cr_expect_eq(attempt(&log, T0, 1000, 2), 0);
    cr_expect_eq(log->len, 3);
    cr_expect_eq(swlog_at(log, 0), T0);
    cr_expect_eq(swlog_at(log, 2), T0);
    free(log);
}

Test(swlog, never_keeps_more_than_max_count_plus_one)
{
    struct swlog *log = swlog_new(1);
    int i, allowed = 0;

    for (i = 0; i < 1000; i++) {
        allowed += attempt(&log, T0 + i / 10, 60000, 5);
        cr_assert_leq(log->len, 6);
        cr_assert_leq(log->cap, 6);
    }
    cr_expect_eq(allowed, 5);
    cr_expect_eq(log->len, 6);
    /* The newest six are kept: attempts 994..999, at ms 99. */
    cr_expect_eq(swlog_at(log, 0), T0 + 99);
    cr_expect_eq(swlog_newest(log), T0 + 99);
    expect_sorted(log);
    free(log);
}

Test(swlog, needed_is_min_of_len_plus_one_and_max_count_plus_one)
{
    struct swlog *log = swlog_new(8);
    int i;

    for (i = 0; i < 5; i++)
        swlog_record(log, T0 + i, 100);
    cr_expect_eq(swlog_needed(log, 100), 6);
    cr_expect_eq(swlog_needed(log, 5), 6);
    cr_expect_eq(swlog_needed(log, 4), 5);
    cr_expect_eq(swlog_needed(log, 0), 1);
    cr_expect_eq(swlog_needed(log, INT64_MAX), 6);
    free(log);
}

Test(swlog, shrinking_max_count_drops_oldest)
{
    struct swlog *log = swlog_new(8);
    int i;

    for (i = 0; i < 5; i++)
        cr_expect_eq(swlog_record(log, T0 + i, 10), 1);
    /* The same key now asked with max_count 1: keep the newest one, add this attempt. */
    cr_expect_eq(swlog_record(log, T0 + 10, 1), 0);
    cr_expect_eq(log->len, 2);
    cr_expect_eq(swlog_at(log, 0), T0 + 4);
    cr_expect_eq(swlog_at(log, 1), T0 + 10);
    free(log);
}

/* A ring of cap 5 holding T0+3 .. T0+7 with its head in the middle (wrapped). */
static struct swlog *wrapped_ring(void)
{
    struct swlog *log = swlog_new(5);
    int i;

    for (i = 0; i < 8; i++)
        swlog_record(log, T0 + i, 4);
    cr_assert_eq(log->len, 5);
    cr_assert_neq(log->head, 0);
    /* A full ring uses exactly its own cap slots: each of T0+3 .. T0+7 is in ts[0..4] once. */
    for (i = 0; i < 5; i++)
        cr_assert_eq(log->ts[(log->head + i) % 5], T0 + 3 + i, "slot %d", i);
    return log;
}

Test(swlog, copy_to_smaller_ring_keeps_newest)
{
    struct swlog *src = wrapped_ring(), *dst = swlog_new(3);
    uint32_t i;

    swlog_copy(dst, src);
    cr_expect_eq(dst->len, 3);
    for (i = 0; i < 3; i++)
        cr_expect_eq(swlog_at(dst, i), T0 + 5 + i, "slot %u", i);
    /* The source is left as it was. */
    cr_expect_eq(src->len, 5);
    cr_expect_eq(swlog_at(src, 0), T0 + 3);
    free(src);
    free(dst);
}

Test(swlog, copy_to_bigger_ring_keeps_all)
{
    struct swlog *src = wrapped_ring(), *dst = swlog_new(9);
    uint32_t i;

    swlog_copy(dst, src);
    cr_expect_eq(dst->len, 5);
    for (i = 0; i < 5; i++)
        cr_expect_eq(swlog_at(dst, i), T0 + 3 + i, "slot %u", i);
    /* And the copy keeps working as a ring. */
    cr_expect_eq(swlog_record(dst, T0 + 20, 100), 1);
    cr_expect_eq(swlog_newest(dst), T0 + 20);
    cr_expect_eq(dst->len, 6);
    free(src);
    free(dst);
}

Test(swlog, copy_of_empty_log)
{
    struct swlog *src = swlog_new(2), *dst = swlog_new(2);

    swlog_copy(dst, src);
    cr_expect_eq(dst->len, 0);
    cr_expect_eq(swlog_newest(dst), INT64_MIN);
    free(src);
    free(dst);
}

Test(swlog, trim_on_wrapped_ring)
{
    struct swlog *log = wrapped_ring();

    swlog_trim(log, T0 + 12, 10); /* cutoff T0 + 2: all newer */
    cr_expect_eq(log->len, 5);
    swlog_trim(log, T0 + 13, 10); /* cutoff T0 + 3: drops exactly T0 + 3 */
    cr_expect_eq(log->len, 4);
    cr_expect_eq(swlog_at(log, 0), T0 + 4);
    swlog_trim(log, T0 + 16, 10); /* cutoff T0 + 6: keeps T0 + 7 */
    cr_expect_eq(log->len, 1);
    cr_expect_eq(swlog_at(log, 0), T0 + 7);
    swlog_trim(log, T0 + 1000, 10);
    cr_expect_eq(log->len, 0);
    cr_expect_eq(swlog_newest(log), INT64_MIN);
    /* An emptied ring is usable again. */
    cr_expect_eq(swlog_record(log, T0 + 1000, 4), 1);
    cr_expect_eq(swlog_newest(log), T0 + 1000);
    free(log);
}

Test(swlog, trim_with_huge_period_drops_nothing)
{
    struct swlog *log = swlog_new(4);

    swlog_record(log, INT64_MIN + 5, 10);
    swlog_record(log, -10, 10);
    /* -10 - INT64_MAX is below INT64_MIN: a wrapped cutoff would drop everything. */
    swlog_trim(log, -10, INT64_MAX);
    cr_expect_eq(log->len, 2);
    /* At exactly INT64_MIN the cutoff is representable and drops nothing newer. */
    swlog_trim(log, -1, INT64_MAX);
    cr_expect_eq(log->len, 2);
    swlog_trim(log, INT64_MIN + 15, 10);
    cr_expect_eq(log->len, 1);
    free(log);
}

Test(swlog, clock_going_backwards_stays_sorted)
{
    struct swlog *log = swlog_new(1);

    cr_expect_eq(attempt(&log, T0 + 1000, 1000, 3), 1);
    /* The wall clock steps back 500 ms: the attempt is recorded at the newest time. */
    cr_expect_eq(attempt(&log, T0 + 500, 1000, 3), 1);
    cr_expect_eq(attempt(&log, T0 + 200, 1000, 3), 1);
    cr_expect_eq(log->len, 3);
    cr_expect_eq(swlog_at(log, 1), T0 + 1000);
    cr_expect_eq(swlog_newest(log), T0 + 1000);
    expect_sorted(log);
    /* The clock recovers; the attempts all count as made at T0 + 1000. */
    cr_expect_eq(attempt(&log, T0 + 1500, 1000, 3), 0);
    cr_expect_eq(log->len, 4);
    /* Exactly a period later the three recorded at T0 + 1000 leave together. */
    cr_expect_eq(attempt(&log, T0 + 2000, 1000, 3), 1);
    cr_expect_eq(log->len, 2);
    cr_expect_eq(swlog_at(log, 0), T0 + 1500);
    expect_sorted(log);
    free(log);
}

Test(swlog, initial_cap_is_four_or_max_count_plus_one)
{
    cr_assert_eq(swlog_initial_cap(0), 1);
    cr_assert_eq(swlog_initial_cap(1), 2);
    cr_assert_eq(swlog_initial_cap(2), 3);
    cr_assert_eq(swlog_initial_cap(3), 4);
    cr_assert_eq(swlog_initial_cap(10), 4);
    cr_assert_eq(swlog_initial_cap(1000000), 4);
}

/* ---- swlog_update: the one attempt sequence the keyspace and the module share ---- */

struct allocs {
    unsigned calls;
    uint32_t last_cap;
};

static struct swlog *counting_alloc(void *ud, uint32_t cap)
{
    struct allocs *a = ud;
    struct swlog *log = malloc(swlog_bytes(cap));

    cr_assert_not_null(log);
    a->calls++;
    a->last_cap = cap;
    return log;
}

static struct swlog *no_alloc(void *ud, uint32_t cap)
{
    (void)ud;
    cr_assert_fail("swlog_update allocated a ring of %u slots with no size change due", cap);
    return NULL;
}

/* One attempt through swlog_update; frees the old ring when it moved, as owners do. */
static struct swlog_outcome update(struct swlog **log, int64_t now_ms, int64_t period_ms,
                                   int64_t max_count, struct allocs *a)
{
    struct swlog_attempt at = {now_ms, period_ms, now_ms, max_count};
    struct swlog_outcome out = swlog_update(*log, &at, counting_alloc, a);

    if (out.log != *log)
        free(*log);
    *log = out.log;
    return out;
}

Test(swlog_update, grows_through_the_callback_up_to_max_count_plus_one)
{
    struct allocs a = {0};
    struct swlog *log = swlog_new(swlog_initial_cap(10));
    int i;

    for (i = 0; i < 10; i++) {
        struct swlog_outcome out = update(&log, T0 + i, 1000, 10, &a);

        cr_expect_eq(out.verdict, SWLOG_ALLOWED, "attempt %d", i);
        cr_expect_eq(out.len, (uint32_t)i + 1);
        cr_expect_eq(out.newest_ms, T0 + i);
    }
    cr_expect_eq(update(&log, T0 + 10, 1000, 10, &a).verdict, SWLOG_DENIED);
    cr_expect_eq(update(&log, T0 + 11, 1000, 10, &a).len, 11, "never past max_count + 1");
    cr_expect_eq(log->cap, 11);
    cr_expect_eq(a.last_cap, 11);
    cr_expect_eq(a.calls, 2, "4 -> 8 -> 11 slots");
    free(log);
}

Test(swlog_update, no_allocation_when_the_ring_fits)
{
    struct swlog *log = swlog_new(4);
    struct swlog_attempt at = {T0, 1000, T0, 3};
    struct swlog_outcome out = swlog_update(log, &at, no_alloc, NULL);

    cr_expect_eq(out.log, log);
    cr_expect_eq(out.verdict, SWLOG_ALLOWED);
    cr_expect_eq(out.len, 1);
    free(log);
}

Test(swlog_update, shrinks_a_mostly_empty_ring_after_the_trim)
{
    struct allocs a = {0};
    struct swlog *log = swlog_new(4);
    int i;

    for (i = 0; i < 100; i++)
        update(&log, T0 + i, 1000, 1000, &a);
    cr_expect_geq(log->cap, 100);
    /* Everything but this attempt has left the window. */
    struct swlog_outcome out = update(&log, T0 + 5000, 1000, 1000, &a);
    cr_expect_eq(out.len, 1);
    cr_expect_lt(log->cap, 100);
    cr_expect_eq(swlog_at(log, 0), T0 + 5000);
    free(log);
}

Test(swlog_update, cutoff_form_with_period_zero_and_an_attempt_behind_the_clock)
{
    struct allocs a = {0};
    struct swlog *log = swlog_new(4);
    struct swlog_attempt at = {T0 - 1, 0, T0 + 50, 5};
    struct swlog_outcome out;

    update(&log, T0 + 100, 1000, 5, &a);
    /* The module's RLIMIT.LOGPUSH: trim at a cutoff, record at ts; ts behind the newest is
     * recorded at the newest. */
    out = swlog_update(log, &at, counting_alloc, &a);
    if (out.log != log)
        free(log);
    log = out.log;
    cr_expect_eq(out.len, 2);
    cr_expect_eq(out.newest_ms, T0 + 100);
    expect_sorted(log);
    free(log);
}

/* swlog_update decides as the hand-written sequence (attempt() above) on a random stream. */
Test(swlog_update, decides_as_trim_fit_record)
{
    struct allocs a = {0};
    struct swlog *x = swlog_new(4), *y = swlog_new(4);
    int64_t now = T0;
    unsigned seed = 12345;
    int i;

    for (i = 0; i < 20000; i++) {
        int64_t max_count = (int64_t)(rand_r(&seed) % 8);

        now += rand_r(&seed) % 40;
        int want = attempt(&x, now, 100, max_count);
        struct swlog_outcome out = update(&y, now, 100, max_count, &a);
        cr_assert_eq(out.verdict == SWLOG_ALLOWED, want, "seed 12345 step %d", i);
        cr_assert_eq(out.len, x->len, "seed 12345 step %d", i);
    }
    free(x);
    free(y);
}
