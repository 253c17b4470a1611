/* fifo.h - an intrusive first-in first-out queue: the queue of requests waiting on one key, in
 * the daemon (src/cmd/cmd_wait.c) and in rlimit.so (src/module/module_wait.c).
 *
 * The element embeds a struct fifo_link and the queue a struct fifo; FIFO_ENTRY gives back the
 * structure around either. The queue allocates nothing, locks nothing and reads no clock: the
 * caller owns the memory of both and serialises every call on one queue (the daemon's registry
 * lock, Redis's one thread).
 *
 * Invariants, true between calls:
 * - An element is in at most one queue; l->in is that queue, or NULL when it is in none. Only
 *   fifo_push and fifo_unlink change it, so a caller knows from it whether l still waits.
 * - f->head is the element pushed earliest of those still in f, f->tail the latest; both are NULL
 *   exactly when f is empty. From head, next leads through every element of f in push order to
 *   tail; prev leads back. head->prev and tail->next are NULL.
 * - An element in no queue has prev, next and in all NULL (zeroed memory is such an element).
 * - Unlinking keeps the order of the others; an element unlinked a second time (or never pushed)
 *   changes nothing.
 *
 * Every call is O(1), and inline: these are the few pointer moves each caller made itself. */
#ifndef RLIMITD_FIFO_H
#define RLIMITD_FIFO_H

#include <stddef.h>

struct fifo;

struct fifo_link {
    struct fifo_link *prev, *next; /* towards the head, towards the tail */
    struct fifo *in;               /* the queue it is in; NULL in none */
};

struct fifo {
    struct fifo_link *head, *tail; /* oldest, newest; NULL when empty */
};

/* The structure of type `type` whose member `member` is at ptr (a struct fifo_link or fifo). */
#define FIFO_ENTRY(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline void fifo_init(struct fifo *f)
{
    f->head = f->tail = NULL;
}

static inline int fifo_is_empty(const struct fifo *f)
{
    return f->head == NULL;
}

/* Whether l is the head of the queue it is in (0 when it is in none). */
static inline int fifo_is_head(const struct fifo_link *l)
{
    return l->in != NULL && l->in->head == l;
}

/* l, in no queue, joins the back of f. */
static inline void fifo_push(struct fifo *f, struct fifo_link *l)
{
    l->in = f;
    l->prev = f->tail;
    if (f->tail != NULL)
        f->tail->next = l;
    else
        f->head = l;
    f->tail = l;
}

/* l leaves its queue; the others keep their order, and the one behind l becomes the head if l
 * was. Returns 1 if l was the head, 0 if it was behind it, -1 if it was in no queue (nothing
 * changes: unlinking twice is harmless). */
static inline int fifo_unlink(struct fifo_link *l)
{
    struct fifo *f = l->in;
    if (f == NULL)
        return -1;
    int was_head = f->head == l;
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        f->head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    else
        f->tail = l->prev;
    l->prev = l->next = NULL;
    l->in = NULL;
    return was_head;
}

#endif
