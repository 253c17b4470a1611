/* cmd_notify.h - keyspace notifications (COMMANDS.md "Keyspace notifications"): what a write
 * did to a key, published over Pub/Sub as Redis does when notify-keyspace-events asks for it.
 *
 * Handlers raise their events after the write, in Redis 7.0's order, with the shard locks
 * still held (pubsub.h allows that: its locks come last). What happens inside the store
 * (a key created, expired, evicted) comes up through the keyspace's event hook
 * (keyspace.h, ks_set_event_hook), which cmd_notify_attach registers. */
#ifndef RLIMITD_CMD_NOTIFY_H
#define RLIMITD_CMD_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"

/* The NOTIFY_* word events are tested against: the running configuration's
 * notify-keyspace-events (a zero word before cmd_notify_attach and after cmd_notify_detach). */
extern const int64_t *cmd_notify_classes;

/* Reads notify-keyspace-events from conf (a live field: CONFIG SET and SIGHUP change it in
 * place) and registers the store's events on ks. Called by cmd_env_init before any thread runs;
 * one configuration per process. */
void cmd_notify_attach(struct keyspace *ks, const struct conf *conf);
void cmd_notify_detach(struct keyspace *ks);

/* Publishes `event` for key: on __keyspace@<db>__:<key> (K) with the event as the message, on
 * __keyevent@<db>__:<event> (E) with the key as the message. */
void notify_publish(int type, const char *event, const char *key, size_t klen, int dbid);

/* Redis's notifyKeyspaceEvent: one relaxed load and one test when type is not enabled. */
static inline void notify_keyspace_event(int type, const char *event, const char *key,
                                         size_t klen, int dbid)
{
    if (__builtin_expect((__atomic_load_n(cmd_notify_classes, __ATOMIC_RELAXED) & type) != 0, 0))
        notify_publish(type, event, key, klen, dbid);
}

/* The event for one of a command's keys, in db 0 (the only one). */
static inline void notify_key(int type, const char *event, const struct ks_key *k)
{
    notify_keyspace_event(type, event, k->p, k->len, 0);
}

/* Redis's keymiss (class m): a read command looked a key up and found none (an expired key
 * counts as none, after its expired event). Write commands' lookups raise nothing, as in
 * Redis, and neither does OBJECT's. */
static inline void notify_keymiss(const struct ks_key *k)
{
    notify_key(NOTIFY_KEY_MISS, "keymiss", k);
}

#endif
