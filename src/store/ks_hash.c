/* ks_hash.c - hashes in the keyspace: open and close around hashval.c, and HSET's in-place fast
 * path. A small hash lives inside its entry in compact form (ks_entry.h "Hashes in the entry"); a
 * handler works on it loaded into its struct ks_href, and closing writes it back, inline when it
 * still fits, else as a heap struct hashval the entry points to. */
#include "ks_internal.h"

int ks_hash_open(struct keyspace *ks, const struct ks_key *key, int64_t now, int mode,
                 struct ks_href *r)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    r->slot = i;
    r->h = NULL;
    r->bytes = 0;
    if (i >= 0) {
        uint8_t *e = slot_entry(sh, (uint64_t)i);
        if (e_type(e) != KS_HASH)
            return KS_WRONGTYPE;
        if (e[E_FLAGS] & F_HINLINE) {
            unsigned char c[HV_COMPACT_MAX];
            size_t n = inline_read(e, c);
            r->h = hv_compact_load(&r->local, c, n);
        } else {
            r->h = e_ptr(e);
            r->bytes = hv_bytes(r->h);
        }
    } else if (mode == KS_H_CREATE) {
        if (over_maxmemory(ks))
            return KS_OOM;
        r->h = hv_compact_load(&r->local, NULL, 0); /* empty, and no malloc */
    }
    return KS_OK;
}

void ks_hash_close(struct keyspace *ks, const struct ks_key *key, struct ks_href *r, int changed)
{
    struct shard *sh = shard_of(ks, key);
    struct hashval *h = r->h;
    r->h = NULL;
    if (h == NULL)
        return;
    int64_t slot = r->slot;
    if (hv_count(h) == 0) {
        if (slot >= 0) {
            uint8_t *e = slot_entry(sh, (uint64_t)slot);
            if (!e_inline_hash(e)) {
                e_set_ptr(e, h); /* it may have moved; remove_slot frees it */
                mem_add_n(sh, (int64_t)hv_bytes(h) - (int64_t)r->bytes);
            }
            remove_slot(ks, sh, (uint64_t)slot);
            maybe_shrink(ks, sh);
        } else {
            hv_free(h);
        }
        return;
    }
    if (slot >= 0 && !changed)
        return; /* nothing written: the entry holds h as it is */
    uint64_t i = slot >= 0 ? (uint64_t)slot : insert(ks, sh, key, KS_HASH, 0);
    uint8_t *e = slot_entry(sh, i);
    unsigned char c[HV_COMPACT_MAX];
    size_t n = hv_compact_write(h, c, inline_cap(e[E_FLAGS], key->len));
    if (n > 0) {
        if (!hv_is_local(h)) { /* a heap hash that fits its entry again */
            mem_add_n(sh, -(int64_t)r->bytes);
            hv_free(h);
        }
        e = set_inline_room(sh, i, n);
        inline_write(e, c, n);
    } else {
        h = hv_to_heap(h); /* a copy if it was in r->local */
        if (e_inline_hash(e))
            e = set_inline_room(sh, i, 0);
        e_set_ptr(e, h);
        mem_add_n(sh, (int64_t)hv_bytes(h) - (int64_t)r->bytes);
    }
    if (slot >= 0)
        touch_entry(sh, e); /* insert touched a new one */
}

size_t ks_hash_peek_inline(struct keyspace *ks, const struct ks_key *key, int64_t now,
                           unsigned char *buf)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return 0;
    const uint8_t *e = slot_entry(sh, (uint64_t)i);
    return e_inline_hash(e) ? inline_read(e, buf) : 0;
}

int ks_hash_update_inline(struct keyspace *ks, const struct ks_key *key, int64_t now, int npairs,
                          char *const *argv, const size_t *lens)
{
    struct shard *sh = shard_of(ks, key);
    int64_t i = find(ks, sh, key, now);
    if (i < 0)
        return 0;
    uint8_t *e = slot_entry(sh, (uint64_t)i);
    if (!e_inline_hash(e))
        return 0;
    unsigned char c[HV_COMPACT_MAX];
    size_t n = inline_read(e, c);
    /* On the copy: a pair that cannot be done in place leaves the entry untouched. */
    for (int p = 0; p < npairs; p++)
        if (!hv_compact_update(c, n, argv[2 * p], lens[2 * p], argv[2 * p + 1], lens[2 * p + 1]))
            return 0;
    inline_write(e, c, n);
    touch_entry(sh, e);
    return 1;
}
