/* buf.h - a growable byte buffer: replies on their way to a socket (reply.h), snapshot records
 * on their way to a file (snap.h), INFO text. Allocation happens only when the buffer grows, so a
 * warm buffer appends without malloc. Allocation failure aborts (DESIGN.md "Errors"). */
#ifndef RLIMITD_BUF_H
#define RLIMITD_BUF_H

#include <stddef.h>
#include <string.h>

struct rbuf {
    char *p;
    size_t len;
    size_t cap;
    /* For replies (reply.h): the RESP version they are written in, 3 for RESP3 and anything
     * else (0 after rbuf_init) for RESP2. Whoever hands the buffer to a command sets it (the
     * dispatcher from the session, the script engine from redis.setresp). */
    unsigned char resp;
};

void rbuf_init(struct rbuf *b);
void rbuf_free(struct rbuf *b);
/* Ensures room for n more bytes and returns a pointer to them (caller then bumps b->len). */
char *rbuf_reserve(struct rbuf *b, size_t n);

/* rbuf_reserve for the hot path: a warm buffer has room, so only compare; growing stays out of
 * line. */
static inline char *rbuf_room(struct rbuf *b, size_t n)
{
    if (__builtin_expect(b->cap - b->len >= n, 1))
        return b->p + b->len;
    return rbuf_reserve(b, n);
}

static inline void rbuf_append(struct rbuf *b, const void *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL then (an empty rbuf), and memcpy must not see it */
    memcpy(rbuf_room(b, n), p, n);
    b->len += n;
}

#endif
