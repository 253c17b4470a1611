/* test_throttle_all.c - COMMANDS.md, THROTTLE.ALL as pure arithmetic on a fake clock: the
 * argument rules and every error text, the all-or-nothing decision, the reply's index and
 * retry_after, and each limit's five integers, against a reference model.
 *
 * The model is written from COMMANDS.md ("CL.THROTTLE", "THROTTLE.ALL") alone: CL.THROTTLE's
 * arithmetic in ns per limit, then the rule that a request is taken from every limit or from
 * none. It shares no code with gcra.c or throttle_all.c, so the seeded comparison catches a
 * mistake in either. The tests play the keyspace: they keep each key's TAT, store what the
 * decision says, and drop a TAT once it has passed (the key expires at it). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlimitd/throttle_all.h"
#include "rlimitd/wait.h"

#include "argv_line.h"

#define SEC 1000000000LL
#define MS 1000000LL
#define T0 1700000000000000000LL

/* ---- arguments ---- */

static char errbuf[256];

static const char *parse_err(const char *text)
{
    struct line l;
    struct throttle_all_req req;
    split(&l, text);
    errbuf[0] = '\0';
    if (throttle_all_parse(l.argc, l.argv, l.lens, &req, errbuf, sizeof errbuf) == 0)
        return NULL;
    return errbuf;
}

static struct throttle_all_req parse_ok(const char *text)
{
    struct line l;
    struct throttle_all_req req;
    split(&l, text);
    cr_assert_eq(throttle_all_parse(l.argc, l.argv, l.lens, &req, errbuf, sizeof errbuf), 0,
                 "%s: %s", text, errbuf);
    return req;
}

#define EXPECT_ERR(text, want)                                                                     \
    do {                                                                                           \
        const char *e_ = parse_err(text);                                                          \
        cr_expect(e_ != NULL && strcmp(e_, (want)) == 0, "%s: got \"%s\", want \"%s\"", (text),    \
                  e_ ? e_ : "(accepted)", (want));                                                 \
    } while (0)

#define NOT_INT "value is not an integer or out of range"
#define ONE_PER_KEY "THROTTLE.ALL needs one LIMIT per key"

Test(throttle_all_parse, numkeys)
{
    EXPECT_ERR("THROTTLE.ALL 1 k LIMIT 1 1 1", "wrong number of arguments for 'throttle.all' command");
    EXPECT_ERR("THROTTLE.ALL x k LIMIT 1 1 1 1", NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 01 k LIMIT 1 1 1 1", NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 0 k LIMIT 1 1 1 1", "invalid numkeys: must be between 1 and 32");
    EXPECT_ERR("THROTTLE.ALL -1 k LIMIT 1 1 1 1", "invalid numkeys: must be between 1 and 32");
    EXPECT_ERR("THROTTLE.ALL 33 k LIMIT 1 1 1 1", "invalid numkeys: must be between 1 and 32");
    EXPECT_ERR("THROTTLE.ALL 9 k LIMIT 1 1 1 1", "Number of keys can't be greater than number of args");
    EXPECT_ERR("THROTTLE.ALL 2 k k LIMIT 1 1 1 1 LIMIT 1 1 1 1", "THROTTLE.ALL keys must be distinct");
    /* 32 keys is the most. */
    char text[4096] = "THROTTLE.ALL 32";
    for (int i = 0; i < 32; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), " k%d", i);
    for (int i = 0; i < 32; i++)
        strcat(text, " LIMIT 1 1 1 1");
    cr_expect_eq(parse_ok(text).n, 32);
}

Test(throttle_all_parse, limits)
{
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1 x y z", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1 1 2 3", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1 LIMIT 1 1 1", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1", ONE_PER_KEY);
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1 WAIT 5", ONE_PER_KEY);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 LIMIT 1 1 1 1", ONE_PER_KEY);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMITS 1 1 1 1", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 x", NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT +1 1 1 1", NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT -1 1 1 1", "limit 0: invalid max_burst: must be >= 0");
    EXPECT_ERR("THROTTLE.ALL 2 a b LIMIT 1 1 1 1 LIMIT 1 0 1 1",
               "limit 1: invalid count: must be >= 1");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 0 1", "limit 0: invalid period: must be >= 1");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 -1", "limit 0: invalid quantity: must be >= 0");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 9223372036854775807 1", "limit 0: period too large");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 2000000000 1 1",
               "limit 0: count too large for period: emission interval below 1ns");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 9223372036854775807 1 1 1",
               "limit 0: max_burst too large: tolerance overflows");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 9223372036854775807",
               "limit 0: quantity too large: increment overflows");
    struct throttle_all_req r = parse_ok("throttle.all 2 a b limit 15 30 60 1 LiMiT 0 1 1 0");
    cr_expect_eq(r.n, 2);
    cr_expect_eq(r.lim[0].limit, 16);
    cr_expect_eq(r.lim[0].ei, 2 * SEC);
    cr_expect_eq(r.lim[1].inc, 0);
    cr_expect_eq(r.has_wait, 0);
}

Test(throttle_all_parse, wait)
{
    struct throttle_all_req r = parse_ok("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 250");
    cr_expect(r.has_wait && r.wait_ms == 250);
    r = parse_ok("THROTTLE.ALL 1 a LIMIT 1 1 1 1 wait 0");
    cr_expect(r.has_wait && r.wait_ms == 0);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 5 6", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 5 WAIT 6", "syntax error");
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT x", WAIT_ERR_NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 1.5", WAIT_ERR_NOT_INT);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT -1", WAIT_ERR_NEGATIVE);
    EXPECT_ERR("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 1000000000001", WAIT_ERR_RANGE);
    r = parse_ok("THROTTLE.ALL 1 a LIMIT 1 1 1 1 WAIT 1000000000000");
    cr_expect_eq(r.wait_ms, WAIT_MAX_MS);
}

/* ---- the reference model ---- */

struct mkey {
    int has;
    int64_t tat;
};

struct mlimit {
    int64_t burst, count, period, quantity;
};

static int64_t ceil_s(int64_t ns)
{
    int64_t ms = ns / MS;
    return ms / 1000 + (ms % 1000 != 0);
}

/* One limit at now, as COMMANDS.md "CL.THROTTLE" gives it (ns): out[5] and whether it would
 * admit; *new_tat the TAT it would store, *wait the ns until it would pass (-1 never). */
static int model_limit(const struct mlimit *m, const struct mkey *k, int64_t now, int64_t q,
                       long long out[5], int64_t *new_tat, int64_t *wait)
{
    int64_t ei = m->period * SEC / m->count, dvt = ei * (m->burst + 1), inc = ei * q;
    int64_t tat = k->has && k->tat > now ? k->tat : now;
    int64_t nt = tat + inc, allow_at = nt - dvt, ttl;
    int limited = now < allow_at;
    ttl = limited ? tat - now : nt - now;
    out[0] = limited;
    out[1] = m->burst + 1;
    int64_t next = dvt - ttl;
    out[2] = next <= -ei ? 0 : next / ei < 0 ? 0 : next / ei > m->burst + 1 ? m->burst + 1 : next / ei;
    out[3] = limited && inc <= dvt ? ceil_s(allow_at - now) : -1;
    out[4] = ceil_s(ttl);
    *new_tat = nt;
    *wait = !limited ? 0 : inc <= dvt ? allow_at - now : -1;
    return !limited;
}

/* THROTTLE.ALL at now on the model's keys: fills head[3] and per[n][5], stores when admitted. */
static void model_all(const struct mlimit *m, struct mkey *k, int n, int64_t now, long long head[3],
                      long long per[][5])
{
    int64_t nt[THROTTLE_ALL_MAX_KEYS], wait[THROTTLE_ALL_MAX_KEYS], worst = 0;
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (k[i].has && k[i].tat <= now)
            k[i].has = 0; /* expired at its TAT */
        if (!model_limit(&m[i], &k[i], now, m[i].quantity, per[i], &nt[i], &wait[i])) {
            if (first < 0)
                first = i;
            worst = worst < 0 || wait[i] < 0 ? -1 : wait[i] > worst ? wait[i] : worst;
        }
    }
    head[0] = first >= 0;
    head[1] = first;
    head[2] = first < 0 || worst < 0 ? -1 : ceil_s(worst);
    for (int i = 0; i < n; i++) {
        if (first < 0) {
            if (m[i].quantity > 0) {
                k[i].has = 1;
                k[i].tat = nt[i];
            }
        } else if (!per[i][0]) {
            int64_t x, y;
            model_limit(&m[i], &k[i], now, 0, per[i], &x, &y); /* nothing taken: a peek */
        }
    }
}

/* The same through throttle_all_decide, playing the keyspace. */
static void real_all(const struct throttle_all_req *req, struct mkey *k, int64_t now,
                     long long head[3], long long per[][5])
{
    int has[THROTTLE_ALL_MAX_KEYS];
    int64_t tat[THROTTLE_ALL_MAX_KEYS];
    for (int i = 0; i < req->n; i++) {
        if (k[i].has && k[i].tat <= now)
            k[i].has = 0;
        has[i] = k[i].has;
        tat[i] = k[i].tat;
    }
    struct gcra_result r[THROTTLE_ALL_MAX_KEYS];
    struct throttle_all_result res;
    const char *err;
    int bad;
    cr_assert_eq(throttle_all_decide(req, now, has, tat, r, &res, &err, &bad), 0);
    head[0] = res.limited;
    head[1] = res.index;
    head[2] = res.retry_after;
    for (int i = 0; i < req->n; i++) {
        per[i][0] = r[i].limited;
        per[i][1] = r[i].limit;
        per[i][2] = r[i].remaining;
        per[i][3] = r[i].retry_after;
        per[i][4] = r[i].reset_after;
        cr_assert(!res.limited || !r[i].store, "a refused request stored limit %d", i);
        if (r[i].store) {
            k[i].has = 1;
            k[i].tat = r[i].new_tat;
        }
    }
    /* wait_ns agrees with retry_after (CL.THROTTLE's rounding of it). */
    cr_assert(res.wait_ns == 0 ? !res.limited
                               : res.wait_ns < 0 ? res.retry_after == -1
                                                 : res.retry_after == gcra_ceil_seconds(res.wait_ns));
}

static struct throttle_all_req req_of(const struct mlimit *m, int n)
{
    char text[4096] = "THROTTLE.ALL";
    snprintf(text + strlen(text), sizeof text - strlen(text), " %d", n);
    for (int i = 0; i < n; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), " k%d", i);
    for (int i = 0; i < n; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), " LIMIT %lld %lld %lld %lld",
                 (long long)m[i].burst, (long long)m[i].count, (long long)m[i].period,
                 (long long)m[i].quantity);
    return parse_ok(text);
}

static void fmt(char *buf, size_t len, const long long head[3], long long per[][5], int n)
{
    int w = snprintf(buf, len, "%lld %lld %lld", head[0], head[1], head[2]);
    for (int i = 0; i < n && w > 0 && (size_t)w < len; i++)
        w += snprintf(buf + w, len - (size_t)w, " [%lld %lld %lld %lld %lld]", per[i][0],
                      per[i][1], per[i][2], per[i][3], per[i][4]);
}

/* ---- decisions ---- */

Test(throttle_all_decide, the_llm_gateway_example)
{
    /* COMMANDS.md: 3 requests a minute and 100 tokens a minute; 40 tokens each. */
    struct mlimit m[2] = {{2, 3, 60, 1}, {99, 100, 60, 40}};
    struct throttle_all_req req = req_of(m, 2);
    struct mkey k[2] = {{0}}, mk[2] = {{0}};
    long long h[3], p[2][5], mh[3], mp[2][5];
    char got[256], want[256];
    const char *expect[] = {
        /* 40 tokens, then 40 more; the third needs 120 of 100: refused by the tokens, whose
         * 20 left refill 40 - 20 = 20 more in 12 s. The request limit would admit: a peek. */
        "0 -1 -1 [0 3 2 -1 20] [0 100 60 -1 24]",
        "0 -1 -1 [0 3 1 -1 40] [0 100 20 -1 48]",
        "1 1 12 [0 3 1 -1 40] [1 100 20 12 48]",
    };
    for (int i = 0; i < 3; i++) {
        real_all(&req, k, T0, h, p);
        model_all(m, mk, 2, T0, mh, mp);
        fmt(got, sizeof got, h, p, 2);
        fmt(want, sizeof want, mh, mp, 2);
        cr_expect_str_eq(got, expect[i], "call %d", i + 1);
        cr_expect_str_eq(want, expect[i], "call %d (model)", i + 1);
    }
    /* The refusal took nothing: 12 s later the third fits exactly. */
    real_all(&req, k, T0 + 12 * SEC, h, p);
    fmt(got, sizeof got, h, p, 2);
    cr_expect_str_eq(got, "0 -1 -1 [0 3 0 -1 48] [0 100 0 -1 60]");
}

Test(throttle_all_decide, never_and_the_latest_wait)
{
    /* Limit 1 can never pass 5 of 2: retry -1 overall, though limit 0 only waits. */
    struct mlimit m[3] = {{0, 1, 10, 1}, {1, 1, 1, 5}, {9, 10, 1, 1}};
    struct throttle_all_req req = req_of(m, 3);
    struct mkey k[3] = {{1, T0 + 10 * SEC}, {0}, {0}};
    long long h[3], p[3][5];
    real_all(&req, k, T0, h, p);
    char got[256];
    fmt(got, sizeof got, h, p, 3);
    cr_expect_str_eq(got, "1 0 -1 [1 1 0 10 10] [1 2 2 -1 0] [0 10 10 -1 0]");
    /* Without it: the latest of the waits, 10 s. */
    m[1].quantity = 1;
    struct throttle_all_req req2 = req_of(m, 3);
    real_all(&req2, k, T0 + 2 * SEC, h, p);
    fmt(got, sizeof got, h, p, 3);
    cr_expect_str_eq(got, "1 0 8 [1 1 0 8 8] [0 2 2 -1 0] [0 10 10 -1 0]");
}

/* Seeded comparison with the model: random limits (1..8 keys), random clocks, states shared
 * from call to call. THROTTLE_ALL_SEED replays a run. */
Test(throttle_all_decide, matches_the_model)
{
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("THROTTLE_ALL_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    srand(seed);
    int admitted = 0, refused = 0;
    for (int run = 0; run < 300; run++) {
        int n = 1 + rand() % 8;
        struct mlimit m[8];
        for (int i = 0; i < n; i++)
            m[i] = (struct mlimit){rand() % 10, 1 + rand() % 20, 1 + rand() % 100,
                                   rand() % 4 ? 1 + rand() % 4 : rand() % 15};
        struct mkey k[8] = {{0}}, mk[8] = {{0}};
        int64_t now = T0;
        for (int call = 0; call < 40; call++) {
            now += rand() % 3 ? (int64_t)(rand() % 3000) * MS + rand() % 1000 : 0;
            /* The quantities move from call to call, the limits stay. */
            for (int i = 0; i < n; i++)
                if (rand() % 4 == 0)
                    m[i].quantity = rand() % 6;
            struct throttle_all_req req = req_of(m, n);
            long long h[3], p[8][5], mh[3], mp[8][5];
            real_all(&req, k, now, h, p);
            model_all(m, mk, n, now, mh, mp);
            char got[512], want[512];
            fmt(got, sizeof got, h, p, n);
            fmt(want, sizeof want, mh, mp, n);
            cr_assert_str_eq(got, want, "seed %u (THROTTLE_ALL_SEED), run %d call %d", seed, run,
                             call);
            for (int i = 0; i < n; i++)
                cr_assert(k[i].has == mk[i].has && (!k[i].has || k[i].tat == mk[i].tat),
                          "seed %u, run %d call %d: key %d's state", seed, run, call, i);
            admitted += h[0] == 0;
            refused += h[0] == 1;
        }
    }
    cr_log_info("seed %u: %d admitted, %d refused", seed, admitted, refused);
    cr_expect(admitted > 1000 && refused > 1000, "a run that tries both sides");
}
