/* snap.h - the snapshot file (format in docs/SNAPSHOT.md): encoding records, writing a
 * file crash-safely (temporary file, fsync, rename, directory fsync), and reading one back with
 * every byte checked. Knows nothing of threads or timers: persist.c decides when to save. */
#ifndef RLIMITD_SNAP_H
#define RLIMITD_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/keyspace.h"
#include "rlimitd/buf.h"

#define SNAP_MAGIC "RLIMSNAP"
#define SNAP_VERSION 5u     /* written; 2 added sorted set records, 3 hash records, 4 lists,
                             * 5 lease sets (and GCRA TATs in microseconds, negative) */
#define SNAP_VERSION_MIN 1u /* oldest still read (no sorted sets) */

/* Appends the encoding of r to out (r comes from ks_dump_shard). */
void snap_encode(struct rbuf *out, const struct ks_record *r);

struct snap_writer;

/* Creates a temporary file next to dir/file. Returns NULL with err set ("path: reason"). */
struct snap_writer *snap_writer_open(const char *dir, const char *file, int64_t created_ns,
                                     char *err, size_t errlen);
/* Appends count encoded records. Returns 0, or -1 with err set (e.g. the disk is full). */
int snap_writer_write(struct snap_writer *w, const void *p, size_t len, uint64_t count,
                      char *err, size_t errlen);
/* Finishes the file, fsyncs it, renames it over dir/file and fsyncs dir. Frees w. On error the
 * temporary file is removed, the old snapshot is untouched, and err is set. */
int snap_writer_commit(struct snap_writer *w, char *err, size_t errlen);
/* Drops the temporary file. Frees w. */
void snap_writer_abort(struct snap_writer *w);

struct snap_info {
    uint32_t version;
    int64_t created_ns;
    uint64_t records;              /* in the file */
    uint64_t by_type[KS_LEASE + 1]; /* records per enum ks_type */
    uint64_t leases;               /* leases in the lease-set records */
    uint64_t timestamps;           /* window-log attempts in the file */
    uint64_t zmembers;             /* sorted-set members in the file */
    uint64_t bytes;                /* file size */
};

/* Called for every record of a file being read; returns 0 to go on, -1 to stop with an error. */
typedef int (*snap_record_fn)(void *ud, const struct ks_record *r);

/* Reads and verifies path completely before the first callback (magic, version, checksum,
 * structure), then calls cb for each record (cb may be NULL to only verify). Returns 0, 1 if
 * the file does not exist, or -1 with err = "path: offset N: reason". Never modifies the file. */
int snap_read(const char *path, snap_record_fn cb, void *ud, struct snap_info *info, char *err,
              size_t errlen);

#endif
