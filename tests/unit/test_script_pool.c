/* test_script_pool.c - the small-object allocator under the Lua states (src/script/script_pool.h):
 * blocks keep their bytes through growth and shrinking, freed blocks are reused by their class,
 * and a used-up arena hands on to malloc without losing either kind of block. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/script/script_pool.h"

static struct script_pool pool;

static void setup(void)
{
    script_pool_init(&pool);
}

static void teardown(void)
{
    script_pool_free(&pool);
}

TestSuite(script_pool, .init = setup, .fini = teardown);

Test(script_pool, small_blocks_are_aligned_distinct_and_reused)
{
    void *a = script_pool_realloc(&pool, NULL, 0, 24);
    void *b = script_pool_realloc(&pool, NULL, 0, 24);
    cr_assert(a != NULL && b != NULL && a != b);
    cr_assert_eq((uintptr_t)a % 16, 0);
    cr_assert_eq((uintptr_t)b % 16, 0);
    cr_assert(script_pool_owns(&pool, a) && script_pool_owns(&pool, b));
    memset(a, 0xaa, 24);
    memset(b, 0xbb, 24);
    cr_assert_null(script_pool_realloc(&pool, a, 24, 0));
    /* Same class (17..32 bytes): the freed block comes back first. */
    void *c = script_pool_realloc(&pool, NULL, 0, 32);
    cr_assert_eq(c, a);
    cr_assert_eq(((unsigned char *)b)[23], 0xbb);
    script_pool_realloc(&pool, b, 24, 0);
    script_pool_realloc(&pool, c, 32, 0);
}

Test(script_pool, growth_and_shrinking_keep_the_bytes)
{
    unsigned char *p = script_pool_realloc(&pool, NULL, 0, 10);
    for (int i = 0; i < 10; i++)
        p[i] = (unsigned char)i;
    /* Within the class: in place. Past it: moved, bytes kept. Past the pool's largest block:
     * malloc, bytes kept. */
    cr_assert_eq(script_pool_realloc(&pool, p, 10, 16), p);
    unsigned char *q = script_pool_realloc(&pool, p, 16, 300);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(q[i], i);
    memset(q + 10, 7, 290);
    unsigned char *r = script_pool_realloc(&pool, q, 300, 5000);
    cr_assert(!script_pool_owns(&pool, r));
    cr_assert_eq(r[9], 9);
    cr_assert_eq(r[299], 7);
    /* A malloc'd block shrunk below the pool's limit stays readable. */
    unsigned char *s = script_pool_realloc(&pool, r, 5000, 40);
    cr_assert_eq(s[0], 0);
    cr_assert_eq(s[39], 7);
    /* A pool block shrinks in place and is later freed by its new size. */
    unsigned char *t = script_pool_realloc(&pool, NULL, 0, 200);
    memset(t, 3, 200);
    cr_assert_eq(script_pool_realloc(&pool, t, 200, 8), t);
    cr_assert_eq(t[7], 3);
    script_pool_realloc(&pool, t, 8, 0);
    script_pool_realloc(&pool, s, 40, 0);
}

Test(script_pool, a_used_up_arena_hands_on_to_malloc)
{
    size_t n = POOL_ARENA_BYTES / POOL_MAX_BLOCK + 100;
    void **v = malloc(n * sizeof(*v));
    size_t owned = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = script_pool_realloc(&pool, NULL, 0, POOL_MAX_BLOCK);
        cr_assert_not_null(v[i]);
        memset(v[i], (int)(i & 0xff), POOL_MAX_BLOCK);
        owned += script_pool_owns(&pool, v[i]);
    }
    cr_assert_eq(owned, POOL_ARENA_BYTES / POOL_MAX_BLOCK);
    /* A small block now comes from malloc too, and growing it stays correct. */
    unsigned char *x = script_pool_realloc(&pool, NULL, 0, 16);
    cr_assert(!script_pool_owns(&pool, x));
    memset(x, 9, 16);
    x = script_pool_realloc(&pool, x, 16, 64);
    cr_assert_eq(x[15], 9);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(((unsigned char *)v[i])[POOL_MAX_BLOCK - 1], (unsigned char)(i & 0xff));
        script_pool_realloc(&pool, v[i], POOL_MAX_BLOCK, 0);
    }
    /* Freed arena blocks serve again. */
    void *y = script_pool_realloc(&pool, NULL, 0, POOL_MAX_BLOCK);
    cr_assert(script_pool_owns(&pool, y));
    script_pool_realloc(&pool, y, POOL_MAX_BLOCK, 0);
    script_pool_realloc(&pool, x, 64, 0);
    free(v);
}
