/* thread_cpu.c - how the I/O threads use the CPUs: each thread's busy-poll handles around its
 * poll, fed to busypoll.c's bookkeeping with the thread's run-queue wait (DESIGN.md "Busy
 * polling"), and the threads' scheduling class (io-sched-policy, "I/O thread scheduling"). */
#include "thread_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rlimitd/log.h"

/* The thread's cumulative run-queue wait in ns: the second field of its schedstat. */
static uint64_t thread_waited_ns(void *ud)
{
    struct io_thread *t = ud;
    char buf[96];
    ssize_t n = pread(t->schedstat_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long run_ns = 0, wait_ns = 0;
    if (sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2)
        return 0;
    return wait_ns;
}

/* Whether this thread may ever spin: not when it cannot see its run-queue wait, since it could
 * then not tell when spinning takes a CPU from someone else, nor when the I/O threads are as
 * many as the CPUs (srv->spin_ok). */
static int thread_may_spin(const struct io_thread *t)
{
    return t->schedstat_fd >= 0 && t->srv->spin_ok;
}

uint64_t thread_cpu_spin_ns(const struct io_thread *t)
{
    return thread_may_spin(t) ? (uint64_t)t->srv->conf->busy_poll_us * 1000 : 0;
}

/* The CPUs this process may run on, as taskset and cgroups set them. */
static int usable_cpus(void)
{
    cpu_set_t set;
    int ncpu = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        ncpu = CPU_COUNT(&set);
    if (ncpu <= 0)
        ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return ncpu > 0 ? ncpu : 1;
}

/* Spinning threads need a CPU to spare for everything else (the clients on this machine, the
 * kernel's network work, a background save): with as many I/O threads as CPUs, spinning only
 * competes with them for the CPUs the work needs (threads 2 on 2 CPUs loses throughput to it). */
static int spin_allowed(int nthreads, int ncpu)
{
    if (nthreads < ncpu)
        return 1;
    log_notice("Busy polling is off: %d I/O thread%s on %d CPU%s leave none to spare", nthreads,
               nthreads == 1 ? "" : "s", ncpu, ncpu == 1 ? "" : "s");
    return 0;
}

/* INFO's name for a scheduling class, as io-sched-policy and chrt(1) spell them. */
static const char *sched_class_name(int policy)
{
    switch (policy) {
    case SCHED_OTHER:
        return "normal";
    case SCHED_BATCH:
        return "batch";
    case SCHED_IDLE:
        return "idle";
    case SCHED_FIFO:
        return "fifo";
    case SCHED_RR:
        return "rr";
    default:
        return "other";
    }
}

/* io-sched-policy. Where busy polling is off for want of a spare CPU (auto's test: srv->spin_ok,
 * so call after spin_allowed) the threads mostly share CPUs with each other and with the
 * clients' processes, and a thread woken by a request preempting the one running only trades one
 * busy task for another, at the cost of a context switch and the cache. SCHED_BATCH keeps the
 * time-sharing and the nice level but drops that wake-up preemption (sched(7)): a woken thread
 * still takes an idle CPU at once, and otherwise runs at the next tick or when the running task
 * sleeps. With as many I/O threads as CPUs every wake-up would otherwise preempt another I/O
 * thread or the clients: more context switches per request and a worse p99. Set on the main
 * thread before the other I/O threads start, which inherit it (pthread_create's default
 * PTHREAD_INHERIT_SCHED). */
static void set_io_sched(struct server *srv, int ncpu)
{
    int64_t policy = srv->conf->io_sched_policy;
    int batch = policy == IO_SCHED_BATCH || (policy == IO_SCHED_AUTO && !srv->spin_ok);
    struct sched_param sp = {0};
    int err = batch ? pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp) : 0;
    if (err != 0)
        log_warning("Could not run the I/O threads as SCHED_BATCH: %s", strerror(err));
    else if (batch)
        log_notice("I/O threads run as SCHED_BATCH: %d on %d CPU%s, a woken thread does not "
                   "preempt a running one (io-sched-policy %s)",
                   srv->nthreads, ncpu, ncpu == 1 ? "" : "s",
                   policy == IO_SCHED_AUTO ? "auto" : "batch");
    /* What INFO reports is the class the threads have: without batch they keep the one the
     * daemon was started with (chrt, systemd's CPUSchedulingPolicy=), normally SCHED_OTHER. */
    srv->env.io_sched = sched_class_name(sched_getscheduler(0));
}

static void on_before_poll(uv_prepare_t *h)
{
    struct io_thread *t = h->data;
    busypoll_before_poll(&t->busypoll, uv_hrtime());
}

/* Nothing to do: while this handle is started, libuv polls with a zero timeout. */
static void on_spin(uv_idle_t *h)
{
    (void)h;
}

static void on_after_poll(uv_check_t *h)
{
    struct io_thread *t = h->data;
    int was = t->busypoll.spinning;
    uint64_t backoffs = t->busypoll.backoffs;
    int spin = busypoll_after_poll(&t->busypoll, uv_hrtime(), thread_waited_ns, t);
    if (spin && !was) {
        uv_idle_start(&t->spin, on_spin);
        stats_add(&t->stats.busy_poll_spins, 1);
    } else if (!spin && was) {
        uv_idle_stop(&t->spin);
    }
    if (t->busypoll.backoffs != backoffs)
        stats_add(&t->stats.busy_poll_backoffs, 1);
}

/* Runs on the I/O thread itself: /proc/thread-self names the thread that opens it. */
void thread_cpu_start(struct io_thread *t)
{
    struct server *srv = t->srv;
    t->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (t->schedstat_fd < 0 && t->index == 0)
        log_notice("Busy polling is off: /proc/thread-self/schedstat: %s", strerror(errno));
    pthread_mutex_lock(&srv->env.conf_lock);
    uint64_t spin_ns = thread_cpu_spin_ns(t);
    pthread_mutex_unlock(&srv->env.conf_lock);
    busypoll_init(&t->busypoll, spin_ns, uv_hrtime(),
                  t->schedstat_fd >= 0 ? thread_waited_ns(t) : 0);
    /* A thread that may never spin keeps the plain loop: no bookkeeping around each poll. */
    if (!thread_may_spin(t))
        return;
    uv_prepare_start(&t->before_poll, on_before_poll);
    uv_check_start(&t->after_poll, on_after_poll);
}

/* The busy-poll handles never keep a loop alive (clients, listeners and timers do), and are
 * closed once the loop has ended. They start with the thread (thread_cpu_start). */
void thread_cpu_handles_init(struct io_thread *t)
{
    t->schedstat_fd = -1;
    uv_prepare_init(&t->loop, &t->before_poll);
    uv_check_init(&t->loop, &t->after_poll);
    uv_idle_init(&t->loop, &t->spin);
    t->before_poll.data = t->after_poll.data = t->spin.data = t;
    uv_unref((uv_handle_t *)&t->before_poll);
    uv_unref((uv_handle_t *)&t->after_poll);
    uv_unref((uv_handle_t *)&t->spin);
}

void thread_cpu_handles_close(struct io_thread *t)
{
    if (t->schedstat_fd >= 0)
        close(t->schedstat_fd);
    t->schedstat_fd = -1;
    uv_close((uv_handle_t *)&t->before_poll, NULL);
    uv_close((uv_handle_t *)&t->after_poll, NULL);
    uv_close((uv_handle_t *)&t->spin, NULL);
}

void thread_cpu_policy(struct server *srv)
{
    int ncpu = usable_cpus();
    srv->spin_ok = spin_allowed(srv->nthreads, ncpu);
    set_io_sched(srv, ncpu);
}
