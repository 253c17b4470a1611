/* test_gcra.c - COMMANDS.md, CL.THROTTLE: the GCRA of CL.THROTTLE, as pure arithmetic.
 *
 * The tests play the keyspace's part themselves: they keep the TAT between calls, store it only
 * when gcra_step says so, and drop it once it has passed (the key expires at its TAT). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "rlimitd/gcra.h"

#define SEC 1000000000LL
#define MS 1000000LL
/* An arbitrary 2023 wall clock reading, in ns. */
#define T0 1700000000000000000LL

/* What the keyspace would hold for one key. */
struct key {
    int has_tat;
    int64_t tat;
};

struct row {
    int64_t limited, limit, remaining, retry_after, reset_after;
};

static struct gcra_limits limits(int64_t max_burst, int64_t count, int64_t period_s,
                                 int64_t quantity)
{
    struct gcra_limits l;
    const char *err = NULL;

    cr_assert_eq(gcra_prepare(max_burst, count, period_s, quantity, &l, &err), 0,
                 "prepare(%lld %lld %lld %lld): %s", (long long)max_burst, (long long)count,
                 (long long)period_s, (long long)quantity, err ? err : "");
    return l;
}

/* One CL.THROTTLE against k at now, storing the TAT as the keyspace (ks_values.c) would. */
static struct gcra_result throttle(struct key *k, const struct gcra_limits *l, int64_t now)
{
    struct gcra_result r;
    const char *err = NULL;

    if (k->has_tat && k->tat <= now)
        k->has_tat = 0; /* expired at its TAT */
    memset(&r, 0x5a, sizeof(r));
    cr_assert_eq(gcra_step(l, now, k->has_tat, k->tat, &r, &err), 0, "step: %s", err ? err : "");
    cr_assert(r.store == 0 || r.store == 1);
    if (r.store) {
        cr_assert_eq(r.limited, 0, "a limited call must not store");
        k->has_tat = 1;
        k->tat = r.new_tat;
    }
    return r;
}

static void expect_row(const struct gcra_result *r, struct row want, int call)
{
    cr_expect_eq(r->limited, want.limited, "call %d: limited %d, want %lld", call, r->limited,
                 (long long)want.limited);
    cr_expect_eq(r->limit, want.limit, "call %d: limit %lld, want %lld", call, (long long)r->limit,
                 (long long)want.limit);
    cr_expect_eq(r->remaining, want.remaining, "call %d: remaining %lld, want %lld", call,
                 (long long)r->remaining, (long long)want.remaining);
    cr_expect_eq(r->retry_after, want.retry_after, "call %d: retry_after %lld, want %lld", call,
                 (long long)r->retry_after, (long long)want.retry_after);
    cr_expect_eq(r->reset_after, want.reset_after, "call %d: reset_after %lld, want %lld", call,
                 (long long)r->reset_after, (long long)want.reset_after);
}

/* COMMANDS.md, CL.THROTTLE worked example: 20 calls of `CL.THROTTLE user123 15 30 60 1` at one instant. */
Test(gcra, spec_worked_example_twenty_calls)
{
    static const struct row want[20] = {
        {0, 16, 15, -1, 2},  {0, 16, 14, -1, 4},  {0, 16, 13, -1, 6}, {0, 16, 12, -1, 8},
        {0, 16, 11, -1, 10}, {0, 16, 10, -1, 12}, {0, 16, 9, -1, 14}, {0, 16, 8, -1, 16},
        {0, 16, 7, -1, 18},  {0, 16, 6, -1, 20},  {0, 16, 5, -1, 22}, {0, 16, 4, -1, 24},
        {0, 16, 3, -1, 26},  {0, 16, 2, -1, 28},  {0, 16, 1, -1, 30}, {0, 16, 0, -1, 32},
        {1, 16, 0, 2, 32},   {1, 16, 0, 2, 32},   {1, 16, 0, 2, 32},  {1, 16, 0, 2, 32},
    };
    struct gcra_limits l = limits(15, 30, 60, 1);
    struct key k = {0, 0};
    int i;

    for (i = 0; i < 20; i++) {
        struct gcra_result r = throttle(&k, &l, T0);

        expect_row(&r, want[i], i + 1);
        cr_expect_eq(r.store, !want[i].limited, "call %d: store %d", i + 1, r.store);
    }
    /* 16 allowed calls of 2 s each: the TAT is 32 s ahead, and limited calls left it there. */
    cr_assert_eq(k.tat, T0 + 32 * SEC);
}

Test(gcra, derived_limits)
{
    struct gcra_limits l = limits(15, 30, 60, 1);

    cr_expect_eq(l.ei, 2 * SEC);
    cr_expect_eq(l.dvt, 32 * SEC);
    cr_expect_eq(l.inc, 2 * SEC);
    cr_expect_eq(l.limit, 16);
    /* Integer division truncates, as redis-cell's float quotient does. */
    l = limits(0, 7, 60, 3);
    cr_expect_eq(l.ei, 8571428571LL);
    cr_expect_eq(l.dvt, 8571428571LL);
    cr_expect_eq(l.inc, 3 * 8571428571LL);
    cr_expect_eq(l.limit, 1);
}

Test(gcra, peek_on_absent_key_stores_nothing)
{
    struct gcra_limits l = limits(15, 30, 60, 0);
    struct key k = {0, 0};
    struct gcra_result r = throttle(&k, &l, T0);

    expect_row(&r, (struct row){0, 16, 16, -1, 0}, 1);
    cr_expect_eq(r.store, 0);
    cr_expect_eq(k.has_tat, 0);
}

Test(gcra, peek_on_existing_key_consumes_nothing)
{
    struct gcra_limits one = limits(15, 30, 60, 1), peek = limits(15, 30, 60, 0);
    struct key k = {0, 0};
    struct gcra_result r;
    int i;

    for (i = 0; i < 3; i++)
        throttle(&k, &one, T0);
    for (i = 0; i < 2; i++) {
        r = throttle(&k, &peek, T0);
        expect_row(&r, (struct row){0, 16, 13, -1, 6}, i + 1);
        cr_expect_eq(r.store, 0);
    }
    cr_expect_eq(k.tat, T0 + 6 * SEC);
    r = throttle(&k, &one, T0);
    expect_row(&r, (struct row){0, 16, 12, -1, 8}, 4);
}

Test(gcra, quantity_over_limit_on_absent_key)
{
    struct gcra_limits l = limits(15, 30, 60, 17);
    struct key k = {0, 0};
    struct gcra_result r = throttle(&k, &l, T0);

    expect_row(&r, (struct row){1, 16, 16, -1, 0}, 1);
    cr_expect_eq(r.store, 0);
    cr_expect_eq(k.has_tat, 0);
}

Test(gcra, quantity_over_limit_on_existing_key)
{
    struct gcra_limits one = limits(15, 30, 60, 1), big = limits(15, 30, 60, 100);
    struct key k = {0, 0};
    struct gcra_result r;

    throttle(&k, &one, T0);
    r = throttle(&k, &big, T0);
    expect_row(&r, (struct row){1, 16, 15, -1, 2}, 2);
    cr_expect_eq(r.store, 0);
    cr_expect_eq(k.tat, T0 + 2 * SEC);
}

Test(gcra, quantity_equal_to_limit_takes_the_whole_burst)
{
    struct gcra_limits all = limits(15, 30, 60, 16), one = limits(15, 30, 60, 1);
    struct key k = {0, 0};
    struct gcra_result r = throttle(&k, &all, T0);

    expect_row(&r, (struct row){0, 16, 0, -1, 32}, 1);
    r = throttle(&k, &one, T0);
    expect_row(&r, (struct row){1, 16, 0, 2, 32}, 2);
    /* A second full burst can be retried once the whole tolerance has drained. */
    r = throttle(&k, &all, T0);
    expect_row(&r, (struct row){1, 16, 0, 32, 32}, 3);
}

Test(gcra, refill_after_time_allows_one_more)
{
    struct gcra_limits l = limits(15, 30, 60, 1);
    struct key k = {0, 0};
    struct gcra_result r;
    int i;

    for (i = 0; i < 16; i++)
        throttle(&k, &l, T0);
    /* 1 ms before the next slot: still limited; the 1 ms wait rounds up to 1 s and the
     * 30.001 s until the TAT to 31 s. */
    r = throttle(&k, &l, T0 + 2 * SEC - MS);
    expect_row(&r, (struct row){1, 16, 0, 1, 31}, 17);
    /* After one emission interval exactly one more call fits, and then none. */
    r = throttle(&k, &l, T0 + 2 * SEC);
    expect_row(&r, (struct row){0, 16, 0, -1, 32}, 18);
    cr_expect_eq(k.tat, T0 + 34 * SEC);
    r = throttle(&k, &l, T0 + 2 * SEC);
    expect_row(&r, (struct row){1, 16, 0, 2, 32}, 19);
    /* Three seconds later one more slot is free, and the next one is 1 s away. */
    r = throttle(&k, &l, T0 + 5 * SEC);
    expect_row(&r, (struct row){0, 16, 0, -1, 31}, 20);
    r = throttle(&k, &l, T0 + 5 * SEC);
    expect_row(&r, (struct row){1, 16, 0, 1, 31}, 21);
}

Test(gcra, passed_tat_counts_as_a_full_bucket)
{
    struct gcra_limits l = limits(15, 30, 60, 1);
    struct gcra_result r;
    const char *err = NULL;

    /* A stored TAT in the past (not yet reclaimed) behaves like an absent key. */
    cr_assert_eq(gcra_step(&l, T0, 1, T0 - 5 * SEC, &r, &err), 0);
    expect_row(&r, (struct row){0, 16, 15, -1, 2}, 1);
    cr_expect_eq(r.store, 1);
    cr_expect_eq(r.new_tat, T0 + 2 * SEC);
}

Test(gcra, remaining_is_zero_when_tat_exceeds_tolerance)
{
    /* The same key used with a smaller tolerance than the one that set its TAT. */
    struct gcra_limits l = limits(15, 30, 60, 1);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_step(&l, T0, 1, T0 + 100 * SEC, &r, &err), 0);
    expect_row(&r, (struct row){1, 16, 0, 70, 100}, 1);
    cr_expect_eq(r.store, 0);
    /* A peek there is limited too, with a retry time (its increment fits the tolerance). */
    l = limits(15, 30, 60, 0);
    cr_assert_eq(gcra_step(&l, T0, 1, T0 + 100 * SEC, &r, &err), 0);
    expect_row(&r, (struct row){1, 16, 0, 68, 100}, 2);
    cr_expect_eq(r.store, 0);
}

Test(gcra, remaining_floors_partial_intervals)
{
    /* ttl 4.5 s with EI 2 s and DVT 32 s: (32 - 4.5) / 2 = 13.75 -> 13; reset 4.5 s -> 5. */
    struct gcra_limits l = limits(15, 30, 60, 0);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_step(&l, T0, 1, T0 + 4500 * MS, &r, &err), 0);
    expect_row(&r, (struct row){0, 16, 13, -1, 5}, 1);
}

Test(gcra, ceil_seconds_rounds_at_ms_granularity)
{
    static const struct {
        int64_t ns, s;
    } cases[] = {
        /* clang-format off */
        {0, 0},
        {1, 0},
        {999999, 0},
        {1000000, 1},
        {999999999, 1},
        {1000000000, 1},
        {1000000001, 1}, /* floor to 1000 ms first: exactly 1 s */
        {1000999999, 1},
        {1001000000, 2},
        {2000000000, 2},
        {32 * SEC, 32},
        {INT64_MAX, 9223372037},
        /* clang-format on */
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_expect_eq(gcra_ceil_seconds(cases[i].ns), cases[i].s, "%lld ns -> %lld s, want %lld",
                     (long long)cases[i].ns, (long long)gcra_ceil_seconds(cases[i].ns),
                     (long long)cases[i].s);
}

Test(gcra, reset_after_rounds_at_ms_granularity)
{
    struct gcra_limits l = limits(15, 30, 60, 0);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_step(&l, T0, 1, T0 + 1000000001LL, &r, &err), 0);
    cr_expect_eq(r.reset_after, 1);
    cr_assert_eq(gcra_step(&l, T0, 1, T0 + 1001000000LL, &r, &err), 0);
    cr_expect_eq(r.reset_after, 2);
}

Test(gcra, validation_errors_name_the_argument)
{
    static const struct {
        int64_t max_burst, count, period, quantity;
        const char *err;
    } cases[] = {
        {-1, 30, 60, 1, "invalid max_burst: must be >= 0"},
        {INT64_MIN, 30, 60, 1, "invalid max_burst: must be >= 0"},
        {15, 0, 60, 1, "invalid count: must be >= 1"},
        {15, -5, 60, 1, "invalid count: must be >= 1"},
        {15, 30, 0, 1, "invalid period: must be >= 1"},
        {15, 30, -60, 1, "invalid period: must be >= 1"},
        {15, 30, 60, -1, "invalid quantity: must be >= 0"},
        /* Checked in argument order. */
        {-1, 0, 0, -1, "invalid max_burst: must be >= 0"},
        {0, 0, 0, -1, "invalid count: must be >= 1"},
        {0, 1, 0, -1, "invalid period: must be >= 1"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gcra_limits l;
        const char *err = NULL;

        cr_expect_eq(gcra_prepare(cases[i].max_burst, cases[i].count, cases[i].period,
                                  cases[i].quantity, &l, &err),
                     -1, "case %zu", i);
        cr_expect_str_eq(err ? err : "(none)", cases[i].err, "case %zu", i);
    }
}

Test(gcra, overflow_guards)
{
    static const struct {
        int64_t max_burst, count, period, quantity;
        const char *err;
    } cases[] = {
        /* period_s * 1e9 must fit: 9223372036 s does, one more does not. */
        {0, 1, 9223372037LL, 1, "period too large"},
        {0, 1, INT64_MAX, 1, "period too large"},
        /* count above period_ns: EI would be 0. */
        {0, 1000000001LL, 1, 1, "count too large for period: emission interval below 1ns"},
        {0, INT64_MAX, 60, 1, "count too large for period: emission interval below 1ns"},
        /* EI 60 s times 2e8 overflows int64. */
        {200000000LL, 1, 60, 1, "max_burst too large: tolerance overflows"},
        {INT64_MAX, 1, 1, 1, "max_burst too large: tolerance overflows"},
        {INT64_MAX, 1000000000LL, 1, 1, "max_burst too large: tolerance overflows"},
        {0, 1, 60, 200000000LL, "quantity too large: increment overflows"},
        {0, 1, 1, INT64_MAX, "quantity too large: increment overflows"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gcra_limits l;
        const char *err = NULL;

        cr_expect_eq(gcra_prepare(cases[i].max_burst, cases[i].count, cases[i].period,
                                  cases[i].quantity, &l, &err),
                     -1, "case %zu", i);
        cr_expect_str_eq(err ? err : "(none)", cases[i].err, "case %zu", i);
    }
}

Test(gcra, limits_at_the_edge_of_overflow_are_accepted)
{
    struct gcra_limits l;
    const char *err = NULL;

    /* The largest period, and an EI of exactly 1 ns. */
    cr_expect_eq(gcra_prepare(0, 1, 9223372036LL, 1, &l, &err), 0);
    cr_expect_eq(l.ei, 9223372036LL * SEC);
    cr_expect_eq(gcra_prepare(0, 1000000000LL, 1, 1, &l, &err), 0);
    cr_expect_eq(l.ei, 1);
    /* EI 1 ns: max_burst INT64_MAX - 1 makes DVT exactly INT64_MAX. */
    cr_expect_eq(gcra_prepare(INT64_MAX - 1, 1000000000LL, 1, INT64_MAX, &l, &err), 0);
    cr_expect_eq(l.dvt, INT64_MAX);
    cr_expect_eq(l.inc, INT64_MAX);
    cr_expect_eq(l.limit, INT64_MAX);
}

Test(gcra, step_reports_tat_overflow)
{
    struct gcra_limits l = limits(15, 30, 60, 1);
    struct gcra_result r;
    const char *err = NULL;

    /* now + inc past INT64_MAX. */
    cr_expect_eq(gcra_step(&l, INT64_MAX - SEC, 0, 0, &r, &err), -1);
    cr_expect_not_null(err);
    /* A stored TAT near INT64_MAX with a clock near INT64_MIN: tat - now overflows. */
    err = NULL;
    cr_expect_eq(gcra_step(&l, INT64_MIN + SEC, 1, INT64_MAX - 100 * SEC, &r, &err), -1);
    cr_expect_not_null(err);
    /* Huge but representable: fine. */
    cr_expect_eq(gcra_step(&l, INT64_MAX - 2 * SEC, 0, 0, &r, &err), 0);
    cr_expect_eq(r.new_tat, INT64_MAX);
}
