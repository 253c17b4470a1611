/* test_module_cases.c - the shared CL.THROTTLE / ISALLOWED case table (tests/cases) against
 * Debian's redis-server with rlimit.so loaded: the module must answer exactly as the daemon
 * does (tests/integration/test_limiter_cases.c runs the same table there). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "../cases/limiter_cases.h"
#include "../integration/harness.h"
#include "redis_harness.h"

TestSuite(module_cases, .fini = rs_fini, .timeout = 120);

ParameterizedTestParameters(module_cases, redis)
{
    return cr_make_param_array(size_t, lc_case_indices(), lc_case_count);
}

ParameterizedTest(size_t *i, module_cases, redis)
{
    struct rs_server *s = rs_start(NULL, NULL);
    redisContext *c = it_connect(s->port);
    lc_run(c, &lc_cases[*i], LC_MODULE);
    redisFree(c);
    rs_stop(s);
}
