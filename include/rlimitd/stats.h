/* stats.h - counters for INFO. One struct stats per I/O thread, written only by that thread with
 * relaxed atomics (no lock, no shared cache line on the hot path), summed by INFO. */
#ifndef RLIMITD_STATS_H
#define RLIMITD_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#define STATS_MAX_CMDS 192

/* Error reply prefixes counted as errorstat_<code>. */
enum stats_err { ERRSTAT_ERR = 0, ERRSTAT_WRONGTYPE, ERRSTAT_NOAUTH, ERRSTAT_WRONGPASS,
                 ERRSTAT_OOM, ERRSTAT_NOPROTO, ERRSTAT_EXECABORT, ERRSTAT_OTHER, ERRSTAT_COUNT };

/* The limiters whose decisions INFO limiter and /metrics count. */
enum stats_lim { LIM_THROTTLE = 0, LIM_GCRA, LIM_ISALLOWED, LIM_THROTTLE_ALL, LIM_LEASE,
                 LIM_COUNT };

struct cmd_stats {
    _Atomic uint64_t calls;
    _Atomic uint64_t usec;
    _Atomic uint64_t rejected_calls; /* refused before running: arity, auth, OOM */
    _Atomic uint64_t failed_calls;   /* ran and answered an error */
};

struct stats {
    _Atomic uint64_t commands;
    _Atomic uint64_t connections;       /* accepted */
    _Atomic uint64_t rejected_conns;    /* maxclients */
    _Atomic uint64_t net_input_bytes;
    _Atomic uint64_t net_output_bytes;
    _Atomic uint64_t expired_keys;
    _Atomic uint64_t evicted_keys;      /* deleted by maxmemory-policy (ks_evict) */
    _Atomic uint64_t dirty;             /* successful write commands, for snapshots */
    _Atomic uint64_t busy_poll_spins;   /* times the loop started polling without sleeping */
    _Atomic uint64_t busy_poll_backoffs; /* ... and stopped because its CPU was contended */
    _Atomic uint64_t clients_mem;       /* bytes the thread's connections hold (CLIENT LIST
                                           tot-mem summed; deltas wrap as uint64) */
    _Atomic uint64_t clients_freed;     /* bytes of closed connections, ever (memory return) */
    _Atomic uint64_t clients_out_mem;   /* bytes of those the replies not yet sent hold (each
                                           connection's reply buffer and pending write; part of
                                           clients_mem; deltas wrap as uint64) */
    _Atomic uint64_t errors[ERRSTAT_COUNT];
    _Atomic uint64_t lim_allowed[LIM_COUNT]; /* limiter decisions (cmd_limiter.c) */
    _Atomic uint64_t lim_limited[LIM_COUNT];
    _Atomic uint64_t near_limit;             /* allowed with at most 10% of the capacity left */
    struct cmd_stats cmd[STATS_MAX_CMDS];
};

/* Single-writer increment: load + store, no locked instruction. */
static inline void stats_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline uint64_t stats_get(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* Classifies an error reply "-CODE ..." for errorstat. */
enum stats_err stats_err_of(const char *msg);
const char *stats_err_name(enum stats_err e);

#endif
