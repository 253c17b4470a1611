/* io_thread.c - the I/O threads: one libuv loop each, its set-up and teardown, the wake-up other
 * threads send it (CLIENT KILL, configuration changes, shutdown) and the shutdown of its loop
 * (DESIGN.md "Threads"). */
#include "io_thread.h"

#include "busy_serve.h"
#include "client_thread.h"
#include "cron.h"
#include "listeners.h"
#include "rlimitd/log.h"
#include "rlimitd/notify.h"
#include "rlimitd/pubsub.h"
#include "thread_cpu.h"

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
        busypoll_set_spin(&t->busypoll, thread_cpu_spin_ns(t));
        pthread_mutex_unlock(&srv->env.conf_lock);
    }
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        if (atomic_load_explicit(&c->kill, memory_order_relaxed) == CLIENT_KILL_NOW)
            client_close(c);
    }
    if (!atomic_load(&srv->net.stopping) || t->stopped)
        return;
    t->stopped = 1;
    /* Shutdown: stop accepting, let clients flush what they were answered, then close. */
    listeners_close(t);
    for (struct client *c = t->clients, *next; c != NULL; c = next) {
        next = c->tnext;
        client_close_after_flush(c);
    }
    uv_close((uv_handle_t *)&t->wakeup, NULL);
    /* No publisher wakes this thread after the detach (it wakes under the table's lock). */
    pubsub_thread_detach();
    uv_close((uv_handle_t *)&t->pubsub_wake, NULL);
    if (t->index == 0) {
        if (!uv_is_closing((uv_handle_t *)&srv->sig_hup))
            uv_close((uv_handle_t *)&srv->sig_hup, NULL);
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

/* What one part of a delivered backlog holds (pubsub_drain_some): every subscriber's share of
 * it is written before the next part is delivered, so a thread that woke late to thousands of
 * messages writes them through buffers of about this size, reused from part to part, rather
 * than growing a buffer per subscriber to the whole backlog (new pages, a cold copy). */
#define PUBSUB_PART_BYTES (16 * 1024)

static void on_pubsub_wake(uv_async_t *a)
{
    struct io_thread *t = a->data;
    thread_mark_work(t);
    while (pubsub_drain_some(PUBSUB_PART_BYTES))
        client_flush_queued(t);
}

/* pubsub.h's wake: from a publisher on another thread. */
static void pubsub_wake(void *ud)
{
    struct io_thread *t = ud;
    uv_async_send(&t->pubsub_wake);
}

void io_threads_wake(struct server *srv)
{
    for (int i = 0; i < srv->nthreads; i++)
        uv_async_send(&srv->threads[i].wakeup);
}

void io_threads_stop(struct server *srv)
{
    if (atomic_exchange(&srv->net.stopping, 1) == 0) {
        notify_send("STOPPING=1\nSTATUS=Shutting down");
        io_threads_wake(srv);
    }
}

void io_threads_config_changed(struct server *srv)
{
    pthread_mutex_lock(&srv->env.conf_lock);
    log_set_level((enum log_level)srv->conf->loglevel);
    pthread_mutex_unlock(&srv->env.conf_lock);
    atomic_fetch_add(&srv->config_gen, 1);
    io_threads_wake(srv);
}

int io_thread_setup(struct server *srv, struct io_thread *t)
{
    if (uv_loop_init(&t->loop) != 0)
        return -1;
    t->srv = srv; /* from here on server_run's exit path closes the loop */
    t->net = &srv->net;
    t->loop.data = t;
    client_thread_init(t);
    thread_cpu_handles_init(t);
    uv_async_init(&t->loop, &t->wakeup, on_wakeup);
    t->wakeup.data = t;
    uv_async_init(&t->loop, &t->pubsub_wake, on_pubsub_wake);
    t->pubsub_wake.data = t;
    uv_timer_init(&t->loop, &t->cron);
    t->cron.data = t;
    if (listeners_open(t) != 0)
        return -1;
    cron_start(t);
    return 0;
}

void *io_thread_main(void *arg)
{
    struct io_thread *t = arg;
    busy_serve_thread(t);
    pubsub_thread_attach(t->index, pubsub_wake, t, client_pubsub_kick);
    thread_cpu_start(t);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    pubsub_thread_detach();
    cmd_thread_exit();
    return NULL;
}

void io_thread_teardown(struct io_thread *t)
{
    thread_cpu_handles_close(t);
    client_thread_close_handles(t);
    if (t->pubsub_wake.loop != NULL && !uv_is_closing((uv_handle_t *)&t->pubsub_wake))
        uv_close((uv_handle_t *)&t->pubsub_wake, NULL);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    uv_loop_close(&t->loop);
    client_thread_deinit(t);
    busy_serve_thread_end(t);
}
