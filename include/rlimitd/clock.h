/* clock.h - the wall clock, fakeable for tests. */
#ifndef RLIMITD_CLOCK_H
#define RLIMITD_CLOCK_H

#include <stdint.h>

/* CLOCK_REALTIME in nanoseconds, or the fake time when one is set. */
int64_t clock_now_ns(void);

/* CLOCK_MONOTONIC in nanoseconds (durations, idle timeouts); never faked. */
int64_t clock_mono_ns(void);

/* Tests: freeze the wall clock at ns (ns > 0), or go back to the real clock (ns == 0). */
void clock_set_fake(int64_t ns);

/* Tests: move the frozen clock by delta_ns. */
void clock_advance_fake(int64_t delta_ns);

#endif
