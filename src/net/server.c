/* server.c - the I/O threads: one libuv loop each, SO_REUSEPORT listeners, the 100 ms cron
 * (active expiry, idle timeouts), signals, shutdown, and the hooks the command layer calls
 * upward through (DESIGN.md "Threads"). */
#include "rlimitd/server.h"
#include "rlimitd/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlimitd/clock.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/log.h"
#include "rlimitd/notify.h"
#include "server_internal.h"
#include "signals.h"

#define CRON_MS 100
#define EXPIRE_BUCKETS_PER_SHARD 64
#define BACKLOG 511

static uint64_t thread_spin_ns(const struct io_thread *t);

/* ---- listening sockets ---- */

/* Opens one listening socket on addr:port. With reuseport (the normal case) every thread can
 * have its own and the kernel spreads connections; without it (the probe) the bind fails if
 * anything already listens there. Returns the fd, or -errno. */
int server_open_listener(const char *addr, int port, int reuseport)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    int family;
    if (strchr(addr, ':') != NULL) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (uv_ip6_addr(addr, port, a) != 0)
            return -EINVAL;
        family = AF_INET6;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (uv_ip4_addr(strcmp(addr, "*") == 0 ? "0.0.0.0" : addr, port, a) != 0)
            return -EINVAL;
        family = AF_INET;
        len = sizeof(*a);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, BACKLOG) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Binds every address for every thread before any loop runs, so a taken port fails the start.
 * Returns 0 or -1 (logged). */
static int bind_all(struct server *srv)
{
    struct conf *c = srv->conf;
    srv->ntcp = 0;
    if (c->port == 0)
        return 0;
    for (int b = 0; b < c->nbind; b++) {
        const char *addr = c->bind[b];
        int optional = addr[0] == '-';
        if (optional)
            addr++;
        int ok = 1;
        /* SO_REUSEPORT would let a second rlimitd (same user) join this port and split the
         * traffic, silently doubling every limit. A plain bind first fails if anything listens
         * there already; the window between its close and our binds is microseconds at start. */
        int probe = server_open_listener(addr, (int)c->port, 0);
        if (probe >= 0) {
            close(probe);
        } else if (!(optional && (probe == -EADDRNOTAVAIL || probe == -EAFNOSUPPORT))) {
            log_warning("Could not create server TCP listening socket %s:%lld: %s", addr,
                        (long long)c->port, strerror(-probe));
            return -1;
        }
        for (int t = 0; t < srv->nthreads; t++) {
            int fd = server_open_listener(addr, (int)c->port, 1);
            if (fd < 0) {
                for (int u = 0; u < t; u++)
                    close(srv->tcp_fds[u][srv->ntcp]);
                if (optional && (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT)) {
                    log_notice("Skipping optional bind address %s: %s", addr, strerror(-fd));
                    ok = 0;
                    break;
                }
                log_warning("Could not create server TCP listening socket %s:%lld: %s", addr,
                            (long long)c->port, strerror(-fd));
                return -1;
            }
            srv->tcp_fds[t][srv->ntcp] = fd;
        }
        if (ok) {
            log_notice("Listening on %s:%lld", addr, (long long)c->port);
            srv->ntcp++;
            /* Issue 4's protected default: loopback is safe, anything else wants a password. */
            int loopback = strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
            if (!loopback && (c->requirepass == NULL || c->requirepass[0] == '\0'))
                log_warning("WARNING: listening on %s:%lld, which is not a loopback address, "
                            "with no requirepass set: anyone who can reach this address can use "
                            "and reset every limit. Set requirepass, or bind 127.0.0.1.",
                            addr, (long long)c->port);
        }
    }
    if (srv->ntcp == 0 && (c->unixsocket == NULL || c->unixsocket[0] == '\0')) {
        log_warning("No address could be bound");
        return -1;
    }
    return 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct io_thread *t = listener->data;
    if (status < 0) {
        log_warning("Accepting a connection failed: %s", uv_strerror(status));
        return;
    }
    thread_mark_work(t);
    client_accept(t, listener, listener->type == UV_NAMED_PIPE);
}

/* ---- cron ---- */

/* Memory return (DESIGN.md "Connections"): glibc keeps freed chunks in its arenas, so after a
 * connection storm has closed the process would stay at its peak. Once closed connections have
 * freed this much since the last trim, and the trim before is this long ago, malloc_trim hands
 * every arena's free pages back to the kernel. The interval bounds what a steady churn of
 * connections costs (a trim walks the arenas' free lists). */
#define TRIM_AFTER_BYTES (1024 * 1024)
#define TRIM_INTERVAL_MS 500

static void maybe_return_memory(struct server *srv, uint64_t mono_ms)
{
    uint64_t freed = 0;
    for (int i = 0; i < srv->nthreads; i++)
        freed += stats_get(&srv->threads[i].stats.clients_freed);
    if (freed - srv->trim_freed < TRIM_AFTER_BYTES || mono_ms - srv->trim_ms < TRIM_INTERVAL_MS)
        return;
    malloc_trim(0);
    srv->trim_freed = freed;
    srv->trim_ms = mono_ms;
}

/* Writes so far, all threads: what "changed since the last save" is measured against. */
static uint64_t dirty_total(struct server *srv)
{
    uint64_t n = 0;
    for (int i = 0; i < srv->nthreads; i++)
        n += stats_get(&srv->threads[i].stats.dirty);
    return n;
}

static void cron(uv_timer_t *timer)
{
    struct io_thread *t = timer->data;
    struct server *srv = t->srv;
    int64_t now = clock_now_ns();

    /* Active expiry over this thread's shards (shard i belongs to thread i mod N). */
    unsigned nshards = ks_nshards(srv->ks);
    for (unsigned s = (unsigned)t->index; s < nshards; s += (unsigned)srv->nthreads) {
        /* A busy shard is skipped this round (lazy expiry still applies to its keys): its
         * holder may be a script running for seconds, and this thread's clients must not
         * wait for it. */
        if (ks_trylock(srv->ks, s) != 0)
            continue;
        size_t freed = ks_expire_cycle(srv->ks, s, now, EXPIRE_BUCKETS_PER_SHARD);
        ks_unlock(srv->ks, s);
        if (freed > 0)
            stats_add(&t->stats.expired_keys, freed);
    }

    /* Idle clients (COMMANDS.md, Wire protocol: `timeout`). */
    int64_t timeout = __atomic_load_n(&srv->conf->timeout, __ATOMIC_RELAXED);
    uint64_t mono_ms = uv_now(&t->loop);
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        if (atomic_load_explicit(&c->kill, memory_order_relaxed)) {
            client_close(c);
            continue;
        }
        if (timeout > 0 && c->state == CLIENT_ACTIVE && !(c->session.flags & SESSION_IN_MULTI)) {
            int64_t last = c->session.last_mono_ns / 1000000;
            if ((int64_t)mono_ms - last > timeout * 1000) {
                log_verbose("Closing idle client id=%llu", (unsigned long long)c->session.id);
                client_close(c);
            }
        }
    }
    if (t->index == 0) {
        maybe_return_memory(srv, mono_ms);
        info_sample_ops(&srv->env);
        if (srv->persist != NULL)
            persist_tick(srv->persist, dirty_total(srv));
    }
}

/* ---- cross-thread wake-ups ---- */

static uv_signal_t sig_hup;

/* Clients that do not take their last replies within this time are closed anyway. */
#define SHUTDOWN_GRACE_MS 2000

static void force_close(uv_timer_t *timer)
{
    struct io_thread *t = timer->data;
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        client_close(c);
    }
    if (!uv_is_closing((uv_handle_t *)&t->cron))
        uv_close((uv_handle_t *)&t->cron, NULL);
}

static void on_wakeup(uv_async_t *a)
{
    struct io_thread *t = a->data;
    struct server *srv = t->srv;
    unsigned gen = atomic_load(&srv->config_gen);
    if (gen != t->config_gen) {
        t->config_gen = gen;
        client_thread_config(t); /* request limits, from the next header parsed */
        pthread_mutex_lock(&srv->env.conf_lock);
        busypoll_set_spin(&t->busypoll, thread_spin_ns(t));
        pthread_mutex_unlock(&srv->env.conf_lock);
    }
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        if (atomic_load_explicit(&c->kill, memory_order_relaxed))
            client_close(c);
    }
    if (!atomic_load(&srv->net.stopping) || t->stopped)
        return;
    t->stopped = 1;
    /* Shutdown: stop accepting, let clients flush what they were answered, then close. */
    for (int i = 0; i < t->nlisteners; i++)
        if (!uv_is_closing((uv_handle_t *)&t->listeners[i]))
            uv_close((uv_handle_t *)&t->listeners[i], NULL);
    if (t->has_unix && !uv_is_closing((uv_handle_t *)&t->unix_listener))
        uv_close((uv_handle_t *)&t->unix_listener, NULL);
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        client_close_after_flush(c);
    }
    uv_close((uv_handle_t *)&t->wakeup, NULL);
    if (t->index == 0) {
        if (!uv_is_closing((uv_handle_t *)&sig_hup))
            uv_close((uv_handle_t *)&sig_hup, NULL);
    }
    /* The cron timer becomes the grace deadline; the loop ends when every handle is closed. */
    if (!uv_is_closing((uv_handle_t *)&t->cron)) {
        uv_timer_stop(&t->cron);
        /* The last client's close callback may already have closed it (client.c on_close). */
        if (t->clients == NULL)
            uv_close((uv_handle_t *)&t->cron, NULL);
        else
            uv_timer_start(&t->cron, force_close, SHUTDOWN_GRACE_MS, 0);
    }
}

static void wake_all(struct server *srv)
{
    for (int i = 0; i < srv->nthreads; i++)
        uv_async_send(&srv->threads[i].wakeup);
}

static void request_stop(struct server *srv)
{
    if (atomic_exchange(&srv->net.stopping, 1) == 0) {
        notify_send("STOPPING=1\nSTATUS=Shutting down");
        wake_all(srv);
    }
}

/* ---- hooks for the command layer ---- */

static void hook_client_list(void *ud, struct rbuf *out, const struct session *only)
{
    struct server *srv = ud;
    uint64_t mono_ms = (uint64_t)(clock_mono_ns() / 1000000);
    pthread_mutex_lock(&srv->net.lock);
    pthread_mutex_lock(&srv->env.names_lock);
    for (struct client *c = srv->net.registry; c != NULL; c = c->gnext) {
        if (only != NULL && &c->session != only)
            continue;
        client_format(c, out, mono_ms);
    }
    pthread_mutex_unlock(&srv->env.names_lock);
    pthread_mutex_unlock(&srv->net.lock);
}

static int hook_client_kill(void *ud, uint64_t id, const char *addr)
{
    struct server *srv = ud;
    int n = 0;
    pthread_mutex_lock(&srv->net.lock);
    for (struct client *c = srv->net.registry; c != NULL; c = c->gnext) {
        if ((id != 0 && c->session.id != id) || (addr != NULL && strcmp(c->addr, addr) != 0))
            continue;
        if (id == 0 && addr == NULL)
            continue;
        atomic_store(&c->kill, 1);
        n++;
    }
    pthread_mutex_unlock(&srv->net.lock);
    if (n > 0)
        wake_all(srv);
    return n;
}

static uint64_t hook_connected_clients(void *ud)
{
    struct server *srv = ud;
    int64_t n = atomic_load(&srv->net.nclients);
    return n < 0 ? 0 : (uint64_t)n;
}

static int hook_shutdown(void *ud, int save, char *err, size_t errlen)
{
    struct server *srv = ud;
    log_warning("User requested shutdown...");
    /* Like Redis: save first, and refuse to stop if that fails (full disk, unwritable dir), so
     * a limit never silently resets; SHUTDOWN NOSAVE stops anyway. The loops keep serving
     * until request_stop, so the final save after they stop runs again if anything changed. */
    if (save != 0 && srv->persist != NULL) {
        char why[512];
        uint64_t dirty = dirty_total(srv);
        if (persist_save(srv->persist, 0, dirty, why, sizeof(why)) != 0) {
            log_warning("Error trying to save the snapshot before shutdown: %s", why);
            snprintf(err, errlen, "Errors trying to SHUTDOWN. Check logs.");
            return -1;
        }
        srv->saved_dirty = dirty;
        srv->saved_before_stop = 1;
    }
    srv->final_save = save != 0;
    request_stop(srv);
    return 0;
}

static int hook_save(void *ud, int background, char *err, size_t errlen)
{
    struct server *srv = ud;
    return persist_save(srv->persist, background, dirty_total(srv), err, errlen);
}

static void hook_info_persistence(void *ud, struct rbuf *out)
{
    struct server *srv = ud;
    persist_info(srv->persist, out, dirty_total(srv));
}

static int64_t hook_lastsave(void *ud)
{
    struct server *srv = ud;
    return persist_lastsave(srv->persist);
}

static void hook_config_changed(void *ud)
{
    struct server *srv = ud;
    pthread_mutex_lock(&srv->env.conf_lock);
    log_set_level((enum log_level)srv->conf->loglevel);
    pthread_mutex_unlock(&srv->env.conf_lock);
    atomic_fetch_add(&srv->config_gen, 1);
    wake_all(srv);
}

/* ---- signals ---- */

struct valbuf {
    char *buf;
    size_t cap;
};

/* Copies the running value of one directive (conf_get callback). */
static void reload_current(void *ud, const char *name, const char *value)
{
    (void)name;
    struct valbuf *cur = ud;
    snprintf(cur->buf, cur->cap, "%s", value);
}

struct reload {
    struct server *srv;
    int changed, restart;
};

/* One directive of the re-read file: applied if it can change live, else reported when it
 * differs from the running value. Runs under conf_lock. */
static void reload_one(void *ud, const char *name, const char *value)
{
    struct reload *r = ud;
    struct conf *live = r->srv->conf;
    char current[512] = "", err[256];
    struct valbuf cur = {current, sizeof(current)};
    conf_get(live, name, reload_current, &cur);
    if (strcmp(current, value) == 0)
        return;
    const char *argv1[1] = {value};
    if (conf_set(live, name, 1, argv1, 1, err, sizeof(err)) == 0) {
        log_notice("SIGHUP: %s is now '%s'", name, strcmp(name, "requirepass") ? value : "*");
        r->changed++;
    } else {
        log_warning("SIGHUP: %s changed in the file but %s; restart to apply it", name, err);
        r->restart++;
    }
}

/* SIGHUP: reopen the log file (logrotate) and re-read the settings that can change live from
 * the configuration file. Command-line overrides of live settings give way to the file. */
static void on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    struct server *srv = h->data;
    char state[96];
    snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%lld",
             (long long)(clock_mono_ns() / 1000));
    notify_send(state);
    log_notice("Received SIGHUP: reopening the log file and reloading live settings");
    if (srv->config_file != NULL) {
        struct conf fresh;
        char err[512];
        conf_init(&fresh);
        if (conf_load_file(&fresh, srv->config_file, err, sizeof(err)) != 0) {
            log_warning("SIGHUP: %s; keeping the running configuration", err);
        } else {
            conf_resolve(&fresh); /* "threads 0" means what it meant at start */
            struct reload r = {srv, 0, 0};
            pthread_mutex_lock(&srv->env.conf_lock);
            conf_get(&fresh, "*", reload_one, &r);
            atomic_store(&srv->env.auth_required,
                         srv->conf->requirepass != NULL && srv->conf->requirepass[0] != '\0');
            ks_set_maxmemory(srv->ks, (uint64_t)srv->conf->maxmemory);
            pthread_mutex_unlock(&srv->env.conf_lock);
            hook_config_changed(srv);
        }
        conf_free(&fresh);
    }
    pthread_mutex_lock(&srv->env.conf_lock);
    const char *path = srv->conf->logfile;
    if (path != NULL && path[0] != '\0' && log_open(path) != 0)
        log_warning("Could not reopen the log file %s", path);
    pthread_mutex_unlock(&srv->env.conf_lock);
    notify_send("READY=1\nSTATUS=Ready to accept connections");
}

/* On the signal watcher's thread (signals.h), so a script running on any I/O thread, 0
 * included, cannot hold it up. */
static void on_stop_signal(void *ud, int signum, int count)
{
    struct server *srv = ud;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (count == 1) {
        log_warning("Received %s, scheduling shutdown...", name);
        /* A script that has not written is stopped, as SCRIPT KILL would; one that wrote runs
         * to its end first (its effects would be saved half done). */
        cmd_scripts_stop_unwritten();
    } else {
        /* Asked again: stop every script, as SHUTDOWN NOSAVE does, and save nothing (a script
         * stopped halfway must not reach the snapshot). */
        log_warning("Received %s again: stopping every script, without the final snapshot",
                    name);
        atomic_store(&srv->signal_nosave, 1);
        cmd_scripts_stop_all();
    }
    request_stop(srv);
}

/* ---- threads ---- */

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

/* busy-poll-us as this thread applies it: 0 if it may never spin. Caller holds conf_lock. */
static uint64_t thread_spin_ns(const struct io_thread *t)
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
 * thread or the clients: more context switches per request and a worse p99. Set on the main thread before the other I/O threads start, which inherit it
 * (pthread_create's default PTHREAD_INHERIT_SCHED). */
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
static void busypoll_start(struct io_thread *t)
{
    struct server *srv = t->srv;
    t->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (t->schedstat_fd < 0 && t->index == 0)
        log_notice("Busy polling is off: /proc/thread-self/schedstat: %s", strerror(errno));
    pthread_mutex_lock(&srv->env.conf_lock);
    uint64_t spin_ns = thread_spin_ns(t);
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
 * closed once the loop has ended. They start with the thread (busypoll_start). */
static void busypoll_handles_init(struct io_thread *t)
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

static void busypoll_handles_close(struct io_thread *t)
{
    if (t->schedstat_fd >= 0)
        close(t->schedstat_fd);
    t->schedstat_fd = -1;
    uv_close((uv_handle_t *)&t->before_poll, NULL);
    uv_close((uv_handle_t *)&t->after_poll, NULL);
    uv_close((uv_handle_t *)&t->spin, NULL);
}

static int thread_setup(struct server *srv, struct io_thread *t)
{
    if (uv_loop_init(&t->loop) != 0)
        return -1;
    t->srv = srv; /* from here on server_run's exit path closes the loop */
    t->net = &srv->net;
    t->loop.data = t;
    client_thread_init(t);
    busypoll_handles_init(t);
    uv_async_init(&t->loop, &t->wakeup, on_wakeup);
    t->wakeup.data = t;
    uv_timer_init(&t->loop, &t->cron);
    t->cron.data = t;
    for (int i = 0; i < srv->ntcp; i++) {
        uv_tcp_t *l = &t->listeners[i];
        uv_tcp_init(&t->loop, l);
        l->data = t;
        int rc = uv_tcp_open(l, srv->tcp_fds[t->index][i]);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)l, BACKLOG, on_connection);
        if (rc != 0) {
            log_warning("Listening failed: %s", uv_strerror(rc));
            return -1;
        }
        t->nlisteners++;
    }
    const char *path = srv->conf->unixsocket;
    if (t->index == 0 && path != NULL && path[0] != '\0') {
        uv_pipe_init(&t->loop, &t->unix_listener, 0);
        t->unix_listener.data = t;
        unlink(path); /* a stale socket from a crash would make bind fail */
        int rc = uv_pipe_bind(&t->unix_listener, path);
        if (rc == 0 && srv->conf->unixsocketperm != 0)
            chmod(path, (mode_t)srv->conf->unixsocketperm);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&t->unix_listener, BACKLOG, on_connection);
        if (rc != 0) {
            log_warning("Opening Unix socket %s failed: %s", path, uv_strerror(rc));
            return -1;
        }
        t->has_unix = 1;
        log_notice("Listening on unix socket %s", path);
    }
    uv_timer_start(&t->cron, cron, CRON_MS, CRON_MS);
    return 0;
}

static void *thread_main(void *arg)
{
    struct io_thread *t = arg;
    busypoll_start(t);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    cmd_thread_exit();
    return NULL;
}

/* metrics-port: one plain (not SO_REUSEPORT) socket per bind address, so a port something
 * else listens on fails the start, as the RESP port does. Returns 0 or -1 (logged). */
static int start_metrics(struct server *srv)
{
    struct conf *c = srv->conf;
    if (c->metrics_port == 0)
        return 0;
    int fds[CONF_MAX_BIND];
    int n = 0;
    for (int b = 0; b < c->nbind; b++) {
        const char *addr = c->bind[b];
        int optional = addr[0] == '-';
        if (optional)
            addr++;
        int fd = server_open_listener(addr, (int)c->metrics_port, 0);
        if (fd < 0 && optional && (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT))
            continue;
        if (fd < 0) {
            log_warning("Could not create metrics listening socket %s:%lld: %s", addr,
                        (long long)c->metrics_port, strerror(-fd));
            for (int i = 0; i < n; i++)
                close(fds[i]);
            return -1;
        }
        fds[n++] = fd;
        log_notice("Metrics on http://%s%s%s:%lld/metrics", strchr(addr, ':') ? "[" : "", addr,
                   strchr(addr, ':') ? "]" : "", (long long)c->metrics_port);
    }
    if (n == 0) {
        log_warning("No address could be bound for metrics-port");
        return -1;
    }
    srv->metrics = metrics_http_start(&srv->env, fds, n);
    return srv->metrics != NULL ? 0 : -1;
}

/* Descriptors besides the clients': listeners per thread, the loops' epoll and wake-up fds,
 * the log, the snapshot being written. */
#define FDS_RESERVED 64

/* Makes room for maxclients connections, as Redis does: the soft descriptor limit is raised
 * toward the hard one (the unit's LimitNOFILE, or `ulimit -Hn`). Short of that, a warning: past
 * the limit accept() fails and connections wait in the backlog instead of getting the
 * maxclients error. */
static void raise_nofile(int64_t maxclients)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)maxclients + FDS_RESERVED;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl.rlim_cur = old;
    if (rl.rlim_cur > old)
        log_notice("Raised the open files limit from %llu to %llu", (unsigned long long)old,
                   (unsigned long long)rl.rlim_cur);
    if (rl.rlim_cur < want)
        log_warning("The open files limit (%llu) leaves room for %lld clients, not maxclients "
                    "%lld: raise LimitNOFILE or ulimit -n",
                    (unsigned long long)rl.rlim_cur,
                    (long long)rl.rlim_cur > FDS_RESERVED ? (long long)rl.rlim_cur - FDS_RESERVED
                                                          : 0LL,
                    (long long)maxclients);
}

int server_run(struct conf *conf, const char *config_file, struct keyspace *ks,
               struct persist *persist)
{
    struct server *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return 1;
    srv->conf = conf;
    srv->config_file = config_file;
    srv->ks = ks;
    srv->persist = persist;
    srv->final_save = 1; /* SIGTERM, SIGINT, SHUTDOWN and SHUTDOWN SAVE all save */
    raise_nofile(conf->maxclients);
    srv->nthreads = (int)conf->threads;
    if (srv->nthreads < 1 || srv->nthreads > CONF_MAX_THREADS)
        srv->nthreads = 1;
    pthread_mutex_init(&srv->net.lock, NULL);
    srv->net.conf = conf;
    srv->net.env = &srv->env;
    cmd_env_init(&srv->env, ks, conf);
    ks_set_maxmemory(ks, (uint64_t)conf->maxmemory);
    srv->env.tcp_port = conf->port;
    srv->env.hooks = (struct server_hooks){
        .ud = srv,
        .client_list = hook_client_list,
        .client_kill = hook_client_kill,
        .connected_clients = hook_connected_clients,
        .shutdown = hook_shutdown,
        .config_changed = hook_config_changed,
    };
    if (persist != NULL) {
        persist_set_lock(persist, &srv->env.conf_lock);
        srv->env.hooks.save = hook_save;
        srv->env.hooks.info_persistence = hook_info_persistence;
        srv->env.hooks.lastsave = hook_lastsave;
    }
    int ncpu = usable_cpus();
    srv->spin_ok = spin_allowed(srv->nthreads, ncpu);
    set_io_sched(srv, ncpu);
    srv->threads = xcalloc((size_t)srv->nthreads, sizeof(struct io_thread));
    srv->env.stats = xcalloc((size_t)srv->nthreads, sizeof(struct stats *));
    srv->env.nstats = srv->nthreads;

    int rc = 1;
    signal(SIGPIPE, SIG_IGN);
    if (bind_all(srv) != 0 || start_metrics(srv) != 0)
        goto out;
    for (int i = 0; i < srv->nthreads; i++) {
        srv->threads[i].index = i;
        srv->env.stats[i] = &srv->threads[i].stats;
        if (thread_setup(srv, &srv->threads[i]) != 0)
            goto out;
    }
    if (sigwatch_start(on_stop_signal, srv) != 0) {
        log_warning("Could not start the signal thread: %s", strerror(errno));
        goto out;
    }
    uv_signal_init(&srv->threads[0].loop, &sig_hup);
    sig_hup.data = srv;
    uv_signal_start(&sig_hup, on_sighup, SIGHUP);
    log_notice("Ready to accept connections (%d I/O threads)", srv->nthreads);
    /* READY only once every socket listens (and, with snapshots, after loading). */
    notify_send("READY=1\nSTATUS=Ready to accept connections");

    for (int i = 1; i < srv->nthreads; i++)
        pthread_create(&srv->threads[i].tid, NULL, thread_main, &srv->threads[i]);
    thread_main(&srv->threads[0]);
    for (int i = 1; i < srv->nthreads; i++)
        pthread_join(srv->threads[i].tid, NULL);
    rc = 0;
    /* Every loop has stopped: the snapshot holds every answered command (SNAPSHOT.md). */
    if (atomic_load(&srv->signal_nosave))
        srv->final_save = 0;
    if (persist != NULL) {
        persist_wait(persist);
        /* SHUTDOWN already saved; save again only if commands changed state meanwhile. */
        if (srv->final_save && srv->saved_before_stop && dirty_total(srv) == srv->saved_dirty)
            srv->final_save = 0;
        if (srv->final_save) {
            char err[512];
            /* A big keyspace may take a while: tell systemd not to kill us meanwhile. */
            notify_send("STATUS=Saving the final snapshot\nEXTEND_TIMEOUT_USEC=120000000");
            if (persist_save(persist, 0, dirty_total(srv), err, sizeof(err)) != 0) {
                log_warning("The final snapshot failed: %s", err);
                rc = 1;
            }
        }
    }
    log_notice("rlimitd is now ready to exit, bye bye...");
    sigwatch_stop();

out:
    for (int i = 0; i < srv->nthreads; i++) {
        struct io_thread *t = &srv->threads[i];
        if (t->srv != NULL) {
            busypoll_handles_close(t);
            client_thread_close_handles(t);
            uv_run(&t->loop, UV_RUN_NOWAIT);
            uv_loop_close(&t->loop);
            client_thread_deinit(t);
        }
    }
    metrics_http_stop(&srv->metrics); /* before the env its scrapes read goes */
    if (conf->unixsocket != NULL && conf->unixsocket[0] != '\0' && rc == 0)
        unlink(conf->unixsocket);
    cmd_env_deinit(&srv->env);
    pthread_mutex_destroy(&srv->net.lock);
    free(srv->env.stats);
    free(srv->threads);
    free(srv);
    return rc;
}
