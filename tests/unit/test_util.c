/* test_util.c - strict integers, formatting, glob matching and units (util.c), plus the other
 * small leaves that have no test file of their own: hash.c, clock.c and stats.c. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/hash.h"
#include "rlimitd/stats.h"
#include "rlimitd/util.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- util_parse_double (Redis 7's string2d; the differential test against redis-server is
 * tests/integration/test_gcra.c) ---- */

Test(util, parse_double_accepts_what_redis_accepts)
{
    static const struct {
        const char *s;
        double v;
    } cases[] = {
        {"0", 0}, {"1", 1}, {"-1.5", -1.5}, {"+2", 2}, {".5", 0.5}, {"5.", 5}, {"1e3", 1000},
        {"1E-6", 1e-6}, {"0x10", 16}, {"inf", __builtin_inf()}, {"-Infinity", -__builtin_inf()},
        {"999999999999.99", 999999999999.99}, {"4.9e-324", 4.9e-324},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v = -42;
        cr_expect_eq(util_parse_double(cases[i].s, strlen(cases[i].s), &v), 0, "'%s'",
                     cases[i].s);
        cr_expect_eq(v, cases[i].v, "'%s'", cases[i].s);
    }
}

Test(util, parse_double_rejects_what_redis_rejects)
{
    static const char *const bad[] = {
        "", " 1", "\t1", "\n1", "1 ", "1x", "x", "nan", "-nan", "1e400", "-1e400", "1e-400",
        "1..2", "--1", "e5", ".",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v;
        cr_expect_eq(util_parse_double(bad[i], strlen(bad[i]), &v), -1, "'%s' accepted", bad[i]);
    }
    double v;
    /* An embedded NUL, and only len bytes are read. */
    cr_expect_eq(util_parse_double("1\0002", 3, &v), -1);
    cr_expect_eq(util_parse_double("12x", 2, &v), 0);
    cr_expect_eq(v, 12);
    /* The length limit: 255 bytes of a valid number pass, 256 do not. */
    char buf[UTIL_DOUBLE_MAX_LEN + 2];
    memset(buf, '0', sizeof buf);
    buf[UTIL_DOUBLE_MAX_LEN - 1] = '7';
    cr_expect_eq(util_parse_double(buf, UTIL_DOUBLE_MAX_LEN, &v), 0);
    cr_expect_eq(v, 7);
    buf[UTIL_DOUBLE_MAX_LEN] = '7';
    cr_expect_eq(util_parse_double(buf, UTIL_DOUBLE_MAX_LEN + 1, &v), -1);
}

/* ---- util_parse_i64 ---- */

Test(util, parse_i64_accepts_what_redis_accepts)
{
    static const struct {
        const char *s;
        int64_t v;
    } cases[] = {
        {"0", 0},
        {"1", 1},
        {"-1", -1},
        {"10", 10},
        {"1234567890", 1234567890},
        {"999999999999999999", 999999999999999999LL},   /* 18 digits: the unchecked loop */
        {"-999999999999999999", -999999999999999999LL},
        {"1000000000000000000", 1000000000000000000LL}, /* 19: the checked one */
        {"1764000000123", 1764000000123LL},
        {"9223372036854775807", INT64_MAX},
        {"-9223372036854775807", -INT64_MAX},
        {"-9223372036854775808", INT64_MIN},
        {"9223372036854775799", INT64_MAX - 8},
        {"1764000000123456789", 1764000000123456789LL}, /* a time in ns */
        {"-1000000000000000009", -1000000000000000009LL},
    };
    size_t i;

    for (i = 0; i < N_OF(cases); i++) {
        int64_t v = 42;

        cr_expect_eq(util_parse_i64(cases[i].s, strlen(cases[i].s), &v), 0, "'%s'", cases[i].s);
        cr_expect_eq(v, cases[i].v, "'%s' -> %lld", cases[i].s, (long long)v);
    }
}

Test(util, parse_i64_rejects_what_redis_rejects)
{
    static const char *const bad[] = {
        "",
        "-",
        "+1",
        "+",
        "01",
        "00",
        "-0",
        "-01",
        " 1",
        "1 ",
        "1\n",
        "1a",
        "a1",
        "1.0",
        "1e3",
        "0x10",
        "--1",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "99999999999999999999999",
        "9999999999999999999",
        "-9999999999999999999",
        "123456789012345678a",
        "12345678901234567a9",
        "a234567890123456789",
        "-9223372036854775809",
        "10000000000000000000",
    };
    size_t i;

    for (i = 0; i < N_OF(bad); i++) {
        int64_t v = 42;

        cr_expect_eq(util_parse_i64(bad[i], strlen(bad[i]), &v), -1, "'%s' accepted", bad[i]);
        cr_expect_eq(v, 42, "'%s' wrote the output", bad[i]);
    }
}

Test(util, parse_i64_uses_only_len_bytes)
{
    int64_t v = 0;

    cr_expect_eq(util_parse_i64("123abc", 3, &v), 0);
    cr_expect_eq(v, 123);
    cr_expect_eq(util_parse_i64("0123", 1, &v), 0);
    cr_expect_eq(v, 0);
    cr_expect_eq(util_parse_i64("-5", 1, &v), -1);
    /* Binary safe: a NUL inside the length is just a bad character. */
    cr_expect_eq(util_parse_i64("1\0002", 3, &v), -1);
}

/* ---- util_fmt_i64 ---- */

Test(util, fmt_i64)
{
    static const struct {
        int64_t v;
        const char *s;
    } cases[] = {
        {0, "0"},
        {7, "7"},
        {-7, "-7"},
        {10, "10"},
        {-100, "-100"},
        {1700000000000000000LL, "1700000000000000000"},
        {INT64_MAX, "9223372036854775807"},
        {INT64_MIN, "-9223372036854775808"},
    };
    size_t i;

    for (i = 0; i < N_OF(cases); i++) {
        char buf[32];
        size_t n;
        int64_t back = 0;

        memset(buf, 'x', sizeof(buf));
        n = util_fmt_i64(buf, cases[i].v);
        cr_expect_eq(n, strlen(cases[i].s), "%lld: length %zu", (long long)cases[i].v, n);
        cr_expect_arr_eq(buf, cases[i].s, strlen(cases[i].s), "%lld", (long long)cases[i].v);
        cr_expect_eq(buf[n], 'x', "no NUL is written");
        cr_expect_eq(util_parse_i64(buf, n, &back), 0);
        cr_expect_eq(back, cases[i].v);
    }
}

/* ---- util_glob_match ---- */

Test(util, glob_match_cases)
{
    static const struct {
        const char *pat, *s;
        int nocase, match;
    } cases[] = {
        {"", "", 0, 1},
        {"", "a", 0, 0},
        {"*", "", 0, 1},
        {"*", "anything", 0, 1},
        {"**", "x", 0, 1},
        {"a", "a", 0, 1},
        {"a", "b", 0, 0},
        {"a", "aa", 0, 0},
        {"a*", "a", 0, 1},
        {"a*c", "abbbc", 0, 1},
        {"a*c", "abbbd", 0, 0},
        {"*c", "abc", 0, 1},
        {"*b*", "abc", 0, 1},
        {"*b*", "ac", 0, 0},
        {"a*b*c", "aXbYbZc", 0, 1},
        {"a*bc", "abcbc", 0, 1},
        {"a*bc", "abcbd", 0, 0},
        {"h?llo", "hello", 0, 1},
        {"h?llo", "hllo", 0, 0},
        {"?", "", 0, 0},
        {"h[ae]llo", "hallo", 0, 1},
        {"h[ae]llo", "hillo", 0, 0},
        {"h[^e]llo", "hallo", 0, 1},
        {"h[^e]llo", "hello", 0, 0},
        {"h[a-b]llo", "hbllo", 0, 1},
        {"h[a-b]llo", "hcllo", 0, 0},
        {"h[b-a]llo", "hallo", 0, 1}, /* reversed range, as Redis */
        {"[0-9][0-9]", "42", 0, 1},
        {"[a-]", "]", 0, 1}, /* Redis reads "a-]" as a range up to ']' */
        {"[\\]]", "]", 0, 1},
        {"[\\-]", "-", 0, 1},
        {"[]", "a", 0, 0},
        {"[^]", "a", 0, 1},
        {"[abc", "b", 0, 1}, /* unterminated class runs to the end */
        {"a[", "a", 0, 0},
        {"h\\*llo", "h*llo", 0, 1},
        {"h\\*llo", "hello", 0, 0},
        {"\\?", "?", 0, 1},
        {"\\?", "x", 0, 0},
        {"a\\", "a\\", 0, 1}, /* a trailing backslash is literal */
        {"user:*", "user:1000", 0, 1},
        {"user:*", "session:1", 0, 0},
        {"hist:{*}:*", "hist:{alice}:login", 0, 1},
        {"HELLO", "hello", 0, 0},
        {"HELLO", "hello", 1, 1},
        {"h*O", "hello", 1, 1},
        {"[A-C]x", "bx", 1, 1},
        {"[a-c]x", "BX", 1, 1},
        {"[A-C]x", "bx", 0, 0},
        {"[Z-a]", "m", 1, 0}, /* Redis swaps, then folds case: an empty range */
        {"[Z-a]", "_", 0, 1},
        {"max*", "maxmemory", 0, 1},
        {"*memory*", "maxmemory-policy", 0, 1},
    };
    size_t i;

    for (i = 0; i < N_OF(cases); i++) {
        int m = util_glob_match(cases[i].pat, strlen(cases[i].pat), cases[i].s, strlen(cases[i].s),
                                cases[i].nocase);

        cr_expect_eq(m, cases[i].match, "'%s' ~ '%s' (nocase %d): %d", cases[i].pat, cases[i].s,
                     cases[i].nocase, m);
    }
}

/* A prepared pattern (star runs collapsed, the nesting verdict taken once) matches exactly what
 * the pattern as given matches: random patterns over a small alphabet full of star runs,
 * classes, ranges and escapes, against random strings. */
Test(util, glob_prepared_matches_as_the_pattern)
{
    static const char alpha[] = "ab*?[]^-\\*";
    unsigned seed = 12345;
    char pat[24], str[12], prep[24];
    for (int round = 0; round < 200000; round++) {
        size_t plen = (size_t)(rand_r(&seed) % 20), slen = (size_t)(rand_r(&seed) % 10);
        for (size_t i = 0; i < plen; i++)
            pat[i] = alpha[rand_r(&seed) % (sizeof(alpha) - 1)];
        for (size_t i = 0; i < slen; i++)
            str[i] = "ab*[-"[rand_r(&seed) % 5];
        int64_t n = util_glob_prepare(pat, plen, prep);
        cr_assert(n >= 0 && (size_t)n <= plen);
        int want = util_glob_match(pat, plen, str, slen, round & 1);
        int got = util_glob_match_prepared(prep, (size_t)n, str, slen, round & 1);
        cr_assert_eq(got, want, "'%.*s' ~ '%.*s': prepared '%.*s' says %d", (int)plen, pat,
                     (int)slen, str, (int)n, prep, got);
    }
    /* A run of 100,000 stars is one; a pattern past the nesting limit never matches. */
    size_t big = 100000;
    char *p = malloc(big + 2), *q = malloc(big + 2);
    memset(p, '*', big);
    p[big] = 'x';
    cr_assert_eq(util_glob_prepare(p, big + 1, q), 2);
    cr_assert_eq(util_glob_match_prepared(q, 2, "abcx", 4, 0), 1);
    for (size_t i = 0; i < big; i += 2)
        p[i + 1] = 'a';
    cr_assert_eq(util_glob_prepare(p, big + 1, q), -1);
    free(p);
    free(q);
}

Test(util, glob_match_is_binary_safe)
{
    cr_expect_eq(util_glob_match("a?c", 3, "a\0c", 3, 0), 1);
    cr_expect_eq(util_glob_match("a*", 2, "a\0\0", 3, 0), 1);
    cr_expect_eq(util_glob_match("a\0", 2, "a", 1, 0), 0);
    /* Signed bytes, as Redis on x86-64: the range is -1..1, 0x80 is -128. */
    cr_expect_eq(util_glob_match("[\x01-\xff]", 5, "\x80", 1, 0), 0);
    cr_expect_eq(util_glob_match("[\x80-\xff]", 5, "\x90", 1, 0), 1);
}

Test(util, glob_match_hostile_patterns_terminate)
{
    /* Patterns that make a naive backtracking matcher take exponential time or recurse deeply.
     * There is no timing assertion: finishing within the test timeout is the check. */
    size_t n = 100000, i;
    char *pat = malloc(2 * n + 2), *s = malloc(n + 1);

    cr_assert_not_null(pat);
    cr_assert_not_null(s);
    memset(s, 'a', n);
    /* "*****...a" against "aaaa...": matches. */
    memset(pat, '*', n);
    pat[n] = 'a';
    cr_expect_eq(util_glob_match(pat, n + 1, s, n, 0), 1);
    /* "*****...b": no match. */
    pat[n] = 'b';
    cr_expect_eq(util_glob_match(pat, n + 1, s, n, 0), 0);
    /* "a*a*a*...*b" against "aaaa...": no match. */
    for (i = 0; i < 2000; i++) {
        pat[2 * i] = 'a';
        pat[2 * i + 1] = '*';
    }
    pat[4000] = 'b';
    cr_expect_eq(util_glob_match(pat, 4001, s, 20000, 0), 0);
    /* Redis 7's nesting limit: a star group after the 1000th with pattern after it never
     * matches (checked against redis-server 7.0: "a*" x 1001 + "a" finds nothing, "a*" x 1000 +
     * "a" and "a*" x 1001 find "aaa..."). */
    pat[4000] = 'a';
    cr_expect_eq(util_glob_match(pat, 4001, s, 20000, 0), 0);
    pat[2000] = 'a';
    cr_expect_eq(util_glob_match(pat, 2001, s, 20000, 0), 1);
    cr_expect_eq(util_glob_match(pat, 2002, s, 20000, 0), 1);
    cr_expect_eq(util_glob_match(pat, 2004, s, 20000, 0), 0);
    /* Stars inside a class are bytes, not groups: 1001 of them, then 1000 groups, matches. */
    memset(pat, '*', 1003);
    pat[0] = '[';
    pat[1002] = ']';
    for (i = 0; i < 1000; i++) {
        pat[1003 + 2 * i] = '*';
        pat[1004 + 2 * i] = 'a';
    }
    s[0] = '*';
    cr_expect_eq(util_glob_match(pat, 3003, s, 20000, 0), 1);
    free(pat);
    free(s);
}

Test(util, eq_nocase)
{
    cr_expect_eq(util_eq_nocase("GET", 3, "get"), 1);
    cr_expect_eq(util_eq_nocase("gEt", 3, "GET"), 1);
    cr_expect_eq(util_eq_nocase("GETX", 3, "get"), 1); /* only len bytes are compared */
    cr_expect_eq(util_eq_nocase("GE", 2, "get"), 0);
    cr_expect_eq(util_eq_nocase("GETS", 4, "get"), 0);
    cr_expect_eq(util_eq_nocase("", 0, ""), 1);
    cr_expect_eq(util_eq_nocase("a\0", 2, "a"), 0);
    cr_expect_eq(util_eq_nocase("[", 1, "{"), 0); /* not folded: only A-Z are letters */
}

/* ---- units ---- */

Test(util, parse_memory_units)
{
    static const struct {
        const char *s;
        int64_t v;
    } cases[] = {
        {"0", 0},
        {"100", 100},
        {"100b", 100},
        {"1k", 1000},
        {"1kb", 1024},
        {"1K", 1000},
        {"1KB", 1024},
        {"1Kb", 1024},
        {"2m", 2000000},
        {"2mb", 2097152},
        {"1g", 1000000000},
        {"1gb", 1073741824},
        {"4GB", 4294967296LL},
        {"512mb", 536870912},
        {"0512", 512},
        {"9223372036854775807", INT64_MAX},
        {"8589934591gb", 8589934591LL * 1073741824LL},
    };
    static const char *const bad[] = {
        "",
        "k",
        "kb",
        "-1",
        "-1kb",
        "+1",
        "1x",
        "1 kb",
        " 1",
        "1kbb",
        "1.5gb",
        "1t",
        "8589934592gb",
        "9223372036854775808",
        "99999999999999999999",
    };
    size_t i;

    for (i = 0; i < N_OF(cases); i++) {
        int64_t v = -42;

        cr_expect_eq(util_parse_memory(cases[i].s, &v), 0, "'%s'", cases[i].s);
        cr_expect_eq(v, cases[i].v, "'%s' -> %lld", cases[i].s, (long long)v);
    }
    for (i = 0; i < N_OF(bad); i++) {
        int64_t v = -42;

        cr_expect_eq(util_parse_memory(bad[i], &v), -1, "'%s' accepted", bad[i]);
    }
}

Test(util, parse_duration_units)
{
    static const struct {
        const char *s;
        int64_t unit, ms;
    } cases[] = {
        {"0", 1000, 0},        {"5", 1000, 5000},       {"5", 1, 5},     {"100ms", 1000, 100},
        {"100MS", 1000, 100},  {"5s", 1, 5000},         {"5S", 1, 5000}, {"2m", 1000, 120000},
        {"1h", 1000, 3600000}, {"24H", 1000, 86400000},
    };
    static const char *const bad[] = {
        "",
        "ms",
        "s",
        "-1",
        "-1s",
        "+1",
        "5x",
        "5 s",
        "5sec",
        "1.5s",
        "5d",
        "5mss",
        "9223372036854775807s",
        "99999999999999999999",
    };
    size_t i;

    for (i = 0; i < N_OF(cases); i++) {
        int64_t v = -42;

        cr_expect_eq(util_parse_duration_ms(cases[i].s, cases[i].unit, &v), 0, "'%s'", cases[i].s);
        cr_expect_eq(v, cases[i].ms, "'%s' -> %lld", cases[i].s, (long long)v);
    }
    for (i = 0; i < N_OF(bad); i++) {
        int64_t v = -42;

        cr_expect_eq(util_parse_duration_ms(bad[i], 1000, &v), -1, "'%s' accepted", bad[i]);
    }
}

/* ---- hash.c: SipHash-1-3 ---- */

static const uint8_t seed_0_15[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

Test(hash, siphash13_reference_vectors)
{
    /* The published SipHash-1-3 outputs for key 00..0f and messages 00, 00 01, ... (the
     * reference test vectors' layout), covering an empty, a partial and a full word. */
    static const uint64_t want[] = {
        0xabac0158050fc4dcULL, 0xc9f49bf37d57ca93ULL, 0x82cb9b024dc7d44dULL, 0x8bf80ab8e7ddf7fbULL,
        0xcf75576088d38328ULL, 0xdef9d52f49533b67ULL, 0xc50d2b50c59f22a7ULL, 0xd3927d989bb11140ULL,
        0x369095118d299a8eULL, 0x25a48eb36c063de4ULL, 0x79de85ee92ff097fULL, 0x70c118c1f94dc352ULL,
    };
    uint8_t msg[16];
    size_t i;

    for (i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)i;
    for (i = 0; i < N_OF(want); i++)
        cr_expect_eq(hash_siphash13(msg, i, seed_0_15), want[i], "length %zu: %016llx", i,
                     (unsigned long long)hash_siphash13(msg, i, seed_0_15));
}

Test(hash, siphash13_properties)
{
    uint8_t buf[80], other[16];
    uint64_t h[65];
    size_t i, j;

    for (i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 7 + 1);
    memcpy(other, seed_0_15, sizeof(other));
    other[15] ^= 1;
    for (i = 0; i <= 64; i++) {
        h[i] = hash_siphash13(buf, i, seed_0_15);
        /* Deterministic, independent of alignment, and keyed. */
        cr_expect_eq(hash_siphash13(buf, i, seed_0_15), h[i]);
        {
            uint8_t moved[72];

            memcpy(moved + 3, buf, i);
            cr_expect_eq(hash_siphash13(moved + 3, i, seed_0_15), h[i], "unaligned, len %zu", i);
        }
        cr_expect_neq(hash_siphash13(buf, i, other), h[i], "seed ignored at len %zu", i);
        /* Every length, 0..64, so every tail size 0..7 is exercised: a flipped last byte
         * changes the hash. */
        if (i > 0) {
            buf[i - 1] ^= 0x80;
            cr_expect_neq(hash_siphash13(buf, i, seed_0_15), h[i], "last byte at len %zu", i);
            buf[i - 1] ^= 0x80;
        }
    }
    /* Prefixes of one buffer all hash differently (the length is mixed in). */
    for (i = 0; i <= 64; i++)
        for (j = i + 1; j <= 64; j++)
            cr_expect_neq(h[i], h[j], "len %zu and %zu collide", i, j);
    /* Zero bytes are not the same as no bytes. */
    memset(buf, 0, 8);
    cr_expect_neq(hash_siphash13(buf, 1, seed_0_15), hash_siphash13(buf, 0, seed_0_15));
    cr_expect_neq(hash_siphash13(buf, 8, seed_0_15), hash_siphash13(buf, 7, seed_0_15));
}

/* ---- clock.c ---- */

Test(clock, fake_clock_freezes_and_advances)
{
    int64_t real = clock_now_ns();

    /* Not a timing check: only that the reading is a plausible wall clock (after 2020). */
    cr_expect_gt(real, 1577836800LL * 1000000000LL);
    clock_set_fake(1000);
    cr_expect_eq(clock_now_ns(), 1000);
    cr_expect_eq(clock_now_ns(), 1000);
    clock_advance_fake(500);
    cr_expect_eq(clock_now_ns(), 1500);
    clock_advance_fake(-200);
    cr_expect_eq(clock_now_ns(), 1300);
    clock_set_fake(0);
    cr_expect_gt(clock_now_ns(), 1577836800LL * 1000000000LL);
    cr_expect_gt(clock_mono_ns(), 0);
}

/* ---- stats.c ---- */

/* Redis 7.0's rule (afterErrorReply): the code is what follows '-' up to the first space in the
 * line's first 32 bytes; a line without '-' or without that space counts as ERR. */
Test(stats, err_code_by_redis_rule)
{
    static const struct {
        const char *reply;
        enum stats_err e;
        const char *code; /* for ERRSTAT_OTHER */
    } cases[] = {
        {"-ERR value is not an integer or out of range\r\n", ERRSTAT_ERR, NULL},
        {"-ERR\r\n", ERRSTAT_ERR, NULL},
        {"ERR x\r\n", ERRSTAT_ERR, NULL},
        {"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
         ERRSTAT_WRONGTYPE, NULL},
        {"-NOAUTH Authentication required.\r\n", ERRSTAT_NOAUTH, NULL},
        {"-WRONGPASS invalid username-password pair\r\n", ERRSTAT_WRONGPASS, NULL},
        {"-OOM command not allowed\r\n", ERRSTAT_OOM, NULL},
        {"-NOPROTO unsupported protocol version\r\n", ERRSTAT_NOPROTO, NULL},
        {"-EXECABORT Transaction discarded\r\n", ERRSTAT_EXECABORT, NULL},
        {"-NOSCRIPT No matching script\r\n", ERRSTAT_NOSCRIPT, NULL},
        {"-BUSY Redis is busy\r\n", ERRSTAT_BUSY, NULL},
        {"-NOTBUSY No scripts in execution right now.\r\n", ERRSTAT_NOTBUSY, NULL},
        {"-UNKILLABLE Sorry\r\n", ERRSTAT_UNKILLABLE, NULL},
        {"-ERRX something\r\n", ERRSTAT_OTHER, "ERRX"},
        {"-err lower case\r\n", ERRSTAT_OTHER, "err"},
        {"-OTHER x\r\n", ERRSTAT_OTHER, "OTHER"},
        {"- leading space\r\n", ERRSTAT_OTHER, ""},
        {"-MY_ERR_CODE custom msg\r\n", ERRSTAT_OTHER, "MY_ERR_CODE"},
        /* the space at byte 31 is inside the window, at byte 32 it is not */
        {"-ABCDEFGHIJKLMNOPQRSTUVWXYZ1234 x\r\n", ERRSTAT_OTHER, "ABCDEFGHIJKLMNOPQRSTUVWXYZ1234"},
        {"-ABCDEFGHIJKLMNOPQRSTUVWXYZ12345 x\r\n", ERRSTAT_ERR, NULL},
        {"-nospace\r\n", ERRSTAT_ERR, NULL},
        {"-a\r\n b", ERRSTAT_ERR, NULL}, /* the space after the line's end does not count */
        {"", ERRSTAT_ERR, NULL},
        {"-", ERRSTAT_ERR, NULL},
    };

    for (size_t i = 0; i < N_OF(cases); i++) {
        const char *code = NULL;
        size_t len = 0;
        enum stats_err e =
            stats_err_code(cases[i].reply, strlen(cases[i].reply), &code, &len);
        cr_expect_eq(e, cases[i].e, "'%s'", cases[i].reply);
        if (cases[i].code != NULL && e == ERRSTAT_OTHER) {
            cr_expect_eq(len, strlen(cases[i].code), "'%s'", cases[i].reply);
            cr_expect(len <= STATS_ERR_CODE_MAX);
            cr_expect_eq(memcmp(code, cases[i].code, len), 0, "'%s'", cases[i].reply);
        }
    }
}

Test(stats, err_names)
{
    static const char *const names[ERRSTAT_COUNT] = {
        "ERR", "WRONGTYPE", "NOAUTH", "WRONGPASS", "OOM", "NOPROTO", "EXECABORT", "NOSCRIPT",
        "BUSY", "NOTBUSY", "UNKILLABLE", "OTHER",
    };

    for (int e = 0; e < ERRSTAT_COUNT; e++)
        cr_expect_str_eq(stats_err_name((enum stats_err)e), names[e]);
    cr_expect_str_eq(stats_err_name(ERRSTAT_COUNT), "OTHER");
}

/* util_fmt_i64 writes two digits per division: every length, both signs and the extremes agree
 * with snprintf. */
Test(util, fmt_i64_agrees_with_snprintf)
{
    char got[32], want[32];
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int64_t v = (int64_t)(x >> (i % 64));
        if (i % 2)
            v = -v;
        if (i == 0)
            v = INT64_MIN;
        else if (i == 1)
            v = INT64_MAX;
        size_t n = util_fmt_i64(got, v);
        got[n] = '\0';
        snprintf(want, sizeof want, "%lld", (long long)v);
        cr_assert_str_eq(got, want, "util_fmt_i64(%lld)", (long long)v);
    }
}

/* The fast path must give strtod's double bit for bit, and leave everything else to strtod. */
Test(util, short_int_double_is_strtod)
{
    static const char *const yes[] = {"0", "-0", "00", "-000", "7", "007", "-1",
                                      "1700000000000", "1699999990000", "999999999999999",
                                      "-999999999999999", "000000000000001"};
    static const char *const no[] = {"", "-", "+1", " 1", "1 ", "1.5", "1e3", "0x10", "inf",
                                     "1000000000000000", "-1000000000000000", "12a", "--1",
                                     "1-"};
    for (size_t i = 0; i < N_OF(yes); i++) {
        double d = 42, want = strtod(yes[i], NULL);
        cr_assert_eq(util_parse_short_int_double(yes[i], strlen(yes[i]), &d), 0, "%s", yes[i]);
        cr_expect_eq(memcmp(&d, &want, sizeof(d)), 0, "%s: %.17g, strtod %.17g", yes[i], d, want);
    }
    for (size_t i = 0; i < N_OF(no); i++) {
        double d = 42;
        cr_expect_eq(util_parse_short_int_double(no[i], strlen(no[i]), &d), -1, "%s", no[i]);
        cr_expect_eq(d, 42);
    }
    /* Only len bytes are read. */
    double d;
    cr_assert_eq(util_parse_short_int_double("123x", 3, &d), 0);
    cr_expect_eq(d, 123);
    /* Random digit strings of every accepted length, signed and not. */
    uint64_t x = 88172645463325252ull;
    for (int n = 0; n < 20000; n++) {
        char buf[20];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = 0, digits = 1 + x % 15;
        if (x & (1ull << 40))
            buf[len++] = '-';
        for (size_t k = 0; k < digits; k++)
            buf[len++] = (char)('0' + (x >> (4 + 3 * k)) % 10);
        buf[len] = '\0';
        double want = strtod(buf, NULL);
        cr_assert_eq(util_parse_short_int_double(buf, len, &d), 0, "%s", buf);
        cr_assert_eq(memcmp(&d, &want, sizeof(d)), 0, "%s", buf);
    }
}

/* util_bytes_eq answers memcmp(...) == 0 for every length, a difference at any position, and
 * unaligned starts. */
Test(util, bytes_eq_is_memcmp)
{
    unsigned char a[64], b[64];
    for (size_t i = 0; i < sizeof(a); i++)
        a[i] = (unsigned char)(i * 37 + 11);
    for (size_t off = 0; off < 3; off++) {
        for (size_t n = 0; n <= 40; n++) {
            memcpy(b, a, sizeof(a));
            cr_expect(util_bytes_eq(a + off, b + off, n), "equal, n %zu", n);
            for (size_t j = 0; j < n; j++) {
                b[off + j] ^= 0x80;
                cr_expect(!util_bytes_eq(a + off, b + off, n), "n %zu, byte %zu differs", n, j);
                b[off + j] ^= 0x80;
            }
            /* Bytes around the n compared do not count. */
            if (off > 0)
                b[off - 1] ^= 1;
            b[off + n] ^= 1;
            cr_expect(util_bytes_eq(a + off, b + off, n), "outside bytes, n %zu", n);
        }
    }
}
