/* test_lease.c - COMMANDS.md, LEASE.*: concurrency leases on the keyspace with a fake clock:
 * argument rules, ids, expiry of leases and of the key, and a seeded comparison with a
 * reference model.
 *
 * The model is written from COMMANDS.md "LEASE.*" alone: a key holds leases (id, expiry) and the
 * highest id handed out; a lease is live until its expiry; an acquire succeeds while fewer than
 * `limit` are live, with the id max(now in us, highest + 1); the key expires with its last live
 * lease and is deleted when its last lease is released, forgetting its highest id. It shares no
 * code with lease.c or ks_lease.c. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlimitd/keyspace.h"
#include "rlimitd/lease.h"
#include "rlimitd/wait.h"

#define SEC 1000000000LL
#define MS 1000000LL
#define T0 1700000000000000000LL

static const uint8_t seed[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* ---- arguments ---- */

static const char *acquire_err(const char *text)
{
    static char buf[256];
    const char *argv[16];
    size_t lens[16];
    int argc = 0;
    strcpy(buf, text);
    for (char *p = strtok(buf, " "); p != NULL; p = strtok(NULL, " ")) {
        argv[argc] = p;
        lens[argc++] = strlen(p);
    }
    struct lease_acquire_args a;
    const char *err = NULL;
    return lease_acquire_parse(argc, argv, lens, &a, &err) == 0 ? NULL : err;
}

#define EXPECT_ERR(text, want)                                                                     \
    do {                                                                                           \
        const char *e_ = acquire_err(text);                                                        \
        cr_expect(e_ != NULL && strcmp(e_, (want)) == 0, "%s: got \"%s\", want \"%s\"", (text),    \
                  e_ ? e_ : "(accepted)", (want));                                                 \
    } while (0)

#define NOT_INT "value is not an integer or out of range"

Test(lease_parse, acquire)
{
    EXPECT_ERR("LEASE.ACQUIRE k 1", "wrong number of arguments for 'lease.acquire' command");
    EXPECT_ERR("LEASE.ACQUIRE k x 1", NOT_INT);
    EXPECT_ERR("LEASE.ACQUIRE k 1.0 1", NOT_INT);
    EXPECT_ERR("LEASE.ACQUIRE k 0 1", "invalid limit: must be between 1 and 100000");
    EXPECT_ERR("LEASE.ACQUIRE k 100001 1", "invalid limit: must be between 1 and 100000");
    EXPECT_ERR("LEASE.ACQUIRE k 1 -1", "invalid ttl_ms: must be between 1 and 3153600000000");
    EXPECT_ERR("LEASE.ACQUIRE k 1 3153600000001",
               "invalid ttl_ms: must be between 1 and 3153600000000");
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 WAIT", "syntax error");
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 NOWAIT 1", "syntax error");
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 WAIT 1 WAIT 1", "syntax error");
    EXPECT_ERR("LEASE.ACQUIRE k x 1 WAIT 1 WAIT 1", NOT_INT);
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 WAIT x", WAIT_ERR_NOT_INT);
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 WAIT -1", WAIT_ERR_NEGATIVE);
    EXPECT_ERR("LEASE.ACQUIRE k 1 1 WAIT 1000000000001", WAIT_ERR_RANGE);
    cr_expect_null(acquire_err("LEASE.ACQUIRE k 100000 3153600000000"));
    cr_expect_null(acquire_err("lease.acquire k 1 1 wait 0"));
}

/* ---- on the keyspace ---- */

static struct keyspace *ks;

static void setup(void)
{
    ks = ks_create(2, seed);
}

static void teardown(void)
{
    ks_destroy(&ks);
}

TestSuite(lease, .init = setup, .fini = teardown);

static struct ks_key key_of(const char *name)
{
    struct ks_key k;
    ks_key_init(ks, &k, name, strlen(name));
    return k;
}

static int64_t acquire(const char *name, int64_t now, int64_t limit, int64_t ttl_ms)
{
    struct ks_key k = key_of(name);
    struct ks_lease_out o;
    cr_assert_eq(ks_lease_acquire(ks, &k, now, limit, ttl_ms * MS, &o), KS_OK);
    return o.id;
}

static int release(const char *name, int64_t now, int64_t id)
{
    struct ks_key k = key_of(name);
    struct ks_lease_out o;
    cr_assert_eq(ks_lease_release(ks, &k, now, id, &o), KS_OK);
    return o.done;
}

static int64_t count(const char *name, int64_t now)
{
    struct ks_key k = key_of(name);
    int64_t n;
    cr_assert_eq(ks_lease_count(ks, &k, now, &n), KS_OK);
    return n;
}

Test(lease, a_pool_of_two)
{
    int64_t a = acquire("p", T0, 2, 1000), b = acquire("p", T0, 2, 1000);
    cr_expect_eq(a, T0 / 1000, "the first id is the acquire's microseconds");
    cr_expect_eq(b, a + 1, "two in one microsecond: the next id");
    cr_expect_eq(acquire("p", T0, 2, 1000), 0, "full");
    struct ks_key k = key_of("p");
    struct ks_lease_out o;
    cr_assert_eq(ks_lease_acquire(ks, &k, T0, 2, SEC, &o), KS_OK);
    cr_expect(o.id == 0 && o.count == 2 && o.next_free == T0 + SEC, "full: the next free slot");
    cr_expect_eq(ks_get(ks, &k, T0, NULL), KS_LEASE);
    cr_expect_str_eq(ks_type_name(KS_LEASE), "rlim-leas");
    cr_expect_eq(ks_ttl_ns(ks, &k, T0 + 1), SEC - 1);
    cr_expect_eq(release("p", T0, a), 1);
    cr_expect_eq(release("p", T0, a), 0, "released twice");
    cr_expect_eq(count("p", T0), 1);
    int64_t c = acquire("p", T0 + 5, 2, 1000);
    cr_expect_eq(c, b + 1, "ids only grow under a key");
    /* At the expiry the slots free themselves, and the key goes. */
    cr_expect_eq(count("p", T0 + SEC), 1, "c lasts 5 ns longer");
    cr_expect_eq(count("p", T0 + SEC + 5), 0);
    cr_expect_eq(ks_get(ks, &k, T0 + SEC + 5, NULL), KS_NONE);
    cr_expect_eq(ks_limiter_key_count(ks), 0);
}

Test(lease, renew_release_and_wrongtype)
{
    int64_t a = acquire("r", T0, 1, 100);
    struct ks_key k = key_of("r");
    struct ks_lease_out o;
    cr_assert_eq(ks_lease_renew(ks, &k, T0 + 50 * MS, a, 10 * SEC, &o), KS_OK);
    cr_expect_eq(o.done, 1);
    cr_expect_eq(ks_ttl_ns(ks, &k, T0 + 50 * MS), 10 * SEC);
    cr_expect_eq(acquire("r", T0 + 5 * SEC, 1, 100), 0, "renewed: still held");
    /* An expired lease is not renewed (its slot may be someone else's). */
    cr_assert_eq(ks_lease_renew(ks, &k, T0 + 11 * SEC, a, SEC, &o), KS_OK);
    cr_expect_eq(o.done, 0);
    cr_expect_eq(release("r", T0 + 11 * SEC, a), 0);
    /* The last lease released: the key is gone. */
    int64_t b = acquire("r", T0 + 12 * SEC, 1, 100);
    cr_expect_eq(release("r", T0 + 12 * SEC, b), 1);
    cr_expect_eq(ks_get(ks, &k, T0 + 12 * SEC, NULL), KS_NONE);
    /* Another type under the key. */
    struct ks_key s = key_of("s");
    cr_assert_eq(ks_set(ks, &s, T0, "v", 1, 0, 0), 1);
    cr_expect_eq(ks_lease_acquire(ks, &s, T0, 1, SEC, &o), KS_WRONGTYPE);
    cr_expect_eq(ks_lease_release(ks, &s, T0, 1, &o), KS_WRONGTYPE);
    cr_expect_eq(ks_lease_renew(ks, &s, T0, 1, SEC, &o), KS_WRONGTYPE);
    int64_t n;
    cr_expect_eq(ks_lease_count(ks, &s, T0, &n), KS_WRONGTYPE);
}

Test(lease, the_set_grows_to_its_limit)
{
    for (int i = 0; i < 1000; i++)
        cr_assert_neq(acquire("big", T0 + i, 1000, 60000), 0, "acquire %d", i);
    cr_expect_eq(acquire("big", T0 + 1000, 1000, 60000), 0);
    cr_expect_eq(count("big", T0 + 1000), 1000);
    /* A lower limit: full until enough go. */
    cr_expect_eq(acquire("big", T0 + 1000, 10, 60000), 0);
    /* Over maxmemory a new set is refused, an existing one keeps working. */
    ks_set_maxmemory(ks, 1);
    struct ks_key k = key_of("new");
    struct ks_lease_out o;
    cr_expect_eq(ks_lease_acquire(ks, &k, T0, 1, SEC, &o), KS_OOM);
    struct ks_key b = key_of("big");
    cr_expect_eq(ks_lease_acquire(ks, &b, T0, 1001, SEC, &o), KS_OK);
    cr_expect_neq(o.id, 0);
}

/* ---- the model ---- */

struct mlease {
    int64_t id, expire;
};

struct mkey {
    int n;
    struct mlease l[64];
    int64_t last;
};

static int mlive(const struct mkey *m, int64_t now)
{
    int n = 0;
    for (int i = 0; i < m->n; i++)
        n += m->l[i].expire > now;
    return n;
}

/* Drops the expired leases; a key whose leases all expired is gone, with its highest id. */
static void mpurge(struct mkey *m, int64_t now)
{
    int k = 0;
    for (int i = 0; i < m->n; i++)
        if (m->l[i].expire > now)
            m->l[k++] = m->l[i];
    if (k == 0)
        m->last = 0;
    m->n = k;
}

static int mfind(const struct mkey *m, int64_t id)
{
    for (int i = 0; i < m->n; i++)
        if (m->l[i].id == id)
            return i;
    return -1;
}

static int64_t mttl(const struct mkey *m, int64_t now)
{
    int64_t max = 0;
    for (int i = 0; i < m->n; i++)
        if (m->l[i].expire > max)
            max = m->l[i].expire;
    return max > now ? max - now : -2;
}

/* Seeded comparison: random acquires (limits 1..8), releases and renewals of ids held, expired
 * or never handed out, counts, over jumps of the clock. LEASE_SEED replays a run. */
Test(lease, matches_the_model)
{
    unsigned s = (unsigned)time(NULL);
    const char *env = getenv("LEASE_SEED");
    if (env != NULL)
        s = (unsigned)strtoul(env, NULL, 10);
    srand(s);
    const char *names[3] = {"a", "b", "c"};
    struct mkey m[3] = {{0}};
    int64_t seen[256];
    int nseen = 0, acquired = 0, full = 0;
    int64_t now = T0;
    for (int op = 0; op < 20000; op++) {
        now += rand() % 4 == 0 ? (int64_t)(rand() % 400) * MS : rand() % 3;
        int k = rand() % 3;
        struct mkey *mk = &m[k];
        struct ks_key key = key_of(names[k]);
        struct ks_lease_out o;
        int what = rand() % 10;
        mpurge(mk, now);
        if (what < 5) {
            int64_t limit = 1 + rand() % 8, ttl = 1 + rand() % 1000;
            cr_assert_eq(ks_lease_acquire(ks, &key, now, limit, ttl * MS, &o), KS_OK);
            int64_t want = 0;
            if (mlive(mk, now) < limit && mk->n < 64) {
                int64_t us = now / 1000;
                want = us > mk->last ? us : mk->last + 1;
                mk->l[mk->n++] = (struct mlease){want, now + ttl * MS};
                mk->last = want;
            }
            cr_assert_eq(o.id, want, "seed %u (LEASE_SEED), op %d: acquire %s %lld: id %lld, "
                         "model %lld", s, op, names[k], (long long)limit, (long long)o.id,
                         (long long)want);
            if (want != 0 && nseen < 256)
                seen[nseen++] = want;
            acquired += want != 0;
            full += want == 0;
        } else if (what < 8) {
            int64_t id = nseen > 0 && rand() % 4 ? seen[rand() % nseen] : rand();
            int at = mfind(mk, id);
            int renew = what == 7;
            int64_t ttl = 1 + rand() % 1000;
            int rc = renew ? ks_lease_renew(ks, &key, now, id, ttl * MS, &o)
                           : ks_lease_release(ks, &key, now, id, &o);
            cr_assert_eq(rc, KS_OK);
            cr_assert_eq(o.done, at >= 0, "seed %u, op %d: %s %s %lld", s, op,
                         renew ? "renew" : "release", names[k], (long long)id);
            if (at >= 0 && renew) {
                mk->l[at].expire = now + ttl * MS;
            } else if (at >= 0) {
                memmove(&mk->l[at], &mk->l[at + 1], (size_t)(mk->n - at - 1) * sizeof(mk->l[0]));
                if (--mk->n == 0)
                    mk->last = 0; /* the key is deleted */
            }
        } else {
            int64_t n;
            cr_assert_eq(ks_lease_count(ks, &key, now, &n), KS_OK);
            cr_assert_eq(n, mlive(mk, now), "seed %u, op %d: count %s", s, op, names[k]);
        }
        cr_assert_eq(ks_ttl_ns(ks, &key, now), mttl(mk, now), "seed %u, op %d: ttl of %s", s, op,
                     names[k]);
    }
    cr_log_info("seed %u: %d acquired, %d full", s, acquired, full);
    cr_expect(acquired > 1000 && full > 1000, "a run that tries both sides");
}
