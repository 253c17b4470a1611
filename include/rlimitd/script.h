/* script.h - the script layer (src/script): Lua scripting for the EVAL family, internal to the
 * daemon.
 *
 * Two halves: the script cache (script_cache.c), one table of sources keyed by SHA1 shared by
 * every connection and thread under a mutex; and the Lua engine (script_run.c and the files it
 * uses), one lua_State per thread that runs scripts, each compiling a cached source on its
 * first use there (DESIGN.md "Scripting"). The commands themselves (EVAL, EVALSHA, SCRIPT) are in src/cmd/cmd_script.c,
 * above this layer: the engine reaches them only through the script_call_fn it is handed. */
#ifndef RLIMITD_SCRIPT_H
#define RLIMITD_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

struct rbuf;

/* ---- SHA1 and the shared cache (script_cache.c) ---- */

/* 40 lower-case hex digits and a NUL. */
void script_sha1hex(const void *p, size_t n, char out[41]);

/* Stores body under its SHA1 (written to sha). Idempotent. */
void script_cache_put(const char *body, size_t len, const char sha[41]);
/* A malloc'd copy of the body of sha (40 hex digits, any case), or NULL if not cached. */
char *script_cache_get(const char *sha, size_t shalen, size_t *len);
int script_cache_exists(const char *sha, size_t shalen);
/* Forgets every script's source; each thread's engine drops its compiled copies before its next
 * use (script_flush drops them at once). */
void script_cache_flush(void);
uint64_t script_cache_count(void);
uint64_t script_cache_bytes(void);
/* Bumped by every flush: engines compare it with the generation they compiled under. */
uint64_t script_cache_generation(void);
/* Frees the cache (process exit). */
void script_cache_free(void);

/* ---- shebang (script_cache.c) ---- */

#define SCRIPT_FLAG_NO_WRITES 0x1u
#define SCRIPT_FLAG_ALLOW_OOM 0x2u
#define SCRIPT_FLAG_ALLOW_STALE 0x4u
#define SCRIPT_FLAG_NO_CLUSTER 0x8u
#define SCRIPT_FLAG_CROSS_SLOT 0x10u
#define SCRIPT_FLAG_SHEBANG 0x100u /* the body starts with "#!lua" */

/* Parses a leading "#!lua [flags=a,b]" line. Returns 0 with *flags set, or -1 with Redis's
 * error text in err. */
int script_shebang(const char *body, size_t len, unsigned *flags, char *err, size_t errlen);

/* ---- the engine (script_run.c; kill and busy in script_kill.c) ---- */

/* Compiles body (sha its SHA1, lower case) in this thread's engine, keeping the function.
 * Returns its shebang flags (>= 0), or -1 with Redis's error text (bad shebang, "ERR Error
 * compiling script ...") written as an error reply to out. */
int script_compile(const char *sha, const char *body, size_t len, struct rbuf *out);
/* Bracket one command's use of this thread's engine, so that a SCRIPT FLUSH on another thread
 * leaves it alone meanwhile (EVAL: from its lookup to the end of its run). Pairs nest;
 * script_lookup, script_compile and script_run hold one each. */
void script_enter(void);
void script_leave(void);
/* SCRIPT FLUSH: script_cache_flush, and every engine no thread is inside drops its compiled
 * functions (and collects) now; one inside drops them at its next lookup. */
void script_flush(void);
/* The shebang flags of sha if this thread's engine holds it compiled (since the last SCRIPT
 * FLUSH), else -1. */
int script_lookup(const char *sha);
/* How redis.call and redis.pcall run a command: the caller of script_run provides it (the
 * command layer's dispatcher, which the engine does not know by name), with ud, for the length
 * of one run. It appends the command's reply, or Redis's error text, to out. */
typedef void (*script_call_fn)(void *ud, int argc, char **argv, const size_t *lens,
                               struct rbuf *out);
/* Runs the compiled sha with KEYS and ARGV; writes the script's reply to out. redis.call goes
 * through call(call_ud, ...). start_ns: CLOCK_MONOTONIC when the script's shards were marked
 * busy, its start for SCRIPT KILL and BUSY too. */
void script_run(const char *sha, script_call_fn call, void *call_ud, int64_t start_ns,
                char **keys, const size_t *klens, int nkeys, char **args, const size_t *alens,
                int nargs, struct rbuf *out);
/* Whether the reply of this thread's last script_run is an error a command the script ran (or
 * could not run) returned, and was counted there (INFO errorstats): its caller does not count
 * it again, as Redis 7.0 does not. */
int script_reply_counted(void);
/* Stops this thread's running script at its next instruction, as a kill does (no pcall
 * catches it): its caller runs it again and drops the reply of this run. */
void script_stop_for_rerun(void);
/* Records that the running script (this thread's) wrote: SCRIPT KILL then refuses it. */
void script_note_write(void);
/* SCRIPT KILL: asks every script running for at least older_than_ns to stop (at its next
 * kill check: a Lua error it cannot catch), except those that wrote, unless force (SHUTDOWN
 * NOSAVE). Returns what SCRIPT KILL answers. */
#define SCRIPT_KILLED 0
#define SCRIPT_NOTBUSY 1
#define SCRIPT_UNKILLABLE 2
int script_kill(int64_t older_than_ns, int force);
/* Whether a script has been running for at least older_than_ns. */
int script_busy(int64_t older_than_ns);
/* Runs, on any thread, that have gone past busy-reply-threshold and not ended yet (each
 * run's own thread counts it, from a count hook, DESIGN.md "Long scripts and BUSY"). The
 * dispatcher reads it before every command: nonzero, only the commands Redis allows while
 * busy run, besides commands whose keys no busy script can hold. */
extern _Atomic int script_busy_runs;
/* Of those, the runs that declared no keys: they may build key names themselves, so no key
 * is out of their reach. */
extern _Atomic int script_busy_unbounded;
/* Set once before any script runs: where busy-reply-threshold (ms) is read, and what a busy
 * run calls on its own thread every few ms to answer that thread's other connections
 * (serve(ud); NULL: nothing). */
void script_busy_init(const int64_t *threshold_ms, void (*serve)(void *ud), void *ud);
/* Bytes held by every thread's engine (INFO used_memory_lua), each engine's share current to
 * within 64 KiB and exactly after each script. */
uint64_t script_engine_memory(void);
/* The calling thread ends: its engine (if any) is no longer signalled by SCRIPT KILL. */
void script_thread_exit(void);
/* Frees every thread's engine (process exit, after the threads ended). */
void script_engine_free_all(void);

#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
/* Fuzz builds only (tests/fuzz): the VM instructions each run may spend before it is killed as
 * SCRIPT KILL kills it (RLIMITD_FUZZ_SCRIPT_BUDGET unless a target changes it), and the
 * remaining budget at which the running script's hook flushes the script cache once (-1: never;
 * it is reset to -1 when it fires). */
extern long long script_fuzz_budget;
extern long long script_fuzz_flush_at;
#endif

#endif
