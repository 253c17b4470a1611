/* test_fifo.c - the intrusive FIFO of waiters on a key (rlimitd/fifo.h): push and unlink at
 * the head, in the middle, at the tail and of the only element, order kept, unlinking twice
 * harmless, and a seeded run against an array model. Every check walks the whole queue both ways
 * and checks each invariant the header states. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "rlimitd/fifo.h"

#define N 64

struct item {
    int id;
    struct fifo_link link;
};

static struct item items[N];

static void reset(struct fifo *f)
{
    memset(items, 0, sizeof(items));
    for (int i = 0; i < N; i++)
        items[i].id = i;
    fifo_init(f);
}

static int id_of(const struct fifo_link *l)
{
    return FIFO_ENTRY(l, struct item, link)->id;
}

/* f holds exactly want[0..n) in that order (oldest first), and every item not in want is in no
 * queue with its links cleared. */
static void expect_queue(const struct fifo *f, const int *want, int n)
{
    int in[N] = {0};
    cr_assert_eq(fifo_is_empty(f), n == 0);
    cr_assert_eq(f->head == NULL, n == 0);
    cr_assert_eq(f->tail == NULL, n == 0);
    const struct fifo_link *prev = NULL;
    int i = 0;
    for (const struct fifo_link *l = f->head; l != NULL; prev = l, l = l->next, i++) {
        cr_assert_lt(i, n, "more elements than the %d pushed", n);
        cr_assert_eq(id_of(l), want[i], "position %d: %d, want %d", i, id_of(l), want[i]);
        cr_assert_eq(l->prev, prev, "position %d: prev does not lead back", i);
        cr_assert_eq(l->in, f, "position %d: in is not its queue", i);
        cr_assert_eq(fifo_is_head(l), i == 0, "position %d: fifo_is_head", i);
        in[want[i]] = 1;
    }
    cr_assert_eq(i, n, "%d elements reached from the head, want %d", i, n);
    cr_assert_eq(f->tail, prev, "tail is not the last element");
    i = n - 1;
    for (const struct fifo_link *l = f->tail; l != NULL; l = l->prev, i--)
        cr_assert_eq(id_of(l), want[i], "backwards, position %d", i);
    cr_assert_eq(i, -1);
    for (int k = 0; k < N; k++)
        if (!in[k]) {
            const struct fifo_link *l = &items[k].link;
            cr_assert(l->in == NULL && l->prev == NULL && l->next == NULL,
                      "item %d is in no queue but its links are set", k);
            cr_assert_eq(fifo_is_head(l), 0);
        }
}

static void push_ids(struct fifo *f, const int *ids, int n)
{
    for (int i = 0; i < n; i++)
        fifo_push(f, &items[ids[i]].link);
}

Test(fifo, empty)
{
    struct fifo f;
    reset(&f);
    expect_queue(&f, NULL, 0);
}

Test(fifo, push_keeps_order)
{
    struct fifo f;
    reset(&f);
    int ids[] = {5, 3, 9, 0, 63, 1};
    for (int i = 0; i < 6; i++) {
        fifo_push(&f, &items[ids[i]].link);
        expect_queue(&f, ids, i + 1);
    }
}

Test(fifo, unlink_only_element)
{
    struct fifo f;
    reset(&f);
    int ids[] = {7};
    push_ids(&f, ids, 1);
    cr_assert_eq(fifo_unlink(&items[7].link), 1, "the only element is the head");
    expect_queue(&f, NULL, 0);
    /* The emptied queue takes new elements as a fresh one does. */
    int again[] = {2, 7};
    push_ids(&f, again, 2);
    expect_queue(&f, again, 2);
}

/* Each position of a queue of 4 (0 the head, 3 the tail) unlinked: the others keep their order,
 * only the head's unlink says it was the head, and a push afterwards goes behind the new tail. */
Test(fifo, unlink_each_position)
{
    static const int ids[] = {1, 2, 3, 4};
    for (int at = 0; at < 4; at++) {
        struct fifo f;
        reset(&f);
        push_ids(&f, ids, 4);
        cr_assert_eq(fifo_unlink(&items[ids[at]].link), at == 0, "position %d", at);
        int want[5], n = 0;
        for (int i = 0; i < 4; i++)
            if (i != at)
                want[n++] = ids[i];
        expect_queue(&f, want, n);
        fifo_push(&f, &items[9].link);
        want[n++] = 9;
        expect_queue(&f, want, n);
    }
}

/* Two from the middle one after the other, then the head, then the tail. */
Test(fifo, unlink_in_turn)
{
    struct fifo f;
    reset(&f);
    int ids[] = {1, 2, 3, 4, 5};
    push_ids(&f, ids, 5);
    cr_assert_eq(fifo_unlink(&items[3].link), 0);
    cr_assert_eq(fifo_unlink(&items[2].link), 0);
    int want[] = {1, 4, 5};
    expect_queue(&f, want, 3);
    cr_assert_eq(fifo_unlink(&items[1].link), 1);
    cr_assert(fifo_is_head(&items[4].link), "the one behind the head becomes the head");
    cr_assert_eq(fifo_unlink(&items[5].link), 0);
    int want2[] = {4};
    expect_queue(&f, want2, 1);
}

/* The callers unlink on every path that ends a wait (answered, timed out, disconnected), and
 * more than one path can run for one waiter: the second unlink must leave the queue as it is,
 * say so, and not count as leaving the head, even when the element left as the head. */
Test(fifo, unlink_twice_changes_nothing)
{
    struct fifo f;
    reset(&f);
    int ids[] = {1, 2, 3};
    push_ids(&f, ids, 3);
    cr_assert_eq(fifo_unlink(&items[1].link), 1);
    cr_assert_eq(fifo_unlink(&items[1].link), -1);
    int want[] = {2, 3};
    expect_queue(&f, want, 2);
    cr_assert_eq(fifo_unlink(&items[3].link), 0);
    cr_assert_eq(fifo_unlink(&items[3].link), -1);
    int want2[] = {2};
    expect_queue(&f, want2, 1);
    cr_assert_eq(fifo_unlink(&items[2].link), 1);
    cr_assert_eq(fifo_unlink(&items[2].link), -1);
    expect_queue(&f, NULL, 0);
}

Test(fifo, unlink_never_pushed)
{
    struct fifo f;
    reset(&f);
    int ids[] = {1, 2};
    push_ids(&f, ids, 2);
    cr_assert_eq(fifo_unlink(&items[40].link), -1, "zeroed memory is an element in no queue");
    expect_queue(&f, ids, 2);
}

/* Two queues side by side (two keys): an element's unlink touches only its own queue. */
Test(fifo, two_queues)
{
    struct fifo a, b;
    reset(&a);
    fifo_init(&b);
    int ia[] = {1, 2, 3}, ib[] = {10, 11};
    push_ids(&a, ia, 3);
    push_ids(&b, ib, 2);
    cr_assert_eq(items[10].link.in, &b);
    cr_assert_eq(fifo_unlink(&items[10].link), 1);
    cr_assert_eq(fifo_unlink(&items[2].link), 0);
    cr_assert(a.head == &items[1].link && a.tail == &items[3].link);
    cr_assert(items[1].link.next == &items[3].link && items[3].link.prev == &items[1].link);
    cr_assert(b.head == &items[11].link && b.tail == &items[11].link);
    cr_assert(items[11].link.prev == NULL && items[11].link.next == NULL);
    cr_assert(items[11].link.in == &b && fifo_is_head(&items[11].link));
}

/* FIFO_ENTRY gives back the structure around a queue too (the key's record in the callers). */
Test(fifo, entry_of_queue)
{
    struct keyq {
        uint64_t hash;
        struct fifo waiters;
        char key[8];
    } q;
    fifo_init(&q.waiters);
    cr_assert_eq(FIFO_ENTRY(&q.waiters, struct keyq, waiters), &q);
}

/* Seeded random pushes and unlinks (of members, of the head, and of items in no queue) against
 * an array that keeps the push order. */
Test(fifo, model)
{
    for (uint64_t seed = 1; seed <= 50; seed++) {
        struct fifo f;
        reset(&f);
        int model[N], n = 0;
        uint64_t x = seed * 0x9E3779B97F4A7C15ULL;
        for (int step = 0; step < 2000; step++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int k = (int)((x >> 8) % N);
            int pos = -1;
            for (int i = 0; i < n; i++)
                if (model[i] == k)
                    pos = i;
            int r;
            if ((x & 3) != 0 && pos < 0) {
                fifo_push(&f, &items[k].link);
                model[n++] = k;
            } else if ((r = fifo_unlink(&items[k].link)) != (pos < 0 ? -1 : pos == 0)) {
                cr_assert_fail("seed %llu step %d: unlink of %d answered %d, model position %d",
                               (unsigned long long)seed, step, k, r, pos);
            } else if (pos >= 0) {
                memmove(&model[pos], &model[pos + 1], sizeof(int) * (size_t)(n - pos - 1));
                n--;
            }
            expect_queue(&f, model, n);
        }
    }
}
