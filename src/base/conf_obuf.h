/* conf_obuf.h - the value of client-output-buffer-limit (conf_obuf.c), for conf.c. */
#ifndef RLIMITD_CONF_OBUF_H
#define RLIMITD_CONF_OBUF_H

#include <stddef.h>

#include "rlimitd/conf.h"

/* Applies a value to lim (only the classes it names). config_set: the words come as CONFIG
 * SET's one string, split at single spaces as Redis splits it; otherwise as a file line's or an
 * override's words. Returns 0, or -1 with *err set to Redis 7.0's sentence and lim unchanged. */
int conf_obuf_set(struct conf_obuf_limit lim[CONF_OBUF_CLASSES], int argc,
                  const char *const *argv, int config_set, const char **err);

/* CONFIG GET's form, Redis's: "normal H S SEC slave H S SEC pubsub H S SEC" in bytes. */
void conf_obuf_format(const struct conf_obuf_limit lim[CONF_OBUF_CLASSES], char *buf, size_t len);

#endif
