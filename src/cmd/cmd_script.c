/* cmd_script.c - EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (docs/COMMANDS.md, Scripting).
 *
 * The dispatcher has already locked the shards of the declared KEYS (CMD_NUMKEYS), in ascending
 * order like any multi-key command, and read the clock once: the whole script runs under those
 * locks and sees that one reading (cmd_ctx.now). The script itself runs in this thread's Lua
 * engine (src/script); its calls come back through cmd_from_script (cmd_script_hold.c), which
 * this file hands the engine with each run. */
#include "cmd_internal.h"
#include "rlimitd/alloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/script.h"
#include "cmd_run.h"
#include "cmd_shard_lock.h"

#define KEYS_ON_STACK 16

/* Checks numkeys (argv[2]) as Redis does. Returns it, or -1 after replying the error. */
static int numkeys(struct cmd_ctx *x)
{
    int64_t n;
    if (arg_i64(x, 2, &n) != 0)
        return -1;
    if (n < 0) {
        reply_error(x->out, "ERR Number of keys can't be negative");
        return -1;
    }
    if (n > x->argc - 3) {
        reply_error(x->out, "ERR Number of keys can't be greater than number of args");
        return -1;
    }
    return (int)n;
}

/* Lua's memory counts toward maxmemory (the keyspace's used memory). */
static void count_memory(struct cmd_ctx *x)
{
    ks_set_external_memory(x->env->ks, script_engine_memory() + script_cache_bytes());
}

/* One run of the script with its hold on the keyspace (every shard if all). Returns 1 if the
 * run was stopped to be run again holding every shard (cmd_script_hold.c). */
static int run_held(struct cmd_ctx *x, const char *sha, struct ks_key *keys, int nk, int ro,
                    int allow_oom, int all)
{
    struct script_hold h;
    script_hold_init(&h, x, keys, nk, all);
    h.read_only = ro;
    h.oom_refuse = !allow_oom && ks_over_maxmemory(x->env->ks);
    script_run(sha, cmd_from_script, &h, h.started, x->argv + 3, x->lens + 3, nk,
               x->argv + 3 + nk, x->lens + 3 + nk, x->argc - 3 - nk, x->out);
    script_hold_release(&h);
    if (!h.rerun && script_reply_counted())
        run_error_counted();
    return h.rerun;
}

static void eval_body(struct cmd_ctx *x, int by_sha, int read_only)
{
    int nk = numkeys(x);
    if (nk < 0)
        return;
    char sha[41];
    int flags;
    if (by_sha) {
        if (x->lens[1] != 40) {
            reply_error(x->out, "NOSCRIPT No matching script. Please use EVAL.");
            return;
        }
        for (int i = 0; i < 40; i++)
            sha[i] = (char)tolower((unsigned char)x->argv[1][i]);
        sha[40] = '\0';
        flags = script_lookup(sha);
        if (flags < 0) {
            /* Cached by another thread or connection: compile it here on first use. */
            size_t len;
            char *body = script_cache_get(sha, 40, &len);
            if (body == NULL) {
                reply_error(x->out, "NOSCRIPT No matching script. Please use EVAL.");
                return;
            }
            flags = script_compile(sha, body, len, x->out);
            free(body);
            if (flags < 0)
                return;
        }
    } else {
        script_sha1hex(x->argv[1], x->lens[1], sha);
        flags = script_lookup(sha);
        if (flags < 0) {
            flags = script_compile(sha, x->argv[1], x->lens[1], x->out);
            if (flags < 0)
                return;
            script_cache_put(x->argv[1], x->lens[1], sha);
        }
    }

    /* The dispatcher's key array is per-session scratch that the script's own calls reuse:
     * keep a copy. */
    struct ks_key stack_keys[KEYS_ON_STACK];
    struct ks_key *keys = stack_keys;
    if (nk > KEYS_ON_STACK) {
        keys = xmalloc(sizeof(*keys) * (size_t)nk);
    }
    if (nk > 0)
        memcpy(keys, x->keys, sizeof(*keys) * (size_t)nk);
    size_t out_start = x->out->len;
    int ro = read_only || (flags & SCRIPT_FLAG_NO_WRITES);
    int allow_oom = (flags & SCRIPT_FLAG_ALLOW_OOM) != 0;
    if (run_held(x, sha, keys, nk, ro, allow_oom, 0)) {
        /* It needed a shard another client held, before writing: run it again holding every
         * shard. The dispatcher's shards are given back first and taken again after, so that
         * every shard is taken in ascending order with nothing else held. */
        x->out->len = out_start;
        struct keyspace *ks = x->env->ks;
        struct shard_set declared = {{0}}, all = {{0}};
        for (int i = 0; i < nk; i++)
            shard_set_add(&declared, ks_shard(ks, &keys[i]));
        for (unsigned shard = 0; shard < ks_nshards(ks); shard++)
            shard_set_add(&all, shard);
        lock_set(ks, &declared, 0);
        if (lock_set_or_busy(x->env, &all) != 0) {
            reply_error(x->out, BUSY_TEXT);
        } else {
            run_held(x, sha, keys, nk, ro, allow_oom, 1);
            lock_set(ks, &all, 0);
        }
        lock_set(ks, &declared, 1); /* the dispatcher releases them after this handler */
    }
    if (keys != stack_keys)
        free(keys);
    count_memory(x);
}

/* The engine is held from the lookup to the end of the run: a SCRIPT FLUSH on another thread
 * meanwhile cannot take the function found (script_enter). */
static void eval_generic(struct cmd_ctx *x, int by_sha, int read_only)
{
    script_enter();
    eval_body(x, by_sha, read_only);
    script_leave();
}

static void cmd_eval(struct cmd_ctx *x)
{
    eval_generic(x, 0, 0);
}

static void cmd_evalsha(struct cmd_ctx *x)
{
    eval_generic(x, 1, 0);
}

static void cmd_eval_ro(struct cmd_ctx *x)
{
    eval_generic(x, 0, 1);
}

static void cmd_evalsha_ro(struct cmd_ctx *x)
{
    eval_generic(x, 1, 1);
}

static const char *const script_help[] = {
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
    NULL,
};

static void cmd_script(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "load")) {
        if (x->argc != 3) {
            reply_subcmd_arity(x, "script", "load");
            return;
        }
        char sha[41];
        script_sha1hex(x->argv[2], x->lens[2], sha);
        script_enter();
        int known =
            script_lookup(sha) >= 0 || script_compile(sha, x->argv[2], x->lens[2], x->out) >= 0;
        script_leave();
        if (!known)
            return;
        script_cache_put(x->argv[2], x->lens[2], sha);
        reply_bulk(x->out, sha, 40);
        count_memory(x);
    } else if (arg_is(x, 1, "exists")) {
        if (x->argc < 3) {
            reply_subcmd_arity(x, "script", "exists");
            return;
        }
        reply_array(x->out, x->argc - 2);
        for (int i = 2; i < x->argc; i++)
            reply_int(x->out, script_cache_exists(x->argv[i], x->lens[i]));
    } else if (arg_is(x, 1, "flush")) {
        if (x->argc > 3) {
            reply_error(x->out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        if (x->argc == 3 && !arg_is(x, 2, "sync") && !arg_is(x, 2, "async")) {
            reply_error(x->out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        /* Both modes free the sources and every idle thread's compiled functions at once (a
         * thread inside a script drops them at its next lookup), so ASYNC and SYNC behave the
         * same. */
        script_flush();
        count_memory(x);
        reply_ok(x->out);
    } else if (arg_is(x, 1, "kill")) {
        if (x->argc != 2) {
            reply_subcmd_arity(x, "script", "kill");
            return;
        }
        int64_t ms = __atomic_load_n(&x->env->conf->busy_reply_threshold, __ATOMIC_RELAXED);
        switch (script_kill(ms * 1000000, 0)) {
        case SCRIPT_KILLED:
            reply_ok(x->out);
            break;
        case SCRIPT_UNKILLABLE:
            reply_error(x->out,
                        "UNKILLABLE Sorry the script already executed write commands against the "
                        "dataset. You can either wait the script termination or kill the server "
                        "in a hard way using the SHUTDOWN NOSAVE command.");
            break;
        default:
            reply_error(x->out, "NOTBUSY No scripts in execution right now.");
            break;
        }
    } else if (arg_is(x, 1, "help")) {
        reply_help_lines(x->out, script_help);
    } else {
        reply_subcmd_unknown(x, "SCRIPT");
    }
}

void cmd_scripts_stop_unwritten(void)
{
    script_kill(0, 0);
}

void cmd_scripts_stop_all(void)
{
    script_kill(0, 1);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_script_table[] = {
    {"eval", -3,
     CMD_NOSCRIPT | CMD_STALE | CMD_NUMKEYS,
     0, 0, 0, "slow scripting", cmd_eval,
     {.summary = "Execute a Lua script server side", .since = "2.6.0", .group = "scripting",
      .complexity = "Depends on the script that is executed.",
      .args = "script:string numkeys:integer ?*key:key ?*arg:string",
      .keyflags = "RW access update",
      .notes = "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
      .extra = CMD_SHOW_SKIP_MONITOR | CMD_SHOW_NO_MANDATORY_KEYS}},
    {"evalsha", -3,
     CMD_NOSCRIPT | CMD_STALE | CMD_NUMKEYS,
     0, 0, 0, "slow scripting", cmd_evalsha,
     {.summary = "Execute a Lua script server side", .since = "2.6.0", .group = "scripting",
      .complexity = "Depends on the script that is executed.",
      .args = "sha1:string numkeys:integer ?*key:key ?*arg:string",
      .keyflags = "RW access update", .extra = CMD_SHOW_SKIP_MONITOR | CMD_SHOW_NO_MANDATORY_KEYS}},
    {"eval_ro", -3,
     CMD_NOSCRIPT | CMD_STALE | CMD_NUMKEYS | CMD_READONLY,
     0, 0, 0, "slow scripting", cmd_eval_ro,
     {.summary = "Execute a read-only Lua script server side", .since = "7.0.0",
      .group = "scripting", .complexity = "Depends on the script that is executed.",
      .args = "script:string numkeys:integer ?*key:key ?*arg:string", .keyflags = "RO access",
      .notes = "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
      .extra = CMD_SHOW_SKIP_MONITOR | CMD_SHOW_NO_MANDATORY_KEYS}},
    {"evalsha_ro", -3,
     CMD_NOSCRIPT | CMD_STALE | CMD_NUMKEYS | CMD_READONLY,
     0, 0, 0, "slow scripting", cmd_evalsha_ro,
     {.summary = "Execute a read-only Lua script server side", .since = "7.0.0",
      .group = "scripting", .complexity = "Depends on the script that is executed.",
      .args = "sha1:string numkeys:integer ?*key:key ?*arg:string", .keyflags = "RO access",
      .extra = CMD_SHOW_SKIP_MONITOR | CMD_SHOW_NO_MANDATORY_KEYS}},
    {"script", -2,
     CMD_NOSCRIPT,
     0, 0, 0, "slow scripting", cmd_script,
     {.summary = "A container for Lua scripts management commands", .since = "2.6.0",
      .group = "scripting", .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
};
const int cmd_script_count = (int)(sizeof(cmd_script_table) / sizeof(cmd_script_table[0]));
