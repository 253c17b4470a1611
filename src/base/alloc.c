/* alloc.c - allocation that never returns NULL (alloc.h). */
#include "rlimitd/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void alloc_fail(size_t n)
{
    fprintf(stderr, "rlimitd: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL && n != 0)
        alloc_fail(n);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count, size);
    if (p == NULL && count != 0 && size != 0)
        alloc_fail(count * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL && n != 0)
        alloc_fail(n);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}
