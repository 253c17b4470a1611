/* topk.c - the space-saving sketch (topk.h).
 *
 * Four arrays in the caller's block:
 *   slots[k]   the counters: key hash, count, full length, first TOPK_KEY_MAX bytes, error;
 *   heap[k]    (stored count, slot number) pairs as a binary min-heap on the stored count;
 *   pos[k]     each slot's position in the heap;
 *   table[2^b] slot number + 1 (0 = empty) by key hash, open addressing with linear probing,
 *              at most half full; a removed key's run is closed up by backward shifting, so
 *              there are no tombstones.
 *
 * The heap is lazy: an add that finds its key only increments the slot's count, so the common
 * add touches the table and one slot (a few cache lines) and no heap at all. Invariant: every
 * stored count <= its slot's count. A takeover needs the true minimum: while the root's stored
 * count is below its slot's, it is raised to it and sifted down; once they are equal, the root
 * holds the smallest count (it is <= every stored count, each <= its count). Each such repair
 * follows at least one increment of that slot since its last one, so the repairs cost at most
 * O(log k) per add in total, and nothing while no counter is taken over; one takeover may
 * repair many slots at once (at most k).
 * A hit costs a probe run; a takeover a probe run, its repairs and one sift-down. */
#include "rlimitd/topk.h"

#include <stdalign.h>
#include <string.h>

#include "rlimitd/hash.h"

struct slot {
    uint64_t hash;
    uint64_t count;
    uint64_t error;
    uint64_t floor_in; /* merged sketches only: the sum of the floors of the parts listing it */
    size_t len;        /* the key's full length */
    char key[TOPK_KEY_MAX];
};

struct hent {
    uint64_t count; /* stored: <= slots[slot].count */
    uint32_t slot;
};

struct topk {
    uint32_t k;    /* counters */
    uint32_t used; /* counters holding a key */
    uint64_t mask; /* table slots - 1 */
    uint64_t total;
    uint64_t floor; /* merged sketches only: the sum of the parts' floors (topk_floor) */
    int taken;      /* a counter has been taken over: unlisted keys may have been seen */
    int merged;     /* filled by topk_merge, not topk_add */
    uint8_t seed[16];
    struct slot *slots;
    struct hent *heap;
    uint32_t *pos;
    uint32_t *table;
};

static uint64_t table_slots(uint32_t k)
{
    uint64_t n = 16;
    while (n < 2 * (uint64_t)k)
        n *= 2;
    return n;
}

static size_t align_up(size_t n)
{
    size_t a = alignof(max_align_t);
    return (n + a - 1) / a * a;
}

static size_t bytes_for(uint32_t k)
{
    return align_up(sizeof(struct topk)) + align_up(sizeof(struct slot) * k) +
           align_up(sizeof(struct hent) * k) + align_up(sizeof(uint32_t) * k) +
           sizeof(uint32_t) * table_slots(k);
}

size_t topk_bytes(uint32_t k)
{
    if (k < TOPK_MIN_SIZE || k > TOPK_MAX_SIZE)
        return 0;
    return bytes_for(k);
}

size_t topk_merged_bytes(uint32_t k)
{
    if (k < TOPK_MIN_SIZE || k > TOPK_MAX_MERGED)
        return 0;
    return bytes_for(k);
}

static struct topk *init(void *mem, uint32_t k, const uint8_t seed[16])
{
    char *p = mem;
    struct topk *t = mem;
    memset(t, 0, sizeof(*t));
    t->k = k;
    t->mask = table_slots(k) - 1;
    memcpy(t->seed, seed, 16);
    p += align_up(sizeof(struct topk));
    t->slots = (struct slot *)p;
    p += align_up(sizeof(struct slot) * k);
    t->heap = (struct hent *)p;
    p += align_up(sizeof(struct hent) * k);
    t->pos = (uint32_t *)p;
    p += align_up(sizeof(uint32_t) * k);
    t->table = (uint32_t *)p;
    topk_clear(t);
    return t;
}

struct topk *topk_init(void *mem, uint32_t k, const uint8_t seed[16])
{
    if (mem == NULL || topk_bytes(k) == 0)
        return NULL;
    return init(mem, k, seed);
}

struct topk *topk_merged_init(void *mem, uint32_t k)
{
    static const uint8_t unused[16]; /* the parts' hashes are reused, never computed */
    if (mem == NULL || topk_merged_bytes(k) == 0)
        return NULL;
    struct topk *t = init(mem, k, unused);
    t->merged = 1;
    return t;
}

void topk_clear(struct topk *t)
{
    t->used = 0;
    t->total = 0;
    t->floor = 0;
    t->taken = 0;
    memset(t->table, 0, sizeof(uint32_t) * (t->mask + 1));
}

uint64_t topk_total(const struct topk *t)
{
    return t->total;
}

uint32_t topk_size(const struct topk *t)
{
    return t->k;
}

uint64_t topk_floor(const struct topk *t)
{
    if (t->merged)
        return t->floor;
    if (!t->taken)
        return 0;
    uint64_t least = t->slots[0].count; /* the heap's root may be stale: scan */
    for (uint32_t si = 1; si < t->used; si++)
        if (t->slots[si].count < least)
            least = t->slots[si].count;
    return least;
}

static size_t kept(size_t len)
{
    return len < TOPK_KEY_MAX ? len : TOPK_KEY_MAX;
}

static int same_key(const struct slot *s, uint64_t hash, const char *key, size_t len)
{
    return s->hash == hash && s->len == len && memcmp(s->key, key, kept(len)) == 0;
}

/* Table position of slot number si (which is in the table). */
static uint64_t table_find_slot(const struct topk *t, uint32_t si)
{
    uint64_t i = t->slots[si].hash & t->mask;
    while (t->table[i] != si + 1)
        i = (i + 1) & t->mask;
    return i;
}

static void table_insert(struct topk *t, uint32_t si)
{
    uint64_t i = t->slots[si].hash & t->mask;
    while (t->table[i] != 0)
        i = (i + 1) & t->mask;
    t->table[i] = si + 1;
}

/* Removes position i and shifts later members of the run back into the hole, so that every
 * key stays reachable from its home position without crossing an empty slot. */
static void table_remove_at(struct topk *t, uint64_t i)
{
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & t->mask; t->table[j] != 0; j = (j + 1) & t->mask) {
        uint64_t home = t->slots[t->table[j] - 1].hash & t->mask;
        /* j may move to hole unless its home lies cyclically in (hole, j]. */
        int home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_after_hole) {
            t->table[hole] = t->table[j];
            hole = j;
        }
    }
    t->table[hole] = 0;
}

static void heap_swap(struct topk *t, uint32_t a, uint32_t b)
{
    struct hent ha = t->heap[a];
    t->heap[a] = t->heap[b];
    t->heap[b] = ha;
    t->pos[t->heap[a].slot] = a;
    t->pos[ha.slot] = b;
}

/* Stored counts only grow, so an entry only ever moves down. */
static void heap_down(struct topk *t, uint32_t at)
{
    for (;;) {
        uint32_t l = 2 * at + 1, r = l + 1, least = at;
        if (l < t->used && t->heap[l].count < t->heap[least].count)
            least = l;
        if (r < t->used && t->heap[r].count < t->heap[least].count)
            least = r;
        if (least == at)
            return;
        heap_swap(t, at, least);
        at = least;
    }
}

/* A new counter enters at the bottom and rises. */
static void heap_up(struct topk *t, uint32_t at)
{
    while (at > 0) {
        uint32_t parent = (at - 1) / 2;
        if (t->heap[parent].count <= t->heap[at].count)
            return;
        heap_swap(t, at, parent);
        at = parent;
    }
}

static void set_key(struct slot *s, uint64_t hash, const char *key, size_t len)
{
    s->hash = hash;
    s->len = len;
    memcpy(s->key, key, kept(len));
}

uint64_t topk_hash(const uint8_t seed[16], const char *key, size_t len)
{
    return hash_siphash13(key, len, seed);
}

void topk_add(struct topk *t, const char *key, size_t len)
{
    topk_add_hashed(t, key, len, topk_hash(t->seed, key, len));
}

void topk_add_hashed(struct topk *t, const char *key, size_t len, uint64_t hash)
{
    t->total++;
    for (uint64_t i = hash & t->mask; t->table[i] != 0; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[t->table[i] - 1];
        if (same_key(s, hash, key, len)) {
            s->count++; /* the heap is repaired lazily, at a takeover */
            return;
        }
    }
    if (t->used < t->k) {
        /* A free counter. */
        uint32_t si = t->used;
        struct slot *s = &t->slots[si];
        set_key(s, hash, key, len);
        s->count = 1;
        s->error = 0;
        s->floor_in = 0;
        t->heap[si] = (struct hent){1, si};
        t->pos[si] = si;
        t->used++;
        heap_up(t, si);
        table_insert(t, si);
        return;
    }
    /* Take over the smallest counter: the newcomer may have been seen up to min times before. */
    while (t->heap[0].count < t->slots[t->heap[0].slot].count) {
        t->heap[0].count = t->slots[t->heap[0].slot].count;
        heap_down(t, 0);
    }
    uint32_t si = t->heap[0].slot;
    struct slot *s = &t->slots[si];
    t->taken = 1;
    table_remove_at(t, table_find_slot(t, si));
    set_key(s, hash, key, len);
    s->error = s->count;
    s->count++;
    t->heap[0].count = s->count;
    table_insert(t, si);
    heap_down(t, 0);
}

int topk_merge(struct topk *into, const struct topk *part)
{
    if (!into->merged || part->merged)
        return -1;
    uint64_t floor = topk_floor(part);
    for (uint32_t pi = 0; pi < part->used; pi++) {
        const struct slot *p = &part->slots[pi];
        uint64_t count = p->count;
        struct slot *s = NULL;
        for (uint64_t i = p->hash & into->mask; into->table[i] != 0; i = (i + 1) & into->mask) {
            struct slot *c = &into->slots[into->table[i] - 1];
            if (same_key(c, p->hash, p->key, p->len)) {
                s = c;
                break;
            }
        }
        if (s != NULL) {
            s->count += count; /* a merged sketch takes nothing over: its heap is not used */
            s->error += p->error;
            s->floor_in += floor;
            continue;
        }
        if (into->used == into->k)
            return -1; /* too small for the union: the caller sized it wrong */
        uint32_t si = into->used++;
        s = &into->slots[si];
        set_key(s, p->hash, p->key, p->len);
        s->count = count;
        s->error = p->error;
        s->floor_in = floor;
        table_insert(into, si);
    }
    into->total += part->total;
    into->floor += floor;
    return 0;
}

/* Ranking for topk_list: 1 if a comes before b. */
static int ranks_before(const struct topk_item *a, const struct topk_item *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    if (a->error != b->error)
        return a->error < b->error;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->key, b->key, n);
    if (c != 0)
        return c < 0;
    return a->len < b->len;
}

/* out[0..n) as a heap whose root is the item ranked last. */
static void worst_down(struct topk_item *out, uint32_t n, uint32_t at)
{
    for (;;) {
        uint32_t l = 2 * at + 1, r = l + 1, worst = at;
        if (l < n && ranks_before(&out[worst], &out[l]))
            worst = l;
        if (r < n && ranks_before(&out[worst], &out[r]))
            worst = r;
        if (worst == at)
            return;
        struct topk_item tmp = out[at];
        out[at] = out[worst];
        out[worst] = tmp;
        at = worst;
    }
}

static void worst_up(struct topk_item *out, uint32_t at)
{
    while (at > 0) {
        uint32_t parent = (at - 1) / 2;
        if (!ranks_before(&out[parent], &out[at]))
            return;
        struct topk_item tmp = out[at];
        out[at] = out[parent];
        out[parent] = tmp;
        at = parent;
    }
}

uint32_t topk_list(const struct topk *t, struct topk_item *out, uint32_t max)
{
    uint32_t n = 0;
    if (max == 0)
        return 0;
    /* Keep the best max in a heap of the worst-ranked first: O(k log max), no allocation. */
    for (uint32_t si = 0; si < t->used; si++) {
        const struct slot *s = &t->slots[si];
        /* In a merged sketch, each part that does not list the key adds its floor. */
        uint64_t absent = t->floor - s->floor_in;
        uint64_t count = s->count + absent;
        struct topk_item it = {s->key, kept(s->len), count, s->error + absent};
        if (n < max) {
            out[n] = it;
            worst_up(out, n);
            n++;
        } else if (ranks_before(&it, &out[0])) {
            out[0] = it;
            worst_down(out, n, 0);
        }
    }
    /* Heap sort: repeatedly move the worst to the end. */
    for (uint32_t end = n; end > 1; end--) {
        struct topk_item tmp = out[0];
        out[0] = out[end - 1];
        out[end - 1] = tmp;
        worst_down(out, end - 1, 0);
    }
    return n;
}
