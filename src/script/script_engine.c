/* script_engine.c - what every thread's engine shares: the registry of engines, the counting
 * allocator each Lua state allocates through, the memory INFO reports, and teardown.
 *
 * Memory: a counting allocator over the state's own pool (script_pool.h); a state past
 * SCRIPT_MEM_LIMIT gets "not enough memory" (a Lua error, not a dead process), and INFO's
 * used_memory_lua sums the states. */
#include "script_engine.h"

#include <lua.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
#define SCRIPT_MEM_LIMIT ((size_t)32 << 20) /* fuzz builds: script_kill.c */
#else
#define SCRIPT_MEM_LIMIT ((size_t)256 << 20) /* per thread's state */
#endif

pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
struct engine *engines;
__thread struct engine *tl_engine;

static _Atomic int64_t total_mem; /* every engine's mem, to within MEM_PUBLISH_STEP each */
#define MEM_PUBLISH_STEP 65536

void mem_publish(struct engine *e)
{
    atomic_fetch_add_explicit(&total_mem, (int64_t)e->mem - (int64_t)e->mem_pub,
                              memory_order_relaxed);
    e->mem_pub = e->mem;
}

/* ---- allocator ---- */

void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct engine *e = ud;
    size_t mem = e->mem - osize + nsize; /* osize is 0 for a new block (Lua 5.1's contract) */
    if (nsize > osize && mem > SCRIPT_MEM_LIMIT)
        return NULL; /* Lua raises "not enough memory" */
    void *p = script_pool_realloc(&e->pool, ptr, osize, nsize);
    if (p == NULL && nsize != 0)
        return NULL;
    e->mem = mem;
    /* Published when it moved more than a step either way (unsigned: one comparison). */
    if (mem - e->mem_pub + MEM_PUBLISH_STEP > 2 * MEM_PUBLISH_STEP) {
        mem_publish(e);
        /* Only writes the pause: safe inside an allocation. */
        if (e->small_pause && mem > GC_SMALL_HEAP && e->L != NULL) {
            lua_gc(e->L, LUA_GCSETPAUSE, GC_PAUSE);
            e->small_pause = 0;
        }
    }
    return p;
}

uint64_t script_engine_memory(void)
{
    int64_t sum = atomic_load_explicit(&total_mem, memory_order_relaxed);
    return sum < 0 ? 0 : (uint64_t)sum;
}

void script_thread_exit(void)
{
    pthread_mutex_lock(&engines_lock);
    if (tl_engine != NULL)
        tl_engine->thread_gone = 1;
    pthread_mutex_unlock(&engines_lock);
}

void script_engine_free_all(void)
{
    pthread_mutex_lock(&engines_lock);
    struct engine *e = engines;
    engines = NULL;
    pthread_mutex_unlock(&engines_lock);
    while (e != NULL) {
        struct engine *next = e->next;
        if (e->L != NULL) /* NULL: SCRIPT FLUSH closed it and its thread opened none since */
            lua_close(e->L);
        script_pool_free(&e->pool);
        rbuf_free(&e->reply);
        free(e->argv);
        free(e->lens);
        free(e);
        e = next;
    }
    tl_engine = NULL;
    atomic_store(&total_mem, 0);
}
