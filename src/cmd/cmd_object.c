/* cmd_object.c - OBJECT ENCODING, REFCOUNT, IDLETIME, FREQ and HELP with Redis 7.0's replies
 * (COMMANDS.md, OBJECT).
 *
 * rlimitd's structures are not Redis's, so ENCODING names the encoding Redis 7.0 would report
 * for the same value: strings "int" (a 64-bit integer, and GCRA state), "embstr" up to 44 bytes,
 * "raw" above; a hash the encoding it is stored in, which converts where Redis's does
 * (hashval.h), "listpack" or "hashtable"; sorted sets (window logs too) likewise, "listpack" or
 * "skiplist" (zset.h), and past the bounds a packed set can hold as a fresh write would build
 * them in Redis; lists "quicklist" (7.0 has no other list encoding); a lease set "raw" (a module
 * value). A string grown by APPEND is "raw" in Redis at any length. IDLETIME and FREQ read the
 * access data of an LRU or LFU policy (src/store/ks_evict.c); under the other policies rlimitd
 * keeps none (the price of no byte per key), so IDLETIME answers an error there where Redis answers
 * a time. */
#include <limits.h>
#include <string.h>

#include "cmd_internal.h"
#include "rlimitd/hashval.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/zset.h"

static const char *const object_help[] = {
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
    NULL,
};

#define ADJUST_NOTE                                                                                \
    " Please note that when switching between policies at runtime LRU and LFU data will take "     \
    "some time to adjust."

static int policy_is_lfu(int64_t p)
{
    return p == KS_POL_ALLKEYS_LFU || p == KS_POL_VOLATILE_LFU;
}

static int policy_is_lru(int64_t p)
{
    return p == KS_POL_ALLKEYS_LRU || p == KS_POL_VOLATILE_LRU;
}

/* Redis's 44-byte embstr limit (an object header and the string in one 64-byte allocation). */
#define EMBSTR_MAX 44

/* The encoding a sorted set is stored in, which converts where Redis's does (zset.h); past what a
 * packed set can hold, the one a fresh write would build in Redis. */
static const char *zset_encoding(struct cmd_ctx *x, const struct zset *z)
{
    int64_t entries = __atomic_load_n(&x->env->conf->zset_max_listpack_entries, __ATOMIC_RELAXED);
    int64_t value = __atomic_load_n(&x->env->conf->zset_max_listpack_value, __ATOMIC_RELAXED);
    if (zs_is_packed(z))
        return "listpack";
    if (entries <= ZS_PACK_MAX_ENTRIES && value <= ZS_PACK_CAP_MEMBER)
        return "skiplist";
    size_t n = zs_card(z);
    if ((int64_t)n > entries)
        return "skiplist";
    struct zs_iter it;
    struct zs_item item;
    zs_iter_init(&it, z, 0, 0);
    while (zs_iter_next(&it, &item))
        if ((int64_t)item.len > value)
            return "skiplist";
    return "listpack";
}

/* The encoding name, or NULL if key is absent. */
static const char *encoding(struct cmd_ctx *x)
{
    struct ks_value v;
    enum ks_type t = ks_get(x->env->ks, &x->keys[0], x->now, &v);
    switch (t) {
    case KS_NONE:
        return NULL;
    case KS_INT:
    case KS_GCRA:
        return "int";
    case KS_RAW:
        return v.len <= EMBSTR_MAX ? "embstr" : "raw";
    case KS_LIST:
        return "quicklist";
    case KS_LEASE:
        return "raw";
    case KS_HASH: {
        struct ks_href r;
        if (ks_hash_open(x->env->ks, &x->keys[0], x->now, KS_H_READ, &r) != KS_OK || r.h == NULL)
            return NULL;
        return hv_is_packed(r.h) ? "listpack" : "hashtable"; /* a read open needs no close */
    }
    default: { /* KS_ZSET, KS_SWLOG (shown as a sorted set) */
        struct ks_zref r;
        if (ks_zset_open(x->env->ks, &x->keys[0], x->now, KS_Z_READ, 0, 0, &r) != KS_OK)
            return NULL;
        const char *name = r.z != NULL ? zset_encoding(x, r.z) : NULL;
        ks_zset_close(x->env->ks, &x->keys[0], &r);
        return name;
    }
    }
}

static void object_command(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "HELP")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "object", "help");
        else
            reply_help_lines(x->out, object_help);
        return;
    }
    static const char *const subs[] = {"ENCODING", "REFCOUNT", "IDLETIME", "FREQ"};
    int sub = -1;
    for (int i = 0; i < 4; i++)
        if (arg_is(x, 1, subs[i]))
            sub = i;
    if (sub < 0) {
        reply_subcmd_unknown(x, "OBJECT");
        return;
    }
    if (x->argc != 3) {
        char lower[16];
        size_t n = strlen(subs[sub]);
        for (size_t i = 0; i <= n; i++)
            lower[i] = (char)(subs[sub][i] | (subs[sub][i] ? 0x20 : 0));
        reply_subcmd_arity(x, "object", lower);
        return;
    }
    struct keyspace *ks = x->env->ks;
    int64_t policy = __atomic_load_n(&x->env->conf->maxmemory_policy, __ATOMIC_RELAXED);
    if (sub == 0) {
        const char *name = encoding(x);
        if (name == NULL)
            reply_nil(x->out);
        else
            reply_bulk_cstr(x->out, name);
        return;
    }
    if (sub == 1) {
        struct ks_value v;
        enum ks_type t = ks_get(ks, &x->keys[0], x->now, &v);
        if (t == KS_NONE) {
            reply_nil(x->out);
            return;
        }
        /* Redis shares the integers 0..9999 (refcount INT_MAX) unless maxmemory is set with an
         * LRU or LFU policy, which needs an object per key. */
        int64_t max = __atomic_load_n(&x->env->conf->maxmemory, __ATOMIC_RELAXED);
        int shared = t == KS_INT && v.i >= 0 && v.i < 10000 &&
                     (max == 0 || !(policy_is_lru(policy) || policy_is_lfu(policy)));
        reply_int(x->out, shared ? INT_MAX : 1);
        return;
    }
    int64_t idle, freq;
    if (ks_access_info(ks, &x->keys[0], x->now, &idle, &freq) != 0) {
        reply_nil(x->out);
        return;
    }
    if (sub == 2) {
        if (policy_is_lfu(policy)) {
            reply_error(
                x->out,
                "ERR An LFU maxmemory policy is selected, idle time not tracked." ADJUST_NOTE);
            return;
        }
        if (!policy_is_lru(policy)) {
            reply_error(x->out,
                        "ERR An LRU maxmemory policy is not selected, idle time not tracked.");
            return;
        }
        reply_int(x->out, idle < 0 ? 0 : idle); /* a shard not switched yet: just accessed */
        return;
    }
    if (!policy_is_lfu(policy)) {
        reply_error(x->out, "ERR An LFU maxmemory policy is not selected, access frequency not "
                            "tracked." ADJUST_NOTE);
        return;
    }
    reply_int(x->out, freq < 0 ? 5 : freq); /* a shard not switched yet: a new key's count */
}

/* OBJECT only looks at the key (Redis's LOOKUP_NOTOUCH): ENCODING or REFCOUNT leave the access
 * data IDLETIME and FREQ report as they were. */
static void cmd_object(struct cmd_ctx *x)
{
    ks_notouch(1);
    object_command(x);
    ks_notouch(0);
}

const struct cmd_def cmd_object_table[] = {
    {"object",
     -2,
     CMD_READONLY,
     2,
     2,
     1,
     "keyspace read slow",
     cmd_object,
     {.summary = "A container for object introspection commands",
      .since = "2.2.3",
      .group = "generic",
      .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
};
const int cmd_object_count = (int)(sizeof(cmd_object_table) / sizeof(cmd_object_table[0]));
