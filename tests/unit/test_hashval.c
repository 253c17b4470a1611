/* test_hashval.c - hash values (src/store/hashval.c): the compact form round-trips every packed
 * hash exactly (integers included, non-canonical ones kept as text), and a hash kept in a struct
 * hv_local moves to the heap or to a table when it outgrows it, against a plain array model
 * driven by a seeded random stream. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlimitd/hashval.h"

/* Values that look like integers and must come back byte for byte, canonical or not. */
static const char *const EDGES[] = {
    "0",   "-0",  "00", "01",  "+1",  "-1",   "1 ",  " 1",  "127", "128", "-128", "-129",
    "255", "256", "32767", "-32768", "8388607", "-8388608", "2147483647", "-2147483648",
    "1764000000000", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "-9223372036854775809", "99999999999999999999", "1e3", "0x10", "", "abc", "12a",
};
#define NEDGES (sizeof(EDGES) / sizeof(EDGES[0]))

struct pair {
    char f[70], v[70];
    size_t flen, vlen;
};

static void rand_str(char *out, size_t *len, unsigned max)
{
    int r = rand() % 4;
    if (r == 0) {
        const char *e = EDGES[(size_t)rand() % NEDGES];
        *len = strlen(e);
        memcpy(out, e, *len);
    } else if (r == 1) {
        *len = (size_t)snprintf(out, 30, "%lld", (long long)(rand() - RAND_MAX / 2) * rand());
    } else {
        *len = (size_t)rand() % (max + 1);
        for (size_t i = 0; i < *len; i++)
            out[i] = (char)(rand() % 256);
    }
}

/* Every pair of the model in h, in the model's order, and nothing else. */
static void expect_same(const struct hashval *h, const struct pair *m, size_t n, int ordered)
{
    cr_assert_eq(hv_count(h), n);
    struct hv_iter it;
    const char *f, *v;
    size_t flen, vlen, i = 0;
    hv_iter_init(&it, h);
    while (hv_next(&it, &f, &flen, &v, &vlen)) {
        if (ordered) {
            cr_assert_eq(flen, m[i].flen);
            cr_assert(memcmp(f, m[i].f, flen) == 0);
            cr_assert_eq(vlen, m[i].vlen, "pair %zu: %zu vs %zu", i, vlen, m[i].vlen);
            cr_assert(memcmp(v, m[i].v, vlen) == 0);
        }
        i++;
    }
    cr_assert_eq(i, n);
    for (i = 0; i < n; i++) {
        cr_assert_eq(hv_get(h, m[i].f, m[i].flen, &v, &vlen), 1);
        cr_assert_eq(vlen, m[i].vlen);
        cr_assert(memcmp(v, m[i].v, vlen) == 0);
    }
}

Test(hashval, compact_round_trip)
{
    srand(17);
    for (int round = 0; round < 3000; round++) {
        struct pair m[12];
        size_t n = 0;
        struct hashval *h = hv_new();
        int want = 1 + rand() % 12;
        for (int k = 0; k < want; k++) {
            struct pair p;
            rand_str(p.f, &p.flen, 12);
            rand_str(p.v, &p.vlen, 30);
            size_t j;
            for (j = 0; j < n; j++)
                if (m[j].flen == p.flen && memcmp(m[j].f, p.f, p.flen) == 0)
                    break;
            int added = hv_set(&h, p.f, p.flen, p.v, p.vlen);
            cr_assert_eq(added, j == n);
            if (j == n)
                m[n++] = p;
            else
                m[j] = p; /* an update keeps the field's place */
        }
        unsigned char c[HV_COMPACT_MAX];
        size_t cn = hv_compact_write(h, c, sizeof(c));
        if (cn == 0) { /* longer than the compact bound: must really be */
            hv_free(h);
            continue;
        }
        cr_assert_eq(hv_compact_count(c, cn), n);
        for (size_t k = 0; k < n; k++) { /* read in place: the same strings */
            const char *v;
            size_t vlen;
            char num[HV_NUM_BYTES];
            cr_assert_eq(hv_compact_get(c, cn, m[k].f, m[k].flen, &v, &vlen, num), 1);
            cr_assert_eq(vlen, m[k].vlen);
            cr_assert(memcmp(v, m[k].v, vlen) == 0);
        }
        {
            const char *v;
            size_t vlen;
            char num[HV_NUM_BYTES];
            int there = 0;
            for (size_t k = 0; k < n; k++)
                there |= m[k].flen == 5 && memcmp(m[k].f, "nope!", 5) == 0;
            cr_assert_eq(hv_compact_get(c, cn, "nope!", 5, &v, &vlen, num), there);
        }
        struct hv_local buf;
        struct hashval *l = hv_compact_load(&buf, c, cn);
        cr_assert(hv_is_local(l));
        cr_assert_eq(hv_bytes(l), 0);
        expect_same(l, m, n, 1);
        /* The same bytes again when written back. */
        unsigned char c2[HV_COMPACT_MAX];
        cr_assert_eq(hv_compact_write(l, c2, sizeof(c2)), cn);
        cr_assert(memcmp(c, c2, cn) == 0);
        hv_free(l); /* does nothing to a local hash */
        hv_free(h);
    }
}

Test(hashval, integers_are_smaller)
{
    struct hashval *h = hv_new();
    hv_set(&h, "tokens", 6, "42", 2);
    hv_set(&h, "ts", 2, "1764000000123", 13);
    unsigned char c[HV_COMPACT_MAX];
    /* [6]tokens[int1]42 [2]ts[int6]ms */
    cr_assert_eq(hv_compact_write(h, c, sizeof(c)), 1 + 6 + 2 + 1 + 2 + 7);
    cr_assert_eq(hv_compact_write(h, c, 18), 0, "cap is honoured");
    hv_free(h);
    h = hv_new();
    hv_set(&h, "a", 1, "-0", 2);
    hv_set(&h, "b", 1, "007", 3);
    cr_assert_eq(hv_compact_write(h, c, sizeof(c)), 2 + 1 + 2 + 2 + 1 + 3, "not canonical: text");
    hv_free(h);
}

Test(hashval, local_outgrows_buffer)
{
    int64_t entries = 128, value = 64;
    hv_watch_limits(&entries, &value);
    srand(5);
    for (int round = 0; round < 200; round++) {
        struct hv_local buf;
        struct hashval *h = hv_new();
        hv_set(&h, "f", 1, "1", 1);
        unsigned char c[HV_COMPACT_MAX];
        size_t cn = hv_compact_write(h, c, sizeof(c));
        hv_free(h);
        h = hv_compact_load(&buf, c, cn);
        struct pair *m = calloc(200, sizeof(*m));
        size_t n = 1;
        m[0] = (struct pair){.f = "f", .v = "1", .flen = 1, .vlen = 1};
        int target = 1 + rand() % 180; /* past 128 fields (set below) it becomes a table */
        while ((int)n < target) {
            struct pair p;
            p.flen = (size_t)snprintf(p.f, sizeof(p.f), "field-%zu", n);
            rand_str(p.v, &p.vlen, rand() % 8 == 0 ? 70 : 20);
            hv_set(&h, p.f, p.flen, p.v, p.vlen);
            m[n++] = p;
        }
        int big = !hv_is_packed(h);
        expect_same(h, m, n, !big);
        struct hashval *heap = hv_to_heap(h);
        cr_assert(!hv_is_local(heap));
        expect_same(heap, m, n, !big);
        if (heap != h)
            hv_free(heap);
        hv_free(h);
        free(m);
    }
}

/* The in-place update gives exactly the bytes the general path (load, hv_set, write) gives, or
 * declines and leaves the compact form as it was. */
Test(hashval, compact_update_matches_general_path)
{
    srand(23);
    int inplace = 0, declined = 0;
    for (int round = 0; round < 3000; round++) {
        struct hashval *h = hv_new();
        char f[70], v[70];
        size_t flen, vlen;
        char names[6][70];
        size_t nlen[6];
        int nf = 1 + rand() % 6;
        for (int k = 0; k < nf; k++) {
            nlen[k] = (size_t)snprintf(names[k], sizeof(names[k]), "f%d", k);
            rand_str(v, &vlen, 20);
            hv_set(&h, names[k], nlen[k], v, vlen);
        }
        unsigned char c[HV_COMPACT_MAX], before[HV_COMPACT_MAX], want[HV_COMPACT_MAX];
        size_t cn = hv_compact_write(h, c, sizeof(c));
        hv_free(h);
        cr_assert(cn > 0);
        memcpy(before, c, cn);
        int pick = rand() % (nf + 1); /* nf: a field that is not there */
        if (pick == nf) {
            flen = 3;
            memcpy(f, "zzz", 3);
        } else {
            flen = nlen[pick];
            memcpy(f, names[pick], flen);
        }
        rand_str(v, &vlen, rand() % 10 == 0 ? 70 : 20);
        struct hv_local buf;
        struct hashval *l = hv_compact_load(&buf, c, cn);
        hv_set(&l, f, flen, v, vlen);
        size_t wn = hv_compact_write(l, want, sizeof(want));
        hv_free(l);
        if (hv_compact_update(c, cn, f, flen, v, vlen)) {
            inplace++;
            cr_assert_eq(wn, cn);
            cr_assert(memcmp(c, want, cn) == 0, "round %d", round);
        } else {
            declined++;
            cr_assert(memcmp(c, before, cn) == 0);
            cr_assert(pick == nf || wn != cn || vlen > HV_PACKED_MAX_LEN || wn == 0 ||
                          memcmp(want, c, cn) != 0,
                      "declined an update of the same size (round %d)", round);
        }
    }
    cr_assert(inplace > 100 && declined > 100, "%d in place, %d declined", inplace, declined);
}

/* The packed bounds follow the watched limits as Redis 7.0's conversion does, at every seeded
 * bound (0 and 1 included, and lengths past one length byte): the hash is packed exactly while
 * no set has gone past them, keeps insertion order while packed, and an update past the entry
 * bound (lowered meanwhile) converts it too. */
Test(hashval, live_limits)
{
    unsigned seed = (unsigned)getpid();
    srand(seed);
    static char big[2000];
    memset(big, 'x', sizeof(big));
    for (int round = 0; round < 300; round++) {
        int64_t entries = rand() % 3 == 0 ? rand() % 3 : rand() % 40;
        int64_t value = rand() % 3 == 0 ? rand() % 3 : rand() % 600;
        hv_watch_limits(&entries, &value);
        struct hashval *h = hv_new();
        struct {
            char f[16];
            size_t flen, vlen;
        } m[64];
        size_t n = 0;
        int packed = 1;
        int sets = rand() % 50;
        for (int i = 0; i < sets; i++) {
            size_t k = (size_t)rand() % 50, vlen = (size_t)rand() % 700;
            if (rand() % 4 == 0)
                vlen = (size_t)rand() % 3;
            char f[16];
            size_t flen = (size_t)snprintf(f, sizeof(f), "%zu", k);
            size_t at = n;
            for (size_t j = 0; j < n; j++)
                if (m[j].flen == flen && memcmp(m[j].f, f, flen) == 0)
                    at = j;
            int isnew = at == n;
            if (isnew) {
                memcpy(m[n].f, f, flen);
                m[n].flen = flen;
                n++;
            }
            m[at].vlen = vlen;
            if ((int64_t)flen > value || (int64_t)vlen > value || (int64_t)n > entries)
                packed = 0;
            cr_assert_eq(hv_set(&h, f, flen, big, vlen), isnew, "seed %u", seed);
            cr_assert_eq(hv_is_packed(h), packed, "seed %u round %d set %d", seed, round, i);
        }
        cr_assert_eq(hv_count(h), n, "seed %u", seed);
        struct hv_iter it;
        const char *f, *v;
        size_t flen, vlen, i = 0;
        hv_iter_init(&it, h);
        while (hv_next(&it, &f, &flen, &v, &vlen)) {
            size_t j = i;
            if (!packed) /* table order: find it */
                for (j = 0; j < n && !(m[j].flen == flen && memcmp(m[j].f, f, flen) == 0); j++)
                    ;
            cr_assert(j < n && m[j].flen == flen && memcmp(m[j].f, f, flen) == 0, "seed %u", seed);
            cr_assert_eq(vlen, m[j].vlen, "seed %u", seed);
            cr_assert(memcmp(v, big, vlen) == 0);
            i++;
        }
        cr_assert_eq(i, n);
        /* A copy is packed again if it fits the bounds now (a reload or RESTORE). */
        struct hashval *c = hv_clone(h);
        int fits = (int64_t)n <= entries;
        for (size_t j = 0; j < n; j++)
            if ((int64_t)m[j].flen > value || (int64_t)m[j].vlen > value)
                fits = 0;
        cr_assert_eq(hv_is_packed(c), fits || n == 0, "seed %u", seed);
        hv_free(c);
        /* Lowered below the count: the next update converts it. */
        if (packed && n > 1) {
            int64_t lower = (int64_t)n - 1;
            hv_watch_limits(&lower, &value);
            hv_set(&h, m[0].f, m[0].flen, big, 0);
            cr_assert(!hv_is_packed(h), "seed %u", seed);
        }
        hv_free(h);
    }
    hv_watch_limits(NULL, NULL);
}
