/* cmd_dispatch.c - the dispatcher.
 *
 * cmd_execute is the single door between a parsed request and the keyspace. In order it: reads
 * the clock once, finds the command (case-insensitive, cmd_table.c), checks arity, checks AUTH,
 * applies the maxmemory gate (oom_refused below), queues the command if the session is inside
 * MULTI (cmd_tx.c), and runs it (cmd_run.c):
 * hashes the command's keys, locks their shards in ascending order, runs the handler, unlocks,
 * and counts the call for INFO (DESIGN.md). */
#include "cmd_internal.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/script.h"
#include "rlimitd/util.h"
#include "cmd_run.h"
#include "cmd_shard_lock.h"
#include "cmd_table.h"
#include "cmd_tx.h"

/* Runs a command whose arity and permissions were checked, with its shards locked unless
 * all_locked (inside EXEC, or called from a script, which holds them). Counts it. A script's
 * calls stay out of the slow log (the script is logged as one command). */
static void run(struct cmd_env *env, struct session *s, int idx, int argc, char **argv,
                const size_t *lens, struct rbuf *out, int64_t now, int all_locked,
                int from_script)
{
    run_keys(env, s, idx, argc, argv, lens, out, now, all_locked, from_script, NULL, 0, NULL);
}

static void reject_unknown(struct session *s, int argc, char **argv, const size_t *lens,
                           struct rbuf *out)
{
    /* Redis's exact text, including the trailing space after the last quoted argument. */
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "ERR unknown command '%.*s', with args beginning with: ",
                     (int)(lens[0] > 128 ? 128 : lens[0]), argv[0]);
    size_t args = 0;
    for (int i = 1; i < argc && args < 128 && n < (int)sizeof(msg); i++) {
        int room = 128 - (int)args;
        int w = snprintf(msg + n, sizeof(msg) - (size_t)n, "'%.*s' ",
                         (int)(lens[i] > (size_t)room ? (size_t)room : lens[i]), argv[i]);
        if (w < 0)
            break;
        args += (size_t)w;
        n += w;
    }
    /* A NUL inside a name would cut the message short; that is what Redis prints too. */
    reject(s, -1, out, msg);
}

/* Set while this thread's own busy script has the network layer answer the thread's other
 * connections from inside the script (cmd_execute_while_busy). */
static _Thread_local int tl_restricted;

/* Whether Redis 7.0 runs the command while a script is busy (its allow_busy flag: MULTI,
 * DISCARD, WATCH, UNWATCH, AUTH, HELLO, QUIT, RESET, SHUTDOWN; and SCRIPT KILL). */
static int allowed_while_busy(const struct cmd_def *d, int argc, char **argv, const size_t *lens)
{
    if (d->doc.extra & CMD_SHOW_ALLOW_BUSY)
        return 1;
    return argc == 2 && strcmp(d->name, "script") == 0 &&
           util_eq_nocase(argv[1], lens[1], "kill");
}

/* While a script is busy (script_busy_runs), Redis answers BUSY to everything it does not
 * allow. rlimitd keeps serving, on the other threads, what no busy script can reach: commands
 * on keys (queued in MULTI too) and EXEC, whose shards run_keys and EXEC check against the busy
 * scripts' markers, and whole-keyspace commands, which check every marker. A script that
 * declared no keys may build its key names itself, so while one is busy
 * (script_busy_unbounded) every key is out of reach. Commands without keys (PING, INFO, ...)
 * are answered BUSY as in Redis. On the busy script's own thread (restricted) only the allowed
 * commands without keys run: anything else would take shards or the per-command scratch the
 * script is using. Returns 1 if answered. */
static int busy_refused(struct session *s, int idx, int argc, char **argv, const size_t *lens,
                        struct rbuf *out)
{
    const struct cmd_def *d = &cmd_defs[idx];
    int first, step;
    int nkeys = d->flags & CMD_KEYDERIVED ? 1 : key_span(d, argc, argv, lens, &first, &step);
    int exec = strcmp(d->name, "exec") == 0;
    if (allowed_while_busy(d, argc, argv, lens) && (!tl_restricted || nkeys == 0))
        return 0;
    if (!tl_restricted && (nkeys > 0 || exec || (d->flags & CMD_ALLSHARDS)) &&
        atomic_load_explicit(&script_busy_unbounded, memory_order_relaxed) == 0)
        return 0;
    if (exec) {
        /* Redis: the transaction is discarded with the reason. */
        multi_discard(s);
        watch_release_all(s);
        reject(s, idx, out, "EXECABORT Transaction discarded because of: " BUSY_TEXT);
        return 1;
    }
    reject(s, idx, out, BUSY_TEXT);
    return 1;
}

void cmd_execute_while_busy(struct cmd_env *env, struct session *s, int argc, char **argv,
                            const size_t *lens, struct rbuf *out)
{
    tl_restricted = 1;
    cmd_execute(env, s, argc, argv, lens, out);
    tl_restricted = 0;
}

/* Redis 7.0's refusal in the RESP2 subscribed state, naming the command as Redis's fullname
 * does (a container's subcommand as "client|list"). */
static void pubsub_refused(struct session *s, int idx, int argc, char **argv,
                           const size_t *lens, struct rbuf *out)
{
    const struct cmd_def *d = &cmd_defs[idx];
    char err[256];
    if (argc >= 2 && strcmp(d->name, "pubsub") == 0) {
        const char *e = pubsub_subcmd_error(argc, argv, lens, err, sizeof(err));
        if (e != NULL) {
            reject(s, idx, out, e);
            return;
        }
    }
    char name[96];
    int n = snprintf(name, sizeof(name), "%s", d->name);
    if ((d->doc.extra & CMD_SHOW_CONTAINER) && argc >= 2 && lens[1] < 48) {
        name[n++] = '|';
        for (size_t i = 0; i < lens[1]; i++)
            name[n++] = (char)((argv[1][i] >= 'A' && argv[1][i] <= 'Z') ? argv[1][i] + 32
                                                                          : argv[1][i]);
        name[n] = '\0';
    }
    char msg[256];
    snprintf(msg, sizeof(msg),
             "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
             "RESET are allowed in this context", name);
    reject(s, idx, out, msg);
}

#define OOM_TEXT "OOM command not allowed when used memory > 'maxmemory'."

/* Redis 7.0's maxmemory gate, before a command runs or is queued: over the limit, a command
 * that may grow memory (denyoom) is refused; inside MULTI so is every command but EXEC,
 * DISCARD, QUIT and RESET (queueing costs memory), and EXEC itself when it queued a denyoom
 * command. Used memory includes every connection's buffers and queued transaction, as Redis's
 * does (ks_count_memory); what this session queued since its connection last published them
 * is added here. Free when maxmemory is 0: the flags decide before memory is summed. */
/* Redis 7.0 replaces EVAL's flags by a shebang script's own: without `allow-oom` or `no-writes`
 * such a script is denyoom, refused up front over maxmemory with the plain OOM text (7.0.15's;
 * later versions word it differently). A script without a shebang is checked by its calls. */
static int script_denyoom(const struct cmd_def *d, int argc, char **argv, const size_t *lens)
{
    if (argc < 2 || strncmp(d->name, "eval", 4) != 0) /* eval, eval_ro, evalsha, evalsha_ro */
        return 0;
    unsigned flags = 0;
    char err[160];
    if (strncmp(d->name, "evalsha", 7) == 0) {
        if (lens[1] != 40)
            return 0; /* NOSCRIPT, from EVALSHA itself */
        char sha[41];
        for (int i = 0; i < 40; i++) {
            char c = argv[1][i];
            sha[i] = (char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
        }
        sha[40] = '\0';
        int known = script_lookup(sha);
        if (known >= 0) {
            flags = (unsigned)known;
        } else {
            size_t len;
            char *body = script_cache_get(sha, 40, &len);
            if (body == NULL)
                return 0;
            if (script_shebang(body, len, &flags, err, sizeof(err)) != 0)
                flags = 0;
            free(body);
        }
    } else if (script_shebang(argv[1], lens[1], &flags, err, sizeof(err)) != 0) {
        return 0; /* EVAL answers the shebang's error */
    }
    return (flags & SCRIPT_FLAG_SHEBANG) &&
           !(flags & (SCRIPT_FLAG_ALLOW_OOM | SCRIPT_FLAG_NO_WRITES));
}

static int oom_refused(const struct cmd_env *env, const struct session *s,
                       const struct cmd_def *d, int argc, char **argv, const size_t *lens)
{
    int in_multi = (s->flags & SESSION_IN_MULTI) != 0;
    if (!(d->flags & (CMD_DENYOOM | CMD_NOSCRIPT)) && !in_multi)
        return 0; /* most reads: decided by the flags alone */
    int64_t max = __atomic_load_n(&env->conf->maxmemory, __ATOMIC_RELAXED);
    if (max <= 0)
        return 0;
    int denyoom = (d->flags & (CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY)) == CMD_DENYOOM;
    int may_grow = (d->flags & CMD_DENYOOM) != 0; /* the limiters too: their new keys */
    if (!may_grow && (d->flags & CMD_NOSCRIPT) && strncmp(d->name, "eval", 4) == 0) {
        may_grow = 1; /* evict first, as Redis before any command: the script's calls may write */
        denyoom = script_denyoom(d, argc, argv, lens);
    }
    if (!may_grow && !in_multi)
        return 0;
    if (in_multi && !denyoom) {
        if (strcmp(d->name, "exec") == 0)
            denyoom = (s->flags & SESSION_MULTI_DENYOOM) != 0;
        else
            denyoom = strcmp(d->name, "discard") != 0 && strcmp(d->name, "quit") != 0 &&
                      strcmp(d->name, "reset") != 0;
        if (!denyoom && !may_grow)
            return 0;
    }
    /* Used memory counts every connection's buffers and queue as last published (after each
     * batch); this session's queue may have grown since. */
    uint64_t held = in_multi && s->multi_mem > s->multi_mem_counted
                        ? s->multi_mem - s->multi_mem_counted : 0;
    /* Redis's performEvictions first: the policy frees what it may (CONFIG.md,
     * maxmemory-policy); the store refuses a limiter's new key if that was not enough. */
    uint64_t evicted = 0;
    int over = ks_evict(env->ks, held, clock_now_ns(), &evicted) != 0;
    if (evicted != 0 && s->stats != NULL)
        stats_add(&s->stats->evicted_keys, evicted);
    return denyoom && over;
}

static void execute(struct cmd_env *env, struct session *s, int argc, char **argv,
                    const size_t *lens, struct rbuf *out);

#define REPLY_MODES (SESSION_REPLY_OFF | SESSION_REPLY_SKIP_NEXT | SESSION_REPLY_SKIP)

/* CLIENT REPLY OFF / SKIP: the command runs and its reply is dropped, except what Redis sends
 * as pushes whatever the mode, the subscribe commands' notifications. Kept out of line: inlined,
 * its registers made cmd_execute save and restore three on every command. */
static __attribute__((noinline, cold)) void execute_quietly(struct cmd_env *env, struct session *s,
                                                            int argc, char **argv,
                                                            const size_t *lens, struct rbuf *out)
{
    if (s->flags & SESSION_REPLY_SKIP_NEXT)
        __atomic_fetch_xor(&s->flags, SESSION_REPLY_SKIP_NEXT | SESSION_REPLY_SKIP,
                           __ATOMIC_RELAXED);
    size_t mark = out->len;
    execute(env, s, argc, argv, lens, out);
    int idx = cmd_lookup(argv[0], lens[0]);
    size_t n = idx >= 0 ? strlen(cmd_defs[idx].name) : 0;
    int notifies = n >= 9 && strcmp(cmd_defs[idx].name + n - 9, "subscribe") == 0;
    if ((s->flags & (SESSION_REPLY_OFF | SESSION_REPLY_SKIP)) && !notifies)
        out->len = mark;
    __atomic_fetch_and(&s->flags, ~(unsigned)SESSION_REPLY_SKIP, __ATOMIC_RELAXED);
}

void cmd_execute(struct cmd_env *env, struct session *s, int argc, char **argv,
                 const size_t *lens, struct rbuf *out)
{
    if (__builtin_expect((s->flags & REPLY_MODES) != 0, 0))
        execute_quietly(env, s, argc, argv, lens, out);
    else
        execute(env, s, argc, argv, lens, out);
}

static void execute(struct cmd_env *env, struct session *s, int argc, char **argv,
                    const size_t *lens, struct rbuf *out)
{
    if (argc <= 0)
        return;
    /* The protocol every reply of this command is written in (reply.h); HELLO changes both. */
    out->resp = s->resp;
    if (s->stats != NULL)
        stats_add(&s->stats->commands, 1);

    int idx = cmd_lookup(argv[0], lens[0]);
    if (idx < 0) {
        reject_unknown(s, argc, argv, lens, out);
        return;
    }
    const struct cmd_def *d = &cmd_defs[idx];
    if (!arity_ok(d, argc)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "ERR wrong number of arguments for '%s' command", d->name);
        reject(s, idx, out, msg);
        return;
    }
    const char *sub;
    if (d->doc.sub_arity != NULL && (sub = d->doc.sub_arity(argc, argv, lens)) != NULL) {
        char msg[160];
        snprintf(msg, sizeof(msg), "ERR wrong number of arguments for '%s|%s' command", d->name,
                 sub);
        reject(s, idx, out, msg);
        return;
    }
    if (!s->authed && !(d->flags & CMD_NOAUTH) &&
        atomic_load_explicit(&env->auth_required, memory_order_relaxed)) {
        reject(s, idx, out, "NOAUTH Authentication required.");
        return;
    }
    if ((atomic_load_explicit(&script_busy_runs, memory_order_relaxed) != 0 || tl_restricted) &&
        busy_refused(s, idx, argc, argv, lens, out))
        return;
    if ((s->flags & SESSION_IN_MULTI) && (d->flags & CMD_NO_MULTI)) {
        reject(s, idx, out, "ERR Command not allowed inside a transaction");
        return;
    }
    ks_evict_forget(); /* only this command's own ks_evict may admit its new keys */
    if (oom_refused(env, s, d, argc, argv, lens)) {
        if ((s->flags & SESSION_IN_MULTI) && strcmp(d->name, "exec") == 0) {
            /* Redis answers a refused EXEC so, and the transaction and its WATCHes are gone. */
            multi_discard(s);
            watch_release_all(s);
            reject(s, idx, out, "EXECABORT Transaction discarded because of: " OOM_TEXT);
            return;
        }
        reject(s, idx, out, OOM_TEXT);
        return;
    }
    if ((s->flags & SESSION_PUBSUB) && s->resp == 2 && !(d->flags & CMD_PUBSUB_OK)) {
        pubsub_refused(s, idx, argc, argv, lens, out);
        return;
    }
    if ((s->flags & SESSION_IN_MULTI) && !(d->flags & CMD_NOQUEUE)) {
        multi_queue(env, s, idx, argc, argv, lens);
        reply_simple(out, "QUEUED");
        return;
    }
    /* The command's one clock read (a queued command reads it when EXEC runs it). */
    run(env, s, idx, argc, argv, lens, out, clock_now_ns(), 0, 0);
}
