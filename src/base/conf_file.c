/* conf_file.c - reading a configuration file (conf.h's conf_load_file): each line split into
 * words as redis.conf's grammar has them, and set through conf_set as a directive of the file. */
#include "rlimitd/conf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "rlimitd/util.h"

/* Arguments on one file line: bind's maximum plus the directive name, and some slack so that
 * an overlong bind line gets bind's own message. */
#define LINE_ARGS_MAX (CONF_MAX_BIND * 2 + 2)

static void file_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void file_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Splits one line into words in place with the grammar redis.conf shares with redis-cli
 * (util_split_word). Returns the word count (0 for a blank or comment line), or -1 with *why set.
 * lens[] gets each word's length, which is how an embedded \x00 is noticed. */
static int split_line(char *line, const char **argv, size_t *lens, int max, const char **why)
{
    size_t len = strlen(line), pos = 0;
    int argc = 0;

    for (;;) {
        while (pos < len && util_is_space((unsigned char)line[pos]))
            pos++;
        if (pos == len || (argc == 0 && line[pos] == '#'))
            return argc;
        if (argc == max) {
            *why = "too many arguments";
            return -1;
        }
        char *out = line + pos;
        long n = util_split_word(line, len, &pos, out);
        if (n < 0) {
            *why = "unbalanced quotes";
            return -1;
        }
        out[n] = '\0';
        argv[argc] = out;
        lens[argc] = (size_t)n;
        argc++;
    }
}

int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, rc = 0;

    if (f == NULL) {
        file_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while ((n = getline(&line, &cap, f)) != -1) {
        const char *argv[LINE_ARGS_MAX];
        size_t lens[LINE_ARGS_MAX];
        const char *why = NULL;
        char reason[512];
        int argc;

        lineno++;
        if (strlen(line) != (size_t)n) {
            file_err(err, errlen, "%s:%d: NUL byte in line", path, lineno);
            rc = -1;
            break;
        }
        argc = split_line(line, argv, lens, LINE_ARGS_MAX, &why);
        for (int i = 0; i < argc && why == NULL; i++)
            if (strlen(argv[i]) != lens[i])
                why = "NUL byte in line";
        if (argc < 0 || why != NULL) {
            file_err(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
            break;
        }
        if (argc == 0)
            continue;
        if (conf_set(c, argv[0], argc - 1, argv + 1, 0, reason, sizeof reason) != 0) {
            file_err(err, errlen, "%s:%d: %s", path, lineno, reason);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        file_err(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}
