/* conf_kevents.h - the value of notify-keyspace-events (conf_kevents.c), for conf.c. */
#ifndef RLIMITD_CONF_KEVENTS_H
#define RLIMITD_CONF_KEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/conf.h" /* NOTIFY_* */

/* Redis 7.0's sentence for a letter that names no class (CONFIG SET adds its own frame). */
#define CONF_KEVENTS_BAD "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."

/* The NOTIFY_* classes (conf.h) a string of letters names, or -1 if one letter names none.
 * Letters may repeat and come in any order; "" is 0. */
int64_t conf_kevents_parse(const char *v);

/* CONFIG GET's form, Redis's: "A" when every class of A is set, else the class letters in the
 * order g $ l s h z x e t d n; then K, E, m; then rlimitd's r. (As on Redis, n is not shown
 * beside A.) */
void conf_kevents_format(int64_t flags, char *buf, size_t len);

#endif
