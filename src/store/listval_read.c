/* listval_read.c - reading a list value (listval.h) without changing it: an element by index,
 * cursors from any index either way, and element equality. Calls nothing in listval.c; the
 * layouts and the element reads are in listval_internal.h. */
#include "listval_internal.h"

#include <string.h>

int lv_elem_eq(const struct lv_elem *e, const char *s, size_t len)
{
    return e->len == len && memcmp(e->p, s, len) == 0;
}

void lv_get(const struct listval *l, size_t idx, struct lv_elem *e)
{
    size_t w, k = locate(l, idx, &w);
    const struct node *n = node_at(l, k);
    elem_read(n->data + node_offset(n, w), e);
}

static void load_offs(struct lv_iter *it)
{
    const struct node *n = node_at(it->l, it->k);
    size_t off = 0;
    for (size_t i = 0; i < n->h.count; i++) {
        it->offs[i] = (uint32_t)off;
        off += elem_size(n->data + off);
    }
}

void lv_iter_init(struct lv_iter *it, const struct listval *l, size_t start, int rev)
{
    size_t cnt = lcount(l), w;
    it->l = l;
    it->rev = rev;
    it->left = 0;
    if (start >= cnt)
        return;
    it->left = rev ? start + 1 : cnt - start;
    it->k = locate(l, start, &w);
    if (rev) {
        load_offs(it);
        it->w = w + 1;
    } else {
        it->w = w;
        it->off = node_offset(node_at(l, it->k), w);
    }
}

int lv_next(struct lv_iter *it, struct lv_elem *e)
{
    if (it->left == 0)
        return 0;
    it->left--;
    const struct node *n = node_at(it->l, it->k);
    if (!it->rev) {
        if (it->w == n->h.count) {
            n = node_at(it->l, ++it->k);
            it->w = 0;
            it->off = 0;
        }
        it->off += elem_read(n->data + it->off, e);
        it->w++;
        return 1;
    }
    if (it->w == 0) {
        it->k--;
        load_offs(it);
        n = node_at(it->l, it->k);
        it->w = n->h.count;
    }
    it->w--;
    elem_read(n->data + it->offs[it->w], e);
    return 1;
}
