/* hooks.c - what the command layer calls upward through (struct server_hooks in rlimitd/cmd.h):
 * CLIENT LIST and CLIENT KILL over the client registry, the connected clients count, SHUTDOWN,
 * SAVE and BGSAVE, INFO persistence, LASTSAVE, CONFIG SET's change of configuration
 * (DESIGN.md "Data flow and layers"). The command layer never sees libuv, clients or persist. */
#include "hooks.h"

#include <stdio.h>
#include <string.h>

#include "client_info.h"
#include "cron.h"
#include "io_thread.h"
#include "rlimitd/clock.h"
#include "rlimitd/log.h"

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
        io_threads_wake(srv);
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
     * until io_threads_stop, so the final save after they stop runs again if anything changed. */
    if (save != 0 && srv->persist != NULL) {
        char why[512];
        uint64_t dirty = server_dirty_total(srv);
        if (persist_save(srv->persist, 0, dirty, why, sizeof(why)) != 0) {
            log_warning("Error trying to save the snapshot before shutdown: %s", why);
            snprintf(err, errlen, "Errors trying to SHUTDOWN. Check logs.");
            return -1;
        }
        srv->saved_dirty = dirty;
        srv->saved_before_stop = 1;
    }
    srv->final_save = save != 0;
    io_threads_stop(srv);
    return 0;
}

static int hook_save(void *ud, int background, char *err, size_t errlen)
{
    struct server *srv = ud;
    return persist_save(srv->persist, background, server_dirty_total(srv), err, errlen);
}

static void hook_info_persistence(void *ud, struct rbuf *out)
{
    struct server *srv = ud;
    persist_info(srv->persist, out, server_dirty_total(srv));
}

static int64_t hook_lastsave(void *ud)
{
    struct server *srv = ud;
    return persist_lastsave(srv->persist);
}

static void hook_config_changed(void *ud)
{
    io_threads_config_changed(ud);
}

void hooks_install(struct server *srv)
{
    srv->env.hooks = (struct server_hooks){
        .ud = srv,
        .client_list = hook_client_list,
        .client_kill = hook_client_kill,
        .connected_clients = hook_connected_clients,
        .shutdown = hook_shutdown,
        .config_changed = hook_config_changed,
    };
    if (srv->persist != NULL) {
        srv->env.hooks.save = hook_save;
        srv->env.hooks.info_persistence = hook_info_persistence;
        srv->env.hooks.lastsave = hook_lastsave;
    }
}
