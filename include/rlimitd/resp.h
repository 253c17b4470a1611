/* resp.h - request parsing: RESP2 multibulk and inline commands.
 *
 * A struct resp is one connection's parse state. The network layer asks for free space
 * (resp_input_space), reads into it, commits what it read, pulls complete commands with
 * resp_next until it answers RESP_NEED_MORE, then settles (resp_settle). Every limit is checked
 * as soon as the header that declares a size arrives, before the payload is buffered. */
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

/* A parsed command (argc >= 1: empty requests such as "*0", "*-1" or a blank line are skipped,
 * as Redis skips them). argv[i] points at lens[i] bytes followed by a NUL (so argv[i] may also be
 * used as a C string when it contains no NUL). Borrowed: valid until the next resp_next,
 * resp_settle, resp_input_space or resp_destroy. */
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

/* The per-I/O-thread half of the parser: the buffer idle connections read into, and the argument
 * vectors of the command being run. One connection uses it at a time (its owning thread runs one
 * callback at a time), so it is sized once per thread instead of once per connection. */
struct resp_shared {
    struct resp_limits lim;
    char *buf; /* reads of connections with nothing pending land here (RESP_READ_SIZE) */
    size_t cap;
    const struct resp *lent_to; /* the connection whose unsettled bytes are in buf, or NULL */
    char *arena; /* inline commands' arguments (multibulk ones point into the input) */
    size_t arena_cap;
    char **argv;
    size_t *lens;
    size_t argv_cap;
};

/* Size of the shared read buffer: one read of a deep pipeline of small commands. */
#define RESP_READ_SIZE (64 * 1024)

/* One connection's parse state. Between commands it holds no memory at all: bytes are read into
 * the shared buffer and parsed there, and only an incomplete command (or commands the caller did
 * not pull, e.g. while paused by the output limit) is copied into the connection's own buffer by
 * resp_settle. Fields are private to resp.c; the struct is public only so that it can be
 * embedded in the connection. */
struct resp {
    struct resp_shared *sh;
    char *own;       /* malloc'd, or NULL when nothing is pending */
    size_t own_cap;
    char *src;       /* where [head, tail) lives: own, sh->buf (lent), or NULL */
    size_t head;     /* first byte of the current command (everything before it is consumed) */
    size_t pos;      /* first byte not scanned yet */
    size_t tail;     /* end of received bytes */
    size_t bulk_left; /* payload bytes of element idx not yet scanned */
    unsigned nargs;   /* elements the current multibulk declared (<= max_args <= INT_MAX) */
    unsigned idx;     /* element being scanned */
    unsigned line_seen; /* bytes of a partial inline line already searched for '\n' */
    unsigned char st; /* scan state (resp.c) */
    unsigned char alone; /* created by resp_create: owns sh */
    char *err;        /* malloc'd description once failed, else NULL */
};

/* A connection's parser over a thread's shared part: resp_shared_init once per thread,
 * resp_init per connection (no allocation), resp_settle after every batch of resp_next,
 * resp_deinit at close. */
void resp_shared_init(struct resp_shared *sh, const struct resp_limits *lim);
void resp_shared_deinit(struct resp_shared *sh);
/* New limits apply from the next header parsed (CONFIG SET). lim must be valid as for
 * resp_create (conf.c checks ranges); invalid limits abort. */
void resp_shared_set_limits(struct resp_shared *sh, const struct resp_limits *lim);
void resp_init(struct resp *r, struct resp_shared *sh);
void resp_deinit(struct resp *r);
/* Ends a batch: bytes still unparsed in the shared buffer are copied into the connection's own
 * buffer (the incomplete tail only: complete commands were parsed in place), and the own buffer
 * is freed once empty. Must run before any other connection of the thread reads; borrowed
 * resp_cmd arguments become invalid. */
void resp_settle(struct resp *r);

/* A parser with a shared part of its own (tests, fuzzing): returns NULL only on invalid limits
 * (query_buf or max_args 0, max_args > INT_MAX); allocation failure aborts. It settles itself in
 * resp_input_space. */
struct resp *resp_create(const struct resp_limits *lim);
/* Frees the parser and sets *rp to NULL. */
void resp_destroy(struct resp **rp);
/* resp_shared_set_limits on a resp_create parser. */
void resp_set_limits(struct resp *r, const struct resp_limits *lim);

/* Free space to read into: the shared buffer when nothing is pending, else the own buffer (grown,
 * never past the query buffer limit: resp_buffered() + *len <= query_buf). *len is 0 when the
 * limit is reached and nothing can be consumed: the caller should treat that as a protocol error
 * "query buffer limit exceeded" (resp_next reports it too). May move unparsed bytes. */
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

/* CLIENT LIST figures: the capacity of the connection's own buffer (0 when nothing is pending),
 * which is all the memory the connection's parser holds besides struct resp itself. */
size_t resp_capacity(const struct resp *r);
/* The shared part's memory (INFO, per thread). */
size_t resp_shared_memory(const struct resp_shared *sh);

/* Bytes currently buffered (the current incomplete command plus unpulled ones), for CLIENT
 * LIST's qbuf and the query buffer limit. */
size_t resp_buffered(const struct resp *r);

#endif
