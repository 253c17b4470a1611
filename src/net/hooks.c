/* hooks.c - what the command layer calls upward through (struct server_hooks in rlimitd/cmd.h):
 * CLIENT LIST and CLIENT KILL over the client registry, the connected clients count, SHUTDOWN,
 * SAVE and BGSAVE, INFO persistence, LASTSAVE, CONFIG SET's change of configuration
 * (DESIGN.md "Data flow and layers"). The command layer never sees libuv, clients or persist. */
#include "hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busy_serve.h"
#include "client_info.h"
#include "cron.h"
#include "io_thread.h"
#include "rlimitd/alloc.h"
#include "rlimitd/clock.h"
#include "rlimitd/log.h"

/* Redis's class of a connection (enum client_type): no replica or master ever connects. */
static int client_type(const struct client *c)
{
    unsigned flags = __atomic_load_n(&c->session.flags, __ATOMIC_RELAXED);
    return (flags & SESSION_PUBSUB) ? CLIENT_TYPE_PUBSUB : CLIENT_TYPE_NORMAL;
}

/* Whether c meets every condition of m but its ids. The caller holds net.lock. */
static int client_matches(const struct client *c, const struct client_match *m)
{
    if (m->id != 0 && c->session.id != m->id)
        return 0;
    if (m->addr != NULL && strcmp(c->addr, m->addr) != 0)
        return 0;
    if (m->laddr != NULL) {
        char laddr[112];
        client_local_addr(c, laddr, sizeof(laddr));
        if (strcmp(laddr, m->laddr) != 0)
            return 0;
    }
    if (m->type != CLIENT_TYPE_ANY && client_type(c) != m->type)
        return 0;
    /* One already killed is as good as gone (Redis frees it at once): not listed, not
     * counted by a second CLIENT KILL. */
    if (atomic_load_explicit(&c->kill, memory_order_relaxed))
        return 0;
    return &c->session != m->skip;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = (*(const struct client *const *)a)->session.id;
    uint64_t y = (*(const struct client *const *)b)->session.id;
    return (x > y) - (x < y);
}

/* The registered clients meeting m (every one for m NULL), sorted by id: Redis lists its
 * clients in the order they connected, which is the order of their ids. The caller holds
 * net.lock and frees the array. */
static struct client **sorted_clients(struct server *srv, const struct client_match *m,
                                      size_t *np)
{
    size_t n = 0;
    for (struct client *c = srv->net.registry; c != NULL; c = c->gnext)
        n++;
    struct client **all = xmalloc((n > 0 ? n : 1) * sizeof(*all));
    size_t k = 0;
    for (struct client *c = srv->net.registry; c != NULL; c = c->gnext)
        if (m == NULL || client_matches(c, m))
            all[k++] = c;
    qsort(all, k, sizeof(*all), by_id);
    *np = k;
    return all;
}

/* CLIENT LIST ID: each id found in the sorted registry by bisection, so a long list of ids
 * against many connections costs (ids + clients) * log(clients). */
static void list_ids(struct server *srv, struct rbuf *out, const struct client_match *m,
                     uint64_t mono_ms)
{
    size_t n;
    struct client **all = sorted_clients(srv, NULL, &n);
    for (size_t i = 0; i < m->nids; i++) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (all[mid]->session.id < m->ids[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && all[lo]->session.id == m->ids[i] &&
            !atomic_load_explicit(&all[lo]->kill, memory_order_relaxed))
            client_format(all[lo], out, mono_ms);
    }
    free(all);
}

static void hook_client_list(void *ud, struct rbuf *out, const struct client_match *m)
{
    struct server *srv = ud;
    uint64_t mono_ms = (uint64_t)(clock_mono_ns() / 1000000);
    pthread_mutex_lock(&srv->net.lock);
    pthread_mutex_lock(&srv->env.names_lock);
    if (m->nids > 0) {
        list_ids(srv, out, m, mono_ms);
    } else if (m->id != 0) { /* CLIENT INFO: one at most, no order to put them in */
        for (struct client *c = srv->net.registry; c != NULL; c = c->gnext)
            if (client_matches(c, m))
                client_format(c, out, mono_ms);
    } else {
        size_t n;
        struct client **found = sorted_clients(srv, m, &n);
        for (size_t i = 0; i < n; i++)
            client_format(found[i], out, mono_ms);
        free(found);
    }
    pthread_mutex_unlock(&srv->env.names_lock);
    pthread_mutex_unlock(&srv->net.lock);
}

static int hook_client_kill(void *ud, const struct client_match *m, const struct session *me,
                            int *me_matched)
{
    struct server *srv = ud;
    int n = 0, others = 0;
    *me_matched = 0;
    pthread_mutex_lock(&srv->net.lock);
    for (struct client *c = srv->net.registry; c != NULL; c = c->gnext) {
        if (!client_matches(c, m))
            continue;
        n++;
        if (&c->session == me) {
            *me_matched = 1; /* closed by its own thread once the reply is out */
            atomic_store(&c->kill, CLIENT_KILL_SELF);
        } else {
            atomic_store(&c->kill, CLIENT_KILL_NOW);
            others++;
        }
    }
    pthread_mutex_unlock(&srv->net.lock);
    if (others > 0)
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
        .busy_serve = busy_serve,
    };
    if (srv->persist != NULL) {
        srv->env.hooks.save = hook_save;
        srv->env.hooks.info_persistence = hook_info_persistence;
        srv->env.hooks.lastsave = hook_lastsave;
    }
}
