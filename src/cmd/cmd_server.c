/* cmd_server.c - connection and server commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, SELECT,
 * TIME, CONFIG, SHUTDOWN, SAVE, BGSAVE, LASTSAVE, and CLIENT's row (its handler is in
 * cmd_client.c) (COMMANDS.md). */
#include "cmd_client.h"
#include "cmd_internal.h"
#include "rlimitd/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rlimitd/script.h"
#include "rlimitd/util.h"
#include "rlimitd_version.h"

static void cmd_ping(struct cmd_ctx *x)
{
    if (x->argc > 2) {
        reply_error(x->out, "ERR wrong number of arguments for 'ping' command");
        return;
    }
    if ((x->s->flags & SESSION_PUBSUB) && x->s->resp == 2) {
        /* Redis's subscribed-state reply: a message-like pair a RESP2 subscriber can read. */
        reply_array(x->out, 2);
        reply_bulk(x->out, "pong", 4);
        reply_bulk(x->out, x->argc == 2 ? x->argv[1] : "", x->argc == 2 ? x->lens[1] : 0);
        return;
    }
    if (x->argc == 2)
        reply_bulk(x->out, x->argv[1], x->lens[1]);
    else
        rbuf_append(x->out, "+PONG\r\n", 7);
}

static void cmd_echo(struct cmd_ctx *x)
{
    reply_bulk(x->out, x->argv[1], x->lens[1]);
}

static void cmd_quit(struct cmd_ctx *x)
{
    reply_ok(x->out);
    __atomic_fetch_or(&x->s->flags, SESSION_CLOSE_AFTER_REPLY, __ATOMIC_RELAXED);
}

static int auth_required(const struct cmd_env *env)
{
    return atomic_load_explicit(&((struct cmd_env *)env)->auth_required, memory_order_relaxed);
}

static void cmd_reset(struct cmd_ctx *x)
{
    struct session *s = x->s;
    multi_discard(s);
    watch_release_all(s);
    session_pubsub_reset(s);
    client_set_str(x->env, &s->name, NULL, 0);
    /* Redis: RESET de-authenticates the connection when a password is needed. */
    s->authed = !auth_required(x->env);
    __atomic_store_n(&s->resp, 2, __ATOMIC_RELAXED);
    x->out->resp = 2;
    rbuf_append(x->out, "+RESET\r\n", 8);
}

/* Compares in time that depends only on the lengths, not on where the first difference is. */
static int secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen > blen ? alen : blen;
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < n; i++) {
        unsigned char ca = i < alen ? (unsigned char)a[i] : 0;
        unsigned char cb = i < blen ? (unsigned char)b[i] : 0;
        diff |= ca ^ cb;
    }
    return diff == 0;
}

/* Checks user/password against requirepass (only the "default" user exists). Returns 1 if
 * they match. With no requirepass the default user takes any password, as in Redis. */
static int check_credentials(struct cmd_env *env, const char *user, size_t ulen, const char *pass,
                             size_t plen)
{
    if (user != NULL && !(ulen == 7 && memcmp(user, "default", 7) == 0))
        return 0;
    pthread_mutex_lock(&env->conf_lock);
    const char *want = env->conf->requirepass;
    int ok = want == NULL || want[0] == '\0' || secret_equal(pass, plen, want, strlen(want));
    pthread_mutex_unlock(&env->conf_lock);
    return ok;
}

static const char wrongpass[] =
    "WRONGPASS invalid username-password pair or user is disabled.";

static void cmd_auth(struct cmd_ctx *x)
{
    if (x->argc > 3) {
        reply_syntax_error(x->out);
        return;
    }
    if (x->argc == 2 && !auth_required(x->env)) {
        reply_error(x->out, "ERR AUTH <password> called without any password configured for "
                            "the default user. Are you sure your configuration is correct?");
        return;
    }
    const char *user = x->argc == 3 ? x->argv[1] : NULL;
    size_t ulen = x->argc == 3 ? x->lens[1] : 0;
    if (!check_credentials(x->env, user, ulen, x->argv[x->argc - 1], x->lens[x->argc - 1])) {
        reply_error(x->out, wrongpass);
        return;
    }
    x->s->authed = 1;
    reply_ok(x->out);
}

/* HELLO [protover [AUTH user pass] [SETNAME name]], in Redis 7.0's order: the version is
 * checked first; then each option takes effect as it is read (a later bad option leaves an
 * earlier AUTH or SETNAME done, as in Redis); then an unauthenticated connection is refused;
 * only then does the protocol switch, so the map comes back in the new one. */
static void cmd_hello(struct cmd_ctx *x)
{
    int64_t ver = 0;
    int i = 1;
    if (x->argc >= 2) {
        if (util_parse_i64(x->argv[1], x->lens[1], &ver) != 0) {
            reply_error(x->out, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (ver < 2 || ver > 3) {
            reply_error(x->out, "NOPROTO unsupported protocol version");
            return;
        }
        i = 2;
    }
    for (; i < x->argc; i++) {
        int more = x->argc - 1 - i;
        if (arg_is(x, i, "AUTH") && more >= 2) {
            if (!check_credentials(x->env, x->argv[i + 1], x->lens[i + 1], x->argv[i + 2],
                                   x->lens[i + 2])) {
                reply_error(x->out, wrongpass);
                return;
            }
            x->s->authed = 1;
            i += 2;
        } else if (arg_is(x, i, "SETNAME") && more >= 1) {
            if (!client_valid_name(x->argv[i + 1], x->lens[i + 1])) {
                reply_error(x->out, client_bad_name);
                return;
            }
            client_set_str(x->env, &x->s->name, x->argv[i + 1], x->lens[i + 1]);
            i += 1;
        } else {
            /* Redis formats the option with %s: it ends at a NUL byte. */
            reply_errorf(x->out, "ERR Syntax error in HELLO option '%s'", x->argv[i]);
            return;
        }
    }
    if (!x->s->authed && auth_required(x->env)) {
        reply_error(x->out, "NOAUTH HELLO must be called with the client already authenticated, "
                            "otherwise the HELLO AUTH <user> <pass> option can be used to "
                            "authenticate the client and select the RESP protocol version at "
                            "the same time");
        return;
    }
    if (ver != 0) {
        __atomic_store_n(&x->s->resp, (unsigned char)ver, __ATOMIC_RELAXED);
        x->out->resp = (unsigned char)ver;
    }
    /* Redis's map (an array of pairs in RESP2); the version is the Redis version rlimitd
     * answers as (INFO's redis_version), since clients gate features on it. */
    reply_map(x->out, 7);
    reply_bulk_cstr(x->out, "server");
    reply_bulk_cstr(x->out, "rlimitd");
    reply_bulk_cstr(x->out, "version");
    reply_bulk_cstr(x->out, REDIS_COMPAT_VERSION);
    reply_bulk_cstr(x->out, "proto");
    reply_int(x->out, x->s->resp);
    reply_bulk_cstr(x->out, "id");
    reply_int(x->out, (int64_t)x->s->id);
    reply_bulk_cstr(x->out, "mode");
    reply_bulk_cstr(x->out, "standalone");
    reply_bulk_cstr(x->out, "role");
    reply_bulk_cstr(x->out, "master");
    reply_bulk_cstr(x->out, "modules");
    reply_array(x->out, 0);
}

static void cmd_select(struct cmd_ctx *x)
{
    int64_t db;
    if (arg_i64(x, 1, &db))
        return;
    if (db != 0) {
        reply_error(x->out, "ERR DB index is out of range");
        return;
    }
    reply_ok(x->out);
}

static void cmd_time(struct cmd_ctx *x)
{
    reply_array(x->out, 2);
    reply_bulk_i64(x->out, x->now / 1000000000);
    reply_bulk_i64(x->out, (x->now % 1000000000) / 1000);
}

/* ---- CONFIG ---- */

struct config_get_state {
    struct rbuf items;
    int64_t n; /* pairs */
    const char *seen[64];
    int nseen;
};

static void config_get_visit(void *ud, const char *name, const char *value)
{
    struct config_get_state *st = ud;
    /* Several patterns may match the same directive: answer it once, as Redis 7 does (a name
     * asked for exactly comes under its caller's spelling, so compare without case). */
    for (int i = 0; i < st->nseen; i++)
        if (strcasecmp(st->seen[i], name) == 0)
            return;
    if (st->nseen < 64)
        st->seen[st->nseen++] = name;
    reply_bulk_cstr(&st->items, name);
    reply_bulk_cstr(&st->items, value);
    st->n++;
}

static void config_set(struct cmd_ctx *x)
{
    if (x->argc < 4) {
        reply_subcmd_arity(x, "config", "set");
        return;
    }
    if (x->argc % 2 != 0) {
        reply_syntax_error(x->out); /* a name without its value, as Redis answers it */
        return;
    }
    struct cmd_env *env = x->env;
    char err[256];
    /* Redis 7.0's order: every name is judged first, and the first unknown, immutable or
     * repeated one is the error; only then the values, in order. */
    for (int i = 2; i < x->argc; i += 2) {
        int live = conf_settable(x->argv[i]);
        if (live < 0) {
            reply_errorf(x->out, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'",
                         (int)x->lens[i], x->argv[i]);
            return;
        }
        const char *why = live ? NULL : "can't set immutable config";
        for (int j = 2; j < i && why == NULL; j += 2)
            if (conf_row_name(x->argv[j]) == conf_row_name(x->argv[i]))
                why = "duplicate parameter";
        if (why != NULL) {
            reply_errorf(x->out, "ERR CONFIG SET failed (possibly related to argument '%.*s') - %s",
                         (int)x->lens[i], x->argv[i], why);
            return;
        }
    }
    /* Everything is applied to a copy of the running settings first, then the rules between
     * directives are checked on the result, so a bad pair changes nothing (Redis 7 is atomic)
     * and the order of the pairs does not matter (raising client-query-buffer-limit and
     * proto-max-bulk-len together works either way round). A bad value is named by its
     * directive's own name, as Redis names it. */
    pthread_mutex_lock(&env->conf_lock);
    struct conf trial;
    conf_copy(&trial, env->conf);
    int bad = -1;
    const char *bad_row = NULL;
    for (int i = 2; i < x->argc && bad < 0; i += 2) {
        const char *argv1[1] = {x->argv[i + 1]};
        if (conf_set(&trial, x->argv[i], 1, argv1, 1, err, sizeof(err)) != 0) {
            bad = i;
            bad_row = conf_row_name(x->argv[i]);
        }
    }
    if (bad < 0 && conf_check(&trial, err, sizeof(err)) != 0) {
        /* Only the query buffer and bulk limits can break a rule between live directives. */
        bad = 2;
        for (int i = 2; i < x->argc; i += 2)
            if (arg_is(x, i, "proto-max-bulk-len") || arg_is(x, i, "client-query-buffer-limit")) {
                bad = i;
                break;
            }
        bad_row = conf_row_name(x->argv[bad]);
    }
    conf_free(&trial);
    if (bad >= 0) {
        pthread_mutex_unlock(&env->conf_lock);
        reply_errorf(x->out, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                     bad_row, err);
        return;
    }
    for (int i = 2; i < x->argc; i += 2) {
        const char *argv1[1] = {x->argv[i + 1]};
        conf_set(env->conf, x->argv[i], 1, argv1, 1, err, sizeof(err));
    }
    atomic_store(&env->auth_required,
                 env->conf->requirepass != NULL && env->conf->requirepass[0] != '\0');
    ks_set_maxmemory(env->ks, (uint64_t)env->conf->maxmemory);
    ks_set_eviction(env->ks, (int)env->conf->maxmemory_policy, (int)env->conf->maxmemory_samples,
                    (int)env->conf->lfu_log_factor, (int)env->conf->lfu_decay_time);
    pthread_mutex_unlock(&env->conf_lock);
    if (env->hooks.config_changed != NULL)
        env->hooks.config_changed(env->hooks.ud);
    reply_ok(x->out);
}

static const char *const config_help[] = {
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
    "RESETSTAT", "    Reset statistics reported by the INFO command.",
    "HELP", "    Print this help.",
    NULL,
};

static void cmd_config(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "GET")) {
        if (x->argc < 3) {
            reply_subcmd_arity(x, "config", "get");
            return;
        }
        struct config_get_state st;
        memset(&st, 0, sizeof(st));
        rbuf_init(&st.items);
        pthread_mutex_lock(&x->env->conf_lock);
        for (int i = 2; i < x->argc; i++)
            conf_get(x->env->conf, x->argv[i], config_get_visit, &st);
        pthread_mutex_unlock(&x->env->conf_lock);
        reply_map(x->out, st.n);
        if (st.items.len > 0)
            rbuf_append(x->out, st.items.p, st.items.len);
        rbuf_free(&st.items);
    } else if (arg_is(x, 1, "SET")) {
        config_set(x);
    } else if (arg_is(x, 1, "RESETSTAT")) {
        /* As Redis: INFO's counters, commandstats, errorstats (and LIMITER TOP); not the slow
         * log, not the latency samples. */
        if (x->argc != 2) {
            reply_subcmd_arity(x, "config", "resetstat");
            return;
        }
        stats_reset(x->env);
        reply_ok(x->out);
    } else if (arg_is(x, 1, "HELP")) {
        reply_help_lines(x->out, config_help);
    } else {
        reply_subcmd_unknown(x, "CONFIG");
    }
}

/* ---- persistence and shutdown: the server layer does the work ---- */

static void cmd_shutdown(struct cmd_ctx *x)
{
    int save = -1;
    for (int i = 1; i < x->argc; i++) {
        if (arg_is(x, i, "NOSAVE"))
            save = 0;
        else if (arg_is(x, i, "SAVE"))
            save = 1;
        else if (arg_is(x, i, "NOW") || arg_is(x, i, "FORCE"))
            continue;
        else {
            reply_syntax_error(x->out);
            return;
        }
    }
    if (x->env->hooks.shutdown == NULL) {
        reply_error(x->out, "ERR SHUTDOWN is not available in this context");
        return;
    }
    /* A script past busy-reply-threshold: as Redis, only NOSAVE goes down, stopping every
     * script (written or not: nothing is saved). A save would wait for the script's shards. */
    int64_t busy_ms = __atomic_load_n(&x->env->conf->busy_reply_threshold, __ATOMIC_RELAXED);
    if (save != 0 && script_busy(busy_ms * 1000000)) {
        reply_error(x->out, "BUSY Redis is busy running a script. You can only call SCRIPT KILL "
                            "or SHUTDOWN NOSAVE.");
        return;
    }
    if (save == 0)
        script_kill(0, 1);
    char err[256];
    if (x->env->hooks.shutdown(x->env->hooks.ud, save, err, sizeof(err)) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    /* Like Redis: no reply, the connection just closes as the server goes down. */
    __atomic_fetch_or(&x->s->flags, SESSION_CLOSE_AFTER_REPLY, __ATOMIC_RELAXED);
}

static void save_generic(struct cmd_ctx *x, int background)
{
    if (x->env->hooks.save == NULL) {
        reply_error(x->out, "ERR snapshots are not available in this build");
        return;
    }
    char err[256];
    if (x->env->hooks.save(x->env->hooks.ud, background, err, sizeof(err)) != 0) {
        reply_errorf(x->out, "ERR %s", err);
        return;
    }
    if (background)
        reply_simple(x->out, "Background saving started");
    else
        reply_ok(x->out);
}

static void cmd_save(struct cmd_ctx *x)
{
    save_generic(x, 0);
}

static void cmd_bgsave(struct cmd_ctx *x)
{
    if (x->argc > 2 || (x->argc == 2 && !arg_is(x, 1, "SCHEDULE"))) {
        reply_syntax_error(x->out);
        return;
    }
    save_generic(x, 1);
}

static void cmd_lastsave(struct cmd_ctx *x)
{
    /* Without a persistence layer (tests) the start counts as the last save, as in Redis. */
    if (x->env->hooks.lastsave != NULL)
        reply_int(x->out, x->env->hooks.lastsave(x->env->hooks.ud));
    else
        reply_int(x->out, x->env->start_ns / 1000000000);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_server_table[] = {
    {"ping", -1, CMD_FAST | CMD_PUBSUB_OK, 0, 0, 0, "fast connection", cmd_ping,
     {.summary = "Answers PONG, or echoes a message", .since = "1.0.0", .group = "connection",
      .complexity = "O(1)", .args = "?message:string",
      .tips = "request_policy:all_shards response_policy:all_succeeded"}},
    {"echo", 2, CMD_FAST | CMD_LOADING | CMD_STALE, 0, 0, 0, "fast connection", cmd_echo,
     {.summary = "Returns the given string", .since = "1.0.0", .group = "connection",
      .complexity = "O(1)", .args = "message:string"}},
    {"quit", -1,
     CMD_NOAUTH | CMD_NOQUEUE | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT |
         CMD_PUBSUB_OK,
     0, 0, 0, "fast connection", cmd_quit,
     {.summary = "Closes the connection after the reply", .since = "1.0.0", .group = "connection",
      .complexity = "O(1)", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"reset", 1,
     CMD_NOAUTH | CMD_NOQUEUE | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT |
         CMD_PUBSUB_OK,
     0, 0, 0, "fast connection", cmd_reset,
     {.summary = "Resets the connection to its initial state", .since = "6.2.0",
      .group = "connection", .complexity = "O(1)", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"hello", -1, CMD_NOAUTH | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "fast connection", cmd_hello,
     {.summary = "Handshakes with the server", .since = "6.0.0",
      .group = "connection", .complexity = "O(1)",
      .args = "?arguments{protover:integer ?username_password{username:string "
              "password:string}=AUTH ?clientname:string=SETNAME}", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"auth", -2, CMD_NOAUTH | CMD_FAST | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "fast connection", cmd_auth,
     {.summary = "Authenticates the connection", .since = "1.0.0", .group = "connection",
      .complexity = "O(1)", .args = "?username:string password:string", .extra = CMD_SHOW_ALLOW_BUSY}},
    {"select", 2, CMD_FAST | CMD_LOADING | CMD_STALE, 0, 0, 0, "fast connection", cmd_select,
     {.summary = "Selects the database (only 0 exists)", .since = "1.0.0", .group = "connection",
      .complexity = "O(1)", .args = "index:integer"}},
    {"client", -2, CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0, "slow connection", cmd_client,
     {.summary = "A container for connection commands", .since = "2.4.0", .group = "connection",
      .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER, .sub_arity = client_sub_arity}},
    {"time", 1, CMD_FAST | CMD_LOADING | CMD_STALE, 0, 0, 0, "fast", cmd_time,
     {.summary = "Returns the server time", .since = "2.6.0", .group = "server",
      .complexity = "O(1)", .tips = "nondeterministic_output"}},
    {"config", -2, CMD_ADMIN | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "admin slow dangerous", cmd_config,
     {.summary = "A container for configuration commands", .since = "2.0.0", .group = "server",
      .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
    {"shutdown", -1, CMD_ADMIN | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT | CMD_NO_MULTI, 0, 0, 0,
     "admin slow dangerous", cmd_shutdown,
     {.summary = "Saves the state and stops the server", .since = "1.0.0", .group = "server",
      .complexity = "O(N) when saving, where N is the number of keys",
      .args = "?nosave_save(nosave=NOSAVE save=SAVE) ?now=NOW ?force=FORCE",
      .extra = CMD_SHOW_ALLOW_BUSY}},
    {"save", 1, CMD_ADMIN | CMD_NOSCRIPT | CMD_NO_MULTI, 0, 0, 0, "admin slow dangerous", cmd_save,
     {.summary = "Writes a snapshot and waits for it", .since = "1.0.0", .group = "server",
      .complexity = "O(N) where N is the number of keys", .extra = CMD_SHOW_NO_ASYNC_LOADING}},
    {"bgsave", -1, CMD_ADMIN | CMD_NOSCRIPT, 0, 0, 0, "admin slow dangerous", cmd_bgsave,
     {.summary = "Writes a snapshot in the background", .since = "1.0.0", .group = "server",
      .complexity = "O(N) where N is the number of keys", .args = "?schedule=SCHEDULE",
      .extra = CMD_SHOW_NO_ASYNC_LOADING}},
    {"lastsave", 1, CMD_FAST | CMD_LOADING | CMD_STALE, 0, 0, 0, "admin fast dangerous", cmd_lastsave,
     {.summary = "Returns the Unix time of the last successful snapshot", .since = "1.0.0",
      .group = "server", .complexity = "O(1)", .tips = "nondeterministic_output"}},
};
const int cmd_server_count = (int)(sizeof(cmd_server_table) / sizeof(cmd_server_table[0]));
