/* persist.h - when and how snapshots are taken (SNAPSHOT.md): SAVE, BGSAVE, every save-interval
 * seconds when something changed, and at shutdown; loading at start; INFO persistence fields.
 *
 * A save walks the shards one at a time, and each shard in slices of 128 slots: under the
 * shard's lock a slice's live entries are encoded into memory (a few microseconds), the lock is
 * released, and once the shard is done its bytes are written out (src/store/ks_dump.c "Sliced dumps"
 * says why every key is still written exactly once). So a client waits at most one slice, and
 * memory overhead is one shard's encoding. BGSAVE runs that walk on its own thread, at
 * SCHED_IDLE and paced (persist.c, struct pacer), so that it takes CPU and memory bandwidth the
 * I/O threads leave. Loading into the empty keyspace of a start uses ks_bulk_add. */
#ifndef RLIMITD_PERSIST_H
#define RLIMITD_PERSIST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/buf.h"

struct persist;

/* conf's dir and dbfilename are read at each use, under conf_lock once persist_set_lock has
 * given one (the server does, before its threads start; loading runs before, alone). */
struct persist *persist_create(struct keyspace *ks, struct conf *conf);
void persist_set_lock(struct persist *p, pthread_mutex_t *conf_lock);
/* Waits for a background save, frees, sets *pp to NULL. */
void persist_destroy(struct persist **pp);

/* Loads dir/dbfilename into the (empty) keyspace before any thread runs, after removing the
 * temporary files of saves cut short by a crash (dbfilename.tmp-PID whose PID is not running).
 * A missing file is not an error. Returns 0, or -1 with err = "path: offset N: reason" (the file is left as it is). */
int persist_load(struct persist *p, char *err, size_t errlen);

/* SAVE (background 0: in the calling thread) or BGSAVE (background 1: on a new thread).
 * dirty_now is the server's count of writes so far. Returns 0, or -1 with err set (the text
 * after "ERR "): "Background save already in progress", or why the save failed. */
int persist_save(struct persist *p, int background, uint64_t dirty_now, char *err,
                 size_t errlen);

/* Called every 100 ms: starts a background save when save-interval has passed since the last
 * one and something changed. */
void persist_tick(struct persist *p, uint64_t dirty_now);

/* Waits for a running background save to finish. */
void persist_wait(struct persist *p);

/* Appends the INFO persistence fields after "loading:0" (rdb_*, aof_*). */
void persist_info(struct persist *p, struct rbuf *out, uint64_t dirty_now);

/* Unix time of the last successful save (or of the start, before any). */
int64_t persist_lastsave(struct persist *p);

#endif
