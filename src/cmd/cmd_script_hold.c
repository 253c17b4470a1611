/* cmd_script_hold.c - a running script's hold on the keyspace (struct script_hold,
 * cmd_internal.h) and the door its redis.call comes through: cmd_from_script, which EVAL hands
 * the engine with each run (script.h's script_call_fn). A call is checked as a client's command
 * is (lookup, arity) and as a script's (no-script commands, read-only scripts, declared keys),
 * then runs with the shards the EVAL already holds (DESIGN.md "Scripting", "Lock order"). */
#include "cmd_internal.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/script.h"
#include "cmd_run.h"
#include "cmd_shard_lock.h"
#include "cmd_table.h"

/* ---- redis.call ---- */

static int bit_is(const uint64_t *set, unsigned shard)
{
    return (set[shard / 64] >> (shard % 64)) & 1;
}

static void mark(struct script_hold *h, unsigned shard)
{
    if (h->x->env->script_since != NULL)
        atomic_store(&h->x->env->script_since[shard], h->started);
}

static int set_max(const struct shard_set *set)
{
    for (int w = SHARD_WORDS - 1; w >= 0; w--)
        if (set->w[w] != 0)
            return w * 64 + 63 - __builtin_clzll(set->w[w]);
    return -1;
}

/* Inside EXEC: a shard the transaction holds is the script's to use; one it lacks is locked
 * and joins the transaction's set, which releases it after the last queued command (a later
 * command of the same transaction finds it still held). Waiting as hold_more does above every
 * held shard; below, one trylock, and when that fails before anything in the transaction
 * wrote, the transaction runs again holding every shard (er->rerun). After a write, a wait of
 * at most 10 ms, since the holder may be waiting for one of ours. */
static int hold_in_tx(struct script_hold *h, struct exec_run *er, unsigned shard)
{
    struct cmd_env *env = h->x->env;
    if (!bit_is(er->set.w, shard)) {
        if ((int)shard > set_max(&er->set)) {
            if (lock_or_busy(env, shard) != 0)
                return -1;
        } else if (ks_trylock(env->ks, shard) != 0) {
            if (!er->wrote && !h->wrote) {
                er->rerun = 1;
                return -1;
            }
            if (ks_timedlock(env->ks, shard, clock_mono_ns() + 10 * 1000000) != 0)
                return -1;
        }
        shard_set_add(&er->set, shard);
    }
    h->extra[shard / 64] |= 1ull << (shard % 64);
    h->nextra++;
    mark(h, shard);
    return 0;
}

/* Takes a shard the script did not declare for the rest of its run (recorded in `extra`, with
 * its BUSY marker). Waiting only for a shard above every held one, so lock order stays
 * ascending, and only as a client's command waits (not past a busy script's threshold);
 * otherwise one trylock. -1 if it cannot be had so. Inside EXEC, hold_in_tx. */
static int hold_more(struct script_hold *h, unsigned shard)
{
    struct keyspace *ks = h->x->env->ks;
    if (h->all || bit_is(h->held, shard) || bit_is(h->extra, shard))
        return 0;
    if (h->x->all_locked)
        return h->x->s->exec != NULL ? hold_in_tx(h, h->x->s->exec, shard) : -1;
    if ((int)shard > h->max_held) {
        if (lock_or_busy(h->x->env, shard) != 0)
            return -1; /* a busy script holds it */
        h->max_held = (int)shard;
    } else if (ks_trylock(ks, shard) != 0) {
        return -1;
    }
    h->extra[shard / 64] |= 1ull << (shard % 64);
    h->nextra++;
    mark(h, shard);
    return 0;
}

/* collect_keys for a command a script runs (not CMD_KEYDERIVED): a declared key gets the hash
 * the EVAL computed, any other is hashed here and its shard taken (hold_more). Returns the
 * count, or -1 if a shard could not be taken. */
static int collect_script_keys(struct script_hold *h, const struct cmd_def *d, int argc,
                               char **argv, const size_t *lens, struct ks_key **keys)
{
    struct keyspace *ks = h->x->env->ks;
    int first, step;
    int n = key_span(d, argc, argv, lens, &first, &step);
    struct ks_key *k = scratch_keys(n);
    for (int i = 0; i < n; i++) {
        int a = first + i * step, j = 0;
        while (j < h->nkeys &&
               (h->keys[j].len != lens[a] || memcmp(h->keys[j].p, argv[a], lens[a]) != 0))
            j++;
        if (j < h->nkeys) {
            k[i] = (struct ks_key){.p = argv[a], .len = lens[a], .hash = h->keys[j].hash};
            continue;
        }
        ks_key_init(ks, &k[i], argv[a], lens[a]);
        if (hold_more(h, ks_shard(ks, &k[i])) != 0)
            return -1;
    }
    *keys = k;
    return n;
}

/* A shard the script needs is held by another client, and taking it now could deadlock. A
 * script that has not written is stopped (no pcall catches it) and EVAL runs it again holding
 * every shard (h->rerun); one that wrote cannot be undone and gets an error. */
static void shard_unavailable(struct script_hold *h, struct rbuf *out)
{
    if (h->x->all_locked && h->x->s->exec != NULL && h->x->s->exec->rerun) {
        script_stop_for_rerun();
        reply_error(out, "ERR transaction stopped to run again holding every shard");
    } else if (h->x->all_locked) {
        reply_error(out, "ERR Script attempted to access a key in a shard held by another "
                         "client inside MULTI after a write; retry the transaction");
    } else if (!h->wrote) {
        h->rerun = 1;
        script_stop_for_rerun();
        reply_error(out, "ERR script stopped to run again holding every shard");
    } else {
        reply_error(out, "ERR Script attempted to access a key in a shard held by another "
                         "client after writing; retry the script");
    }
}

void cmd_from_script(void *hold, int argc, char **argv, const size_t *lens, struct rbuf *out)
{
    struct script_hold *h = hold;
    struct cmd_ctx *x = h->x;
    struct session *s = x->s;
    int idx = cmd_lookup(argv[0], lens[0]);
    size_t start = out->len;
    if (idx < 0) {
        reply_error(out, "ERR Unknown Redis command called from script");
        count_error(s, out, start);
        return;
    }
    const struct cmd_def *d = &cmd_defs[idx];
    const char *refused = NULL;
    if (!arity_ok(d, argc))
        refused = "ERR Wrong number of args calling Redis command from script";
    else if (d->flags & CMD_NOSCRIPT)
        refused = "ERR This Redis command is not allowed from script";
    else if ((d->flags & CMD_WRITE) && h->read_only)
        refused = "ERR Write commands are not allowed from read-only scripts.";
    else if (h->oom_refuse && !h->wrote &&
             (d->flags & (CMD_DENYOOM | CMD_OOM_NEW_KEY_ONLY)) == CMD_DENYOOM)
        /* Redis refuses it only before the script's first write: it cannot stop half-way. */
        refused = "OOM command not allowed when used memory > 'maxmemory'.";
    else if (d->flags & CMD_ALLSHARDS)
        refused = "ERR This command visits every shard and is not allowed from scripts in rlimitd";
    if (refused != NULL) {
        /* As Redis 7.0 counts a command its script could not run: its error now (INFO
         * errorstats, once: the script's reply carrying it is not counted again), and a
         * rejected call of the command (INFO commandstats). */
        reply_error(out, refused);
        count_error(s, out, start);
        if (s->stats != NULL)
            stats_add(&s->stats->cmd[idx].rejected_calls, 1);
        return;
    }
    struct ks_key *keys;
    int n;
    if (d->flags & CMD_KEYDERIVED) {
        /* ISALLOWED's state key, derived from its arguments: its shard is taken here. */
        n = collect_keys(d, s, argc, argv, lens, x->env->ks, &keys);
        for (int i = 0; i < n; i++)
            if (hold_more(h, ks_shard(x->env->ks, &keys[i])) != 0) {
                shard_unavailable(h, out);
                return;
            }
    } else if ((n = collect_script_keys(h, d, argc, argv, lens, &keys)) < 0) {
        shard_unavailable(h, out);
        return;
    }
    if (d->flags & CMD_WRITE) {
        h->wrote = 1;
        if (s->exec != NULL)
            s->exec->wrote = 1;
        script_note_write();
    }
    int last = s->last_cmd;
    run_keys(x->env, s, idx, argc, argv, lens, out, x->now, 1, 1, keys, n, NULL);
    s->last_cmd = last;
}

void script_hold_init(struct script_hold *h, struct cmd_ctx *x, struct ks_key *keys, int n,
                      int all)
{
    int64_t start = clock_mono_ns();
    memset(h, 0, sizeof(*h));
    h->started = start;
    h->x = x;
    h->keys = keys;
    h->nkeys = n;
    h->max_held = -1;
    h->all = all;
    if (all) {
        for (unsigned shard = 0; shard < ks_nshards(x->env->ks); shard++)
            mark(h, shard);
        return;
    }
    for (int i = 0; i < n; i++) {
        unsigned shard = ks_shard(x->env->ks, &keys[i]);
        h->held[shard / 64] |= 1ull << (shard % 64);
        if ((int)shard > h->max_held)
            h->max_held = (int)shard;
        mark(h, shard);
    }
}

void script_hold_release(struct script_hold *h)
{
    struct cmd_env *env = h->x->env;
    struct keyspace *ks = env->ks;
    if (env->script_since != NULL) {
        if (h->all) {
            for (unsigned shard = 0; shard < ks_nshards(ks); shard++)
                atomic_store(&env->script_since[shard], 0);
        } else {
            for (int i = 0; i < h->nkeys; i++)
                atomic_store(&env->script_since[ks_shard(ks, &h->keys[i])], 0);
        }
    }
    for (unsigned w = 0; w < SHARD_WORDS && h->nextra > 0; w++) {
        uint64_t bits = h->extra[w];
        while (bits != 0) {
            unsigned shard = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (env->script_since != NULL)
                atomic_store(&env->script_since[shard], 0);
            if (!h->x->all_locked) /* inside EXEC the transaction releases it */
                ks_unlock(ks, shard);
            h->nextra--;
        }
        h->extra[w] = 0;
    }
}
