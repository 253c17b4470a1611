/* test_limiter_cases.c - the shared CL.THROTTLE / ISALLOWED case table (tests/cases) against the
 * real daemon. tests/module/test_module_cases.c runs the same table against Redis with rlimit.so. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "../cases/limiter_cases.h"
#include "harness.h"

TestSuite(limiter_cases, .fini = it_fini, .timeout = 120);

ParameterizedTestParameters(limiter_cases, daemon)
{
    return cr_make_param_array(size_t, lc_case_indices(), lc_case_count);
}

ParameterizedTest(size_t *i, limiter_cases, daemon)
{
    struct it_daemon *d = it_start(NULL);
    redisContext *c = it_connect(d->port);
    lc_run(c, &lc_cases[*i], LC_DAEMON);
    redisFree(c);
    it_stop(d);
}
