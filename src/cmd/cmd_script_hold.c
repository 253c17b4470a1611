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
#include "cmd_table.h"

/* ---- redis.call ---- */

static int bit_is(const uint64_t *set, unsigned shard)
{
    return (set[shard / 64] >> (shard % 64)) & 1;
}

static int declared(const struct script_hold *h, const struct ks_key *k)
{
    for (int i = 0; i < h->nkeys; i++)
        if (h->keys[i].hash == k->hash && h->keys[i].len == k->len &&
            memcmp(h->keys[i].p, k->p, k->len) == 0)
            return 1;
    return 0;
}

/* collect_keys for a command a script runs (not CMD_KEYDERIVED): each key is one the EVAL
 * declared, found by its bytes and given that key's hash. Returns -1 if one is not declared. */
static int collect_declared(const struct script_hold *h, const struct cmd_def *d, int argc,
                            char **argv, const size_t *lens, struct ks_key **keys)
{
    int first, step;
    int n = key_span(d, argc, argv, lens, &first, &step);
    struct ks_key *k = scratch_keys(n);
    for (int i = 0; i < n; i++) {
        int a = first + i * step, j = 0;
        while (j < h->nkeys &&
               (h->keys[j].len != lens[a] || memcmp(h->keys[j].p, argv[a], lens[a]) != 0))
            j++;
        if (j == h->nkeys)
            return -1;
        k[i] = (struct ks_key){.p = argv[a], .len = lens[a], .hash = h->keys[j].hash};
    }
    *keys = k;
    return n;
}

/* Takes an ISALLOWED state key's shard for the rest of the script (script_hold). */
static int hold_derived(struct script_hold *h, unsigned shard)
{
    struct keyspace *ks = h->x->env->ks;
    if (bit_is(h->held, shard) || bit_is(h->extra, shard))
        return 0;
    if (h->x->all_locked)
        return -1; /* inside EXEC: the transaction's set is fixed */
    if ((int)shard > h->max_held) {
        ks_lock(ks, shard);
        h->max_held = (int)shard;
    } else if (ks_trylock(ks, shard) != 0) {
        return -1;
    }
    h->extra[shard / 64] |= 1ull << (shard % 64);
    h->nextra++;
    return 0;
}

void cmd_from_script(void *hold, int argc, char **argv, const size_t *lens, struct rbuf *out)
{
    struct script_hold *h = hold;
    struct cmd_ctx *x = h->x;
    struct session *s = x->s;
    int idx = cmd_lookup(argv[0], lens[0]);
    if (idx < 0) {
        reply_error(out, "ERR Unknown Redis command called from script");
        return;
    }
    const struct cmd_def *d = &cmd_defs[idx];
    if (!arity_ok(d, argc)) {
        reply_error(out, "ERR Wrong number of args calling Redis command from script");
        return;
    }
    if (d->flags & CMD_NOSCRIPT) {
        reply_error(out, "ERR This Redis command is not allowed from script");
        return;
    }
    if ((d->flags & CMD_WRITE) && h->read_only) {
        reply_error(out, "ERR Write commands are not allowed from read-only scripts.");
        return;
    }
    if (d->flags & CMD_ALLSHARDS) {
        reply_error(out, "ERR This command visits every shard and is not allowed from scripts "
                         "in rlimitd");
        return;
    }
    struct ks_key *keys;
    int n;
    if (d->flags & CMD_KEYDERIVED) {
        n = collect_keys(d, s, argc, argv, lens, x->env->ks, &keys);
    } else {
        /* Every key must be a declared one, whose hash the EVAL already computed. */
        n = collect_declared(h, d, argc, argv, lens, &keys);
        if (n < 0) {
            reply_error(out, "ERR Script attempted to access a key not declared in KEYS "
                             "(rlimitd locks exactly the declared keys)");
            return;
        }
    }
    for (int i = 0; i < n && (d->flags & CMD_KEYDERIVED); i++) {
        /* The named key must be declared; the derived state key's shard is taken here. */
        struct ks_key named;
        ks_key_init(x->env->ks, &named, argv[1], lens[1]);
        if (!declared(h, &named)) {
            reply_error(out, "ERR Script attempted to access a key not declared in KEYS "
                             "(rlimitd locks exactly the declared keys)");
            return;
        }
        if (hold_derived(h, ks_shard(x->env->ks, &keys[i]))) {
            reply_error(out, "ERR ISALLOWED's state key is in a shard held by another client; "
                             "retry the script");
            return;
        }
    }
    if (d->flags & CMD_WRITE) {
        h->wrote = 1;
        script_note_write();
    }
    int last = s->last_cmd;
    run_keys(x->env, s, idx, argc, argv, lens, out, x->now, 1, 1, keys, n, NULL);
    s->last_cmd = last;
}

void script_hold_init(struct script_hold *h, struct cmd_ctx *x, struct ks_key *keys, int n)
{
    int64_t start = clock_mono_ns();
    memset(h, 0, sizeof(*h));
    h->started = start;
    h->x = x;
    h->keys = keys;
    h->nkeys = n;
    h->max_held = -1;
    for (int i = 0; i < n; i++) {
        unsigned shard = ks_shard(x->env->ks, &keys[i]);
        h->held[shard / 64] |= 1ull << (shard % 64);
        if ((int)shard > h->max_held)
            h->max_held = (int)shard;
        if (x->env->script_since != NULL)
            atomic_store(&x->env->script_since[shard], start);
    }
}

void script_hold_release(struct script_hold *h)
{
    struct keyspace *ks = h->x->env->ks;
    if (h->x->env->script_since != NULL)
        for (int i = 0; i < h->nkeys; i++)
            atomic_store(&h->x->env->script_since[ks_shard(ks, &h->keys[i])], 0);
    for (unsigned w = 0; w < SHARD_WORDS && h->nextra > 0; w++) {
        uint64_t bits = h->extra[w];
        while (bits != 0) {
            ks_unlock(ks, w * 64 + (unsigned)__builtin_ctzll(bits));
            bits &= bits - 1;
            h->nextra--;
        }
        h->extra[w] = 0;
    }
}
