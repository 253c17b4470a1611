/* wait.c - the WAIT option's argument rules (wait.h). */
#include "rlimitd/wait.h"

#include "rlimitd/util.h"

int wait_is_option(const char *s, size_t len)
{
    return util_eq_nocase(s, len, "wait");
}

int wait_parse_ms(const char *s, size_t len, int64_t *ms, const char **err)
{
    int64_t v;
    if (util_parse_i64(s, len, &v) != 0) {
        *err = WAIT_ERR_NOT_INT;
        return -1;
    }
    if (v < 0) {
        *err = WAIT_ERR_NEGATIVE;
        return -1;
    }
    if (v > WAIT_MAX_MS) {
        *err = WAIT_ERR_RANGE;
        return -1;
    }
    *ms = v;
    return 0;
}
