/* ks_swlog.c - ISALLOWED's window logs in the keyspace (KS_SWLOG) and sorted sets (KS_ZSET)
 * opened for the Z commands: a window log reads as a sorted set and becomes one on a write, and
 * ISALLOWED on a sorted set runs the same recipe on its members. */
#include "ks_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rlimitd/clock.h"
#include "rlimitd/zset.h"

static size_t cring_bytes(uint32_t cap)
{
    return sizeof(struct cring) + (size_t)cap * sizeof(uint32_t);
}

/* Whether log, in a ring of cap slots, can be a cring. */
static int cring_fits(const struct swlog *log, uint32_t cap)
{
    if (cap > CRING_MAX_CAP)
        return 0;
    return log->len < 2 || (uint64_t)swlog_newest(log) - (uint64_t)swlog_at(log, 0) <= UINT32_MAX;
}

static void cring_store(struct cring *c, const struct swlog *log, uint32_t cap)
{
    uint64_t base = log->len > 0 ? (uint64_t)swlog_at(log, 0) : 0;
    c->base_lo = (uint32_t)base;
    c->base_hi = (uint32_t)(base >> 32);
    c->cap = (uint8_t)cap;
    c->len = (uint8_t)log->len;
    c->pad_[0] = c->pad_[1] = 0;
    for (uint32_t i = 0; i < log->len; i++)
        c->off[i] = (uint32_t)((uint64_t)swlog_at(log, i) - base);
}

/* Stores log (cap slots, on the stack or the heap) as entry e's value, as a cring when it fits,
 * replacing whatever e held (old, a heap block or NULL). */
void store_log(struct shard *sh, uint8_t *e, void *old, struct swlog *log, int on_heap)
{
    uint32_t cap = log->cap;
    touch_entry(sh, e);
    if (cring_fits(log, cap)) {
        struct cring *c = old;
        if (!(e[E_FLAGS] & F_CRING) || c == NULL || c->cap != cap) {
            if (old != NULL)
                shard_free(sh, old);
            c = shard_alloc(sh, cring_bytes(cap));
        }
        cring_store(c, log, cap);
        if (on_heap)
            shard_free(sh, log);
        e_set_ptr(e, c);
        e[E_FLAGS] |= F_CRING;
        return;
    }
    if (!on_heap) {
        struct swlog *w = shard_alloc(sh, swlog_bytes(cap));
        swlog_init(w, cap);
        swlog_copy(w, log);
        log = w;
    }
    if (old != NULL && old != log)
        shard_free(sh, old);
    e_set_ptr(e, log);
    e[E_FLAGS] &= (uint8_t)~F_CRING;
}

size_t ks_swlog_member(char *buf, int64_t ms, uint32_t dup)
{
    if (dup == 0)
        return (size_t)sprintf(buf, "%lld", (long long)ms);
    return (size_t)sprintf(buf, "%lld-%u", (long long)ms, dup);
}

/* The window log of entry e as a new sorted set: every attempt a member (ks_swlog_member)
 * scored with its millisecond. */
static struct zset *log_as_zset(const uint8_t *e)
{
    union swlog_buf buf;
    const struct swlog *log =
        (e[E_FLAGS] & F_CRING) ? cring_load(e_ptr(e), &buf) : (const struct swlog *)e_ptr(e);
    struct zset *z = zs_new(log->len, 0);
    uint32_t dup = 0;
    for (uint32_t i = 0; i < log->len; i++) {
        int64_t t = swlog_at(log, i);
        dup = i > 0 && swlog_at(log, i - 1) == t ? dup + 1 : 0;
        char m[48];
        size_t n = ks_swlog_member(m, t, dup);
        double out;
        int skipped;
        zs_add(&z, m, n, (double)t, 0, &out, &skipped);
    }
    return z;
}

/* ISALLOWED's recipe on an ordinary sorted set (keyspace.h ks_swlog_apply). */
static int zset_window_apply(struct shard *sh, uint64_t i, int64_t now_ms, int64_t period_ms,
                             int64_t max_count, int *allowed, int64_t *in_window)
{
    struct zset *z = e_ptr(slot_entry(sh, i));
    size_t before = zs_bytes(z);
    int64_t cutoff;
    if (!__builtin_sub_overflow(now_ms, period_ms, &cutoff)) {
        struct zs_score_range r = {-INFINITY, (double)cutoff, 0, 0};
        size_t a, b;
        zs_range_score(z, &r, &a, &b);
        zs_del_range(&z, a, b);
    }
    /* The attempt's member: after every member already scored now_ms ("T", "T-1", ...), so a
     * burst in one millisecond keeps its order even after the oldest of it was dropped. */
    struct zs_score_range same = {(double)now_ms, (double)now_ms, 0, 0};
    size_t a, b;
    uint32_t dup = 0;
    zs_range_score(z, &same, &a, &b);
    if (b > a) {
        struct zs_iter it;
        struct zs_item item;
        char base[32];
        size_t blen = ks_swlog_member(base, now_ms, 0);
        zs_iter_init(&it, z, a, 0);
        for (size_t k = a; k < b && zs_iter_next(&it, &item); k++) {
            uint32_t d = 0;
            if (item.len > blen + 1 && item.len < blen + 12 && item.m[blen] == '-' &&
                memcmp(item.m, base, blen) == 0)
                d = (uint32_t)strtoul(item.m + blen + 1, NULL, 10);
            if (d + 1 > dup && d < UINT32_MAX - 1)
                dup = d + 1;
        }
    }
    char m[48];
    size_t n = ks_swlog_member(m, now_ms, dup);
    double out;
    int skipped;
    zs_add(&z, m, n, (double)now_ms, 0, &out, &skipped);
    size_t card = zs_card(z);
    *allowed = (uint64_t)card <= (uint64_t)max_count;
    if (in_window != NULL)
        *in_window = (int64_t)card;
    if ((uint64_t)card > (uint64_t)max_count + 1)
        zs_del_range(&z, 0, card - (size_t)max_count - 1);
    e_set_ptr(slot_entry(sh, i), z);
    mem_add_n(sh, (int64_t)zs_bytes(z) - (int64_t)before);
    set_expire(sh, i, (now_ms + period_ms) * CLOCK_NS_PER_MS);
    return KS_OK;
}

int ks_zset_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 size_t size_hint, size_t member_hint, struct ks_zref *ref)
{
    struct shard *sh = shard_of(ks, key);
    memset(ref, 0, sizeof(*ref));
    ref->mode = mode;
    ref->slot = -1;
    if (mode == KS_Z_CREATE && over_maxmemory(ks))
        return KS_OOM;
    int64_t i = find(ks, sh, key, now);
    if (i < 0) {
        if (mode == KS_Z_CREATE)
            ref->z = zs_new(size_hint, member_hint);
        return KS_OK;
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    enum ks_type t = e_type(e);
    if (t == KS_SWLOG) {
        struct zset *z = log_as_zset(e);
        if (mode == KS_Z_READ) {
            ref->z = z;
            ref->temp = 1;
            return KS_OK;
        }
        /* A write makes the window log an ordinary sorted set for good; its expiry stays. */
        e = prepare_new_value(sh, (uint64_t)i);
        set_type(sh, e, KS_ZSET);
        e_set_ptr(e, z);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        t = KS_ZSET;
    }
    if (t != KS_ZSET)
        return KS_WRONGTYPE;
    ref->z = e_ptr(e);
    ref->slot = i;
    ref->bytes = zs_bytes(ref->z);
    return KS_OK;
}

void ks_zset_close(struct keyspace *ks, const struct ks_key *key, struct ks_zref *ref)
{
    struct shard *sh = shard_of(ks, key);
    struct zset *z = ref->z;
    ref->z = NULL;
    if (z == NULL)
        return;
    if (ref->temp) {
        zs_free(z);
        return;
    }
    if (ref->mode == KS_Z_READ)
        return;
    if (ref->slot < 0) {
        if (zs_card(z) == 0) {
            zs_free(z);
            return;
        }
        uint64_t i = insert(ks, sh, key, KS_ZSET, 0);
        e_set_ptr(slot_entry(sh, i), z);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        return;
    }
    uint64_t i = (uint64_t)ref->slot;
    e_set_ptr(slot_entry(sh, i), z);
    mem_add_n(sh, (int64_t)zs_bytes(z) - (int64_t)ref->bytes);
    if (zs_card(z) == 0) {
        remove_slot(ks, sh, i);
        maybe_shrink(ks, sh);
    } else {
        /* WATCH: a write-mode close counts as a write (a no-op Z write too: conservative). */
        touch_entry(sh, slot_entry(sh, i));
    }
}

/* Where swlog_update moves a log whose ring changes size: a ring that can be a cring is built on
 * the stack (store_log packs it), a bigger one on the heap. */
struct log_move {
    struct shard *sh;
    union swlog_buf *stack;
};

static struct swlog *log_move_to(void *ud, uint32_t cap)
{
    struct log_move *m = ud;
    return cap <= CRING_MAX_CAP ? &m->stack->log : shard_alloc(m->sh, swlog_bytes(cap));
}

int ks_swlog_apply(struct keyspace *ks, const struct ks_key *key, int64_t now, int64_t period_ms,
                   int64_t max_count, int *allowed, int64_t *in_window)
{
    struct shard *sh = shard_of(ks, key);
    int64_t now_ms = now / CLOCK_NS_PER_MS;
    int64_t i = find(ks, sh, key, now);
    union swlog_buf buf, moved;
    struct swlog *log;
    if (i >= 0 && e_type(slot_entry(sh, (uint64_t)i)) == KS_ZSET)
        return zset_window_apply(sh, (uint64_t)i, now_ms, period_ms, max_count, allowed, in_window);
    if (i >= 0 && e_type(slot_entry(sh, (uint64_t)i)) != KS_SWLOG)
        return KS_WRONGTYPE;
    if (i < 0) {
        if (over_maxmemory(ks))
            return KS_OOM;
        uint32_t cap = swlog_initial_cap(max_count);
        /* Created with its expiry field: set_expire below then writes it in place. */
        i = (int64_t)insert(ks, sh, key, KS_SWLOG, F_HAS_EXP);
        swlog_init(&buf.log, cap);
        store_log(sh, slot_entry(sh, (uint64_t)i), NULL, &buf.log, 0);
    }
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    void *stored = e_ptr(e);
    int on_heap = !(e[E_FLAGS] & F_CRING);
    log = on_heap ? stored : cring_load(stored, &buf);
    struct log_move to = {sh, &moved};
    struct swlog_attempt a = {now_ms, period_ms, now_ms, max_count};
    struct swlog_outcome out = swlog_update(log, &a, log_move_to, &to);
    if (out.log != log) {
        if (on_heap) {
            shard_free(sh, log);
            if (stored == log)
                stored = NULL;
        }
        log = out.log;
        on_heap = log->cap > CRING_MAX_CAP;
    }
    *allowed = out.verdict == SWLOG_ALLOWED;
    /* Allowed means nothing was dropped: the log holds exactly the window's attempts. */
    if (in_window != NULL)
        *in_window = out.len;
    int64_t newest = out.newest_ms;
    if (log != stored)
        store_log(sh, e, stored, log, on_heap);
    else if (cring_fits(log, log->cap))
        store_log(sh, e, NULL, log, 1); /* a wide log that fits a cring again */
    /* COMMANDS.md, ISALLOWED: the key expires `period` after its newest attempt. cmd_limit bounds
     * period so this cannot overflow. */
    set_expire(sh, (uint64_t)i, (newest + period_ms) * CLOCK_NS_PER_MS);
    return KS_OK;
}
