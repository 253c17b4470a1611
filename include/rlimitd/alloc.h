/* alloc.h - the daemon's one policy for allocation failure (DESIGN.md "Errors"): log the size and
 * abort. A limiter that silently drops state is worse than one that restarts from its snapshot,
 * and no caller can do anything better with NULL. rlimit.so does not use these: Redis's
 * allocator has its own policy. */
#ifndef RLIMITD_ALLOC_H
#define RLIMITD_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Prints "rlimitd: out of memory allocating N bytes" and aborts. */
__attribute__((noreturn)) void alloc_fail(size_t n);

#endif
