/* script_engine.h - a thread's Lua engine as every file of the engine sees it: struct engine,
 * the registry of engines (SCRIPT KILL and BUSY walk it, teardown frees it) and the counting
 * allocator under each state (script_engine.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_ENGINE_H
#define RLIMITD_SCRIPT_ENGINE_H

#include <lua.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rlimitd/buf.h"
#include "rlimitd/script.h"
#include "script_pool.h"

#define GC_FULL_AFTER ((size_t)16 << 20) /* growth since the last full collection */
/* The collector's pause (how far the heap grows past the live data before a new cycle): Lua's
 * default of 200% once the heap is past GC_SMALL_HEAP, and twice that below it, where a cycle
 * is mostly marking the same few hundred KB of libraries and compiled scripts again. A wide
 * pause with a large live heap would let garbage take the room a script has under
 * SCRIPT_MEM_LIMIT (Lua 5.1 does not collect before failing an allocation), so the allocator
 * narrows it the moment the heap passes GC_SMALL_HEAP, before the next cycle sets its
 * threshold from it. */
#define GC_PAUSE 200
#define GC_PAUSE_SMALL 400
#define GC_SMALL_HEAP ((size_t)8 << 20)
#define GC_STEPMUL 200 /* Lua's default step multiplier */

#define FN_SLOTS 16 /* compiled scripts an engine finds without a Lua table lookup */

/* A script recently run here: its function held by a registry reference. */
struct fn_slot {
    char sha[40];
    int ref; /* 0: empty */
    int flags;
};

struct engine {
    lua_State *L;
    struct script_pool pool;    /* where L's memory comes from */
    size_t mem;                 /* bytes the allocator handed out (this thread only) */
    size_t mem_pub;             /* mem as last added to total_mem */
    size_t mem_gc;              /* mem after the last full collection */
    int small_pause;            /* the collector's pause is GC_PAUSE_SMALL */
    int gc_tuned;               /* the running script stopped or retuned the collector */
    uint64_t gen;               /* script_cache_generation() the functions were compiled under */
    int fns_ref, flags_ref;     /* registry: sha -> function, sha -> shebang flags */
    int globals_ref;            /* registry: W, the whitelist the globals proxy reads */
    int direct_ref;             /* registry: W with the real library tables (see open_libs) */
    int strmt_ref;              /* registry: what getmetatable('') shows */
    const void *g;              /* the globals proxy G */
    int handler_ref;            /* registry: the error handler */
    int ro_ref;                 /* registry: read-only table -> what it shows (sandbox) */
    int err_ref, ok_ref;        /* registry: the strings "err" and "ok" */
    /* registry: the field names of Redis's typed reply tables ("double", "map", ...), in
     * enum reply_field's order (script_redis.c) */
    int field_ref[5];
    int resp;                   /* redis.setresp: the protocol redis.call's replies are read
                                   in, 2 at the start of every script */
    int keys_ref, argv_ref;     /* registry: the strings "KEYS" and "ARGV" */
    struct fn_slot fns[FN_SLOTS]; /* by the sha's first hex digit; a subset of fns_ref's */
    const char *sha;            /* the running script, for error texts */
    int handled;                /* the error handler formatted the error on the stack */
    int err_counted;            /* the run's reply is an error a redis.call already counted */
    script_call_fn call;        /* how the running script's redis.call runs a command */
    void *call_ud;              /* call's argument: the script's hold on the keyspace */
    struct rbuf reply;          /* redis.call's reply */
    char **argv;
    size_t *lens;
    int cap;
    uint64_t rand48;            /* math.random's state */
    /* Read by SCRIPT KILL and BUSY checks on other threads. */
    /* A run is named by its start (CLOCK_MONOTONIC ns, made unique per engine), so a kill
     * aimed at one run can never stop the next: no lock is shared between threads per run. */
    _Atomic int64_t run_start;  /* the running script's start, 0 if idle */
    _Atomic int64_t kill_start; /* SCRIPT KILL (or SHUTDOWN NOSAVE) asked that run to stop */
    int64_t cur_start;          /* run_start as this thread set it (0 if idle) */
    int64_t last_start;         /* the latest run's start */
    pthread_t thread;           /* the one thread that runs this state */
    int thread_gone;            /* under engines_lock: that thread has ended */
    _Atomic int wrote;          /* the running script has run a write command */
    _Atomic int64_t busy_start; /* the busy watcher asked that run to serve its thread */
    int busy;                   /* this run is counted in script_busy_runs (2: and unbounded) */
    int nkeys;                  /* keys the running script declared */
    int64_t last_serve;         /* when this run last served its thread's connections */
    /* Who touches L (script_run.c, "SCRIPT FLUSH"): ENGINE_IDLE, ENGINE_OWNER (its thread,
     * inside script_enter; depth counts the nesting) or ENGINE_FLUSH (another thread's SCRIPT
     * FLUSH dropping its functions). */
    _Atomic int use;
    int depth;
    struct engine *next;
};
enum { ENGINE_IDLE = 0, ENGINE_OWNER, ENGINE_FLUSH };

/* The registry: every thread's engine, under engines_lock (SCRIPT KILL and BUSY read it from
 * other threads), and the calling thread's own. */
extern pthread_mutex_t engines_lock;
extern struct engine *engines;
extern __thread struct engine *tl_engine;
/* Pushes "err" or "ok", interned once per state and held in the registry: the reply
 * conversions look these keys up for every table. */
#define push_err_key(L) lua_rawgeti((L), LUA_REGISTRYINDEX, tl_engine->err_ref)
#define push_ok_key(L) lua_rawgeti((L), LUA_REGISTRYINDEX, tl_engine->ok_ref)
#define push_field_key(L, f) lua_rawgeti((L), LUA_REGISTRYINDEX, tl_engine->field_ref[(f)])

/* Whether the running script was asked to stop. */
static inline int killed(const struct engine *e)
{
    return e->cur_start != 0 &&
           atomic_load_explicit(&e->kill_start, memory_order_relaxed) == e->cur_start;
}

/* The engine whose state L is (a coroutine's too): the allocator's argument. */
static inline struct engine *engine_of(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

/* Adds the engine's allocation count to the sum INFO reads (script_engine_memory). */
void mem_publish(struct engine *e);
/* The lua_Alloc every state is created with (ud: its engine): counts, limits, and serves
 * blocks from the engine's pool. */
void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

#endif
