/* busypoll.c - the spin-or-sleep decision of one I/O thread (busypoll.h says why). */
#include "rlimitd/busypoll.h"

void busypoll_init(struct busypoll *bp, uint64_t spin_ns, uint64_t now, uint64_t cpu)
{
    *bp = (struct busypoll){.spin_ns = spin_ns, .win_start = now, .win_cpu = cpu};
}

void busypoll_set_spin(struct busypoll *bp, uint64_t spin_ns)
{
    bp->spin_ns = spin_ns;
}

void busypoll_before_poll(struct busypoll *bp, uint64_t now)
{
    bp->turn_start = now;
    bp->turn_spinning = bp->spinning;
}

void busypoll_work(struct busypoll *bp, uint64_t now)
{
    if (bp->first_work == 0)
        bp->first_work = now;
}

/* Ends a window: was the thread busy, and did spinning get the CPU it was meant to? */
static void end_window(struct busypoll *bp, uint64_t now, busypoll_cpu_fn cpu_now)
{
    uint64_t wall = now - bp->win_start;
    uint64_t cpu = cpu_now();
    uint64_t used = cpu > bp->win_cpu ? cpu - bp->win_cpu : 0;
    /* Outside its sleeps a thread wants the CPU all the time; if it got less than 80% of that
     * while it spun, something else was runnable on its CPU and waited for the spinner. */
    uint64_t wanted = wall > bp->win_sleep ? wall - bp->win_sleep : 0;
    if (bp->win_spun && used * 10 < wanted * 8) {
        bp->backoff_until = now + BUSYPOLL_BACKOFF_NS;
        bp->backoffs++;
    }
    uint64_t idle = bp->win_idle < wall ? bp->win_idle : wall;
    bp->hot = (wall - idle) * 2 >= wall;
    bp->win_start = now;
    bp->win_sleep = bp->win_idle = 0;
    bp->win_cpu = cpu;
    bp->win_spun = 0;
}

int busypoll_after_poll(struct busypoll *bp, uint64_t now, busypoll_cpu_fn cpu_now)
{
    if (bp->turn_start != 0 && now >= bp->turn_start) {
        if (!bp->turn_spinning) {
            /* A poll that could sleep slept until its first callback (or the whole turn). */
            uint64_t woke = bp->first_work != 0 ? bp->first_work : now;
            uint64_t slept = woke > bp->turn_start ? woke - bp->turn_start : 0;
            bp->win_sleep += slept;
            bp->win_idle += slept;
        } else if (bp->first_work == 0) {
            bp->win_idle += now - bp->turn_start; /* a spin that found nothing */
        }
    }
    if (bp->first_work != 0)
        bp->last_work = now;
    bp->first_work = 0;
    if (now - bp->win_start >= BUSYPOLL_WINDOW_NS)
        end_window(bp, now, cpu_now);
    bp->spinning = bp->spin_ns != 0 && bp->hot && now >= bp->backoff_until &&
                   now - bp->last_work < bp->spin_ns;
    if (bp->spinning)
        bp->win_spun = 1;
    return bp->spinning;
}
