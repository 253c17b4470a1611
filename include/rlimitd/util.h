/* util.h - strict number parsing and formatting, glob matching, small string helpers. */
#ifndef RLIMITD_UTIL_H
#define RLIMITD_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parses a base-10 int64 exactly as Redis's string2ll does: optional '-', digits, no '+', no
 * spaces, no leading zeros (except "0" itself), no overflow. s need not be NUL terminated.
 * Returns 0 and sets *out, or -1. */
int util_parse_i64(const char *s, size_t len, int64_t *out);

/* The longest text util_parse_double reads; longer is "not a valid float". */
#define UTIL_DOUBLE_MAX_LEN 255

/* Parses a double as Redis 7's string2d (getDoubleFromObject, "value is not a valid float")
 * does: strtod over the whole string, so "1.5", ".5", "1e3", "+2", "inf" and hex floats are
 * numbers; empty, leading white space, trailing bytes, NaN, and overflow or underflow to zero
 * are not. s need not be NUL terminated; at most UTIL_DOUBLE_MAX_LEN bytes. Returns 0 and sets
 * *out, or -1. */
int util_parse_double(const char *s, size_t len, double *out);

/* strtod's result without strtod for the commonest score text: if the len bytes at s are an
 * optional '-' and 1 to 15 decimal digits (leading zeros allowed), sets *out to the value strtod
 * gives for them (exact: every such value is below 2^53; "-0" is -0.0) and returns 0; else -1,
 * and the caller asks strtod. */
int util_parse_short_int_double(const char *s, size_t len, double *out);

/* Long doubles as Redis's INCRBYFLOAT and HINCRBYFLOAT read and write them: util_parse_ld is
 * string2ld (strtold over the whole text, shorter than UTIL_LD_MAX_CHARS, no leading space, no
 * NaN, no overflow to infinity or underflow to zero; 0 or -1); util_fmt_ld_human writes Redis's
 * "human" form into buf (UTIL_LD_MAX_CHARS bytes) and returns its length. */
#define UTIL_LD_MAX_CHARS (5 * 1024)
int util_parse_ld(const char *s, size_t len, long double *out);
size_t util_fmt_ld_human(char *buf, long double v);
/* Writes v in base 10 to buf (at least 21 bytes) without a NUL; returns the length. */
size_t util_fmt_i64(char *buf, int64_t v);

/* Glob match as Redis's stringmatchlen: * ? [abc] [^a-z] and backslash escapes.
 * nocase != 0 compares ASCII case-insensitively. Returns 1 on a match. Bounded recursion. */
int util_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase);
/* For one pattern matched against many strings (KEYS, SCAN MATCH): writes into out (plen bytes)
 * a pattern with the same matches in which each run of stars is one star, and returns its
 * length, or -1 when no string can match (Redis's nesting limit). Then
 * util_glob_match_prepared on it costs O(prepared length) per string at most per star, where
 * the pattern as given would cost its full length per string (a run of 100,000 stars). */
int64_t util_glob_prepare(const char *pat, size_t plen, char *out);
int util_glob_match_prepared(const char *pat, size_t plen, const char *s, size_t slen, int nocase);

/* 1 if the n bytes at a and at b are equal: memcmp(a, b, n) == 0 without the call for keys of 4
 * to 16 bytes (two overlapping loads from each side; nothing outside the n bytes is read). */
static inline int util_bytes_eq(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    if (n >= 8 && n <= 16) {
        uint64_t x0, y0, x1, y1;
        __builtin_memcpy(&x0, x, 8);
        __builtin_memcpy(&y0, y, 8);
        __builtin_memcpy(&x1, x + n - 8, 8);
        __builtin_memcpy(&y1, y + n - 8, 8);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    if (n >= 4 && n < 8) {
        uint32_t x0, y0, x1, y1;
        __builtin_memcpy(&x0, x, 4);
        __builtin_memcpy(&y0, y, 4);
        __builtin_memcpy(&x1, x + n - 4, 4);
        __builtin_memcpy(&y1, y + n - 4, 4);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    return __builtin_memcmp(x, y, n) == 0;
}

/* 1 if the len bytes at s equal the NUL-terminated lit, ignoring ASCII case. */
int util_eq_nocase(const char *s, size_t len, const char *lit);

/* Memory amount with redis.conf units: plain bytes, b, k=1000, kb=1024, m, mb, g, gb (case
 * insensitive). s is NUL terminated, digits then the unit with nothing around them. Returns 0
 * and sets *out, or -1 (bad syntax, negative or overflow). */
int util_parse_memory(const char *s, int64_t *out);
/* A memory amount as Redis 7.0's CONFIG SET reads one (memtoull): digits (none reads as 0),
 * then b, k, kb, m, mb, g or gb in any case, no sign; unsigned, so a caller can refuse a value
 * past its range with its range's words; past uint64 it stays at UINT64_MAX. 0 or -1. */
int util_parse_memory_u64(const char *s, uint64_t *out);

/* Duration in milliseconds: plain number = default_unit_ms each (1000 for seconds); suffixes
 * ms, s, m (minutes), h, case insensitive. s is NUL terminated. Returns 0 and sets *out_ms, or
 * -1 (bad syntax, negative or overflow). */
int util_parse_duration_ms(const char *s, int64_t default_unit_ms, int64_t *out_ms);

/* The process's resident set size in bytes, from /proc/self/statm; 0 if unreadable. */
uint64_t util_rss_bytes(void);

/* isspace() in the C locale, without the locale lookup. */
int util_is_space(unsigned char c);

/* One word of the argument grammar that redis-cli, Redis's inline requests and redis.conf share:
 * words are separated by whitespace; "double quotes" understand \n \r \t \b \a \xHH and a
 * backslash before any other byte stands for that byte; 'single quotes' only understand \'; a
 * quote may start mid-word (a"b c" is one word, "ab c"); a closing quote must be followed by
 * whitespace or the end. The caller has skipped the whitespace before the word, so s[*pos] is its
 * first byte. Writes the word's bytes to out, which needs room for len - *pos bytes (a word never
 * outgrows its source, so out may even be s + *pos), and moves *pos past the word and the one
 * delimiter after it. Returns the word's length, or -1 for unbalanced quotes. */
long util_split_word(const char *s, size_t len, size_t *pos, char *out);

#endif
