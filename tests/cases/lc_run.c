/* lc_run.c - runs the shared limiter cases (limiter_cases.h) over a hiredis connection. */
#include "limiter_cases.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

enum { MAX_ARGS = 16, ARG_BYTES = 256 };

struct argv_buf {
    int argc;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    char bytes[MAX_ARGS][ARG_BYTES];
};

static int hexval(char c)
{
    return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

/* Splits a table command line into binary-safe arguments (see limiter_cases.h). */
static void split(const char *line, struct argv_buf *a)
{
    a->argc = 0;
    const char *p = line;
    while (*p) {
        cr_assert(a->argc < MAX_ARGS, "too many arguments in \"%s\"", line);
        char *out = a->bytes[a->argc];
        size_t n = 0;
        if (p[0] == '"' && p[1] == '"' && (p[2] == ' ' || p[2] == '\0')) {
            p += 2;
        } else {
            while (*p && *p != ' ') {
                cr_assert(n < ARG_BYTES, "argument too long in \"%s\"", line);
                if (p[0] == '\\' && p[1] == 'x' && isxdigit((unsigned char)p[2]) &&
                    isxdigit((unsigned char)p[3])) {
                    out[n++] = (char)(hexval(p[2]) * 16 + hexval(p[3]));
                    p += 4;
                } else {
                    out[n++] = *p++;
                }
            }
        }
        a->argv[a->argc] = out;
        a->lens[a->argc] = n;
        a->argc++;
        if (*p == ' ')
            p++;
    }
}

/* Appends n bytes, or as many as fit (the buffer is only for messages and comparison). */
static void put(char *buf, size_t len, size_t *off, const char *s, size_t n)
{
    if (*off + 1 >= len)
        return;
    if (n > len - *off - 1)
        n = len - *off - 1;
    memcpy(buf + *off, s, n);
    *off += n;
    buf[*off] = '\0';
}

static void put_str(char *buf, size_t len, size_t *off, const char *s)
{
    put(buf, len, off, s, strlen(s));
}

static void format_into(const redisReply *r, char *buf, size_t len, size_t *off, int nested)
{
    char num[32];
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(num, sizeof num, nested ? "%lld" : ":%lld", r->integer);
        put_str(buf, len, off, num);
        break;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STRING:
        put_str(buf, len, off, r->type == REDIS_REPLY_STATUS  ? "+"
                               : r->type == REDIS_REPLY_ERROR ? "-"
                                                              : "$");
        put(buf, len, off, r->str, r->len);
        break;
    case REDIS_REPLY_NIL:
        put_str(buf, len, off, "(nil)");
        break;
    case REDIS_REPLY_ARRAY:
        put_str(buf, len, off, "[");
        for (size_t i = 0; i < r->elements; i++) {
            if (i)
                put_str(buf, len, off, " ");
            format_into(r->element[i], buf, len, off, 1);
        }
        put_str(buf, len, off, "]");
        break;
    default:
        snprintf(num, sizeof num, "(type %d)", r->type);
        put_str(buf, len, off, num);
        break;
    }
}

void lc_format(const redisReply *r, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    format_into(r, buf, len, &off, 0);
}

/* 1 if the compact reply got satisfies want. */
static int matches(const redisReply *r, const char *got, const char *want)
{
    long long lo, hi;
    char tail;
    if (want[0] == '~')
        return fnmatch(want + 1, got, 0) == 0;
    if (want[0] == ':' && sscanf(want, ":%lld..%lld%c", &lo, &hi, &tail) == 2)
        return r->type == REDIS_REPLY_INTEGER && r->integer >= lo && r->integer <= hi;
    return strcmp(got, want) == 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static redisReply *command(redisContext *c, struct argv_buf *a, const char *line)
{
    redisReply *r = redisCommandArgv(c, a->argc, a->argv, a->lens);
    cr_assert(r != NULL, "\"%s\": connection error: %s", line, c->errstr);
    return r;
}

void lc_run(redisContext *c, const struct lc_case *cs, enum lc_target target)
{
    struct argv_buf a;
    char got[1024];
    for (int i = 0; i < LC_MAX_STEPS && cs->steps[i].cmd != NULL; i++) {
        const struct lc_step *s = &cs->steps[i];
        if (strncmp(s->cmd, "@sleep ", 7) == 0) {
            sleep_ms(atol(s->cmd + 7));
            continue;
        }
        if (strncmp(s->cmd, "@gone ", 6) == 0) {
            char line[300];
            snprintf(line, sizeof line, "EXISTS %s", s->cmd + 6);
            split(line, &a);
            long long deadline = now_ms() + 10000;
            for (;;) {
                redisReply *r = command(c, &a, line);
                long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
                freeReplyObject(r);
                if (n == 0)
                    break;
                cr_assert(now_ms() < deadline, "%s step %d: %s did not expire within 10 s",
                          cs->name, i + 1, s->cmd + 6);
                sleep_ms(20);
            }
            continue;
        }
        const char *want = target == LC_MODULE && s->want_module ? s->want_module : s->want;
        split(s->cmd, &a);
        redisReply *r = command(c, &a, s->cmd);
        lc_format(r, got, sizeof got);
        int ok = matches(r, got, want);
        freeReplyObject(r);
        cr_assert(ok, "%s step %d: %s\n  want %s\n  got  %s", cs->name, i + 1, s->cmd, want, got);
    }
}
