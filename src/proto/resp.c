/* resp.c - request parsing: a frame scanner in front of hiredis's redisReader, plus inline
 * commands (resp.h, DESIGN.md "Hot path", SPEC 1 and 7).
 *
 * Bytes flow through three places:
 *
 *   in[head, tail)   received, not yet scanned (a partial header, a partial inline line, or
 *                    pipelined commands the caller has not pulled yet)
 *   hiredis buffer   scanned bytes of the current multibulk command (cmd_fed of them)
 *   arena            the arguments of the last command returned, NUL terminated
 *
 * The scanner exists because hiredis 0.14 has no limits of its own: it would buffer any
 * "$<len>" payload and accept nested arrays, integers and nils. The scanner sees every header
 * first, so limits are enforced before a payload is buffered, and it only hands hiredis bytes it
 * has validated. It also knows where each command ends, so hiredis is given exactly one command
 * at a time (lockstep: one redisReaderGetReply, one reply, per complete command) and inline
 * commands, which hiredis refuses, can sit between multibulk ones in a pipeline.
 *
 * hiredis compacts its buffer inside redisReaderGetReply, so our createString callback copies
 * each argument into the arena rather than keeping pointers into the reader. */
#include "rlimitd/resp.h"
#include "rlimitd/util.h"

#include <hiredis/read.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input buffer size for a new connection: a read of 16 small pipelined commands fits many times
 * over, and most connections never need more. */
#define IN_INIT (16 * 1024)
/* "*<n>\r\n" and "$<len>\r\n" are at most 1 + 20 + 2 bytes for any int64; a header that has not
 * ended after this many bytes is garbage, not a slow client. */
#define HDR_MAX 32
/* Arena and argv sizes for a new connection, and how big they may stay between commands. A
 * command with larger arguments grows them; the next resp_next gives the excess back, so one big
 * SET does not pin its size to the connection forever while normal traffic never reallocates. */
#define ARENA_INIT 4096
#define ARENA_KEEP (128 * 1024)
#define ARGV_INIT 16
#define ARGV_KEEP 4096

enum scan_state {
    SCAN_IDLE,      /* between commands: the next byte decides inline or multibulk */
    SCAN_COUNT,     /* waiting for the whole "*<n>\r\n" line */
    SCAN_BULK_HDR,  /* waiting for the whole "$<len>\r\n" line of element idx */
    SCAN_BULK_DATA, /* skipping the payload of element idx (bulk_left bytes to go) */
    SCAN_BULK_END,  /* waiting for the "\r\n" after the payload */
};

/* What one step of the scanner or the inline parser produced. */
enum step {
    STEP_MORE,  /* needs bytes that have not arrived */
    STEP_DONE,  /* a command is complete */
    STEP_EMPTY, /* an empty command (*0, *-1, blank line) was consumed: go on */
    STEP_ERR,   /* protocol error, r->err says what */
};

struct resp {
    struct resp_limits lim;

    char *in;
    size_t in_cap;
    size_t head; /* first unscanned byte */
    size_t tail; /* end of received bytes */

    enum scan_state st;
    size_t nargs;       /* elements the current multibulk declared */
    size_t idx;         /* element being scanned */
    size_t bulk_left;   /* payload bytes of element idx not yet scanned */
    size_t cmd_fed;     /* bytes of the current multibulk already given to hiredis */
    size_t cmd_payload; /* sum of its bulk lengths: sizes the arena */
    size_t line_seen;   /* bytes of a partial inline line already searched for '\n' */

    redisReader *reader;

    char *arena;
    size_t arena_cap;
    size_t arena_used;
    char **argv;
    size_t *lens;
    size_t argv_cap;
    size_t filled; /* arguments the reader callbacks have stored so far */

    int failed;
    char err[160];
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL) {
        /* DESIGN "Errors": a limiter that silently loses state is worse than a restart. */
        fprintf(stderr, "rlimitd: out of memory growing a request buffer to %zu bytes\n", n);
        abort();
    }
    return q;
}

static int limits_valid(const struct resp_limits *lim)
{
    /* max_args reaches hiredis's createArray as an int. */
    return lim != NULL && lim->query_buf > 0 && lim->max_args > 0 && lim->max_args <= INT_MAX;
}

__attribute__((format(printf, 2, 3))) static enum step fail(struct resp *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    r->failed = 1;
    return STEP_ERR;
}

/* Grow paths are out of line; the hot path only compares (ensure_arena, ensure_argv). */
static void grow_arena(struct resp *r, size_t need)
{
    size_t cap = r->arena_cap ? r->arena_cap : ARENA_INIT;
    while (cap < need)
        cap *= 2;
    r->arena = xrealloc(r->arena, cap);
    r->arena_cap = cap;
}

static void grow_argv(struct resp *r, size_t need)
{
    size_t cap = r->argv_cap ? r->argv_cap : ARGV_INIT;
    while (cap < need)
        cap *= 2;
    r->argv = xrealloc(r->argv, cap * sizeof(*r->argv));
    r->lens = xrealloc(r->lens, cap * sizeof(*r->lens));
    r->argv_cap = cap;
}

static inline void ensure_arena(struct resp *r, size_t need)
{
    if (r->arena_cap < need)
        grow_arena(r, need);
}

static inline void ensure_argv(struct resp *r, size_t need)
{
    if (r->argv_cap < need)
        grow_argv(r, need);
}

/* Called when the previous command's arguments are no longer borrowed. */
static void trim_arena(struct resp *r)
{
    if (r->arena_cap > ARENA_KEEP) {
        r->arena = xrealloc(r->arena, ARENA_KEEP);
        r->arena_cap = ARENA_KEEP;
    }
    if (r->argv_cap > ARGV_KEEP) {
        r->argv = xrealloc(r->argv, ARGV_KEEP * sizeof(*r->argv));
        r->lens = xrealloc(r->lens, ARGV_KEEP * sizeof(*r->lens));
        r->argv_cap = ARGV_KEEP;
    }
}

/* ---- hiredis callbacks ---------------------------------------------------------------------
 * The reader only ever sees what the scanner validated: one array of r->nargs bulk strings. The
 * checks below are the second line of defence; a NULL return makes the reader fail, which
 * build_argv reports as a protocol error instead of trusting a reply we did not expect.
 * Returned objects are just r: the arguments live in the arena, nothing is owned. */

static void *on_string(const redisReadTask *task, char *s, size_t len)
{
    struct resp *r = task->privdata;

    if (task->type != REDIS_REPLY_STRING || task->parent == NULL || task->parent->parent != NULL ||
        task->parent->obj != r || task->idx < 0 || (size_t)task->idx != r->filled ||
        r->filled >= r->nargs || len >= r->arena_cap - r->arena_used)
        return NULL;

    char *dst = r->arena + r->arena_used;
    memcpy(dst, s, len);
    dst[len] = '\0';
    r->argv[r->filled] = dst;
    r->lens[r->filled] = len;
    r->arena_used += len + 1;
    r->filled++;
    return r;
}

static void *on_array(const redisReadTask *task, int elements)
{
    struct resp *r = task->privdata;

    if (task->parent != NULL || elements < 0 || (size_t)elements != r->nargs)
        return NULL;
    return r;
}

static void *on_integer(const redisReadTask *task, long long v)
{
    (void)task;
    (void)v;
    return NULL;
}

static void *on_nil(const redisReadTask *task)
{
    (void)task;
    return NULL;
}

static void on_free(void *obj)
{
    (void)obj; /* nothing to free: objects are the struct resp itself */
}

/* hiredis keeps a pointer to this, so it must outlive every reader. */
static redisReplyObjectFunctions reader_fns = {
    .createString = on_string,
    .createArray = on_array,
    .createInteger = on_integer,
    .createNil = on_nil,
    .freeObject = on_free,
};

/* ---- lifecycle ------------------------------------------------------------------------------ */

struct resp *resp_create(const struct resp_limits *lim)
{
    if (!limits_valid(lim))
        return NULL;

    struct resp *r = xrealloc(NULL, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->lim = *lim;
    r->in_cap = lim->query_buf < IN_INIT ? lim->query_buf : IN_INIT;
    r->in = xrealloc(NULL, r->in_cap);
    r->st = SCAN_IDLE;
    ensure_arena(r, ARENA_INIT);
    ensure_argv(r, ARGV_INIT);

    r->reader = redisReaderCreateWithFunctions(&reader_fns);
    if (r->reader == NULL) {
        fprintf(stderr, "rlimitd: out of memory creating a request reader\n");
        abort();
    }
    r->reader->privdata = r; /* copied into every read task */
    return r;
}

void resp_destroy(struct resp **rp)
{
    struct resp *r = *rp;

    if (r == NULL)
        return;
    redisReaderFree(r->reader);
    free(r->in);
    free(r->arena);
    free(r->argv);
    free(r->lens);
    free(r);
    *rp = NULL;
}

void resp_set_limits(struct resp *r, const struct resp_limits *lim)
{
    /* conf.c validates ranges; ignoring a bad set here would hide that bug. */
    if (!limits_valid(lim))
        abort();
    r->lim = *lim;
}

/* ---- input buffer --------------------------------------------------------------------------- */

size_t resp_capacity(const struct resp *r)
{
    return r->in_cap;
}

size_t resp_memory(const struct resp *r)
{
    return sizeof(*r) + r->in_cap + r->arena_cap +
           r->argv_cap * (sizeof(char *) + sizeof(size_t) + sizeof(size_t));
}

size_t resp_buffered(const struct resp *r)
{
    return (r->tail - r->head) + r->cmd_fed;
}

void resp_input_space(struct resp *r, char **buf, size_t *len)
{
    size_t unscanned = r->tail - r->head;
    size_t held = unscanned + r->cmd_fed;
    size_t room = held < r->lim.query_buf ? r->lim.query_buf - held : 0;

    /* Scanned bytes are gone (hiredis or skipped); what is left is usually a partial header. */
    if (r->head > 0) {
        memmove(r->in, r->in + r->head, unscanned);
        r->head = 0;
        r->tail = unscanned;
    }
    /* Only a long inline line or an unpulled pipeline grows the buffer; once it has been
     * consumed, give the memory back. */
    if (unscanned == 0 && r->in_cap > IN_INIT) {
        r->in = xrealloc(r->in, IN_INIT);
        r->in_cap = IN_INIT;
    }
    size_t avail = r->in_cap - r->tail;
    if (avail < room && avail < r->in_cap / 2) {
        size_t cap = r->in_cap * 2;
        if (cap > r->tail + room)
            cap = r->tail + room; /* never more than the query buffer limit lets us use */
        r->in = xrealloc(r->in, cap);
        r->in_cap = cap;
        avail = cap - r->tail;
    }
    *buf = r->in + r->tail;
    *len = avail < room ? avail : room;
}

void resp_input_commit(struct resp *r, size_t n)
{
    if (n > r->in_cap - r->tail)
        abort(); /* the caller wrote past the space it was given */
    r->tail += n;
}

const char *resp_error(const struct resp *r)
{
    return r->failed ? r->err : "";
}

/* ---- frame scanner -------------------------------------------------------------------------- */

enum hdr {
    HDR_OK,
    HDR_MORE, /* line not complete yet */
    HDR_BAD,  /* not an integer followed by CRLF */
    HDR_LONG, /* HDR_MAX bytes and still no end */
};

/* Reads "<type byte><integer>\r\n" at p (p[0] already checked by the caller), parsing the
 * integer as it goes (this runs for every argument). The integer is strict like Redis's
 * string2ll: optional '-', no '+', no leading zeros, no "-0", no overflow. A byte that cannot
 * belong to the line is reported as soon as it arrives instead of after HDR_MAX bytes; it also
 * guarantees that hiredis, which looks for the first CRLF and parses leniently, reads the same
 * line and the same number. */
static enum hdr read_header(const char *p, const char *end, int64_t *val, size_t *hdr_len)
{
    size_t avail = (size_t)(end - p);
    size_t lim = avail < HDR_MAX ? avail : HDR_MAX;
    size_t i = 1;
    int neg = 0;
    uint64_t v = 0; /* wraps past 19 digits, which are refused below */

    if (i < lim && p[i] == '-') {
        neg = 1;
        i++;
    }
    size_t first = i;
    while (i < lim && (unsigned char)(p[i] - '0') < 10) {
        v = v * 10 + (uint64_t)(p[i] - '0');
        i++;
    }
    if (i == lim)
        return avail >= HDR_MAX ? HDR_LONG : HDR_MORE;
    if (p[i] != '\r')
        return HDR_BAD;
    if (i + 1 == avail)
        return HDR_MORE;
    if (p[i + 1] != '\n')
        return HDR_BAD;

    size_t digits = i - first;
    if (digits == 0 || digits > 19 || (p[first] == '0' && (digits > 1 || neg)) ||
        v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return HDR_BAD;
    *val = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    *hdr_len = i + 2;
    return HDR_OK;
}

static enum step fail_not_bulk(struct resp *r, unsigned char c)
{
    /* The byte goes into an error line: keep CR, LF and other control bytes out of it. */
    if (c >= 0x20 && c < 0x7f)
        return fail(r, "expected '$', got '%c'", c);
    return fail(r, "expected '$', got '\\x%02x'", c);
}

static enum step fail_query_buf(struct resp *r)
{
    return fail(r, "query buffer limit exceeded (client-query-buffer-limit %zu)", r->lim.query_buf);
}

/* Whether an element with a hl-byte header and a len-byte payload still fits in the query
 * buffer after so_far bytes of its command: checked on the header, before any payload is
 * accepted (SPEC 7). Written as subtractions so a huge len cannot wrap. */
static int element_fits(const struct resp *r, size_t so_far, size_t hl, uint64_t len)
{
    size_t limit = r->lim.query_buf;

    return so_far <= limit && hl + 2 <= limit - so_far && len <= limit - so_far - hl - 2;
}

/* Advances over in[head, tail) for the current multibulk command. Bytes scanned are handed to
 * the reader and dropped from our buffer on return (except for an empty command, which hiredis
 * must never see: it would produce a reply we do not pull, breaking the lockstep). */
static enum step scan(struct resp *r)
{
    const char *start = r->in + r->head;
    const char *p = start;
    const char *end = r->in + r->tail;
    enum step rc = STEP_MORE;
    int64_t v;
    size_t hl;

    for (;;) {
        switch (r->st) {
        case SCAN_IDLE:
            abort(); /* resp_next moves to SCAN_COUNT first */
        case SCAN_COUNT:
            switch (read_header(p, end, &v, &hl)) {
            case HDR_MORE:
                goto out;
            case HDR_LONG:
                return fail(r, "too big mbulk count string");
            case HDR_BAD:
                return fail(r, "invalid multibulk length");
            case HDR_OK:
                break;
            }
            if (v <= 0) {
                /* Redis treats *0 and *-1 (any n <= 0) as an empty request and ignores it. */
                r->head += hl;
                r->st = SCAN_IDLE;
                return STEP_EMPTY;
            }
            if ((uint64_t)v > r->lim.max_args)
                return fail(r, "multibulk length %lld exceeds proto-max-args %zu", (long long)v,
                            r->lim.max_args);
            r->nargs = (size_t)v;
            p += hl;
            r->st = SCAN_BULK_HDR;
            break;
        case SCAN_BULK_HDR:
            if (p == end)
                goto out;
            if (*p != '$')
                return fail_not_bulk(r, (unsigned char)*p);
            switch (read_header(p, end, &v, &hl)) {
            case HDR_MORE:
                goto out;
            case HDR_LONG:
                return fail(r, "too big bulk count string");
            case HDR_BAD:
                return fail(r, "invalid bulk length");
            case HDR_OK:
                break;
            }
            if (v < 0)
                return fail(r, "invalid bulk length");
            if ((uint64_t)v > r->lim.max_bulk)
                return fail(r, "bulk length %lld exceeds proto-max-bulk-len %zu", (long long)v,
                            r->lim.max_bulk);
            if (!element_fits(r, r->cmd_fed + (size_t)(p - start), hl, (uint64_t)v))
                return fail_query_buf(r);
            p += hl;
            r->bulk_left = (size_t)v;
            r->cmd_payload += (size_t)v;
            r->st = SCAN_BULK_DATA;
            /* fall through */
        case SCAN_BULK_DATA: {
            /* The payload is opaque: skip whatever part of it has arrived in one step. */
            size_t n = (size_t)(end - p);
            if (n > r->bulk_left)
                n = r->bulk_left;
            p += n;
            r->bulk_left -= n;
            if (r->bulk_left > 0)
                goto out;
            r->st = SCAN_BULK_END;
        }
            /* fall through */
        case SCAN_BULK_END:
            if (end - p < 2) {
                if (p < end && *p != '\r')
                    return fail(r, "bulk string not terminated by CRLF");
                goto out;
            }
            if (p[0] != '\r' || p[1] != '\n')
                return fail(r, "bulk string not terminated by CRLF");
            p += 2;
            if (++r->idx == r->nargs) {
                rc = STEP_DONE;
                goto out;
            }
            r->st = SCAN_BULK_HDR;
            break;
        }
    }

out:
    if (p > start) {
        if (redisReaderFeed(r->reader, start, (size_t)(p - start)) != REDIS_OK) {
            /* Feeding only fails on allocation failure (we never leave the reader in error). */
            fprintf(stderr, "rlimitd: request reader failed: %s\n", r->reader->errstr);
            abort();
        }
        r->cmd_fed += (size_t)(p - start);
        r->head += (size_t)(p - start);
    }
    return rc;
}

/* The scanner says the command hiredis holds is complete: size the arena from the scanner's
 * totals, then let hiredis deliver it through the callbacks, exactly one reply. */
static enum step build_argv(struct resp *r)
{
    void *reply = NULL;

    ensure_argv(r, r->nargs);
    ensure_arena(r, r->cmd_payload + r->nargs);
    r->arena_used = 0;
    r->filled = 0;

    int rc = redisReaderGetReply(r->reader, &reply);
    if (rc != REDIS_OK || reply != r || r->filled != r->nargs)
        return fail(r, "request reader out of sync with the frame scanner (%s)",
                    rc != REDIS_OK ? r->reader->errstr : "no reply");
    return STEP_DONE;
}

/* ---- inline commands ------------------------------------------------------------------------ */

/* Splits one inline line into the arena with redis-cli's grammar (util_split_word). Like Redis, a NUL
 * ends the line. Every argument plus its NUL takes no more arena than its source bytes plus one
 * separator, so len + 1 bytes of arena always suffice. */
static enum step split_inline(struct resp *r, const char *s, size_t len)
{
    const char *nul = memchr(s, '\0', len);
    size_t i = 0;

    if (nul != NULL)
        len = (size_t)(nul - s);
    ensure_arena(r, len + 1);
    r->arena_used = 0;
    r->filled = 0;

    for (;;) {
        while (i < len && util_is_space((unsigned char)s[i]))
            i++;
        if (i == len)
            return r->filled == 0 ? STEP_EMPTY : STEP_DONE;

        if (r->filled == r->lim.max_args)
            return fail(r, "too many arguments in inline request (proto-max-args %zu)",
                        r->lim.max_args);
        ensure_argv(r, r->filled + 1);

        char *out = r->arena + r->arena_used;
        long n = util_split_word(s, len, &i, out);
        if (n < 0)
            return fail(r, "unbalanced quotes in request");
        out[n] = '\0';
        r->argv[r->filled] = out;
        r->lens[r->filled] = (size_t)n;
        r->arena_used += (size_t)n + 1;
        r->filled++;
    }
}

/* An inline request is one line ending in "\n" (an optional "\r" before it is dropped). */
static enum step parse_inline(struct resp *r)
{
    const char *line = r->in + r->head;
    size_t avail = r->tail - r->head;
    size_t lim = avail < RESP_INLINE_MAX ? avail : RESP_INLINE_MAX;

    /* Resume the search where the last call stopped: a slow sender costs O(n), not O(n^2). */
    const char *nl = memchr(line + r->line_seen, '\n', lim - r->line_seen);
    if (nl == NULL) {
        if (avail >= RESP_INLINE_MAX)
            return fail(r, "too big inline request");
        r->line_seen = lim;
        return STEP_MORE;
    }
    size_t len = (size_t)(nl - line);
    r->head += len + 1;
    r->line_seen = 0;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    return split_inline(r, line, len);
}

/* ---- pulling commands ----------------------------------------------------------------------- */

static enum resp_status need_more(struct resp *r)
{
    /* No complete command is buffered and resp_input_space has no room left: no read can ever
     * complete one. */
    if (resp_buffered(r) >= r->lim.query_buf) {
        fail_query_buf(r);
        return RESP_ERROR;
    }
    return RESP_NEED_MORE;
}

enum resp_status resp_next(struct resp *r, struct resp_cmd *cmd)
{
    enum step rc;

    if (r->failed)
        return RESP_ERROR;
    trim_arena(r);

    for (;;) {
        if (r->st == SCAN_IDLE && r->head == r->tail)
            return need_more(r);
        if (r->st == SCAN_IDLE && r->in[r->head] != '*') {
            rc = parse_inline(r);
        } else {
            if (r->st == SCAN_IDLE) {
                r->st = SCAN_COUNT;
                r->nargs = 0;
                r->idx = 0;
                r->cmd_fed = 0;
                r->cmd_payload = 0;
            }
            rc = scan(r);
            if (rc == STEP_DONE) {
                r->st = SCAN_IDLE;
                r->cmd_fed = 0; /* hiredis hands the whole command over now */
                rc = build_argv(r);
            }
        }

        switch (rc) {
        case STEP_EMPTY:
            continue;
        case STEP_MORE:
            return need_more(r);
        case STEP_ERR:
            return RESP_ERROR;
        case STEP_DONE:
            cmd->argc = (int)r->filled;
            cmd->argv = r->argv;
            cmd->lens = r->lens;
            return RESP_COMMAND;
        }
    }
}
