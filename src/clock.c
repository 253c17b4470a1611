/* clock.c - the wall clock, fakeable for tests.
 *
 * SPEC 2 and 3 read CLOCK_REALTIME once per command. Tests and the fuzz target freeze it instead,
 * so limiter decisions are reproducible. The fake time is one atomic shared by all threads: 0
 * means "use the real clock", which costs a relaxed load per reading in production. */
#include "rlimitd/clock.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic int64_t fake_ns;

static int64_t read_clock(clockid_t id)
{
    struct timespec ts;

    /* clock_gettime cannot fail for these clocks on Linux; a zero timespec would still be a
     * valid (if wrong) reading rather than garbage. */
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t clock_now_ns(void)
{
    int64_t f = atomic_load_explicit(&fake_ns, memory_order_relaxed);

    return f != 0 ? f : read_clock(CLOCK_REALTIME);
}

int64_t clock_mono_ns(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

void clock_set_fake(int64_t ns)
{
    atomic_store_explicit(&fake_ns, ns, memory_order_relaxed);
}

void clock_advance_fake(int64_t delta_ns)
{
    atomic_fetch_add_explicit(&fake_ns, delta_ns, memory_order_relaxed);
}
