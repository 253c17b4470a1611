/* lc_run.c - runs the shared limiter cases (limiter_cases.h) over a hiredis connection. */
#include "limiter_cases.h"
#include "limit_model.h"

#include <ctype.h>
#include <inttypes.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <criterion/criterion.h>

enum { MAX_ARGS = 40, ARG_BYTES = 256 };

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

/* What the models know about the limiter keys a case touched (limit_model.h). */
enum { MAX_KEYS = 16, KEY_BYTES = ARG_BYTES * 2 + 8 };
struct lc_key {
    char name[KEY_BYTES];
    size_t len;
    int window; /* 0: a CL.THROTTLE key, 1: an ISALLOWED window */
    int unknown; /* a TAT past the model's reach (2262): PTTL unchecked */
    struct lm_gcra g;
    struct lm_window w;
};
struct lc_model {
    struct lc_key keys[MAX_KEYS];
    int n;
};

static struct lc_key *find_key(struct lc_model *m, const char *name, size_t len, int window,
                               int create)
{
    for (int i = 0; i < m->n; i++)
        if (m->keys[i].len == len && memcmp(m->keys[i].name, name, len) == 0)
            return &m->keys[i];
    if (!create)
        return NULL;
    cr_assert(m->n < MAX_KEYS && len <= KEY_BYTES, "too many or too long keys for the model");
    struct lc_key *k = &m->keys[m->n++];
    memcpy(k->name, name, len);
    k->len = len;
    k->window = window;
    lm_gcra_reset(&k->g);
    lm_window_reset(&k->w);
    return k;
}

static void forget_key(struct lc_model *m, const char *name, size_t len)
{
    struct lc_key *k = find_key(m, name, len, 0, 0);
    if (k != NULL) {
        lm_gcra_reset(&k->g);
        lm_window_reset(&k->w);
        k->unknown = 0;
    }
}

/* 1 if a tracked key may have expired by `after` (ns). */
static int may_have_expired(const struct lc_key *k, int64_t after)
{
    if (k->window)
        return k->w.n > 0 && k->w.lo[k->w.n - 1] + k->w.period_ms <= after / 1000000;
    return k->g.tat_lo > -(INT64_C(1) << 60) && k->g.tat_lo <= after;
}

static int is_cmd(const struct argv_buf *a, const char *name, int argc)
{
    return a->argc == argc && strlen(name) == a->lens[0] &&
           strncasecmp(a->argv[0], name, a->lens[0]) == 0;
}

static int64_t arg_int(const struct argv_buf *a, int i)
{
    char buf[32];
    size_t n = a->lens[i] < sizeof buf - 1 ? a->lens[i] : sizeof buf - 1;
    memcpy(buf, a->argv[i], n);
    buf[n] = '\0';
    return strtoll(buf, NULL, 10);
}

/* Checks a time-dependent reply against the models. Returns 1 if the step's reply depends on
 * the time (and the model checked it), 0 if it does not. Fails the test on an inconsistent reply.
 */
static int model_step(struct lc_model *m, const struct lc_case *cs, int step, const char *line,
                      const struct argv_buf *a, const redisReply *r, int64_t before, int64_t after)
{
    char why[512];
    if ((is_cmd(a, "CL.THROTTLE", 5) || is_cmd(a, "CL.THROTTLE", 6)) &&
        r->type == REDIS_REPLY_ARRAY && r->elements == 5) {
        long long v[5];
        for (int i = 0; i < 5; i++) {
            cr_assert(r->element[i]->type == REDIS_REPLY_INTEGER, "%s step %d: %s: not integers",
                      cs->name, step, line);
            v[i] = r->element[i]->integer;
        }
        struct lc_key *k = find_key(m, a->argv[1], a->lens[1], 0, 1);
        int64_t q = a->argc == 6 ? arg_int(a, 5) : 1;
        int rc = lm_gcra_check(&k->g, arg_int(a, 2), arg_int(a, 3), arg_int(a, 4), q, before, after,
                               v, why, sizeof why);
        cr_assert(rc == 0, "%s step %d: %s\n  %s", cs->name, step, line, why);
        return 1;
    }
    if (a->argc >= 8 && is_cmd(a, "THROTTLE.ALL", a->argc) && r->type == REDIS_REPLY_ARRAY) {
        /* Each limit's five integers are what CL.THROTTLE answers for it after the decision: its
         * own call when admitted or when it refused, a peek (quantity 0) when another refused.
         * So the CL.THROTTLE model checks each, with the time measured around the call. */
        int n = (int)arg_int(a, 1);
        cr_assert(r->elements == (size_t)(3 + n), "%s step %d: %s: %zu elements", cs->name, step,
                  line, r->elements);
        int refused = r->element[0]->integer != 0;
        for (int i = 0; i < n; i++) {
            const redisReply *e = r->element[3 + i];
            cr_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 5, "%s step %d: %s: limit %d",
                      cs->name, step, line, i);
            long long v[5];
            for (int j = 0; j < 5; j++)
                v[j] = e->element[j]->integer;
            int at = 2 + n + 5 * i; /* LIMIT max_burst count period quantity */
            int64_t q = refused && !v[0] ? 0 : arg_int(a, at + 4);
            struct lc_key *k = find_key(m, a->argv[2 + i], a->lens[2 + i], 0, 1);
            int rc = lm_gcra_check(&k->g, arg_int(a, at + 1), arg_int(a, at + 2),
                                   arg_int(a, at + 3), q, before, after, v, why, sizeof why);
            cr_assert(rc == 0, "%s step %d: %s\n  limit %d: %s", cs->name, step, line, i, why);
        }
        return 1;
    }
    if ((is_cmd(a, "GCRA", 5) || is_cmd(a, "GCRA", 7)) && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 5 && r->element[0]->type == REDIS_REPLY_INTEGER) {
        /* Its reply is the table's to check; the model only learns the TAT it stored. */
        char pbuf[64];
        size_t n = a->lens[4] < sizeof pbuf - 1 ? a->lens[4] : sizeof pbuf - 1;
        memcpy(pbuf, a->argv[4], n);
        pbuf[n] = '\0';
        double us = strtod(pbuf, NULL) * 1e6 / (double)arg_int(a, 3);
        int64_t ei = (int64_t)(us + 0.5), tokens = a->argc == 7 ? arg_int(a, 6) : 1, inc;
        /* A TAT the model's nanoseconds cannot hold (past 2262): the model forgets the key, and
         * the table's exact replies are all there is. */
        if (__builtin_mul_overflow(ei < 1 ? 1 : ei, tokens, &inc) ||
            inc > INT64_MAX / 1000 - lm_now_ns() / 1000 - 1000000000LL * 3600) {
            find_key(m, a->argv[1], a->lens[1], 0, 1)->unknown = 1;
            return 0;
        }
        struct lc_key *k = find_key(m, a->argv[1], a->lens[1], 0, 1);
        k->unknown = 0;
        lm_gcra_note_redis(&k->g, ei < 1 ? 1 : ei, tokens, before, after,
                           r->element[0]->integer != 0);
        return 0;
    }
    if (is_cmd(a, "ISALLOWED", 5) && r->type == REDIS_REPLY_INTEGER) {
        int64_t max_count = arg_int(a, 4);
        if (max_count >= LM_WINDOW_MAX - 1)
            return 0; /* beyond the model; the table's first-call answers need no clock */
        char key[KEY_BYTES];
        size_t n = 0;
        memcpy(key + n, "hist:{", 6), n += 6;
        memcpy(key + n, a->argv[1], a->lens[1]), n += a->lens[1];
        memcpy(key + n, "}:", 2), n += 2;
        memcpy(key + n, a->argv[2], a->lens[2]), n += a->lens[2];
        struct lc_key *k = find_key(m, key, n, 1, 1);
        int rc = lm_window_check(&k->w, arg_int(a, 3), max_count, before, after, r->integer, why,
                                 sizeof why);
        cr_assert(rc == 0, "%s step %d: %s\n  %s", cs->name, step, line, why);
        return 1;
    }
    if ((is_cmd(a, "PTTL", 2) || is_cmd(a, "TTL", 2)) && r->type == REDIS_REPLY_INTEGER) {
        struct lc_key *k = find_key(m, a->argv[1], a->lens[1], 0, 0);
        if (k == NULL || k->unknown)
            return 0;
        if (r->integer == -2 && may_have_expired(k, after))
            return 1;
        long long lo, hi;
        if (k->window)
            lm_window_pttl_range(&k->w, before, after, &lo, &hi);
        else
            lm_gcra_pttl_range(&k->g, before, after, &lo, &hi);
        if (toupper((unsigned char)a->argv[0][0]) == 'T') {
            lo = lo / 1000 - 1;
            hi = hi / 1000 + 1;
        }
        cr_assert(r->integer >= lo && r->integer <= hi,
                  "%s step %d: %s = %lld, but the replies so far and the time measured around "
                  "the calls put it in [%lld, %lld]",
                  cs->name, step, line, r->integer, lo, hi);
        return 1;
    }
    if (is_cmd(a, "DEL", a->argc) || is_cmd(a, "UNLINK", a->argc))
        for (int i = 1; i < a->argc; i++)
            forget_key(m, a->argv[i], a->lens[i]);
    return 0;
}

/* The table's exact replies hold when a case runs "in quick succession": CL.THROTTLE's worked example (COMMANDS.md)
 * is exact while its calls take less than a second. */
#define QUICK_NS INT64_C(1000000000)

void lc_run(redisContext *c, const struct lc_case *cs, enum lc_target target)
{
    struct argv_buf a;
    char got[1024];
    static struct lc_model m; /* big; one case runs at a time in a worker */
    m.n = 0;
    char last_bulk[ARG_BYTES] = "";
    size_t last_len = 0;
    int64_t span_start = lm_now_ns();
    /* LC_STEP_DELAY_MS=N: a pause before every step, to try the model on a "slow machine". */
    const char *delay_env = getenv("LC_STEP_DELAY_MS");
    long delay = delay_env != NULL ? atol(delay_env) : 0;
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
            forget_key(&m, a.argv[1], a.lens[1]);
            span_start = lm_now_ns(); /* a fresh start for "quick succession" */
            continue;
        }
        const char *want = target == LC_MODULE && s->want_module ? s->want_module : s->want;
        split(s->cmd, &a);
        /* "$LAST": the last bulk string a step got (a lease id). */
        for (int k = 0; k < a.argc; k++)
            if (a.lens[k] == 5 && memcmp(a.argv[k], "$LAST", 5) == 0) {
                memcpy(a.bytes[k], last_bulk, last_len);
                a.lens[k] = last_len;
            }
        if (delay > 0)
            sleep_ms(delay);
        int64_t before = lm_now_ns();
        redisReply *r = command(c, &a, s->cmd);
        int64_t after = lm_now_ns();
        lc_format(r, got, sizeof got);
        if (r->type == REDIS_REPLY_STRING && r->len < sizeof last_bulk) {
            memcpy(last_bulk, r->str, r->len);
            last_len = r->len;
        }
        long long expirable = 0; /* tracked keys that may have expired by now */
        for (int k = 0; k < m.n; k++)
            expirable += may_have_expired(&m.keys[k], after);
        int timed = model_step(&m, cs, i + 1, s->cmd, &a, r, before, after);
        int quick = after - span_start < QUICK_NS;
        int ok;
        if (strcmp(want, "%model") == 0) {
            /* Bounds derived from the time measured around the calls, nothing fixed. */
            cr_assert(timed, "%s step %d: %s: %%model on a reply the model does not cover",
                      cs->name, i + 1, s->cmd);
            ok = 1;
        } else if (quick || !timed) {
            ok = matches(r, got, want);
            /* Counting keys after a slow run: the limiter keys that may have expired since may
             * be missing, no others. */
            long long n;
            char tail;
            if (!ok && !quick && r->type == REDIS_REPLY_INTEGER &&
                (is_cmd(&a, "DBSIZE", 1) || is_cmd(&a, "EXISTS", a.argc) ||
                 is_cmd(&a, "DEL", a.argc) || is_cmd(&a, "UNLINK", a.argc)) &&
                sscanf(want, ":%lld%c", &n, &tail) == 1)
                ok = r->integer <= n && r->integer >= n - expirable;
            /* Other commands on a limiter key that may have expired may find nothing. */
            struct lc_key *k = a.argc >= 2 ? find_key(&m, a.argv[1], a.lens[1], 0, 0) : NULL;
            if (!ok && !quick && k != NULL && may_have_expired(k, after))
                ok = strcmp(got, "+none") == 0 || strcmp(got, "(nil)") == 0;
        } else {
            /* Slower than the table assumes: the model above has checked the reply. */
            ok = 1;
        }
        freeReplyObject(r);
        cr_assert(ok, "%s step %d: %s\n  want %s\n  got  %s%s", cs->name, i + 1, s->cmd, want, got,
                  quick ? "" : "\n  (the case has run for over a second)");
    }
}
