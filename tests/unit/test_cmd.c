/* Unit tests of the command layer through cmd_execute, on a scratch keyspace with default
 * configuration and no server behind it (no hooks): COMMAND, INFO, SLOWLOG and LATENCY, with
 * exact reply bytes where the format is a contract (COMMANDS.md). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/stats.h"

static struct conf conf;
static struct keyspace *ks;
static struct cmd_env env;
static struct stats st;
static struct stats *stp = &st;
static struct session sess;
static struct rbuf out;
static const uint8_t seed[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

static void setup(void)
{
    conf_init(&conf);
    ks = ks_create(8, seed);
    cr_assert_not_null(ks);
    cmd_env_init(&env, ks, &conf);
    memset(&st, 0, sizeof(st));
    env.stats = &stp;
    env.nstats = 1;
    env.tcp_port = 7379;
    session_init(&sess, 1, &st);
    rbuf_init(&out);
}

static void teardown(void)
{
    rbuf_free(&out);
    session_deinit(&sess);
    cmd_env_deinit(&env);
    ks_destroy(&ks);
    conf_free(&conf);
}

TestSuite(cmd, .init = setup, .fini = teardown);

#define MAX_ARGS 64

/* Runs one command given as separate arguments and returns its reply as a NUL-terminated
 * string (valid until the next call). */
static const char *runv(int argc, const char *const *args)
{
    char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    cr_assert(argc <= MAX_ARGS);
    for (int i = 0; i < argc; i++) {
        argv[i] = strdup(args[i]);
        lens[i] = strlen(args[i]);
    }
    out.len = 0;
    cmd_execute(&env, &sess, argc, argv, lens, &out);
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    rbuf_append(&out, "", 1);
    out.len--;
    return out.p;
}

/* Runs a command written as space-separated words. */
static const char *run(const char *line)
{
    char buf[1024];
    const char *args[MAX_ARGS];
    int argc = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *tok = strtok(buf, " "); tok != NULL; tok = strtok(NULL, " "))
        args[argc++] = tok;
    return runv(argc, args);
}

/* Length of the one RESP2 value at p, or -1 if it is malformed or cut short. */
static long resp_len(const char *p, size_t n)
{
    const char *eol = memchr(p, '\r', n);
    if (n < 3 || eol == NULL || (size_t)(eol - p) + 2 > n || eol[1] != '\n')
        return -1;
    long head = (long)(eol - p) + 2;
    char *end;
    switch (p[0]) {
    case '+':
    case '-':
    case ':':
        return head;
    case '$': {
        long len = strtol(p + 1, &end, 10);
        if (end != eol || len < -1)
            return -1;
        if (len == -1)
            return head;
        if ((size_t)(head + len + 2) > n || p[head + len] != '\r' || p[head + len + 1] != '\n')
            return -1;
        return head + len + 2;
    }
    case '*': {
        long count = strtol(p + 1, &end, 10);
        if (end != eol || count < -1)
            return -1;
        long used = head;
        for (long i = 0; i < count; i++) {
            long l = resp_len(p + used, n - (size_t)used);
            if (l < 0)
                return -1;
            used += l;
        }
        return used;
    }
    default:
        return -1;
    }
}

/* 1 if r starts with the string literal lit. */
#define STARTS(r, lit) (strncmp((r), (lit), sizeof(lit) - 1) == 0)

static void assert_one_value(const char *r)
{
    size_t n = strlen(r);
    cr_assert_eq(resp_len(r, n), (long)n, "not exactly one well-formed RESP value: %.200s", r);
}

/* ---- COMMAND ---- */

Test(cmd, command_count_is_table_size)
{
    char want[32];
    snprintf(want, sizeof(want), ":%d\r\n", cmd_count());
    cr_assert_str_eq(run("COMMAND COUNT"), want);
    cr_assert_str_eq(run("command count"), want);
}

/* Command names match ignoring ASCII case only: every name in lower, upper and mixed case is
 * found, and no other byte string is (a changed byte, a byte more or less, or bit 0x20 flipped
 * on a character that is not a letter). Run inside MULTI, so found commands are only queued. */
static int found(const char *name, size_t len)
{
    char *argv[1] = {(char *)name};
    size_t lens[1] = {len};
    out.len = 0;
    cmd_execute(&env, &sess, 1, argv, lens, &out);
    static const char unknown[] = "-ERR unknown command";
    return !(out.len >= sizeof(unknown) - 1 && memcmp(out.p, unknown, sizeof(unknown) - 1) == 0);
}

/* Whether name is, ignoring ASCII case, some command's name (a near miss of one command may be
 * another: LPUSH + X is LPUSHX, MSET with one bit changed is LSET). */
static int is_some_name(const char *name, size_t len)
{
    for (int i = 0; i < cmd_count(); i++)
        if (strlen(cmd_name(i)) == len && strncasecmp(cmd_name(i), name, len) == 0)
            return 1;
    return 0;
}

Test(cmd, command_names_match_ignoring_ascii_case_only)
{
    static const char *const runs_in_multi[] = {"multi", "exec", "discard", "reset", "quit",
                                                "shutdown"};
    cr_assert_str_eq(run("MULTI"), "+OK\r\n");
    for (int i = 0; i < cmd_count(); i++) {
        const char *name = cmd_name(i);
        size_t len = strlen(name);
        int skip = 0;
        for (size_t j = 0; j < sizeof(runs_in_multi) / sizeof(runs_in_multi[0]); j++)
            skip |= strcmp(name, runs_in_multi[j]) == 0;
        char v[64];
        cr_assert(len + 2 < sizeof(v));
        if (!skip) {
            memcpy(v, name, len);
            cr_expect(found(v, len), "%s", name);
            for (size_t j = 0; j < len; j++)
                v[j] = (char)(name[j] >= 'a' && name[j] <= 'z' ? name[j] - 32 : name[j]);
            cr_expect(found(v, len), "%.*s", (int)len, v);
            for (size_t j = 0; j < len; j += 2)
                v[j] = name[j];
            cr_expect(found(v, len), "%.*s", (int)len, v);
        }
        memcpy(v, name, len);
        v[len] = 'x';
        cr_expect(is_some_name(v, len + 1) || !found(v, len + 1), "%s + x", name);
        cr_expect(is_some_name(v, len - 1) || !found(v, len - 1), "%s cut", name);
        for (size_t j = 0; j < len; j++) {
            int letter = (name[j] >= 'a' && name[j] <= 'z') || (name[j] >= 'A' && name[j] <= 'Z');
            memcpy(v, name, len);
            v[j] = (char)(name[j] ^ 0x01);
            cr_expect(is_some_name(v, len) || !found(v, len), "%s, byte %zu ^ 1", name, j);
            v[j] = (char)(name[j] ^ 0x20);
            if (!letter)
                cr_expect(is_some_name(v, len) || !found(v, len), "%s, byte %zu ^ 0x20", name, j);
            else if (!skip)
                cr_expect(found(v, len), "%s, byte %zu ^ 0x20", name, j);
        }
    }
    cr_assert_str_eq(run("DISCARD"), "+OK\r\n");
}

Test(cmd, command_info_cl_throttle_exact)
{
    /* Redis 7.0's 10-element entry, written out by hand: cluster clients route CL.THROTTLE by
     * the key spec (begin index 1, range lastkey 0) and by first/last/step 1/1/1. */
    static const char want[] =
        "*1\r\n"
        "*10\r\n"
        "$11\r\ncl.throttle\r\n"
        ":-5\r\n"
        "*3\r\n+write\r\n+denyoom\r\n+fast\r\n"
        ":1\r\n:1\r\n:1\r\n"
        "*2\r\n+@write\r\n+@fast\r\n"
        "*0\r\n"
        "*1\r\n"
        "*6\r\n"
        "$5\r\nflags\r\n*3\r\n+RW\r\n+access\r\n+update\r\n"
        "$12\r\nbegin_search\r\n"
        "*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n"
        "$9\r\nfind_keys\r\n"
        "*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n"
        "*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n"
        "*0\r\n";
    cr_assert_str_eq(run("COMMAND INFO cl.throttle"), want);
    cr_assert_str_eq(run("COMMAND INFO CL.THROTTLE"), want);
}

Test(cmd, command_info_matches_redis_7_0_bytes)
{
    /* Captured from redis-server 7.0.15 (COMMAND INFO get del exists incr expire). */
    static const char want[] =
        "*5\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n"
        "+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n"
        "$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\n"
        "index\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n"
        "$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n*10\r\n$3\r\n"
        "del\r\n:-2\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@keyspace\r\n+@write\r\n+@slow\r\n"
        "*2\r\n$26\r\nrequest_policy:multi_shard\r\n$23\r\nresponse_policy:agg_sum\r\n*1\r\n*6\r\n"
        "$5\r\nflags\r\n*2\r\n+RM\r\n+delete\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\n"
        "index\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n"
        "$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:1\r\n$5\r\n"
        "limit\r\n:0\r\n*0\r\n*10\r\n$6\r\nexists\r\n:-2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n"
        ":-1\r\n:1\r\n*3\r\n+@keyspace\r\n+@read\r\n+@fast\r\n*2\r\n$26\r\n"
        "request_policy:multi_shard\r\n$23\r\nresponse_policy:agg_sum\r\n*1\r\n*6\r\n$5\r\n"
        "flags\r\n*1\r\n+RO\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\n"
        "spec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n"
        "$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n"
        "*0\r\n*10\r\n$4\r\nincr\r\n:2\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        "*3\r\n+@write\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*3\r\n+RW\r\n"
        "+access\r\n+update\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\n"
        "spec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n"
        "$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n"
        "*0\r\n*10\r\n$6\r\nexpire\r\n:-3\r\n*2\r\n+write\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n"
        "+@keyspace\r\n+@write\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RW\r\n"
        "+update\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n"
        "$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n"
        "*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";

    cr_assert_str_eq(run("COMMAND INFO get del exists incr expire"), want);
}

Test(cmd, command_info_isallowed_routes_by_user)
{
    const char *r = run("COMMAND INFO isallowed");
    assert_one_value(r);
    cr_assert(STARTS(r, "*1\r\n*10\r\n$9\r\nisallowed\r\n:5\r\n"), "%s", r);
    cr_assert_not_null(strstr(r, "+@write\r\n+@fast\r\n*0\r\n*1\r\n*8\r\n$5\r\nnotes\r\n"), "%s",
                       r);
    cr_assert_not_null(strstr(r, "$5\r\nindex\r\n:1\r\n"), "%s", r);
    cr_assert_str_eq(run("COMMAND GETKEYS isallowed alice login 60 5"), "*1\r\n$5\r\nalice\r\n");
}

Test(cmd, command_info_unknown_name_is_nil)
{
    cr_assert_str_eq(run("COMMAND INFO nosuch"), "*1\r\n$-1\r\n");
    const char *r = run("COMMAND INFO get nosuch");
    assert_one_value(r);
    cr_assert(STARTS(r, "*2\r\n*10\r\n$3\r\nget\r\n"));
    cr_assert(strcmp(r + strlen(r) - 5, "$-1\r\n") == 0);
}

Test(cmd, command_lists_every_entry_well_formed)
{
    char head[32];
    snprintf(head, sizeof(head), "*%d\r\n*10\r\n", cmd_count());
    char *all = strdup(run("COMMAND"));
    assert_one_value(all);
    cr_assert(strncmp(all, head, strlen(head)) == 0, "%.40s", all);
    /* COMMAND INFO without names is the same list. */
    cr_assert_str_eq(run("COMMAND INFO"), all);
    free(all);
}

Test(cmd, command_docs_well_formed)
{
    char head[32];
    snprintf(head, sizeof(head), "*%d\r\n", 2 * cmd_count());
    const char *r = run("COMMAND DOCS");
    assert_one_value(r);
    cr_assert(strncmp(r, head, strlen(head)) == 0, "%.40s", r);
    /* Every command of the table has its own docs row (summary, since, group, complexity). */
    for (int i = 0; i < cmd_count(); i++) {
        const char *args[] = {"COMMAND", "DOCS", cmd_name(i)};
        r = runv(3, args);
        assert_one_value(r);
        cr_assert_not_null(strstr(r, "$10\r\ncomplexity\r\n"), "no docs row for %s", cmd_name(i));
    }
    cr_assert_str_eq(run("COMMAND DOCS nosuch"), "*0\r\n");
    cr_assert_str_eq(run("COMMAND DOCS get"),
                     "*2\r\n$3\r\nget\r\n*10\r\n"
                     "$7\r\nsummary\r\n$33\r\nReturns the string value of a key\r\n"
                     "$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n"
                     "$10\r\ncomplexity\r\n$4\r\nO(1)\r\n"
                     "$9\r\narguments\r\n*1\r\n"
                     "*6\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n"
                     "$14\r\nkey_spec_index\r\n:0\r\n");
    /* A oneof of pure tokens, marked optional, as Redis nests them. */
    r = run("COMMAND DOCS expire");
    cr_assert_not_null(strstr(r, "*8\r\n$4\r\nname\r\n$9\r\ncondition\r\n$4\r\ntype\r\n"
                                 "$5\r\noneof\r\n$5\r\nflags\r\n*1\r\n+optional\r\n"
                                 "$9\r\narguments\r\n*4\r\n*6\r\n$4\r\nname\r\n$2\r\nnx\r\n"
                                 "$4\r\ntype\r\n$10\r\npure-token\r\n$5\r\ntoken\r\n$2\r\nNX\r\n"),
                       "%s", r);
}

Test(cmd, command_docs_nested_blocks_match_redis)
{
    /* HELLO's arguments, a block holding a block with a token, as redis-server 7.0.15 sends
     * them (only the summary text differs). */
    static const char want[] =
        "$9\r\narguments\r\n*1\r\n*8\r\n$4\r\nname\r\n$9\r\narguments\r\n$4\r\ntype\r\n"
        "$5\r\nblock\r\n$5\r\nflags\r\n*1\r\n+optional\r\n$9\r\narguments\r\n*3\r\n*4\r\n"
        "$4\r\nname\r\n$8\r\nprotover\r\n$4\r\ntype\r\n$7\r\ninteger\r\n*10\r\n$4\r\nname\r\n"
        "$17\r\nusername_password\r\n$4\r\ntype\r\n$5\r\nblock\r\n$5\r\ntoken\r\n$4\r\nAUTH\r\n"
        "$5\r\nflags\r\n*1\r\n+optional\r\n$9\r\narguments\r\n*2\r\n*4\r\n$4\r\nname\r\n"
        "$8\r\nusername\r\n$4\r\ntype\r\n$6\r\nstring\r\n*4\r\n$4\r\nname\r\n$8\r\npassword\r\n"
        "$4\r\ntype\r\n$6\r\nstring\r\n*8\r\n$4\r\nname\r\n$10\r\nclientname\r\n$4\r\ntype\r\n"
        "$6\r\nstring\r\n$5\r\ntoken\r\n$7\r\nSETNAME\r\n$5\r\nflags\r\n*1\r\n+optional\r\n";
    const char *r = run("COMMAND DOCS hello");
    assert_one_value(r);
    size_t n = strlen(r), w = sizeof(want) - 1;
    cr_assert(n > w && strcmp(r + n - w, want) == 0, "%s", r);
}

Test(cmd, command_getkeys)
{
    cr_assert_str_eq(run("COMMAND GETKEYS cl.throttle user123 15 30 60"),
                     "*1\r\n$7\r\nuser123\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYS del a b c"), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYS ping x"), "-ERR The command has no key arguments\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYS nosuch x"), "-ERR Invalid command specified\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYS get a b"),
                     "-ERR Invalid number of arguments specified for command\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYS get"),
                     "-ERR wrong number of arguments for 'command|getkeys' command\r\n");
    cr_assert_str_eq(run("COMMAND GETKEYSANDFLAGS set a b"),
                     "*1\r\n*2\r\n$1\r\na\r\n*2\r\n+OW\r\n+update\r\n");
}

Test(cmd, command_list_and_errors)
{
    cr_assert_str_eq(run("COMMAND LIST FILTERBY PATTERN cl.*"), "*1\r\n$11\r\ncl.throttle\r\n");
    cr_assert_str_eq(run("COMMAND LIST FILTERBY ACLCAT transaction"),
                     "*5\r\n$5\r\nmulti\r\n$4\r\nexec\r\n$7\r\ndiscard\r\n$5\r\nwatch\r\n$7\r\nunwatch\r\n");
    cr_assert_str_eq(run("COMMAND LIST FILTERBY MODULE x"), "*0\r\n");
    cr_assert_str_eq(run("COMMAND LIST FILTERBY nope x"), "-ERR syntax error\r\n");
    const char *r = run("COMMAND LIST");
    assert_one_value(r);
    cr_assert_str_eq(run("COMMAND xyz"), "-ERR unknown subcommand 'xyz'. Try COMMAND HELP.\r\n");
    cr_assert_str_eq(run("COMMAND COUNT x"),
                     "-ERR wrong number of arguments for 'command|count' command\r\n");
    r = run("COMMAND HELP");
    assert_one_value(r);
    cr_assert(r[0] == '*' && strstr(r, "+GETKEYS <full-command>\r\n") != NULL);
}

/* ---- INFO ---- */

Test(cmd, info_default_sections)
{
    const char *r = run("INFO");
    assert_one_value(r);
    cr_assert_not_null(strstr(r, "\r\n# Server\r\nredis_version:"));
    cr_assert_not_null(strstr(r, "\r\nloading:0\r\n"));
    cr_assert_not_null(strstr(r, "\r\nredis_mode:standalone\r\n"));
    cr_assert_not_null(strstr(r, "\r\ntcp_port:7379\r\n"));
    cr_assert_not_null(strstr(r, "\r\nrole:master\r\n"));
    cr_assert_not_null(strstr(r, "\r\ninstantaneous_ops_per_sec:"));
    cr_assert_not_null(strstr(r, "\r\n\r\n# Keyspace\r\n"));
    cr_assert_null(strstr(r, "db0:"), "empty keyspace shows no db0 line");
    cr_assert_null(strstr(r, "# Commandstats"), "commandstats is not a default section");
}

Test(cmd, info_keyspace_after_set)
{
    cr_assert_str_eq(run("SET k v"), "+OK\r\n");
    cr_assert_not_null(strstr(run("INFO"), "\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"));
    cr_assert_str_eq(run("INFO keyspace"),
                     "$44\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n");
}

Test(cmd, info_unknown_section_is_empty)
{
    cr_assert_str_eq(run("INFO nonsense"), "$0\r\n\r\n");
    const char *r = run("INFO nonsense cluster");
    cr_assert_str_eq(r, "$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n");
}

Test(cmd, info_sections_in_redis_order)
{
    const char *r = run("INFO keyspace CPU server");
    assert_one_value(r);
    const char *a = strstr(r, "# Server\r\n"), *b = strstr(r, "\r\n\r\n# CPU\r\n"),
               *c = strstr(r, "# Keyspace");
    cr_assert(a != NULL && b != NULL && c != NULL && a < b && b < c, "%s", r);
    cr_assert_null(strstr(r, "# Memory"));
}

Test(cmd, info_commandstats_and_errorstats)
{
    run("SET k 1");
    run("INCR k");
    run("INCR k");
    run("GET");        /* rejected: arity */
    run("INCRBY k x"); /* failed: not an integer */
    run("nosuchcommand");
    const char *r = run("INFO all");
    assert_one_value(r);
    cr_assert_not_null(strstr(r, "\r\ncmdstat_incr:calls=2,usec="), "%s", r);
    cr_assert_not_null(strstr(r, ",rejected_calls=0,failed_calls=0\r\n"));
    cr_assert_not_null(strstr(r, "\r\ncmdstat_get:calls=0,usec=0,usec_per_call=0.00,"
                                 "rejected_calls=1,failed_calls=0\r\n"),
                       "%s", r);
    cr_assert_not_null(strstr(r, ",rejected_calls=0,failed_calls=1\r\n"));
    cr_assert_not_null(strstr(r, "\r\nerrorstat_ERR:count=3\r\n"), "%s", r);
    cr_assert_not_null(strstr(r, "\r\ntotal_error_replies:3\r\n"), "%s", r);
    cr_assert_not_null(strstr(r, "\r\ntotal_commands_processed:7\r\n"), "%s", r);
    cr_assert_null(strstr(r, "cmdstat_ping"));
}

Test(cmd, info_cl_throttle_stat_keeps_dot)
{
    run("CL.THROTTLE user123 15 30 60");
    cr_assert_not_null(strstr(run("INFO commandstats"), "\r\ncmdstat_cl.throttle:calls=1,"));
}

/* ---- SLOWLOG ---- */

Test(cmd, slowlog_len_reset)
{
    cr_assert_str_eq(run("SLOWLOG LEN"), ":0\r\n");
    conf.slowlog_log_slower_than = 0; /* log every command */
    run("PING");
    /* An entry is added after its command has answered: LEN sees PING only. */
    cr_assert_str_eq(run("SLOWLOG LEN"), ":1\r\n");
    cr_assert_str_eq(run("SLOWLOG LEN"), ":2\r\n");
    cr_assert_str_eq(run("SLOWLOG RESET"), "+OK\r\n");
    cr_assert_str_eq(run("SLOWLOG LEN"), ":1\r\n"); /* the RESET itself */
    conf.slowlog_log_slower_than = -1;
    cr_assert_str_eq(run("SLOWLOG RESET"), "+OK\r\n");
    cr_assert_str_eq(run("SLOWLOG LEN"), ":0\r\n");
}

Test(cmd, slowlog_get_entry_shape)
{
    conf.slowlog_log_slower_than = 0;
    const char *args[] = {"ECHO", "hi"};
    runv(2, args);
    sess.name = strdup("worker-1");
    const char *r = run("SLOWLOG GET 1");
    /* [id, unix time, duration, [args], client address, client name] */
    cr_assert(STARTS(r, "*1\r\n*6\r\n:0\r\n:"), "%s", r);
    cr_assert_not_null(strstr(r, "\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n$0\r\n\r\n$0\r\n\r\n"), "%s",
                       r);
    r = run("SLOWLOG GET -1");
    assert_one_value(r);
    cr_assert(STARTS(r, "*2\r\n*6\r\n:1\r\n"), "newest first: %s", r);
    cr_assert_not_null(strstr(r, "$7\r\nSLOWLOG\r\n$3\r\nGET\r\n$1\r\n1\r\n$0\r\n\r\n"
                                 "$8\r\nworker-1\r\n"),
                       "%s", r);
    cr_assert_str_eq(run("SLOWLOG GET 0"), "*0\r\n");
    cr_assert_str_eq(run("SLOWLOG GET -2"), "-ERR count should be greater than or equal to -1\r\n");
    cr_assert_str_eq(run("SLOWLOG GET x"), "-ERR count should be greater than or equal to -1\r\n");
    cr_assert_str_eq(run("SLOWLOG GET 1 2"),
                     "-ERR unknown subcommand or wrong number of arguments for 'GET'. "
                     "Try SLOWLOG HELP.\r\n");
    cr_assert_str_eq(run("SLOWLOG xyz"), "-ERR unknown subcommand 'xyz'. Try SLOWLOG HELP.\r\n");
    cr_assert_str_eq(run("SLOWLOG LEN x"),
                     "-ERR wrong number of arguments for 'slowlog|len' command\r\n");
}

Test(cmd, slowlog_cuts_arguments_and_redacts)
{
    conf.slowlog_log_slower_than = 0;
    /* DEL with 40 arguments, one of them 200 bytes. */
    const char *args[40];
    char names[40][16];
    char big[201];
    memset(big, 'x', 200);
    big[200] = '\0';
    args[0] = "DEL";
    args[1] = big;
    for (int i = 2; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "k%d", i);
        args[i] = names[i];
    }
    runv(40, args);
    const char *r = run("SLOWLOG GET 1");
    assert_one_value(r);
    cr_assert_not_null(strstr(r, "\r\n*32\r\n$3\r\nDEL\r\n$147\r\nxxxx"), "%s", r);
    cr_assert_not_null(strstr(r, "x... (72 more bytes)\r\n$2\r\nk2\r\n"), "%s", r);
    cr_assert_not_null(strstr(r, "$3\r\nk30\r\n$22\r\n... (9 more arguments)\r\n"), "%s", r);

    run("AUTH topsecret");
    r = run("SLOWLOG GET 1");
    cr_assert_not_null(strstr(r, "*2\r\n$4\r\nAUTH\r\n$10\r\n(redacted)\r\n"), "%s", r);
    cr_assert_null(strstr(r, "topsecret"));
}

Test(cmd, slowlog_keeps_max_len_newest)
{
    conf.slowlog_log_slower_than = 0;
    conf.slowlog_max_len = 2;
    run("PING a");
    run("PING b");
    run("PING c");
    cr_assert_str_eq(run("SLOWLOG LEN"), ":2\r\n");
    const char *r = run("SLOWLOG GET");
    assert_one_value(r);
    cr_assert(STARTS(r, "*2\r\n*6\r\n:3\r\n"), "%s", r);
    cr_assert_null(strstr(r, "$1\r\nb\r\n"), "%s", r);
    cr_assert_not_null(strstr(r, "$1\r\nc\r\n"), "%s", r);
}

/* ---- LATENCY ---- */

Test(cmd, latency_answers_as_redis_without_samples)
{
    cr_assert_str_eq(run("LATENCY LATEST"), "*0\r\n");
    cr_assert_str_eq(run("LATENCY HISTORY command"), "*0\r\n");
    cr_assert_str_eq(run("LATENCY RESET"), ":0\r\n");
    const char *r = run("LATENCY DOCTOR");
    assert_one_value(r);
    cr_assert_eq(r[0], '$');
    cr_assert_str_eq(run("LATENCY xyz"), "-ERR unknown subcommand 'xyz'. Try LATENCY HELP.\r\n");
    cr_assert_str_eq(run("LATENCY LATEST x"),
                     "-ERR wrong number of arguments for 'latency|latest' command\r\n");
}
