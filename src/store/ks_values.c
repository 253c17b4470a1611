/* ks_values.c - the value types that live in the entry or one blob: strings and counters
 * (KS_INT, KS_RAW), GCRA state (KS_GCRA: the TAT, which is also the expiry), and ks_get, which
 * reads any of them (hashes: ks_hash.c). */
#include "ks_internal.h"

#include <malloc.h>
#include <stdlib.h>

#include "rlimitd/alloc.h"
#include "rlimitd/util.h"
#include "rlimitd/zset.h"

/* Stores a new TAT in the GCRA entry of slot i; its expiry becomes the TAT (COMMANDS.md,
 * CL.THROTTLE), or none for a microsecond TAT past the nanoseconds' end (gcra.h, "the stored
 * TAT": the expiry is kept in nanoseconds too). */
void set_gcra(struct shard *sh, uint64_t i, int64_t tat)
{
    uint8_t *e = slot_entry(sh, i);
    int64_t old = e_expire(e), at = gcra_tat_expire(tat);
    uint8_t shape = at != 0 ? F_EXP_IS_VAL : 0;
    if ((e[E_FLAGS] & (F_HAS_EXP | F_EXP_IS_VAL)) != shape)
        e = reshape(sh, i, (uint8_t)((e[E_FLAGS] & F_TYPE) | shape), 0);
    e_set_val(e, tat);
    touch_entry(sh, e);
    count_expiry_change(sh, old, at);
}

/* Stores r->new_tat at key if the step said so: slot i (-1 if absent, then created). */
static int gcra_store(struct keyspace *ks, struct shard *sh, const struct ks_key *key, int64_t i,
                      const struct gcra_result *r)
{
    if (!r->store)
        return KS_OK;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        i = (int64_t)insert(ks, sh, key, KS_GCRA, gcra_tat_expire(r->new_tat) ? F_EXP_IS_VAL : 0);
    }
    set_gcra(sh, (uint64_t)i, r->new_tat);
    return KS_OK;
}

int ks_gcra_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                  const struct gcra_limits *l, struct gcra_result *r, const char **err)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    const uint8_t *e = i >= 0 ? slot_entry(sh, (uint64_t)i) : NULL;
    if (e != NULL && e_type(e) != KS_GCRA)
        return KS_WRONGTYPE;
    if (gcra_step(l, now, e != NULL, e != NULL ? e_val(e) : 0, r, err) != 0)
        return KS_LIMIT_ERR;
    return gcra_store(ks, sh, key, i, r);
}

/* GCRA shares CL.THROTTLE's entry: the same KS_GCRA type and nanosecond TAT, expiring at it. */
int ks_gcra_redis_apply(struct keyspace *ks, const struct ks_key *key, int64_t now,
                        const struct gcra_redis_args *a, struct gcra_result *r, const char **err)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    const uint8_t *e = i >= 0 ? slot_entry(sh, (uint64_t)i) : NULL;
    if (e != NULL && e_type(e) != KS_GCRA)
        return KS_WRONGTYPE;
    if (gcra_redis_step(a, now, e != NULL, e != NULL ? e_val(e) : 0, r, err) != 0)
        return KS_LIMIT_ERR;
    return gcra_store(ks, sh, key, i, r);
}

int ks_gcra_read(struct keyspace *ks, const struct ks_key *key, int64_t now, int *has,
                 int64_t *tat)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    *has = 0;
    *tat = 0;
    if (i < 0)
        return KS_OK;
    const uint8_t *e = slot_entry(sh, (uint64_t)i);
    if (e_type(e) != KS_GCRA)
        return KS_WRONGTYPE;
    *has = 1;
    *tat = e_val(e);
    return KS_OK;
}

int ks_gcra_write(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t tat)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i >= 0 && e_type(slot_entry(sh, (uint64_t)i)) != KS_GCRA)
        return KS_WRONGTYPE;
    struct gcra_result r = {.store = 1, .new_tat = tat};
    return gcra_store(ks, sh, key, i, &r);
}

enum ks_type ks_get(struct keyspace *ks, const struct ks_key *key, int64_t now, struct ks_value *v)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return KS_NONE;
    const uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    if (v != NULL) {
        v->type = t;
        v->i = 0;
        v->p = NULL;
        v->len = 0;
        switch (t) {
        case KS_GCRA:
        case KS_INT:
            v->i = e_val(e);
            break;
        case KS_RAW: {
            const struct rawstr *s = e_ptr(e);
            v->p = s->data;
            v->len = s->len;
            break;
        }
        case KS_HASH:
            if (e_inline_hash(e)) {
                unsigned char c[HV_COMPACT_MAX];
                v->i = (int64_t)hv_compact_count(c, inline_read(e, c));
            } else {
                v->i = (int64_t)hv_count(e_ptr(e));
            }
            break;
        case KS_LIST:
            v->i = (int64_t)lv_count(e_ptr(e));
            break;
        case KS_SWLOG:
            v->i = (e[E_FLAGS] & F_CRING) ? ((const struct cring *)e_ptr(e))->len
                                          : ((const struct swlog *)e_ptr(e))->len;
            break;
        case KS_ZSET:
            v->i = (int64_t)zs_card(e_ptr(e));
            break;
        default:
            break;
        }
    }
    return t;
}

/* Stores val in slot i as KS_INT when it is a canonical integer (what INCR can work on), else
 * raw. The expiry is left as it was. */
static void store_string(struct shard *sh, uint64_t i, const char *val, size_t len)
{
    int64_t n;
    uint8_t *e = prepare_new_value(sh, i);
    touch_entry(sh, e);
    if (util_parse_i64(val, len, &n) == 0) {
        set_type(sh, e, KS_INT);
        e_set_val(e, n);
        return;
    }
    struct rawstr *s = shard_alloc(sh, sizeof(*s) + len);
    s->len = len;
    memcpy(s->data, val, len);
    set_type(sh, e, KS_RAW);
    e_set_ptr(e, s);
}

/* Room an appended string's block is given when it must grow to len bytes: twice that up to
 * STR_PREALLOC_MAX, then that much more (the rule of Redis's string growth). A string that grows
 * by small appends then moves O(log n) times instead of on every append. Moving it every time
 * costs O(len) per append and leaves behind a freed block a little smaller than every string
 * still growing, so no later allocation fits it: under a policy that keeps the strings appended
 * to (allkeys-lfu keeps what is hit most) the heap became mostly such holes, RSS far above
 * used memory (DESIGN.md "Memory layout"). */
#define STR_PREALLOC_MAX (1024 * 1024)

static size_t string_room(size_t len)
{
    return len < STR_PREALLOC_MAX ? 2 * len : len + STR_PREALLOC_MAX;
}

/* The longest canonical integer ("-9223372036854775808"): a longer string is never KS_INT. */
#define INT_TEXT_MAX 20

int ks_append(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *p, size_t n,
              size_t *newlen)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return KS_NOKEY;
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    if (t != KS_RAW && t != KS_INT)
        return KS_WRONGTYPE;
    char num[INT_TEXT_MAX + 1];
    size_t len = t == KS_RAW ? ((const struct rawstr *)e_ptr(e))->len : util_fmt_i64(num, e_val(e));
    *newlen = len + n;
    if (t == KS_INT || len + n <= INT_TEXT_MAX) {
        /* A short result may be a canonical integer again: stored as SET stores it. */
        char buf[INT_TEXT_MAX + 1];
        char *v = len + n <= INT_TEXT_MAX ? buf : xmalloc(len + n);
        memcpy(v, t == KS_INT ? num : ((const struct rawstr *)e_ptr(e))->data, len);
        memcpy(v + len, p, n);
        store_string(sh, (uint64_t)i, v, len + n);
        if (v != buf)
            free(v);
        return KS_OK;
    }
    struct rawstr *s = e_ptr(e);
    if (malloc_usable_size(s) < sizeof(*s) + len + n) {
        mem_add(sh, s, -1);
        s = xrealloc(s, sizeof(*s) + string_room(len + n));
        mem_add(sh, s, 1);
        e_set_ptr(e, s);
    }
    memcpy(s->data + len, p, n);
    s->len = len + n;
    touch_entry(sh, e);
    return KS_OK;
}

int ks_set(struct keyspace *ks, const struct ks_key *key, int64_t now, const char *val, size_t len,
           int64_t expire_at, int flags)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if ((flags & KS_SET_NX) && i >= 0)
        return 0;
    if ((flags & KS_SET_XX) && i < 0)
        return 0;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        int with_exp = !(flags & KS_SET_KEEPTTL) && expire_at != 0;
        i = (int64_t)insert(ks, sh, key, KS_INT, with_exp ? F_HAS_EXP : 0);
    }
    store_string(sh, (uint64_t)i, val, len);
    if (!(flags & KS_SET_KEEPTTL))
        set_expire(sh, (uint64_t)i, expire_at);
    return 1;
}

int ks_incrby(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t delta,
              int64_t *out)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        i = (int64_t)insert(ks, sh, key, KS_INT, 0);
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    switch (e_type(e)) {
    case KS_INT:
        break;
    case KS_RAW:
        return KS_NOTINT;
    default:
        return KS_WRONGTYPE;
    }
    int64_t sum;
    if (__builtin_add_overflow(e_val(e), delta, &sum))
        return KS_OVERFLOW;
    e_set_val(e, sum);
    touch_entry(sh, e);
    *out = sum;
    return KS_OK;
}

int ks_list_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_lref *r)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    r->slot = i;
    r->l = NULL;
    r->bytes = 0;
    if (i >= 0) {
        uint8_t *e = slot_entry(sh, (uint64_t)i);
        if (e_type(e) != KS_LIST)
            return KS_WRONGTYPE;
        r->l = e_ptr(e);
        r->bytes = lv_bytes(r->l);
    } else if (mode == KS_H_CREATE) {
        if (over_maxmemory(ks))
            return KS_OOM;
        r->l = lv_new();
    }
    return KS_OK;
}

void ks_list_close(struct keyspace *ks, const struct ks_key *key, struct ks_lref *r, int changed)
{
    struct shard *sh = shard_of(ks, key);
    if (r->slot < 0) {
        if (r->l == NULL)
            return;
        if (lv_count(r->l) == 0) {
            lv_free(r->l);
        } else {
            uint64_t i = insert(ks, sh, key, KS_LIST, 0);
            e_set_ptr(slot_entry(sh, i), r->l);
            mem_add_n(sh, (int64_t)lv_bytes(r->l));
        }
    } else {
        uint8_t *e = slot_entry(sh, (uint64_t)r->slot);
        e_set_ptr(e, r->l);
        mem_add_n(sh, (int64_t)lv_bytes(r->l) - (int64_t)r->bytes);
        if (lv_count(r->l) == 0) {
            remove_slot(ks, sh, (uint64_t)r->slot);
            maybe_shrink(ks, sh);
        } else if (changed) {
            touch_entry(sh, e);
        }
    }
    r->l = NULL;
}
