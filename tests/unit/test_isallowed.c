/* test_isallowed.c - ISALLOWED's shared request rules (isallowed.c): the state key the daemon and
 * the module both derive, and the validation texts both answer. */
#include <string.h>

#include <criterion/criterion.h>

#include "rlimitd/isallowed.h"

Test(isallowed, key_is_the_recipe_key_with_the_user_as_hash_tag)
{
    char buf[64];
    size_t n = isallowed_key(buf, "alice", 5, "login", 5);
    cr_assert_eq(n, isallowed_key_len(5, 5));
    cr_assert_eq(n, strlen("hist:{alice}:login"));
    cr_assert(memcmp(buf, "hist:{alice}:login", n) == 0);
}

Test(isallowed, key_is_binary_safe_and_allows_empty_parts)
{
    char buf[64];
    size_t n = isallowed_key(buf, "a\0b", 3, "", 0);
    cr_assert_eq(n, 11);
    cr_assert(memcmp(buf, "hist:{a\0b}:", 11) == 0);
    n = isallowed_key(buf, "", 0, "", 0);
    cr_assert_eq(n, 8);
    cr_assert(memcmp(buf, "hist:{}:", 8) == 0);
}

Test(isallowed, valid_arguments_give_the_period_in_ms)
{
    int64_t ms = 0;
    char err[128] = "";
    cr_assert_eq(isallowed_prepare(60, 10, 1000000, &ms, err, sizeof err), 0);
    cr_assert_eq(ms, 60000);
    cr_assert_eq(isallowed_prepare(1, 0, 1, &ms, err, sizeof err), 0);
    cr_assert_eq(ms, 1000);
    cr_assert_eq(isallowed_prepare(ISALLOWED_MAX_PERIOD_S, 1, 1, &ms, err, sizeof err), 0);
    cr_assert_eq(ms, ISALLOWED_MAX_PERIOD_S * 1000);
    /* The largest timestamp plus the longest period still fits int64 (no overflow downstream). */
    cr_assert(ISALLOWED_MAX_TS_MS <= INT64_MAX - ISALLOWED_MAX_PERIOD_S * 1000);
}

Test(isallowed, period_out_of_range_names_the_argument)
{
    int64_t ms = -7;
    char err[128];
    const char *want = "invalid period: must be between 1 and 3153600000 seconds";
    int64_t bad[] = {0, -1, INT64_MIN, ISALLOWED_MAX_PERIOD_S + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(isallowed_prepare(bad[i], 1, 10, &ms, err, sizeof err), -1);
        cr_assert_str_eq(err, want);
        cr_assert_eq(ms, -7, "period_ms written on error");
    }
}

Test(isallowed, max_count_out_of_range_names_the_ceiling)
{
    int64_t ms;
    char err[128];
    cr_assert_eq(isallowed_prepare(60, -1, 100, &ms, err, sizeof err), -1);
    cr_assert_str_eq(err, "invalid max_count: must be between 0 and 100 (window-max-count)");
    cr_assert_eq(isallowed_prepare(60, 101, 100, &ms, err, sizeof err), -1);
    cr_assert_str_eq(err, "invalid max_count: must be between 0 and 100 (window-max-count)");
    cr_assert_eq(isallowed_prepare(60, 100, 100, &ms, err, sizeof err), 0);
}

Test(isallowed, a_short_error_buffer_is_truncated_not_overrun)
{
    int64_t ms;
    char err[8];
    cr_assert_eq(isallowed_prepare(0, 1, 1, &ms, err, sizeof err), -1);
    cr_assert_str_eq(err, "invalid");
}
