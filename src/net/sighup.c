/* sighup.c - SIGHUP: reopen the log file (logrotate) and re-read from the configuration file the
 * settings that can change live, with sd_notify's RELOADING=1 ... READY=1 around it. */
#include "sighup.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "io_thread.h"
#include "rlimitd/clock.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/log.h"
#include "rlimitd/notify.h"

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
        /* The rules between directives are checked on the file as a whole: its live settings
         * are then applied one by one, and each alone may break a rule the next one mends
         * (client-query-buffer-limit lowered before proto-max-bulk-len). */
        if (conf_load_file(&fresh, srv->config_file, err, sizeof(err)) != 0 ||
            conf_check(&fresh, err, sizeof(err)) != 0) {
            log_warning("SIGHUP: %s; keeping the running configuration", err);
        } else {
            conf_resolve(&fresh); /* "threads 0" means what it meant at start */
            struct reload r = {srv, 0, 0};
            pthread_mutex_lock(&srv->env.conf_lock);
            conf_get(&fresh, "*", reload_one, &r);
            atomic_store(&srv->env.auth_required,
                         srv->conf->requirepass != NULL && srv->conf->requirepass[0] != '\0');
            ks_set_maxmemory(srv->ks, (uint64_t)srv->conf->maxmemory);
            ks_set_eviction(srv->ks, (int)srv->conf->maxmemory_policy,
                            (int)srv->conf->maxmemory_samples, (int)srv->conf->lfu_log_factor,
                            (int)srv->conf->lfu_decay_time);
            pthread_mutex_unlock(&srv->env.conf_lock);
            io_threads_config_changed(srv);
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

void sighup_watch(struct server *srv)
{
    uv_signal_init(&srv->threads[0].loop, &srv->sig_hup);
    srv->sig_hup.data = srv;
    uv_signal_start(&srv->sig_hup, on_sighup, SIGHUP);
}
