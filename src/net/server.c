/* server.c - the daemon's run from start to exit: raises the descriptor limit, binds, sets up
 * and runs the I/O threads, answers SIGTERM and SIGINT, and after the loops end takes the final
 * snapshot and tears everything down. Each job is a file of its own: io_thread.c (the loops and
 * their wake-ups), listeners.c, cron.c, hooks.c (what the command layer calls), sighup.c,
 * thread_cpu.c (busy polling, scheduling class); client.c serves one connection. */
#include "rlimitd/pubsub.h"
#include "rlimitd/server.h"
#include "rlimitd/alloc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cron.h"
#include "hooks.h"
#include "io_thread.h"
#include "listeners.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/log.h"
#include "rlimitd/notify.h"
#include "server_state.h"
#include "sighup.h"
#include "signals.h"
#include "thread_cpu.h"

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
        log_warning("Received %s again: stopping every script, without the final snapshot", name);
        atomic_store(&srv->signal_nosave, 1);
        cmd_scripts_stop_all();
    }
    io_threads_stop(srv);
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
    ks_set_eviction(ks, (int)conf->maxmemory_policy, (int)conf->maxmemory_samples,
                    (int)conf->lfu_log_factor, (int)conf->lfu_decay_time);
    srv->env.tcp_port = conf->port;
    hooks_install(srv);
    if (persist != NULL)
        persist_set_lock(persist, &srv->env.conf_lock);
    thread_cpu_policy(srv);
    srv->threads = xcalloc((size_t)srv->nthreads, sizeof(struct io_thread));
    srv->env.stats = xcalloc((size_t)srv->nthreads, sizeof(struct stats *));
    srv->env.nstats = srv->nthreads;
    pubsub_init(srv->nthreads);

    int rc = 1;
    signal(SIGPIPE, SIG_IGN);
    if (listeners_bind(srv) != 0 || listeners_start_metrics(srv) != 0)
        goto out;
    for (int i = 0; i < srv->nthreads; i++) {
        srv->threads[i].index = i;
        srv->env.stats[i] = &srv->threads[i].stats;
        /* The thread's connections' buffers count toward maxmemory (INFO mem_clients_normal,
         * part of used_memory), as Redis's normal clients do. nthreads <= 16 < KS_MAX_COUNTED. */
        ks_count_memory(srv->ks, &srv->threads[i].stats.clients_mem);
        if (io_thread_setup(srv, &srv->threads[i]) != 0)
            goto out;
    }
    if (sigwatch_start(on_stop_signal, srv) != 0) {
        log_warning("Could not start the signal thread: %s", strerror(errno));
        goto out;
    }
    sighup_watch(srv);
    log_notice("Ready to accept connections (%d I/O threads)", srv->nthreads);
    /* READY only once every socket listens (and, with snapshots, after loading). */
    notify_send("READY=1\nSTATUS=Ready to accept connections");

    for (int i = 1; i < srv->nthreads; i++)
        pthread_create(&srv->threads[i].tid, NULL, io_thread_main, &srv->threads[i]);
    io_thread_main(&srv->threads[0]);
    for (int i = 1; i < srv->nthreads; i++)
        pthread_join(srv->threads[i].tid, NULL);
    rc = 0;
    /* Every loop has stopped: the snapshot holds every answered command (SNAPSHOT.md). */
    if (atomic_load(&srv->signal_nosave))
        srv->final_save = 0;
    if (persist != NULL) {
        persist_wait(persist);
        /* SHUTDOWN already saved; save again only if commands changed state meanwhile. */
        if (srv->final_save && srv->saved_before_stop &&
            server_dirty_total(srv) == srv->saved_dirty)
            srv->final_save = 0;
        if (srv->final_save) {
            char err[512];
            /* A big keyspace may take a while: tell systemd not to kill us meanwhile. */
            notify_send("STATUS=Saving the final snapshot\nEXTEND_TIMEOUT_USEC=120000000");
            if (persist_save(persist, 0, server_dirty_total(srv), err, sizeof(err)) != 0) {
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
        if (t->srv != NULL)
            io_thread_teardown(t);
    }
    pubsub_free(); /* every connection, and so every subscription, is gone */
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
