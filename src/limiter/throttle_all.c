/* throttle_all.c - THROTTLE.ALL's argument rules and its all-or-nothing decision
 * (throttle_all.h, COMMANDS.md, THROTTLE.ALL). */
#include "rlimitd/throttle_all.h"

#include <stdio.h>
#include <string.h>

#include "rlimitd/util.h"
#include "rlimitd/wait.h"

static const char not_int[] = "value is not an integer or out of range";

static int fail(char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    return -1;
}

/* Keys are distinct: one state per key, so two limits on one key would be one TAT charged
 * twice. n <= 32, so the pairs are few. */
static int keys_distinct(const char *const *argv, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const char *a = argv[THROTTLE_ALL_FIRST_KEY + i], *b = argv[THROTTLE_ALL_FIRST_KEY + j];
            size_t la = lens[THROTTLE_ALL_FIRST_KEY + i];
            if (la == lens[THROTTLE_ALL_FIRST_KEY + j] && memcmp(a, b, la) == 0)
                return 0;
        }
    return 1;
}

int throttle_all_parse(int argc, const char *const *argv, const size_t *lens,
                       struct throttle_all_req *req, char *err, size_t errlen)
{
    int64_t n;
    if (argc < THROTTLE_ALL_MIN_ARGC)
        return fail(err, errlen, "wrong number of arguments for 'throttle.all' command");
    if (util_parse_i64(argv[1], lens[1], &n) != 0)
        return fail(err, errlen, not_int);
    if (n < 1 || n > THROTTLE_ALL_MAX_KEYS)
        return fail(err, errlen, "invalid numkeys: must be between 1 and 32");
    /* Redis's text (EVAL's) for a count that runs past the arguments. */
    if (n > argc - THROTTLE_ALL_FIRST_KEY)
        return fail(err, errlen, "Number of keys can't be greater than number of args");
    if (!keys_distinct(argv, lens, (int)n))
        return fail(err, errlen, "THROTTLE.ALL keys must be distinct");
    req->n = (int)n;
    int at = THROTTLE_ALL_FIRST_KEY + (int)n;
    for (int i = 0; i < req->n; i++, at += 5) {
        if (at >= argc || !util_eq_nocase(argv[at], lens[at], "limit"))
            return fail(err, errlen, at >= argc || wait_is_option(argv[at], lens[at])
                                         ? "THROTTLE.ALL needs one LIMIT per key"
                                         : "syntax error");
        if (at + 4 >= argc)
            return fail(err, errlen, "syntax error");
        int64_t v[4];
        for (int j = 0; j < 4; j++)
            if (util_parse_i64(argv[at + 1 + j], lens[at + 1 + j], &v[j]) != 0)
                return fail(err, errlen, not_int);
        const char *why;
        if (gcra_prepare(v[0], v[1], v[2], v[3], &req->lim[i], &why) != 0) {
            snprintf(err, errlen, "limit %d: %s", i, why);
            return -1;
        }
    }
    req->has_wait = 0;
    req->wait_ms = 0;
    if (at == argc)
        return 0;
    if (util_eq_nocase(argv[at], lens[at], "limit"))
        return fail(err, errlen, "THROTTLE.ALL needs one LIMIT per key");
    if (!wait_is_option(argv[at], lens[at]) || at + 2 != argc)
        return fail(err, errlen, "syntax error");
    const char *why;
    if (wait_parse_ms(argv[at + 1], lens[at + 1], &req->wait_ms, &why) != 0)
        return fail(err, errlen, why);
    req->has_wait = 1;
    return 0;
}

int throttle_all_decide(const struct throttle_all_req *req, int64_t now_ns, const int *has,
                        const int64_t *tat, struct gcra_result *per,
                        struct throttle_all_result *out, const char **err, int *err_index)
{
    out->limited = 0;
    out->index = -1;
    out->wait_ns = 0;
    for (int i = 0; i < req->n; i++) {
        if (gcra_step(&req->lim[i], now_ns, has[i], tat[i], &per[i], err) != 0) {
            *err_index = i;
            return -1;
        }
        if (!per[i].limited)
            continue;
        if (!out->limited)
            out->index = i;
        out->limited = 1;
        /* The latest of the limits' own waits; one that never passes makes the whole never. */
        if (out->wait_ns >= 0)
            out->wait_ns = per[i].wait_ns < 0 ? -1
                           : per[i].wait_ns > out->wait_ns ? per[i].wait_ns : out->wait_ns;
    }
    if (!out->limited) {
        out->retry_after = -1;
        return 0;
    }
    out->retry_after = out->wait_ns < 0 ? -1 : gcra_ceil_seconds(out->wait_ns);
    /* Nothing is taken: the limits that would admit alone show their state as a peek does. */
    for (int i = 0; i < req->n; i++) {
        if (per[i].limited)
            continue;
        struct gcra_limits peek = req->lim[i];
        peek.inc = 0;
        if (gcra_step(&peek, now_ns, has[i], tat[i], &per[i], err) != 0) {
            *err_index = i;
            return -1;
        }
    }
    for (int i = 0; i < req->n; i++)
        per[i].store = 0;
    return 0;
}
