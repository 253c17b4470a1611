/* busypoll.h - when an I/O thread should poll its sockets without sleeping (DESIGN.md "Busy
 * polling").
 *
 * A loop that sleeps in epoll_wait as soon as it runs out of work has to be woken by the next
 * request, and the wake-up is paid by whoever sends it: in the client's send(), as an IPI to this
 * CPU. Under load those wake-ups cost more than the requests. So while a thread is busy (at least
 * half of the last window spent working) it keeps polling with a zero timeout for up to `spin_ns`
 * after its last work, and sleeps as before once that passes. Idle or lightly loaded threads
 * never spin, and a thread that had to wait for its CPU while it spun (other tasks were runnable
 * on it) stops spinning for a while, so a spinner never keeps starving the clients or another
 * I/O thread on a small machine.
 *
 * Pure bookkeeping on numbers the caller passes in (nanoseconds: a monotonic clock and the
 * thread's cumulative run-queue wait), so the policy is tested without a loop, a clock or a
 * scheduler (tests/unit/test_busypoll.c). */
#ifndef RLIMITD_BUSYPOLL_H
#define RLIMITD_BUSYPOLL_H

#include <stdint.h>

/* Utilization is judged over windows this long. */
#define BUSYPOLL_WINDOW_NS 10000000ull
/* After contention is seen, no spinning for a while: 20 ms the first time, doubling each time
 * the next attempt finds the CPU contended again, up to 1 s; one uncontended window of spinning
 * resets it. A passing burst of other work costs little spinning; a CPU that stays contended
 * (two I/O threads and the clients on two CPUs) is tried for one window a second. */
#define BUSYPOLL_BACKOFF_MIN_NS 20000000ull
#define BUSYPOLL_BACKOFF_MAX_NS 1000000000ull
/* Contention: a window in which the thread spun and waited for its CPU over 1/5 of the time. */
#define BUSYPOLL_CONTENDED_DIV 5

struct busypoll {
    uint64_t spin_ns; /* 0 = never spin */
    /* the current loop turn */
    uint64_t turn_start; /* just before the poll */
    uint64_t first_work; /* first client callback of the turn; 0 = none yet */
    uint64_t last_work;  /* end of the last turn that did client work */
    uint64_t last_check; /* end of the previous turn */
    /* the current window */
    uint64_t win_start;
    uint64_t win_idle;   /* asleep in the poll, or spinning without finding work */
    uint64_t win_waited; /* the thread's run-queue wait counter at win_start */
    int win_spun;
    /* decisions */
    int hot;                /* the last window was busy enough to spin */
    uint64_t backoff_until; /* no spinning before this */
    uint64_t backoff_ns;    /* the next backoff's length */
    int spinning;           /* the next poll has a zero timeout */
    uint64_t backoffs;      /* times contention stopped spinning (INFO) */
};

/* The calling thread's cumulative time spent runnable but waiting for a CPU, in ns (Linux:
 * /proc/thread-self/schedstat, second field). Called once per window. */
typedef uint64_t (*busypoll_waited_fn)(void *ud);

/* waited: the thread's run-queue wait counter now. */
void busypoll_init(struct busypoll *bp, uint64_t spin_ns, uint64_t now, uint64_t waited);

/* A new spin limit (CONFIG SET busy-poll-us); 0 stops spinning at the next turn. */
void busypoll_set_spin(struct busypoll *bp, uint64_t spin_ns);

/* Just before the loop polls. */
void busypoll_before_poll(struct busypoll *bp, uint64_t now);

/* A client callback (read, write completion, accept) ran. Cheap to call often: only the first
 * call of a turn needs the time, so callers test busypoll_turn_has_work first. Work done outside
 * the poll phase (a write completing in libuv's pending or closing phase) counts as work of the
 * turn it happened in, not as part of the next poll's sleep. */
static inline int busypoll_turn_has_work(const struct busypoll *bp)
{
    return bp->first_work != 0;
}
void busypoll_work(struct busypoll *bp, uint64_t now);

/* After the poll's callbacks. Returns 1 if the next poll should not sleep. */
int busypoll_after_poll(struct busypoll *bp, uint64_t now, busypoll_waited_fn waited, void *ud);

#endif
