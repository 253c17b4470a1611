/* ks_table.c - each shard's open-addressing table of entry references, and the changes of an
 * entry's shape and value that move it between slab classes.
 *
 * Why this layout: the goal is at most 40 bytes of RSS per GCRA key with a 14-byte key (issue 5).
 * A malloc'd entry per key (48-byte chunk) plus an 8-byte bucket pointer cannot get there, so:
 *
 * Table (per shard): open addressing with linear probing. A slot is a 1-byte tag (0 = empty, else
 * 0x80 | 7 hash bits that neither the shard nor the home slot use) in one array and a 32-bit entry
 * reference in a parallel array: 5 bytes a slot. A probe reads tags only and touches an entry only
 * on a tag match (a false match is 1 in 128). The table doubles when it would pass 7/8 full, and
 * halves (down to 16 slots) when below 1/8 full, as the chained table did. Deletion shifts the
 * rest of the cluster back (no tombstones), so "every slot between a key's home slot and the key
 * is occupied" always holds; lookups stop at the first empty slot (lookup and find are inline in
 * ks_internal.h: every command runs them).
 *   Worst case right after a doubling at 1M keys over 256 shards (3906 keys in 8192 slots):
 *   24 B entry + 5 B / 0.48 load = 34.5 B/key; at 10M keys (39062 in 65536 slots) 24 + 8.4.
 *   64-bit slots (pointer + 16-bit tag) would cost 24 + 8 / 0.48 = 40.8 B: over budget.
 *
 * Shard = top bits of the key's hash, home slot = low bits, so resizing never moves a key to
 * another shard (its lock stays the same). */
#include "ks_internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rlimitd/alloc.h"
#include "rlimitd/zset.h"

static size_t table_bytes(uint64_t nslots)
{
    return (size_t)nslots * (1 + sizeof(uint32_t));
}

void table_alloc(struct shard *sh, uint64_t nslots)
{
    size_t n = table_bytes(nslots);
    uint8_t *p;
    if (nslots >= MMAP_TABLE_SLOTS) {
        p = xmmap(n); /* zero-filled */
        mem_add_n(sh, (int64_t)n);
    } else {
        p = xmalloc(n);
        memset(p, 0, nslots);
        mem_add(sh, p, 1);
    }
    sh->tags = p;
    sh->refs = (uint32_t *)(p + nslots);
    sh->mask = nslots - 1;
    sh->table_gen++;
}

void table_free(struct shard *sh, uint8_t *tags, uint64_t nslots)
{
    if (tags == NULL)
        return;
    if (nslots >= MMAP_TABLE_SLOTS) {
        munmap(tags, table_bytes(nslots));
        mem_add_n(sh, -(int64_t)table_bytes(nslots));
    } else {
        shard_free(sh, tags);
    }
}

/* Types whose value field points to a heap block (or structure) of the shard. */
int has_blob(enum ks_type t)
{
    return t == KS_RAW || t == KS_SWLOG || t == KS_ZSET || t == KS_HASH || t == KS_LIST ||
           t == KS_LEASE;
}

/* Bytes a blob accounts for in the shard's memory. */
size_t blob_bytes(enum ks_type t, void *p)
{
    return t == KS_HASH   ? hv_bytes(p)
           : t == KS_LIST ? lv_bytes(p)
           : t == KS_ZSET ? zs_bytes(p)
                          : malloc_usable_size(p);
}

/* Frees the blob an entry's value points to, if any. */
void free_value(struct shard *sh, uint8_t *e)
{
    enum ks_type t = e_type(e);
    if (e_inline_hash(e))
        return; /* nothing outside the entry (prepare_new_value drops the tail) */
    if (e_ptr(e) == NULL && (t == KS_ZSET || t == KS_HASH || t == KS_LIST))
        return; /* moved away by a rename */
    if (t == KS_ZSET) {
        struct zset *z = e_ptr(e);
        mem_add_n(sh, -(int64_t)zs_bytes(z));
        zs_free(z);
        e_set_ptr(e, NULL);
    } else if (t == KS_HASH) {
        mem_add_n(sh, -(int64_t)hv_bytes(e_ptr(e)));
        hv_free(e_ptr(e));
        e_set_ptr(e, NULL);
    } else if (t == KS_LIST) {
        mem_add_n(sh, -(int64_t)lv_bytes(e_ptr(e)));
        lv_free(e_ptr(e));
        e_set_ptr(e, NULL);
    } else if (has_blob(t)) {
        shard_free(sh, e_ptr(e));
        e_set_ptr(e, NULL);
        e[E_FLAGS] &= (uint8_t)~F_CRING;
    }
}

/* Frees the entry in slot i and its blob, and updates the counters; the slot is not touched. */
void free_entry_at(struct shard *sh, uint64_t i)
{
    uint32_t ref = sh->refs[i];
    uint8_t *e = ref_ptr(sh, ref);
    free_value(sh, e);
    if (sh->dumping && (e[E_FLAGS] & F_EPOCH) != sh->epoch)
        sh->dump_left--; /* removed before the dump reached it: not in this snapshot */
    if (e_expire(e) != 0)
        counter_add(&sh->expires, -1);
    counter_add(&sh->count, -1);
    count_limiter(sh, e_type(e), -1);
    slab_free(sh, &sh->sl, ref, e_size(e));
}

/* Every write to an entry passes here (touch_entry), so the table is where a watched key's
 * version moves (ks_internal.h "Watched keys"). */
void touch_key(struct shard *sh, const char *key, size_t klen)
{
    for (struct ks_watch *w = sh->watch; w != NULL; w = w->next)
        if (w->len == klen && memcmp(w->key, key, klen) == 0)
            w->version++;
}

/* Frees the entry in slot i and closes the gap: each later entry of the cluster whose home slot
 * is not between the hole and itself moves back into the hole, so no probe ever stops short. */
void remove_slot(const struct keyspace *ks, struct shard *sh, uint64_t i)
{
    touch_entry(sh, slot_entry(sh, i));
    free_entry_at(sh, i);
    uint64_t mask = sh->mask;
    uint64_t hole = i;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (sh->tags[j] == 0)
            break;
        uint64_t home = entry_hash(ks, slot_entry(sh, j)) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            sh->tags[hole] = sh->tags[j];
            sh->refs[hole] = sh->refs[j];
            if (sh->meta != NULL)
                sh->meta[hole] = sh->meta[j];
            hole = j;
        }
    }
    sh->tags[hole] = 0;
}

/* Moves the shard to a table of nslots slots. With compact, the live entries are also copied
 * into fresh slabs and the old ones unmapped, which is what gives memory back after many keys
 * went away (only done when shrinking, when most of the old slab space is dead). */
void rehash(const struct keyspace *ks, struct shard *sh, uint64_t nslots, int compact)
{
    uint8_t *otags = sh->tags;
    uint32_t *orefs = sh->refs;
    uint64_t on = sh->mask + 1;
    struct slabs old = sh->sl;
    if (compact)
        slabs_init(&sh->sl);
    table_alloc(sh, nslots);
    uint16_t *ometa = sh->meta;
    if (ometa != NULL)
        sh->meta = meta_alloc(sh, nslots);
    uint64_t mask = sh->mask;
    for (uint64_t i = 0; i < on; i++) {
        if (otags[i] == 0)
            continue;
        uint32_t ref = orefs[i];
        const uint8_t *e = sl_ptr(&old, ref);
        uint64_t j = entry_hash(ks, e) & mask;
        if (compact) {
            size_t size = e_size(e);
            if (size > MAX_SMALL) {
                uint32_t b = new_index(sh, &sh->sl);
                sh->sl.blk[b] = old.blk[ref >> OFF_BITS];
                ref = b << OFF_BITS;
            } else {
                ref = slab_alloc(sh, &sh->sl, size);
                memcpy(ref_ptr(sh, ref), e, size);
            }
        }
        while (sh->tags[j] != 0)
            j = (j + 1) & mask;
        sh->tags[j] = otags[i];
        sh->refs[j] = ref;
        if (ometa != NULL)
            sh->meta[j] = ometa[i];
    }
    table_free(sh, otags, on);
    if (ometa != NULL)
        meta_free(sh, ometa, on);
    if (compact)
        slabs_release(sh, &old);
}

/* An emptied shard keeps its slabs here: a key that is created and deleted again and again (a
 * lease pool whose last holder leaves on every pair) would otherwise pay an munmap and its TLB
 * shootdown on every delete. release_idle_slabs, on the active-expiry sweep, gives them back
 * once the shard has stayed empty. */
void maybe_shrink(const struct keyspace *ks, struct shard *sh)
{
    uint64_t n = sh->mask + 1;
    uint64_t count = atomic_load_explicit(&sh->count, memory_order_relaxed);
    if (n > MIN_SLOTS && count < n / 8) {
        uint64_t target = n;
        while (target > MIN_SLOTS && count < target / 4)
            target /= 2;
        rehash(ks, sh, target, 1);
        sh->expire_cursor = 0;
    }
}

int release_idle_slabs(const struct keyspace *ks, struct shard *sh)
{
    if (atomic_load_explicit(&sh->count, memory_order_relaxed) != 0 || sh->sl.nblk == 0 ||
        sh->sl.slab_bytes != 0 || sh->nbulk != 0 || ks->bulk) {
        sh->idle_sweeps = 0;
        return 0;
    }
    if (++sh->idle_sweeps < KS_IDLE_SWEEPS)
        return 0;
    /* Nothing lives in the slabs: their free lists are all that is left in them. */
    slabs_release(sh, &sh->sl);
    slabs_init(&sh->sl);
    sh->idle_sweeps = 0;
    return 1;
}

/* A new slab entry for a key of this type and shape: flags, key length and key written; the
 * value (and the expiry, if the shape has one) are the caller's to fill. With F_HINLINE in flags
 * the entry has room for an inline hash of (*out)[0] compact bytes (the caller points *out at
 * that length; the bytes are its to write). Returns its reference and sets *out to it. */
uint32_t entry_new(struct shard *sh, enum ks_type type, uint8_t flags, const char *key, size_t klen,
                   uint8_t **out)
{
    size_t size = key_off(flags, klen) + klen;
    if (flags & F_HINLINE)
        size += inline_tail((*out)[0]);
    uint32_t ref = slab_alloc(sh, &sh->sl, size < MIN_ENTRY ? MIN_ENTRY : size);
    uint8_t *e = ref_ptr(sh, ref);
    /* A key created while its shard is being dumped is not part of that snapshot: it is born
     * with the current epoch, as if already dumped. */
    e[E_FLAGS] = (uint8_t)(flags | ((uint8_t)type & F_TYPE) | sh->epoch);
    if (klen >= KLEN_LONG) {
        uint32_t n = (uint32_t)klen;
        e[E_KLEN] = KLEN_LONG;
        memcpy(e + E_HDR, &n, 4);
    } else {
        e[E_KLEN] = (uint8_t)klen;
    }
    memcpy(e + key_off(flags, klen), key, klen);
    *out = e;
    return ref;
}

/* Adds an entry for a key known to be absent, with shape flags (F_HAS_EXP / F_EXP_IS_VAL), value
 * 0 and expiry field 0. Returns its slot (after growing the table if that was needed). */
uint64_t insert(const struct keyspace *ks, struct shard *sh, const struct ks_key *k,
                enum ks_type type, uint8_t flags)
{
    uint64_t count = atomic_load_explicit(&sh->count, memory_order_relaxed);
    if ((count + 1) * 8 > (sh->mask + 1) * 7)
        rehash(ks, sh, (sh->mask + 1) * 2, 0);
    uint8_t *e;
    uint32_t ref = entry_new(sh, type, flags & (uint8_t)~F_HINLINE, k->p, k->len, &e);
    e_set_val(e, 0);
    if (flags & F_HAS_EXP)
        memset(e + exp_off(k->len), 0, 8);
    uint64_t mask = sh->mask;
    uint64_t i = k->hash & mask;
    while (sh->tags[i] != 0)
        i = (i + 1) & mask;
    sh->tags[i] = tag_of(k->hash);
    sh->refs[i] = ref;
    if (sh->meta != NULL)
        sh->meta[i] =
            meta_fresh(sh->meta_kind, sh->meta_clock != 0 ? sh->meta_clock : meta_now());
    counter_add(&sh->count, 1);
    count_limiter(sh, type, 1);
    touch_entry(sh, e);
    raise_event(ks, KS_EVENT_NEW, e);
    return i;
}

/* Gives the entry in slot i the shape nflags (type bits included); exp fills the expiry field if
 * the new shape has one. A change of shape moves the entry to its new size class. */
uint8_t *reshape(struct shard *sh, uint64_t i, uint8_t nflags, int64_t exp)
{
    uint32_t oref = sh->refs[i];
    uint8_t *o = ref_ptr(sh, oref);
    size_t klen = e_klen(o);
    uint8_t oflags = o[E_FLAGS];
    nflags = (uint8_t)((nflags & ~F_EPOCH) | (oflags & F_EPOCH)); /* a reshape is no new key */
    if ((oflags & F_HAS_EXP) == (nflags & F_HAS_EXP)) {
        o[E_FLAGS] = nflags;
        if (nflags & F_HAS_EXP)
            memcpy(o + exp_off(klen), &exp, 8);
        return o;
    }
    size_t osize = e_size(o);
    size_t tail = e_inline_hash(o) ? inline_tail(o[0]) : 0;
    size_t nsize = key_off(nflags, klen) + klen + tail;
    uint32_t nref = slab_alloc(sh, &sh->sl, nsize < MIN_ENTRY ? MIN_ENTRY : nsize);
    o = ref_ptr(sh, oref);
    uint8_t *n = ref_ptr(sh, nref);
    memcpy(n, o, exp_off(klen)); /* value, flags, key length */
    n[E_FLAGS] = nflags;
    if (nflags & F_HAS_EXP)
        memcpy(n + exp_off(klen), &exp, 8);
    /* the key, and an inline hash's tail after it */
    memcpy(n + key_off(nflags, klen), o + key_off(oflags, klen), klen + tail);
    slab_free(sh, &sh->sl, oref, osize);
    sh->refs[i] = nref;
    return n;
}

/* Sets the expiry of slot i to at (0 = none), choosing the smallest shape that holds it. */
void set_expire(struct shard *sh, uint64_t i, int64_t at)
{
    uint8_t *e = slot_entry(sh, i);
    int64_t old = e_expire(e);
    uint8_t f = e[E_FLAGS] & (uint8_t) ~(F_HAS_EXP | F_EXP_IS_VAL);
    if (at != 0)
        f |= (e_type(e) == KS_GCRA && at == e_val(e)) ? F_EXP_IS_VAL : F_HAS_EXP;
    touch_entry(sh, reshape(sh, i, f, at));
    count_expiry_change(sh, old, at);
}

/* Before an entry's value or type changes, an implied expiry (== value) becomes a stored one,
 * and the old blob is freed. Returns the (possibly moved) entry. */
uint8_t *prepare_new_value(struct shard *sh, uint64_t i)
{
    uint8_t *e = slot_entry(sh, i);
    if (e[E_FLAGS] & F_EXP_IS_VAL) {
        int64_t at = e_val(e);
        uint8_t f = e[E_FLAGS] & (uint8_t)~F_EXP_IS_VAL;
        if (at != 0)
            f |= F_HAS_EXP;
        e = reshape(sh, i, f, at);
    }
    free_value(sh, e);
    if (e_inline_hash(e))
        e = set_inline_room(sh, i, 0);
    return e;
}

uint8_t *set_inline_room(struct shard *sh, uint64_t i, size_t n)
{
    uint32_t oref = sh->refs[i];
    uint8_t *o = ref_ptr(sh, oref);
    size_t klen = e_klen(o);
    size_t osize = e_size(o);
    size_t nsize = key_off(o[E_FLAGS], klen) + klen + inline_tail(n);
    nsize = nsize < MIN_ENTRY ? MIN_ENTRY : nsize;
    /* Slab slots come in 8-byte classes; a large entry is its own block of exactly its size. */
    int same = osize > MAX_SMALL || nsize > MAX_SMALL ? osize == nsize
                                                      : (osize + 7) / 8 == (nsize + 7) / 8;
    uint8_t *e = o;
    if (!same) {
        uint32_t nref = slab_alloc(sh, &sh->sl, nsize);
        o = ref_ptr(sh, oref);
        e = ref_ptr(sh, nref);
        memcpy(e, o, osize < nsize ? osize : nsize);
        slab_free(sh, &sh->sl, oref, osize);
        sh->refs[i] = nref;
    }
    if (n == 0) {
        e[E_FLAGS] &= (uint8_t)~F_HINLINE;
        e_set_ptr(e, NULL);
    } else {
        e[E_FLAGS] |= F_HINLINE;
        e[0] = (uint8_t)n;
    }
    return e;
}

size_t inline_cap(uint8_t flags, size_t klen)
{
    size_t fixed = key_off(flags, klen) + klen;
    if (fixed >= MAX_SMALL)
        return 0;
    size_t cap = MAX_SMALL - fixed + INLINE_HEAD;
    return cap > HV_COMPACT_MAX ? HV_COMPACT_MAX : cap;
}

void ks_reserve(struct keyspace *ks, uint64_t n)
{
    uint64_t per = n / ks->nshards + 1;
    uint64_t size = MIN_SLOTS;
    while (size / 8 * 7 < per && size < (1ull << 40))
        size *= 2;
    for (unsigned i = 0; i < ks->nshards; i++) {
        struct shard *sh = &ks->shards[i];
        if (sh->mask + 1 < size)
            rehash(ks, sh, size, 0);
    }
}
