/* listval.c - list values, one block or a deque of blocks (listval.h): their life (create, clone,
 * free, sizes) and every change: encoding an element, a block's insert and cut, the deque's
 * slots, splits and merges, LREM. Reading (lv_get, cursors) is listval_read.c; the layouts and
 * the element reads both run are in listval_internal.h. */
#include "listval_internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"

/* ---- element encoding ---- */

/* 1 and the value if s is the canonical decimal form of an int64 (what util_fmt_i64 writes). */
static int canon_i64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return 0;
    size_t i = 0;
    int neg = s[0] == '-';
    if (neg && len == 1)
        return 0;
    i = (size_t)neg;
    if (s[i] == '0') {
        *out = 0;
        return len == 1;
    }
    uint64_t v = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* An element ready to be written: the head (tag and length), then the payload. */
struct enc {
    unsigned char hdr[5];
    size_t hlen;
    const unsigned char *p;
    size_t plen;
    size_t size;
    unsigned char ib[8];
};

static void enc_init(struct enc *x, const char *s, size_t len)
{
    int64_t v;
    if (canon_i64(s, len, &v)) {
        unsigned n = 1;
        while (n < 8 && !(v >= -(INT64_C(1) << (8 * n - 1)) && v < (INT64_C(1) << (8 * n - 1))))
            n++;
        uint64_t u = (uint64_t)v;
        if (n == 6 && v >= -(INT64_C(1) << 44) && v < (INT64_C(1) << 44)) {
            x->hdr[0] = (unsigned char)(TAG_INT45 | ((u >> 40) & 0x1f));
            n = 5;
        } else {
            x->hdr[0] = (unsigned char)(TAG_INT + n - 1);
        }
        for (unsigned i = 0; i < n; i++)
            x->ib[i] = (unsigned char)(u >> (8 * i));
        x->hlen = 1;
        x->p = x->ib;
        x->plen = n;
    } else if (len <= TAG_STR_MAX) {
        x->hdr[0] = (unsigned char)len;
        x->hlen = 1;
        x->p = (const unsigned char *)s;
        x->plen = len;
    } else {
        x->hdr[0] = TAG_STR32;
        for (unsigned i = 0; i < 4; i++)
            x->hdr[1 + i] = (unsigned char)(len >> (8 * i));
        x->hlen = 5;
        x->p = (const unsigned char *)s;
        x->plen = len;
    }
    x->size = x->hlen + x->plen;
}

static void enc_write(unsigned char *d, const struct enc *x)
{
    memcpy(d, x->hdr, x->hlen);
    memcpy(d + x->hlen, x->p, x->plen);
}

/* What LREM looks for, prepared once: an integer matches only integer elements, a string only
 * string elements (the encoding of a string depends on its bytes alone). */
struct needle {
    int isint;
    int64_t v;
    const char *s;
    size_t len;
};

static void needle_init(struct needle *nd, const char *s, size_t len)
{
    nd->isint = canon_i64(s, len, &nd->v);
    nd->s = s;
    nd->len = len;
}

static int elem_match(const unsigned char *d, const struct needle *nd)
{
    unsigned t = d[0];
    if (t > TAG_STR_MAX && t < TAG_STR32)
        return nd->isint && rd_int(d) == nd->v;
    if (nd->isint)
        return 0;
    if (t <= TAG_STR_MAX)
        return t == nd->len && memcmp(d + 1, nd->s, t) == 0;
    return rd32(d + 1) == nd->len && memcmp(d + 5, nd->s, nd->len) == 0;
}

/* ---- nodes ---- */

static size_t usable(const void *p)
{
    return malloc_usable_size((void *)p);
}

static size_t used_of(const struct node *n)
{
    return n->h.used != USED_WIDE ? n->h.used : elem_size(n->data);
}

static void set_used(struct node *n, size_t used)
{
    n->h.used = (uint16_t)(used < USED_WIDE ? used : USED_WIDE);
}

static size_t node_room(const struct node *n)
{
    return n->h.cap != USED_WIDE ? n->h.cap : usable(n) - sizeof(struct node);
}

/* What the node accounts for: exactly its malloc_usable_size. */
static size_t node_bytes(const struct node *n)
{
    return sizeof(struct node) + node_room(n);
}

/* After every (re)allocation of n. */
static void set_cap(struct node *n)
{
    size_t cap = usable(n) - sizeof(struct node);
    n->h.cap = (uint16_t)(cap < USED_WIDE ? cap : USED_WIDE);
}

static struct node *node_alloc(size_t cap)
{
    struct node *n = xmalloc(sizeof(*n) + cap);
    memset(&n->h, 0, sizeof(n->h));
    set_cap(n);
    return n;
}

/* Whether an element of esz encoded bytes may join node n (an empty node takes any one). */
static int node_fits(const struct node *n, size_t esz)
{
    return n->h.count == 0 ||
           (n->h.count < LV_NODE_MAX_COUNT && used_of(n) + esz <= LV_NODE_MAX_BYTES);
}

/* Writes x at byte offset off of *np (an element boundary). *bytes tracks the block's size. */
static void node_put(struct node **np, size_t off, const struct enc *x, size_t *bytes)
{
    struct node *n = *np;
    size_t used = used_of(n), need = used + x->size;
    if (need > node_room(n)) {
        size_t before = node_bytes(n);
        /* Exact for small blocks (a short list stays in its malloc size class); a quarter more
         * for growing ones, so pushing n elements copies O(n) bytes. */
        size_t cap = need >= 256 ? need + need / 4 : need;
        n = xrealloc(n, sizeof(*n) + cap);
        set_cap(n);
        *bytes = *bytes - before + node_bytes(n);
        *np = n;
    }
    memmove(n->data + off + x->size, n->data + off, used - off);
    enc_write(n->data + off, x);
    set_used(n, need);
    n->h.count++;
}

/* Gives back memory when a block is mostly free. */
static void node_shrink(struct node **np, size_t *bytes)
{
    struct node *n = *np;
    size_t used = used_of(n);
    if (node_room(n) > 2 * used + 128) {
        size_t before = node_bytes(n);
        n = xrealloc(n, sizeof(*n) + used);
        set_cap(n);
        *bytes = *bytes - before + node_bytes(n);
        *np = n;
    }
}

/* Removes k elements from element w on. */
static void node_cut(struct node **np, size_t w, size_t k, size_t *bytes)
{
    struct node *n = *np;
    size_t used = used_of(n), off = node_offset(n, w), end = off;
    for (size_t i = 0; i < k; i++)
        end += elem_size(n->data + end);
    memmove(n->data + off, n->data + end, used - end);
    set_used(n, used - (end - off));
    n->h.count = (uint8_t)(n->h.count - k);
    node_shrink(np, bytes);
}

static struct node *node_with(const struct enc *x)
{
    struct node *n = node_alloc(x->size);
    enc_write(n->data, x);
    set_used(n, x->size);
    n->h.count = 1;
    return n;
}

/* ---- the deque ---- */

static struct big *to_big(struct node *n)
{
    struct big *b = xmalloc(sizeof(*b));
    memset(b, 0, sizeof(*b));
    b->h.big = 1;
    b->cap = 8;
    b->v = xmalloc(b->cap * sizeof(*b->v));
    b->head = 4;
    b->n = 1;
    b->v[b->head] = n;
    b->count = n->h.count;
    b->bytes = usable(b->v) + node_bytes(n);
    return b;
}

/* Moves the n pointers to a fresh array of cap slots, centred, with a free slot before
 * position gap (gap = n: none). */
static void big_recentre(struct big *b, size_t cap, size_t gap)
{
    size_t before = usable(b->v);
    size_t total = b->n + (gap < b->n + 1 ? 1 : 0);
    struct node **v = xmalloc(cap * sizeof(*v));
    size_t head = (cap - total) / 2;
    if (gap <= b->n) {
        memcpy(v + head, b->v + b->head, gap * sizeof(*v));
        memcpy(v + head + gap + 1, b->v + b->head + gap, (b->n - gap) * sizeof(*v));
    } else {
        memcpy(v + head, b->v + b->head, b->n * sizeof(*v));
    }
    free(b->v);
    b->v = v;
    b->head = head;
    b->cap = cap;
    b->bytes = b->bytes - before + usable(v);
}

/* Makes position k (0..n) a new, unset slot, shifting the smaller side. */
static void big_open_slot(struct big *b, size_t k)
{
    int left = k < b->n - k;
    size_t room_left = b->head, room_right = b->cap - b->head - b->n;
    if (left ? room_left == 0 : room_right == 0) {
        big_recentre(b, b->cap < 4 * (b->n + 1) ? 4 * (b->n + 1) : b->cap, k);
        b->n++;
        return;
    }
    if (left) {
        memmove(b->v + b->head - 1, b->v + b->head, k * sizeof(*b->v));
        b->head--;
    } else {
        memmove(b->v + b->head + k + 1, b->v + b->head + k, (b->n - k) * sizeof(*b->v));
    }
    b->n++;
}

/* Removes the slots [k, k + m) (their nodes already freed). */
static void big_drop_slots(struct big *b, size_t k, size_t m)
{
    if (k < b->n - k - m) {
        memmove(b->v + b->head + m, b->v + b->head, k * sizeof(*b->v));
        b->head += m;
    } else {
        memmove(b->v + b->head + k, b->v + b->head + k + m, (b->n - k - m) * sizeof(*b->v));
    }
    b->n -= m;
    if (b->cap > 64 && b->n * 8 < b->cap)
        big_recentre(b, b->cap / 4, SIZE_MAX);
}

/* Merges node k + 1 into node k if the two fit the bounds of one. Returns 1 if merged. */
static int big_merge(struct big *b, size_t k)
{
    if (k + 1 >= b->n)
        return 0;
    struct node **np = &b->v[b->head + k], *m = b->v[b->head + k + 1];
    size_t nu = used_of(*np), mu = used_of(m);
    if ((*np)->h.count + m->h.count > LV_NODE_MAX_COUNT || nu + mu > LV_NODE_MAX_BYTES)
        return 0;
    struct node *n = *np;
    size_t need = nu + mu;
    if (need > node_room(n)) {
        size_t before = node_bytes(n);
        n = xrealloc(n, sizeof(*n) + need);
        set_cap(n);
        b->bytes = b->bytes - before + node_bytes(n);
        *np = n;
    }
    memcpy(n->data + nu, m->data, mu);
    set_used(n, need);
    n->h.count = (uint8_t)(n->h.count + m->h.count);
    b->bytes -= node_bytes(m);
    free(m);
    big_drop_slots(b, k + 1, 1);
    return 1;
}

/* A big list small enough becomes one block again (half the bounds: no flapping at the edge). */
static void maybe_pack(struct listval **lp)
{
    struct big *b = B(*lp);
    if (b->count > LV_NODE_MAX_COUNT / 2)
        return;
    size_t used = 0;
    for (size_t k = 0; k < b->n; k++)
        used += used_of(b->v[b->head + k]);
    if (used > LV_NODE_MAX_BYTES / 2 && b->count > 1)
        return;
    struct node *n = node_alloc(used);
    size_t at = 0;
    for (size_t k = 0; k < b->n; k++) {
        struct node *m = b->v[b->head + k];
        size_t mu = used_of(m);
        memcpy(n->data + at, m->data, mu);
        at += mu;
        n->h.count = (uint8_t)(n->h.count + m->h.count);
    }
    set_used(n, at);
    lv_free(*lp);
    *lp = &n->h;
}

/* Splits node k at element w (0 < w < count): node k keeps [0, w), a new node k + 1 the rest. */
static void big_split(struct big *b, size_t k, size_t w)
{
    struct node *n = b->v[b->head + k];
    size_t off = node_offset(n, w), rest = used_of(n) - off;
    struct node *m = node_alloc(rest);
    memcpy(m->data, n->data + off, rest);
    set_used(m, rest);
    m->h.count = (uint8_t)(n->h.count - w);
    set_used(n, off);
    n->h.count = (uint8_t)w;
    b->bytes += node_bytes(m);
    big_open_slot(b, k + 1);
    b->v[b->head + k + 1] = m;
}

static void big_new_node(struct big *b, size_t k, const struct enc *x)
{
    struct node *n = node_with(x);
    b->bytes += node_bytes(n);
    big_open_slot(b, k);
    b->v[b->head + k] = n;
}

static void big_insert(struct big *b, size_t idx, const struct enc *x)
{
    size_t k, w;
    if (idx == b->count) {
        k = b->n - 1;
        w = b->v[b->head + k]->h.count;
    } else {
        k = locate(&b->h, idx, &w);
    }
    b->count++;
    struct node **np = &b->v[b->head + k];
    if (node_fits(*np, x->size)) {
        node_put(np, node_offset(*np, w), x, &b->bytes);
        return;
    }
    if (w == 0 && k > 0 && node_fits(b->v[b->head + k - 1], x->size)) {
        np = &b->v[b->head + k - 1];
        node_put(np, used_of(*np), x, &b->bytes);
        return;
    }
    if (w == (*np)->h.count && k + 1 < b->n && node_fits(b->v[b->head + k + 1], x->size)) {
        node_put(&b->v[b->head + k + 1], 0, x, &b->bytes);
        return;
    }
    if (w == 0 || w == (*np)->h.count) {
        big_new_node(b, w == 0 ? k : k + 1, x);
        return;
    }
    big_split(b, k, w);
    np = &b->v[b->head + k];
    if (node_fits(*np, x->size)) {
        node_put(np, used_of(*np), x, &b->bytes);
        return;
    }
    np = &b->v[b->head + k + 1];
    if (node_fits(*np, x->size)) {
        node_put(np, 0, x, &b->bytes);
        return;
    }
    big_new_node(b, k + 1, x);
}

/* ---- the API: life, sizes and every change ---- */

struct listval *lv_new(void)
{
    return &node_alloc(0)->h;
}

struct listval *lv_clone(const struct listval *l)
{
    if (!l->big) {
        const struct node *n = (const struct node *)l;
        struct node *c = node_alloc(used_of(n));
        memcpy(c, n, sizeof(*n) + used_of(n));
        set_cap(c);
        return &c->h;
    }
    const struct big *b = CB(l);
    struct big *c = xmalloc(sizeof(*c));
    *c = *b;
    c->v = xmalloc(c->cap * sizeof(*c->v));
    c->bytes = usable(c->v);
    for (size_t k = 0; k < b->n; k++) {
        const struct node *n = b->v[b->head + k];
        struct node *m = node_alloc(used_of(n));
        memcpy(m, n, sizeof(*n) + used_of(n));
        set_cap(m);
        c->v[c->head + k] = m;
        c->bytes += node_bytes(m);
    }
    return &c->h;
}

void lv_free(struct listval *l)
{
    if (l == NULL)
        return;
    if (l->big) {
        struct big *b = B(l);
        for (size_t k = 0; k < b->n; k++)
            free(b->v[b->head + k]);
        free(b->v);
    }
    free(l);
}

size_t lv_count(const struct listval *l)
{
    return lcount(l);
}

size_t lv_bytes(const struct listval *l)
{
    return l->big ? usable(l) + CB(l)->bytes : node_bytes((const struct node *)l);
}

int lv_is_packed(const struct listval *l)
{
    return !l->big;
}

void lv_insert(struct listval **lp, size_t idx, const char *s, size_t len)
{
    struct enc x;
    enc_init(&x, s, len);
    struct listval *l = *lp;
    if (!l->big) {
        struct node *n = (struct node *)l;
        if (node_fits(n, x.size)) {
            size_t unused = 0;
            node_put(&n, node_offset(n, idx), &x, &unused);
            *lp = &n->h;
            return;
        }
        l = &to_big(n)->h;
        *lp = l;
    }
    big_insert(B(l), idx, &x);
}

void lv_remove(struct listval **lp, size_t idx, size_t cnt)
{
    if (cnt == 0)
        return;
    struct listval *l = *lp;
    if (!l->big) {
        struct node *n = (struct node *)l;
        size_t unused = 0;
        node_cut(&n, idx, cnt, &unused);
        *lp = &n->h;
        return;
    }
    struct big *b = B(l);
    size_t w, k = locate(l, idx, &w);
    size_t first_drop = SIZE_MAX, ndrop = 0;
    b->count -= cnt;
    for (size_t kk = k; cnt > 0; kk++, w = 0) {
        struct node **np = &b->v[b->head + kk];
        size_t c = (*np)->h.count, take = c - w < cnt ? c - w : cnt;
        if (take == c) {
            b->bytes -= node_bytes(*np);
            free(*np);
            *np = NULL;
            if (first_drop == SIZE_MAX)
                first_drop = kk;
            ndrop++;
        } else {
            node_cut(np, w, take, &b->bytes);
        }
        cnt -= take;
    }
    if (ndrop > 0)
        big_drop_slots(b, first_drop, ndrop);
    /* The nodes on either side of the cut may now fit in one. */
    if (k > 0 && big_merge(b, k - 1))
        k--;
    big_merge(b, k);
    maybe_pack(lp);
}

void lv_set(struct listval **lp, size_t idx, const char *s, size_t len)
{
    struct listval *l = *lp;
    if (!l->big) {
        /* In place when the new element fits where the old one was. */
        struct node *n = (struct node *)l;
        struct enc x;
        enc_init(&x, s, len);
        size_t off = node_offset(n, idx), old = elem_size(n->data + off);
        if (x.size == old) {
            enc_write(n->data + off, &x);
            return;
        }
    }
    lv_remove(lp, idx, 1);
    lv_insert(lp, idx, s, len);
}

/* LREM within one node: removes up to `limit` matches, the first ones (from_tail = 0) or the
 * last ones. Returns how many. */
static size_t node_rem(struct node **np, const struct needle *nd, size_t limit, int from_tail,
                       size_t *bytes)
{
    struct node *n = *np;
    uint8_t hit[LV_NODE_MAX_COUNT];
    size_t m = 0, off = 0;
    for (size_t i = 0; i < n->h.count; i++) {
        hit[i] = (uint8_t)elem_match(n->data + off, nd);
        m += hit[i];
        off += elem_size(n->data + off);
    }
    if (m == 0)
        return 0;
    size_t rm = m < limit ? m : limit, skip = from_tail ? m - rm : 0;
    size_t rd = 0, wr = 0, removed = 0, seen = 0, count = n->h.count;
    for (size_t i = 0; i < count; i++) {
        size_t sz = elem_size(n->data + rd);
        if (hit[i] && seen++ >= skip && removed < rm) {
            removed++;
            rd += sz;
            continue;
        }
        if (wr != rd)
            memmove(n->data + wr, n->data + rd, sz);
        wr += sz;
        rd += sz;
    }
    set_used(n, wr);
    n->h.count = (uint8_t)(count - removed);
    node_shrink(np, bytes);
    return removed;
}

size_t lv_rem(struct listval **lp, const char *s, size_t len, int64_t count)
{
    struct needle nd;
    needle_init(&nd, s, len);
    size_t limit = count == 0 ? SIZE_MAX : count > 0 ? (size_t)count : (size_t)0 - (size_t)count;
    int from_tail = count < 0;
    struct listval *l = *lp;
    if (!l->big) {
        struct node *n = (struct node *)l;
        size_t unused = 0, r = node_rem(&n, &nd, limit, from_tail, &unused);
        *lp = &n->h;
        return r;
    }
    struct big *b = B(l);
    size_t total = 0;
    for (size_t i = 0; i < b->n && total < limit; i++) {
        size_t k = from_tail ? b->n - 1 - i : i;
        total += node_rem(&b->v[b->head + k], &nd, limit - total, from_tail, &b->bytes);
    }
    b->count -= total;
    /* Drop emptied nodes, then merge neighbours that fit in one. */
    size_t wr = 0;
    for (size_t k = 0; k < b->n; k++) {
        struct node *n = b->v[b->head + k];
        if (n->h.count == 0) {
            b->bytes -= node_bytes(n);
            free(n);
        } else {
            b->v[b->head + wr++] = n;
        }
    }
    if (wr < b->n)
        big_drop_slots(b, wr, b->n - wr);
    for (size_t k = 0; k + 1 < b->n;)
        if (!big_merge(b, k))
            k++;
    maybe_pack(lp);
    return total;
}
