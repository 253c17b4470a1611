/* cmd_pubsub.c - Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
 * SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB (COMMANDS.md "Pub/Sub"). The
 * subscription tables and delivery are src/pubsub's; this file gives them Redis 7.0's replies
 * and keeps the session's subscribed state (SESSION_PUBSUB: the RESP2 gate in cmd_dispatch.c,
 * PING's reply, the pubsub class of client-output-buffer-limit). */
#include "cmd_internal.h"

#include <stdio.h>
#include <string.h>

#include "rlimitd/conf.h"
#include "rlimitd/pubsub.h"
#include "rlimitd/util.h"

static struct pubsub_client *client_of(struct session *s)
{
    if (s->pubsub == NULL)
        __atomic_store_n(&s->pubsub, pubsub_client_new(s->conn, s->conn_out, &s->resp),
                         __ATOMIC_RELEASE);
    return s->pubsub;
}

/* What a (un)subscribe reply counts: channels and patterns together, shard channels apart. */
static int64_t count_for(const struct pubsub_client *c, enum pubsub_kind k)
{
    if (k == PUBSUB_SHARD)
        return pubsub_count(c, PUBSUB_SHARD);
    return (int64_t)pubsub_count(c, PUBSUB_CHANNEL) + pubsub_count(c, PUBSUB_PATTERN);
}

/* One (un)subscribe notification: [what, name or null, count], a push in RESP3. */
static void frame(struct rbuf *out, const char *what, const char *name, size_t len,
                  int64_t count)
{
    reply_push(out, 3);
    reply_bulk_cstr(out, what);
    if (name != NULL)
        reply_bulk(out, name, len);
    else
        reply_nil(out);
    reply_int(out, count);
}

/* The session's subscribed state follows its subscriptions: in it (any subscription), the
 * connection is of the pubsub class and, in RESP2, limited to the subscribe commands. */
static void update_state(struct session *s)
{
    const struct pubsub_client *c = s->pubsub;
    uint32_t n = 0;
    for (int k = 0; k < PUBSUB_KINDS; k++)
        n += pubsub_count(c, (enum pubsub_kind)k);
    if (n > 0) {
        __atomic_fetch_or(&s->flags, SESSION_PUBSUB, __ATOMIC_RELAXED);
        s->obuf_class = CONF_OBUF_PUBSUB;
    } else {
        __atomic_fetch_and(&s->flags, ~(unsigned)SESSION_PUBSUB, __ATOMIC_RELAXED);
        s->obuf_class = CONF_OBUF_NORMAL;
    }
}

static void subscribe(struct cmd_ctx *x, enum pubsub_kind k, const char *what)
{
    struct pubsub_client *c = client_of(x->s);
    for (int i = 1; i < x->argc; i++) {
        pubsub_subscribe(c, k, x->argv[i], x->lens[i]);
        frame(x->out, what, x->argv[i], x->lens[i], count_for(c, k));
    }
    update_state(x->s);
}

static void unsubscribe(struct cmd_ctx *x, enum pubsub_kind k, const char *what)
{
    /* Messages published before this command reach the connection before its replies. */
    pubsub_drain();
    struct pubsub_client *c = client_of(x->s);
    if (x->argc > 1) {
        for (int i = 1; i < x->argc; i++) {
            pubsub_unsubscribe(c, k, x->argv[i], x->lens[i]);
            frame(x->out, what, x->argv[i], x->lens[i], count_for(c, k));
        }
    } else {
        /* Every subscription of the kind, oldest first; a notification even for none. */
        const char *name;
        size_t len;
        int any = 0;
        while (pubsub_first(c, k, &name, &len)) {
            /* The name is freed by the unsubscribe: the reply (with the count after it) first. */
            frame(x->out, what, name, len, count_for(c, k) - 1);
            pubsub_unsubscribe(c, k, name, len);
            any = 1;
        }
        if (!any)
            frame(x->out, what, NULL, 0, count_for(c, k));
    }
    update_state(x->s);
}

static void cmd_subscribe(struct cmd_ctx *x)
{
    subscribe(x, PUBSUB_CHANNEL, "subscribe");
}

static void cmd_psubscribe(struct cmd_ctx *x)
{
    subscribe(x, PUBSUB_PATTERN, "psubscribe");
}

static void cmd_ssubscribe(struct cmd_ctx *x)
{
    /* Redis refuses it inside a transaction (EXEC runs its commands as a client that may not
     * block), unlike SUBSCRIBE and PSUBSCRIBE, which it lets through for compatibility. */
    if (x->all_locked) {
        reply_error(x->out, "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
        return;
    }
    subscribe(x, PUBSUB_SHARD, "ssubscribe");
}

static void cmd_unsubscribe(struct cmd_ctx *x)
{
    unsubscribe(x, PUBSUB_CHANNEL, "unsubscribe");
}

static void cmd_punsubscribe(struct cmd_ctx *x)
{
    unsubscribe(x, PUBSUB_PATTERN, "punsubscribe");
}

static void cmd_sunsubscribe(struct cmd_ctx *x)
{
    unsubscribe(x, PUBSUB_SHARD, "sunsubscribe");
}

static void cmd_publish(struct cmd_ctx *x)
{
    reply_int(x->out, pubsub_publish(PUBSUB_CHANNEL, x->argv[1], x->lens[1], x->argv[2],
                                     x->lens[2]));
}

static void cmd_spublish(struct cmd_ctx *x)
{
    reply_int(x->out, pubsub_publish(PUBSUB_SHARD, x->argv[1], x->lens[1], x->argv[2],
                                     x->lens[2]));
}

void session_pubsub_reset(struct session *s)
{
    struct pubsub_client *c = s->pubsub;
    if (c == NULL)
        return;
    pubsub_drain();
    const char *name;
    size_t len;
    for (int k = 0; k < PUBSUB_KINDS; k++)
        while (pubsub_first(c, (enum pubsub_kind)k, &name, &len))
            pubsub_unsubscribe(c, (enum pubsub_kind)k, name, len);
    update_state(s);
}

/* ---- PUBSUB ---- */

static const char *const pubsub_help[] = {
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
    NULL,
};

static void add_name(void *ud, const char *name, size_t len)
{
    reply_bulk(ud, name, len);
}

/* CHANNELS / SHARDCHANNELS: the array's length is known only after the walk, so the names are
 * collected aside and copied after the header. */
static void channel_list(struct cmd_ctx *x, enum pubsub_kind k)
{
    struct rbuf names;
    rbuf_init(&names);
    names.resp = x->out->resp;
    const char *pat = x->argc == 3 ? x->argv[2] : NULL;
    size_t plen = x->argc == 3 ? x->lens[2] : 0;
    int64_t n = pubsub_names(k, pat, plen, add_name, &names);
    reply_array(x->out, n);
    rbuf_append(x->out, names.p, names.len);
    rbuf_free(&names);
}

static void numsub(struct cmd_ctx *x, enum pubsub_kind k)
{
    reply_array(x->out, (int64_t)(x->argc - 2) * 2); /* flat in RESP3 too, as Redis */
    for (int i = 2; i < x->argc; i++) {
        reply_bulk(x->out, x->argv[i], x->lens[i]);
        reply_int(x->out, pubsub_numsub(k, x->argv[i], x->lens[i]));
    }
}

/* PUBSUB's subcommands with Redis's arities: what the RESP2 subscribed state's gate checks
 * before refusing by the full name. */
static const struct {
    const char *name;
    int arity;
} pubsub_subs[] = {{"channels", -2}, {"help", 2},           {"numpat", 2},
                   {"numsub", -2},   {"shardchannels", -2}, {"shardnumsub", -2}};

const char *pubsub_subcmd_error(int argc, char **argv, const size_t *lens, char *buf,
                                size_t cap)
{
    for (size_t i = 0; i < sizeof(pubsub_subs) / sizeof(pubsub_subs[0]); i++) {
        if (!util_eq_nocase(argv[1], lens[1], pubsub_subs[i].name))
            continue;
        int a = pubsub_subs[i].arity;
        if (a >= 0 ? argc == a : argc >= -a)
            return NULL;
        snprintf(buf, cap, "ERR wrong number of arguments for 'pubsub|%s' command",
                 pubsub_subs[i].name);
        return buf;
    }
    snprintf(buf, cap, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
             (int)(lens[1] > 128 ? 128 : lens[1]), argv[1]);
    return buf;
}

static void cmd_pubsub(struct cmd_ctx *x)
{
    int argc = x->argc;
    if (arg_is(x, 1, "HELP")) {
        if (argc != 2)
            reply_subcmd_arity(x, "pubsub", "help");
        else
            reply_help_lines(x->out, pubsub_help);
    } else if (arg_is(x, 1, "CHANNELS") || arg_is(x, 1, "SHARDCHANNELS")) {
        if (argc > 3)
            reply_errorf(x->out, "ERR unknown subcommand or wrong number of arguments for "
                                 "'%.128s'. Try PUBSUB HELP.", x->argv[1]);
        else
            channel_list(x, arg_is(x, 1, "CHANNELS") ? PUBSUB_CHANNEL : PUBSUB_SHARD);
    } else if (arg_is(x, 1, "NUMSUB")) {
        numsub(x, PUBSUB_CHANNEL);
    } else if (arg_is(x, 1, "SHARDNUMSUB")) {
        numsub(x, PUBSUB_SHARD);
    } else if (arg_is(x, 1, "NUMPAT")) {
        if (argc != 2)
            reply_subcmd_arity(x, "pubsub", "numpat");
        else
            reply_int(x->out, pubsub_names(PUBSUB_PATTERN, NULL, 0, NULL, NULL));
    } else {
        reply_subcmd_unknown(x, "PUBSUB");
    }
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

#define SUBSCRIBING (CMD_PUBSUB | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_PUBSUB_OK)

const struct cmd_def cmd_pubsub_table[] = {
    {"subscribe", -2, SUBSCRIBING, 0, 0, 0, "pubsub slow", cmd_subscribe,
     {.summary = "Listens for messages published to channels.", .since = "2.0.0",
      .group = "pubsub", .complexity = "O(N) where N is the number of channels to subscribe to.",
      .args = "*channel:string"}},
    {"unsubscribe", -1, SUBSCRIBING, 0, 0, 0, "pubsub slow", cmd_unsubscribe,
     {.summary = "Stops listening to messages posted to channels.", .since = "2.0.0",
      .group = "pubsub", .complexity = "O(N) where N is the number of clients already "
                                       "subscribed to a channel.",
      .args = "?*channel:string"}},
    {"psubscribe", -2, SUBSCRIBING, 0, 0, 0, "pubsub slow", cmd_psubscribe,
     {.summary = "Listens for messages published to channels that match one or more patterns.",
      .since = "2.0.0", .group = "pubsub",
      .complexity = "O(N) where N is the number of patterns the client is already subscribed "
                    "to.",
      .args = "*pattern:pattern"}},
    {"punsubscribe", -1, SUBSCRIBING, 0, 0, 0, "pubsub slow", cmd_punsubscribe,
     {.summary = "Stops listening to messages published to channels that match one or more "
                 "patterns.",
      .since = "2.0.0", .group = "pubsub",
      .complexity = "O(N+M) where N is the number of patterns the client is already subscribed "
                    "and M is the number of total patterns subscribed in the system (by any "
                    "client).",
      .args = "?*pattern:pattern"}},
    {"ssubscribe", -2, SUBSCRIBING, 1, -1, 1, "pubsub slow", cmd_ssubscribe,
     {.summary = "Listens for messages published to shard channels.", .since = "7.0.0",
      .group = "pubsub",
      .complexity = "O(N) where N is the number of shard channels to subscribe to.",
      .args = "*shardchannel:key", .keyflags = "not_key"}},
    {"sunsubscribe", -1, SUBSCRIBING, 1, -1, 1, "pubsub slow", cmd_sunsubscribe,
     {.summary = "Stops listening to messages posted to shard channels.", .since = "7.0.0",
      .group = "pubsub",
      .complexity = "O(N) where N is the number of clients already subscribed to a shard "
                    "channel.",
      .args = "?*shardchannel:key", .keyflags = "not_key"}},
    {"publish", 3, CMD_PUBSUB | CMD_LOADING | CMD_STALE | CMD_FAST, 0, 0, 0, "pubsub fast", cmd_publish,
     {.summary = "Posts a message to a channel.", .since = "2.0.0", .group = "pubsub",
      .complexity = "O(N+M) where N is the number of clients subscribed to the receiving "
                    "channel and M is the total number of subscribed patterns (by any client).",
      .args = "channel:string message:string"}},
    {"spublish", 3, CMD_PUBSUB | CMD_LOADING | CMD_STALE | CMD_FAST, 1, 1, 1, "pubsub fast", cmd_spublish,
     {.summary = "Post a message to a shard channel", .since = "7.0.0", .group = "pubsub",
      .complexity = "O(N) where N is the number of clients subscribed to the receiving shard "
                    "channel.",
      .args = "shardchannel:key message:string", .keyflags = "not_key"}},
    {"pubsub", -2, 0, 0, 0, 0, "slow", cmd_pubsub,
     {.summary = "A container for Pub/Sub commands.", .since = "2.8.0", .group = "pubsub",
      .complexity = "Depends on subcommand.", .extra = CMD_SHOW_CONTAINER}},
};
const int cmd_pubsub_count = (int)(sizeof(cmd_pubsub_table) / sizeof(cmd_pubsub_table[0]));
