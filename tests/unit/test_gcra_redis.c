/* test_gcra_redis.c - COMMANDS.md, GCRA: GCRA, Redis's own command, as pure arithmetic on a fake
 * clock. Argument rules and error texts, the microsecond interval and its rounding, every
 * overflow, the request that can never pass, and how its state meets CL.THROTTLE's.
 *
 * As test_gcra.c, the tests play the keyspace: they keep the nanosecond TAT, store it only when
 * the step says so, and drop it once it has passed (the key expires at its TAT). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "rlimitd/gcra.h"
#include "rlimitd/gcra_redis.h"

#include "argv_line.h"

#define US 1000LL
#define MS 1000000LL
#define SEC 1000000000LL
/* An arbitrary 2023 wall clock reading in ns, a whole second. */
#define T0 1700000000000000000LL

#define I64MAX_S "9223372036854775807"
#define NOT_INT "value is not an integer or out of range"
#define NOT_FLOAT "value is not a valid float"
#define NOT_POSITIVE "value is out of range, must be positive"
#define NOT_IN_RANGE "value is out of range, value must between 1 and 9223372036854775807"
#define BAD_PERIOD "period must be > 0 and < 1e12"

static const char *parse_err(const char *text)
{
    struct line l;
    struct gcra_redis_args a;
    const char *err = NULL;

    split(&l, text);
    if (gcra_redis_parse(l.argc, l.argv, l.lens, &a, &err) == 0)
        return NULL;
    cr_assert_not_null(err);
    return err;
}

static struct gcra_redis_args parse_ok(const char *text)
{
    struct line l;
    struct gcra_redis_args a;
    const char *err = NULL;

    split(&l, text);
    cr_assert_eq(gcra_redis_parse(l.argc, l.argv, l.lens, &a, &err), 0, "%s: %s", text,
                 err ? err : "");
    return a;
}

#define EXPECT_ERR(text, want)                                                                     \
    do {                                                                                           \
        const char *e_ = parse_err(text);                                                          \
        cr_expect(e_ != NULL && strcmp(e_, (want)) == 0, "%s: got \"%s\", want \"%s\"", (text),    \
                  e_ ? e_ : "(accepted)", (want));                                                 \
    } while (0)

/* ---- arguments ---- */

Test(gcra_redis_parse, arity)
{
    EXPECT_ERR("GCRA k 1 2", GCRA_REDIS_ERR_ARITY);
    EXPECT_ERR("GCRA", GCRA_REDIS_ERR_ARITY);
    EXPECT_ERR("GCRA k 1 2 3 TOKENS 1 x", GCRA_REDIS_ERR_ARITY);
    /* A repeated TOKENS is simply too many arguments, as in Redis. */
    EXPECT_ERR("GCRA k 1 2 3 TOKENS 1 TOKENS 2", GCRA_REDIS_ERR_ARITY);
    /* Arity is checked before anything else. */
    EXPECT_ERR("GCRA k x x x x x x", GCRA_REDIS_ERR_ARITY);
}

Test(gcra_redis_parse, max_burst)
{
    EXPECT_ERR("GCRA k x 1 1", NOT_INT);
    EXPECT_ERR("GCRA k 1.5 1 1", NOT_INT);
    EXPECT_ERR("GCRA k +1 1 1", NOT_INT);
    EXPECT_ERR("GCRA k 01 1 1", NOT_INT);
    EXPECT_ERR("GCRA k 9223372036854775808 1 1", NOT_INT);
    EXPECT_ERR("GCRA k -1 1 1", NOT_POSITIVE);
    EXPECT_ERR("GCRA k -9223372036854775808 1 1", NOT_POSITIVE);
    cr_expect_eq(parse_ok("GCRA k 0 1 1").capacity, 1);
    cr_expect_eq(parse_ok("GCRA k 15 1 1").capacity, 16);
    /* Redis saturates instead of wrapping: capacity stays INT64_MAX. */
    cr_expect_eq(parse_ok("GCRA k " I64MAX_S " 1 1").capacity, INT64_MAX);
    cr_expect_eq(parse_ok("GCRA k 9223372036854775806 1 1").capacity, INT64_MAX);
}

Test(gcra_redis_parse, tokens_per_period)
{
    EXPECT_ERR("GCRA k 1 x 1", NOT_INT);
    EXPECT_ERR("GCRA k 1 2.0 1", NOT_INT);
    EXPECT_ERR("GCRA k 1 0 1", NOT_IN_RANGE);
    EXPECT_ERR("GCRA k 1 -5 1", NOT_IN_RANGE);
    cr_expect_eq(parse_ok("GCRA k 1 " I64MAX_S " 1").tokens_per_period, INT64_MAX);
}

Test(gcra_redis_parse, period)
{
    EXPECT_ERR("GCRA k 1 1 x", NOT_FLOAT);
    EXPECT_ERR("GCRA k 1 1 1s", NOT_FLOAT);
    EXPECT_ERR("GCRA k 1 1 nan", NOT_FLOAT);
    EXPECT_ERR("GCRA k 1 1 1e400", NOT_FLOAT);
    EXPECT_ERR("GCRA k 1 1 0", BAD_PERIOD);
    EXPECT_ERR("GCRA k 1 1 -0.5", BAD_PERIOD);
    EXPECT_ERR("GCRA k 1 1 1e12", BAD_PERIOD);
    EXPECT_ERR("GCRA k 1 1 inf", BAD_PERIOD);
    EXPECT_ERR("GCRA k 1 1 -inf", BAD_PERIOD);
    cr_expect_eq(parse_ok("GCRA k 1 1 1e-6").period, 1e-6);
    cr_expect_eq(parse_ok("GCRA k 1 1 999999999999.99").period, 999999999999.99);
    cr_expect_eq(parse_ok("GCRA k 1 1 .5").period, 0.5);
    cr_expect_eq(parse_ok("GCRA k 1 1 60").period, 60.0);
}

Test(gcra_redis_parse, tokens)
{
    cr_expect_eq(parse_ok("GCRA k 1 1 1").tokens, 1);
    cr_expect_eq(parse_ok("GCRA k 1 1 1 TOKENS 7").tokens, 7);
    cr_expect_eq(parse_ok("GCRA k 1 1 1 tOkEnS 7").tokens, 7);
    cr_expect_eq(parse_ok("GCRA k 1 1 1 TOKENS " I64MAX_S).tokens, INT64_MAX);
    EXPECT_ERR("GCRA k 1 1 1 TOKENS", "Missing TOKENS value");
    EXPECT_ERR("GCRA k 1 1 1 TOKEN 1", "syntax error");
    EXPECT_ERR("GCRA k 1 1 1 5", "syntax error");
    EXPECT_ERR("GCRA k 1 1 1 TOKENS 0", NOT_IN_RANGE);
    EXPECT_ERR("GCRA k 1 1 1 TOKENS -1", NOT_IN_RANGE);
    EXPECT_ERR("GCRA k 1 1 1 TOKENS 1.5", NOT_INT);
    EXPECT_ERR("GCRA k 1 1 1 TOKENS x", NOT_INT);
    /* Redis compares a C string, so an embedded NUL ends the word. */
    struct line l;
    struct gcra_redis_args a;
    const char *err;
    split(&l, "GCRA k 1 1 1 TOKENSxx 3");
    l.buf[l.argv[5] - l.buf + 6] = '\0';
    cr_expect_eq(gcra_redis_parse(l.argc, l.argv, l.lens, &a, &err), 0);
    cr_expect_eq(a.tokens, 3);
}

Test(gcra_redis_parse, order_is_redis)
{
    /* Each argument is checked before the next; TOKENS last. */
    EXPECT_ERR("GCRA k -1 0 0 FOO", NOT_POSITIVE);
    EXPECT_ERR("GCRA k 1 0 0 FOO", NOT_IN_RANGE);
    EXPECT_ERR("GCRA k 1 1 0 FOO", BAD_PERIOD);
    EXPECT_ERR("GCRA k 1 1 1 FOO", "syntax error");
}

/* ---- the interval ---- */

static int64_t ei_of(const char *text)
{
    struct gcra_redis_args a = parse_ok(text);
    return gcra_redis_interval_us(&a);
}

Test(gcra_redis_interval, rounding_and_clamp)
{
    cr_expect_eq(ei_of("GCRA k 0 30 60"), 2000000);
    cr_expect_eq(ei_of("GCRA k 0 1 1e-6"), 1);
    /* Rounded to nearest, half up: 2.5 µs -> 3, 0.5 -> 1, 333333.3 -> 333333. */
    cr_expect_eq(ei_of("GCRA k 0 1000000 2.5"), 3);
    cr_expect_eq(ei_of("GCRA k 0 2000000 1"), 1);
    cr_expect_eq(ei_of("GCRA k 0 3 1"), 333333);
    cr_expect_eq(ei_of("GCRA k 0 9901 1"), 101);
    /* tokens_per_period above period in µs: the interval rounds to 0 and is clamped to 1. */
    cr_expect_eq(ei_of("GCRA k 0 2000001 1"), 1);
    cr_expect_eq(ei_of("GCRA k 0 " I64MAX_S " 1"), 1);
    cr_expect_eq(ei_of("GCRA k 0 1 1e-7"), 1);
    /* The largest period: just under 1e18 µs. */
    cr_expect_eq(ei_of("GCRA k 0 1 999999999999.99"), 999999999999990016LL);
}

/* ---- decisions ---- */

struct key {
    int has_tat;
    int64_t tat; /* ns */
};

struct row {
    int64_t limited, limit, remaining, retry_after, reset_after;
};

/* One GCRA on k at now_ns; asserts it succeeded; stores as the keyspace (ks_values.c) would. */
static struct gcra_result step(struct key *k, const char *text, int64_t now)
{
    struct gcra_redis_args a = parse_ok(text);
    struct gcra_result r;
    const char *err = NULL;

    if (k->has_tat && gcra_tat_expire(k->tat) != 0 && k->tat <= now)
        k->has_tat = 0; /* expired at its TAT */
    memset(&r, 0x5a, sizeof r);
    cr_assert_eq(gcra_redis_step(&a, now, k->has_tat, k->tat, &r, &err), 0, "%s: %s", text,
                 err ? err : "");
    cr_assert(r.limited == 0 || r.limited == 1);
    cr_assert_eq(r.store, !r.limited, "GCRA stores exactly when allowed");
    if (r.store) {
        cr_assert(r.new_tat < 0 || r.new_tat % US == 0, "a GCRA TAT is whole microseconds");
        k->has_tat = 1;
        k->tat = r.new_tat;
    }
    return r;
}

static const char *step_err(struct key *k, const char *text, int64_t now)
{
    struct gcra_redis_args a = parse_ok(text);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_redis_step(&a, now, k->has_tat, k->tat, &r, &err), -1, "%s accepted",
                 text);
    return err;
}

#define EXPECT_ROW(r, l, c, rem, retry, reset)                                                     \
    do {                                                                                           \
        struct gcra_result r_ = (r);                                                               \
        cr_expect(r_.limited == (l) && r_.limit == (c) && r_.remaining == (rem) &&                 \
                      r_.retry_after == (retry) && r_.reset_after == (reset),                      \
                  "line %d: got [%d %lld %lld %lld %lld], want [%d %lld %lld %lld %lld]",          \
                  __LINE__, r_.limited, (long long)r_.limit, (long long)r_.remaining,              \
                  (long long)r_.retry_after, (long long)r_.reset_after, (l), (long long)(c),        \
                  (long long)(rem), (long long)(retry), (long long)(reset));                       \
    } while (0)

Test(gcra_redis_step, worked_example_matches_cl_throttle)
{
    /* EI = 2 s exactly, so GCRA answers as CL.THROTTLE's COMMANDS.md, CL.THROTTLE example. */
    struct key k = {0};
    for (int i = 1; i <= 16; i++)
        EXPECT_ROW(step(&k, "GCRA user123 15 30 60", T0), 0, 16, 16 - i, -1, 2 * i);
    for (int i = 0; i < 4; i++)
        EXPECT_ROW(step(&k, "GCRA user123 15 30 60", T0), 1, 16, 0, 2, 32);
    /* 2 s later one more fits. */
    EXPECT_ROW(step(&k, "GCRA user123 15 30 60", T0 + 2 * SEC), 0, 16, 0, -1, 32);
    EXPECT_ROW(step(&k, "GCRA user123 15 30 60", T0 + 2 * SEC), 1, 16, 0, 2, 32);
}

Test(gcra_redis_step, remaining_is_floored_and_never_above_capacity)
{
    /* redis-cell answers 1009 here (CL.THROTTLE k 1000 9901 1 1); EI 101 µs gives 1000. */
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA k 1000 9901 1", T0), 0, 1001, 1000, -1, 1);
    struct key k2 = {0};
    EXPECT_ROW(step(&k2, "GCRA k 1000 9901 1 TOKENS 1001", T0), 0, 1001, 0, -1, 1);
    EXPECT_ROW(step(&k2, "GCRA k 1000 9901 1", T0), 1, 1001, 0, 1, 1);
    /* After one interval exactly one more token. */
    EXPECT_ROW(step(&k2, "GCRA k 1000 9901 1", T0 + 101 * US), 0, 1001, 0, -1, 1);
}

Test(gcra_redis_step, max_burst_zero)
{
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA z 0 1 1", T0), 0, 1, 0, -1, 1);
    EXPECT_ROW(step(&k, "GCRA z 0 1 1", T0 + 1), 1, 1, 0, 1, 1);
    EXPECT_ROW(step(&k, "GCRA z 0 1 1", T0 + SEC - 1), 1, 1, 0, 1, 1);
    /* At the TAT the key has expired: fresh again. */
    EXPECT_ROW(step(&k, "GCRA z 0 1 1", T0 + SEC), 0, 1, 0, -1, 1);
}

Test(gcra_redis_step, seconds_are_ceiled_from_microseconds)
{
    /* CL.THROTTLE truncates to ms first; GCRA rounds whole µs up: 1 µs past a second is 2 s. */
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA r 0 1 2", T0), 0, 1, 0, -1, 2);
    /* Limited 0.999999 s before the TAT: retry 1 s, reset 1 s. */
    EXPECT_ROW(step(&k, "GCRA r 0 1 2", T0 + SEC + 1 * US), 1, 1, 0, 1, 1);
    /* 1.000001 s before: 2 and 2. */
    EXPECT_ROW(step(&k, "GCRA r 0 1 2", T0 + SEC - 1 * US), 1, 1, 0, 2, 2);
    /* Sub-µs parts of the clock are dropped: now is floor(ns / 1000) µs. */
    EXPECT_ROW(step(&k, "GCRA r 0 1 2", T0 + SEC - 1 * US + 999), 1, 1, 0, 2, 2);
}

Test(gcra_redis_step, request_that_can_never_pass)
{
    /* TOKENS > capacity: inc > DVT, limited, retry -1, nothing stored. */
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA big 15 30 60 TOKENS 17", T0), 1, 16, 16, -1, 0);
    cr_expect_eq(k.has_tat, 0);
    EXPECT_ROW(step(&k, "GCRA big 15 30 60 TOKENS 1000", T0), 1, 16, 16, -1, 0);
    cr_expect_eq(k.has_tat, 0);
    EXPECT_ROW(step(&k, "GCRA big 15 30 60 TOKENS 16", T0), 0, 16, 0, -1, 32);
    EXPECT_ROW(step(&k, "GCRA big 15 30 60 TOKENS 17", T0), 1, 16, 0, -1, 32);
    /* Limited but passable: retry says when. */
    EXPECT_ROW(step(&k, "GCRA big 15 30 60 TOKENS 16", T0), 1, 16, 0, 32, 32);
}

Test(gcra_redis_step, tokens_consume_several)
{
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA q 15 30 60 TOKENS 5", T0), 0, 16, 11, -1, 10);
    EXPECT_ROW(step(&k, "GCRA q 15 30 60 TOKENS 11", T0), 0, 16, 0, -1, 32);
    EXPECT_ROW(step(&k, "GCRA q 15 30 60", T0), 1, 16, 0, 2, 32);
}

Test(gcra_redis_step, tiny_interval)
{
    /* period 1e-6 and tokens_per_period larger than the period in µs: both EI 1 µs. */
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA t 2 1 1e-6", T0), 0, 3, 2, -1, 1);
    EXPECT_ROW(step(&k, "GCRA t 2 1 1e-6 TOKENS 2", T0), 0, 3, 0, -1, 1);
    EXPECT_ROW(step(&k, "GCRA t 2 1 1e-6", T0), 1, 3, 0, 1, 1);
    EXPECT_ROW(step(&k, "GCRA t 2 1 1e-6", T0 + 1 * US), 0, 3, 0, -1, 1);
    struct key k2 = {0};
    EXPECT_ROW(step(&k2, "GCRA t 2 5000000 1", T0), 0, 3, 2, -1, 1);
    cr_expect_eq(k2.tat, T0 + 1 * US);
}

Test(gcra_redis_step, longest_period)
{
    /* Just under 1e12 s with capacity 1 puts the TAT ~31,700 years ahead: past the nanoseconds'
     * end (2262), so it is kept in microseconds (gcra.h, "the stored TAT"), as Redis keeps it. */
    const int64_t ei = 999999999999990016LL; /* 999999999999.99 s in us, as a double gives it */
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA l 0 1 999999999999.99", T0), 0, 1, 0, -1, 1000000000000LL);
    cr_expect_eq(k.tat, -(T0 / US + ei), "the TAT in microseconds, stored as its negation");
    EXPECT_ROW(step(&k, "GCRA l 0 1 999999999999.99", T0 + 5 * SEC), 1, 1, 0, 999999999995LL,
               999999999995LL);
    /* Redis answers 0 2 1 -1 1000000000000: 999999999999e6 us is not a double, the nearest one
     * is 64 us above, and that interval rounds the reset up to the next second. */
    const int64_t ei2 = 999999999999000064LL;
    struct key k2 = {0};
    EXPECT_ROW(step(&k2, "GCRA k 1 1 999999999999", T0), 0, 2, 1, -1, 1000000000000LL);
    cr_expect_eq(k2.tat, -(T0 / US + ei2));
    /* The second token is there too; the third waits one interval. */
    EXPECT_ROW(step(&k2, "GCRA k 1 1 999999999999", T0), 0, 2, 0, -1, 1999999999999LL);
    cr_expect_eq(k2.tat, -(T0 / US + 2 * ei2));
    EXPECT_ROW(step(&k2, "GCRA k 1 1 999999999999", T0), 1, 2, 0, 1000000000000LL,
               1999999999999LL);
    /* CL.THROTTLE's nanoseconds cannot reach that TAT: its range error, nothing changed. */
    struct gcra_limits l;
    struct gcra_result r;
    const char *err = NULL;
    cr_assert_eq(gcra_prepare(1, 1, 1, 1, &l, &err), 0);
    cr_expect_eq(gcra_step(&l, T0, 1, k2.tat, &r, &err), -1);
    cr_expect_str_eq(err, "TAT out of range: clock or arguments too large");
}

Test(gcra_redis_tat, stored_form_and_text)
{
    char buf[GCRA_TAT_TEXT_MAX];
    int64_t v;
    /* Up to INT64_MAX / 1000 us the TAT stays in nanoseconds; past it, microseconds. */
    cr_expect_eq(gcra_tat_from_us(1), 1000);
    cr_expect_eq(gcra_tat_from_us(GCRA_TAT_NS_MAX_US), GCRA_TAT_NS_MAX_US * 1000);
    cr_expect_eq(gcra_tat_from_us(GCRA_TAT_NS_MAX_US + 1), -(GCRA_TAT_NS_MAX_US + 1));
    cr_expect_eq(gcra_tat_from_us(INT64_MAX), -INT64_MAX);
    cr_expect_eq(gcra_tat_expire(T0), T0);
    cr_expect_eq(gcra_tat_expire(-(GCRA_TAT_NS_MAX_US + 1)), 0);
    /* GET's text is nanoseconds either way, past int64 for the microsecond form. */
    size_t n = gcra_tat_format(buf, T0);
    cr_expect(n == 19 && memcmp(buf, "1700000000000000000", n) == 0);
    n = gcra_tat_format(buf, -INT64_MAX);
    cr_expect(n == 22 && memcmp(buf, "9223372036854775807000", n) == 0);
    n = gcra_tat_format(buf, -(GCRA_TAT_NS_MAX_US + 1));
    cr_expect(n == 19 && memcmp(buf, "9223372036854776000", n) == 0);
    /* And back (rlimit.so keeps the state as a string). */
    cr_expect(gcra_tat_parse("1700000000000000000", 19, &v) == 0 && v == T0);
    cr_expect(gcra_tat_parse("9223372036854775807000", 22, &v) == 0 && v == -INT64_MAX);
    cr_expect(gcra_tat_parse("9223372036854776000", 19, &v) == 0 &&
              v == -(GCRA_TAT_NS_MAX_US + 1));
    cr_expect(gcra_tat_parse("9223372036854775807", 19, &v) == 0 && v == INT64_MAX);
    cr_expect(gcra_tat_parse("1", 1, &v) == 0 && v == 1);
    /* Not something gcra_tat_format writes: refused. */
    const char *bad[] = {"0", "-5", "", "01", "+1", "1.0", "abc", "9223372036854775808",
                         "9223372036854775807001", "92233720368547758070000",
                         "99999999999999999999000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(gcra_tat_parse(bad[i], strlen(bad[i]), &v), -1, "%s", bad[i]);
}

Test(gcra_redis_step, overflow_of_each_product)
{
    struct key k = {0};
    /* EI 1 s = 1e6 µs. EI·TOKENS: 9223372036855e6 > INT64_MAX; 9223372036854e6 is not, but then
     * now + inc passes the TAT's end: the same text. */
    cr_expect_str_eq(step_err(&k, "GCRA o 0 1 1 TOKENS 9223372036855", T0),
                     GCRA_REDIS_ERR_OVERFLOW_TOKENS);
    cr_expect_str_eq(step_err(&k, "GCRA o 0 1 1 TOKENS 9223372036854", T0),
                     GCRA_REDIS_ERR_OVERFLOW_TOKENS);
    /* EI·capacity: capacity 9223372036855 overflows, 9223372036854 does not. */
    cr_expect_str_eq(step_err(&k, "GCRA o 9223372036854 1 1", T0), GCRA_REDIS_ERR_OVERFLOW_BURST);
    EXPECT_ROW(step(&k, "GCRA o 9223372036853 1 1", T0), 0, 9223372036854LL, 9223372036853LL, -1,
               1);
    /* Both overflow: Redis checks TOKENS first. */
    cr_expect_str_eq(step_err(&k, "GCRA o2 9223372036854 1 1 TOKENS 9223372036855", T0),
                     GCRA_REDIS_ERR_OVERFLOW_TOKENS);
    /* EI 1 µs: the largest products fit. */
    struct key k3 = {0};
    EXPECT_ROW(step(&k3, "GCRA o3 " I64MAX_S " 1 1e-6", T0), 0, INT64_MAX, INT64_MAX - 1, -1, 1);
}

Test(gcra_redis_step, overflow_of_the_sum)
{
    /* max(now, TAT) + inc must fit Redis's microseconds (INT64_MAX us). */
    struct key k = {1, -(INT64_MAX - 5)};
    cr_expect_str_eq(step_err(&k, "GCRA s 100 1 1e-6 TOKENS 6", T0),
                     GCRA_REDIS_ERR_OVERFLOW_TOKENS);
    cr_expect_eq(k.tat, -(INT64_MAX - 5), "an error changes nothing");
    /* TOKENS 5 fits the sum but not the tolerance: limited, with the waits from T0 in Redis's
     * double rounding. */
    int64_t ttl_us = INT64_MAX - 5 - T0 / US;
    double retry = (double)(ttl_us + 5 - 101) / 1e6, reset = (double)ttl_us / 1e6;
    EXPECT_ROW(step(&k, "GCRA s 100 1 1e-6 TOKENS 5", T0), 1, 101, 0,
               (int64_t)retry + ((double)(int64_t)retry < retry),
               (int64_t)reset + ((double)(int64_t)reset < reset));
    /* Where the two forms meet: a TAT at the last nanosecond microsecond, then one past it. */
    const int64_t end_us = GCRA_TAT_NS_MAX_US;
    struct key k2 = {0};
    EXPECT_ROW(step(&k2, "GCRA s 1 1 1e-6", (end_us - 1) * US), 0, 2, 1, -1, 1);
    cr_expect_eq(k2.tat, end_us * US);
    EXPECT_ROW(step(&k2, "GCRA s 1 1 1e-6", (end_us - 1) * US), 0, 2, 0, -1, 1);
    cr_expect_eq(k2.tat, -(end_us + 1));
    EXPECT_ROW(step(&k2, "GCRA s 1 1 1e-6", (end_us - 1) * US), 1, 2, 0, 1, 1);
    EXPECT_ROW(step(&k2, "GCRA s 1 1 1e-6", end_us * US), 0, 2, 0, -1, 1);
    cr_expect_eq(k2.tat, -(end_us + 2));
}

Test(gcra_redis_step, shares_the_state_with_cl_throttle)
{
    struct key k = {0};
    struct gcra_limits l;
    struct gcra_result r;
    const char *err;

    /* CL.THROTTLE k 2 3 1: EI = 1e9/3 ns = 333333333, not whole µs. */
    cr_assert_eq(gcra_prepare(2, 3, 1, 1, &l, &err), 0);
    cr_assert_eq(gcra_step(&l, T0, 0, 0, &r, &err), 0);
    cr_assert(r.store);
    k.has_tat = 1;
    k.tat = r.new_tat;
    cr_expect_eq(k.tat, T0 + 333333333);
    /* GCRA k 2 3 1 reads that TAT rounded up to T0 + 333334 µs (never emptier than CL.THROTTLE
     * sees it), EI 333333 µs, DVT 999999: ttl 666667 µs, remaining floor(333332 / 333333). */
    EXPECT_ROW(step(&k, "GCRA k 2 3 1", T0), 0, 3, 0, -1, 1);
    cr_expect_eq(k.tat, T0 + 666667 * US);
    /* CL.THROTTLE reads GCRA's TAT exactly: the two rounding choices left the bucket 334 ns
     * fuller than three CL.THROTTLE calls would, so the third call fits 1 µs later, not at T0. */
    cr_assert_eq(gcra_step(&l, T0, 1, k.tat, &r, &err), 0);
    cr_expect_eq(r.limited, 1);
    cr_assert_eq(gcra_step(&l, T0 + US, 1, k.tat, &r, &err), 0);
    cr_expect_eq(r.limited, 0);
    cr_expect_eq(r.remaining, 0);
    cr_assert(r.store);
    k.tat = r.new_tat;
    cr_expect_eq(k.tat, T0 + 1000000333);
    /* And GCRA reads that as T0 + 1000001 µs: limited, 333334 µs to wait. */
    EXPECT_ROW(step(&k, "GCRA k 2 3 1", T0 + US), 1, 3, 0, 1, 1);
    cr_expect_eq(k.tat, T0 + 1000000333);
}

Test(gcra_redis_step, limited_call_keeps_the_state)
{
    struct key k = {0};
    EXPECT_ROW(step(&k, "GCRA m 0 1 10", T0), 0, 1, 0, -1, 10);
    int64_t tat = k.tat;
    for (int i = 1; i <= 9; i++)
        EXPECT_ROW(step(&k, "GCRA m 0 1 10", T0 + i * SEC), 1, 1, 0, 10 - i, 10 - i);
    cr_expect_eq(k.tat, tat);
}

/* Seeded cross-check: where the two arithmetics must agree exactly - an interval of whole
 * milliseconds and calls at whole milliseconds - GCRA and CL.THROTTLE give the same replies and
 * the same TATs, call after call, whichever of them wrote the state. GCRA_SEED replays a run. */
Test(gcra_redis_step, agrees_with_cl_throttle_on_whole_milliseconds)
{
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("GCRA_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    srand(seed);
    for (int limit = 0; limit < 200; limit++) {
        int64_t burst = rand() % 20, period = 1 + rand() % 120, count;
        /* count must divide period·1000 so the interval is whole ms. */
        do
            count = 1 + rand() % 50;
        while ((period * 1000) % count != 0);
        struct key k = {0};
        int64_t now = T0;
        char text[128];
        struct gcra_limits l;
        const char *err;
        for (int call = 0; call < 60; call++) {
            int64_t n = 1 + rand() % (burst + 3);
            now += (int64_t)(rand() % 3) * (rand() % 2000) * MS;
            if (k.has_tat && k.tat <= now)
                k.has_tat = 0;
            cr_assert_eq(gcra_prepare(burst, count, period, n, &l, &err), 0);
            struct gcra_result want;
            cr_assert_eq(gcra_step(&l, now, k.has_tat, k.tat, &want, &err), 0);
            snprintf(text, sizeof text, "GCRA k %lld %lld %lld TOKENS %lld", (long long)burst,
                     (long long)count, (long long)period, (long long)n);
            struct gcra_result got = step(&k, text, now);
            cr_assert(got.limited == want.limited && got.limit == want.limit &&
                          got.remaining == want.remaining &&
                          got.retry_after == want.retry_after &&
                          got.reset_after == want.reset_after &&
                          (!want.store || got.new_tat == want.new_tat),
                      "seed %u (GCRA_SEED), limit %d call %d, %s at +%lld ms: GCRA [%d %lld %lld "
                      "%lld %lld], CL.THROTTLE [%d %lld %lld %lld %lld]",
                      seed, limit, call, text, (long long)((now - T0) / MS), got.limited,
                      (long long)got.limit, (long long)got.remaining, (long long)got.retry_after,
                      (long long)got.reset_after, want.limited, (long long)want.limit,
                      (long long)want.remaining, (long long)want.retry_after,
                      (long long)want.reset_after);
            /* Every other call, let CL.THROTTLE's TAT be the one kept. */
            if (call % 2 && want.store)
                k.tat = want.new_tat;
        }
    }
}

/* ---- a reference model of Redis's GCRA ----
 * Written from COMMANDS.md "GCRA", "Arithmetic" and its error table alone, in Redis's unit (whole
 * microseconds, a state of one TAT in microseconds) and Redis's order of checks. It shares nothing
 * with gcra_redis.c, so the seeded comparison below catches a mistake in either. The key expires
 * at its TAT, as the daemon expires it. */
struct redis_model {
    int has;
    int64_t tat_us;
};

static int64_t model_ceil_s(int64_t us)
{
    double s = (double)us / 1000000.0;
    int64_t t = (int64_t)s;
    return (double)t < s ? t + 1 : t;
}

/* Returns 0 with the reply in out[5], or -1 with the error text. */
static int model_gcra(struct redis_model *m, int64_t max_burst, int64_t tpp, double period,
                      int64_t n, int64_t now_ns, int64_t out[5], const char **err)
{
    int64_t now = now_ns / 1000;
    int64_t cap = max_burst == INT64_MAX ? INT64_MAX : max_burst + 1;
    int64_t ei = (int64_t)(period * 1000000.0 / (double)tpp + 0.5);
    if (ei < 1)
        ei = 1;
    if (m->has && m->tat_us <= GCRA_TAT_NS_MAX_US && m->tat_us * 1000 <= now_ns)
        m->has = 0; /* expired at its TAT */
    if (ei > INT64_MAX / n) {
        *err = GCRA_REDIS_ERR_OVERFLOW_TOKENS;
        return -1;
    }
    if (ei > INT64_MAX / cap) {
        *err = GCRA_REDIS_ERR_OVERFLOW_BURST;
        return -1;
    }
    int64_t dvt = ei * cap, inc = ei * n;
    int64_t tat = m->has ? m->tat_us : now;
    int64_t base = tat > now ? tat : now;
    if (INT64_MAX - base < inc) {
        *err = GCRA_REDIS_ERR_OVERFLOW_TOKENS;
        return -1;
    }
    int64_t next_tat = base + inc, ttl;
    out[3] = -1;
    if (now < next_tat - dvt) {
        out[0] = 1;
        if (inc <= dvt)
            out[3] = model_ceil_s(next_tat - dvt - now);
        ttl = tat - now;
    } else {
        out[0] = 0;
        ttl = next_tat - now;
        m->has = 1;
        m->tat_us = next_tat;
    }
    out[1] = cap;
    out[2] = dvt - ttl > -ei ? (dvt - ttl) / ei : 0;
    out[4] = model_ceil_s(ttl);
    return 0;
}

static int64_t pick_i64(int kind)
{
    switch (kind % 4) {
    case 0:
        return rand() % 20;
    case 1:
        return rand() % 100000;
    case 2:
        return ((int64_t)rand() << 31 | rand()) % 1000000000000000LL;
    default:
        return INT64_MAX - rand() % 3;
    }
}

/* Seeded comparison with the model over every range Redis accepts: tiny and huge periods (up to
 * TATs kept in microseconds, past 2262), huge rates, bursts and token counts, overflow errors.
 * GCRA_SEED replays a run. */
Test(gcra_redis_step, matches_a_model_of_redis_arithmetic)
{
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("GCRA_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    srand(seed);
    int calls = 0, errors = 0, micro = 0;
    for (int limit = 0; limit < 400; limit++) {
        int64_t max_burst = pick_i64(rand()), tpp = pick_i64(rand());
        if (tpp < 1)
            tpp = 1;
        /* A period from 1e-6 s to just under 1e12 s, log-uniform, in %.17g so it parses back
         * to the same double. */
        double period = pow(10.0, -6.0 + 18.0 * rand() / ((double)RAND_MAX + 1.0));
        char ptext[40];
        snprintf(ptext, sizeof ptext, "%.17g", period);
        period = strtod(ptext, NULL);
        if (!(period > 0 && period < 1e12))
            continue;
        struct key k = {0};
        struct redis_model m = {0};
        int64_t now = T0 + (int64_t)(rand() % 1000) * SEC + rand() % 1000;
        for (int call = 0; call < 12; call++, calls++) {
            int64_t n = rand() % 3 ? 1 + rand() % 5 : pick_i64(rand());
            if (n < 1)
                n = 1;
            now += rand() % 2 ? 0 : (int64_t)(rand() % 5000) * MS + rand() % 1000;
            char text[200];
            snprintf(text, sizeof text, "GCRA k %lld %lld %s TOKENS %lld", (long long)max_burst,
                     (long long)tpp, ptext, (long long)n);
            int64_t want[5];
            const char *werr = NULL, *gerr = NULL;
            int wrc = model_gcra(&m, max_burst, tpp, period, n, now, want, &werr);
            struct gcra_redis_args a = parse_ok(text);
            struct gcra_result r;
            if (k.has_tat && gcra_tat_expire(k.tat) != 0 && k.tat <= now)
                k.has_tat = 0;
            int grc = gcra_redis_step(&a, now, k.has_tat, k.tat, &r, &gerr);
            cr_assert_eq(grc, wrc, "seed %u (GCRA_SEED), limit %d call %d, %s: rc %d, model %d (%s)",
                         seed, limit, call, text, grc, wrc, werr ? werr : gerr ? gerr : "");
            if (wrc != 0) {
                cr_assert_str_eq(gerr, werr, "seed %u, limit %d call %d, %s", seed, limit, call,
                                 text);
                errors++;
                continue;
            }
            cr_assert(r.limited == want[0] && r.limit == want[1] && r.remaining == want[2] &&
                          r.retry_after == want[3] && r.reset_after == want[4],
                      "seed %u (GCRA_SEED), limit %d call %d, %s at +%lld ns: got [%d %lld %lld "
                      "%lld %lld], model [%lld %lld %lld %lld %lld]",
                      seed, limit, call, text, (long long)(now - T0), r.limited,
                      (long long)r.limit, (long long)r.remaining, (long long)r.retry_after,
                      (long long)r.reset_after, (long long)want[0], (long long)want[1],
                      (long long)want[2], (long long)want[3], (long long)want[4]);
            if (r.store) {
                k.has_tat = 1;
                k.tat = r.new_tat;
                cr_assert_eq(k.tat, gcra_tat_from_us(m.tat_us), "seed %u: stored TAT", seed);
                micro += k.tat < 0;
            }
        }
    }
    cr_log_info("seed %u: %d calls, %d overflow errors, %d TATs in microseconds", seed, calls,
                errors, micro);
    cr_expect_gt(micro, 0, "the run reached no TAT past 2262");
}
