/* stats.h - counters for INFO. One struct stats per I/O thread, written only by that thread with
 * relaxed atomics (no lock, no shared cache line on the hot path), summed by INFO. */
#ifndef RLIMITD_STATS_H
#define RLIMITD_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_MAX_CMDS 192

/* Error codes counted as errorstat_<code> per thread, without a lock: the codes rlimitd itself
 * answers. Any other code (a script's redis.error_reply('MY_CODE ...')) is counted under
 * ERRSTAT_OTHER here, for total_error_replies, and by its name in the shared table of
 * src/cmd/cmd_stats.c. */
enum stats_err { ERRSTAT_ERR = 0, ERRSTAT_WRONGTYPE, ERRSTAT_NOAUTH, ERRSTAT_WRONGPASS,
                 ERRSTAT_OOM, ERRSTAT_NOPROTO, ERRSTAT_EXECABORT, ERRSTAT_NOSCRIPT,
                 ERRSTAT_BUSY, ERRSTAT_NOTBUSY, ERRSTAT_UNKILLABLE, ERRSTAT_OTHER,
                 ERRSTAT_COUNT };
/* The longest code Redis's rule can find (stats_err_code): 30 bytes. */
#define STATS_ERR_CODE_MAX 30

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

/* The code of the error reply at reply[0..n) ("-CODE message\r\n"), by Redis 7.0's rule
 * (afterErrorReply): the bytes after '-' up to the first space within the line's first 32
 * bytes; ERR when that window has no space. Returns the code's enum; for ERRSTAT_OTHER, *code
 * and *len are the code's bytes inside reply (at most STATS_ERR_CODE_MAX). */
enum stats_err stats_err_code(const char *reply, size_t n, const char **code, size_t *len);
const char *stats_err_name(enum stats_err e);

#endif
