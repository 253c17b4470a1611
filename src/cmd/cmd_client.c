/* cmd_client.c - CLIENT and its subcommands (COMMANDS.md "CLIENT"), and the connection names
 * HELLO SETNAME and RESET share with it. The registry itself (listing, killing) lies in the
 * network layer, reached through server_hooks.client_list / client_kill. */
#include "cmd_client.h"

#include <stdlib.h>
#include <string.h>

#include "rlimitd/alloc.h"
#include "rlimitd/util.h"

const char client_bad_name[] =
    "ERR Client names cannot contain spaces, newlines or special characters.";

int client_valid_name(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] < '!' || p[i] > '~')
            return 0;
    return 1;
}

void client_set_str(struct cmd_env *env, char **dst, const char *p, size_t len)
{
    char *v = NULL;
    if (len > 0) {
        v = xmalloc(len + 1);
        memcpy(v, p, len);
        v[len] = '\0';
    }
    pthread_mutex_lock(&env->names_lock);
    char *old = *dst;
    *dst = v;
    pthread_mutex_unlock(&env->names_lock);
    free(old);
}

static const char *const client_help[] = {
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [...]",
    "      Return clients of specified IDs only.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "GETNAME",
    "    Return the name of the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set client library name or version.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "HELP",
    "    Print this help.",
    NULL,
};

/* Redis's names of the client classes (getClientTypeByName), any case; -2 for none. */
static int type_by_name(const char *name)
{
    static const struct {
        const char *name;
        int type;
    } names[] = {
        {"normal", CLIENT_TYPE_NORMAL},   {"slave", CLIENT_TYPE_REPLICA},
        {"replica", CLIENT_TYPE_REPLICA}, {"pubsub", CLIENT_TYPE_PUBSUB},
        {"master", CLIENT_TYPE_MASTER},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(name, names[i].name) == 0)
            return names[i].type;
    return -2;
}

/* Redis formats the names in these errors with %s: they end at a NUL byte. */
static int parse_type(struct cmd_ctx *x, int i, int *type)
{
    *type = type_by_name(x->argv[i]);
    if (*type == -2) {
        reply_errorf(x->out, "ERR Unknown client type '%s'", x->argv[i]);
        return -1;
    }
    return 0;
}

/* CLIENT LIST's and CLIENT INFO's reply: the lines of the clients meeting m, as verbatim text. */
static void reply_clients(struct cmd_ctx *x, const struct client_match *m)
{
    const struct server_hooks *h = &x->env->hooks;
    struct rbuf tmp;
    rbuf_init(&tmp);
    if (h->client_list != NULL)
        h->client_list(h->ud, &tmp, m);
    reply_verbatim(x->out, "txt", tmp.p != NULL ? tmp.p : "", tmp.len);
    rbuf_free(&tmp);
}

/* CLIENT LIST [TYPE type] | [ID id ...], parsed as Redis 7.0 does: TYPE only as the single
 * option (exactly 4 arguments), ID with any number of ids, anything else a syntax error. */
static void client_list(struct cmd_ctx *x)
{
    struct client_match m = {.type = CLIENT_TYPE_ANY};
    uint64_t *ids = NULL;
    if (x->argc == 4 && arg_is(x, 2, "TYPE")) {
        if (parse_type(x, 3, &m.type) != 0)
            return;
    } else if (x->argc > 3 && arg_is(x, 2, "ID")) {
        ids = xmalloc((size_t)(x->argc - 3) * sizeof(*ids));
        for (int i = 3; i < x->argc; i++) {
            int64_t v;
            if (util_parse_i64(x->argv[i], x->lens[i], &v) != 0) {
                reply_error(x->out, "ERR Invalid client ID");
                free(ids);
                return;
            }
            if (v > 0) /* no connection has an id of 0 or below */
                ids[m.nids++] = (uint64_t)v;
        }
        m.ids = ids;
        if (m.nids == 0) { /* only unknown ids: an empty list, not every client */
            reply_verbatim(x->out, "txt", "", 0);
            free(ids);
            return;
        }
    } else if (x->argc != 2) {
        reply_syntax_error(x->out);
        return;
    }
    reply_clients(x, &m);
    free(ids);
}

/* CLIENT KILL addr (the old form: may kill the caller, answers OK or an error) or CLIENT KILL
 * with option/value pairs, checked in order as Redis 7.0 does (answers how many were killed).
 * The caller, when it is among them, is closed once its reply is out. */
static void client_kill(struct cmd_ctx *x)
{
    struct client_match m = {.type = CLIENT_TYPE_ANY, .skip = x->s};
    if (x->argc == 3) {
        m.addr = x->argv[2];
        m.skip = NULL;
    } else {
        for (int i = 2; i < x->argc; i += 2) {
            if (i + 1 >= x->argc) {
                reply_syntax_error(x->out);
                return;
            }
            if (arg_is(x, i, "ID")) {
                int64_t v;
                if (util_parse_i64(x->argv[i + 1], x->lens[i + 1], &v) != 0 || v <= 0) {
                    reply_error(x->out, "ERR client-id should be greater than 0");
                    return;
                }
                m.id = (uint64_t)v;
            } else if (arg_is(x, i, "TYPE")) {
                if (parse_type(x, i + 1, &m.type) != 0)
                    return;
            } else if (arg_is(x, i, "ADDR")) {
                m.addr = x->argv[i + 1];
            } else if (arg_is(x, i, "LADDR")) {
                m.laddr = x->argv[i + 1];
            } else if (arg_is(x, i, "USER")) {
                /* "default" is the only user, and every connection's: it filters nothing. */
                if (strcmp(x->argv[i + 1], "default") != 0) {
                    reply_errorf(x->out, "ERR No such user '%s'", x->argv[i + 1]);
                    return;
                }
            } else if (arg_is(x, i, "SKIPME")) {
                if (arg_is(x, i + 1, "YES")) {
                    m.skip = x->s;
                } else if (arg_is(x, i + 1, "NO")) {
                    m.skip = NULL;
                } else {
                    reply_syntax_error(x->out);
                    return;
                }
            } else {
                reply_syntax_error(x->out);
                return;
            }
        }
    }
    int me = 0, n = 0;
    if (x->env->hooks.client_kill != NULL)
        n = x->env->hooks.client_kill(x->env->hooks.ud, &m, x->s, &me);
    if (x->argc == 3) {
        if (n == 0)
            reply_error(x->out, "ERR No such client");
        else
            reply_ok(x->out);
    } else {
        reply_int(x->out, n);
    }
    if (me)
        __atomic_fetch_or(&x->s->flags, SESSION_CLOSE_AFTER_REPLY, __ATOMIC_RELAXED);
}

const char *client_sub_arity(int argc, char **argv, const size_t *lens)
{
    static const struct {
        const char *name;
        int arity;
    } fixed[] = {
        {"id", 2},      {"info", 2},  {"getname", 2}, {"help", 2},  {"setname", 3},
        {"setinfo", 4}, {"reply", 3}, {"kill", -3},   {"list", -2},
    };
    if (argc < 2)
        return NULL;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (!util_eq_nocase(argv[1], lens[1], fixed[i].name))
            continue;
        int a = fixed[i].arity;
        return (a > 0 && argc != a) || (a < 0 && argc < -a) ? fixed[i].name : NULL;
    }
    return NULL;
}

void cmd_client(struct cmd_ctx *x)
{
    struct session *s = x->s;
    if (arg_is(x, 1, "ID")) {
        reply_int(x->out, (int64_t)s->id);
    } else if (arg_is(x, 1, "GETNAME")) {
        if (s->name == NULL)
            reply_nil(x->out);
        else
            reply_bulk_cstr(x->out, s->name);
    } else if (arg_is(x, 1, "SETNAME")) {
        if (!client_valid_name(x->argv[2], x->lens[2])) {
            reply_error(x->out, client_bad_name);
        } else {
            client_set_str(x->env, &s->name, x->argv[2], x->lens[2]);
            reply_ok(x->out);
        }
    } else if (arg_is(x, 1, "SETINFO")) {
        if (!client_valid_name(x->argv[3], x->lens[3])) {
            reply_errorf(x->out, "ERR %.*s cannot contain spaces, newlines or special characters.",
                         (int)x->lens[2], x->argv[2]);
        } else if (arg_is(x, 2, "LIB-NAME")) {
            client_set_str(x->env, &s->lib_name, x->argv[3], x->lens[3]);
            reply_ok(x->out);
        } else if (arg_is(x, 2, "LIB-VER")) {
            client_set_str(x->env, &s->lib_ver, x->argv[3], x->lens[3]);
            reply_ok(x->out);
        } else {
            reply_errorf(x->out, "ERR Unrecognized option '%.*s'", (int)x->lens[2], x->argv[2]);
        }
    } else if (arg_is(x, 1, "LIST")) {
        client_list(x);
    } else if (arg_is(x, 1, "INFO")) {
        struct client_match m = {.id = s->id, .type = CLIENT_TYPE_ANY};
        reply_clients(x, &m);
    } else if (arg_is(x, 1, "KILL")) {
        client_kill(x);
    } else if (arg_is(x, 1, "REPLY")) {
        /* Redis's CLIENT REPLY: the dispatcher drops the replies (cmd_execute). */
        if (arg_is(x, 2, "ON")) {
            __atomic_fetch_and(&s->flags, ~(unsigned)(SESSION_REPLY_OFF | SESSION_REPLY_SKIP),
                               __ATOMIC_RELAXED);
            reply_ok(x->out);
        } else if (arg_is(x, 2, "OFF")) {
            __atomic_fetch_or(&s->flags, SESSION_REPLY_OFF, __ATOMIC_RELAXED);
        } else if (arg_is(x, 2, "SKIP")) {
            if (!(s->flags & SESSION_REPLY_OFF))
                __atomic_fetch_or(&s->flags, SESSION_REPLY_SKIP_NEXT, __ATOMIC_RELAXED);
        } else {
            reply_syntax_error(x->out);
        }
    } else if (arg_is(x, 1, "HELP")) {
        reply_help_lines(x->out, client_help);
    } else {
        reply_subcmd_unknown(x, "CLIENT");
    }
}
