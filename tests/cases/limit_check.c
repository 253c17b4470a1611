/* limit_check.c - the limit models (limit_model.h) for shell tests: reads a log of calls, one a
 * line, checks every reply in order, and exits 0 if all fit, 1 (after printing the first misfit)
 * if not, 2 on a malformed line. Times are CLOCK_REALTIME ns taken just before the call was sent
 * and just after its reply arrived (`date +%s%N` in bash):
 *   throttle KEY MAX_BURST COUNT PERIOD QUANTITY BEFORE AFTER R0 R1 R2 R3 R4
 *   pttl KEY BEFORE AFTER VALUE          (KEY a CL.THROTTLE key seen before)
 * Keys are words without spaces. A daemon restart needs no line: the state must survive it, and
 * a lost one shows up as a reply the model refuses. */
#include "limit_model.h"

#include <stdio.h>
#include <string.h>

enum { MAX_KEYS = 64, KEY_LEN = 128 };

static struct {
    char name[KEY_LEN];
    struct lm_gcra g;
} keys[MAX_KEYS];
static int nkeys;

static struct lm_gcra *key(const char *name)
{
    for (int i = 0; i < nkeys; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i].g;
    if (nkeys == MAX_KEYS)
        return NULL;
    snprintf(keys[nkeys].name, KEY_LEN, "%s", name);
    lm_gcra_reset(&keys[nkeys].g);
    return &keys[nkeys++].g;
}

int main(void)
{
    char line[1024], name[KEY_LEN], why[512];
    long long mb, cnt, per, q, before, after, r[5], v;
    int n = 0;

    while (fgets(line, sizeof line, stdin) != NULL) {
        n++;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "throttle %127s %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld",
                   name, &mb, &cnt, &per, &q, &before, &after, &r[0], &r[1], &r[2], &r[3],
                   &r[4]) == 12) {
            struct lm_gcra *k = key(name);
            if (k == NULL || mb < 0 || cnt < 1 || per < 1 || q < 0) {
                fprintf(stderr, "limit_check: line %d: bad arguments or too many keys\n", n);
                return 2;
            }
            if (lm_gcra_check(k, mb, cnt, per, q, before, after, r, why, sizeof why) != 0) {
                printf("line %d (%s): %s\n", n, line, why);
                return 1;
            }
        } else if (sscanf(line, "pttl %127s %lld %lld %lld", name, &before, &after, &v) == 4) {
            long long lo, hi;
            struct lm_gcra *k = key(name);
            if (k == NULL) {
                fprintf(stderr, "limit_check: line %d: too many keys\n", n);
                return 2;
            }
            lm_gcra_pttl_range(k, before, after, &lo, &hi);
            if (v < lo || v > hi) {
                printf("line %d (%s): PTTL %lld, the model says [%lld, %lld]\n", n, line, v, lo,
                       hi);
                return 1;
            }
        } else {
            fprintf(stderr, "limit_check: line %d: cannot parse '%s'\n", n, line);
            return 2;
        }
    }
    return 0;
}
