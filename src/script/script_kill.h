/* script_kill.h - stopping a script: SCRIPT KILL and BUSY, the signal and hooks that stop a
 * run, the pcall and xpcall a kill cannot be caught by, and the guards on library functions
 * a kill could not interrupt (script_kill.c). Private to src/script. */
#ifndef RLIMITD_SCRIPT_KILL_H
#define RLIMITD_SCRIPT_KILL_H

#include <lua.h>

/* pcall and xpcall as scripts see them (the globals open_libs sets). */
int l_pcall_global(lua_State *L);
int l_xpcall_global(lua_State *L);
/* Run once per state, after open_libs (a lua_CFunction, called protected). */
int guard_libs(lua_State *L);
/* Installs the handler of the signal SCRIPT KILL sends (once per process). */
void install_kill_signal(void);
struct engine;
/* The run about to start gets the count hook that notices when it passes
 * busy-reply-threshold (and serves its thread from then on); busy_watch_end, after the run,
 * takes it out of script_busy_runs if it was counted there. */
void busy_watch_start(lua_State *L, struct engine *e);
void busy_watch_end(struct engine *e);
#ifdef RLIMITD_FUZZ_SCRIPT_BUDGET
/* Fuzz builds: gives the run about to start its instruction budget. */
void fuzz_budget_start(lua_State *L);
#endif

#endif
