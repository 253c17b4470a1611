/* zset.c - sorted sets: a packed encoding for small sets, a skip list with a hash index for big
 * ones (zset.h, docs/DESIGN.md "Sorted sets").
 *
 * Packed block: [header 8][entries], entries in (score, member) order, each
 *   tag 0: the member is the canonical decimal of the integral score |s| < 2^53; then the
 *          zigzag varint of (score - previous tag-0 score), the first against 0.
 *   tag 1: 8-byte double, 1-byte member length (<= ZS_PACK_MAX_MEMBER), member bytes.
 * Every write decodes the block into arrays (at most 128 entries), changes them and encodes a
 * new block: O(n) with n <= 128, as Redis's listpack is, and the delta coding needs no in-place
 * fix-ups. A score of -0 is stored as 0 in a packed set (Redis's listpack does the same).
 *
 * Big set: a skip list ordered by (score, member bytes) where every forward link carries its
 * span (members it skips), so rank <-> node is O(log n); a backward link on level 0 for
 * reverse walks. Members live inside their nodes; the hash index maps member -> node (linear
 * probing, backward-shift deletion, at most half full). Invariants are checked by zs_check. */
#include "rlimitd/zset.h"
#include "rlimitd/util.h"
#include "rlimitd/alloc.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/hash.h"

#define KIND_PACKED 0
#define KIND_BIG 1
#define MAX_LEVEL 32
#define INT_EXACT 9007199254740992.0 /* 2^53: integers below are exact doubles */

struct zset {
    uint8_t kind;
    uint8_t pad_;
    uint16_t n;    /* packed: entries */
    uint32_t used; /* packed: bytes of entries after the header */
};

struct zlevel {
    struct znode *fwd;
    size_t span;
};

struct znode {
    double score;
    struct znode *back;
    uint32_t len;
    uint32_t nlev;
    struct zlevel lv[]; /* nlev levels, then the member bytes */
};

struct zbig {
    struct zset hdr;
    int level;
    size_t n;
    struct znode *head, *tail;
    struct znode **tab; /* hash index, mask + 1 slots */
    size_t mask;
    size_t bytes;
    uint64_t rnd;
};

static uint8_t seed_[16];

void zs_set_seed(const uint8_t seed[16])
{
    memcpy(seed_, seed, 16);
}

/* ---- helpers ---- */

static int cmp_member(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl;
}

/* (s1, m1) vs (s2, m2) in set order. */
static int cmp_entry(double s1, const char *m1, size_t l1, double s2, const char *m2, size_t l2)
{
    if (s1 < s2)
        return -1;
    if (s1 > s2)
        return 1;
    return cmp_member(m1, l1, m2, l2);
}

static int i64_to_str(char *buf, int64_t v)
{
    size_t len = util_fmt_i64(buf, v);
    buf[len] = '\0';
    return (int)len;
}

/* Whether m is the canonical decimal ("-" only before a non-zero value, no leading zeros) of
 * an integer v with |v| < 2^53: then *out = v. util_parse_i64 accepts exactly the canonical
 * forms, so m == the decimal util_fmt_i64 gives for v. */
static int canon_int(const char *m, size_t len, int64_t *out)
{
    int64_t v;
    if (len == 0 || len > 17 || util_parse_i64(m, len, &v) != 0 ||
        !(v > -(int64_t)INT_EXACT && v < (int64_t)INT_EXACT))
        return 0;
    *out = v;
    return 1;
}

int zs_format_score(char *buf, double d)
{
    if (isinf(d))
        return sprintf(buf, "%s", d > 0 ? "inf" : "-inf");
    return snprintf(buf, 32, "%.17g", d);
}

/* ---- packed ---- */

/* Decoded entries. A lazy view (pdecode with full 0) leaves m[i] NULL for a tag-0 entry until
 * pmember formats it into ib[i]: most writes compare and re-encode integer members by value and
 * never need their text. isint/iv (NULL in a zs_iter's full view) keep each entry's tag and, for
 * tag 0, its integer, so pencode writes tag-0 entries without formatting or parsing them. */
struct pview {
    uint32_t n;
    double *s;
    const char **m;
    uint8_t *len;
    char (*ib)[24];
    uint8_t *isint;
    int64_t *iv;
};

static const uint8_t *pdata(const struct zset *z)
{
    return (const uint8_t *)(z + 1);
}

static uint64_t get_varint(const uint8_t **q)
{
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b = *(*q)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return x;
    }
}

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

static int64_t unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* The score of the entry at *q, moving *q past it; prev is the last tag-0 value before it. */
static double pnext_score(const uint8_t **q, int64_t *prev)
{
    if (*(*q)++ == 0) {
        *prev += unzigzag(get_varint(q));
        return (double)*prev;
    }
    double d;
    memcpy(&d, *q, 8);
    *q += 8;
    uint8_t len = *(*q)++;
    *q += len;
    return d;
}

/* full: every member's text is set (integer members formatted); else a lazy view. */
static void pdecode(const struct zset *z, struct pview *v, int full)
{
    const uint8_t *q = pdata(z);
    int64_t prev = 0;
    v->n = z->n;
    for (uint32_t i = 0; i < z->n; i++) {
        if (*q++ == 0) {
            int64_t val = prev + unzigzag(get_varint(&q));
            prev = val;
            v->s[i] = (double)val;
            if (v->isint != NULL) {
                v->isint[i] = 1;
                v->iv[i] = val;
            }
            if (full) {
                v->len[i] = (uint8_t)i64_to_str(v->ib[i], val);
                v->m[i] = v->ib[i];
            } else {
                v->len[i] = 0;
                v->m[i] = NULL;
            }
        } else {
            memcpy(&v->s[i], q, 8);
            q += 8;
            v->len[i] = *q++;
            v->m[i] = (const char *)q;
            q += v->len[i];
            if (v->isint != NULL)
                v->isint[i] = 0;
        }
    }
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

/* A pview whose arrays live in a zs_iter (the same layout, already sized for 128 + 1). */
struct pbuf {
    double s[ZS_PACK_MAX_ENTRIES + 1];
    const char *m[ZS_PACK_MAX_ENTRIES + 1];
    uint8_t len[ZS_PACK_MAX_ENTRIES + 1];
    char ib[ZS_PACK_MAX_ENTRIES + 1][24];
    uint8_t isint[ZS_PACK_MAX_ENTRIES + 1];
    int64_t iv[ZS_PACK_MAX_ENTRIES + 1];
};

static void pview_on(struct pview *v, struct pbuf *b)
{
    v->n = 0;
    v->s = b->s;
    v->m = b->m;
    v->len = b->len;
    v->ib = b->ib;
    v->isint = b->isint;
    v->iv = b->iv;
}

/* A member's identity for pfind: its bytes and, when it is a canonical integer, the value (a
 * tag-0 entry's member is the canonical decimal of iv, so it matches exactly such a member). */
struct pkey {
    const char *m;
    size_t len;
    int isint;
    int64_t iv;
};

static void pkey_of(struct pkey *k, const char *m, size_t len)
{
    k->m = m;
    k->len = len;
    k->isint = canon_int(m, len, &k->iv);
}

static int64_t pfind(const struct pview *v, const struct pkey *k)
{
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->isint[i] ? k->isint && v->iv[i] == k->iv
                        : v->len[i] == k->len && memcmp(v->m[i], k->m, k->len) == 0)
            return i;
    }
    return -1;
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

static const char *node_member(const struct znode *x)
{
    return (const char *)&x->lv[x->nlev];
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

static size_t hslot(const struct zbig *b, const char *m, size_t len)
{
    return (size_t)hash_siphash13(m, len, seed_) & b->mask;
}

static int64_t hfind(const struct zbig *b, const char *m, size_t len)
{
    for (size_t i = hslot(b, m, len);; i = (i + 1) & b->mask) {
        const struct znode *x = b->tab[i];
        if (x == NULL)
            return -1;
        if (x->len == len && memcmp(node_member(x), m, len) == 0)
            return (int64_t)i;
    }
}

static void hput_raw(struct znode **tab, size_t mask, struct znode *x)
{
    size_t i = (size_t)hash_siphash13(node_member(x), x->len, seed_) & mask;
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
        size_t home = (size_t)hash_siphash13(node_member(x), x->len, seed_) & b->mask;
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

/* Fills update[] with the last node before (score, m) on every level, rank[] their ranks
 * (1-based; the head is 0). */
static void sl_path(const struct zbig *b, double score, const char *m, size_t len,
                    struct znode **update, size_t *rank)
{
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        rank[i] = i == b->level - 1 ? 0 : rank[i + 1];
        while (x->lv[i].fwd != NULL &&
               cmp_entry(x->lv[i].fwd->score, node_member(x->lv[i].fwd), x->lv[i].fwd->len,
                         score, m, len) < 0) {
            rank[i] += x->lv[i].span;
            x = x->lv[i].fwd;
        }
        update[i] = x;
    }
}

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

/* The node of 0-based rank r (r < n). */
static struct znode *sl_at(const struct zbig *b, size_t r)
{
    size_t want = r + 1, traversed = 0;
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        while (x->lv[i].fwd != NULL && traversed + x->lv[i].span <= want) {
            traversed += x->lv[i].span;
            x = x->lv[i].fwd;
        }
        if (traversed == want)
            return x;
    }
    return NULL;
}

/* Members before the first one for which stop(x) holds, stop being monotone in set order. */
typedef int (*stop_fn)(const struct znode *x, const void *arg);

static size_t sl_count_before(const struct zbig *b, stop_fn stop, const void *arg)
{
    size_t traversed = 0;
    struct znode *x = b->head;
    for (int i = b->level - 1; i >= 0; i--) {
        while (x->lv[i].fwd != NULL && !stop(x->lv[i].fwd, arg)) {
            traversed += x->lv[i].span;
            x = x->lv[i].fwd;
        }
    }
    return traversed;
}

/* ---- public: lifecycle ---- */

static struct zset *packed_empty(void)
{
    struct zset *z = xmalloc(sizeof(*z));
    memset(z, 0, sizeof(*z));
    return z;
}

struct zset *zs_new(size_t size_hint, size_t max_member_hint)
{
    if (size_hint > ZS_PACK_MAX_ENTRIES || max_member_hint > ZS_PACK_MAX_MEMBER)
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

/* ---- public: lookups ---- */

/* Finds member m: in a big set its node (*node), in a packed one its index (*idx, *node NULL);
 * *score either way. 0 when m is not a member. */
static int locate(const struct zset *z, const char *m, size_t len, const struct znode **node,
                  int64_t *idx, double *score)
{
    if (z->kind == KIND_BIG) {
        const struct zbig *b = (const struct zbig *)z;
        int64_t i = hfind(b, m, len);
        if (i < 0)
            return 0;
        *node = b->tab[i];
        *score = b->tab[i]->score;
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
    *node = NULL;
    *idx = i;
    *score = v.s[i];
    return 1;
}

int zs_score(const struct zset *z, const char *m, size_t len, double *score)
{
    const struct znode *t;
    int64_t i;
    return locate(z, m, len, &t, &i, score);
}

int zs_rank(const struct zset *z, const char *m, size_t len, size_t *rank)
{
    const struct znode *t;
    int64_t i;
    double score;
    if (!locate(z, m, len, &t, &i, &score))
        return 0;
    if (t == NULL) {
        *rank = (size_t)i;
        return 1;
    }
    struct znode *update[MAX_LEVEL];
    size_t r[MAX_LEVEL];
    sl_path((const struct zbig *)z, t->score, node_member(t), t->len, update, r);
    *rank = r[0]; /* members before it */
    return 1;
}

/* ---- public: writes ---- */

/* Redis 7's zsetAdd decision for a member with current score cur (exists) or none. Returns
 * ZS_NAN, or 0 with *apply (change the score to *out) or not (*skipped: an option said no). */
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
    if (i < 0 && (v.n + 1 > ZS_PACK_MAX_ENTRIES || len > ZS_PACK_MAX_MEMBER)) {
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
    size_t n = zs_card(z);
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

/* ---- public: ranges ---- */

static int score_gt_min(const struct znode *x, const void *arg)
{
    const struct zs_score_range *r = arg;
    return r->minex ? x->score > r->min : x->score >= r->min;
}

static int score_gt_max(const struct znode *x, const void *arg)
{
    const struct zs_score_range *r = arg;
    return r->maxex ? x->score >= r->max : x->score > r->max;
}

void zs_range_score(const struct zset *z, const struct zs_score_range *r, size_t *start,
                    size_t *end)
{
    size_t a, e;
    if (z->kind == KIND_BIG) {
        a = sl_count_before((const struct zbig *)z, score_gt_min, r);
        e = sl_count_before((const struct zbig *)z, score_gt_max, r);
    } else {
        /* Scores only, read in order from the block: a is the first above min, e the first
         * from there above max. */
        const uint8_t *q = pdata(z);
        int64_t prev = 0;
        struct znode probe;
        size_t i = 0;
        for (; i < z->n; i++) {
            probe.score = pnext_score(&q, &prev);
            if (score_gt_min(&probe, r))
                break;
        }
        a = i;
        for (; i < z->n; i++) {
            if (i > a)
                probe.score = pnext_score(&q, &prev);
            if (score_gt_max(&probe, r))
                break;
        }
        e = i;
    }
    *start = a;
    *end = e > a ? e : a;
}

/* Member vs a lex bound: <0, 0, >0 (a "-" bound is below everything, "+" above). */
static int lex_cmp(const char *m, size_t len, const struct zs_lex_bound *b)
{
    if (b->inf < 0)
        return 1;
    if (b->inf > 0)
        return -1;
    return cmp_member(m, len, b->p, b->len);
}

static int lex_gte_min(const char *m, size_t len, const struct zs_lex_bound *min)
{
    int c = lex_cmp(m, len, min);
    return min->ex ? c > 0 : c >= 0;
}

static int lex_lte_max(const char *m, size_t len, const struct zs_lex_bound *max)
{
    int c = lex_cmp(m, len, max);
    return max->ex ? c < 0 : c <= 0;
}

static int node_gte_min(const struct znode *x, const void *arg)
{
    return lex_gte_min(node_member(x), x->len, arg);
}

static int node_gt_max(const struct znode *x, const void *arg)
{
    return !lex_lte_max(node_member(x), x->len, arg);
}

/* Whether min <= max as bounds (an empty range otherwise), as Redis checks before searching. */
static int lex_range_nonempty(const struct zs_lex_bound *min, const struct zs_lex_bound *max)
{
    if (min->inf > 0 || max->inf < 0)
        return 0;
    if (min->inf < 0 || max->inf > 0)
        return 1;
    int c = cmp_member(min->p, min->len, max->p, max->len);
    return c < 0 || (c == 0 && !min->ex && !max->ex);
}

void zs_range_lex(const struct zset *z, const struct zs_lex_bound *min,
                  const struct zs_lex_bound *max, int reverse, size_t *start, size_t *end)
{
    size_t a = 0, e = 0;
    if (!lex_range_nonempty(min, max) || zs_card(z) == 0) {
        *start = *end = 0;
        return;
    }
    if (z->kind == KIND_BIG) {
        /* Redis checks the ends first here too (zslIsInLexRange). */
        const struct zbig *b = (const struct zbig *)z;
        if (!node_gte_min(b->tail, min) || node_gt_max(b->head->lv[0].fwd, max)) {
            *start = *end = 0;
            return;
        }
        a = sl_count_before((const struct zbig *)z, node_gte_min, min);
        e = sl_count_before((const struct zbig *)z, node_gt_max, max);
        *start = a;
        *end = e > a ? e : a;
        return;
    }
    /* listpack's walk, step for step: the ends are checked first, then the scan starts from
     * the side the reply starts from and stops at the first member out of the range. */
    struct pbuf buf;
    struct pview v;
    pview_on(&v, &buf);
    pdecode(z, &v, 1);
    uint32_t n = v.n;
    if (!lex_gte_min(v.m[n - 1], v.len[n - 1], min) || !lex_lte_max(v.m[0], v.len[0], max)) {
        *start = *end = 0;
        return;
    }
    if (!reverse) {
        while (a < n && !lex_gte_min(v.m[a], v.len[a], min))
            a++;
        e = a;
        while (e < n && lex_lte_max(v.m[e], v.len[e], max))
            e++;
    } else {
        e = n;
        while (e > 0 && !lex_lte_max(v.m[e - 1], v.len[e - 1], max))
            e--;
        a = e;
        while (a > 0 && lex_gte_min(v.m[a - 1], v.len[a - 1], min))
            a--;
    }
    *start = a;
    *end = e > a ? e : a;
}

/* ---- public: cursors ---- */

void zs_iter_seek(struct zs_iter *it, size_t rank)
{
    it->rank = rank;
    if (it->z->kind == KIND_BIG) {
        const struct zbig *b = (const struct zbig *)it->z;
        it->node = rank < b->n ? sl_at(b, rank) : NULL;
    }
}

void zs_iter_init(struct zs_iter *it, const struct zset *z, size_t rank, int reverse)
{
    it->z = z;
    it->reverse = reverse;
    it->n = 0;
    if (z->kind == KIND_PACKED) {
        struct pview v = {0, it->s, it->m, it->len, it->ib, NULL, NULL};
        pdecode(z, &v, 1);
        it->n = v.n;
    }
    zs_iter_seek(it, rank);
}

int zs_iter_next(struct zs_iter *it, struct zs_item *out)
{
    if (it->z->kind == KIND_PACKED) {
        if (it->rank >= it->n)
            return 0;
        out->m = it->m[it->rank];
        out->len = it->len[it->rank];
        out->score = it->s[it->rank];
        it->rank = it->reverse ? it->rank - 1 : it->rank + 1; /* wraps to SIZE_MAX: the end */
        return 1;
    }
    const struct znode *x = it->node;
    if (x == NULL)
        return 0;
    out->m = node_member(x);
    out->len = x->len;
    out->score = x->score;
    it->node = it->reverse ? x->back : x->lv[0].fwd;
    it->rank = it->reverse ? it->rank - 1 : it->rank + 1;
    return 1;
}

/* ---- checks ---- */

int zs_check(const struct zset *z)
{
    if (z->kind == KIND_PACKED) {
        struct pbuf buf;
        struct pview v;
        pview_on(&v, &buf);
        pdecode(z, &v, 1);
        for (uint32_t i = 0; i < v.n; i++) {
            if (isnan(v.s[i]) || v.len[i] > ZS_PACK_MAX_MEMBER)
                return -1;
            if (i > 0 && cmp_entry(v.s[i - 1], v.m[i - 1], v.len[i - 1], v.s[i], v.m[i],
                                   v.len[i]) >= 0)
                return -2;
        }
        return v.n <= ZS_PACK_MAX_ENTRIES ? 0 : -3;
    }
    const struct zbig *b = (const struct zbig *)z;
    size_t n = 0, indexed = 0;
    const struct znode *prev = NULL;
    for (const struct znode *x = b->head->lv[0].fwd; x != NULL; x = x->lv[0].fwd) {
        if (x->back != prev || isnan(x->score))
            return -4;
        if (prev != NULL && cmp_entry(prev->score, node_member(prev), prev->len, x->score,
                                      node_member(x), x->len) >= 0)
            return -5;
        int64_t s = hfind(b, node_member(x), x->len);
        if (s < 0 || b->tab[s] != x)
            return -6;
        prev = x;
        n++;
    }
    if (n != b->n || b->tail != prev)
        return -7;
    for (size_t i = 0; i <= b->mask; i++)
        indexed += b->tab[i] != NULL;
    if (indexed != n)
        return -8;
    /* Spans: on every level, the span of a link is the rank difference of its ends. */
    for (int l = 0; l < b->level; l++) {
        size_t rank = 0;
        for (const struct znode *x = b->head; x->lv[l].fwd != NULL; x = x->lv[l].fwd) {
            const struct znode *y = x->lv[l].fwd;
            size_t r;
            if (!zs_rank(z, node_member(y), y->len, &r) || r + 1 != rank + x->lv[l].span)
                return -9;
            rank = r + 1;
        }
    }
    return 0;
}
