/* limit_model.c - interval reference models of CL.THROTTLE and ISALLOWED (see limit_model.h).
 *
 * GCRA (COMMANDS.md "CL.THROTTLE") in terms of d = max(TAT - now, 0), how far the key's TAT is ahead of the server's
 * time: the call is limited iff d > dvt - inc; an allowed call's ttl is d + inc, a limited one's
 * is d; retry_after is ceil_s(d - (dvt - inc)); remaining is floor((dvt - ttl) / ei) clamped to
 * [0, limit]; reset_after is ceil_s(ttl), where ceil_s truncates ns to ms and rounds up to
 * seconds. Within each branch every field is monotonic in d, so the d values a reply allows form
 * one interval; the reply is consistent iff that interval meets the d range the TAT interval and
 * the call's time bounds allow. */
#include "limit_model.h"

#include <stdio.h>
#include <time.h>

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)
#define FAR (INT64_C(1) << 61) /* beyond any TAT or time the tests use, with room to add */

int64_t lm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* [lo, hi] &= [l2, h2] */
static void meet(int64_t *lo, int64_t *hi, int64_t l2, int64_t h2)
{
    *lo = max64(*lo, l2);
    *hi = min64(*hi, h2);
}

/* The ns values x >= 0 whose COMMANDS.md "CL.THROTTLE" rounding (ms truncated, seconds rounded up) is s; empty
 * (lo > hi) for a negative s. */
static void ceil_s_inverse(long long s, int64_t *lo, int64_t *hi)
{
    if (s < 0) {
        *lo = 1;
        *hi = 0;
    } else if (s == 0) {
        *lo = 0;
        *hi = NS_PER_MS - 1;
    } else {
        *lo = ((int64_t)(s - 1) * 1000 + 1) * NS_PER_MS;
        *hi = (int64_t)s * NS_PER_S + NS_PER_MS - 1;
    }
}

/* The values of next = dvt - ttl for which remaining is m. */
static void remaining_inverse(long long m, int64_t ei, int64_t limit, int64_t *lo, int64_t *hi)
{
    if (m < 0 || m > limit) {
        *lo = 1;
        *hi = 0;
    } else if (m == 0) {
        *lo = -FAR;
        *hi = ei - 1;
    } else if (m < limit) {
        *lo = (int64_t)m * ei;
        *hi = (int64_t)(m + 1) * ei - 1;
    } else {
        *lo = limit * ei;
        *hi = FAR;
    }
}

void lm_gcra_reset(struct lm_gcra *k)
{
    k->tat_lo = k->tat_hi = -FAR;
    k->has_prev = 0;
    k->rel_lo = k->rel_hi = 0;
    k->prev_before = k->prev_after = 0;
}

static int64_t us_ceil(int64_t ns)
{
    return ns > 0 ? (ns + 999) / 1000 : ns / 1000;
}

void lm_gcra_note_redis(struct lm_gcra *k, int64_t ei_us, int64_t tokens, int64_t before,
                        int64_t after, int limited)
{
    if (limited)
        return;
    int64_t lo_now = before / 1000, hi_now = after / 1000;
    int64_t tlo = us_ceil(k->tat_lo), thi = us_ceil(k->tat_hi);
    int64_t inc = ei_us * tokens;
    k->tat_lo = ((lo_now > tlo ? lo_now : tlo) + inc) * 1000;
    k->tat_hi = ((hi_now > thi ? hi_now : thi) + inc) * 1000;
    k->has_prev = 0;
}

/* The range of TAT - now for a call (or a PTTL) at a server time in [before, after]. */
static void ahead_range(const struct lm_gcra *k, int64_t before, int64_t after, int64_t *lo,
                        int64_t *hi)
{
    *lo = k->tat_lo - after;
    *hi = k->tat_hi - before;
    if (k->has_prev) {
        /* now - previous call's time: at least 0 (calls are served in order), at most ... */
        int64_t gap_lo = max64(0, before - k->prev_after), gap_hi = after - k->prev_before;
        meet(lo, hi, k->rel_lo - gap_hi, k->rel_hi - gap_lo);
    }
}

static double rel_ms(int64_t t, int64_t base)
{
    return t <= -FAR / 2 ? -1e99 : (double)(t - base) / 1e6;
}

int lm_gcra_check(struct lm_gcra *k, int64_t max_burst, int64_t count, int64_t period_s,
                  int64_t quantity, int64_t before, int64_t after, const long long r[5], char *why,
                  size_t whylen)
{
    int64_t ei = period_s * NS_PER_S / count;
    int64_t limit = max_burst + 1;
    int64_t dvt = ei * limit;
    int64_t inc = ei * quantity;
    int64_t dlo, dhi, lo, hi, l2, h2;
    const char *field = NULL;

    ahead_range(k, before, after, &dlo, &dhi);
    dlo = max64(dlo, 0);
    dhi = max64(dhi, 0);
    if (r[1] != limit) {
        snprintf(why, whylen, "limit %lld, want %lld", r[1], (long long)limit);
        return -1;
    }
    if (r[0] == 0) {
        lo = dlo;
        hi = min64(dhi, dvt - inc);
        if (lo > hi)
            field = "allowed (the state says limited)";
        ceil_s_inverse(r[4], &l2, &h2);
        meet(&lo, &hi, l2 - inc, h2 - inc);
        if (!field && lo > hi)
            field = "reset_after";
        remaining_inverse(r[2], ei, limit, &l2, &h2);
        meet(&lo, &hi, dvt - inc - h2, dvt - inc - l2);
        if (!field && lo > hi)
            field = "remaining";
        if (!field && r[3] != -1)
            field = "retry_after (want -1 when allowed)";
    } else if (r[0] == 1) {
        lo = max64(dlo, dvt - inc + 1);
        hi = dhi;
        if (lo > hi)
            field = "limited (the state says allowed)";
        ceil_s_inverse(r[4], &l2, &h2);
        meet(&lo, &hi, l2, h2);
        if (!field && lo > hi)
            field = "reset_after";
        remaining_inverse(r[2], ei, limit, &l2, &h2);
        meet(&lo, &hi, dvt - h2, dvt - l2);
        if (!field && lo > hi)
            field = "remaining";
        if (inc <= dvt) {
            ceil_s_inverse(r[3], &l2, &h2);
            meet(&lo, &hi, l2 + dvt - inc, h2 + dvt - inc);
            if (!field && lo > hi)
                field = "retry_after";
        } else if (!field && r[3] != -1) {
            field = "retry_after (want -1: the quantity never fits)";
        }
    } else {
        lo = 1;
        hi = 0;
        field = "limited flag (want 0 or 1)";
    }
    if (field != NULL) {
        snprintf(why, whylen,
                 "[%lld %lld %lld %lld %lld] fits no server time in the %.3f ms the call took: "
                 "%s is wrong (TAT known in [%.3f, %.3f] ms from the call's start)",
                 r[0], r[1], r[2], r[3], r[4], (double)(after - before) / 1e6, field,
                 rel_ms(k->tat_lo, before), rel_ms(k->tat_hi, before));
        return -1;
    }
    if (r[0] == 0 && inc > 0) {
        /* The new TAT is now + d + inc, and also max(old TAT, now) + inc. */
        int64_t nlo = before + lo + inc, nhi = after + hi + inc;
        meet(&nlo, &nhi, max64(k->tat_lo, before) + inc, max64(k->tat_hi, after) + inc);
        k->tat_lo = nlo;
        k->tat_hi = nhi;
        k->rel_lo = lo + inc;
        k->rel_hi = hi + inc;
    } else {
        /* Nothing stored. d > 0 proves TAT = now + d; d = 0 only that TAT <= now. */
        if (lo > 0)
            meet(&k->tat_lo, &k->tat_hi, before + lo, after + hi);
        k->rel_lo = lo > 0 ? lo : -FAR;
        k->rel_hi = hi;
    }
    k->has_prev = 1;
    k->prev_before = before;
    k->prev_after = after;
    return 0;
}

void lm_gcra_pttl_range(const struct lm_gcra *k, int64_t before, int64_t after, long long *lo,
                        long long *hi)
{
    int64_t l, h;
    ahead_range(k, before, after, &l, &h);
    /* ms rounding: the daemon truncates, Redis rounds the expiry up and the time down. */
    *lo = l / NS_PER_MS - 1;
    *hi = (h + NS_PER_MS - 1) / NS_PER_MS + 1;
}

void lm_window_reset(struct lm_window *w)
{
    w->n = 0;
    w->period_ms = 0;
}

int lm_window_check(struct lm_window *w, int64_t period_s, int64_t max_count, int64_t before,
                    int64_t after, long long allowed, char *why, size_t whylen)
{
    /* The window holds the attempts at ms times in (now - period, now], this one included. */
    int64_t b = before / NS_PER_MS, a = after / NS_PER_MS, p = period_s * 1000;
    int definite = 0, possible = 0;

    for (int i = 0; i < w->n; i++) {
        definite += w->lo[i] > a - p;
        possible += w->hi[i] > b - p;
    }
    if (allowed == 1 ? definite + 1 > max_count : allowed == 0 ? possible + 1 <= max_count : 1) {
        snprintf(why, whylen,
                 "ISALLOWED answered %lld with %d attempt(s) surely and %d possibly in the last "
                 "%lld s (max_count %lld) over the %lld ms the call took",
                 allowed, definite, possible, (long long)period_s, (long long)max_count,
                 (long long)(a - b));
        return -1;
    }
    /* Only the newest max_count + 1 attempts can change an answer. */
    int keep = (int)min64(max_count + 1, LM_WINDOW_MAX);
    if (w->n >= keep) {
        int drop = w->n - keep + 1;
        for (int i = drop; i < w->n; i++) {
            w->lo[i - drop] = w->lo[i];
            w->hi[i - drop] = w->hi[i];
        }
        w->n -= drop;
    }
    w->lo[w->n] = b;
    w->hi[w->n] = a;
    w->n++;
    w->period_ms = p;
    return 0;
}

void lm_window_pttl_range(const struct lm_window *w, int64_t before, int64_t after, long long *lo,
                          long long *hi)
{
    /* The key expires period after its newest attempt. */
    int64_t newest_lo = w->n ? w->lo[w->n - 1] : 0, newest_hi = w->n ? w->hi[w->n - 1] : 0;
    *lo = newest_lo + w->period_ms - after / NS_PER_MS - 2;
    *hi = newest_hi + w->period_ms - before / NS_PER_MS + 2;
}
