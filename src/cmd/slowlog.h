/* slowlog.h - SLOWLOG: the last slowlog-max-len commands slower than slowlog-log-slower-than
 * microseconds (internal to the command layer; depends on nothing of it). Thread safe. */
#ifndef RLIMITD_SLOWLOG_H
#define RLIMITD_SLOWLOG_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/buf.h"
#include "rlimitd/conf.h"

struct slowlog *slowlog_create(void);
void slowlog_destroy(struct slowlog **slp);

/* Records the command if dur_us >= conf->slowlog_log_slower_than (>= 0). Cheap when it does not:
 * one comparison, no lock. now is wall-clock ns at the command's start. Arguments are copied
 * the way Redis does (at most 32 arguments, each at most 128 bytes, with "... (N more ...)");
 * name and addr are the client's name and "ip:port" (NULL reads as ""). */
void slowlog_maybe_add(struct slowlog *sl, const struct conf *conf, int64_t now, int64_t dur_us,
                       int argc, char **argv, const size_t *lens, const char *name,
                       const char *addr);

/* Number of entries kept (SLOWLOG LEN), and emptying the log (SLOWLOG RESET). Entry ids keep
 * counting up across a reset, as in Redis. */
size_t slowlog_len(struct slowlog *sl);
void slowlog_reset(struct slowlog *sl);

/* SLOWLOG GET count's reply: the newest count entries (all when count < 0), newest first. */
void slowlog_reply(struct slowlog *sl, struct rbuf *out, int64_t count);

#endif
