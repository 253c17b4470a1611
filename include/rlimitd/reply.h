/* reply.h - RESP2 and RESP3 replies appended to a growable buffer (buf.h): a warm connection
 * formats replies without malloc.
 *
 * The protocol is the buffer's: every function writes the RESP version in b->resp (3: RESP3,
 * anything else: RESP2), which the owner of the buffer sets once per command (the dispatcher
 * from the session, HELLO when it switches, the script engine for redis.call from
 * redis.setresp). A handler writes a reply once, in terms of what it means (a null, a map, a
 * double, a pair); where the two protocols differ the function picks the bytes, as Redis's
 * addReply* family does, so a handler never tests the protocol itself. The RESP2 bytes of
 * every function are those it wrote before RESP3 existed here, and the functions RESP2's hot
 * paths use (integers, bulks, arrays, +OK) do not look at the protocol at all. */
#ifndef RLIMITD_REPLY_H
#define RLIMITD_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/buf.h"

#define REPLY_IS_RESP3(b) ((b)->resp == 3)

void reply_ok(struct rbuf *b);                     /* +OK */
void reply_simple(struct rbuf *b, const char *s);  /* +s */
/* -msg ; msg must start with the error code, e.g. "ERR syntax error". CR/LF become spaces.
 * The same in both protocols. */
void reply_error(struct rbuf *b, const char *msg);
void reply_errorf(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_int(struct rbuf *b, int64_t v);         /* :v */
void reply_bulk(struct rbuf *b, const char *p, size_t n);
void reply_bulk_cstr(struct rbuf *b, const char *s);
void reply_bulk_i64(struct rbuf *b, int64_t v);
void reply_array(struct rbuf *b, int64_t n);       /* *n */

/* ---- where RESP3 differs ---- */

/* A missing value: $-1 (RESP2), _ (RESP3). */
void reply_nil(struct rbuf *b);
/* A missing array (EXEC after a WATCHed key changed, a counted pop of a missing list): *-1
 * (RESP2), _ (RESP3, which has one null). */
void reply_null_array(struct rbuf *b);
/* A map of n pairs, each written as key then value: *2n (RESP2), %n (RESP3). */
void reply_map(struct rbuf *b, int64_t n);
/* A set of n elements: *n (RESP2), ~n (RESP3). */
void reply_set(struct rbuf *b, int64_t n);
/* An out-of-band push of n elements (Pub/Sub messages, invalidations): *n (RESP2, where a
 * subscribed connection reads nothing else), >n (RESP3). */
void reply_push(struct rbuf *b, int64_t n);
/* A double: a bulk string of "%.17g" (RESP2), ,<%.17g> (RESP3); infinities as inf and -inf,
 * as Redis writes them (addReplyDouble). */
void reply_double(struct rbuf *b, double d);
/* A double already formatted as Redis formats it (the n bytes at s, e.g. a sorted-set score):
 * a bulk string of them (RESP2), ,<s> (RESP3). */
void reply_double_text(struct rbuf *b, const char *s, size_t n);
/* A boolean: :1 / :0 (RESP2), #t / #f (RESP3). */
void reply_bool(struct rbuf *b, int v);
/* Text for humans (INFO, CLIENT LIST, LATENCY DOCTOR): a bulk string (RESP2), a verbatim
 * string =<n+4>\r\n<fmt>:<text> (RESP3), fmt its first three bytes, padded with spaces. */
void reply_verbatim(struct rbuf *b, const char *fmt, const char *p, size_t n);
/* A big number given as its decimal digits: a bulk string (RESP2), (<digits> (RESP3). CR and
 * LF in the digits become spaces. */
void reply_bignum(struct rbuf *b, const char *p, size_t n);
/* The header of n (element, value) pairs, as ZRANGE ... WITHSCORES answers: a flat array of 2n
 * (RESP2), an array of n two-element arrays (RESP3), each opened with reply_pair. */
void reply_pairs(struct rbuf *b, int64_t n);
/* Opens one pair of reply_pairs: nothing (RESP2), *2 (RESP3). */
void reply_pair(struct rbuf *b);

#endif
