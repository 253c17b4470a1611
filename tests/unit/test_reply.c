/* test_reply.c - reply formatting (reply.h): the exact bytes of every reply type in RESP2 and
 * RESP3, integers at the ends of int64, CR/LF inside an error made harmless, and a buffer that
 * grows across many replies without losing bytes. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rlimitd/reply.h"

/* The buffer's bytes as a NUL-terminated string (replies here hold no NUL unless said). */
static const char *text(struct rbuf *b)
{
    static char out[4096];
    cr_assert(b->len < sizeof out);
    memcpy(out, b->p, b->len);
    out[b->len] = '\0';
    return out;
}

Test(reply, every_type_exactly)
{
    struct rbuf b;
    rbuf_init(&b);
    reply_ok(&b);
    reply_simple(&b, "PONG");
    reply_error(&b, "ERR syntax error");
    reply_int(&b, 0);
    reply_int(&b, 1);
    reply_int(&b, -1);
    reply_int(&b, 42);
    reply_bulk(&b, "ab", 2);
    reply_bulk(&b, "", 0);
    reply_bulk_cstr(&b, "hello");
    reply_bulk_i64(&b, -17);
    reply_nil(&b);
    reply_array(&b, 3);
    reply_array(&b, 0);
    reply_null_array(&b);
    cr_assert_str_eq(text(&b), "+OK\r\n+PONG\r\n-ERR syntax error\r\n:0\r\n:1\r\n:-1\r\n:42\r\n"
                               "$2\r\nab\r\n$0\r\n\r\n$5\r\nhello\r\n$3\r\n-17\r\n$-1\r\n*3\r\n"
                               "*0\r\n*-1\r\n");
    rbuf_free(&b);
}

/* The replies whose bytes depend on the protocol, written once into a buffer in each. */
static void typed_replies(struct rbuf *b)
{
    reply_nil(b);
    reply_null_array(b);
    reply_map(b, 2);
    reply_set(b, 3);
    reply_push(b, 3);
    reply_double(b, 1.5);
    reply_double(b, 0.1);
    reply_double(b, -1.0 / 0.0);
    reply_double(b, 1.0 / 0.0);
    reply_double(b, 3);
    reply_double_text(b, "2.5", 3);
    reply_bool(b, 1);
    reply_bool(b, 0);
    reply_verbatim(b, "txt", "a\r\nb", 4);
    reply_verbatim(b, "x", "", 0); /* a short format is padded with spaces, as Redis does */
    reply_bignum(b, "12\r\n3", 5);
    reply_pairs(b, 2);
    reply_pair(b);
    reply_array(b, 1);
}

Test(reply, resp2_and_resp3_differ_exactly_where_redis_differs)
{
    struct rbuf b;
    rbuf_init(&b);
    cr_assert_eq(b.resp, 0); /* a new buffer writes RESP2 */
    typed_replies(&b);
    cr_assert_str_eq(text(&b), "$-1\r\n*-1\r\n*4\r\n*3\r\n*3\r\n$3\r\n1.5\r\n"
                               "$19\r\n0.10000000000000001\r\n"
                               "$4\r\n-inf\r\n$3\r\ninf\r\n$1\r\n3\r\n$3\r\n2.5\r\n:1\r\n:0\r\n"
                               "$4\r\na\r\nb\r\n$0\r\n\r\n$5\r\n12  3\r\n*4\r\n*1\r\n");
    b.len = 0;
    b.resp = 3;
    typed_replies(&b);
    cr_assert_str_eq(text(&b), "_\r\n_\r\n%2\r\n~3\r\n>3\r\n,1.5\r\n,0.10000000000000001\r\n"
                               ",-inf\r\n,inf\r\n,3\r\n,2.5\r\n#t\r\n#f\r\n=8\r\ntxt:a\r\nb\r\n"
                               "=4\r\nx  :\r\n(12  3\r\n*2\r\n*2\r\n*1\r\n");
    /* The RESP2-only shapes do not change with the protocol. */
    b.len = 0;
    reply_ok(&b);
    reply_int(&b, 7);
    reply_bulk(&b, "v", 1);
    reply_array(&b, 2);
    reply_error(&b, "ERR x");
    cr_assert_str_eq(text(&b), "+OK\r\n:7\r\n$1\r\nv\r\n*2\r\n-ERR x\r\n");
    rbuf_free(&b);
}

Test(reply, int64_extremes)
{
    struct rbuf b;
    rbuf_init(&b);
    reply_int(&b, INT64_MAX);
    reply_int(&b, INT64_MIN);
    reply_bulk_i64(&b, INT64_MIN);
    reply_array(&b, INT64_MAX);
    cr_assert_str_eq(text(&b), ":9223372036854775807\r\n:-9223372036854775808\r\n"
                               "$20\r\n-9223372036854775808\r\n*9223372036854775807\r\n");
    rbuf_free(&b);
}

Test(reply, crlf_in_an_error_cannot_end_the_line)
{
    struct rbuf b;
    rbuf_init(&b);
    reply_error(&b, "ERR bad\r\n+OK\nx\ry");
    reply_errorf(&b, "ERR %s %d", "a\r\nb", 7);
    cr_assert_str_eq(text(&b), "-ERR bad  +OK x y\r\n-ERR a  b 7\r\n");
    rbuf_free(&b);
}

Test(reply, binary_bulk_keeps_every_byte)
{
    struct rbuf b;
    rbuf_init(&b);
    const char bin[] = {'a', '\0', '\r', '\n', (char)0xff};
    reply_bulk(&b, bin, sizeof bin);
    cr_assert_eq(b.len, 4 + sizeof bin + 2);
    cr_assert(memcmp(b.p, "$5\r\na\0\r\n\xff\r\n", b.len) == 0);
    rbuf_free(&b);
}

Test(reply, growth_keeps_all_bytes)
{
    struct rbuf b;
    rbuf_init(&b);
    char big[10000];
    memset(big, 'z', sizeof big);
    size_t want = 0;
    for (int i = 0; i < 200; i++) {
        reply_int(&b, i);
        reply_bulk(&b, big, (size_t)i * 50);
        char hdr[64];
        want += (size_t)snprintf(hdr, sizeof hdr, ":%d\r\n$%d\r\n", i, i * 50) + (size_t)i * 50 + 2;
    }
    cr_assert_eq(b.len, want);
    cr_assert(b.cap >= b.len);
    /* Spot checks at the end: the last bulk is intact. */
    cr_assert(memcmp(b.p + b.len - 2, "\r\n", 2) == 0);
    cr_assert_eq(b.p[b.len - 3], 'z');
    rbuf_free(&b);
    rbuf_free(&b); /* harmless twice */
}
