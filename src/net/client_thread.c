/* client_thread.c - what a thread's connections share: the parser's and replies' shared
 * buffers with the request limits as configured, and the loop handles that write the turn's
 * replies (client.c "flush") and run the connections waiting for their next slice. */
#include "client_thread.h"

#include "blocked.h"

static void on_flush_check(uv_check_t *h)
{
    client_flush_queued(h->data);
}

static void on_flush_prepare(uv_prepare_t *h)
{
    struct io_thread *t = h->data;
    t->turn++; /* the poll comes next: a new turn, with a budget of its own */
    client_flush_queued(t);
}

struct resp_limits client_limits(struct net_shared *net)
{
    struct resp_limits lim;
    pthread_mutex_lock(&net->env->conf_lock);
    lim.query_buf = (size_t)net->conf->client_query_buffer_limit;
    lim.max_bulk = (size_t)net->conf->proto_max_bulk_len;
    lim.max_args = (size_t)net->conf->proto_max_args;
    pthread_mutex_unlock(&net->env->conf_lock);
    return lim;
}

void client_thread_init(struct io_thread *t)
{
    blocked_thread_init(t, client_resume_unblocked);
    struct resp_limits lim = client_limits(t->net);
    resp_shared_init(&t->resp, &lim);
    rbuf_init(&t->spare_out);
    t->flush_list = NULL;
    uv_check_init(&t->loop, &t->flush_check);
    t->flush_check.data = t;
    uv_check_start(&t->flush_check, on_flush_check);
    uv_prepare_init(&t->loop, &t->flush_prepare);
    t->flush_prepare.data = t;
    uv_prepare_start(&t->flush_prepare, on_flush_prepare);
    t->ready_head = t->ready_tail = NULL;
    uv_idle_init(&t->loop, &t->ready_idle);
    t->ready_idle.data = t;
    /* None keeps the loop alive by itself. */
    uv_unref((uv_handle_t *)&t->flush_check);
    uv_unref((uv_handle_t *)&t->flush_prepare);
    uv_unref((uv_handle_t *)&t->ready_idle);
}

void client_thread_config(struct io_thread *t)
{
    struct resp_limits lim = client_limits(t->net);
    resp_shared_set_limits(&t->resp, &lim);
}

void client_thread_close_handles(struct io_thread *t)
{
    blocked_thread_close(t);
    uv_close((uv_handle_t *)&t->flush_check, NULL);
    uv_close((uv_handle_t *)&t->flush_prepare, NULL);
    uv_close((uv_handle_t *)&t->ready_idle, NULL);
}

void client_thread_deinit(struct io_thread *t)
{
    resp_shared_deinit(&t->resp);
    rbuf_free(&t->spare_out);
}

