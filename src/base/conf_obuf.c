/* conf_obuf.c - the value of client-output-buffer-limit: Redis 7.0's classes, syntax, errors
 * and CONFIG GET format (CONFIG.md "client-output-buffer-limit").
 *
 * A value is groups of four words, `<class> <hard> <soft> <soft-seconds>`; a value names only
 * the classes it changes, so redis.conf's three lines (one per class) and one CONFIG SET of all
 * three mean the same. The whole value is checked before anything changes. The number rules
 * are Redis's, quirks included, because a value copied from a Redis configuration must mean
 * what it meant there: sizes take only digits and a unit (no sign, no fraction; overflow wraps
 * as Redis's multiplication does), seconds are C's strtoll cut to an int and must not be
 * negative after the cut. */
#include "conf_obuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rlimitd/alloc.h"

static const char *const class_names[CONF_OBUF_CLASSES] = {"normal", "slave", "pubsub"};

static const char err_count[] = "Wrong number of arguments in buffer limit configuration.";
static const char err_class[] = "Invalid client class specified in buffer limit configuration.";
static const char err_number[] =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

/* One word of the value: a slice of one of the caller's strings. */
struct word {
    const char *p;
    size_t len;
};

/* Redis's names: replica is the new name of slave; master is a class Redis knows but refuses. */
static int class_of(const struct word *w)
{
    static const struct {
        const char *name;
        int k;
    } names[] = {{"normal", CONF_OBUF_NORMAL},
                 {"slave", CONF_OBUF_REPLICA},
                 {"replica", CONF_OBUF_REPLICA},
                 {"pubsub", CONF_OBUF_PUBSUB}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i].name) == w->len && strncasecmp(w->p, names[i].name, w->len) == 0)
            return names[i].k;
    return -1;
}

/* A size as Redis 7.0 reads one: digits, then nothing, b, k, kb, m, mb, g or gb (any case).
 * No digits reads as 0; more digits than fit saturate (strtoull), and the unit's product
 * wraps. A leading '-', any other character, or 128 digits or more are an error. */
static int parse_size(const struct word *w, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mul;
    } units[] = {{"", 1},          {"b", 1},           {"k", 1000},
                 {"kb", 1024},     {"m", 1000000},     {"mb", 1024 * 1024},
                 {"g", 1000000000}, {"gb", 1024 * 1024 * 1024}};
    size_t d = 0;
    while (d < w->len && w->p[d] >= '0' && w->p[d] <= '9')
        d++;
    if (d >= 128)
        return -1;
    const char *u = w->p + d;
    size_t ulen = w->len - d;
    uint64_t mul = 0;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].unit) == ulen && strncasecmp(u, units[i].unit, ulen) == 0)
            mul = units[i].mul;
    if (mul == 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < d; i++) {
        unsigned digit = (unsigned)(w->p[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) {
            v = UINT64_MAX;
            break;
        }
        v = v * 10 + digit;
    }
    *out = v * mul;
    return 0;
}

/* Seconds as Redis 7.0 reads them: strtoll (leading blanks and a sign allowed, saturating),
 * the whole word consumed, the result cut to an int, and not negative after the cut. */
static int parse_seconds(const struct word *w, int64_t *out)
{
    char buf[128];
    if (w->len >= sizeof(buf))
        return -1; /* longer than any number strtoll could end on */
    memcpy(buf, w->p, w->len);
    buf[w->len] = '\0';
    if (strlen(buf) != w->len)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    int32_t cut = (int32_t)(uint32_t)(uint64_t)v;
    if (*end != '\0' || cut < 0)
        return -1;
    *out = cut;
    return 0;
}

/* The words of the value. CONFIG SET gives one string split at every single space, as Redis
 * splits it (two spaces make an empty word, "" makes no word); a file line or a command-line
 * override gives words already split, or one word holding several separated by blanks. Returns
 * the word count; *ws is malloc'd (free it) or NULL. */
static int split(int argc, const char *const *argv, int config_set, struct word **ws)
{
    static const char blanks[] = " \t\r\n";
    size_t cap = 16;
    int n = 0;
    *ws = xmalloc(cap * sizeof(**ws));
#define PUSH(ptr, l)                                                    \
    do {                                                                \
        if ((size_t)n == cap) {                                         \
            cap *= 2;                                                   \
            *ws = xrealloc(*ws, cap * sizeof(**ws));                    \
        }                                                               \
        (*ws)[n].p = (ptr);                                             \
        (*ws)[n].len = (l);                                             \
        n++;                                                            \
    } while (0)
    if (argc == 1 && argv[0][0] != '\0' && config_set) {
        const char *p = argv[0];
        for (;;) {
            const char *sp = strchr(p, ' ');
            size_t len = sp != NULL ? (size_t)(sp - p) : strlen(p);
            PUSH(p, len);
            if (sp == NULL)
                break;
            p = sp + 1;
        }
    } else if (argc == 1 && argv[0][0] != '\0') {
        for (const char *p = argv[0] + strspn(argv[0], blanks); *p; p += strspn(p, blanks)) {
            size_t len = strcspn(p, blanks);
            PUSH(p, len);
            p += len;
        }
    } else if (argc == 1 && config_set) {
        /* CONFIG SET client-output-buffer-limit "": no words, nothing changes (as Redis). */
    } else {
        for (int i = 0; i < argc; i++)
            PUSH(argv[i], strlen(argv[i]));
    }
#undef PUSH
    return n;
}

int conf_obuf_set(struct conf_obuf_limit lim[CONF_OBUF_CLASSES], int argc,
                  const char *const *argv, int config_set, const char **err)
{
    struct word *ws;
    int n = split(argc, argv, config_set, &ws);
    struct conf_obuf_limit next[CONF_OBUF_CLASSES];
    int named[CONF_OBUF_CLASSES] = {0};
    const char *why = NULL;

    memcpy(next, lim, sizeof(next));
    if (n % 4 != 0)
        why = err_count;
    for (int i = 0; why == NULL && i < n; i += 4) {
        int k = class_of(&ws[i]);
        struct conf_obuf_limit l;
        if (k < 0)
            why = err_class;
        else if (parse_size(&ws[i + 1], &l.hard) != 0 || parse_size(&ws[i + 2], &l.soft) != 0 ||
                 parse_seconds(&ws[i + 3], &l.soft_seconds) != 0)
            why = err_number;
        else {
            next[k] = l;
            named[k] = 1;
        }
    }
    free(ws);
    if (why != NULL) {
        *err = why;
        return -1;
    }
    /* Atomic stores: the I/O threads read each field with CONF_GET (conf.h). */
    for (int k = 0; k < CONF_OBUF_CLASSES; k++) {
        if (!named[k])
            continue;
        __atomic_store_n(&lim[k].hard, next[k].hard, __ATOMIC_RELAXED);
        __atomic_store_n(&lim[k].soft, next[k].soft, __ATOMIC_RELAXED);
        __atomic_store_n(&lim[k].soft_seconds, next[k].soft_seconds, __ATOMIC_RELAXED);
    }
    return 0;
}

void conf_obuf_format(const struct conf_obuf_limit lim[CONF_OBUF_CLASSES], char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < CONF_OBUF_CLASSES && used < len; k++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s %" PRIu64 " %" PRIu64 " %" PRId64,
                                 k ? " " : "", class_names[k], lim[k].hard, lim[k].soft,
                                 lim[k].soft_seconds);
}
