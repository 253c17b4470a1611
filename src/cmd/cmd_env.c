/* cmd_env.c - setting up and tearing down what commands run in: the environment every
 * connection shares (struct cmd_env: locks, run id, slow log, LIMITER TOP's sketches, the
 * scripts' BUSY markers), a connection's session, and what a thread that ran commands keeps
 * (its spare transaction, key scratch, Lua engine). */
#include "cmd_internal.h"
#include "rlimitd/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/hashval.h"
#include "rlimitd/pubsub.h"
#include "rlimitd/script.h"
#include "rlimitd/zset.h"
#include "cmd_notify.h"
#include "cmd_run.h"
#include "cmd_tx.h"
#include "slowlog.h"

void session_init(struct session *s, uint64_t id, struct stats *stats)
{
    memset(s, 0, sizeof(*s));
    s->id = id;
    s->stats = stats;
    s->ctime_ns = clock_now_ns();
    s->last_mono_ns = clock_mono_ns();
    s->last_cmd = -1;
    s->peer = "";
    s->multi_count = -1;
    s->resp = 2;
}

void cmd_thread_exit(void)
{
    cmd_tx_thread_exit();
    script_thread_exit();
    cmd_run_thread_exit();
}

void session_deinit(struct session *s)
{
    multi_discard(s);
    watch_release_all(s);
    pubsub_client_free(s->pubsub);
    free(s->name);
    free(s->lib_name);
    free(s->lib_ver);
    memset(s, 0, sizeof(*s));
}

/* A busy script's call to serve its thread's other connections (net's hook, if any). */
static void busy_serve(void *ud)
{
    struct cmd_env *env = ud;
    if (env->hooks.busy_serve != NULL)
        env->hooks.busy_serve(env->hooks.ud);
}

void cmd_env_init(struct cmd_env *env, struct keyspace *ks, struct conf *conf)
{
    memset(env, 0, sizeof(*env));
    env->ks = ks;
    env->conf = conf;
    pthread_mutex_init(&env->conf_lock, NULL);
    pthread_mutex_init(&env->names_lock, NULL);
    env->start_ns = clock_now_ns();
    env->start_mono_ns = clock_mono_ns();
    env->io_sched = "normal";
    /* A run id only needs to differ between runs: 160 bits from urandom, as hex. */
    unsigned char rnd[20] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (f != NULL) {
        if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
            memset(rnd, 0, sizeof(rnd));
        fclose(f);
    }
    for (int i = 0; i < 20; i++)
        snprintf(env->run_id + 2 * i, 3, "%02x", rnd[i] ^ (unsigned char)(env->start_ns >> i));
    env->slowlog = slowlog_create();
    env->stats_base = xcalloc(1, sizeof(struct stats));
    errorstats_attach(env);
    env->top = limiter_top_create((uint32_t)conf->limiter_top_size);
    cmd_notify_attach(ks, conf);
    /* CONFIG SET writes these in place; the stores read them on each change (Redis's live
     * conversion bounds). */
    hv_watch_limits(&conf->hash_max_listpack_entries, &conf->hash_max_listpack_value);
    zs_watch_limits(&conf->zset_max_listpack_entries, &conf->zset_max_listpack_value);
    if (ks != NULL) {
        env->script_since = xcalloc(ks_nshards(ks), sizeof(*env->script_since));
    }
    script_busy_init(&conf->busy_reply_threshold, busy_serve, env);
    clock_ticks_to_us(0); /* calibrate now, not during the first command */
    atomic_store(&env->auth_required, conf->requirepass != NULL && conf->requirepass[0] != '\0');
}

void cmd_env_deinit(struct cmd_env *env)
{
    cmd_notify_detach(env->ks);
    hv_watch_limits(NULL, NULL);
    zs_watch_limits(NULL, NULL);
    slowlog_destroy(&env->slowlog);
    limiter_top_destroy(&env->top);
    errorstats_attach(NULL);
    free(env->stats_base);
    env->stats_base = NULL;
    free(env->script_since);
    env->script_since = NULL;
    script_busy_init(NULL, NULL, NULL);
    script_engine_free_all();
    script_cache_free();
    pthread_mutex_destroy(&env->conf_lock);
    pthread_mutex_destroy(&env->names_lock);
}
