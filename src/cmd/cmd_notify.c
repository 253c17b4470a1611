/* cmd_notify.c - keyspace notifications published over Pub/Sub (cmd_notify.h). */
#include "cmd_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/pubsub.h"

static const int64_t no_classes = 0;
const int64_t *cmd_notify_classes = &no_classes;

/* The classes of the store's events (keyspace.h enum ks_event), in its order. */
static const int64_t store_classes[KS_EVENTS] = {
    [KS_EVENT_NEW] = NOTIFY_NEW,
    [KS_EVENT_EXPIRED] = NOTIFY_EXPIRED,
    [KS_EVENT_EVICTED] = NOTIFY_EVICTED,
};
static const char *const store_names[KS_EVENTS] = {
    [KS_EVENT_NEW] = "new",
    [KS_EVENT_EXPIRED] = "expired",
    [KS_EVENT_EVICTED] = "evicted",
};

static void store_event(void *ud, enum ks_event ev, const char *key, size_t klen)
{
    (void)ud;
    notify_publish((int)store_classes[ev], store_names[ev], key, klen, 0);
}

void cmd_notify_attach(struct keyspace *ks, const struct conf *conf)
{
    cmd_notify_classes = &conf->notify_keyspace_events;
    if (ks != NULL)
        ks_set_event_hook(ks, store_event, NULL, &conf->notify_keyspace_events, store_classes);
}

void cmd_notify_detach(struct keyspace *ks)
{
    cmd_notify_classes = &no_classes;
    if (ks != NULL)
        ks_set_event_hook(ks, NULL, NULL, NULL, NULL);
}

/* Publishes msg on prefix<db>__:<name>; the channel is built on the stack unless the name is
 * long (a key may be as long as proto-max-bulk-len). */
static void publish_on(const char *prefix, int dbid, const char *name, size_t nlen,
                       const char *msg, size_t mlen)
{
    char head[48];
    int hl = snprintf(head, sizeof head, "%s%d__:", prefix, dbid);
    char small[256];
    size_t clen = (size_t)hl + nlen;
    char *chan = clen <= sizeof small ? small : xmalloc(clen);
    memcpy(chan, head, (size_t)hl);
    memcpy(chan + hl, name, nlen);
    pubsub_publish(PUBSUB_CHANNEL, chan, clen, msg, mlen);
    if (chan != small)
        free(chan);
}

void notify_publish(int type, const char *event, const char *key, size_t klen, int dbid)
{
    int64_t classes = __atomic_load_n(cmd_notify_classes, __ATOMIC_RELAXED);
    if (!(classes & type))
        return;
    size_t elen = strlen(event);
    if (classes & NOTIFY_KEYSPACE)
        publish_on("__keyspace@", dbid, key, klen, event, elen);
    if (classes & NOTIFY_KEYEVENT)
        publish_on("__keyevent@", dbid, event, elen, key, klen);
}
