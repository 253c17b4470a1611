/* cmd_slowlog.c - the SLOWLOG and LATENCY commands (the record itself is slowlog.c). */
#include <stdint.h>

#include "cmd_internal.h"
#include "rlimitd/util.h"
#include "slowlog.h"

static const char *const slowlog_help[] = {
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return the <count> newest entries of the slow log (default 10, -1 for all).",
    "    Each entry is: id, Unix time, duration in microseconds, arguments,",
    "    client address and client name.",
    "LEN",
    "    Return the number of entries in the slow log.",
    "RESET",
    "    Empty the slow log.",
    "HELP",
    "    Print this help.",
    NULL,
};

static void cmd_slowlog(struct cmd_ctx *x)
{
    struct slowlog *sl = x->env->slowlog;
    if (arg_is(x, 1, "GET")) {
        if (x->argc > 3) {
            reply_errorf(x->out,
                         "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                         "Try SLOWLOG HELP.",
                         (int)x->lens[1], x->argv[1]);
            return;
        }
        int64_t count = 10;
        if (x->argc == 3 && (util_parse_i64(x->argv[2], x->lens[2], &count) != 0 || count < -1)) {
            reply_error(x->out, "ERR count should be greater than or equal to -1");
            return;
        }
        if (sl == NULL)
            reply_array(x->out, 0);
        else
            slowlog_reply(sl, x->out, count);
    } else if (arg_is(x, 1, "LEN")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "slowlog", "len");
        else
            reply_int(x->out, sl != NULL ? (int64_t)slowlog_len(sl) : 0);
    } else if (arg_is(x, 1, "RESET")) {
        if (x->argc != 2) {
            reply_subcmd_arity(x, "slowlog", "reset");
            return;
        }
        if (sl != NULL)
            slowlog_reset(sl);
        reply_ok(x->out);
    } else if (arg_is(x, 1, "HELP")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "slowlog", "help");
        else
            reply_help_lines(x->out, slowlog_help);
    } else {
        reply_subcmd_unknown(x, "SLOWLOG");
    }
}

/* ---- LATENCY ----
 *
 * rlimitd has no latency monitor (Redis's is off by default too); the subcommands answer as a
 * Redis with no samples does, so monitoring tools that poll LATENCY LATEST keep working. */

static const char *const latency_help[] = {
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LATEST",
    "    Return the latest latency samples (rlimitd keeps none: always empty).",
    "HISTORY <event>",
    "    Return the samples of an event (always empty).",
    "RESET [<event> ...]",
    "    Reset latency data; returns the number of events reset (always 0).",
    "DOCTOR",
    "    Return a report on latency.",
    "HISTOGRAM [<command> ...]",
    "    Return latency histograms of commands (always empty).",
    "HELP",
    "    Print this help.",
    NULL,
};

static const char latency_doctor[] =
    "rlimitd does not sample latency events, so there is nothing to analyse. To find slow "
    "commands use SLOWLOG GET (see CONFIG GET slowlog-log-slower-than) and the usec_per_call "
    "figures of INFO commandstats.\n";

static void cmd_latency(struct cmd_ctx *x)
{
    if (arg_is(x, 1, "LATEST")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "latency", "latest");
        else
            reply_array(x->out, 0);
    } else if (arg_is(x, 1, "HISTORY")) {
        if (x->argc != 3)
            reply_subcmd_arity(x, "latency", "history");
        else
            reply_array(x->out, 0);
    } else if (arg_is(x, 1, "RESET")) {
        reply_int(x->out, 0);
    } else if (arg_is(x, 1, "DOCTOR")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "latency", "doctor");
        else
            reply_verbatim(x->out, "txt", latency_doctor, sizeof(latency_doctor) - 1);
    } else if (arg_is(x, 1, "GRAPH")) {
        if (x->argc != 3)
            reply_subcmd_arity(x, "latency", "graph");
        else
            reply_errorf(x->out, "ERR No samples available for event '%.*s'",
                         (int)(x->lens[2] > 128 ? 128 : x->lens[2]), x->argv[2]);
    } else if (arg_is(x, 1, "HISTOGRAM")) {
        reply_map(x->out, 0);
    } else if (arg_is(x, 1, "HELP")) {
        if (x->argc != 2)
            reply_subcmd_arity(x, "latency", "help");
        else
            reply_help_lines(x->out, latency_help);
    } else {
        reply_subcmd_unknown(x, "LATENCY");
    }
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_slowlog_table[] = {
    {"slowlog", -2, CMD_ADMIN | CMD_LOADING | CMD_STALE, 0, 0, 0,
     "admin slow dangerous", cmd_slowlog,
     {.summary = "A container for slow log commands", .since = "2.2.12", .group = "server",
      .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
    {"latency", -2, CMD_ADMIN | CMD_LOADING | CMD_STALE | CMD_NOSCRIPT, 0, 0, 0,
     "admin slow dangerous", cmd_latency,
     {.summary = "A container for latency commands", .since = "2.8.13", .group = "server",
      .complexity = "Depends on subcommand.",
      .extra = CMD_SHOW_CONTAINER}},
};
const int cmd_slowlog_count = (int)(sizeof(cmd_slowlog_table) / sizeof(cmd_slowlog_table[0]));
