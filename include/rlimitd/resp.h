/* resp.h - request parsing: RESP2 multibulk (via hiredis's redisReader) and inline commands.
 *
 * A struct resp owns one connection's input buffer. The network layer asks for free space
 * (resp_input_space), reads into it, commits what it read, then pulls complete commands with
 * resp_next until it answers RESP_NEED_MORE. Every limit is checked as soon as the header that
 * declares a size arrives, before the payload is buffered (SPEC 7). */
#ifndef RLIMITD_RESP_H
#define RLIMITD_RESP_H

#include <stddef.h>

struct resp_limits {
    size_t query_buf; /* bytes one connection may buffer (whole pending command + unparsed);
                       * also the largest multibulk command, headers and CRLFs included */
    size_t max_bulk;  /* longest bulk string */
    size_t max_args;  /* most arguments in one request, multibulk or inline (<= INT_MAX) */
};

/* Inline requests longer than this, counting the line terminator, are a protocol error (Redis
 * uses the same 64 KiB). */
#define RESP_INLINE_MAX (64 * 1024)

struct resp;

/* A parsed command (argc >= 1: empty requests such as "*0", "*-1" or a blank line are skipped,
 * as Redis skips them). argv[i] points at lens[i] bytes followed by a NUL (so argv[i] may also be
 * used as a C string when it contains no NUL). Borrowed: valid until the next resp_next or
 * resp_destroy. */
struct resp_cmd {
    int argc;
    char **argv;
    size_t *lens;
};

enum resp_status {
    RESP_NEED_MORE = 0, /* no complete command buffered; read more */
    RESP_COMMAND = 1,   /* *cmd holds a command */
    RESP_ERROR = -1,    /* protocol error: reply "-ERR Protocol error: <resp_error()>", close */
};

/* Returns NULL only on invalid limits (query_buf or max_args 0, max_args > INT_MAX);
 * allocation failure aborts. */
struct resp *resp_create(const struct resp_limits *lim);
/* Frees the parser and sets *rp to NULL. */
void resp_destroy(struct resp **rp);
/* New limits apply from the next header parsed (CONFIG SET). lim must be valid as for
 * resp_create (conf.c checks ranges); invalid limits abort. */
void resp_set_limits(struct resp *r, const struct resp_limits *lim);

/* Free space at the end of the input buffer (grows the buffer, never past the query buffer
 * limit: resp_buffered() + *len <= query_buf). *len is 0 when the limit is reached and nothing
 * can be consumed: the caller should treat that as a protocol error "query buffer limit
 * exceeded" (resp_next reports it too). May move unparsed bytes; a borrowed resp_cmd stays
 * valid. */
void resp_input_space(struct resp *r, char **buf, size_t *len);
/* Declares n bytes written at the space returned by resp_input_space. */
void resp_input_commit(struct resp *r, size_t n);

/* Parses the next command. Call it until it returns RESP_NEED_MORE before reading again: the
 * query buffer limit assumes complete commands have been pulled. After RESP_ERROR every later
 * call returns RESP_ERROR. */
enum resp_status resp_next(struct resp *r, struct resp_cmd *cmd);

/* The protocol error's description (without the "ERR Protocol error: " prefix), "" before any
 * error. Printable ASCII only, so it can go into an error reply as is. */
const char *resp_error(const struct resp *r);

/* CLIENT LIST figures: the input buffer's capacity, and all memory the parser holds (input
 * buffer, argument arena and vectors). */
size_t resp_capacity(const struct resp *r);
size_t resp_memory(const struct resp *r);

/* Bytes currently buffered (unparsed input plus the part of the current command already handed
 * to hiredis), for CLIENT LIST's qbuf and the query buffer limit. */
size_t resp_buffered(const struct resp *r);

#endif
