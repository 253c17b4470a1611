/* clock.h - the wall clock, fakeable for tests. */
#ifndef RLIMITD_CLOCK_H
#define RLIMITD_CLOCK_H

#include <stdint.h>

/* Every time in rlimitd is int64 nanoseconds; these convert to the units commands speak. */
#define CLOCK_NS_PER_MS 1000000LL
#define CLOCK_NS_PER_SEC 1000000000LL

/* CLOCK_REALTIME in nanoseconds, or the fake time when one is set. */
int64_t clock_now_ns(void);

/* CLOCK_MONOTONIC in nanoseconds (durations, idle timeouts); never faked. */
int64_t clock_mono_ns(void);

/* A cheap, monotonic tick counter for measuring short durations (command times for INFO
 * commandstats and SLOWLOG) without a second clock read per command: the CPU's timestamp
 * counter on x86-64, CLOCK_MONOTONIC nanoseconds elsewhere. */
uint64_t clock_ticks(void);
/* Converts a difference of clock_ticks() to microseconds (calibrated once, on first use). */
int64_t clock_ticks_to_us(uint64_t ticks);

/* Tests: freeze the wall clock at ns (ns > 0), or go back to the real clock (ns == 0). */
void clock_set_fake(int64_t ns);

/* Tests: move the frozen clock by delta_ns. */
void clock_advance_fake(int64_t delta_ns);

#endif
