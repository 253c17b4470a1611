/* util.c - strict number parsing and formatting, glob matching, small string helpers.
 *
 * Integers are parsed as strictly as Redis parses them (COMMANDS.md, CL.THROTTLE: "every number a base-10
 * integer"), so "+1", " 1" and "01" are errors here exactly when they are in Redis. */
#include "rlimitd/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int util_parse_i64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0, max;

    if (len == 0)
        return -1;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') {
        neg = 1;
        i = 1;
    }
    /* A leading zero is only allowed in "0" itself, so "-0" and "007" are rejected, as Redis
     * rejects them. This also rejects an empty digit string after '-'. */
    if (i == len || s[i] < '1' || s[i] > '9')
        return -1;
    /* Up to 18 digits cannot overflow (10^18 - 1 < 2^63): no bound check per digit. */
    if (len - i <= 18) {
        for (; i < len; i++) {
            if (!is_digit(s[i]))
                return -1;
            v = v * 10 + (unsigned)(s[i] - '0');
        }
        *out = neg ? -(int64_t)v : (int64_t)v;
        return 0;
    }
    /* 20 digits or more, the first not 0, are at least 10^19 > 2^63: out of range. With 19,
     * the first 18 cannot overflow and the last is checked once. Accumulate in unsigned so that
     * INT64_MIN, whose magnitude is INT64_MAX + 1, fits. */
    if (len - i > 19)
        return -1;
    for (; i < len - 1; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (!is_digit(s[i]))
        return -1;
    unsigned d = (unsigned)(s[i] - '0');
    max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (v > (max - d) / 10)
        return -1;
    v = v * 10 + d;
    /* Negating in unsigned arithmetic and converting back is well defined in GCC and gives
     * INT64_MIN for a magnitude of 2^63. */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int util_parse_double(const char *s, size_t len, double *out)
{
    /* strtod needs a terminator, and the bytes are someone else's: copy them. */
    char buf[UTIL_DOUBLE_MAX_LEN + 1];
    char *end;
    double d;

    int64_t i;

    if (len == 0 || len > UTIL_DOUBLE_MAX_LEN)
        return -1;
    /* The common case, a plain integer ("60"): below 2^53 it converts exactly, so the result is
     * the one strtod would give, without the copy and strtod's cost. */
    if (util_parse_i64(s, len, &i) == 0 && i > -(1LL << 53) && i < (1LL << 53)) {
        *out = (double)i;
        return 0;
    }
    /* strtod skips leading white space; Redis refuses it (isspace in the C locale). */
    if (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r'))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    d = strtod(buf, &end);
    /* A NUL inside the bytes ends the number early, so it fails the length test as well. */
    if ((size_t)(end - buf) != len || isnan(d))
        return -1;
    if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO))
        return -1;
    *out = d;
    return 0;
}

int util_parse_short_int_double(const char *s, size_t len, double *out)
{
    size_t i = len > 0 && s[0] == '-';
    uint64_t v = 0;

    if (len - i < 1 || len - i > 15)
        return -1;
    for (; i < len; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    /* Negated as a double, so "-0" gives -0.0 as strtod does. */
    *out = s[0] == '-' ? -(double)v : (double)v;
    return 0;
}

/* "00".."99": two digits per division, half the divisions of one digit at a time (timestamps in
 * ms, 13 digits, are what sorted sets and window logs format most). */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324252627282930"
                                     "31323334353637383940414243444546474849505152535455565758596061"
                                     "62636465666768697071727374757677787980818283848586878889909192"
                                     "93949596979899";

size_t util_fmt_i64(char *buf, int64_t v)
{
    char tmp[20];
    size_t n = sizeof(tmp), len = 0;
    /* The magnitude of INT64_MIN does not fit in int64: take it in unsigned arithmetic. */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--n] = digit_pairs[d + 1];
        tmp[--n] = digit_pairs[d];
    }
    if (u >= 10) {
        tmp[--n] = digit_pairs[u * 2 + 1];
        tmp[--n] = digit_pairs[u * 2];
    } else {
        tmp[--n] = (char)('0' + u);
    }
    if (v < 0)
        buf[len++] = '-';
    memcpy(buf + len, tmp + n, sizeof(tmp) - n);
    return len + sizeof(tmp) - n;
}

int util_eq_nocase(const char *s, size_t len, const char *lit)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (lit[i] == '\0' || lower((unsigned char)s[i]) != lower((unsigned char)lit[i]))
            return 0;
    }
    return lit[len] == '\0';
}

/* Redis's string2ld: strtold over the whole text (at most 5119 bytes), no leading space, no NaN,
 * no overflow to infinity or underflow to zero. A NUL inside is not a number (strtold must
 * end at the copy's terminator, as Redis requires). Returns 0, or -1. */
int util_parse_ld(const char *s, size_t len, long double *out)
{
    char buf[UTIL_LD_MAX_CHARS];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    char *end;
    long double v = strtold(buf, &end);
    if (util_is_space((unsigned char)buf[0]) || end != buf + len || isnan(v) ||
        (errno == ERANGE && (isinf(v) || v == 0)))
        return -1;
    *out = v;
    return 0;
}

/* Redis's "human" long double text: %.17Lf, then trailing zeros of the fraction and a bare '.'
 * removed, "-0" written as "0". buf has UTIL_LD_MAX_CHARS bytes. Returns the length. */
size_t util_fmt_ld_human(char *buf, long double v)
{
    int n = snprintf(buf, UTIL_LD_MAX_CHARS, "%.17Lf", v);
    if (n < 0 || n >= UTIL_LD_MAX_CHARS)
        return 0;
    size_t l = (size_t)n;
    if (memchr(buf, '.', l) != NULL) {
        while (buf[l - 1] == '0')
            l--;
        if (buf[l - 1] == '.')
            l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return l;
}

/* ---- glob matching ---- */

/* Matches one non-star pattern element at pat[*pi] (a literal, '?', an escape or a [class])
 * against the character c, and moves *pi past the element. Follows Redis's stringmatchlen:
 * an unterminated class runs to the end of the pattern, "x-y" with the ends swapped is a range
 * all the same, an escape inside a class is compared case-sensitively, and a trailing backslash
 * is a literal backslash. Range ends and the byte compare as signed chars, as Redis's plain
 * char does on x86-64 (the oracle the differential test runs against). */
static int match_one(const char *pat, size_t plen, size_t *pi, unsigned char c, int nocase)
{
    size_t p = *pi;
    int cc = nocase ? lower(c) : c;

    if (pat[p] == '?') {
        *pi = p + 1;
        return 1;
    }
    if (pat[p] == '[') {
        int negate = 0, hit = 0;

        p++;
        if (p < plen && pat[p] == '^') {
            negate = 1;
            p++;
        }
        while (p < plen && pat[p] != ']') {
            if (pat[p] == '\\' && plen - p >= 2) {
                p++;
                if ((unsigned char)pat[p] == c)
                    hit = 1;
                p++;
            } else if (plen - p >= 3 && pat[p + 1] == '-') {
                /* Plain char as in Redis on x86-64 (signed): "[\x01-\xff]" is the range
                 * -1..1 there, and the byte 0x80 (-128) is outside it. */
                int lo = (signed char)pat[p], hi = (signed char)pat[p + 2];
                int sc = (signed char)c;

                /* Swap first, fold case after, as Redis does: "[Z-a]" is empty with nocase. */
                if (lo > hi) {
                    int t = lo;

                    lo = hi;
                    hi = t;
                }
                if (nocase) {
                    lo = lower(lo);
                    hi = lower(hi);
                    sc = lower(sc);
                }
                if (sc >= lo && sc <= hi)
                    hit = 1;
                p += 3;
            } else {
                int pc = (unsigned char)pat[p];

                if ((nocase ? lower(pc) : pc) == cc)
                    hit = 1;
                p++;
            }
        }
        if (p < plen)
            p++; /* the closing ']' */
        *pi = p;
        return negate ? !hit : hit;
    }
    if (pat[p] == '\\' && plen - p >= 2)
        p++;
    *pi = p + 1;
    if (nocase)
        return lower((unsigned char)pat[p]) == cc;
    return (unsigned char)pat[p] == c;
}

/* Iterative matching with backtracking to the most recent star only. Every other element
 * consumes exactly one character, so when a later star is reached, any way the earlier stars
 * could have matched is as good as the one found; retrying only the last star is therefore
 * complete, and costs O(plen * slen) at worst instead of the exponential time a naive
 * recursive matcher spends on patterns like "*a*a*a*a*b". No recursion, no stack growth. */
/* Redis 7 (stringmatchlen) bounds its recursion: each star with more pattern after it recurses
 * one level deeper, and a call more than 1000 levels deep answers "no match". A match passes
 * every star group; one after the 1000th with more pattern after it is always reached with part
 * of the string left (the pattern after it needs a byte), so the limit fails exactly the
 * patterns that have such a group, whatever the string. Hence this check, then the matcher
 * below, gives Redis's answer for every pattern. */
#define GLOB_MAX_NESTING 1000

static int too_deep(const char *pat, size_t plen)
{
    size_t groups = 0;
    for (size_t p = 0; p < plen; p++) {
        if (pat[p] == '\\' && p + 1 < plen) {
            p++;
        } else if (pat[p] == '[') { /* a class, as match_one reads it: stars in it are bytes */
            p++;
            if (p < plen && pat[p] == '^')
                p++;
            while (p < plen && pat[p] != ']')
                p += (pat[p] == '\\' && plen - p >= 2) ? 2
                     : (plen - p >= 3 && pat[p + 1] == '-') ? 3 : 1;
        } else if (pat[p] == '*') {
            while (p + 1 < plen && pat[p + 1] == '*')
                p++;
            if (++groups > GLOB_MAX_NESTING && p + 1 < plen)
                return 1;
        }
    }
    return 0;
}

int util_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
    if (plen > 2 * GLOB_MAX_NESTING && too_deep(pat, plen))
        return 0;
    return util_glob_match_prepared(pat, plen, s, slen, nocase);
}

int64_t util_glob_prepare(const char *pat, size_t plen, char *out)
{
    if (plen > 2 * GLOB_MAX_NESTING && too_deep(pat, plen))
        return -1;
    size_t n = 0;
    for (size_t p = 0; p < plen; p++) {
        if (pat[p] == '\\' && p + 1 < plen) {
            out[n++] = pat[p++];
            out[n++] = pat[p];
        } else if (pat[p] == '[') { /* a class is copied whole: stars in it are bytes */
            size_t start = p++;
            if (p < plen && pat[p] == '^')
                p++;
            while (p < plen && pat[p] != ']')
                p += (pat[p] == '\\' && plen - p >= 2) ? 2
                     : (plen - p >= 3 && pat[p + 1] == '-') ? 3 : 1;
            if (p >= plen)
                p = plen - 1;
            memcpy(out + n, pat + start, p - start + 1);
            n += p - start + 1;
        } else if (pat[p] == '*') {
            while (p + 1 < plen && pat[p + 1] == '*')
                p++;
            out[n++] = '*';
        } else {
            out[n++] = pat[p];
        }
    }
    return (int64_t)n;
}

int util_glob_match_prepared(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
    size_t p = 0, i = 0;
    size_t star_p = 0, star_i = 0;
    int have_star = 0;

    while (i < slen) {
        if (p < plen && pat[p] == '*') {
            while (p < plen && pat[p] == '*')
                p++;
            if (p == plen)
                return 1;
            have_star = 1;
            star_p = p;
            star_i = i;
            continue;
        }
        if (p < plen) {
            size_t next = p;

            if (match_one(pat, plen, &next, (unsigned char)s[i], nocase)) {
                p = next;
                i++;
                continue;
            }
        }
        if (!have_star)
            return 0;
        /* Let the last star swallow one more character and retry what follows it. */
        star_i++;
        i = star_i;
        p = star_p;
    }
    while (p < plen && pat[p] == '*')
        p++;
    return p == plen;
}

/* ---- units ---- */

/* Parses the leading decimal digits of s (at least one) into a non-negative int64. Leading
 * zeros are fine in a configuration file. Returns the number of digits, or 0 on error. */
static size_t parse_digits(const char *s, int64_t *out)
{
    size_t n = 0;
    int64_t v = 0;

    while (is_digit(s[n])) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[n] - '0', &v))
            return 0;
        n++;
    }
    *out = v;
    return n;
}

int util_parse_memory(const char *s, int64_t *out)
{
    static const struct {
        const char *name;
        int64_t mul;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1000},
        {"kb", 1024},
        {"m", 1000 * 1000},
        {"mb", 1024 * 1024},
        {"g", 1000LL * 1000 * 1000},
        {"gb", 1024LL * 1024 * 1024},
    };
    int64_t v;
    size_t n = parse_digits(s, &v), i;
    const char *u = s + n;

    if (n == 0)
        return -1;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (util_eq_nocase(u, strlen(u), units[i].name)) {
            if (__builtin_mul_overflow(v, units[i].mul, out))
                return -1;
            return 0;
        }
    }
    return -1;
}

/* util.h. Digits, possibly none ("" is 0), then b, k, kb, m, mb, g or gb in any case; no sign.
 * Unsigned, so a value past int64 is read and then refused by the range check, as Redis refuses it;
 * past uint64 it stays at UINT64_MAX (Redis wraps, which would turn an absurd value into a small
 * one). */
int util_parse_memory_u64(const char *v, uint64_t *out)
{
    static const struct {
        const char *name;
        uint64_t mul;
    } units[] = {{"", 1},
                 {"b", 1},
                 {"k", 1000},
                 {"kb", 1024},
                 {"m", 1000000},
                 {"mb", 1024 * 1024},
                 {"g", 1000000000ull},
                 {"gb", 1024ull * 1024 * 1024}};
    size_t digits = strspn(v, "0123456789");
    uint64_t n = 0;

    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(v + digits, units[i].name) != 0)
            continue;
        for (size_t j = 0; j < digits; j++)
            if (__builtin_mul_overflow(n, 10, &n) ||
                __builtin_add_overflow(n, (uint64_t)(v[j] - '0'), &n))
                n = UINT64_MAX;
        if (__builtin_mul_overflow(n, units[i].mul, &n))
            n = UINT64_MAX;
        *out = n;
        return 0;
    }
    return -1;
}

int util_parse_duration_ms(const char *s, int64_t default_unit_ms, int64_t *out_ms)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {
        {"ms", 1},
        {"s", 1000},
        {"m", 60 * 1000},
        {"h", 60 * 60 * 1000},
    };
    int64_t v, mul = default_unit_ms;
    size_t n = parse_digits(s, &v), i;
    const char *u = s + n;

    if (n == 0)
        return -1;
    if (*u != '\0') {
        mul = 0;
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            if (util_eq_nocase(u, strlen(u), units[i].name))
                mul = units[i].ms;
        }
        if (mul == 0)
            return -1;
    }
    if (__builtin_mul_overflow(v, mul, out_ms))
        return -1;
    return 0;
}

int util_is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte "\<c>" stands for inside double quotes; unknown escapes stand for c itself. */
static char unescape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'b':
        return '\b';
    case 'a':
        return '\a';
    default:
        return c;
    }
}

/* s[*i] is a closing quote: it must end the input or be followed by whitespace, which it takes
 * with it. Returns 0 if it is followed by anything else (Redis's "unbalanced quotes"). */
static int close_quote(const char *s, size_t len, size_t *i)
{
    if (*i + 1 < len && !util_is_space((unsigned char)s[*i + 1]))
        return 0;
    *i += *i + 1 < len ? 2 : 1;
    return 1;
}

long util_split_word(const char *s, size_t len, size_t *pos, char *out)
{
    size_t i = *pos, n = 0;
    char quote = 0;

    /* n <= i - *pos throughout: every byte written consumed at least one source byte, so writing
     * in place (out == s + *pos) never overwrites a byte not yet read. */
    for (;;) {
        if (i == len) {
            if (quote)
                return -1;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        if (quote == '"') {
            if (c == '\\' && i + 3 < len && s[i + 1] == 'x' && hex_digit((unsigned char)s[i + 2]) >= 0 &&
                hex_digit((unsigned char)s[i + 3]) >= 0) {
                out[n++] = (char)(hex_digit((unsigned char)s[i + 2]) * 16 +
                                  hex_digit((unsigned char)s[i + 3]));
                i += 4;
            } else if (c == '\\' && i + 1 < len) {
                out[n++] = unescape(s[i + 1]);
                i += 2;
            } else if (c == '"') {
                if (!close_quote(s, len, &i))
                    return -1;
                break;
            } else {
                out[n++] = (char)c;
                i++;
            }
        } else if (quote == '\'') {
            if (c == '\\' && i + 1 < len && s[i + 1] == '\'') {
                out[n++] = '\'';
                i += 2;
            } else if (c == '\'') {
                if (!close_quote(s, len, &i))
                    return -1;
                break;
            } else {
                out[n++] = (char)c;
                i++;
            }
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            break;
        } else if (c == '"' || c == '\'') {
            quote = (char)c;
            i++;
        } else {
            out[n++] = (char)c;
            i++;
        }
    }
    *pos = i;
    return (long)n;
}

uint64_t util_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    unsigned long long size = 0, resident = 0;
    int ok = fscanf(f, "%llu %llu", &size, &resident) == 2;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}
