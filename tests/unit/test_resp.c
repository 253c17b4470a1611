/* test_resp.c - request parsing (resp.h): multibulk via the frame scanner, inline commands,
 * the shared read buffer and the connection's own, pipelines cut at every point, every
 * protocol error and every limit (COMMANDS.md "Wire protocol", 7). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/resp.h"

static const struct resp_limits deflim = {
    .query_buf = 1024 * 1024,
    .max_bulk = 512 * 1024,
    .max_args = 1024,
};

/* Everything a parser produced for some input, rendered as text so runs can be compared with
 * cr_assert_str_eq: one line per command, "argc:" then "len=bytes;" per argument, bytes outside
 * printable ASCII as \xHH. */
struct sink {
    char *out;
    size_t len, cap;
    int ncmd;
    enum resp_status last;
    char err[256];
};

static void sink_put(struct sink *s, const char *p, size_t n)
{
    if (s->cap - s->len < n + 1) {
        while (s->cap - s->len < n + 1)
            s->cap = s->cap ? s->cap * 2 : 256;
        s->out = realloc(s->out, s->cap);
        cr_assert_not_null(s->out);
    }
    memcpy(s->out + s->len, p, n);
    s->len += n;
    s->out[s->len] = '\0';
}

static void sink_cmd(struct sink *s, const struct resp_cmd *c)
{
    char tmp[32];

    cr_assert_gt(c->argc, 0, "a command has at least one argument");
    sink_put(s, tmp, (size_t)snprintf(tmp, sizeof(tmp), "%d:", c->argc));
    for (int i = 0; i < c->argc; i++) {
        cr_assert_eq(c->argv[i][c->lens[i]], '\0', "argument %d is NUL terminated", i);
        sink_put(s, tmp, (size_t)snprintf(tmp, sizeof(tmp), "%zu=", c->lens[i]));
        for (size_t j = 0; j < c->lens[i]; j++) {
            unsigned char b = (unsigned char)c->argv[i][j];
            if (b >= 0x20 && b < 0x7f && b != '\\')
                sink_put(s, (const char *)&b, 1);
            else
                sink_put(s, tmp, (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", b));
        }
        sink_put(s, ";", 1);
    }
    sink_put(s, "\n", 1);
    s->ncmd++;
}

/* Pulls commands until the parser wants more input or fails. */
static enum resp_status drain(struct resp *r, struct sink *s)
{
    struct resp_cmd c;
    enum resp_status st;

    while ((st = resp_next(r, &c)) == RESP_COMMAND)
        sink_cmd(s, &c);
    s->last = st;
    if (st == RESP_ERROR)
        snprintf(s->err, sizeof(s->err), "%s", resp_error(r));
    return st;
}

/* One read: copies up to n bytes into the parser as libuv would, then pulls commands. Returns
 * the bytes taken (0 when the parser has no room: the query buffer limit). */
static size_t read_once(struct resp *r, struct sink *s, const char *data, size_t n)
{
    char *buf;
    size_t len;

    resp_input_space(r, &buf, &len);
    cr_assert(len == 0 || buf != NULL);
    if (len > n)
        len = n;
    if (len > 0) {
        memcpy(buf, data, len);
        resp_input_commit(r, len);
    }
    drain(r, s);
    return len;
}

/* Feeds data as one logical read (as many reads as the space offered needs). */
static void feed(struct resp *r, struct sink *s, const char *data, size_t n)
{
    while (n > 0 && s->last != RESP_ERROR) {
        size_t took = read_once(r, s, data, n);
        if (took == 0)
            break;
        data += took;
        n -= took;
    }
}

/* Parses data fed in pieces ending at cuts[0..ncuts) (ascending), then the rest. */
static struct sink parse_cut(const struct resp_limits *lim, const char *data, size_t n,
                             const size_t *cuts, size_t ncuts)
{
    struct sink s = {0};
    struct resp *r = resp_create(lim);
    size_t at = 0;

    cr_assert_not_null(r);
    for (size_t i = 0; i < ncuts; i++) {
        feed(r, &s, data + at, cuts[i] - at);
        at = cuts[i];
    }
    feed(r, &s, data + at, n - at);
    if (s.out == NULL)
        sink_put(&s, "", 0);
    resp_destroy(&r);
    cr_assert_null(r, "resp_destroy clears the caller's pointer");
    return s;
}

static struct sink parse(const char *data, size_t n)
{
    return parse_cut(&deflim, data, n, NULL, 0);
}

#define PARSE_LIT(lit) parse((lit), sizeof(lit) - 1)

static void assert_error(const struct resp_limits *lim, const char *data, size_t n,
                         const char *want)
{
    struct sink s = parse_cut(lim, data, n, NULL, 0);
    cr_assert_eq(s.last, RESP_ERROR, "input %.40s: expected an error", data);
    cr_assert_str_eq(s.err, want);
    free(s.out);
}

Test(resp, simple_multibulk)
{
    const char in[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    struct resp *r = resp_create(&deflim);
    struct resp_cmd c;
    char *buf;
    size_t len;

    resp_input_space(r, &buf, &len);
    cr_assert_geq(len, sizeof(in) - 1);
    memcpy(buf, in, sizeof(in) - 1);
    resp_input_commit(r, sizeof(in) - 1);

    cr_assert_eq(resp_next(r, &c), RESP_COMMAND);
    cr_assert_eq(c.argc, 3);
    cr_assert_str_eq(c.argv[0], "SET");
    cr_assert_str_eq(c.argv[1], "k");
    cr_assert_str_eq(c.argv[2], "hello");
    cr_assert_eq(c.lens[0], 3);
    cr_assert_eq(c.lens[1], 1);
    cr_assert_eq(c.lens[2], 5);
    cr_assert_eq(resp_next(r, &c), RESP_NEED_MORE);
    cr_assert_eq(resp_buffered(r), 0);
    cr_assert_str_eq(resp_error(r), "");
    resp_destroy(&r);
}

Test(resp, binary_safe_args)
{
    const char in[] = "*3\r\n$3\r\na\0b\r\n$4\r\n\r\n\r\n\r\n$0\r\n\r\n";
    struct sink s = parse(in, sizeof(in) - 1);

    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_str_eq(s.out, "3:3=a\\x00b;4=\\x0d\\x0a\\x0d\\x0a;0=;\n");
    free(s.out);
}

Test(resp, argc_equal_to_max_args_accepted)
{
    struct resp_limits lim = deflim;
    char in[256];
    size_t n = 0;

    lim.max_args = 3;
    n += (size_t)sprintf(in + n, "*3\r\n");
    for (int i = 0; i < 3; i++)
        n += (size_t)sprintf(in + n, "$1\r\n%d\r\n", i);
    struct sink s = parse_cut(&lim, in, n, NULL, 0);
    cr_assert_str_eq(s.out, "3:1=0;1=1;1=2;\n");
    free(s.out);
}

/* COMMANDS.md "Wire protocol": inline commands as telnet / nc send them, with redis-cli's quoting rules. */
Test(resp, inline_quotes_and_escapes)
{
    static const struct {
        const char *in;
        size_t len; /* 0: strlen */
        const char *want;
    } cases[] = {
        {"PING\r\n", 0, "1:4=PING;\n"},
        {"PING\n", 0, "1:4=PING;\n"},
        {"  SET   k\tv  \r\n", 0, "3:3=SET;1=k;1=v;\n"},
        {"SET \"a b\" 'c d'\r\n", 0, "3:3=SET;3=a b;3=c d;\n"},
        {"ECHO \"\\x41\\x6a\\n\\t\\\\\\\"\"\n", 0, "2:4=ECHO;6=Aj\\x0a\\x09\\x5c\";\n"},
        {"ECHO \"\\r\\b\\a\\q\"\n", 0, "2:4=ECHO;4=\\x0d\\x08\\x07q;\n"},
        {"ECHO \"\\x00\"\n", 0, "2:4=ECHO;1=\\x00;\n"},
        {"ECHO \"\\xZZ\"\n", 0, "2:4=ECHO;3=xZZ;\n"},
        {"ECHO 'it\\'s'\n", 0, "2:4=ECHO;4=it's;\n"},
        {"ECHO 'a\\nb'\n", 0, "2:4=ECHO;4=a\\x5cnb;\n"},
        {"ECHO \"\" ''\n", 0, "3:4=ECHO;0=;0=;\n"},
        {"ECHO a\"b c\"\n", 0, "2:4=ECHO;4=ab c;\n"},
        {"ECHO \"a\"\tb\n", 0, "3:4=ECHO;1=a;1=b;\n"},
        {"GET k\0ignored\n", 14, "2:3=GET;1=k;\n"},
        {"PING\r\r\n", 0, "1:4=PING;\n"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *in = cases[i].in;
        size_t n = cases[i].len ? cases[i].len : strlen(in);
        struct sink s = parse(in, n);
        cr_assert_eq(s.last, RESP_NEED_MORE, "case %zu: %s", i, s.err);
        cr_assert_str_eq(s.out, cases[i].want, "case %zu", i);
        free(s.out);
    }
}

Test(resp, inline_unbalanced_quotes)
{
    static const char *const cases[] = {
        "ECHO \"abc\n", "ECHO 'abc\n", "ECHO \"a\"b\n", "ECHO 'a'b\n", "ECHO \"a\\\"\n",
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_error(&deflim, cases[i], strlen(cases[i]), "unbalanced quotes in request");
}

Test(resp, inline_empty_lines_skipped)
{
    struct sink s = PARSE_LIT("\r\n\n   \r\n\t\nPING\r\n\n");

    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_str_eq(s.out, "1:4=PING;\n");
    free(s.out);
}

Test(resp, inline_waits_for_newline)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};

    feed(r, &s, "PING\r", 5);
    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_eq(s.ncmd, 0);
    cr_assert_eq(resp_buffered(r), 5);
    feed(r, &s, "\n", 1);
    cr_assert_str_eq(s.out, "1:4=PING;\n");
    cr_assert_eq(resp_buffered(r), 0);
    free(s.out);
    resp_destroy(&r);
}

Test(resp, inline_line_limit)
{
    /* RESP_INLINE_MAX counts the whole line, terminator included. */
    char *in = malloc(RESP_INLINE_MAX + 2);

    memset(in, 'a', RESP_INLINE_MAX + 1);
    in[RESP_INLINE_MAX - 1] = '\n';
    struct sink s = parse(in, RESP_INLINE_MAX);
    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_eq(s.ncmd, 1);
    free(s.out);

    in[RESP_INLINE_MAX - 1] = 'a';
    in[RESP_INLINE_MAX] = '\n';
    assert_error(&deflim, in, RESP_INLINE_MAX + 1, "too big inline request");
    /* Without any newline the error comes as soon as the limit is reached. */
    assert_error(&deflim, in, RESP_INLINE_MAX, "too big inline request");
    free(in);
}

Test(resp, inline_args_limited_by_max_args)
{
    struct resp_limits lim = deflim;

    lim.max_args = 3;
    struct sink s = parse_cut(&lim, "a b c\n", 6, NULL, 0);
    cr_assert_str_eq(s.out, "3:1=a;1=b;1=c;\n");
    free(s.out);
    assert_error(&lim, "a b c d\n", 8, "too many arguments in inline request (proto-max-args 3)");
}

Test(resp, mixed_inline_and_multibulk_pipeline)
{
    struct sink s = PARSE_LIT("PING\r\n*1\r\n$4\r\nPING\r\nPING\r\n"
                              "*2\r\n$4\r\nECHO\r\n$2\r\n*x\r\nECHO \"*1\"\n*1\r\n$4\r\nPING\r\n");

    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_str_eq(s.out, "1:4=PING;\n1:4=PING;\n1:4=PING;\n2:4=ECHO;2=*x;\n"
                            "2:4=ECHO;2=*1;\n1:4=PING;\n");
    free(s.out);
}

Test(resp, thousand_pipelined_commands_in_one_buffer)
{
    char *in = malloc(64 * 1024);
    size_t n = 0;
    struct resp *r = resp_create(&deflim);
    struct resp_cmd c;
    char *buf;
    size_t len;

    for (int i = 0; i < 1000; i++) {
        char key[16];
        int kl = sprintf(key, "key:%d", i);
        if (i % 10 == 9)
            n += (size_t)sprintf(in + n, "INCR %s\r\n", key);
        else
            n += (size_t)sprintf(in + n, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", kl, key);
    }
    /* Commit everything before pulling anything: the buffer has to grow to hold it. */
    for (size_t at = 0; at < n;) {
        resp_input_space(r, &buf, &len);
        cr_assert_gt(len, 0);
        if (len > n - at)
            len = n - at;
        memcpy(buf, in + at, len);
        resp_input_commit(r, len);
        at += len;
    }
    cr_assert_eq(resp_buffered(r), n);
    for (int i = 0; i < 1000; i++) {
        char key[16];
        sprintf(key, "key:%d", i);
        cr_assert_eq(resp_next(r, &c), RESP_COMMAND, "command %d: %s", i, resp_error(r));
        cr_assert_eq(c.argc, 2);
        cr_assert_str_eq(c.argv[0], "INCR");
        cr_assert_str_eq(c.argv[1], key);
        cr_assert_eq(c.lens[1], strlen(key));
    }
    cr_assert_eq(resp_next(r, &c), RESP_NEED_MORE);
    cr_assert_eq(resp_buffered(r), 0);
    resp_destroy(&r);
    free(in);
}

/* The result must not depend on how the kernel cut the stream: byte by byte, and every way of
 * cutting it into two reads, give what one read gives. */
Test(resp, every_split_point)
{
    const char in[] = "*3\r\n$11\r\nCL.THROTTLE\r\n$4\r\nu:42\r\n$2\r\n15\r\n"
                      "PING\r\n"
                      "*0\r\n"
                      "*2\r\n$4\r\nECHO\r\n$6\r\na\r\n\0b\n\r\n"
                      "\r\n"
                      "SET \"k 1\" 'v\\'2' \"\\x41\\n\"\n"
                      "*-1\r\n"
                      "*1\r\n$0\r\n\r\n"
                      "*2\r\n$9\r\nISALLOWED\r\n$10\r\n0123456789\r\n";
    const size_t n = sizeof(in) - 1;
    struct sink whole = parse(in, n);
    size_t *cuts = malloc(n * sizeof(*cuts));

    cr_assert_eq(whole.last, RESP_NEED_MORE, "%s", whole.err);
    cr_assert_eq(whole.ncmd, 6);
    cr_assert_str_eq(whole.out, "3:11=CL.THROTTLE;4=u:42;2=15;\n"
                                "1:4=PING;\n"
                                "2:4=ECHO;6=a\\x0d\\x0a\\x00b\\x0a;\n"
                                "4:3=SET;3=k 1;3=v'2;2=A\\x0a;\n"
                                "1:0=;\n"
                                "2:9=ISALLOWED;10=0123456789;\n");

    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    struct sink bytewise = parse_cut(&deflim, in, n, cuts, n - 1);
    cr_assert_str_eq(bytewise.out, whole.out, "byte by byte");
    cr_assert_eq(bytewise.last, RESP_NEED_MORE);
    free(bytewise.out);
    free(cuts);

    for (size_t k = 0; k <= n; k++) {
        struct sink two = parse_cut(&deflim, in, n, &k, 1);
        cr_assert_str_eq(two.out, whole.out, "cut at %zu", k);
        cr_assert_eq(two.last, RESP_NEED_MORE, "cut at %zu", k);
        free(two.out);
    }
    free(whole.out);
}

/* The same for an input that ends in a protocol error: same commands first, same error. */
Test(resp, every_split_point_before_an_error)
{
    const char in[] = "PING\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n:1\r\n*1\r\n$4\r\nPING\r\n";
    const size_t n = sizeof(in) - 1;
    struct sink whole = parse(in, n);

    cr_assert_eq(whole.last, RESP_ERROR);
    cr_assert_str_eq(whole.err, "expected '$', got ':'");
    cr_assert_str_eq(whole.out, "1:4=PING;\n1:4=PING;\n");
    for (size_t k = 0; k <= n; k++) {
        struct sink two = parse_cut(&deflim, in, n, &k, 1);
        cr_assert_str_eq(two.out, whole.out, "cut at %zu", k);
        cr_assert_str_eq(two.err, whole.err, "cut at %zu", k);
        free(two.out);
    }
    free(whole.out);
}

Test(resp, protocol_error_texts)
{
    static const struct {
        const char *in;
        const char *err;
    } cases[] = {
        {"*x\r\n", "invalid multibulk length"},
        {"*1x\r\n", "invalid multibulk length"},
        {"*\r\n", "invalid multibulk length"},
        {"*01\r\n", "invalid multibulk length"},
        {"*+1\r\n", "invalid multibulk length"},
        {"*1\rx", "invalid multibulk length"},
        {"*1\n", "invalid multibulk length"},
        {"*-0\r\n", "invalid multibulk length"},
        {"*99999999999999999999\r\n", "invalid multibulk length"},
        {"*9223372036854775808\r\n", "invalid multibulk length"},
        {"*-9223372036854775809\r\n", "invalid multibulk length"},
        {"*1-2\r\n", "invalid multibulk length"},
        {"*--1\r\n", "invalid multibulk length"},
        {"*9223372036854775807\r\n",
         "multibulk length 9223372036854775807 exceeds proto-max-args 1024"},
        {"*1\r\n$x\r\n", "invalid bulk length"},
        {"*1\r\n$-1\r\n", "invalid bulk length"},
        {"*1\r\n$\r\n", "invalid bulk length"},
        {"*1\r\n$03\r\nabc\r\n", "invalid bulk length"},
        {"*1\r\n$-0\r\n", "invalid bulk length"},
        {"*1\r\n$9223372036854775808\r\n", "invalid bulk length"},
        {"*1\r\n$-9223372036854775808\r\n", "invalid bulk length"},
        {"*1\r\n$9223372036854775807\r\n",
         "bulk length 9223372036854775807 exceeds proto-max-bulk-len 524288"},
        {"*1\r\n:5\r\n", "expected '$', got ':'"},
        {"*1\r\n*1\r\n$1\r\na\r\n", "expected '$', got '*'"},
        {"*1\r\n+OK\r\n", "expected '$', got '+'"},
        {"*2\r\n$1\r\na\r\n\r\n", "expected '$', got '\\x0d'"},
        {"*1\r\n\x01", "expected '$', got '\\x01'"},
        {"*111111111111111111111111111111111111", "too big mbulk count string"},
        {"*1\r\n$111111111111111111111111111111111111", "too big bulk count string"},
        {"*1\r\n$1\r\nabc", "bulk string not terminated by CRLF"},
        {"*1\r\n$1\r\na\rb", "bulk string not terminated by CRLF"},
        {"*1\r\n$1\r\na\n", "bulk string not terminated by CRLF"},
        {"ECHO \"a\n", "unbalanced quotes in request"},
        {"*2000\r\n", "multibulk length 2000 exceeds proto-max-args 1024"},
        {"*1\r\n$600000\r\n", "bulk length 600000 exceeds proto-max-bulk-len 524288"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_error(&deflim, cases[i].in, strlen(cases[i].in), cases[i].err);

    struct resp_limits lim = deflim;
    lim.query_buf = 100;
    assert_error(&lim, "*1\r\n$90\r\n", 9,
                 "query buffer limit exceeded (client-query-buffer-limit 100)");
}

/* COMMANDS.md "Wire protocol": limits are checked on the header, before the payload is buffered. */
Test(resp, max_args_rejected_on_header_alone)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};

    feed(r, &s, "*1025\r\n", 7);
    cr_assert_eq(s.last, RESP_ERROR);
    cr_assert_str_eq(s.err, "multibulk length 1025 exceeds proto-max-args 1024");
    resp_destroy(&r);
}

Test(resp, max_bulk_rejected_on_header_alone)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};

    feed(r, &s, "*2\r\n$3\r\nSET\r\n$524289\r\n", 23);
    cr_assert_eq(s.last, RESP_ERROR);
    cr_assert_str_eq(s.err, "bulk length 524289 exceeds proto-max-bulk-len 524288");
    resp_destroy(&r);

    /* max_bulk itself is allowed. */
    struct resp_limits lim = {.query_buf = 1024, .max_bulk = 8, .max_args = 4};
    const char *okin = "*1\r\n$8\r\n12345678\r\n";
    struct sink ok = parse_cut(&lim, okin, strlen(okin), NULL, 0);
    cr_assert_str_eq(ok.out, "1:8=12345678;\n");
    free(ok.out);
}

Test(resp, command_over_query_buf_rejected)
{
    struct resp_limits lim = {.query_buf = 1000, .max_bulk = 800, .max_args = 8};
    struct resp *r = resp_create(&lim);
    struct sink s = {0};
    char in[1200];
    size_t n = (size_t)sprintf(in, "*2\r\n$600\r\n");

    memset(in + n, 'x', 600);
    n += 600;
    n += (size_t)sprintf(in + n, "\r\n$390\r\n");
    /* Each element fits on its own; together they are over 1000 bytes: refused at the second
     * header, before its payload. */
    feed(r, &s, in, n);
    cr_assert_eq(s.last, RESP_ERROR);
    cr_assert_str_eq(s.err, "query buffer limit exceeded (client-query-buffer-limit 1000)");
    resp_destroy(&r);

    /* One byte less and it fits exactly: 4 + 6 + 600 + 2 + 6 + 380 + 2 = 1000. */
    n = (size_t)sprintf(in, "*2\r\n$600\r\n");
    memset(in + n, 'x', 600);
    n += 600;
    n += (size_t)sprintf(in + n, "\r\n$380\r\n");
    memset(in + n, 'y', 380);
    n += 380;
    n += (size_t)sprintf(in + n, "\r\n");
    cr_assert_eq(n, 1000);
    struct sink ok = parse_cut(&lim, in, n, NULL, 0);
    cr_assert_eq(ok.last, RESP_NEED_MORE, "%s", ok.err);
    cr_assert_eq(ok.ncmd, 1);
    free(ok.out);
}

Test(resp, buffer_never_exceeds_query_buf)
{
    struct resp_limits lim = {.query_buf = 4096, .max_bulk = 4000, .max_args = 8};
    struct resp *r = resp_create(&lim);
    struct resp_cmd c;
    char *buf;
    size_t len;

    /* An inline line that never ends: the space offered shrinks to 0, then resp_next fails. */
    for (int i = 0; i < 100; i++) {
        resp_input_space(r, &buf, &len);
        cr_assert_leq(resp_buffered(r) + len, lim.query_buf);
        if (len == 0)
            break;
        size_t n = len < 700 ? len : 700;
        memset(buf, 'a', n);
        resp_input_commit(r, n);
        cr_assert_leq(resp_buffered(r), lim.query_buf);
        if (resp_buffered(r) < lim.query_buf)
            cr_assert_eq(resp_next(r, &c), RESP_NEED_MORE);
    }
    cr_assert_eq(len, 0);
    cr_assert_eq(resp_next(r, &c), RESP_ERROR);
    cr_assert_str_eq(resp_error(r), "query buffer limit exceeded (client-query-buffer-limit 4096)");
    resp_destroy(&r);

    /* A bulk that streams through: reads never offer more than the limit leaves. */
    r = resp_create(&lim);
    static char body[11 + 4002];
    size_t total = (size_t)sprintf(body, "*1\r\n$4000\r\n");
    memset(body + total, 'b', 4000);
    memcpy(body + total + 4000, "\r\n", 2);
    total += 4002;
    enum resp_status st = RESP_NEED_MORE;
    for (size_t at = 0; at < total;) {
        resp_input_space(r, &buf, &len);
        cr_assert_gt(len, 0);
        cr_assert_leq(resp_buffered(r) + len, lim.query_buf);
        size_t n = len < 333 ? len : 333;
        if (n > total - at)
            n = total - at;
        memcpy(buf, body + at, n);
        resp_input_commit(r, n);
        at += n;
        st = resp_next(r, &c);
        cr_assert_eq(st, at < total ? RESP_NEED_MORE : RESP_COMMAND, "%s", resp_error(r));
    }
    cr_assert_eq(c.argc, 1);
    cr_assert_eq(c.lens[0], 4000);
    cr_assert_eq(c.argv[0][3999], 'b');
    resp_destroy(&r);
}

Test(resp, input_space_respects_small_query_buf)
{
    struct resp_limits lim = {.query_buf = 10, .max_bulk = 10, .max_args = 8};
    struct resp *r = resp_create(&lim);
    char *buf;
    size_t len;

    resp_input_space(r, &buf, &len);
    cr_assert_eq(len, 10);
    resp_destroy(&r);
}

Test(resp, empty_multibulk_skipped)
{
    struct sink s =
        PARSE_LIT("*0\r\n*-1\r\n*-5\r\n*-9223372036854775808\r\n*1\r\n$4\r\nPING\r\n*0\r\n");

    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_str_eq(s.out, "1:4=PING;\n");
    free(s.out);
}

Test(resp, error_is_sticky)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};
    struct resp_cmd c;

    feed(r, &s, "*1\r\n:1\r\n", 8);
    cr_assert_eq(s.last, RESP_ERROR);
    cr_assert_str_eq(resp_error(r), "expected '$', got ':'");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(resp_next(r, &c), RESP_ERROR);

    char *buf;
    size_t len;
    resp_input_space(r, &buf, &len);
    cr_assert_geq(len, 6);
    memcpy(buf, "PING\r\n", 6);
    resp_input_commit(r, 6);
    cr_assert_eq(resp_next(r, &c), RESP_ERROR);
    cr_assert_str_eq(resp_error(r), "expected '$', got ':'");
    resp_destroy(&r);
}

Test(resp, large_bulk_across_many_reads)
{
    const size_t big = 300 * 1024;
    size_t n = 0;
    char *in = malloc(big + 64);
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};

    n += (size_t)sprintf(in, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n", big);
    for (size_t i = 0; i < big; i++)
        in[n + i] = (char)(i * 7);
    n += big;
    memcpy(in + n, "\r\n", 2);
    n += 2;

    for (size_t at = 0; at < n; at += 1000) {
        size_t len = n - at < 1000 ? n - at : 1000;
        feed(r, &s, in + at, len);
        cr_assert_neq(s.last, RESP_ERROR, "%s", s.err);
        if (at + len < n) {
            cr_assert_eq(s.ncmd, 0);
            cr_assert_eq(resp_buffered(r), at + len, "hiredis's share is counted");
        }
    }
    cr_assert_eq(s.ncmd, 1);
    cr_assert_eq(resp_buffered(r), 0);
    free(s.out);

    /* Check the payload itself, and a small command right behind it. */
    struct resp_cmd c;
    char *buf;
    size_t len, at = 0;
    resp_destroy(&r);
    r = resp_create(&deflim);
    n = (size_t)sprintf(in, "*1\r\n$%zu\r\n", big);
    for (size_t i = 0; i < big; i++)
        in[n + i] = (char)(i * 7);
    memcpy(in + n + big, "\r\n*1\r\n$4\r\nPING\r\n", 16);
    n += big + 16;
    enum resp_status st = RESP_NEED_MORE;
    while (st == RESP_NEED_MORE) {
        resp_input_space(r, &buf, &len);
        if (len > n - at)
            len = n - at;
        memcpy(buf, in + at, len);
        resp_input_commit(r, len);
        at += len;
        st = resp_next(r, &c);
    }
    cr_assert_eq(st, RESP_COMMAND);
    cr_assert_eq(c.lens[0], big);
    for (size_t i = 0; i < big; i++)
        cr_assert_eq(c.argv[0][i], (char)(i * 7));
    if (at < n) {
        resp_input_space(r, &buf, &len);
        cr_assert_geq(len, n - at);
        memcpy(buf, in + at, n - at);
        resp_input_commit(r, n - at);
    }
    cr_assert_eq(resp_next(r, &c), RESP_COMMAND);
    cr_assert_str_eq(c.argv[0], "PING");
    resp_destroy(&r);
    free(in);
}

Test(resp, buffered_counts_partial_command)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};

    feed(r, &s, "*2\r\n$3\r\nSET\r\n$5\r\nhe", 19);
    cr_assert_eq(s.last, RESP_NEED_MORE);
    cr_assert_eq(resp_buffered(r), 19);
    feed(r, &s, "llo\r\n*1\r\n$4", 11);
    cr_assert_eq(s.ncmd, 1);
    cr_assert_eq(resp_buffered(r), 6);
    resp_destroy(&r);
    free(s.out);
}

Test(resp, create_rejects_invalid_limits)
{
    struct resp_limits lim = deflim;

    cr_assert_null(resp_create(NULL));
    lim.query_buf = 0;
    cr_assert_null(resp_create(&lim));
    lim = deflim;
    lim.max_args = 0;
    cr_assert_null(resp_create(&lim));
    lim.max_args = (size_t)1 << 40;
    cr_assert_null(resp_create(&lim));

    struct resp *r = NULL;
    resp_destroy(&r); /* destroying nothing is fine */
}

Test(resp, set_limits_apply_from_next_header)
{
    struct resp *r = resp_create(&deflim);
    struct sink s = {0};
    struct resp_limits lim = deflim;

    feed(r, &s, "*3\r\n$3\r\nSET\r\n", 13);
    lim.max_args = 2;
    lim.max_bulk = 4;
    resp_set_limits(r, &lim);
    /* The count was accepted under the old limits; the next bulk header meets the new ones. */
    feed(r, &s, "$1\r\nk\r\n$4\r\nvvvv\r\n", 17);
    cr_assert_eq(s.ncmd, 1);
    feed(r, &s, "*2\r\n$5\r\n", 8);
    cr_assert_eq(s.last, RESP_ERROR);
    cr_assert_str_eq(s.err, "bulk length 5 exceeds proto-max-bulk-len 4");
    free(s.out);
    resp_destroy(&r);
}

/* DESIGN "Hot path": once warm, commands of the same shape reuse the same storage, and a
 * multibulk command's arguments are the bytes read, not a copy. */
Test(resp, warm_parser_reuses_storage)
{
    struct resp *r = resp_create(&deflim);
    struct resp_cmd c;
    char *buf;
    size_t len;
    char **argv0 = NULL;
    char *inline_arg0 = NULL;

    for (int i = 0; i < 200; i++) {
        const char *in = i % 2 ? "*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nk:1\r\n$2\r\n15\r\n"
                               : "CL.THROTTLE k:1 15 30 60\r\n";
        resp_input_space(r, &buf, &len);
        memcpy(buf, in, strlen(in));
        resp_input_commit(r, strlen(in));
        cr_assert_eq(resp_next(r, &c), RESP_COMMAND);
        cr_assert_str_eq(c.argv[0], "CL.THROTTLE");
        if (i == 0) {
            argv0 = c.argv;
            inline_arg0 = c.argv[0];
        }
        cr_assert_eq(c.argv, argv0);
        if (i % 2)
            cr_assert_eq(c.argv[0], buf + strlen("*3\r\n$11\r\n"), "parsed in place");
        else
            cr_assert_eq(c.argv[0], inline_arg0);
        cr_assert_eq(resp_next(r, &c), RESP_NEED_MORE);
        cr_assert_eq(resp_capacity(r), 0, "nothing pending: no buffer of its own");
    }
    resp_destroy(&r);
}

/* Two connections over one shared part, as on an I/O thread: each settles before the other
 * reads; an incomplete command survives in its own buffer, and that buffer is gone once the
 * command completes. */
Test(resp, shared_buffer_between_connections)
{
    struct resp_shared sh;
    struct resp a, b;
    struct resp_cmd c;
    char *buf;
    size_t len;

    resp_shared_init(&sh, &deflim);
    resp_init(&a, &sh);
    resp_init(&b, &sh);

    resp_input_space(&a, &buf, &len);
    cr_assert_eq(buf, sh.buf);
    memcpy(buf, "*2\r\n$4\r\nECHO\r\n$5\r\nhel", 21);
    resp_input_commit(&a, 21);
    cr_assert_eq(resp_next(&a, &c), RESP_NEED_MORE);
    resp_settle(&a);
    cr_assert_eq(resp_buffered(&a), 21);
    cr_assert_geq(resp_capacity(&a), 21);

    resp_input_space(&b, &buf, &len);
    cr_assert_eq(buf, sh.buf);
    memcpy(buf, "*1\r\n$4\r\nPING\r\n", 14);
    resp_input_commit(&b, 14);
    cr_assert_eq(resp_next(&b, &c), RESP_COMMAND);
    cr_assert_str_eq(c.argv[0], "PING");
    cr_assert_eq(resp_next(&b, &c), RESP_NEED_MORE);
    resp_settle(&b);
    cr_assert_eq(resp_capacity(&b), 0);

    resp_input_space(&a, &buf, &len);
    memcpy(buf, "lo\r\n", 4);
    resp_input_commit(&a, 4);
    cr_assert_eq(resp_next(&a, &c), RESP_COMMAND);
    cr_assert_eq(c.argc, 2);
    cr_assert_str_eq(c.argv[1], "hello");
    cr_assert_eq(resp_next(&a, &c), RESP_NEED_MORE);
    resp_settle(&a);
    cr_assert_eq(resp_buffered(&a), 0);
    cr_assert_eq(resp_capacity(&a), 0);

    resp_deinit(&a);
    resp_deinit(&b);
    resp_shared_deinit(&sh);
}

/* A big argument arriving in pieces: past SHARE_BACK pending bytes it grows in the connection's
 * own buffer (never past the limit), and the buffer is gone once the command is pulled. Small
 * pending bytes go back into the shared buffer for the next read instead. */
Test(resp, big_argument_in_own_buffer_then_freed)
{
    struct resp_limits lim = {.query_buf = 1024 * 1024, .max_bulk = 512 * 1024, .max_args = 8};
    struct resp_shared sh;
    struct resp r;
    struct resp_cmd c;
    char *buf;
    size_t len;
    static const char hdr[] = "*2\r\n$4\r\nECHO\r\n$200000\r\n";
    size_t total = sizeof(hdr) - 1 + 200000 + 2, sent = 0;
    char *in = malloc(total);

    memcpy(in, hdr, sizeof(hdr) - 1);
    memset(in + sizeof(hdr) - 1, 'v', 200000);
    memcpy(in + total - 2, "\r\n", 2);
    resp_shared_init(&sh, &lim);
    resp_init(&r, &sh);
    while (sent < total) {
        resp_input_space(&r, &buf, &len);
        cr_assert_gt(len, 0);
        cr_assert_leq(resp_buffered(&r) + len, lim.query_buf);
        if (resp_buffered(&r) <= RESP_READ_SIZE / 4)
            cr_assert_eq(buf, sh.buf + resp_buffered(&r), "few pending bytes: shared buffer");
        else
            cr_assert_neq(buf, sh.buf + resp_buffered(&r), "a big command: its own buffer");
        if (len > 10000)
            len = 10000; /* a slow sender */
        if (len > total - sent)
            len = total - sent;
        memcpy(buf, in + sent, len);
        resp_input_commit(&r, len);
        sent += len;
        enum resp_status st = resp_next(&r, &c);
        if (sent < total) {
            cr_assert_eq(st, RESP_NEED_MORE);
            resp_settle(&r);
            cr_assert_eq(resp_buffered(&r), sent);
            cr_assert_geq(resp_capacity(&r), sent);
            cr_assert_leq(resp_capacity(&r), 4 * sent + 128, "doubling: under 4x what is held");
        } else {
            cr_assert_eq(st, RESP_COMMAND, "%s", resp_error(&r));
            cr_assert_eq(c.lens[1], 200000);
            cr_assert_eq(c.argv[1][0], 'v');
            cr_assert_eq(c.argv[1][200000], '\0');
        }
    }
    cr_assert_eq(resp_next(&r, &c), RESP_NEED_MORE);
    resp_settle(&r);
    cr_assert_eq(resp_capacity(&r), 0);
    cr_assert_eq(resp_buffered(&r), 0);
    resp_deinit(&r);
    resp_shared_deinit(&sh);
    free(in);
}
