/* buf.c - the growable byte buffer's out-of-line half (buf.h). */
#include "rlimitd/buf.h"
#include "rlimitd/alloc.h"

#include <stdio.h>
#include <stdlib.h>

void rbuf_init(struct rbuf *b)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->resp = 0;
}

void rbuf_free(struct rbuf *b)
{
    free(b->p);
    rbuf_init(b);
}

char *rbuf_reserve(struct rbuf *b, size_t n)
{
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            alloc_fail(cap);
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->len;
}
