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

int wait_split(int argc, const char *const *argv, const size_t *lens, int min_argc,
               int *argc_out, int *has, int64_t *ms, const char **err)
{
    *argc_out = argc;
    *has = 0;
    *ms = 0;
    if (argc < min_argc + 2 || !wait_is_option(argv[argc - 2], lens[argc - 2]))
        return 0;
    if (wait_parse_ms(argv[argc - 1], lens[argc - 1], ms, err) != 0)
        return -1;
    *argc_out = argc - 2;
    *has = 1;
    return 0;
}
