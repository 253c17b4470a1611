/* reply.c - RESP2 and RESP3 reply encoding into a growable buffer (reply.h). */
#include "rlimitd/reply.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/util.h"

/* "<prefix><integer>\r\n", the shape of :n, *n and $n headers. Most integers a limiter sends
 * are small (CL.THROTTLE's limit, remaining and seconds, -1 for "no retry", array and bulk
 * lengths): those are written without the general formatter's loop. */
static void prefixed_int(struct rbuf *b, char prefix, int64_t v)
{
    char *p = rbuf_room(b, 24);
    size_t n;

    p[0] = prefix;
    if (v >= 0 && v < 1000) {
        unsigned u = (unsigned)v;
        if (u < 10) {
            p[1] = (char)('0' + u);
            n = 1;
        } else if (u < 100) {
            p[1] = (char)('0' + u / 10);
            p[2] = (char)('0' + u % 10);
            n = 2;
        } else {
            p[1] = (char)('0' + u / 100);
            p[2] = (char)('0' + u / 10 % 10);
            p[3] = (char)('0' + u % 10);
            n = 3;
        }
    } else if (v == -1) {
        p[1] = '-';
        p[2] = '1';
        n = 2;
    } else {
        n = util_fmt_i64(p + 1, v);
    }
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    b->len += n + 3;
}

void reply_ok(struct rbuf *b)
{
    rbuf_append(b, "+OK\r\n", 5);
}

void reply_simple(struct rbuf *b, const char *s)
{
    size_t n = strlen(s);
    char *p = rbuf_room(b, n + 3); /* one room check: this answers every queued command */
    p[0] = '+';
    memcpy(p + 1, s, n);
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    b->len += n + 3;
}

void reply_error(struct rbuf *b, const char *msg)
{
    size_t n = strlen(msg);
    char *p = rbuf_room(b, n + 3);
    p[0] = '-';
    /* A CR or LF inside an error would end the line early and desync the client. */
    for (size_t i = 0; i < n; i++)
        p[i + 1] = (msg[i] == '\r' || msg[i] == '\n') ? ' ' : msg[i];
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    b->len += n + 3;
}

void reply_errorf(struct rbuf *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    reply_error(b, msg);
}

void reply_int(struct rbuf *b, int64_t v)
{
    /* The two answers of EXISTS, DEL, ISALLOWED, EXPIRE...: no formatting needed. */
    if (v == 0 || v == 1) {
        rbuf_append(b, v ? ":1\r\n" : ":0\r\n", 4);
        return;
    }
    prefixed_int(b, ':', v);
}

void reply_bulk(struct rbuf *b, const char *p, size_t n)
{
    prefixed_int(b, '$', (int64_t)n);
    char *d = rbuf_room(b, n + 2);
    memcpy(d, p, n);
    d[n] = '\r';
    d[n + 1] = '\n';
    b->len += n + 2;
}

void reply_bulk_cstr(struct rbuf *b, const char *s)
{
    reply_bulk(b, s, strlen(s));
}

void reply_bulk_i64(struct rbuf *b, int64_t v)
{
    char tmp[24];
    size_t n = util_fmt_i64(tmp, v);
    reply_bulk(b, tmp, n);
}

void reply_array(struct rbuf *b, int64_t n)
{
    prefixed_int(b, '*', n);
}

/* ---- where RESP3 differs (reply.h) ---- */

void reply_nil(struct rbuf *b)
{
    if (REPLY_IS_RESP3(b))
        rbuf_append(b, "_\r\n", 3);
    else
        rbuf_append(b, "$-1\r\n", 5);
}

void reply_null_array(struct rbuf *b)
{
    if (REPLY_IS_RESP3(b))
        rbuf_append(b, "_\r\n", 3);
    else
        rbuf_append(b, "*-1\r\n", 5);
}

void reply_map(struct rbuf *b, int64_t n)
{
    if (REPLY_IS_RESP3(b))
        prefixed_int(b, '%', n);
    else
        prefixed_int(b, '*', 2 * n);
}

void reply_set(struct rbuf *b, int64_t n)
{
    prefixed_int(b, REPLY_IS_RESP3(b) ? '~' : '*', n);
}

void reply_push(struct rbuf *b, int64_t n)
{
    prefixed_int(b, REPLY_IS_RESP3(b) ? '>' : '*', n);
}

void reply_double_text(struct rbuf *b, const char *s, size_t n)
{
    if (!REPLY_IS_RESP3(b)) {
        reply_bulk(b, s, n);
        return;
    }
    char *p = rbuf_room(b, n + 3);
    p[0] = ',';
    memcpy(p + 1, s, n);
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    b->len += n + 3;
}

void reply_double(struct rbuf *b, double d)
{
    char tmp[64];
    int n;
    if (isinf(d))
        n = snprintf(tmp, sizeof(tmp), "%s", d > 0 ? "inf" : "-inf");
    else
        n = snprintf(tmp, sizeof(tmp), "%.17g", d);
    reply_double_text(b, tmp, (size_t)n);
}

void reply_bool(struct rbuf *b, int v)
{
    if (REPLY_IS_RESP3(b))
        rbuf_append(b, v ? "#t\r\n" : "#f\r\n", 4);
    else
        rbuf_append(b, v ? ":1\r\n" : ":0\r\n", 4);
}

void reply_verbatim(struct rbuf *b, const char *fmt, const char *p, size_t n)
{
    if (!REPLY_IS_RESP3(b)) {
        reply_bulk(b, p, n);
        return;
    }
    prefixed_int(b, '=', (int64_t)n + 4);
    char *d = rbuf_room(b, n + 6);
    for (int i = 0; i < 3; i++) /* Redis pads a short format with spaces */
        d[i] = *fmt != '\0' ? *fmt++ : ' ';
    d[3] = ':';
    memcpy(d + 4, p, n);
    d[n + 4] = '\r';
    d[n + 5] = '\n';
    b->len += n + 6;
}

void reply_bignum(struct rbuf *b, const char *p, size_t n)
{
    if (REPLY_IS_RESP3(b)) {
        rbuf_append(b, "(", 1);
    } else {
        prefixed_int(b, '$', (int64_t)n);
    }
    char *d = rbuf_room(b, n + 2);
    for (size_t i = 0; i < n; i++) /* a CR or LF would end the line early (RESP3) */
        d[i] = (p[i] == '\r' || p[i] == '\n') ? ' ' : p[i];
    d[n] = '\r';
    d[n + 1] = '\n';
    b->len += n + 2;
}

void reply_pairs(struct rbuf *b, int64_t n)
{
    prefixed_int(b, '*', REPLY_IS_RESP3(b) ? n : 2 * n);
}

void reply_pair(struct rbuf *b)
{
    if (REPLY_IS_RESP3(b))
        rbuf_append(b, "*2\r\n", 4);
}
