/* reply.h - RESP2 replies appended to a growable buffer (buf.h): a warm connection formats
 * replies without malloc. */
#ifndef RLIMITD_REPLY_H
#define RLIMITD_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "rlimitd/buf.h"

void reply_ok(struct rbuf *b);                     /* +OK */
void reply_simple(struct rbuf *b, const char *s);  /* +s */
/* -msg ; msg must start with the error code, e.g. "ERR syntax error". CR/LF become spaces. */
void reply_error(struct rbuf *b, const char *msg);
void reply_errorf(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_int(struct rbuf *b, int64_t v);         /* :v */
void reply_bulk(struct rbuf *b, const char *p, size_t n);
void reply_bulk_cstr(struct rbuf *b, const char *s);
void reply_bulk_i64(struct rbuf *b, int64_t v);
void reply_nil(struct rbuf *b);                    /* $-1 */
void reply_array(struct rbuf *b, int64_t n);       /* *n */
void reply_null_array(struct rbuf *b);             /* *-1 */

#endif
