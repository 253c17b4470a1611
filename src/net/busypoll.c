/* busypoll.c - the spin-or-sleep decision of one I/O thread (busypoll.h says why). */
#include "rlimitd/busypoll.h"

void busypoll_init(struct busypoll *bp, uint64_t spin_ns, uint64_t now, uint64_t waited)
{
    *bp = (struct busypoll){
        .spin_ns = spin_ns,
        .last_check = now,
        .win_start = now,
        .win_waited = waited,
        .backoff_ns = BUSYPOLL_BACKOFF_MIN_NS,
    };
}

void busypoll_set_spin(struct busypoll *bp, uint64_t spin_ns)
{
    bp->spin_ns = spin_ns;
}

void busypoll_before_poll(struct busypoll *bp, uint64_t now)
{
    /* Work marked since the last turn ended ran outside the poll (libuv's pending or closing
     * phase): it belongs to the turn that just ended, and must not make this poll's sleep look
     * like work. */
    if (bp->first_work != 0) {
        bp->last_work = now;
        bp->first_work = 0;
    }
    bp->turn_start = now;
}

void busypoll_work(struct busypoll *bp, uint64_t now)
{
    if (bp->first_work == 0)
        bp->first_work = now;
}

/* Ends a window: was the thread busy, and did it have to wait for its CPU while it spun? */
static void end_window(struct busypoll *bp, uint64_t now, busypoll_waited_fn waited, void *ud)
{
    uint64_t wall = now - bp->win_start;
    uint64_t w = waited(ud);
    uint64_t waited_ns = w > bp->win_waited ? w - bp->win_waited : 0;
    /* Waiting for a CPU means another task was runnable where this thread ran: if that was the
     * case while it spun, the spin was taking time someone else needed. */
    if (bp->win_spun && waited_ns * BUSYPOLL_CONTENDED_DIV > wall) {
        bp->backoff_until = now + bp->backoff_ns;
        bp->backoff_ns = bp->backoff_ns * 2 < BUSYPOLL_BACKOFF_MAX_NS ? bp->backoff_ns * 2
                                                                      : BUSYPOLL_BACKOFF_MAX_NS;
        bp->backoffs++;
    } else if (bp->win_spun) {
        bp->backoff_ns = BUSYPOLL_BACKOFF_MIN_NS;
    }
    uint64_t idle = bp->win_idle < wall ? bp->win_idle : wall;
    bp->hot = (wall - idle) * 2 >= wall;
    bp->win_start = now;
    bp->win_idle = 0;
    bp->win_waited = w;
    bp->win_spun = 0;
}

int busypoll_after_poll(struct busypoll *bp, uint64_t now, busypoll_waited_fn waited, void *ud)
{
    if (bp->turn_start != 0 && now >= bp->turn_start) {
        /* spinning still holds the decision the poll ran under: only this function sets it. */
        if (!bp->spinning) {
            /* A poll that could sleep slept until its first callback (or the whole turn). */
            uint64_t woke = bp->first_work != 0 ? bp->first_work : now;
            bp->win_idle += woke > bp->turn_start ? woke - bp->turn_start : 0;
        } else if (bp->first_work == 0 && now >= bp->last_check) {
            /* A spin that found nothing: the whole turn, loop overhead included, was idle. */
            bp->win_idle += now - bp->last_check;
        }
    }
    if (bp->first_work != 0)
        bp->last_work = now;
    bp->first_work = 0;
    bp->last_check = now;
    if (now - bp->win_start >= BUSYPOLL_WINDOW_NS)
        end_window(bp, now, waited, ud);
    bp->spinning = bp->spin_ns != 0 && bp->hot && now >= bp->backoff_until &&
                   now - bp->last_work < bp->spin_ns;
    if (bp->spinning)
        bp->win_spun = 1;
    return bp->spinning;
}
