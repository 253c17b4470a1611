/* cmd_command.c - COMMAND [COUNT|INFO|DOCS|GETKEYS|GETKEYSANDFLAGS|LIST|HELP] (COMMANDS.md).
 *
 * Cluster-aware clients (redis-py, go-redis) read COMMAND once to learn where each command keeps
 * its keys, and route CL.THROTTLE and ISALLOWED by their first argument from that; redis-cli
 * reads COMMAND DOCS for its help. Both parse strictly, so every entry has Redis 7.0's exact
 * shape. An entry is the 10-element array
 *
 *   name, arity, flags (status replies), first key, last key, step,
 *   ACL categories (status replies "@cat"), tips (bulk strings),
 *   key specs: one map-as-array per key range,
 *     ["flags", [+RW, +access, ...],
 *      "begin_search", ["type", "index", "spec", ["index", first]],
 *      "find_keys", ["type", "range", "spec", ["lastkey", n, "keystep", step, "limit", 0]]]
 *     (Redis puts an optional "notes", text first),
 *   subcommands (empty: rlimitd lists its container commands as single entries).
 *
 * Everything comes from the command's one row (cmd_internal.h, struct cmd_def): name, arity,
 * flags, key positions and categories for COMMAND, and its `doc` for key-spec flags, tips and
 * COMMAND DOCS. */
#include "cmd_internal.h"

#include <string.h>

#include "rlimitd/util.h"

/* A row without a summary still gets a well-formed COMMAND entry and a minimal DOCS map. */
static const struct cmd_docs *docs_of(const struct cmd_def *d)
{
    return d->doc.summary != NULL ? &d->doc : NULL;
}

static const struct cmd_def *find_cmd(const char *name, size_t len)
{
    int n;
    const struct cmd_def *t = cmd_table(&n);
    for (int i = 0; i < n; i++)
        if (util_eq_nocase(name, len, t[i].name))
            return &t[i];
    return NULL;
}

/* ---- small reply builders ---- */

static void status_n(struct rbuf *out, const char *p, size_t n)
{
    char *d = rbuf_reserve(out, n + 3);
    d[0] = '+';
    memcpy(d + 1, p, n);
    d[n + 1] = '\r';
    d[n + 2] = '\n';
    out->len += n + 3;
}

/* Words end at a space, and a word list at '\0' or '|' (key specs, cmd_internal.h). */
#define WORD_END " |"

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; p != NULL && *p != '\0' && *p != '|';) {
        p += strspn(p, " ");
        if (*p == '\0' || *p == '|')
            break;
        n++;
        p += strcspn(p, WORD_END);
    }
    return n;
}

/* A set of the space-separated words of s (NULL = none) up to its end or a '|', as status or
 * bulk replies (Redis's flag lists and tips are sets: arrays in RESP2). */
static void reply_words(struct rbuf *out, const char *s, int status)
{
    reply_set(out, count_words(s));
    for (const char *p = s; p != NULL && *p != '\0' && *p != '|';) {
        p += strspn(p, " ");
        if (*p == '\0' || *p == '|')
            break;
        size_t n = strcspn(p, WORD_END);
        if (status)
            status_n(out, p, n);
        else
            reply_bulk(out, p, n);
        p += n;
    }
}

/* Redis 7's flag names, in the order Redis lists them. */
static const struct {
    unsigned bit;
    const char *name;
} flag_names[] = {
    {CMD_WRITE, "write"},    {CMD_READONLY, "readonly"},          {CMD_DENYOOM, "denyoom"},
    {CMD_ADMIN, "admin"},    {CMD_PUBSUB, "pubsub"},              {CMD_NOSCRIPT, "noscript"},          {CMD_LOADING, "loading"},
    {CMD_STALE, "stale"},    {CMD_SHOW_SKIP_MONITOR, "skip_monitor"},
    {CMD_SHOW_SKIP_SLOWLOG, "skip_slowlog"}, {CMD_FAST, "fast"}, {CMD_NOAUTH, "no_auth"},
    {CMD_SHOW_NO_MANDATORY_KEYS, "no_mandatory_keys"},
    {CMD_SHOW_NO_ASYNC_LOADING, "no_async_loading"}, {CMD_NO_MULTI, "no_multi"},
    /* Keys found by a count argument (EVAL's numkeys) are what Redis calls movable. */
    {CMD_NUMKEYS, "movablekeys"},         {CMD_SHOW_ALLOW_BUSY, "allow_busy"},
};

#define NFLAGS ((int)(sizeof(flag_names) / sizeof(flag_names[0])))

static void reply_flags(struct rbuf *out, unsigned flags)
{
    int n = 0;
    for (int i = 0; i < NFLAGS; i++)
        n += (flags & flag_names[i].bit) != 0;
    reply_set(out, n);
    for (int i = 0; i < NFLAGS; i++)
        if (flags & flag_names[i].bit)
            reply_simple(out, flag_names[i].name);
}

/* Redis 7's ACL categories in its order; COMMAND lists a command's categories in this order
 * whatever order the table row names them in. */
static const char *const acl_order[] = {
    "keyspace", "read",   "write",       "set",       "sortedset",  "list",        "hash",
    "string",   "bitmap", "hyperloglog", "geo",       "stream",     "pubsub",      "admin",
    "fast",     "slow",   "blocking",    "dangerous", "connection", "transaction", "scripting",
};

#define NACL ((int)(sizeof(acl_order) / sizeof(acl_order[0])))

/* 1 if the space-separated list has the word w (case-insensitive, as ACL names are). */
static int has_word(const char *list, const char *w, size_t wlen)
{
    for (const char *p = list; p != NULL && *p != '\0';) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n == wlen && n > 0) {
            char tmp[32];
            if (n < sizeof(tmp)) {
                memcpy(tmp, p, n);
                tmp[n] = '\0';
                if (util_eq_nocase(w, wlen, tmp))
                    return 1;
            }
        }
        p += n;
    }
    return 0;
}

static void reply_acl(struct rbuf *out, const char *acl)
{
    int n = count_words(acl);
    reply_set(out, n);
    char tmp[40];
    int done = 0;
    for (int i = 0; i < NACL && done < n; i++) {
        if (has_word(acl, acl_order[i], strlen(acl_order[i]))) {
            tmp[0] = '@';
            strcpy(tmp + 1, acl_order[i]);
            reply_simple(out, tmp);
            done++;
        }
    }
    /* Categories Redis does not know keep the row's order, after the known ones. */
    for (const char *p = acl; done < n && p != NULL && *p != '\0';) {
        p += strspn(p, " ");
        size_t w = strcspn(p, " ");
        int known = 0;
        for (int i = 0; i < NACL && !known; i++)
            known = w > 0 && util_eq_nocase(p, w, acl_order[i]);
        if (w > 0 && !known && w < sizeof(tmp) - 1) {
            tmp[0] = '@';
            memcpy(tmp + 1, p, w);
            status_n(out, tmp, w + 1);
            done++;
        }
        p += w;
    }
    /* A word too long for tmp (never in the table) would leave the array short: pad it. */
    for (; done < n; done++)
        reply_simple(out, "@unknown");
}

static const char *key_flags(const struct cmd_def *d, const struct cmd_docs *m)
{
    if (m != NULL && m->keyflags != NULL)
        return m->keyflags;
    return (d->flags & CMD_WRITE) ? "RW access update" : "RO access";
}

/* The flags of key spec i in a '|'-separated list (the last spec's for i past the end). */
static const char *spec_flags(const char *flags, int i)
{
    for (; i > 0; i--) {
        const char *bar = strchr(flags, '|');
        if (bar == NULL)
            break;
        flags = bar + 1;
    }
    return flags;
}

static int count_specs(const char *flags)
{
    int n = 1;
    for (const char *p = flags; (p = strchr(p, '|')) != NULL; p++)
        n++;
    return n;
}

/* One key spec. begin is its first key's index; a range spec (keynum 0) covers keys begin to
 * begin + lastkey (negative: from the end), a keynum spec (EVAL) reads the key count at begin
 * and finds the keys right after it. */
static void reply_spec(struct rbuf *out, const struct cmd_docs *m, const char *flags, int begin,
                       int keynum, int64_t lastkey, int step)
{
    int notes = m != NULL && m->notes != NULL;
    reply_map(out, notes ? 4 : 3);
    if (notes) {
        reply_bulk_cstr(out, "notes");
        reply_bulk_cstr(out, m->notes);
    }
    reply_bulk_cstr(out, "flags");
    reply_words(out, flags, 1);
    reply_bulk_cstr(out, "begin_search");
    reply_map(out, 2);
    reply_bulk_cstr(out, "type");
    reply_bulk_cstr(out, "index");
    reply_bulk_cstr(out, "spec");
    reply_map(out, 1);
    reply_bulk_cstr(out, "index");
    reply_int(out, begin);
    reply_bulk_cstr(out, "find_keys");
    reply_map(out, 2);
    reply_bulk_cstr(out, "type");
    reply_bulk_cstr(out, keynum ? "keynum" : "range");
    reply_bulk_cstr(out, "spec");
    reply_map(out, 3);
    reply_bulk_cstr(out, keynum ? "keynumidx" : "lastkey");
    reply_int(out, keynum ? 0 : lastkey);
    reply_bulk_cstr(out, keynum ? "firstkey" : "keystep");
    reply_int(out, keynum ? 1 : step);
    reply_bulk_cstr(out, keynum ? "keystep" : "limit");
    reply_int(out, keynum ? step : 0);
}

static void reply_keyspecs(struct rbuf *out, const struct cmd_def *d, const struct cmd_docs *m)
{
    const char *flags = key_flags(d, m);
    if (d->flags & CMD_NUMKEYS) { /* EVAL: the count at argument 2, one key after another */
        reply_set(out, 1);
        reply_spec(out, m, flags, CMD_NUMKEYS_ARG(d), 1, 0, 1);
        return;
    }
    if (d->first_key <= 0) {
        reply_set(out, 0);
        return;
    }
    int nspecs = count_specs(flags);
    reply_set(out, nspecs);
    for (int i = 0; i < nspecs; i++) {
        /* Redis's lastkey is relative to the spec's first key, negative counts from the end;
         * every spec but the last covers one key. */
        int first = d->first_key + i;
        int64_t lastkey = i < nspecs - 1 ? 0 : d->last_key < 0 ? d->last_key : d->last_key - first;
        reply_spec(out, m, spec_flags(flags, i), first, 0, lastkey, d->step);
    }
}

static void reply_entry(struct rbuf *out, const struct cmd_def *d)
{
    const struct cmd_docs *m = docs_of(d);
    reply_array(out, 10);
    reply_bulk_cstr(out, d->name);
    reply_int(out, d->arity);
    unsigned extra = m != NULL ? m->extra : 0;
    int container = (extra & CMD_SHOW_CONTAINER) != 0;
    reply_flags(out, container ? 0 : d->flags | extra);
    /* A container's keys are its subcommands' in Redis (OBJECT's key is at 2 of each), so it
     * shows none; the dispatcher still locks them (cmd_run.c key_span). */
    reply_int(out, container ? 0 : d->first_key);
    reply_int(out, container ? 0 : d->last_key);
    reply_int(out, container ? 0 : d->step);
    reply_acl(out, container ? "slow" : d->acl);
    reply_words(out, m != NULL ? m->tips : NULL, 0);
    if (container)
        reply_set(out, 0);
    else
        reply_keyspecs(out, d, m);
    /* Subcommands: Redis answers an empty set for a command without any, an array of entries
     * for a container (of which rlimitd lists none, COMMANDS.md). */
    if (container || (extra & CMD_SHOW_SUBCOMMANDS))
        reply_array(out, 0);
    else
        reply_set(out, 0);
}

/* ---- COMMAND DOCS ---- */

/* Length of one item of an argument list starting at p (up to a space at bracket depth 0). */
static size_t item_len(const char *p, const char *end)
{
    int depth = 0;
    const char *q = p;
    for (; q < end; q++) {
        if (*q == '(' || *q == '{')
            depth++;
        else if (*q == ')' || *q == '}')
            depth--;
        else if (*q == ' ' && depth == 0)
            break;
    }
    return (size_t)(q - p);
}

/* Length of the bracketed group at p, through its matching closing bracket. */
static size_t group_len(const char *p, const char *end)
{
    int depth = 0;
    const char *q = p;
    for (; q < end; q++) {
        if (*q == '(' || *q == '{') {
            depth++;
        } else if (*q == ')' || *q == '}') {
            if (--depth == 0)
                return (size_t)(q - p) + 1;
        }
    }
    return (size_t)(q - p);
}

static int count_items(const char *p, const char *end)
{
    int n = 0;
    while (p < end) {
        if (*p == ' ') {
            p++;
            continue;
        }
        p += item_len(p, end);
        n++;
    }
    return n;
}

static void emit_args(struct rbuf *out, const char *p, const char *end);

/* Bytes from p before end or the first byte of stop. */
static size_t span(const char *p, const char *end, const char *stop)
{
    const char *q = p;
    while (q < end && strchr(stop, *q) == NULL)
        q++;
    return (size_t)(q - p);
}

/* One argument map: name, type, [key_spec_index], [token], [flags], [arguments], the fields in
 * the order Redis 7.0 sends them. */
static void emit_arg(struct rbuf *out, const char *p, const char *end)
{
    int optional = 0, multiple = 0;
    for (; p < end && (*p == '?' || *p == '*'); p++) {
        optional |= *p == '?';
        multiple |= *p == '*';
    }
    const char *name = p;
    size_t name_len = span(p, end, ":=({");
    p += name_len;
    const char *type = NULL, *token = NULL, *sub = NULL, *sub_end = NULL;
    size_t type_len = 0, token_len = 0;
    if (p < end && *p == ':') {
        type = ++p;
        type_len = span(p, end, "=({");
        p += type_len;
    }
    if (p < end && (*p == '(' || *p == '{')) {
        type = *p == '(' ? "oneof" : "block";
        type_len = 5;
        sub = p + 1;
        size_t n = group_len(p, end);
        sub_end = p + n - 1; /* the closing bracket */
        p += n;
    }
    if (p < end && *p == '=') {
        token = ++p;
        token_len = (size_t)(end - p);
    }
    if (type == NULL) {
        type = "pure-token";
        type_len = 10;
    }
    int is_key = type_len == 3 && memcmp(type, "key", 3) == 0;
    int fields = 2 + is_key + (token != NULL) + (optional || multiple) + (sub != NULL);
    reply_map(out, fields);
    reply_bulk_cstr(out, "name");
    reply_bulk(out, name, name_len);
    reply_bulk_cstr(out, "type");
    reply_bulk(out, type, type_len);
    if (is_key) {
        /* Every rlimitd command has at most one key spec. */
        reply_bulk_cstr(out, "key_spec_index");
        reply_int(out, 0);
    }
    if (token != NULL) {
        reply_bulk_cstr(out, "token");
        reply_bulk(out, token, token_len);
    }
    if (optional || multiple) {
        reply_bulk_cstr(out, "flags");
        reply_set(out, optional + multiple);
        if (optional)
            reply_simple(out, "optional");
        if (multiple)
            reply_simple(out, "multiple");
    }
    if (sub != NULL) {
        reply_bulk_cstr(out, "arguments");
        emit_args(out, sub, sub_end);
    }
}

static void emit_args(struct rbuf *out, const char *p, const char *end)
{
    reply_array(out, count_items(p, end));
    while (p < end) {
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t n = item_len(p, end);
        emit_arg(out, p, p + n);
        p += n;
    }
}

static void reply_docs(struct rbuf *out, const struct cmd_def *d)
{
    const struct cmd_docs *m = docs_of(d);
    reply_bulk_cstr(out, d->name);
    if (m == NULL) {
        /* A command added without a meta row: still a valid docs map. */
        reply_map(out, 3);
        reply_bulk_cstr(out, "summary");
        reply_bulk_cstr(out, "");
        reply_bulk_cstr(out, "since");
        reply_bulk_cstr(out, "0.1.0");
        reply_bulk_cstr(out, "group");
        reply_bulk_cstr(out, "generic");
        return;
    }
    int has_args = m->args != NULL;
    reply_map(out, has_args ? 5 : 4);
    reply_bulk_cstr(out, "summary");
    reply_bulk_cstr(out, m->summary);
    reply_bulk_cstr(out, "since");
    reply_bulk_cstr(out, m->since);
    reply_bulk_cstr(out, "group");
    reply_bulk_cstr(out, m->group);
    reply_bulk_cstr(out, "complexity");
    reply_bulk_cstr(out, m->complexity);
    if (has_args) {
        reply_bulk_cstr(out, "arguments");
        emit_args(out, m->args, m->args + strlen(m->args));
    }
}

/* ---- subcommands ---- */

static void command_docs(struct cmd_ctx *x)
{
    int n;
    const struct cmd_def *t = cmd_table(&n);
    if (x->argc == 2) {
        reply_map(x->out, n);
        for (int i = 0; i < n; i++)
            reply_docs(x->out, &t[i]);
        return;
    }
    /* Redis leaves unknown names out of the map; a name asked twice appears twice. */
    int64_t found = 0;
    for (int i = 2; i < x->argc; i++)
        found += find_cmd(x->argv[i], x->lens[i]) != NULL;
    reply_map(x->out, found);
    for (int i = 2; i < x->argc; i++) {
        const struct cmd_def *d = find_cmd(x->argv[i], x->lens[i]);
        if (d != NULL)
            reply_docs(x->out, d);
    }
}

static void command_info(struct cmd_ctx *x)
{
    int n;
    const struct cmd_def *t = cmd_table(&n);
    if (x->argc == 2) {
        reply_array(x->out, n);
        for (int i = 0; i < n; i++)
            reply_entry(x->out, &t[i]);
        return;
    }
    reply_array(x->out, x->argc - 2);
    for (int i = 2; i < x->argc; i++) {
        const struct cmd_def *d = find_cmd(x->argv[i], x->lens[i]);
        if (d != NULL)
            reply_entry(x->out, d);
        else
            reply_nil(x->out); /* as Redis 7.0 answers an unknown name */
    }
}

/* COMMAND GETKEYS / GETKEYSANDFLAGS <command> <args...> (with_flags for the latter). */
static void command_getkeys(struct cmd_ctx *x, int with_flags)
{
    const struct cmd_def *d = find_cmd(x->argv[2], x->lens[2]);
    if (d == NULL) {
        reply_error(x->out, "ERR Invalid command specified");
        return;
    }
    int argc = x->argc - 2;
    char **argv = x->argv + 2;
    const size_t *lens = x->lens + 2;
    if (d->arity >= 0 ? argc != d->arity : argc < -d->arity) {
        reply_error(x->out, "ERR Invalid number of arguments specified for command");
        return;
    }
    const struct cmd_docs *m = docs_of(d);
    if (d->flags & CMD_NUMKEYS) {
        /* numkeys keys after its argument (2, or 1 for THROTTLE.ALL); a count that is not a
         * whole number, is negative or runs past the arguments finds no keys, as in Redis. */
        int at = CMD_NUMKEYS_ARG(d);
        int64_t nk;
        if (util_parse_i64(argv[at], lens[at], &nk) != 0 || nk < 0 || nk > argc - at - 1)
            nk = 0;
        reply_array(x->out, nk);
        for (int64_t i = 0; i < nk; i++) {
            int a = at + 1 + (int)i;
            if (with_flags) {
                reply_array(x->out, 2);
                reply_bulk(x->out, argv[a], lens[a]);
                reply_words(x->out, key_flags(d, m), 1);
            } else {
                reply_bulk(x->out, argv[a], lens[a]);
            }
        }
        return;
    }
    if (d->first_key <= 0) {
        reply_error(x->out, "ERR The command has no key arguments");
        return;
    }
    /* The same positions the dispatcher locks (cmd_run.c key_span). ISALLOWED's state key is
     * derived from its user argument, whose hash tag it carries: the user is what routes. */
    int last = d->last_key < 0 ? argc + d->last_key : d->last_key;
    if (last >= argc)
        last = argc - 1;
    int64_t n = last >= d->first_key ? (last - d->first_key) / d->step + 1 : 0;
    const char *flags = key_flags(d, m);
    char with_get[64];
    if (m != NULL && m->resolved != NULL) {
        flags = m->resolved;
        /* variable_flags: SET reads the old value (RW access) only when GET is among its
         * options, as Redis resolves it. */
        for (int i = 3; i < argc; i++) {
            if (util_eq_nocase(argv[i], lens[i], "get")) {
                const char *k = key_flags(d, m);
                const char *v = strstr(k, " variable_flags");
                size_t klen = v != NULL ? (size_t)(v - k) : strlen(k);
                if (klen < sizeof(with_get)) {
                    memcpy(with_get, k, klen);
                    with_get[klen] = '\0';
                    flags = with_get;
                }
                break;
            }
        }
    }
    reply_array(x->out, n);
    for (int64_t i = 0; i < n; i++) {
        int a = d->first_key + (int)i * d->step;
        if (with_flags) {
            reply_array(x->out, 2);
            reply_bulk(x->out, argv[a], lens[a]);
            reply_words(x->out, spec_flags(flags, (int)i), 1);
        } else {
            reply_bulk(x->out, argv[a], lens[a]);
        }
    }
}

/* COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern] */
static void command_list(struct cmd_ctx *x)
{
    enum { ALL, MODULE, ACLCAT, PATTERN } filter = ALL;
    if (x->argc == 5 && arg_is(x, 2, "FILTERBY")) {
        if (arg_is(x, 3, "MODULE"))
            filter = MODULE;
        else if (arg_is(x, 3, "ACLCAT"))
            filter = ACLCAT;
        else if (arg_is(x, 3, "PATTERN"))
            filter = PATTERN;
        else {
            reply_syntax_error(x->out);
            return;
        }
    } else if (x->argc != 2) {
        reply_syntax_error(x->out);
        return;
    }
    int n;
    const struct cmd_def *t = cmd_table(&n);
    int64_t count = 0;
    /* Two passes over ~40 rows: count, then emit, so the array header is exact. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            reply_array(x->out, count);
        for (int i = 0; i < n; i++) {
            int keep = 0;
            switch (filter) {
            case ALL:
                keep = 1;
                break;
            case MODULE: /* rlimitd loads no modules */
                keep = 0;
                break;
            case ACLCAT:
                keep = has_word(t[i].acl, x->argv[4], x->lens[4]);
                break;
            case PATTERN:
                keep = util_glob_match(x->argv[4], x->lens[4], t[i].name, strlen(t[i].name), 1);
                break;
            }
            if (!keep)
                continue;
            if (pass == 0)
                count++;
            else
                reply_bulk_cstr(x->out, t[i].name);
        }
    }
}

static const char *const command_help[] = {
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return the details of every command.",
    "COUNT",
    "    Return the number of commands.",
    "LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
    "    Return the names of the commands, all or those matching the filter.",
    "INFO [<command-name> ...]",
    "    Return the details of the named commands (of every command without names).",
    "DOCS [<command-name> ...]",
    "    Return the documentation of the named commands (of every command without names).",
    "GETKEYS <full-command>",
    "    Return the keys of a full command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys of a full command with their access flags.",
    "HELP",
    "    Print this help.",
    NULL,
};

static void cmd_command(struct cmd_ctx *x)
{
    if (x->argc == 1) {
        int n;
        const struct cmd_def *t = cmd_table(&n);
        reply_array(x->out, n);
        for (int i = 0; i < n; i++)
            reply_entry(x->out, &t[i]);
        return;
    }
    /* Subcommand arities are Redis 7.0's: COUNT 2, HELP 2, INFO/DOCS/LIST -2, GETKEYS -4. */
    if (arg_is(x, 1, "COUNT")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "command", "count");
        else
            reply_int(x->out, cmd_count());
    } else if (arg_is(x, 1, "INFO")) {
        command_info(x);
    } else if (arg_is(x, 1, "DOCS")) {
        command_docs(x);
    } else if (arg_is(x, 1, "LIST")) {
        command_list(x);
    } else if (arg_is(x, 1, "GETKEYS")) {
        if (x->argc < 4)
            reply_subcmd_arity(x, "command", "getkeys");
        else
            command_getkeys(x, 0);
    } else if (arg_is(x, 1, "GETKEYSANDFLAGS")) {
        if (x->argc < 4)
            reply_subcmd_arity(x, "command", "getkeysandflags");
        else
            command_getkeys(x, 1);
    } else if (arg_is(x, 1, "HELP")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "command", "help");
        else
            reply_help_lines(x->out, command_help);
    } else {
        reply_subcmd_unknown(x, "COMMAND");
    }
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_command_table[] = {
    {"command", -1, CMD_LOADING | CMD_STALE, 0, 0, 0, "slow connection", cmd_command,
     {.summary = "Returns details about the commands", .since = "2.8.13", .group = "server",
      .complexity = "O(N) where N is the number of commands",
      .tips = "nondeterministic_output_order", .extra = CMD_SHOW_SUBCOMMANDS}},
};
const int cmd_command_count = (int)(sizeof(cmd_command_table) / sizeof(cmd_command_table[0]));
