/* hashval.c - hash values, packed or as a table (hashval.h). */
#include "rlimitd/hashval.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/hash.h"
#include "rlimitd/util.h"

/* Common head: which encoding, and the field count. */
struct hashval {
    uint32_t count;
    uint32_t used; /* packed: bytes of data in use (at most PACKED_MAX_BYTES) */
    uint8_t big;
    uint8_t local; /* packed in a struct hv_local: not malloc'd, HV_LOCAL_BYTES in all */
};

/* Packed: the head, then pairs as [flen][field][vlen][value], each length one byte below
 * LEN_LONG, else LEN_LONG and 4 bytes (little-endian). Capacity is what malloc gave
 * (malloc_usable_size), so growth wastes nothing beyond its size class, or the struct
 * hv_local's. */
struct packed {
    struct hashval h;
    unsigned char data[];
};

struct node {
    struct node *next;
    uint32_t flen, vlen;
    char data[]; /* field, then value */
};

struct table {
    struct hashval h;
    uint64_t mask;
    struct node **b;
    size_t node_bytes; /* malloc_usable_size of every node: hv_bytes stays O(1) */
};

static uint8_t seed_[16];

void hv_set_seed(const uint8_t seed[16])
{
    memcpy(seed_, seed, 16);
}

/* The live bounds (hv_watch_limits): read once per hv_set, relaxed, as the configuration
 * writes them in place. */
static const int64_t *lim_entries_, *lim_value_;

void hv_watch_limits(const int64_t *entries, const int64_t *value)
{
    __atomic_store_n(&lim_entries_, entries, __ATOMIC_RELEASE);
    __atomic_store_n(&lim_value_, value, __ATOMIC_RELEASE);
}

static uint64_t limit_of(const int64_t *const *src, uint64_t dflt)
{
    const int64_t *p = __atomic_load_n(src, __ATOMIC_ACQUIRE);
    return p != NULL ? (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED) : dflt;
}

struct hashval *hv_new(void)
{
    struct packed *p = xrealloc(NULL, sizeof(struct packed) + 16);
    memset(&p->h, 0, sizeof(p->h));
    return &p->h;
}

struct hashval *hv_clone(const struct hashval *h)
{
    struct hashval *c = hv_new();
    struct hv_iter it;
    const char *f, *v;
    size_t flen, vlen;
    hv_iter_init(&it, h);
    while (hv_next(&it, &f, &flen, &v, &vlen))
        hv_set(&c, f, flen, v, vlen);
    return c;
}

static void table_free_nodes(struct table *t)
{
    for (uint64_t i = 0; i <= t->mask; i++) {
        struct node *n = t->b[i];
        while (n != NULL) {
            struct node *next = n->next;
            free(n);
            n = next;
        }
    }
    free(t->b);
}

void hv_free(struct hashval *h)
{
    if (h == NULL || h->local)
        return;
    if (h->big)
        table_free_nodes((struct table *)h);
    free(h);
}

size_t hv_count(const struct hashval *h)
{
    return h->count;
}

int hv_is_packed(const struct hashval *h)
{
    return !h->big;
}

int hv_is_local(const struct hashval *h)
{
    return h->local;
}

size_t hv_bytes(const struct hashval *h)
{
    if (h->local)
        return 0;
    size_t n = malloc_usable_size((void *)h);
    if (h->big) {
        const struct table *t = (const struct table *)h;
        n += malloc_usable_size(t->b) + t->node_bytes;
    }
    return n;
}

/* ---- packed ---- */

#define LEN_LONG 255
/* Redis's listpack safety bound: a hash that would pack more data than this is a table. */
#define PACKED_MAX_BYTES ((size_t)1 << 30)

static size_t len_size(size_t len)
{
    return len < LEN_LONG ? 1 : 5;
}

/* Writes len's prefix at d; returns its size. */
static size_t len_put(unsigned char *d, size_t len)
{
    if (len < LEN_LONG) {
        d[0] = (unsigned char)len;
        return 1;
    }
    uint32_t u = (uint32_t)len;
    d[0] = LEN_LONG;
    for (int i = 0; i < 4; i++, u >>= 8)
        d[1 + i] = (unsigned char)u;
    return 5;
}

/* A pair decoded: field at data + f, value at data + v, the next pair at data + end. */
struct pair {
    size_t f, flen, vh, v, vlen, end; /* vh: the value's length prefix */
};

static size_t len_get(const unsigned char *d, size_t *at)
{
    size_t len = d[*at];
    if (len != LEN_LONG) {
        *at += 1;
        return len;
    }
    len = (size_t)d[*at + 1] | (size_t)d[*at + 2] << 8 | (size_t)d[*at + 3] << 16 |
          (size_t)d[*at + 4] << 24;
    *at += 5;
    return len;
}

static void pair_at(const unsigned char *d, size_t pos, struct pair *q)
{
    q->flen = len_get(d, &pos);
    q->f = pos;
    q->vh = pos + q->flen;
    pos = q->vh;
    q->vlen = len_get(d, &pos);
    q->v = pos;
    q->end = pos + q->vlen;
}

/* Offset of field f's pair (decoded into *q), or -1. */
static long packed_find(const struct packed *p, const char *f, size_t flen, struct pair *q)
{
    size_t pos = 0;
    while (pos < p->h.used) {
        pair_at(p->data, pos, q);
        if (q->flen == flen && memcmp(p->data + q->f, f, flen) == 0)
            return (long)pos;
        pos = q->end;
    }
    return -1;
}

static size_t packed_room(const struct packed *p)
{
    if (p->h.local)
        return HV_LOCAL_BYTES - sizeof(struct packed);
    return malloc_usable_size((void *)p) - sizeof(struct packed);
}

/* A heap block of at least need data bytes holding p's pairs; p is freed unless local. */
static struct packed *packed_grow(struct packed *p, size_t need)
{
    if (!p->h.local)
        return xrealloc(p, sizeof(struct packed) + need);
    struct packed *q = xrealloc(NULL, sizeof(struct packed) + need);
    memcpy(q, p, sizeof(struct packed) + p->h.used);
    q->h.local = 0;
    return q;
}

struct hashval *hv_to_heap(struct hashval *h)
{
    if (!h->local)
        return h;
    return &packed_grow((struct packed *)h, h->used)->h;
}

/* ---- table ---- */

static uint64_t hash_of(const char *f, size_t flen)
{
    return hash_siphash13(f, flen, seed_);
}

static struct node **table_slot(const struct table *t, const char *f, size_t flen)
{
    struct node **pp = &t->b[hash_of(f, flen) & t->mask];
    while (*pp != NULL && !((*pp)->flen == flen && memcmp((*pp)->data, f, flen) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void table_grow(struct table *t)
{
    uint64_t n = (t->mask + 1) * 2;
    struct node **b = xcalloc(n, sizeof(*b));
    for (uint64_t i = 0; i <= t->mask; i++) {
        struct node *x = t->b[i];
        while (x != NULL) {
            struct node *next = x->next;
            struct node **pp = &b[hash_of(x->data, x->flen) & (n - 1)];
            x->next = *pp;
            *pp = x;
            x = next;
        }
    }
    free(t->b);
    t->b = b;
    t->mask = n - 1;
}

static void table_put_new(struct table *t, const char *f, size_t flen, const char *v, size_t vlen)
{
    if (t->h.count + 1 > t->mask + 1)
        table_grow(t);
    struct node *x = xrealloc(NULL, sizeof(*x) + flen + vlen);
    x->flen = (uint32_t)flen;
    x->vlen = (uint32_t)vlen;
    memcpy(x->data, f, flen);
    memcpy(x->data + flen, v, vlen);
    t->node_bytes += malloc_usable_size(x);
    struct node **pp = &t->b[hash_of(f, flen) & t->mask];
    x->next = *pp;
    *pp = x;
    t->h.count++;
}

/* Converts a packed hash to a table (done once, when it outgrows the packed bounds). */
static struct hashval *to_table(struct packed *p)
{
    struct table *t = xrealloc(NULL, sizeof(*t));
    memset(&t->h, 0, sizeof(t->h));
    t->h.big = 1;
    t->node_bytes = 0;
    uint64_t n = 16;
    while (n < (uint64_t)p->h.count * 2)
        n *= 2;
    t->mask = n - 1;
    t->b = xcalloc(n, sizeof(*t->b));
    size_t pos = 0;
    while (pos < p->h.used) {
        struct pair q;
        pair_at(p->data, pos, &q);
        table_put_new(t, (const char *)p->data + q.f, q.flen, (const char *)p->data + q.v, q.vlen);
        pos = q.end;
    }
    if (!p->h.local)
        free(p);
    return &t->h;
}

/* ---- the API ---- */

int hv_get(const struct hashval *h, const char *f, size_t flen, const char **v, size_t *vlen)
{
    if (h->big) {
        struct node *x = *table_slot((const struct table *)h, f, flen);
        if (x == NULL)
            return 0;
        *v = x->data + x->flen;
        *vlen = x->vlen;
        return 1;
    }
    const struct packed *p = (const struct packed *)h;
    struct pair q;
    if (packed_find(p, f, flen, &q) < 0)
        return 0;
    *vlen = q.vlen;
    *v = (const char *)p->data + q.v;
    return 1;
}

int hv_set(struct hashval **hp, const char *f, size_t flen, const char *v, size_t vlen)
{
    struct hashval *h = *hp;
    if (!h->big) {
        /* Redis 7.0's conversion: a field or value longer than hash-max-listpack-value, or more
         * fields than hash-max-listpack-entries once set (an update counts too), or more data
         * than Redis's listpack safety bound, makes it a table. */
        uint64_t maxlen = limit_of(&lim_value_, HV_PACKED_MAX_LEN);
        uint64_t maxn = limit_of(&lim_entries_, HV_PACKED_MAX_ENTRIES);
        struct packed *p = (struct packed *)h;
        struct pair q;
        long pos = packed_find(p, f, flen, &q);
        size_t span = len_size(vlen) + vlen; /* the new value with its prefix */
        size_t need =
            pos >= 0 ? h->used - (q.end - q.vh) + span : h->used + len_size(flen) + flen + span;
        int fits = flen <= maxlen && vlen <= maxlen && need <= PACKED_MAX_BYTES &&
                   (uint64_t)h->count + (pos < 0) <= maxn;
        if (fits) {
            if (need > packed_room(p)) {
                p = packed_grow(p, need);
                *hp = &p->h;
            }
            if (pos >= 0) {
                /* In place, keeping the field's position (Redis's listpack order). */
                unsigned char *val = p->data + q.vh;
                if (span != q.end - q.vh)
                    memmove(val + span, p->data + q.end, p->h.used - q.end);
                size_t hl = len_put(val, vlen);
                memcpy(val + hl, v, vlen);
                p->h.used = (uint32_t)need;
                return 0;
            }
            unsigned char *d = p->data + p->h.used;
            d += len_put(d, flen);
            memcpy(d, f, flen);
            d += flen;
            d += len_put(d, vlen);
            memcpy(d, v, vlen);
            p->h.used = (uint32_t)need;
            p->h.count++;
            return 1;
        }
        h = to_table(p);
        *hp = h;
    }
    struct table *t = (struct table *)h;
    struct node **pp = table_slot(t, f, flen);
    if (*pp == NULL) {
        table_put_new(t, f, flen, v, vlen);
        return 1;
    }
    struct node *x = *pp;
    if (x->vlen != vlen) {
        t->node_bytes -= malloc_usable_size(x);
        x = xrealloc(x, sizeof(*x) + flen + vlen);
        t->node_bytes += malloc_usable_size(x);
        x->vlen = (uint32_t)vlen;
        *pp = x;
    }
    memcpy(x->data + flen, v, vlen);
    return 0;
}

int hv_del(struct hashval **hp, const char *f, size_t flen)
{
    struct hashval *h = *hp;
    if (h->big) {
        struct node **pp = table_slot((struct table *)h, f, flen);
        if (*pp == NULL)
            return 0;
        struct node *x = *pp;
        *pp = x->next;
        ((struct table *)h)->node_bytes -= malloc_usable_size(x);
        free(x);
        h->count--;
        return 1;
    }
    struct packed *p = (struct packed *)h;
    struct pair q;
    long pos = packed_find(p, f, flen, &q);
    if (pos < 0)
        return 0;
    size_t len = q.end - (size_t)pos;
    memmove(p->data + pos, p->data + q.end, p->h.used - q.end);
    p->h.used = (uint32_t)(p->h.used - len);
    p->h.count--;
    return 1;
}

void hv_iter_init(struct hv_iter *it, const struct hashval *h)
{
    it->h = h;
    it->pos = 0;
    it->node = NULL;
}

int hv_next(struct hv_iter *it, const char **f, size_t *flen, const char **v, size_t *vlen)
{
    if (!it->h->big) {
        const struct packed *p = (const struct packed *)it->h;
        if (it->pos >= p->h.used)
            return 0;
        struct pair q;
        pair_at(p->data, it->pos, &q);
        *f = (const char *)p->data + q.f;
        *flen = q.flen;
        *v = (const char *)p->data + q.v;
        *vlen = q.vlen;
        it->pos = q.end;
        return 1;
    }
    const struct table *t = (const struct table *)it->h;
    const struct node *x = it->node;
    while (x == NULL) {
        if (it->pos > t->mask)
            return 0;
        x = t->b[it->pos++];
    }
    it->node = x->next;
    *f = x->data;
    *flen = x->flen;
    *v = x->data + x->flen;
    *vlen = x->vlen;
    return 1;
}

/* ---- compact form (hashval.h) ----
 * Pairs as [flen][field][vtag][value]: vtag 0..HV_PACKED_MAX_LEN is a string of that length;
 * VTAG_INT + n (n = 1..8) an integer in n bytes, little-endian two's complement, sign-extended
 * when loaded, whose decimal form is the value. */
#define VTAG_INT 0x80

/* Bytes of the shortest two's complement form of v. */
static size_t int_width(int64_t v)
{
    size_t n = 1;
    while (n < 8 && (v < -((int64_t)1 << (8 * n - 1)) || v >= ((int64_t)1 << (8 * n - 1))))
        n++;
    return n;
}

size_t hv_compact_write(const struct hashval *h, unsigned char *out, size_t cap)
{
    if (h->big || h->count == 0)
        return 0;
    if (cap > HV_COMPACT_MAX)
        cap = HV_COMPACT_MAX;
    const struct packed *p = (const struct packed *)h;
    size_t pos = 0, n = 0;
    while (pos < p->h.used) {
        struct pair q;
        pair_at(p->data, pos, &q);
        size_t fl = q.flen, vl = q.vlen;
        const char *v = (const char *)p->data + q.v;
        int64_t iv;
        size_t w = 0;
        if (vl > 0 && vl <= 20 && util_parse_i64(v, vl, &iv) == 0)
            w = int_width(iv);
        else if (vl > HV_PACKED_MAX_LEN)
            return 0; /* a string tag holds at most HV_PACKED_MAX_LEN */
        size_t take = 2 + fl + (w ? w : vl);
        if (n + take > cap)
            return 0;
        out[n] = (unsigned char)fl;
        memcpy(out + n + 1, p->data + q.f, fl);
        n += 1 + fl;
        if (w) {
            out[n++] = (unsigned char)(VTAG_INT + w);
            uint64_t u = (uint64_t)iv;
            for (size_t i = 0; i < w; i++, u >>= 8)
                out[n++] = (unsigned char)u;
        } else {
            out[n++] = (unsigned char)vl;
            memcpy(out + n, v, vl);
            n += vl;
        }
        pos = q.end;
    }
    return n;
}

struct hashval *hv_compact_load(struct hv_local *buf, const unsigned char *c, size_t n)
{
    struct packed *p = (struct packed *)buf->b;
    memset(&p->h, 0, sizeof(p->h));
    p->h.local = 1;
    unsigned char *d = p->data;
    size_t pos = 0;
    _Static_assert(sizeof(struct packed) + HV_COMPACT_MAX * 9 / 4 <= HV_LOCAL_BYTES,
                   "a loaded compact form fits a struct hv_local");
    while (pos < n) {
        size_t fl = c[pos];
        memcpy(d, c + pos, 1 + fl);
        d += 1 + fl;
        pos += 1 + fl;
        unsigned tag = c[pos++];
        if (tag >= VTAG_INT) {
            size_t w = tag - VTAG_INT;
            uint64_t u = 0;
            for (size_t i = 0; i < w; i++)
                u |= (uint64_t)c[pos + i] << (8 * i);
            if (w < 8 && (u >> (8 * w - 1)) & 1)
                u |= ~(uint64_t)0 << (8 * w); /* sign extension */
            d[0] = (unsigned char)util_fmt_i64((char *)d + 1, (int64_t)u);
            d += 1 + d[0];
            pos += w;
        } else {
            memcpy(d, c + pos - 1, 1 + tag);
            d += 1 + tag;
            pos += tag;
        }
        p->h.count++;
    }
    p->h.used = (uint32_t)(d - p->data);
    return &p->h;
}

/* The compact encoding of value v (tag and bytes) into out (1 + 8 bytes at least; a string is
 * not copied: *str is set to it instead). Returns the encoded length, 0 if v is too long to be
 * packed. */
static size_t encode_value(const char *v, size_t vlen, unsigned char *out, const char **str)
{
    int64_t iv;
    *str = NULL;
    if (vlen > 0 && vlen <= 20 && util_parse_i64(v, vlen, &iv) == 0) {
        size_t w = int_width(iv);
        out[0] = (unsigned char)(VTAG_INT + w);
        uint64_t u = (uint64_t)iv;
        for (size_t i = 0; i < w; i++, u >>= 8)
            out[1 + i] = (unsigned char)u;
        return 1 + w;
    }
    if (vlen > HV_PACKED_MAX_LEN)
        return 0;
    out[0] = (unsigned char)vlen;
    *str = v;
    return 1 + vlen;
}

int hv_compact_update(unsigned char *c, size_t n, const char *f, size_t flen, const char *v,
                      size_t vlen)
{
    /* What hv_set would convert to a table is not done here. */
    uint64_t maxlen = limit_of(&lim_value_, HV_PACKED_MAX_LEN);
    uint64_t maxn = limit_of(&lim_entries_, HV_PACKED_MAX_ENTRIES);
    if (flen > maxlen || vlen > maxlen || (maxn < HV_COMPACT_MAX && hv_compact_count(c, n) > maxn))
        return 0;
    size_t pos = 0;
    while (pos < n) {
        size_t fl = c[pos];
        size_t vpos = pos + 1 + fl;
        unsigned tag = c[vpos];
        size_t old = 1 + (tag >= VTAG_INT ? tag - VTAG_INT : tag);
        if (fl == flen && memcmp(c + pos + 1, f, flen) == 0) {
            unsigned char enc[9];
            const char *str;
            size_t len = encode_value(v, vlen, enc, &str);
            if (len != old)
                return 0;
            if (str != NULL) {
                c[vpos] = enc[0];
                memcpy(c + vpos + 1, str, vlen);
            } else {
                memcpy(c + vpos, enc, len);
            }
            return 1;
        }
        pos = vpos + old;
    }
    return 0;
}

int hv_compact_get(const unsigned char *c, size_t n, const char *f, size_t flen, const char **v,
                   size_t *vlen, char num[HV_NUM_BYTES])
{
    size_t pos = 0;
    while (pos < n) {
        size_t fl = c[pos];
        size_t vpos = pos + 1 + fl;
        unsigned tag = c[vpos];
        size_t w = tag >= VTAG_INT ? tag - VTAG_INT : tag;
        if (fl == flen && memcmp(c + pos + 1, f, flen) == 0) {
            if (tag < VTAG_INT) {
                *v = (const char *)c + vpos + 1;
                *vlen = tag;
                return 1;
            }
            uint64_t u = 0;
            for (size_t i = 0; i < w; i++)
                u |= (uint64_t)c[vpos + 1 + i] << (8 * i);
            if (w < 8 && (u >> (8 * w - 1)) & 1)
                u |= ~(uint64_t)0 << (8 * w); /* sign extension */
            *vlen = util_fmt_i64(num, (int64_t)u);
            *v = num;
            return 1;
        }
        pos = vpos + 1 + w;
    }
    return 0;
}

size_t hv_compact_count(const unsigned char *c, size_t n)
{
    size_t pos = 0, count = 0;
    while (pos < n) {
        pos += 1 + c[pos];
        unsigned tag = c[pos++];
        pos += tag >= VTAG_INT ? tag - VTAG_INT : tag;
        count++;
    }
    return count;
}
