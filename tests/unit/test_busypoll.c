/* test_busypoll.c - the spin-or-sleep policy of an I/O thread (busypoll.c), driven by a
 * simulated loop: requests arrive at set gaps, each turn works a set time, and while the thread
 * is not asleep it gets a set share of a CPU, waiting in the run queue for the rest (1.0 = a CPU
 * of its own). */
#include <criterion/criterion.h>

#include <stdint.h>

#include "rlimitd/busypoll.h"

#define US 1000ull
#define MS 1000000ull

static uint64_t now;       /* simulated monotonic clock */
static uint64_t waited;    /* simulated run-queue wait of the thread */
static double share = 1.0; /* CPU time the thread gets per ns it wants to run */

static uint64_t waited_now(void *ud)
{
    (void)ud;
    return waited;
}

static void run(uint64_t ns)
{
    now += ns;
    waited += (uint64_t)((double)ns * (1.0 - share));
}

static struct busypoll bp;
static uint64_t turns, spin_turns; /* turns that did work, and those entered spinning */

static void setup(uint64_t spin_ns)
{
    now = 1 * MS;
    waited = 0;
    share = 1.0;
    turns = spin_turns = 0;
    busypoll_init(&bp, spin_ns, now, waited);
}

/* One request arriving `gap` after the last turn ended, answered in `work`. A sleeping loop
 * sleeps through the gap; a spinning one turns every microsecond until the request is there,
 * and sleeps from the moment its spin ends. */
static void request(uint64_t gap, uint64_t work)
{
    uint64_t arrival = now + gap;
    while (bp.spinning && now + 1 * US < arrival) {
        busypoll_before_poll(&bp, now);
        run(1 * US);
        busypoll_after_poll(&bp, now, waited_now, NULL);
    }
    int spun = bp.spinning;
    busypoll_before_poll(&bp, now);
    if (now < arrival) {
        if (bp.spinning)
            run(arrival - now);
        else
            now = arrival; /* asleep: no CPU */
    }
    busypoll_work(&bp, now);
    cr_assert(busypoll_turn_has_work(&bp));
    run(work);
    busypoll_after_poll(&bp, now, waited_now, NULL);
    cr_assert_not(busypoll_turn_has_work(&bp), "the turn's work mark is reset");
    turns++;
    spin_turns += spun;
}

static void load(uint64_t duration, uint64_t gap, uint64_t work)
{
    uint64_t end = now + duration;
    while (now < end)
        request(gap, work);
}

Test(busypoll, light_load_never_spins)
{
    setup(50 * US);
    load(1000 * MS, 1 * MS, 5 * US);
    cr_assert_eq(spin_turns, 0);
    cr_assert_eq(bp.spinning, 0);
}

Test(busypoll, moderate_load_under_half_busy_never_spins)
{
    setup(50 * US);
    load(200 * MS, 14 * US, 5 * US); /* 26% busy */
    cr_assert_eq(spin_turns, 0);
}

Test(busypoll, busy_thread_spins_after_one_window)
{
    setup(50 * US);
    load(BUSYPOLL_WINDOW_NS - 1 * MS, 3 * US, 5 * US); /* 62% busy */
    cr_assert_eq(spin_turns, 0, "spun before a window had shown the thread busy");
    load(2 * MS, 3 * US, 5 * US);
    turns = spin_turns = 0;
    load(50 * MS, 3 * US, 5 * US);
    cr_assert_gt(spin_turns * 100, turns * 99, "spun in %llu of %llu turns",
                 (unsigned long long)spin_turns, (unsigned long long)turns);
    cr_assert_eq(bp.backoffs, 0);
}

Test(busypoll, spinning_ends_spin_ns_after_the_last_work)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    uint64_t last = now;
    while (bp.spinning) {
        busypoll_before_poll(&bp, now);
        run(1 * US);
        busypoll_after_poll(&bp, now, waited_now, NULL);
        cr_assert_leq(now - last, 50 * US + 1 * US);
    }
    cr_assert_geq(now - last, 49 * US, "spun only %llu ns", (unsigned long long)(now - last));
}

Test(busypoll, gaps_longer_than_the_spin_limit_sleep)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    /* A request after a 200 us pause: the spin gave up after 50 us and the loop slept. */
    uint64_t t0 = now;
    int spins = 0;
    while (bp.spinning) {
        busypoll_before_poll(&bp, now);
        run(1 * US);
        busypoll_after_poll(&bp, now, waited_now, NULL);
        spins++;
    }
    cr_assert_leq(now - t0, 51 * US, "spun %d turns, %llu ns", spins,
                  (unsigned long long)(now - t0));
    request(200 * US - (now - t0), 5 * US);
    cr_assert_eq(bp.spinning, 1, "the answered request starts a new spin");
}

Test(busypoll, zero_spin_limit_never_spins)
{
    setup(0);
    load(100 * MS, 1 * US, 5 * US);
    cr_assert_eq(spin_turns, 0);
}

Test(busypoll, set_spin_zero_stops_at_the_next_turn)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    busypoll_set_spin(&bp, 0);
    request(3 * US, 5 * US);
    cr_assert_eq(bp.spinning, 0);
    busypoll_set_spin(&bp, 50 * US);
    request(3 * US, 5 * US);
    cr_assert_eq(bp.spinning, 1);
}

/* Fraction of the turns in `duration` that started while spinning, in percent. */
static uint64_t spin_percent(uint64_t duration)
{
    turns = spin_turns = 0;
    load(duration, 3 * US, 5 * US);
    return spin_turns * 100 / turns;
}

Test(busypoll, a_passing_contention_backs_off_briefly)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    share = 0.5; /* another task shares this CPU for one window */
    load(BUSYPOLL_WINDOW_NS, 3 * US, 5 * US);
    share = 1.0;
    load(BUSYPOLL_WINDOW_NS, 3 * US, 5 * US);
    cr_assert_eq(bp.backoffs, 1);
    /* Back to spinning after the shortest backoff, and the next backoff is short again. */
    load(BUSYPOLL_BACKOFF_MIN_NS + BUSYPOLL_WINDOW_NS, 3 * US, 5 * US);
    uint64_t pct = spin_percent(30 * MS);
    cr_assert_geq(pct, 99, "spun in %llu%% of the turns", (unsigned long long)pct);
    cr_assert_eq(bp.backoffs, 1);
    cr_assert_eq(bp.backoff_ns, BUSYPOLL_BACKOFF_MIN_NS);
}

Test(busypoll, lasting_contention_backs_off_up_to_a_second)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    share = 0.5; /* for good */
    load(2000 * MS, 3 * US, 5 * US);
    cr_assert_eq(bp.backoff_ns, BUSYPOLL_BACKOFF_MAX_NS);
    /* From now on one window of spinning a second, at most. */
    uint64_t pct = spin_percent(3000 * MS);
    cr_assert_leq(pct, 2, "spun in %llu%% of the turns", (unsigned long long)pct);
    cr_assert_gt(pct, 0, "never tried again");
    /* The CPU is free again: within a backoff and a window, spinning resumes and stays. */
    share = 1.0;
    load(BUSYPOLL_BACKOFF_MAX_NS + 2 * BUSYPOLL_WINDOW_NS, 3 * US, 5 * US);
    uint64_t before = bp.backoffs;
    pct = spin_percent(50 * MS);
    cr_assert_geq(pct, 99, "spun in %llu%% of the turns", (unsigned long long)pct);
    cr_assert_eq(bp.backoffs, before);
}

Test(busypoll, contention_never_backs_off_a_thread_that_did_not_spin)
{
    setup(50 * US);
    share = 0.5;
    load(200 * MS, 14 * US, 5 * US); /* not busy enough to spin at all */
    cr_assert_eq(spin_turns, 0);
    cr_assert_eq(bp.backoffs, 0);
}

/* A write completing in libuv's pending or closing phase marks work before the next poll; that
 * poll's sleep must still count as sleep, or an idle thread would look busy and spin. */
Test(busypoll, work_marked_outside_the_poll_does_not_turn_a_sleep_into_work)
{
    setup(50 * US);
    for (int i = 0; i < 100; i++) {
        busypoll_work(&bp, now); /* a write completion in the closing phase */
        run(1 * US);
        busypoll_before_poll(&bp, now);
        now += 1 * MS; /* asleep */
        cr_assert_eq(busypoll_after_poll(&bp, now, waited_now, NULL), 0);
    }
    cr_assert_eq(bp.hot, 0);
    cr_assert_eq(bp.backoffs, 0);
}

/* Loop overhead between turns (timers, libuv's own phases) counts as idle while spinning, so a
 * thread at 40% busy does not keep itself spinning by the cost of the spin. */
Test(busypoll, spin_overhead_is_not_counted_as_work)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    /* 40% busy from now on: 4 us of work every 10 us, with 1 us of loop overhead per spin turn
     * spent outside prepare..check. */
    uint64_t end = now + 5 * BUSYPOLL_WINDOW_NS;
    while (now < end) {
        uint64_t arrival = now + 6 * US;
        while (bp.spinning && now < arrival) {
            run(1 * US); /* overhead before prepare */
            busypoll_before_poll(&bp, now);
            busypoll_after_poll(&bp, now, waited_now, NULL);
        }
        if (now < arrival)
            now = arrival;
        busypoll_before_poll(&bp, now);
        busypoll_work(&bp, now);
        run(4 * US);
        busypoll_after_poll(&bp, now, waited_now, NULL);
    }
    cr_assert_eq(bp.hot, 0, "a 40%% busy thread judged hot");
    cr_assert_eq(bp.spinning, 0);
}

Test(busypoll, lowering_the_spin_limit_mid_spin_applies_at_once)
{
    setup(50 * US);
    load(30 * MS, 3 * US, 5 * US);
    cr_assert(bp.spinning);
    busypoll_set_spin(&bp, 5 * US);
    uint64_t t0 = now;
    while (bp.spinning) {
        busypoll_before_poll(&bp, now);
        run(1 * US);
        busypoll_after_poll(&bp, now, waited_now, NULL);
    }
    cr_assert_leq(now - t0, 6 * US);
}
