/* thread_cpu.h - how the I/O threads use the CPUs (thread_cpu.c): busy polling around each poll
 * (DESIGN.md "Busy polling") and their scheduling class ("I/O thread scheduling"). Internal to
 * the network layer. */
#ifndef RLIMITD_THREAD_CPU_H
#define RLIMITD_THREAD_CPU_H

#include <stdint.h>

#include "server_state.h"

/* Before the I/O threads start, on the main thread (which becomes thread 0 and whose class the
 * others inherit): decides srv->spin_ok from the usable CPUs, sets io-sched-policy's class and
 * what INFO reports of it (srv->env.io_sched). */
void thread_cpu_policy(struct server *srv);
/* The busy-poll handles on the thread's loop; they never keep it alive. */
void thread_cpu_handles_init(struct io_thread *t);
/* On the I/O thread itself, before its loop runs: opens its schedstat and starts busy polling
 * if the thread may ever spin. */
void thread_cpu_start(struct io_thread *t);
/* Once the loop has ended. */
void thread_cpu_handles_close(struct io_thread *t);
/* busy-poll-us as this thread applies it: 0 if it may never spin. Caller holds conf_lock. */
uint64_t thread_cpu_spin_ns(const struct io_thread *t);

#endif
