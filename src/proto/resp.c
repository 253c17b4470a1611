/* resp.c - request parsing: a frame scanner for RESP2 multibulk requests plus inline commands
 * (resp.h, DESIGN.md "Hot path" and "Connections").
 *
 * A connection's bytes live in one of two places, and only between src[head] and src[tail]:
 *
 *   sh->buf   the I/O thread's shared read buffer, lent to a connection that had nothing
 *             pending for the length of one read and the commands it completes
 *   r->own    the connection's own buffer, holding what resp_settle copied out of the shared
 *             buffer: an incomplete command (a slow client, a big argument on its way) or
 *             commands not pulled yet (paused by the output limit)
 *
 * The scanner walks src[pos, tail) and checks every header as it arrives, so limits are enforced
 * before a payload is buffered. A complete command is contiguous in src[head, pos): its
 * arguments are pointed at in place (argv into the input, the CR after each payload overwritten
 * with the NUL the contract promises), so the hot path copies nothing. Inline commands are
 * unescaped into the shared arena. */
#include "rlimitd/resp.h"
#include "rlimitd/util.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "*<n>\r\n" and "$<len>\r\n" are at most 1 + 20 + 2 bytes for any int64; a header that has not
 * ended after this many bytes is garbage, not a slow client. */
#define HDR_MAX 32
/* Shared arena and argv sizes, and how big they may stay between commands: a command with
 * larger arguments grows them, the next resp_next gives the excess back. */
#define ARENA_INIT 4096
#define ARENA_KEEP (128 * 1024)
#define ARGV_INIT 16
#define ARGV_KEEP 4096
/* Pending bytes up to this size go back into the shared buffer for the next read (one small
 * copy) instead of the connection's own buffer growing read by read. */
#define SHARE_BACK (RESP_READ_SIZE / 4)
/* Smallest own buffer: a partial header or short command fits without regrowing. */
#define OWN_MIN 128

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
    STEP_ERR,   /* protocol error, resp_error says what */
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
    /* max_args is kept in an unsigned and counted in ints by the command layer. */
    return lim != NULL && lim->query_buf > 0 && lim->max_args > 0 && lim->max_args <= INT_MAX;
}

__attribute__((format(printf, 2, 3))) static enum step fail(struct resp *r, const char *fmt, ...)
{
    char msg[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (r->err == NULL) {
        size_t n = strlen(msg) + 1;
        r->err = xrealloc(NULL, n);
        memcpy(r->err, msg, n);
    }
    return STEP_ERR;
}

/* Grow paths are out of line; the hot path only compares (ensure_arena, ensure_argv). */
static void grow_arena(struct resp_shared *sh, size_t need)
{
    size_t cap = sh->arena_cap ? sh->arena_cap : ARENA_INIT;
    while (cap < need)
        cap *= 2;
    sh->arena = xrealloc(sh->arena, cap);
    sh->arena_cap = cap;
}

static void grow_argv(struct resp_shared *sh, size_t need)
{
    size_t cap = sh->argv_cap ? sh->argv_cap : ARGV_INIT;
    while (cap < need)
        cap *= 2;
    sh->argv = xrealloc(sh->argv, cap * sizeof(*sh->argv));
    sh->lens = xrealloc(sh->lens, cap * sizeof(*sh->lens));
    sh->argv_cap = cap;
}

static inline void ensure_arena(struct resp_shared *sh, size_t need)
{
    if (sh->arena_cap < need)
        grow_arena(sh, need);
}

static inline void ensure_argv(struct resp_shared *sh, size_t need)
{
    if (sh->argv_cap < need)
        grow_argv(sh, need);
}

/* Called when the previous command's arguments are no longer borrowed. */
static void trim_shared(struct resp_shared *sh)
{
    if (sh->arena_cap > ARENA_KEEP) {
        sh->arena = xrealloc(sh->arena, ARENA_KEEP);
        sh->arena_cap = ARENA_KEEP;
    }
    if (sh->argv_cap > ARGV_KEEP) {
        sh->argv = xrealloc(sh->argv, ARGV_KEEP * sizeof(*sh->argv));
        sh->lens = xrealloc(sh->lens, ARGV_KEEP * sizeof(*sh->lens));
        sh->argv_cap = ARGV_KEEP;
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

void resp_shared_init(struct resp_shared *sh, const struct resp_limits *lim)
{
    if (!limits_valid(lim))
        abort();
    memset(sh, 0, sizeof(*sh));
    sh->lim = *lim;
    sh->cap = RESP_READ_SIZE;
    sh->buf = xrealloc(NULL, sh->cap);
    ensure_arena(sh, ARENA_INIT);
    ensure_argv(sh, ARGV_INIT);
}

void resp_shared_deinit(struct resp_shared *sh)
{
    free(sh->buf);
    free(sh->arena);
    free(sh->argv);
    free(sh->lens);
    memset(sh, 0, sizeof(*sh));
}

void resp_shared_set_limits(struct resp_shared *sh, const struct resp_limits *lim)
{
    /* conf.c validates ranges; ignoring a bad set here would hide that bug. */
    if (!limits_valid(lim))
        abort();
    sh->lim = *lim;
}

size_t resp_shared_memory(const struct resp_shared *sh)
{
    return sh->cap + sh->arena_cap + sh->argv_cap * (sizeof(char *) + sizeof(size_t));
}

void resp_init(struct resp *r, struct resp_shared *sh)
{
    memset(r, 0, sizeof(*r));
    r->sh = sh;
    r->st = SCAN_IDLE;
}

void resp_deinit(struct resp *r)
{
    if (r->sh != NULL && r->sh->lent_to == r)
        r->sh->lent_to = NULL;
    free(r->own);
    free(r->err);
    r->own = r->src = r->err = NULL;
    r->own_cap = r->head = r->pos = r->tail = 0;
}

/* A resp_create parser: the shared part right behind it, in one allocation. */
struct resp_alone {
    struct resp r;
    struct resp_shared sh;
};

struct resp *resp_create(const struct resp_limits *lim)
{
    if (!limits_valid(lim))
        return NULL;
    struct resp_alone *a = xrealloc(NULL, sizeof(*a));
    resp_shared_init(&a->sh, lim);
    resp_init(&a->r, &a->sh);
    a->r.alone = 1;
    return &a->r;
}

void resp_destroy(struct resp **rp)
{
    struct resp *r = *rp;

    if (r == NULL)
        return;
    struct resp_alone *a = (struct resp_alone *)r; /* r is its first member */
    resp_deinit(&a->r);
    resp_shared_deinit(&a->sh);
    free(a);
    *rp = NULL;
}

void resp_set_limits(struct resp *r, const struct resp_limits *lim)
{
    resp_shared_set_limits(r->sh, lim);
}

/* ---- input buffer --------------------------------------------------------------------------- */

size_t resp_capacity(const struct resp *r)
{
    return r->own_cap;
}

size_t resp_buffered(const struct resp *r)
{
    return r->tail - r->head;
}

static int is_lent(const struct resp *r)
{
    return r->src != NULL && r->src == r->sh->buf;
}

/* Moves [head, tail) to the start of dst (which may be src itself) and rebases the offsets. */
static void move_pending(struct resp *r, char *dst)
{
    size_t n = r->tail - r->head;

    if (n > 0 && (dst != r->src || r->head > 0))
        memmove(dst, r->src + r->head, n);
    r->pos -= r->head;
    r->tail = n;
    r->head = 0;
    r->src = dst;
}

static void drop_own(struct resp *r)
{
    free(r->own);
    r->own = NULL;
    r->own_cap = 0;
}

void resp_settle(struct resp *r)
{
    size_t n = r->tail - r->head;

    if (is_lent(r)) {
        r->sh->lent_to = NULL;
        if (n == 0) {
            r->src = NULL;
            r->head = r->pos = r->tail = 0;
            return;
        }
        /* The incomplete tail: the only bytes the hot path ever copies. */
        size_t cap = OWN_MIN;
        while (cap < n)
            cap *= 2;
        if (r->own_cap != cap) {
            r->own = xrealloc(r->own, cap);
            r->own_cap = cap;
        }
        move_pending(r, r->own);
        return;
    }
    if (r->own != NULL && n == 0) {
        drop_own(r);
        r->src = NULL;
        r->head = r->pos = r->tail = 0;
    }
}

void resp_input_space(struct resp *r, char **buf, size_t *len)
{
    struct resp_shared *sh = r->sh;

    if (is_lent(r))
        resp_settle(r);
    if (sh->lent_to != NULL && sh->lent_to != r)
        abort(); /* the shared buffer holds another connection's batch that was not settled */

    size_t held = r->tail - r->head;
    size_t room = held < sh->lim.query_buf ? sh->lim.query_buf - held : 0;

    if (held <= SHARE_BACK) {
        /* Nothing or little pending: read into the shared buffer, behind the pending bytes. */
        if (held > 0)
            move_pending(r, sh->buf);
        else
            r->head = r->pos = r->tail = 0;
        drop_own(r);
        r->src = sh->buf;
        sh->lent_to = r;
        size_t avail = sh->cap - held;
        *buf = sh->buf + held;
        *len = avail < room ? avail : room;
        return;
    }
    /* A big command on its way: it grows in the connection's own buffer, up to the limit. */
    move_pending(r, r->own);
    size_t avail = r->own_cap - r->tail;
    if (avail < room && avail < r->own_cap / 2) {
        size_t cap = r->own_cap * 2;
        if (cap > r->tail + room)
            cap = r->tail + room; /* never more than the query buffer limit lets us use */
        r->own = xrealloc(r->own, cap);
        r->own_cap = cap;
        r->src = r->own;
        avail = cap - r->tail;
    }
    *buf = r->src + r->tail;
    *len = avail < room ? avail : room;
}

void resp_input_commit(struct resp *r, size_t n)
{
    size_t cap = is_lent(r) ? r->sh->cap : r->own_cap;

    if (r->src == NULL || n > cap - r->tail)
        abort(); /* the caller wrote past the space it was given */
    r->tail += n;
}

const char *resp_error(const struct resp *r)
{
    return r->err != NULL ? r->err : "";
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
    /* Most headers of a command are one or two digits: the same result as the general scan
     * below, without it. */
    if (avail >= 5 && (unsigned char)(p[1] - '0') < 10) {
        if (p[2] == '\r' && p[3] == '\n') {
            *val = p[1] - '0';
            *hdr_len = 4;
            return HDR_OK;
        }
        if (p[1] != '0' && (unsigned char)(p[2] - '0') < 10 && p[3] == '\r' && p[4] == '\n') {
            *val = (p[1] - '0') * 10 + (p[2] - '0');
            *hdr_len = 5;
            return HDR_OK;
        }
    }
    size_t lim = avail < HDR_MAX ? avail : HDR_MAX;
    size_t i = 1;
    int neg = 0;
    uint64_t v = 0; /* wraps past 19 digits, which are refused below */

    /* The common lengths, one digit or two without a leading zero, whole in the buffer. */
    if (avail >= 5 && (unsigned char)(p[1] - '0') < 10) {
        if (p[2] == '\r' && p[3] == '\n') {
            *val = p[1] - '0';
            *hdr_len = 4;
            return HDR_OK;
        }
        if (p[1] != '0' && (unsigned char)(p[2] - '0') < 10 && p[3] == '\r' && p[4] == '\n') {
            *val = (p[1] - '0') * 10 + (p[2] - '0');
            *hdr_len = 5;
            return HDR_OK;
        }
    }
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
    return fail(r, "query buffer limit exceeded (client-query-buffer-limit %zu)", r->sh->lim.query_buf);
}

/* Whether an element with a hl-byte header and a len-byte payload still fits in the query
 * buffer after so_far bytes of its command: checked on the header, before any payload is
 * accepted (COMMANDS.md, Wire protocol). Written as subtractions so a huge len cannot wrap. */
static int element_fits(const struct resp *r, size_t so_far, size_t hl, uint64_t len)
{
    size_t limit = r->sh->lim.query_buf;

    return so_far <= limit && hl + 2 <= limit - so_far && len <= limit - so_far - hl - 2;
}

/* Advances over src[pos, tail) for the current multibulk command. */
static enum step scan(struct resp *r)
{
    const struct resp_limits *lim = &r->sh->lim;
    const char *p = r->src + r->pos;
    const char *end = r->src + r->tail;
    enum step rc = STEP_MORE;
    int64_t v;
    size_t hl;

    for (;;) {
        switch ((enum scan_state)r->st) {
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
                r->head = r->pos = (size_t)(p + hl - r->src);
                r->st = SCAN_IDLE;
                return STEP_EMPTY;
            }
            if ((uint64_t)v > lim->max_args)
                return fail(r, "multibulk length %lld exceeds proto-max-args %zu", (long long)v,
                            lim->max_args);
            r->nargs = (unsigned)v;
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
            if ((uint64_t)v > lim->max_bulk)
                return fail(r, "bulk length %lld exceeds proto-max-bulk-len %zu", (long long)v,
                            lim->max_bulk);
            if (!element_fits(r, (size_t)(p - (r->src + r->head)), hl, (uint64_t)v))
                return fail_query_buf(r);
            p += hl;
            r->bulk_left = (size_t)v;
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
    r->pos = (size_t)(p - r->src);
    return rc;
}

/* The number of a header the scanner has already validated. */
static size_t header_value(const char **pp)
{
    const char *p = *pp + 1;
    size_t v = 0;

    while (*p != '\r')
        v = v * 10 + (size_t)(*p++ - '0');
    *pp = p + 2;
    return v;
}

/* The scanner found src[head, pos) to be one complete, valid command: point the shared argv at
 * its payloads and NUL-terminate each over its CR. */
static void build_argv(struct resp *r)
{
    struct resp_shared *sh = r->sh;
    const char *p = r->src + r->head;

    ensure_argv(sh, r->nargs);
    header_value(&p); /* "*<n>\r\n": n is r->nargs */
    for (unsigned i = 0; i < r->nargs; i++) {
        size_t len = header_value(&p);
        char *arg = r->src + (p - r->src);
        arg[len] = '\0';
        sh->argv[i] = arg;
        sh->lens[i] = len;
        p += len + 2;
    }
}

/* ---- inline commands ------------------------------------------------------------------------ */

/* Splits one inline line into the arena with redis-cli's grammar (util_split_word). Like Redis,
 * a NUL ends the line. Every argument plus its NUL takes no more arena than its source bytes plus one
 * separator, so len + 1 bytes of the shared arena always suffice. */
static enum step split_inline(struct resp *r, const char *s, size_t len, size_t *argc)
{
    const char *nul = memchr(s, '\0', len);
    size_t i = 0;

    if (nul != NULL)
        len = (size_t)(nul - s);
    struct resp_shared *sh = r->sh;
    size_t filled = 0, used = 0;

    ensure_arena(sh, len + 1);

    for (;;) {
        while (i < len && util_is_space((unsigned char)s[i]))
            i++;
        if (i == len) {
            *argc = filled;
            return filled == 0 ? STEP_EMPTY : STEP_DONE;
        }

        if (filled == sh->lim.max_args)
            return fail(r, "too many arguments in inline request (proto-max-args %zu)",
                        sh->lim.max_args);
        ensure_argv(sh, filled + 1);

        char *out = sh->arena + used;
        long n = util_split_word(s, len, &i, out);
        if (n < 0)
            return fail(r, "unbalanced quotes in request");
        out[n] = '\0';
        sh->argv[filled] = out;
        sh->lens[filled] = (size_t)n;
        used += (size_t)n + 1;
        filled++;
    }
}

/* An inline request is one line ending in "\n" (an optional "\r" before it is dropped). */
static enum step parse_inline(struct resp *r, size_t *argc)
{
    const char *line = r->src + r->head;
    size_t avail = r->tail - r->head;
    size_t lim = avail < RESP_INLINE_MAX ? avail : RESP_INLINE_MAX;

    /* Resume the search where the last call stopped: a slow sender costs O(n), not O(n^2). */
    const char *nl = memchr(line + r->line_seen, '\n', lim - r->line_seen);
    if (nl == NULL) {
        if (avail >= RESP_INLINE_MAX)
            return fail(r, "too big inline request");
        r->line_seen = (unsigned)lim;
        return STEP_MORE;
    }
    size_t len = (size_t)(nl - line);
    r->head += len + 1;
    r->pos = r->head;
    r->line_seen = 0;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    return split_inline(r, line, len, argc);
}

/* ---- pulling commands ----------------------------------------------------------------------- */

static enum resp_status need_more(struct resp *r)
{
    /* No complete command is buffered and resp_input_space has no room left: no read can ever
     * complete one. */
    if (resp_buffered(r) >= r->sh->lim.query_buf) {
        fail_query_buf(r);
        return RESP_ERROR;
    }
    return RESP_NEED_MORE;
}

enum resp_status resp_next(struct resp *r, struct resp_cmd *cmd)
{
    struct resp_shared *sh = r->sh;
    enum step rc;
    size_t argc = 0;

    if (r->err != NULL)
        return RESP_ERROR;
    if (is_lent(r) && sh->lent_to != r)
        abort(); /* another connection read over these bytes: a missing resp_settle */
    trim_shared(sh);

    for (;;) {
        if (r->st == SCAN_IDLE && r->head == r->tail)
            return need_more(r);
        if (r->st == SCAN_IDLE && r->src[r->head] != '*') {
            rc = parse_inline(r, &argc);
        } else {
            if (r->st == SCAN_IDLE) {
                r->st = SCAN_COUNT;
                r->nargs = 0;
                r->idx = 0;
                r->pos = r->head;
            }
            rc = scan(r);
            if (rc == STEP_DONE) {
                r->st = SCAN_IDLE;
                build_argv(r);
                argc = r->nargs;
                r->head = r->pos;
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
            cmd->argc = (int)argc;
            cmd->argv = sh->argv;
            cmd->lens = sh->lens;
            return RESP_COMMAND;
        }
    }
}
