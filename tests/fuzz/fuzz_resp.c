/* fuzz_resp.c - libFuzzer target for request parsing (resp.h), the code that reads the bytes of
 * anyone who can connect.
 *
 * Each input is parsed twice by fresh parsers: once handed over in reads as large as the parser
 * offers, once cut at pseudo-random points derived from the input itself (so a crash replays
 * exactly) with another connection reading into the same shared buffer between the cuts.
 * Besides the sanitizers, the target aborts when:
 *   - the two runs disagree (commands, final status or error text): how the kernel cuts a
 *     stream must not change what it means;
 *   - a command breaks the resp_cmd contract (argc < 1, argument not NUL terminated);
 *   - more than the query buffer limit is ever buffered or offered;
 *   - an error is not sticky, or a full buffer is not reported by resp_next.
 * Limits come from one of three profiles picked by the input's hash, so the small ones reach the
 * limit errors with short inputs.
 *
 * Every command is then dispatched through cmd_execute on a scratch keyspace with a fake clock
 * that advances 1 ms per command (so expiry paths run too, the same way in both runs). Replies
 * are not compared: INFO and CLIENT LIST legitimately differ between the two runs. Scripts run
 * in a fresh Lua state per run, built with RLIMITD_FUZZ_SCRIPT_BUDGET (meson.build), so every
 * script ends. Half the inputs (a bit of the input's hash) run on a session switched to RESP3 by
 * a real HELLO 3 first, so both protocols' reply writers see every command. FUZZ_RESP_TRACE=1 prints each command's reply while an input replays. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlimitd/clock.h"
#include "rlimitd/cmd.h"
#include "rlimitd/conf.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/reply.h"
#include "rlimitd/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct resp_limits profiles[] = {
    {.query_buf = 1024 * 1024, .max_bulk = 512 * 1024, .max_args = 1024}, /* COMMANDS.md, Wire protocol defaults */
    {.query_buf = 512, .max_bulk = 128, .max_args = 8},
    {.query_buf = 64, .max_bulk = 16, .max_args = 3},
};

/* What one parse of the input produced, reduced to something comparable. */
struct fuzz_run {
    const struct resp_limits *lim;
    uint64_t digest; /* FNV-1a over every command's arguments */
    size_t ncmd;
    enum resp_status last;
    char err[256];
    /* The command layer under test. */
    struct keyspace *ks;
    struct conf conf;
    struct cmd_env env;
    struct session session;
    struct rbuf out;
};

#define FAKE_T0 (1800000000LL * 1000000000LL)

static void digest(struct fuzz_run *run, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        run->digest ^= b[i];
        run->digest *= 0x100000001b3ULL;
    }
}

static void run_init(struct fuzz_run *run, const struct resp_limits *lim, int resp3)
{
    memset(run, 0, sizeof(*run));
    run->lim = lim;
    run->digest = 0xcbf29ce484222325ULL;
    run->last = RESP_NEED_MORE;
    static const uint8_t seed[16] = {7};
    run->ks = ks_create(4, seed);
    conf_init(&run->conf);
    cmd_env_init(&run->env, run->ks, &run->conf);
    session_init(&run->session, 1, NULL);
    run->session.authed = 1;
    rbuf_init(&run->out);
    clock_set_fake(FAKE_T0);
    if (resp3) {
        char hello[] = "HELLO", three[] = "3";
        char *argv[] = {hello, three};
        const size_t lens[] = {5, 1};
        cmd_execute(&run->env, &run->session, 2, argv, lens, &run->out);
        if (run->out.len == 0 || run->out.p[0] != '%')
            abort(); /* HELLO 3 answers its map in RESP3 */
        run->out.len = 0;
    }
}

static void run_fini(struct fuzz_run *run)
{
    rbuf_free(&run->out);
    session_deinit(&run->session);
    cmd_env_deinit(&run->env);
    conf_free(&run->conf);
    ks_destroy(&run->ks);
}

/* FUZZ_RESP_TRACE set: every command's reply goes to stderr (reading what an input does). */
static int trace;

static void handle_command(struct fuzz_run *run, int argc, char **argv, const size_t *lens)
{
    if (argc < 1)
        abort();
    digest(run, &argc, sizeof(argc));
    for (int i = 0; i < argc; i++) {
        if (argv[i][lens[i]] != '\0')
            abort();
        digest(run, &lens[i], sizeof(lens[i]));
        digest(run, argv[i], lens[i]);
    }
    run->ncmd++;
    /* A session closed by QUIT or a protocol error would stop here; keep going regardless, the
     * command layer must cope with anything after it too. */
    run->out.len = 0;
    cmd_execute(&run->env, &run->session, argc, argv, lens, &run->out);
    if (run->out.len == 0 && !(run->session.flags & SESSION_IN_MULTI) &&
        !(run->session.flags & SESSION_CLOSE_AFTER_REPLY))
        abort(); /* every command answers something */
    /* A RESP2 session gets RESP2's types only; after HELLO 3 RESP3's as well. */
    const char *types = run->session.resp == 3 ? "+-:$*%~,#_=(>" : "+-:$*";
    if (run->out.len > 0 && strchr(types, run->out.p[0]) == NULL)
        abort();
    if (trace)
        fprintf(stderr, "%s -> %.*s\n", argv[0], (int)(run->out.len < 300 ? run->out.len : 300),
                run->out.p);
    clock_advance_fake(1000000);
}

/* Pulls every buffered command, as the client's read callback does. */
static void pull(struct resp *r, struct fuzz_run *run)
{
    struct resp_cmd c;
    enum resp_status st;

    while ((st = resp_next(r, &c)) == RESP_COMMAND)
        handle_command(run, c.argc, c.argv, c.lens);
    run->last = st;
    if (st == RESP_ERROR) {
        snprintf(run->err, sizeof(run->err), "%s", resp_error(r));
        if (resp_next(r, &c) != RESP_ERROR)
            abort();
    }
    if (resp_buffered(r) > run->lim->query_buf)
        abort();
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Another connection of the same I/O thread: it reads a PING into the shared buffer between
 * two reads of the connection under test, overwriting whatever resp_settle did not save. */
static void neighbour_reads(struct resp *n)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    struct resp_cmd c;
    char *buf;
    size_t len;

    resp_input_space(n, &buf, &len);
    if (len < sizeof(ping) - 1)
        abort();
    memcpy(buf, ping, sizeof(ping) - 1);
    resp_input_commit(n, sizeof(ping) - 1);
    if (resp_next(n, &c) != RESP_COMMAND || c.argc != 1 || strcmp(c.argv[0], "PING") != 0 ||
        resp_next(n, &c) != RESP_NEED_MORE)
        abort();
    resp_settle(n);
}

/* max_chunk 0: every read takes all the space offered, on a parser of its own. Otherwise reads
 * are cut, and the parser shares its thread part with a neighbour that reads in between, as
 * connections of one I/O thread do. */
static void parse_input(const uint8_t *data, size_t size, struct fuzz_run *run, uint64_t seed,
                        size_t max_chunk)
{
    struct resp_shared sh;
    struct resp conn, neighbour;
    struct resp *r = &conn, *alone = NULL;
    size_t at = 0;

    if (max_chunk == 0) {
        alone = resp_create(run->lim);
        if (alone == NULL)
            abort();
        r = alone;
    } else {
        resp_shared_init(&sh, run->lim);
        resp_init(&conn, &sh);
        resp_init(&neighbour, &sh);
    }
    while (at < size && run->last != RESP_ERROR) {
        char *buf;
        size_t len;

        resp_input_space(r, &buf, &len);
        if (resp_buffered(r) + len > run->lim->query_buf)
            abort();
        if (len == 0) {
            /* resp.h: a full buffer is a protocol error, and resp_next says so too. */
            pull(r, run);
            if (run->last != RESP_ERROR)
                abort();
            break;
        }
        if (max_chunk > 0) {
            size_t want = 1 + (size_t)(splitmix64(&seed) % max_chunk);
            if (len > want)
                len = want;
        }
        if (len > size - at)
            len = size - at;
        memcpy(buf, data + at, len);
        resp_input_commit(r, len);
        at += len;
        pull(r, run);
        if (alone == NULL && run->last != RESP_ERROR) {
            resp_settle(r);
            neighbour_reads(&neighbour);
        }
    }
    if (alone != NULL) {
        resp_destroy(&alone);
    } else {
        resp_deinit(&conn);
        resp_deinit(&neighbour);
        resp_shared_deinit(&sh);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t chunk_sizes[] = {1, 3, 17, 200, 5000};
    struct fuzz_run whole, cut;
    uint64_t h = 0xcbf29ce484222325ULL;

    trace = getenv("FUZZ_RESP_TRACE") != NULL;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ULL;
    const struct resp_limits *lim = &profiles[h % (sizeof(profiles) / sizeof(profiles[0]))];
    size_t max_chunk = chunk_sizes[(h >> 8) % (sizeof(chunk_sizes) / sizeof(chunk_sizes[0]))];

    int resp3 = (int)((h >> 16) & 1);
    run_init(&whole, lim, resp3);
    parse_input(data, size, &whole, h, 0);
    run_init(&cut, lim, resp3);
    parse_input(data, size, &cut, h, max_chunk);

    if (whole.digest != cut.digest || whole.ncmd != cut.ncmd || whole.last != cut.last ||
        strcmp(whole.err, cut.err) != 0) {
        fprintf(stderr,
                "fuzz_resp: the cut changed the result (max chunk %zu, query_buf %zu):\n"
                "  whole: %zu commands, status %d, error '%s'\n"
                "  cut:   %zu commands, status %d, error '%s'\n",
                max_chunk, lim->query_buf, whole.ncmd, whole.last, whole.err, cut.ncmd, cut.last,
                cut.err);
        abort();
    }
    run_fini(&whole);
    run_fini(&cut);
    return 0;
}
