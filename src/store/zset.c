/* zset.c - sorted sets (zset.h, docs/DESIGN.md "Sorted sets"): their life (create, copy, free,
 * sizes) and every write: ZADD's decision, the packed encoder, the skip list's insert and unlink,
 * the hash index's growth, the conversion packed -> big. The layouts and the decoding shared with
 * the reads (zset_read.c) are in zset_internal.h. */
#include "zset_internal.h"

#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"

uint8_t zs_member_seed[16];

void zs_set_seed(const uint8_t seed[16])
{
    memcpy(zs_member_seed, seed, 16);
}

/* ---- packed: encoding ---- */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Entry i's member text, formatting a lazy view's integer member into ib[i] first. */
static void pmember(struct pview *v, uint32_t i)
{
    if (v->m[i] == NULL) {
        v->len[i] = (uint8_t)i64_to_str(v->ib[i], v->iv[i]);
        v->m[i] = v->ib[i];
    }
}

/* A new packed block holding the n entries of v (in order). */
/* The tags come from isint/iv: a decoded entry keeps its tag (its score and member do not
 * change in place), a new one from pkey: tag 0 when its member is the canonical decimal of
 * its score (the member is then not stored but formatted on read). */
static struct zset *pencode(const struct pview *v)
{
    size_t bytes = 0;
    int64_t prev = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->isint[i]) {
            bytes += 1 + varint_len(zigzag(v->iv[i] - prev));
            prev = v->iv[i];
        } else {
            bytes += 1 + 8 + 1 + v->len[i];
        }
    }
    struct zset *z = xmalloc(sizeof(*z) + bytes);
    z->kind = KIND_PACKED;
    z->pad_ = 0;
    z->n = (uint16_t)v->n;
    z->used = (uint32_t)bytes;
    uint8_t *p = (uint8_t *)(z + 1);
    prev = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->isint[i]) {
            *p++ = 0;
            p = put_varint(p, zigzag(v->iv[i] - prev));
            prev = v->iv[i];
        } else {
            *p++ = 1;
            memcpy(p, &v->s[i], 8);
            p += 8;
            *p++ = v->len[i];
            memcpy(p, v->m[i], v->len[i]);
            p += v->len[i];
        }
    }
    return z;
}

/* Index at which (score, m) goes: members are only compared between equal scores. */
static uint32_t pinsert_pos(struct pview *v, double score, const char *m, size_t len)
{
    uint32_t i = 0;
    while (i < v->n) {
        if (v->s[i] != score) {
            if (v->s[i] > score)
                break;
        } else {
            pmember(v, i);
            if (cmp_member(v->m[i], v->len[i], m, len) >= 0)
                break;
        }
        i++;
    }
    return i;
}

/* Member bytes of entry i that may point into the ib buffer of i: moved entries must carry
 * their own text, so ib strings move with them. */
static void pmove(struct pview *v, uint32_t to, uint32_t from)
{
    v->s[to] = v->s[from];
    v->len[to] = v->len[from];
    v->isint[to] = v->isint[from];
    v->iv[to] = v->iv[from];
    if (v->m[from] == v->ib[from]) {
        memcpy(v->ib[to], v->ib[from], sizeof(v->ib[0]));
        v->m[to] = v->ib[to];
    } else {
        v->m[to] = v->m[from];
    }
}

static void premove_at(struct pview *v, uint32_t i)
{
    for (uint32_t j = i; j + 1 < v->n; j++)
        pmove(v, j, j + 1);
    v->n--;
}

static void pinsert_at(struct pview *v, uint32_t i, double score, const char *m, size_t len,
                       int isint, int64_t iv)
{
    for (uint32_t j = v->n; j > i; j--)
        pmove(v, j, j - 1);
    v->s[i] = score;
    v->m[i] = m;
    v->len[i] = (uint8_t)len;
    v->isint[i] = (uint8_t)isint;
    v->iv[i] = iv;
    v->n++;
}

/* ---- big: allocation ---- */

static void *big_alloc(struct zbig *b, size_t n)
{
    void *p = xmalloc(n);
    b->bytes += malloc_usable_size(p);
    return p;
}

static void big_free(struct zbig *b, void *p)
{
    if (p == NULL)
        return;
    b->bytes -= malloc_usable_size(p);
    free(p);
}

static struct znode *node_new(struct zbig *b, int nlev, double score, const char *m, size_t len)
{
    struct znode *x = big_alloc(b, sizeof(*x) + (size_t)nlev * sizeof(struct zlevel) + len);
    x->score = score;
    x->back = NULL;
    x->len = (uint32_t)len;
    x->nlev = (uint32_t)nlev;
    memcpy((char *)&x->lv[nlev], m, len);
    return x;
}

static int random_level(struct zbig *b)
{
    /* xorshift64; p = 1/4 per extra level, as Redis's skip list. */
    int lvl = 1;
    for (;;) {
        b->rnd ^= b->rnd << 13;
        b->rnd ^= b->rnd >> 7;
        b->rnd ^= b->rnd << 17;
        if ((b->rnd & 3) != 0 || lvl >= MAX_LEVEL)
            return lvl;
        lvl++;
    }
}

static struct zbig *big_new(void)
{
    struct zbig *b = xmalloc(sizeof(*b));
    memset(b, 0, sizeof(*b));
    b->bytes = malloc_usable_size(b);
    b->hdr.kind = KIND_BIG;
    b->level = 1;
    b->head = node_new(b, MAX_LEVEL, 0, "", 0);
    for (int i = 0; i < MAX_LEVEL; i++) {
        b->head->lv[i].fwd = NULL;
        b->head->lv[i].span = 0;
    }
    b->mask = 15;
    b->tab = big_alloc(b, 16 * sizeof(*b->tab));
    memset(b->tab, 0, 16 * sizeof(*b->tab));
    b->rnd = (uint64_t)(uintptr_t)b * 0x9E3779B97F4A7C15ull | 1;
    return b;
}

/* ---- big: hash index ---- */

static void hput_raw(struct znode **tab, size_t mask, struct znode *x)
{
    size_t i = (size_t)hash_siphash13(node_member(x), x->len, zs_member_seed) & mask;
    while (tab[i] != NULL)
        i = (i + 1) & mask;
    tab[i] = x;
}

static void hresize(struct zbig *b, size_t slots)
{
    struct znode **tab = big_alloc(b, slots * sizeof(*tab));
    memset(tab, 0, slots * sizeof(*tab));
    for (size_t i = 0; i <= b->mask; i++)
        if (b->tab[i] != NULL)
            hput_raw(tab, slots - 1, b->tab[i]);
    big_free(b, b->tab);
    b->tab = tab;
    b->mask = slots - 1;
}

static void hadd(struct zbig *b, struct znode *x)
{
    if ((b->n + 1) * 2 > b->mask + 1)
        hresize(b, (b->mask + 1) * 2);
    hput_raw(b->tab, b->mask, x);
}

static void hdel_slot(struct zbig *b, size_t i)
{
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & b->mask;
        struct znode *x = b->tab[j];
        if (x == NULL)
            break;
        size_t home = (size_t)hash_siphash13(node_member(x), x->len, zs_member_seed) & b->mask;
        if (((j - home) & b->mask) >= ((j - hole) & b->mask)) {
            b->tab[hole] = x;
            hole = j;
        }
    }
    b->tab[hole] = NULL;
}

static void hmaybe_shrink(struct zbig *b)
{
    size_t slots = b->mask + 1;
    if (slots > 16 && b->n * 8 < slots) {
        while (slots > 16 && b->n * 4 < slots)
            slots /= 2;
        hresize(b, slots);
    }
}

/* ---- big: skip list ---- */

static struct znode *sl_insert(struct zbig *b, double score, const char *m, size_t len)
{
    struct znode *update[MAX_LEVEL];
    size_t rank[MAX_LEVEL];
    sl_path(b, score, m, len, update, rank);
    int lvl = random_level(b);
    if (lvl > b->level) {
        for (int i = b->level; i < lvl; i++) {
            rank[i] = 0;
            update[i] = b->head;
            b->head->lv[i].span = b->n;
        }
        b->level = lvl;
    }
    struct znode *x = node_new(b, lvl, score, m, len);
    for (int i = 0; i < lvl; i++) {
        x->lv[i].fwd = update[i]->lv[i].fwd;
        update[i]->lv[i].fwd = x;
        x->lv[i].span = update[i]->lv[i].span - (rank[0] - rank[i]);
        update[i]->lv[i].span = rank[0] - rank[i] + 1;
    }
    for (int i = lvl; i < b->level; i++)
        update[i]->lv[i].span++;
    x->back = update[0] == b->head ? NULL : update[0];
    if (x->lv[0].fwd != NULL)
        x->lv[0].fwd->back = x;
    else
        b->tail = x;
    b->n++;
    return x;
}

/* Unlinks x (update[] from sl_path for x); does not free it. */
static void sl_unlink(struct zbig *b, struct znode *x, struct znode **update)
{
    for (int i = 0; i < b->level; i++) {
        if (update[i]->lv[i].fwd == x) {
            update[i]->lv[i].span += x->lv[i].span - 1;
            update[i]->lv[i].fwd = x->lv[i].fwd;
        } else {
            update[i]->lv[i].span -= 1;
        }
    }
    if (x->lv[0].fwd != NULL)
        x->lv[0].fwd->back = x->back;
    else
        b->tail = x->back;
    while (b->level > 1 && b->head->lv[b->level - 1].fwd == NULL)
        b->level--;
    b->n--;
}

static void sl_delete(struct zbig *b, struct znode *x)
{
    struct znode *update[MAX_LEVEL];
    size_t rank[MAX_LEVEL];
    sl_path(b, x->score, node_member(x), x->len, update, rank);
    sl_unlink(b, x, update);
}

/* ---- public: lifecycle ---- */

static struct zset *packed_empty(void)
{
    struct zset *z = xmalloc(sizeof(*z));
    memset(z, 0, sizeof(*z));
    return z;
}

static const int64_t *lim_entries_, *lim_value_;

void zs_watch_limits(const int64_t *entries, const int64_t *value)
{
    __atomic_store_n(&lim_entries_, entries, __ATOMIC_RELEASE);
    __atomic_store_n(&lim_value_, value, __ATOMIC_RELEASE);
}

/* The watched limit at *src (dflt if none), capped at what a packed set holds. */
static size_t pack_limit(const int64_t *const *src, size_t dflt, size_t cap)
{
    const int64_t *p = __atomic_load_n(src, __ATOMIC_ACQUIRE);
    uint64_t v = p != NULL ? (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED) : dflt;
    return v < cap ? (size_t)v : cap;
}

struct zset *zs_new(size_t size_hint, size_t max_member_hint)
{
    if (size_hint > pack_limit(&lim_entries_, ZS_PACK_MAX_ENTRIES, ZS_PACK_MAX_ENTRIES) ||
        max_member_hint > pack_limit(&lim_value_, ZS_PACK_MAX_MEMBER, ZS_PACK_CAP_MEMBER))
        return &big_new()->hdr;
    return packed_empty();
}

void zs_free(struct zset *z)
{
    if (z == NULL)
        return;
    if (z->kind == KIND_BIG) {
        struct zbig *b = (struct zbig *)z;
        struct znode *x = b->head;
        while (x != NULL) {
            struct znode *next = x->lv[0].fwd;
            free(x);
            x = next;
        }
        free(b->tab);
    }
    free(z);
}

static struct zbig *to_big(const struct zset *z)
{
    struct zbig *b = big_new();
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 1);
    for (uint32_t i = 0; i < v.n; i++) {
        struct znode *x = sl_insert(b, v.s[i], v.m[i], v.len[i]);
        hadd(b, x);
    }
    return b;
}

struct zset *zs_dup(const struct zset *z)
{
    if (z->kind == KIND_PACKED) {
        size_t n = sizeof(*z) + z->used;
        struct zset *c = xmalloc(n);
        memcpy(c, z, n);
        return c;
    }
    const struct zbig *src = (const struct zbig *)z;
    struct zbig *b = big_new();
    for (struct znode *x = src->head->lv[0].fwd; x != NULL; x = x->lv[0].fwd)
        hadd(b, sl_insert(b, x->score, node_member(x), x->len));
    return &b->hdr;
}

size_t zs_card(const struct zset *z)
{
    return z->kind == KIND_PACKED ? z->n : ((const struct zbig *)z)->n;
}

size_t zs_bytes(const struct zset *z)
{
    return z->kind == KIND_PACKED ? malloc_usable_size((void *)z) : ((const struct zbig *)z)->bytes;
}

int zs_is_packed(const struct zset *z)
{
    return z->kind == KIND_PACKED;
}

/* Redis 7's zsetAdd decision for a member with current score cur (exists) or none. Returns
 * ZS_NAN, or 0 with *apply (change the score to *out) or not (*skipped: an option said no). */
/* ---- public: writes ---- */

static int add_decision(int exists, double cur, double score, unsigned flags, double *out,
                        int *apply, int *skipped)
{
    *apply = 0;
    *skipped = 0;
    if (exists) {
        if (flags & ZS_NX) {
            *skipped = 1;
            *out = cur;
            return 0;
        }
        if (flags & ZS_INCR) {
            score += cur;
            if (isnan(score))
                return ZS_NAN;
        }
        if (((flags & ZS_GT) && score <= cur) || ((flags & ZS_LT) && score >= cur)) {
            *skipped = 1;
            *out = cur;
            return 0;
        }
        *out = score;
        *apply = score != cur;
        return 0;
    }
    if (flags & ZS_XX) {
        *skipped = 1;
        return 0;
    }
    *out = score;
    *apply = 1;
    return 0;
}

static int big_add(struct zbig *b, const char *m, size_t len, double score, unsigned flags,
                   double *newscore, int *skipped)
{
    int64_t i = hfind(b, m, len);
    int apply;
    double out = 0;
    int rc = add_decision(i >= 0, i >= 0 ? b->tab[i]->score : 0, score, flags, &out, &apply,
                          skipped);
    if (rc != 0)
        return rc;
    *newscore = out;
    if (!apply)
        return ZS_NOP;
    if (i >= 0) {
        struct znode *old = b->tab[i];
        sl_delete(b, old);
        struct znode *x = sl_insert(b, out, m, len);
        b->tab[i] = x; /* same member, same slot */
        big_free(b, old);
        return ZS_UPDATED;
    }
    hadd(b, sl_insert(b, out, m, len));
    return ZS_ADDED;
}

int zs_add(struct zset **zp, const char *m, size_t len, double score, unsigned flags,
           double *newscore, int *skipped)
{
    struct zset *z = *zp;
    if (z->kind == KIND_BIG)
        return big_add((struct zbig *)z, m, len, score, flags, newscore, skipped);
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 0);
    struct pkey k;
    pkey_of(&k, m, len);
    int64_t i = pfind(&v, &k);
    int apply;
    double out = 0;
    int rc = add_decision(i >= 0, i >= 0 ? v.s[i] : 0, score, flags, &out, &apply, skipped);
    if (rc != 0)
        return rc;
    *newscore = out;
    if (!apply)
        return ZS_NOP;
    if (i < 0 && (v.n + 1 > pack_limit(&lim_entries_, ZS_PACK_MAX_ENTRIES, ZS_PACK_MAX_ENTRIES) ||
                  len > pack_limit(&lim_value_, ZS_PACK_MAX_MEMBER, ZS_PACK_CAP_MEMBER))) {
        /* Converted first, then added as a big set would: Redis's order, so a -0 stays -0. */
        struct zbig *b = to_big(z);
        free(z);
        *zp = &b->hdr;
        return big_add(b, m, len, out, 0, newscore, skipped);
    }
    out += 0.0; /* -0 is stored as 0 in a packed set (the reply still says -0, as Redis's) */
    if (i >= 0) {
        /* The member text may live in ib[i], which removal overwrites: keep the caller's. */
        premove_at(&v, (uint32_t)i);
    }
    int isint = k.isint && (double)k.iv == out; /* stored as tag 0 */
    pinsert_at(&v, pinsert_pos(&v, out, m, len), out, m, len, isint, k.iv);
    *zp = pencode(&v);
    free(z);
    return i >= 0 ? ZS_UPDATED : ZS_ADDED;
}

int zs_del(struct zset **zp, const char *m, size_t len)
{
    struct zset *z = *zp;
    if (z->kind == KIND_BIG) {
        struct zbig *b = (struct zbig *)z;
        int64_t i = hfind(b, m, len);
        if (i < 0)
            return 0;
        struct znode *x = b->tab[i];
        hdel_slot(b, (size_t)i);
        sl_delete(b, x);
        big_free(b, x);
        hmaybe_shrink(b);
        return 1;
    }
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 0);
    struct pkey k;
    pkey_of(&k, m, len);
    int64_t i = pfind(&v, &k);
    if (i < 0)
        return 0;
    premove_at(&v, (uint32_t)i);
    *zp = pencode(&v);
    free(z);
    return 1;
}

void zs_del_range(struct zset **zp, size_t start, size_t end)
{
    struct zset *z = *zp;
    size_t n = zcard(z);
    if (end > n)
        end = n;
    if (start >= end)
        return;
    if (z->kind == KIND_BIG) {
        struct zbig *b = (struct zbig *)z;
        struct znode *update[MAX_LEVEL];
        size_t traversed = 0;
        struct znode *x = b->head;
        for (int i = b->level - 1; i >= 0; i--) {
            while (x->lv[i].fwd != NULL && traversed + x->lv[i].span <= start) {
                traversed += x->lv[i].span;
                x = x->lv[i].fwd;
            }
            update[i] = x;
        }
        x = x->lv[0].fwd;
        for (size_t k = start; k < end && x != NULL; k++) {
            struct znode *next = x->lv[0].fwd;
            sl_unlink(b, x, update);
            int64_t s = hfind(b, node_member(x), x->len);
            if (s >= 0)
                hdel_slot(b, (size_t)s);
            big_free(b, x);
            x = next;
        }
        hmaybe_shrink(b);
        return;
    }
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 0);
    for (size_t j = end; j < v.n; j++)
        pmove(&v, (uint32_t)(start + j - end), (uint32_t)j);
    v.n -= (uint32_t)(end - start);
    *zp = pencode(&v);
    free(z);
}
