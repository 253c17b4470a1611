/* cmd_helpers.c - what every handler shares: strict argument parsing, Redis's common error
 * replies (syntax, WRONGTYPE, OOM, ...) and the replies of commands with subcommands (unknown
 * subcommand, wrong arity, HELP) (cmd_internal.h). */
#include "cmd_internal.h"

#include <stdint.h>

#include "rlimitd/util.h"

int arg_i64(struct cmd_ctx *x, int i, int64_t *out)
{
    if (util_parse_i64(x->argv[i], x->lens[i], out) != 0) {
        reply_error(x->out, "ERR value is not an integer or out of range");
        return -1;
    }
    return 0;
}

int arg_is(const struct cmd_ctx *x, int i, const char *lit)
{
    return i < x->argc && util_eq_nocase(x->argv[i], x->lens[i], lit);
}

void reply_syntax_error(struct rbuf *out)
{
    reply_error(out, "ERR syntax error");
}

void reply_ks_error(struct rbuf *out, int rc)
{
    switch (rc) {
    case KS_WRONGTYPE:
        reply_error(out, "WRONGTYPE Operation against a key holding the wrong kind of value");
        break;
    case KS_OOM:
        /* Redis's text, verbatim (COMMANDS.md, Wire protocol). */
        reply_error(out, "OOM command not allowed when used memory > 'maxmemory'.");
        break;
    case KS_NOTINT:
        reply_error(out, "ERR value is not an integer or out of range");
        break;
    case KS_OVERFLOW:
        reply_error(out, "ERR increment or decrement would overflow");
        break;
    default:
        reply_errorf(out, "ERR internal error %d", rc);
        break;
    }
}

/* Subcommand errors and HELP replies, in Redis's texts, for the container commands. */
void reply_subcmd_unknown(struct cmd_ctx *x, const char *cmd)
{
    /* Redis's text; it cuts the echoed name at 128 bytes. */
    reply_errorf(x->out, "ERR unknown subcommand '%.*s'. Try %s HELP.",
                 (int)(x->lens[1] > 128 ? 128 : x->lens[1]), x->argv[1], cmd);
}

void reply_subcmd_arity(struct cmd_ctx *x, const char *cmd, const char *sub)
{
    reply_errorf(x->out, "ERR wrong number of arguments for '%s|%s' command", cmd, sub);
}

void reply_help_lines(struct rbuf *out, const char *const *lines)
{
    int64_t n = 0;
    while (lines[n] != NULL)
        n++;
    reply_array(out, n);
    for (int64_t i = 0; i < n; i++)
        reply_simple(out, lines[i]);
}
