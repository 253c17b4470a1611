/* argv_line.h - a command line split at spaces into argv/lens, as the parsers under test take
 * them (no quoting: these tests never need it). */
#ifndef TESTS_UNIT_ARGV_LINE_H
#define TESTS_UNIT_ARGV_LINE_H

#include <criterion/criterion.h>
#include <string.h>

struct line {
    int argc;
    const char *argv[200];
    size_t lens[200];
    char buf[4096];
};

static inline void split(struct line *l, const char *text)
{
    cr_assert_lt(strlen(text), sizeof l->buf);
    strcpy(l->buf, text);
    l->argc = 0;
    for (char *p = strtok(l->buf, " "); p != NULL; p = strtok(NULL, " ")) {
        cr_assert_lt(l->argc, 200);
        l->argv[l->argc] = p;
        l->lens[l->argc] = strlen(p);
        l->argc++;
    }
}

#endif
