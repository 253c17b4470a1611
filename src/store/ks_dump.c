/* ks_dump.c - the keyspace's side of snapshots: sliced dumps (ks_dump_*), ks_restore, and bulk
 * loading (ks_bulk_*). The keyspace only hands entries out and takes them back; it never
 * touches a file (src/persist does). */
#include "ks_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rlimitd/alloc.h"
#include "rlimitd/lease.h"
#include "rlimitd/zset.h"

/* ---- Sliced dumps ----
 *
 * A snapshot must not hold a shard's lock for the whole shard (tens of thousands of entries,
 * milliseconds at 10M keys: every command on that shard waits that long). So a save dumps a shard
 * in slices of a bounded number of slots, releasing the lock in between, while commands keep
 * changing the shard. A slot cursor alone is not enough: between slices a deletion's backward
 * shift can move a not-yet-dumped entry to a slot already passed (it would be missed), and a
 * resize moves every entry (some would be missed, others dumped twice; a loader that trusts a
 * snapshot to hold each key once must never see a double).
 *
 * So the "dumped or not" state lives in the entry itself: one flag bit, F_EPOCH, compared with
 * the shard's epoch. Outside a dump every entry's bit equals sh->epoch. ks_dump_begin flips
 * sh->epoch, which marks every existing entry "to dump" in O(1), and sets dump_left to the entry
 * count. A slice dumps entries whose bit differs and flips it; entries keep their bit when they
 * move (backward shift, reshape, rehash, compaction copy the flags byte), keys created during the
 * dump are born with the new epoch (not part of this snapshot), and freeing a not-yet-dumped
 * entry decrements dump_left (it is not part of it either). The dump ends when dump_left is 0.
 * Hence every key that exists for the whole dump is written exactly once, as it was at the
 * moment its slice ran; a key created or deleted during the dump may or may not be written.
 *
 * Efficiency, not correctness, is what the cursor is for: a slice goes on past its budget to the
 * next empty slot, so the cursor always follows an empty slot. An entry not yet passed then has
 * its home slot at or after the cursor (its probe run cannot cross that empty slot), and since a
 * backward shift moves an entry only towards its home, it can never move behind the cursor:
 * one pass finds everything. After a resize (a new slot array: table_gen changed) the cursor
 * starts again at slot 0; already-dumped entries are skipped by their bit. If a pass ends with
 * entries left (only after such a restart), the cursor wraps. */

void ks_dump_begin(struct keyspace *ks, unsigned shard)
{
    struct shard *sh = &ks->shards[shard];
    if (sh->dumping) {
        fprintf(stderr, "rlimitd: ks_dump_begin on a shard already being dumped\n");
        abort();
    }
    sh->epoch ^= F_EPOCH;
    sh->dumping = 1;
    sh->dump_left = atomic_load_explicit(&sh->count, memory_order_relaxed);
    sh->dump_cursor = 0;
    sh->dump_gen = sh->table_gen;
    sh->dump_wraps = 0;
}

int ks_dump_slice(struct keyspace *ks, unsigned shard, int64_t now, uint64_t max_slots,
                  ks_dump_fn cb, void *ud, uint64_t *dumped)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t mask = sh->mask;
    uint64_t i = sh->dump_cursor;
    uint64_t visited = 0;
    uint8_t epoch = sh->epoch;
    union swlog_buf logbuf;
    struct hv_local hvbuf;
    if (!sh->dumping)
        return 1;
    if (sh->dump_gen != sh->table_gen) {
        i = 0; /* resized (or rehashed) since the last slice */
        sh->dump_gen = sh->table_gen;
        sh->dump_wraps = 0;
    }
    while (sh->dump_left > 0) {
        if (i > mask) {
            /* Entries left after a full pass: only after a resize, see above. A second wrap
             * without a resize means dump_left and the bits disagree: a broken invariant. */
            i = 0;
            if (++sh->dump_wraps > 2) {
                fprintf(stderr, "rlimitd: sliced dump lost track of %llu entries\n",
                        (unsigned long long)sh->dump_left);
                abort();
            }
        }
        if (visited >= max_slots && sh->tags[i] == 0)
            break; /* the next slice starts at an empty slot: see above */
        visited++;
        uint64_t ahead = (i + 8) & mask;
        if (sh->tags[ahead] != 0)
            __builtin_prefetch(slot_entry(sh, ahead));
        if (sh->tags[i] == 0) {
            i++;
            continue;
        }
        uint8_t *e = slot_entry(sh, i);
        i++;
        if ((e[E_FLAGS] & F_EPOCH) == epoch)
            continue; /* dumped already, or created during this dump */
        e[E_FLAGS] ^= F_EPOCH;
        sh->dump_left--;
        if (e_expired(e, now))
            continue; /* SNAPSHOT.md: expired state is skipped on write */
        struct ks_record r = {0};
        r.type = e_type(e);
        r.klen = e_klen(e);
        r.key = e_key(e, r.klen);
        r.expire = e_expire(e);
        if (r.type == KS_GCRA || r.type == KS_INT) {
            r.i = e_val(e);
        } else if (r.type == KS_RAW) {
            const struct rawstr *str = e_ptr(e);
            r.p = str->data;
            r.len = str->len;
        } else if (r.type == KS_ZSET) {
            r.zs = e_ptr(e);
        } else if (r.type == KS_HASH) {
            if (e[E_FLAGS] & F_HINLINE) {
                unsigned char c[HV_COMPACT_MAX];
                size_t n = inline_read(e, c);
                r.hv = hv_compact_load(&hvbuf, c, n);
            } else {
                r.hv = e_ptr(e);
            }
        } else if (r.type == KS_LIST) {
            r.lv = e_ptr(e);
        } else if (r.type == KS_LEASE) {
            r.leases = e_ptr(e);
        } else {
            r.log = (e[E_FLAGS] & F_CRING) ? cring_load(e_ptr(e), &logbuf) : e_ptr(e);
        }
        cb(ud, &r);
        (*dumped)++;
    }
    sh->dump_cursor = i;
    if (sh->dump_left > 0)
        return 0;
    sh->dumping = 0;
    return 1;
}

size_t ks_dump_peek(struct keyspace *ks, unsigned shard, uint64_t max_slots, const void **addrs,
                    size_t cap)
{
    struct shard *sh = &ks->shards[shard];
    uint64_t mask = sh->mask;
    uint64_t i = sh->dump_gen == sh->table_gen ? sh->dump_cursor : 0;
    size_t n = 0;
    if (!sh->dumping)
        return 0;
    for (uint64_t k = 0; k < max_slots && n < cap && i <= mask; k++, i++)
        if (sh->tags[i] != 0)
            addrs[n++] = slot_entry(sh, i);
    return n;
}

uint64_t ks_dump_shard(struct keyspace *ks, unsigned shard, int64_t now, ks_dump_fn cb, void *ud)
{
    uint64_t n = 0;
    ks_dump_begin(ks, shard);
    ks_dump_slice(ks, shard, now, UINT64_MAX, cb, ud, &n);
    return n;
}

/* What ks_restore refuses: an unknown type, a window log with no or unsorted timestamps, a
 * lease set with no leases or ids not ascending. */
static int record_invalid(const struct ks_record *r)
{
    if (r->type == KS_LEASE) {
        const struct lease_set *s = r->leases;
        if (s == NULL || s->n == 0)
            return 1;
        for (uint32_t i = 1; i < s->n; i++)
            if (s->l[i].id <= s->l[i - 1].id)
                return 1;
        return s->l[s->n - 1].id > s->last_id;
    }
    if (r->type == KS_HASH)
        return r->hv == NULL || hv_count(r->hv) == 0;
    if (r->type == KS_LIST)
        return r->lv == NULL || lv_count(r->lv) == 0;
    if (r->type < KS_GCRA || r->type > KS_ZSET)
        return 1;
    if (r->type == KS_ZSET)
        return r->zs == NULL || zs_card(r->zs) == 0;
    if (r->type == KS_SWLOG) {
        if (r->nts == 0 || r->ts == NULL)
            return 1;
        for (uint32_t i = 1; i < r->nts; i++)
            if (r->ts[i] < r->ts[i - 1])
                return 1;
    }
    return 0;
}

/* Entry e's value becomes a ring holding exactly the record's timestamps (e holds none). */
static void set_restored_log(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    union swlog_buf buf;
    int on_heap = r->nts > CRING_MAX_CAP;
    struct swlog *log = on_heap ? shard_alloc(sh, swlog_bytes(r->nts)) : &buf.log;
    swlog_init(log, r->nts);
    /* Recording in order rebuilds the ring exactly: max_count = n - 1 keeps all n. */
    for (uint32_t j = 0; j < r->nts; j++)
        swlog_record(log, r->ts[j], (int64_t)r->nts - 1);
    store_log(sh, e, NULL, log, on_heap);
}

/* The compact form of a restored hash if it goes inside an entry of this shape, else 0. */
static size_t restored_inline(const struct ks_record *r, uint8_t flags, unsigned char *c)
{
    return r->type == KS_HASH ? hv_compact_write(r->hv, c, inline_cap(flags, r->klen)) : 0;
}

/* Sets the value of a new entry from a record (the entry's shape is already final; a hash that
 * goes inside it already has its room and F_HINLINE: see restored_inline). */
static void set_restored_value(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    switch (r->type) {
    case KS_GCRA:
    case KS_INT:
        e_set_val(e, r->i);
        break;
    case KS_RAW: {
        struct rawstr *str = shard_alloc(sh, sizeof(*str) + r->len);
        str->len = r->len;
        memcpy(str->data, r->p, r->len);
        e_set_ptr(e, str);
        break;
    }
    case KS_ZSET: {
        struct zset *z = zs_dup(r->zs);
        mem_add_n(sh, (int64_t)zs_bytes(z));
        e_set_ptr(e, z);
        break;
    }
    case KS_LIST: {
        struct listval *l = lv_clone(r->lv);
        e_set_ptr(e, l);
        mem_add_n(sh, (int64_t)lv_bytes(l));
        break;
    }
    case KS_LEASE: {
        struct lease_set *s = shard_alloc(sh, lease_set_bytes(r->leases->n));
        memcpy(s, r->leases, lease_set_bytes(r->leases->n));
        s->cap = s->n;
        e_set_ptr(e, s);
        break;
    }
    case KS_HASH: {
        unsigned char c[HV_COMPACT_MAX];
        size_t n = (e[E_FLAGS] & F_HINLINE) ? restored_inline(r, e[E_FLAGS], c) : 0;
        if (n > 0) {
            inline_write(e, c, n);
            break;
        }
        struct hashval *h = hv_clone(r->hv);
        e_set_ptr(e, h);
        mem_add_n(sh, (int64_t)hv_bytes(h));
        break;
    }
    default:
        set_restored_log(sh, e, r);
        break;
    }
}

/* The shape a restored entry is born with, so a load never moves entries between classes. */
static uint8_t restored_shape(const struct ks_record *r)
{
    if (r->expire == 0)
        return 0;
    return (r->type == KS_GCRA && r->expire == r->i) ? F_EXP_IS_VAL : F_HAS_EXP;
}

/* What both load paths do first: -1 for an invalid record, 0 for one to skip (SNAPSHOT.md: expired
 * state is skipped on load too), 1 to load it. */
static int restore_admit(const struct ks_record *r, int64_t now)
{
    if (record_invalid(r))
        return -1;
    return r->expire != 0 && ks_stamp_le(r->expire, now) ? 0 : 1;
}

/* Fills a new entry, born with restored_shape(r), with the record's value and expiry. */
static void fill_restored(struct shard *sh, uint8_t *e, const struct ks_record *r)
{
    if (e[E_FLAGS] & F_HAS_EXP)
        memcpy(e + exp_off(r->klen), &r->expire, 8);
    set_restored_value(sh, e, r);
}

int ks_restore(struct keyspace *ks, const struct ks_record *r, int64_t now)
{
    int admit = restore_admit(r, now);
    if (admit <= 0)
        return admit;
    struct ks_key k;
    ks_key_init(ks, &k, r->key, r->klen);
    struct shard *sh = shard_of(ks, &k);
    int64_t si = find(ks, sh, &k, now);
    unsigned char c[HV_COMPACT_MAX];
    if (si < 0) {
        uint64_t i = insert(ks, sh, &k, r->type, restored_shape(r));
        size_t n = restored_inline(r, restored_shape(r), c);
        if (n > 0)
            set_inline_room(sh, i, n);
        fill_restored(sh, slot_entry(sh, i), r);
        if (r->expire != 0)
            counter_add(&sh->expires, 1);
        return 1;
    }
    uint64_t i = (uint64_t)si;
    uint8_t *e = prepare_new_value(sh, i);
    set_type(sh, e, r->type);
    if (r->type == KS_GCRA || r->type == KS_INT) {
        /* An implied expiry must not change before set_expire has counted the old one. */
        if (e[E_FLAGS] & F_EXP_IS_VAL) {
            set_gcra(sh, i, r->i);
            e = slot_entry(sh, i);
        } else {
            e_set_val(e, r->i);
        }
    } else {
        size_t n = restored_inline(r, e[E_FLAGS], c);
        if (n > 0)
            e = set_inline_room(sh, i, n);
        set_restored_value(sh, e, r);
    }
    set_expire(sh, i, r->expire);
    return 1;
}

/* ---- Bulk loading ----
 *
 * Loading a 10M-key snapshot with ks_restore spent most of its time waiting for memory: every
 * key's home slot is a random place in tables far bigger than the caches (and in a VM a TLB miss
 * is a nested page walk). A bulk load does not touch the tables while it reads: ks_bulk_add
 * writes each entry into its shard's slabs (sequential per shard) and appends (home bits, tag,
 * reference) to the shard's pending list, sequential too. ks_bulk_end then builds each shard's
 * table in one go: a counting sort of the pending list by home slot, and the slots filled in home
 * order, a sequential sweep through the table. Placing keys in ascending home order at the first
 * free slot at or after the home gives a table that satisfies the invariant lookups and deletions
 * rely on (every slot between a key's home slot and the key is occupied).
 *
 * Duplicates: a snapshot holds each key once (ks_dump_slice), but a file could say otherwise,
 * and ks_restore's answer is that the later record replaces the earlier. Equal keys have equal
 * hashes, so the sweep meets the earlier one in the new key's probe run, as a lookup would (the
 * run is the few slots just filled, still in the cache); it is freed and the later entry takes
 * its slot. The sort is stable, so "later" is file order: the keyspace ks_restore would build. */

#define BULK_HOME_BITS 25 /* home bits kept per pending key; bigger tables rehash the entry */

int ks_bulk_begin(struct keyspace *ks)
{
    if (ks->bulk || ks_key_count(ks) != 0)
        return -1;
    ks->bulk = 1;
    return 0;
}

int ks_bulk_add(struct keyspace *ks, const struct ks_record *r, int64_t now)
{
    if (!ks->bulk) {
        fprintf(stderr, "rlimitd: ks_bulk_add without ks_bulk_begin\n");
        abort();
    }
    int admit = restore_admit(r, now);
    if (admit <= 0)
        return admit;
    struct ks_key k;
    ks_key_init(ks, &k, r->key, r->klen);
    struct shard *sh = shard_of(ks, &k);
    unsigned char c[HV_COMPACT_MAX];
    uint8_t hn[1] = {(uint8_t)restored_inline(r, restored_shape(r), c)};
    uint8_t *e = hn; /* entry_new reads an inline hash's length there */
    uint32_t ref = entry_new(sh, r->type, (uint8_t)(restored_shape(r) | (hn[0] ? F_HINLINE : 0)),
                             r->key, r->klen, &e);
    fill_restored(sh, e, r);
    if (sh->nbulk == sh->cap_bulk) {
        /* mmap'd, not malloc'd: 8 bytes a key for the duration of the load only (80 MB at 10M
         * keys), which munmap gives back, where the malloc heap might keep it. */
        size_t old = sh->cap_bulk * sizeof(*sh->bulk);
        sh->cap_bulk = sh->cap_bulk ? sh->cap_bulk * 2 : PAGE / sizeof(*sh->bulk);
        size_t n = sh->cap_bulk * sizeof(*sh->bulk);
        void *p = sh->bulk == NULL ? xmmap(n) : mremap(sh->bulk, old, n, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            alloc_fail(n);
        sh->bulk = p;
    }
    sh->bulk[sh->nbulk++] = ((uint64_t)ref << 32) | ((k.hash & ((1u << BULK_HOME_BITS) - 1)) << 7) |
                            (uint64_t)(tag_of(k.hash) & 0x7f);
    counter_add(&sh->count, 1);
    count_limiter(sh, r->type, 1);
    if (r->expire != 0)
        counter_add(&sh->expires, 1);
    return 1;
}

/* Home slot (in a table of mask + 1 slots) and tag of a pending key. */
static void bulk_slot(const struct keyspace *ks, const struct shard *sh, uint64_t item,
                      uint64_t mask, uint64_t *home, uint8_t *tag)
{
    if (mask < (1u << BULK_HOME_BITS)) {
        *home = (item >> 7) & mask;
        *tag = (uint8_t)(0x80 | (item & 0x7f));
    } else {
        uint64_t h = entry_hash(ks, ref_ptr(sh, (uint32_t)(item >> 32)));
        *home = h & mask;
        *tag = tag_of(h);
    }
}

static int same_key(const struct shard *sh, uint32_t a, uint32_t b)
{
    const uint8_t *x = ref_ptr(sh, a), *y = ref_ptr(sh, b);
    size_t kx = e_klen(x), ky = e_klen(y);
    return kx == ky && memcmp(e_key(x, kx), e_key(y, ky), kx) == 0;
}

struct bulk_scratch {
    uint32_t *count;
    uint64_t ncount;
    uint64_t *sorted;
    uint64_t nsorted;
};

static void bulk_build(const struct keyspace *ks, struct shard *sh, struct bulk_scratch *b)
{
    uint64_t n = sh->nbulk;
    uint64_t size = sh->mask + 1;
    while (n * 8 > size * 7)
        size *= 2;
    if (size != sh->mask + 1) {
        uint64_t on = sh->mask + 1;
        table_free(sh, sh->tags, on);
        table_alloc(sh, size);
        if (sh->meta != NULL) {
            meta_free(sh, sh->meta, on);
            sh->meta = meta_alloc(sh, size);
        }
    }
    uint64_t mask = sh->mask;
    if (b->ncount < size + 1) {
        if (b->count != NULL)
            munmap(b->count, b->ncount * sizeof(*b->count));
        b->ncount = size + 1;
        b->count = xmmap(b->ncount * sizeof(*b->count));
    }
    if (b->nsorted < n) {
        if (b->sorted != NULL)
            munmap(b->sorted, b->nsorted * sizeof(*b->sorted));
        b->nsorted = n;
        b->sorted = xmmap(n * sizeof(*b->sorted));
    }
    uint32_t *count = b->count;
    uint64_t *sorted = b->sorted;
    uint64_t home;
    uint8_t tag;
    /* Counting sort by home slot. Stable: equal keys stay in the order they were added. */
    memset(count, 0, (size + 1) * sizeof(*count));
    for (uint64_t j = 0; j < n; j++) {
        bulk_slot(ks, sh, sh->bulk[j], mask, &home, &tag);
        count[home + 1]++;
    }
    for (uint64_t h = 0; h < size; h++)
        count[h + 1] += count[h];
    for (uint64_t j = 0; j < n; j++) {
        bulk_slot(ks, sh, sh->bulk[j], mask, &home, &tag);
        sorted[count[home]++] = sh->bulk[j];
    }
    /* The sweep: slots [last home placed, next) are occupied, all slots from next on are free
     * (but for keys that wrapped past the end, placed at the start at the very end). */
    uint64_t next = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t item = sorted[j];
        uint32_t ref = (uint32_t)(item >> 32);
        bulk_slot(ks, sh, item, mask, &home, &tag);
        int wraps = (home > next ? home : next) > mask;
        /* The probe run of this key: [home, next) in the sweep, up to an empty slot after a
         * wrap. An equal key in it is an earlier record of the same key. */
        uint64_t i = home;
        int replaced = 0;
        while (wraps ? sh->tags[i] != 0 : i < next) {
            if (sh->tags[i] == tag && same_key(sh, sh->refs[i], ref)) {
                free_entry_at(sh, i);
                sh->refs[i] = ref;
                replaced = 1;
                break;
            }
            i = (i + 1) & mask;
        }
        if (replaced)
            continue;
        if (!wraps) {
            i = home > next ? home : next;
            next = i + 1;
        } /* else i is the first free slot after the run, as a probe finds it */
        sh->tags[i] = tag;
        sh->refs[i] = ref;
        if (sh->meta != NULL)
            sh->meta[i] = meta_fresh(sh->meta_kind, meta_now());
    }
    munmap(sh->bulk, sh->cap_bulk * sizeof(*sh->bulk));
    sh->bulk = NULL;
    sh->nbulk = sh->cap_bulk = 0;
}

void ks_bulk_end(struct keyspace *ks)
{
    struct bulk_scratch b = {0};
    for (unsigned s = 0; s < ks->nshards; s++)
        if (ks->shards[s].nbulk > 0)
            bulk_build(ks, &ks->shards[s], &b);
    if (b.count != NULL)
        munmap(b.count, b.ncount * sizeof(*b.count));
    if (b.sorted != NULL)
        munmap(b.sorted, b.nsorted * sizeof(*b.sorted));
    ks->bulk = 0;
}
