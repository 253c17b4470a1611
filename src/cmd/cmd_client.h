/* cmd_client.h - CLIENT (cmd_client.c), and the connection names HELLO and RESET set too. */
#ifndef RLIMITD_CMD_CLIENT_H
#define RLIMITD_CMD_CLIENT_H

#include "cmd_internal.h"

/* Redis's refusal of a name with spaces, newlines or other non-printable bytes. */
extern const char client_bad_name[];
/* Whether a client name (or library name/version) has only printable non-space bytes. */
int client_valid_name(const char *p, size_t len);
/* Replaces a session's name field (a copy of p, or NULL for len 0) under env->names_lock, which
 * CLIENT LIST on other threads reads them under. */
void client_set_str(struct cmd_env *env, char **dst, const char *p, size_t len);
/* The subcommand argv[1] names when argc is wrong for it (cmd_def.sub_arity), else NULL. */
const char *client_sub_arity(int argc, char **argv, const size_t *lens);
/* The CLIENT command's handler (its row is in cmd_server.c's table). */
void cmd_client(struct cmd_ctx *x);

#endif
