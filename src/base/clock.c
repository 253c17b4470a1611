/* clock.c - the wall clock, fakeable for tests.
 *
 * COMMANDS.md, CL.THROTTLE and ISALLOWED read CLOCK_REALTIME once per command. Tests and the fuzz target freeze it instead,
 * so limiter decisions are reproducible. The fake time is one atomic shared by all threads: 0
 * means "use the real clock", which costs a relaxed load per reading in production. */
#include "rlimitd/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

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

#if defined(__x86_64__)
uint64_t clock_ticks(void)
{
    return __rdtsc();
}

static double us_per_tick;
static pthread_once_t calibrate_once = PTHREAD_ONCE_INIT;
static _Atomic int calibrated; /* set (release) once us_per_tick is written */

/* Modern x86-64 timestamp counters tick at a constant rate; measure it against
 * CLOCK_MONOTONIC over 10 ms once. Only INFO and SLOWLOG durations depend on it. */
static void calibrate(void)
{
    struct timespec pause = {0, 10000000};
    int64_t t0 = read_clock(CLOCK_MONOTONIC);
    uint64_t c0 = __rdtsc();
    nanosleep(&pause, NULL);
    int64_t t1 = read_clock(CLOCK_MONOTONIC);
    uint64_t c1 = __rdtsc();
    double ticks_per_us =
        t1 > t0 && c1 > c0 ? (double)(c1 - c0) * 1000.0 / (double)(t1 - t0) : 1000.0;
    us_per_tick = 1.0 / ticks_per_us;
    atomic_store_explicit(&calibrated, 1, memory_order_release);
}

/* Every command converts its duration: after the first call this is one load and a multiply. */
int64_t clock_ticks_to_us(uint64_t ticks)
{
    if (!atomic_load_explicit(&calibrated, memory_order_acquire))
        pthread_once(&calibrate_once, calibrate);
    return (int64_t)((double)ticks * us_per_tick);
}
#else
uint64_t clock_ticks(void)
{
    return (uint64_t)read_clock(CLOCK_MONOTONIC);
}

int64_t clock_ticks_to_us(uint64_t ticks)
{
    return (int64_t)(ticks / 1000);
}
#endif

void clock_set_fake(int64_t ns)
{
    atomic_store_explicit(&fake_ns, ns, memory_order_relaxed);
}

void clock_advance_fake(int64_t delta_ns)
{
    atomic_fetch_add_explicit(&fake_ns, delta_ns, memory_order_relaxed);
}
