/* script_kill.c - stopping a script: SCRIPT KILL and BUSY on other threads, the signal and
 * hooks that stop a run on its own, the pcall and xpcall a kill cannot be caught by, and the
 * guards on library functions that SCRIPT KILL could not interrupt or the process could not
 * survive (docs/DESIGN.md "Scripting", "Long scripts and BUSY"). */
#include "script_kill.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "rlimitd/clock.h"
#include "rlimitd/script.h"
#include "script_redis.h"
#include "script_engine.h"
#include "script_stdlib.h"

#define KILLED_TEXT "Script killed by user with SCRIPT KILL..." /* push_error adds "ERR " */

/* pcall as Redis 7 replaces it: a caught error table with an err field (what redis.call raises)
 * comes back as its err string. */
int l_pcall_global(lua_State *L)
{
    int argc = lua_gettop(L);
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    if (lua_pcall(L, argc - 1, LUA_MULTRET, 0) != 0) {
        if (killed(engine_of(L)))
            return lua_error(L); /* a killed script cannot catch its own end */
        lua_remove(L, 1);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            if (lua_isstring(L, -1))
                lua_replace(L, -2);
            else
                lua_pop(L, 1);
        }
        lua_pushboolean(L, 0);
        lua_insert(L, 1);
    }
    return lua_gettop(L);
}

/* The handler xpcall gives Lua: the script's own (upvalue 1), unless the run was killed. Lua
 * calls a handler with hooks off when the error came from a hook (the kill), so a handler that
 * never returns would make the script unkillable: a killed run's error skips it. */
static int xpcall_handler(lua_State *L)
{
    if (killed(engine_of(L)))
        return 1; /* the kill's error, unchanged */
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* xpcall, likewise unable to catch a kill. */
int l_xpcall_global(lua_State *L)
{
    luaL_checkany(L, 2);
    lua_settop(L, 2);
    lua_pushcclosure(L, xpcall_handler, 1);
    lua_insert(L, 1); /* handler under f */
    int rc = lua_pcall(L, 0, LUA_MULTRET, 1);
    if (rc != 0 && killed(engine_of(L)))
        return lua_error(L);
    lua_pushboolean(L, rc == 0);
    lua_replace(L, 1);
    return lua_gettop(L);
}

/* Stopping a script. A script runs without a hook, so the VM checks nothing per instruction.
 * SCRIPT KILL (script_kill, on another thread) names the run to stop and sends KILL_SIGNAL to
 * the state's thread; the handler, on that thread, installs kill_hook with a count of 1 if that
 * run is still the one running (lua_sethook may be called asynchronously, as from a signal
 * handler: Lua's own interpreter stops a script on SIGINT this way). The hook fires at the
 * next instruction and on every one after, so the error is raised again wherever the script
 * goes; the next run starts with the hook removed. */
#define KILL_SIGNAL (SIGRTMIN + 1)

static void kill_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (!killed(engine_of(L)))
        return; /* a hook left from an earlier run: removed when the next one starts */
    push_error(L, KILLED_TEXT, sizeof(KILLED_TEXT) - 1);
    lua_error(L);
}

/* Coroutines. The signal handler hooks the state's main thread only: Lua cannot tell it which
 * coroutine runs. So every coroutine gets a count hook when it is created, which looks for a
 * kill every COROUTINE_CHECK instructions and then raises as kill_hook does (scripts seldom use
 * coroutines; the main thread stays unhooked). A thread that already has a hook (copied from
 * its creator: a coroutine's, a kill's, or a fuzz build's budget) keeps it. */
#define COROUTINE_CHECK 1000

static void busy_check(struct engine *e);

static void coroutine_hook(lua_State *L, lua_Debug *ar)
{
    busy_check(engine_of(L));
    if (!killed(engine_of(L)))
        return;
    lua_sethook(L, kill_hook, LUA_MASKCOUNT, 1);
    kill_hook(L, ar);
}

/* coroutine.create or coroutine.wrap (Lua's own, run by wrap's rule), then hooks the new thread
 * (for wrap, the function's upvalue). */
static int l_coroutine_new(lua_State *L)
{
    int n = original(L)(L);
    lua_State *co = lua_tothread(L, -1);
    if (co == NULL && lua_getupvalue(L, -1, 1) != NULL) {
        co = lua_tothread(L, -1);
        lua_pop(L, 1);
    }
    if (co != NULL && lua_gethook(co) == NULL)
        lua_sethook(co, coroutine_hook, LUA_MASKCOUNT, COROUTINE_CHECK);
    return n;
}

/* Pattern matching. Lua 5.1's matcher recurses once per pattern item that can repeat,
 * capture or be optional, with no depth limit, so a pattern of some 100k such items overflowed
 * the I/O thread's C stack and crashed the server (Redis 7.0 crashes the same way). A pattern
 * with more than PATTERN_MAX_DEPTH of the bytes that may recurse (?*+-(), counted wherever they
 * are, so a bound above the real depth) fails as Lua 5.2 fails a too deep match; about 1 MB of
 * stack at most. string.find's plain search does not recurse and is not bounded. */
#define PATTERN_MAX_DEPTH 10000

/* Raises Lua 5.2's error if the pattern (argument 2) may recurse deeper than allowed. */
static void check_pattern(lua_State *L)
{
    /* Not a string: Lua's function reports the bad argument, or it is a number, whose text is
     * far shorter than the limit; nor can a pattern shorter than the limit reach it. */
    if (lua_type(L, 2) != LUA_TSTRING || lua_objlen(L, 2) <= PATTERN_MAX_DEPTH)
        return;
    size_t n;
    const char *p = lua_tolstring(L, 2, &n);
    size_t depth = 0;
    for (size_t i = 0; i < n; i++)
        depth += p[i] == '?' || p[i] == '*' || p[i] == '+' || p[i] == '-' || p[i] == '(' ||
                 p[i] == ')';
    if (depth > PATTERN_MAX_DEPTH)
        luaL_error(L, "pattern too complex");
}

/* string.match, gmatch or gsub, checked, then Lua's own (wrap). */
static int l_pattern_guard(lua_State *L)
{
    check_pattern(L);
    return original(L)(L);
}

/* string.find, whose fourth argument may ask for a plain search. */
static int l_find_guard(lua_State *L)
{
    if (!lua_toboolean(L, 4))
        check_pattern(L);
    return original(L)(L);
}

/* string.rep (Lua's own, wrap) answers an empty string at once: Lua 5.1 appends it n times,
 * up to 2^31 - 1 times, seconds of C work that SCRIPT KILL cannot interrupt. */
static int l_rep_guard(lua_State *L)
{
    if (lua_isstring(L, 1) && lua_objlen(L, 1) == 0 && lua_isnumber(L, 2)) {
        lua_pushliteral(L, "");
        return 1;
    }
    return original(L)(L);
}

/* Run once per state, after open_libs: the wrappers above that keep a script within what the
 * process can survive and SCRIPT KILL can stop. */
int guard_libs(lua_State *L)
{
    wrap_lib_fn(L, LUA_COLIBNAME, "create", l_coroutine_new);
    wrap_lib_fn(L, LUA_COLIBNAME, "wrap", l_coroutine_new);
    wrap_lib_fn(L, LUA_STRLIBNAME, "find", l_find_guard);
    wrap_lib_fn(L, LUA_STRLIBNAME, "match", l_pattern_guard);
    wrap_lib_fn(L, LUA_STRLIBNAME, "gmatch", l_pattern_guard);
    wrap_lib_fn(L, LUA_STRLIBNAME, "gsub", l_pattern_guard);
    wrap_lib_fn(L, LUA_STRLIBNAME, "rep", l_rep_guard);
    return 0;
}

/* Busy runs. A script runs unhooked (a count hook would cost every VM instruction a countdown:
 * 7% more instructions per call of bench/gcra.lua). A watcher thread looks at every engine's
 * run_start, sleeping until the youngest running script would reach busy-reply-threshold (at
 * most BUSY_WATCH_NS while none runs); once a run passes it, the watcher names the run
 * (busy_start) and signals its thread, whose handler installs busy_hook with a count of
 * BUSY_CHECK_COUNT if that run is still the one running, as a kill does. From then on the run
 * counts itself in script_busy_runs, which every thread's dispatcher reads, and calls busy_serve
 * every BUSY_SERVE_EVERY_NS: the network layer answers this thread's other connections there
 * (BUSY, SCRIPT KILL, SHUTDOWN NOSAVE, the few commands Redis allows), since its loop cannot
 * run until the script returns. The serve function runs on this thread inside the hook: it must
 * not run Lua, nor a command that takes shards or the thread's per-command scratch (the
 * dispatcher's restricted mode sees to that). A kill replaces this hook with kill_hook; that run
 * then ends at its next instruction. */
#define BUSY_CHECK_COUNT 10000
#define BUSY_SERVE_EVERY_NS (2 * 1000000)
#define BUSY_WATCH_NS (100 * 1000000)
#define BUSY_DEFAULT_MS 5000

_Atomic int script_busy_runs;
_Atomic int script_busy_unbounded;
static const int64_t *busy_threshold_ms;
static void (*busy_serve)(void *ud);
static void *busy_serve_ud;

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond;
static pthread_t watch_thread;
static int watch_running, watch_stop, watch_wanted;
/* Set once the watcher needs no start (started, or not wanted): the first script starts it, so
 * a daemon that runs no script has no such thread. */
static _Atomic int watch_settled = 1;

static void *busy_watcher(void *arg);

static void watch_start(void)
{
    pthread_mutex_lock(&watch_lock);
    if (watch_wanted && !watch_running) {
        watch_stop = 0;
        if (pthread_create(&watch_thread, NULL, busy_watcher, NULL) == 0) {
            pthread_setname_np(watch_thread, "rlimitd-busy");
            watch_running = 1;
        }
    }
    atomic_store(&watch_settled, 1);
    pthread_mutex_unlock(&watch_lock);
}

static int64_t threshold_ns(void)
{
    int64_t ms = busy_threshold_ms != NULL ? __atomic_load_n(busy_threshold_ms, __ATOMIC_RELAXED)
                                           : BUSY_DEFAULT_MS;
    return ms * 1000000;
}

static void busy_check(struct engine *e)
{
    if (e->cur_start == 0)
        return;
    int64_t now = clock_mono_ns();
    if (!e->busy) {
        if (now - e->cur_start < threshold_ns())
            return;
        e->busy = e->nkeys == 0 ? 2 : 1;
        if (e->nkeys == 0)
            atomic_fetch_add(&script_busy_unbounded, 1);
        atomic_fetch_add(&script_busy_runs, 1);
    }
    if (busy_serve != NULL && now - e->last_serve >= BUSY_SERVE_EVERY_NS) {
        e->last_serve = now;
        busy_serve(busy_serve_ud);
    }
}

static void busy_hook(lua_State *L, lua_Debug *ar)
{
    struct engine *e = engine_of(L);
    if (killed(e)) { /* the kill's signal has not been handled yet */
        lua_sethook(L, kill_hook, LUA_MASKCOUNT, 1);
        kill_hook(L, ar);
    }
    busy_check(e);
}

/* ThreadSanitizer holds an asynchronous signal back until its thread enters a function TSan
 * intercepts, which a pure-Lua loop never does: KILL_SIGNAL would never arrive. So a TSan
 * build starts every run with busy_hook already in place, checking every BUSY_CHECK_COUNT
 * instructions for what the signal would have announced; other builds keep runs unhooked. */
#if defined(__SANITIZE_THREAD__)
#define RUN_HOOK busy_hook, LUA_MASKCOUNT, BUSY_CHECK_COUNT
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RUN_HOOK busy_hook, LUA_MASKCOUNT, BUSY_CHECK_COUNT
#endif
#endif
#ifndef RUN_HOOK
#define RUN_HOOK NULL, 0, 0
#endif

void busy_watch_start(lua_State *L, struct engine *e)
{
    e->busy = 0;
    e->last_serve = 0;
    lua_sethook(L, RUN_HOOK); /* replaces a kill's or busy hook from an earlier run */
    if (!atomic_load_explicit(&watch_settled, memory_order_relaxed))
        watch_start();
}

void busy_watch_end(struct engine *e)
{
    if (e->busy) {
        if (e->busy == 2)
            atomic_fetch_sub(&script_busy_unbounded, 1);
        e->busy = 0;
        atomic_fetch_sub(&script_busy_runs, 1);
    }
}

static void *busy_watcher(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&watch_lock);
    while (!watch_stop) {
        int64_t now = clock_mono_ns(), limit = threshold_ns();
        int64_t next = now + BUSY_WATCH_NS;
        pthread_mutex_lock(&engines_lock);
        for (struct engine *e = engines; e != NULL; e = e->next) {
            int64_t start = atomic_load(&e->run_start);
            if (start == 0 || e->thread_gone)
                continue;
            if (now - start < limit) {
                if (start + limit < next)
                    next = start + limit;
            } else if (atomic_load(&e->busy_start) != start) {
                atomic_store(&e->busy_start, start);
                pthread_kill(e->thread, KILL_SIGNAL);
            }
        }
        pthread_mutex_unlock(&engines_lock);
        struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
        pthread_cond_timedwait(&watch_cond, &watch_lock, &ts);
    }
    pthread_mutex_unlock(&watch_lock);
    return NULL;
}

void script_busy_init(const int64_t *threshold_ms, void (*serve)(void *ud), void *ud)
{
    pthread_mutex_lock(&watch_lock);
    if (watch_running) { /* a new setting, or the end: the old watcher goes first */
        watch_stop = 1;
        pthread_cond_signal(&watch_cond);
        pthread_mutex_unlock(&watch_lock);
        pthread_join(watch_thread, NULL);
        pthread_mutex_lock(&watch_lock);
        watch_running = 0;
    }
    busy_threshold_ms = threshold_ms;
    busy_serve = serve;
    busy_serve_ud = ud;
    watch_wanted = 0;
#ifndef RLIMITD_FUZZ_SCRIPT_BUDGET /* the fuzz build's budget hook must stay in place */
    if (threshold_ms != NULL) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&watch_cond, &ca);
        pthread_condattr_destroy(&ca);
        watch_wanted = 1;
    }
#endif
    atomic_store(&watch_settled, !watch_wanted);
    pthread_mutex_unlock(&watch_lock);
}

/* The one signal of both: a kill wins over the busy watcher's request. */
static void on_kill_signal(int signum)
{
    (void)signum;
    struct engine *e = tl_engine;
    if (e == NULL || e->cur_start == 0)
        return;
    if (killed(e))
        lua_sethook(e->L, kill_hook, LUA_MASKCOUNT, 1);
    else if (atomic_load(&e->busy_start) == e->cur_start && lua_gethook(e->L) == NULL)
        lua_sethook(e->L, busy_hook, LUA_MASKCOUNT, BUSY_CHECK_COUNT);
}

void install_kill_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_kill_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(KILL_SIGNAL, &sa, NULL);
}

#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
/* Fuzz builds only (tests/fuzz/meson.build defines the budget): the fuzz targets are one thread
 * and cannot send SCRIPT KILL, so every run may spend about script_fuzz_budget VM instructions,
 * charged FUZZ_STEP per count event and FUZZ_CALL_COST per call (a coroutine starts with a
 * fresh count: each one costs at least its first call). A spent budget kills the run as SCRIPT
 * KILL does, so the fuzzer drives the kill path too, at any instruction or call (a sort
 * comparator, a gsub callback, a metamethod). Once the run's remaining budget falls to
 * script_fuzz_flush_at, the hook flushes the script cache, as a SCRIPT FLUSH from another
 * connection does at that instant. The daemon's build installs no hook here: scripts run
 * unhooked until a kill. */
#define FUZZ_STEP 100
#define FUZZ_CALL_COST 20
long long script_fuzz_budget = RLIMITD_FUZZ_SCRIPT_BUDGET;
long long script_fuzz_flush_at = -1;
static __thread long long fuzz_budget;

static void fuzz_budget_hook(lua_State *L, lua_Debug *ar)
{
    struct engine *e = engine_of(L);
    fuzz_budget -= ar->event == LUA_HOOKCOUNT ? FUZZ_STEP : FUZZ_CALL_COST;
    if (script_fuzz_flush_at >= 0 && fuzz_budget <= script_fuzz_flush_at) {
        script_fuzz_flush_at = -1;
        script_cache_flush();
    }
    if (fuzz_budget >= 0 && !killed(e))
        return;
    atomic_store(&e->kill_start, e->cur_start);
    lua_sethook(L, kill_hook, LUA_MASKCOUNT, 1); /* this thread (coroutine) raises from now on */
    kill_hook(L, ar);
}

/* Gives the run about to start its budget (script_run). */
void fuzz_budget_start(lua_State *L)
{
    fuzz_budget = script_fuzz_budget;
    lua_sethook(L, fuzz_budget_hook, LUA_MASKCOUNT | LUA_MASKCALL, FUZZ_STEP);
}
#endif

void script_stop_for_rerun(void)
{
    struct engine *e = tl_engine;
    if (e == NULL || e->cur_start == 0)
        return;
    atomic_store(&e->kill_start, e->cur_start);
    lua_sethook(e->L, kill_hook, LUA_MASKCOUNT, 1);
}

void script_note_write(void)
{
    if (tl_engine != NULL)
        atomic_store_explicit(&tl_engine->wrote, 1, memory_order_relaxed);
}

int script_kill(int64_t older_than_ns, int force)
{
    int64_t now = clock_mono_ns();
    int killed = 0, unkillable = 0;
    pthread_mutex_lock(&engines_lock);
    for (struct engine *e = engines; e != NULL; e = e->next) {
        int64_t start = atomic_load(&e->run_start);
        if (start == 0 || now - start < older_than_ns || atomic_load(&e->kill_start) == start)
            continue;
        if (atomic_load(&e->wrote) && !force) {
            unkillable++;
        } else {
            atomic_store(&e->kill_start, start);
            if (!e->thread_gone)
                pthread_kill(e->thread, KILL_SIGNAL);
            killed++;
        }
    }
    pthread_mutex_unlock(&engines_lock);
    return killed > 0 ? SCRIPT_KILLED : unkillable > 0 ? SCRIPT_UNKILLABLE : SCRIPT_NOTBUSY;
}

int script_busy(int64_t older_than_ns)
{
    int64_t now = clock_mono_ns();
    int busy = 0;
    pthread_mutex_lock(&engines_lock);
    for (struct engine *e = engines; e != NULL; e = e->next) {
        int64_t start = atomic_load(&e->run_start);
        if (start != 0 && now - start >= older_than_ns)
            busy = 1;
    }
    pthread_mutex_unlock(&engines_lock);
    return busy;
}
