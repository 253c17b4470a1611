/* script_run.c - compiling and running scripts (script_compile, script_lookup, script_run) in
 * this thread's engine: one Lua 5.1 state per thread, created at the thread's first script,
 * sandboxed as Redis 7 sandboxes its own (script_sandbox.c), with the `redis` library and
 * Redis's conversions between Lua values and replies (script_redis.c) (docs/COMMANDS.md,
 * Scripting, DESIGN.md "Scripting"). The state allocates through script_engine.c's counting
 * allocator; SCRIPT KILL stops a run through script_kill.c. */
#include "rlimitd/script.h"
#include "rlimitd/alloc.h"

#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/reply.h"
#include "script_bytecode.h"
#include "script_harden.h"
#include "script_kill.h"
#include "script_redis.h"
#include "script_sandbox.h"
#include "script_engine.h"
#include "script_stdlib.h"

static struct fn_slot *fn_slot_of(struct engine *e, const char *sha)
{
    char c = sha[0];
    return &e->fns[(c <= '9' ? c - '0' : c - 'a' + 10) & (FN_SLOTS - 1)];
}

/* The slot of sha, filled from the registry's tables if need be, or NULL if this engine has
 * not compiled sha (since the last SCRIPT FLUSH). */
static struct fn_slot *fn_find(struct engine *e, const char *sha)
{
    struct fn_slot *slot = fn_slot_of(e, sha);
    if (slot->ref != 0 && memcmp(slot->sha, sha, 40) == 0)
        return slot;
    lua_State *L = e->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->flags_ref);
    lua_getfield(L, -1, sha);
    int flags = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : -1;
    lua_pop(L, 2);
    if (flags < 0)
        return NULL;
    if (slot->ref != 0)
        luaL_unref(L, LUA_REGISTRYINDEX, slot->ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->fns_ref);
    lua_getfield(L, -1, sha);
    slot->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
    memcpy(slot->sha, sha, 40);
    slot->flags = flags;
    return slot;
}

/* Forgets every slot (SCRIPT FLUSH). */
static void fn_slots_clear(struct engine *e)
{
    for (int i = 0; i < FN_SLOTS; i++) {
        if (e->fns[i].ref != 0)
            luaL_unref(e->L, LUA_REGISTRYINDEX, e->fns[i].ref);
        e->fns[i].ref = 0;
    }
}

/* A new Lua state for e: libraries, sandbox, the registry's references (at e's first use, and
 * at its thread's first use after SCRIPT FLUSH closed the one before). */
static void open_state(struct engine *e)
{
    e->L = lua_newstate(lua_alloc, e);
    if (e->L == NULL)
        abort();
    lua_pushcfunction(e->L, open_libs);
    if (lua_pcall(e->L, 0, 0, 0) != 0)
        abort(); /* only out of memory, far below the limit: nothing sane to do */
    lua_pushcfunction(e->L, guard_libs);
    if (lua_pcall(e->L, 0, 0, 0) != 0)
        abort();
    lua_pushcfunction(e->L, err_handler);
    e->handler_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
    lua_pushliteral(e->L, "err");
    e->err_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
    lua_pushliteral(e->L, "ok");
    e->ok_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
    lua_pushliteral(e->L, "KEYS");
    e->keys_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
    lua_pushliteral(e->L, "ARGV");
    e->argv_ref = luaL_ref(e->L, LUA_REGISTRYINDEX);
    lua_gc(e->L, LUA_GCSETPAUSE, GC_PAUSE_SMALL);
    e->small_pause = 1;
    e->gen = script_cache_generation();
    rand48_seed(e, 0);
    e->mem_gc = e->mem;
    mem_publish(e);
}

/* This thread's engine, created at its first use. */
static struct engine *engine_get(void)
{
    struct engine *e = tl_engine;
    if (e == NULL) {
        e = xcalloc(1, sizeof(*e));
        rbuf_init(&e->reply);
        script_pool_init(&e->pool);
        open_state(e);
        e->thread = pthread_self();
        static pthread_once_t signal_once = PTHREAD_ONCE_INIT;
        pthread_once(&signal_once, install_kill_signal);
        pthread_mutex_lock(&engines_lock);
        e->next = engines;
        engines = e;
        pthread_mutex_unlock(&engines_lock);
        tl_engine = e;
    }
    return e;
}

/* Drops the functions e compiled before SCRIPT FLUSH, and the garbage they leave (the caller
 * holds e: its own thread inside, or a flush). */
static void drop_functions(struct engine *e, uint64_t gen)
{
    fn_slots_clear(e);
    lua_newtable(e->L);
    lua_rawseti(e->L, LUA_REGISTRYINDEX, e->fns_ref);
    lua_newtable(e->L);
    lua_rawseti(e->L, LUA_REGISTRYINDEX, e->flags_ref);
    lua_gc(e->L, LUA_GCCOLLECT, 0);
    e->mem_gc = e->mem;
    e->gen = gen;
    mem_publish(e);
}

/* ---- who touches a state ----
 *
 * A state is used by its own thread between script_enter and script_leave (nested pairs: the
 * outermost claims it; EVAL holds it from its lookup to the end of its run), and by SCRIPT FLUSH
 * on any thread, which claims every idle state in turn and closes it, as Redis's flush resets
 * its VM; the thread opens a new one at its next script_enter. used_memory_lua then counts the
 * states scripts have run in since, not what threads that have run none since still held. A
 * state whose thread is inside keeps going and drops its functions at its next lookup
 * (engine_current's generation check), so a flush never pulls a function from under a script
 * about to run. The kill signal touches a state only while it runs a script (cur_start). */

void script_enter(void)
{
    struct engine *e = engine_get();
    if (e->depth++ > 0)
        return;
    int idle = ENGINE_IDLE;
    while (!atomic_compare_exchange_strong_explicit(&e->use, &idle, ENGINE_OWNER,
                                                    memory_order_acquire, memory_order_relaxed)) {
        idle = ENGINE_IDLE;
        sched_yield(); /* a flush is closing this state: no script runs in it, bounded */
    }
    if (e->L == NULL)
        open_state(e);
}

void script_leave(void)
{
    struct engine *e = tl_engine;
    if (--e->depth == 0)
        atomic_store_explicit(&e->use, ENGINE_IDLE, memory_order_release);
}

void script_flush(void)
{
    script_cache_flush();
    uint64_t gen = script_cache_generation();
    pthread_mutex_lock(&engines_lock);
    for (struct engine *e = engines; e != NULL; e = e->next) {
        int idle = ENGINE_IDLE;
        if (!atomic_compare_exchange_strong_explicit(&e->use, &idle, ENGINE_FLUSH,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        if (e->gen != gen && e->L != NULL) {
            fn_slots_clear(e);
            lua_close(e->L);
            e->L = NULL;
            script_pool_free(&e->pool);
            script_pool_init(&e->pool);
            e->mem_gc = 0;
            mem_publish(e);
        }
        atomic_store_explicit(&e->use, ENGINE_IDLE, memory_order_release);
    }
    pthread_mutex_unlock(&engines_lock);
}

/* This thread's engine, its functions dropped first if SCRIPT FLUSH ran (on any thread) since
 * it compiled them. Only the steps that find or compile a function check the generation
 * (script_lookup, script_compile): script_run runs the function they found even if a flush
 * came in between, as a flush during a script leaves that script running in Redis; dropping
 * the tables there would leave it nothing to run. */
static struct engine *engine_current(void)
{
    struct engine *e = engine_get();
    uint64_t gen = script_cache_generation();
    if (e->gen != gen)
        drop_functions(e, gen); /* SCRIPT FLUSH since this state compiled */
    return e;
}

int script_lookup(const char *sha)
{
    script_enter();
    struct fn_slot *slot = fn_find(engine_current(), sha);
    int flags = slot != NULL ? slot->flags : -1;
    script_leave();
    return flags;
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    rbuf_append(ud, p, n);
    return 0;
}

/* Gives the function just compiled (at the top) the environment its code allows (see the
 * sandbox, script_sandbox.c): G unless its bytecode shows it cannot assign globals. */
static void choose_env(lua_State *L, struct engine *e)
{
    struct rbuf chunk;
    rbuf_init(&chunk);
    unsigned facts = BC_UNKNOWN;
    if (lua_dump(L, dump_writer, &chunk) == 0)
        facts = script_bytecode_scan((const unsigned char *)chunk.p, chunk.len);
    rbuf_free(&chunk);
    if (facts & BC_SETS_GLOBALS)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, facts == 0 ? e->direct_ref : e->globals_ref);
    lua_setfenv(L, -2);
}

static int compile(const char *sha, const char *body, size_t len, struct rbuf *out)
{
    char err[256];
    unsigned flags;
    if (script_shebang(body, len, &flags, err, sizeof(err)) != 0) {
        reply_error(out, err);
        return -1;
    }
    struct engine *e = engine_current();
    lua_State *L = e->L;
    int rc;
    if (flags & SCRIPT_FLAG_SHEBANG) {
        /* The shebang line becomes a comment, so line numbers stay the script's. */
        char *copy = xmalloc(len);
        memcpy(copy, body, len);
        copy[0] = copy[1] = '-';
        rc = compile_chunk(L, copy, len, "@user_script");
        free(copy);
    } else {
        rc = compile_chunk(L, body, len, "@user_script");
    }
    if (rc != 0) {
        const char *m = lua_tostring(L, -1);
        reply_errorf(out, "ERR Error compiling script (new function): %s", m ? m : "?");
        lua_pop(L, 1);
        return -1;
    }
    choose_env(L, e);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->fns_ref);
    lua_insert(L, -2);
    lua_setfield(L, -2, sha);
    lua_pop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->flags_ref);
    lua_pushinteger(L, (lua_Integer)flags);
    lua_setfield(L, -2, sha);
    lua_pop(L, 1);
    mem_publish(e);
    return (int)flags;
}

int script_compile(const char *sha, const char *body, size_t len, struct rbuf *out)
{
    script_enter();
    int flags = compile(sha, body, len, out);
    script_leave();
    return flags;
}

/* The length of the value at the top if it is a plain array (a table with no metatable and no
 * key past its length), else -1. */
static int plain_length(lua_State *L)
{
    if (!lua_istable(L, -1))
        return -1;
    if (lua_getmetatable(L, -1)) {
        lua_pop(L, 1);
        return -1;
    }
    size_t len = lua_objlen(L, -1);
    if (len > INT32_MAX)
        return -1;
    if (len == 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)len);
    if (lua_next(L, -2) != 0) {
        lua_pop(L, 2);
        return -1;
    }
    return (int)len;
}

/* Sets env[name] (name a registry reference to the interned key) to the array v, in the table
 * the last script left there when that table is still a plain array: no metatable and no key
 * past its length (what a script can do to it is add keys, remove them or set a metatable, and
 * nothing but env refers to it once its script ended, so a plain array is as good as new). Its
 * strings stay alive between calls, so the same arguments are not allocated again. */
static void set_array(lua_State *L, int env, int name, char **v, const size_t *lens, int n)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, name);
    lua_pushvalue(L, -1);
    lua_rawget(L, env);
    int old = plain_length(L);
    if (old < 0) {
        lua_pop(L, 1);
        lua_createtable(L, n, 0);
    }
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, v[i], lens[i]);
        lua_rawseti(L, -2, i + 1);
    }
    for (int i = n + 1; i <= old; i++) {
        lua_pushnil(L);
        lua_rawseti(L, -2, i);
    }
    if (old >= 0)
        lua_pop(L, 2);
    else
        lua_rawset(L, env);
}

static void run(const char *sha, script_call_fn call, void *call_ud, int64_t start_ns, char **keys,
                const size_t *klens, int nkeys, char **args, const size_t *alens, int nargs,
                struct rbuf *out)
{
    struct engine *e = engine_get();
    lua_State *L = e->L;
    int base = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->handler_ref);
    struct fn_slot *slot = fn_find(e, sha); /* the caller looked it up: never NULL */
    lua_rawgeti(L, LUA_REGISTRYINDEX, slot->ref);
    /* KEYS and ARGV go to the environment the function reads its globals from (W behind G). */
    lua_getfenv(L, -1);
    if (lua_topointer(L, -1) == e->g) {
        lua_pop(L, 1);
        lua_rawgeti(L, LUA_REGISTRYINDEX, e->globals_ref);
    }
    set_array(L, base + 3, e->keys_ref, keys, klens, nkeys);
    set_array(L, base + 3, e->argv_ref, args, alens, nargs);
    lua_pop(L, 1);
    e->sha = sha;
    e->resp = 2; /* as Redis: each script starts in RESP2 whatever its caller speaks */
    e->call = call;
    e->call_ud = call_ud;
    e->handled = 0;
    e->err_counted = 0;
    atomic_store(&e->wrote, 0);
#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
    fuzz_budget_start(L);
#else
    e->nkeys = nkeys;
    busy_watch_start(L, e); /* replaces a kill's hook from an earlier run; before run_start */
#endif
    int64_t start = start_ns;
    if (start <= e->last_start)
        start = e->last_start + 1;
    e->last_start = e->cur_start = start;
    atomic_store(&e->run_start, start); /* after wrote: SCRIPT KILL reads them in this order */
    int rc = lua_pcall(L, 0, 1, base + 1);
    atomic_store(&e->run_start, 0);
    e->cur_start = 0;
    busy_watch_end(e);
    e->call = NULL;
    e->call_ud = NULL;
    if (rc == 0) {
        lua_to_reply(L, -1, out, 0);
    } else if (e->handled && lua_isstring(L, -1)) {
        reply_error(out, lua_tostring(L, -1));
    } else {
        /* Out of memory, or the handler itself failed (e.g. Lua's stack overflow). */
        const char *m = lua_tostring(L, -1);
        reply_errorf(out, "ERR %s script: %s.", m ? m : "error running script", sha);
    }
    lua_settop(L, base);
    if (e->gc_tuned)
        harden_gc_restore(e);
    /* Garbage is collected incrementally as scripts allocate; a script that left a large
     * heap behind (a failed memory bomb, a big reply) gets a full collection now, so the next
     * script starts with the memory it is allowed. */
    if (e->mem < e->mem_gc)
        e->mem_gc = e->mem;
    if (e->mem > e->mem_gc + GC_FULL_AFTER) {
        lua_gc(L, LUA_GCCOLLECT, 0);
        e->mem_gc = e->mem;
    }
    if (!e->small_pause && e->mem < GC_SMALL_HEAP / 2) {
        lua_gc(L, LUA_GCSETPAUSE, GC_PAUSE_SMALL);
        e->small_pause = 1;
    }
    mem_publish(e);
}

void script_run(const char *sha, script_call_fn call, void *call_ud, int64_t start_ns, char **keys,
                const size_t *klens, int nkeys, char **args, const size_t *alens, int nargs,
                struct rbuf *out)
{
    script_enter();
    run(sha, call, call_ud, start_ns, keys, klens, nkeys, args, alens, nargs, out);
    script_leave();
}

int script_reply_counted(void)
{
    return tl_engine != NULL && tl_engine->err_counted;
}
