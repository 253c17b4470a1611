/* limiter_cases.c - the shared CL.THROTTLE / ISALLOWED case table (see limiter_cases.h). Every
 * expected reply here is a contract with users' clients: COMMANDS.md, CL.THROTTLE worked example and redis-cell's
 * reply shapes, COMMANDS.md, ISALLOWED window, and the error texts. */
#include "limiter_cases.h"

/* Steps name want_module only where the two targets differ; the rest leave it NULL. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value"
#define NOTINT "-ERR value is not an integer or out of range"
#define THROTTLE_ARITY "-ERR wrong number of arguments for 'cl.throttle' command"
#define ISALLOWED_ARITY "-ERR wrong number of arguments for 'isallowed' command"
#define BAD_PERIOD "-ERR invalid period: must be between 1 and 3153600000 seconds"
#define GCRA_ARITY "-ERR wrong number of arguments for 'gcra' command"
#define GCRA_RANGE "-ERR value is out of range, value must between 1 and 9223372036854775807"
#define GCRA_OVF_TOKENS                                                                            \
    "-ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and " \
    "TOKENS would cause an overflow"
#define GCRA_OVF_BURST                                                                             \
    "-ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and " \
    "max_burst would cause an overflow"
#define BAD_MAX_COUNT "-ERR invalid max_count: must be between 0 and 1000000 (window-max-count)"

/* COMMANDS.md, CL.THROTTLE worked example: EI = 2 s, DVT = 32 s; call i (1..16) is allowed with remaining 16 - i
 * and reset 2i s; calls 17..20 are limited, retry 2 s, reset 32 s. */
#define EX "CL.THROTTLE user123 15 30 60 1"
/* COMMANDS.md, GCRA: GCRA with the same limit; EI = 2 s is whole microseconds, so the same replies. */
#define GX "GCRA user123 15 30 60"

const struct lc_case lc_cases[] = {
    {"throttle_worked_example",
     {{EX, "[0 16 15 -1 2]"},  {EX, "[0 16 14 -1 4]"},  {EX, "[0 16 13 -1 6]"},
      {EX, "[0 16 12 -1 8]"},  {EX, "[0 16 11 -1 10]"}, {EX, "[0 16 10 -1 12]"},
      {EX, "[0 16 9 -1 14]"},  {EX, "[0 16 8 -1 16]"},  {EX, "[0 16 7 -1 18]"},
      {EX, "[0 16 6 -1 20]"},  {EX, "[0 16 5 -1 22]"},  {EX, "[0 16 4 -1 24]"},
      {EX, "[0 16 3 -1 26]"},  {EX, "[0 16 2 -1 28]"},  {EX, "[0 16 1 -1 30]"},
      {EX, "[0 16 0 -1 32]"},  {EX, "[1 16 0 2 32]"},   {EX, "[1 16 0 2 32]"},
      {EX, "[1 16 0 2 32]"},   {EX, "[1 16 0 2 32]"}}},

    {"throttle_quantity_defaults_to_one_and_names_ignore_case",
     {{"CL.THROTTLE k 15 30 60", "[0 16 15 -1 2]"},
      {"CL.THROTTLE k 15 30 60 1", "[0 16 14 -1 4]"},
      {"CL.THROTTLE k 15 30 60", "[0 16 13 -1 6]"},
      {"cl.throttle k 15 30 60", "[0 16 12 -1 8]"},
      {"Cl.ThRoTtLe k 15 30 60", "[0 16 11 -1 10]"}}},

    {"throttle_larger_quantity_consumes_several",
     /* inc = 5 EI = 10 s: remaining 11; then 11 more fit exactly and the next is limited. */
     {{"CL.THROTTLE q 15 30 60 5", "[0 16 11 -1 10]"},
      {"CL.THROTTLE q 15 30 60 11", "[0 16 0 -1 32]"},
      {"CL.THROTTLE q 15 30 60 1", "[1 16 0 2 32]"}}},

    {"throttle_peek_stores_nothing",
     {{"CL.THROTTLE p 15 30 60 0", "[0 16 16 -1 0]"},
      {"EXISTS p", ":0"},
      {"DBSIZE", ":0"},
      {"CL.THROTTLE p 15 30 60 0", "[0 16 16 -1 0]"},
      {"CL.THROTTLE p 15 30 60 1", "[0 16 15 -1 2]"},
      {"CL.THROTTLE p 15 30 60 0", "[0 16 15 -1 2]"},
      {"CL.THROTTLE p 15 30 60 0", "[0 16 15 -1 2]"},
      {"CL.THROTTLE p 15 30 60 1", "[0 16 14 -1 4]"}}},

    {"throttle_quantity_over_limit_never_succeeds",
     {{"CL.THROTTLE big 15 30 60 17", "[1 16 16 -1 0]"},
      {"EXISTS big", ":0"},
      {"CL.THROTTLE big 15 30 60 1000", "[1 16 16 -1 0]"},
      {"EXISTS big", ":0"},
      {"CL.THROTTLE fit 15 30 60 16", "[0 16 0 -1 32]"},
      {"CL.THROTTLE big2 15 30 60 1", "[0 16 15 -1 2]"},
      {"CL.THROTTLE big2 15 30 60 17", "[1 16 15 -1 2]"},
      {"CL.THROTTLE big2 15 30 60 1", "[0 16 14 -1 4]"}}},

    {"throttle_zero_burst_allows_one_per_interval",
     /* EI = DVT = 1 s; the state expires at its TAT and the key is fresh again. */
     {{"CL.THROTTLE z 0 1 1", "[0 1 0 -1 1]"},
      {"CL.THROTTLE z 0 1 1", "[1 1 0 1 1]"},
      {"@gone z", NULL},
      {"CL.THROTTLE z 0 1 1", "[0 1 0 -1 1]"}}},

    {"throttle_keys_are_binary_safe",
     {{"CL.THROTTLE a\\x00b\\x20c 15 30 60", "[0 16 15 -1 2]"},
      {"CL.THROTTLE a\\x00b\\x20d 15 30 60", "[0 16 15 -1 2]"},
      {"CL.THROTTLE a\\x00b\\x20c 15 30 60", "[0 16 14 -1 4]"},
      {"CL.THROTTLE \\xff\\xfe\\x80 15 30 60", "[0 16 15 -1 2]"},
      {"DBSIZE", ":3"}}},

    {"throttle_state_is_a_key_with_expiry",
     {{"CL.THROTTLE g 15 30 60", "[0 16 15 -1 2]"},
      {"EXISTS g", ":1"},
      {"TYPE g", "+string"},
      /* Expiry at the TAT: 2 s away. Redis keeps expiries in whole ms, so the module rounds a
       * CL.THROTTLE TAT up and its PTTL can read 2001. */
      {"PTTL g", ":1000..2001"},
      /* Both show the TAT in ns (COMMANDS.md): the module keeps the state as a Redis string. */
      {"GET g", "~$1[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]"},
      {"DEL g", ":1"},
      {"CL.THROTTLE g 15 30 60", "[0 16 15 -1 2]"}}},

    {"throttle_wrong_number_of_arguments",
     {{"CL.THROTTLE", THROTTLE_ARITY},
      {"CL.THROTTLE k", THROTTLE_ARITY},
      {"CL.THROTTLE k 15 30", THROTTLE_ARITY},
      {"CL.THROTTLE k 15 30 60 1 1", THROTTLE_ARITY},
      {"CL.THROTTLE k 15 30 60 1 1 1", THROTTLE_ARITY},
      {"cl.throttle k 15 30", THROTTLE_ARITY},
      {"PING", "+PONG"},
      {"DBSIZE", ":0"}}},

    {"throttle_non_integer_arguments",
     {{"CL.THROTTLE k abc 30 60 1", NOTINT},
      {"CL.THROTTLE k 15 1.5 60 1", NOTINT},
      {"CL.THROTTLE k 15 30 \"\" 1", NOTINT},
      {"CL.THROTTLE k 15 30 60 \\x201", NOTINT},
      {"CL.THROTTLE k 1\\x20 30 60 1", NOTINT},
      {"CL.THROTTLE k 15 +-1 60 1", NOTINT},
      {"CL.THROTTLE k 15 30 0x10 1", NOTINT},
      {"CL.THROTTLE k 15 30 60 1e3", NOTINT},
      {"CL.THROTTLE k 99999999999999999999 30 60 1", NOTINT},
      {"CL.THROTTLE k 15 -99999999999999999999 60 1", NOTINT},
      {"CL.THROTTLE k 15 30 15a 1", NOTINT},
      {"CL.THROTTLE k 15 30 60 +1", NOTINT},
      {"CL.THROTTLE k 015 30 60 1", NOTINT},
      {"CL.THROTTLE k 15 30 60 \\xff", NOTINT},
      {"EXISTS k", ":0"}}},

    {"throttle_out_of_range_arguments_name_the_argument",
     {{"CL.THROTTLE k -1 30 60", "~-ERR *max_burst*"},
      {"CL.THROTTLE k -100 30 60 1", "~-ERR *max_burst*"},
      {"CL.THROTTLE k 15 0 60", "~-ERR *count*"},
      {"CL.THROTTLE k 15 -1 60", "~-ERR *count*"},
      {"CL.THROTTLE k 15 30 0", "~-ERR *period*"},
      {"CL.THROTTLE k 15 30 -60", "~-ERR *period*"},
      {"CL.THROTTLE k 15 30 60 -1", "~-ERR *quantity*"},
      /* What redis-cell wraps around on: EI < 1 ns, DVT or inc past 64 bits. */
      {"CL.THROTTLE k 0 2000000000 1", "~-ERR *"},
      {"CL.THROTTLE k 9223372036854775806 1 60", "~-ERR *"},
      {"CL.THROTTLE k 15 1 60 9223372036854775807", "~-ERR *"},
      {"CL.THROTTLE k 15 1 9223372036854775807", "~-ERR *"},
      {"EXISTS k", ":0"},
      {"CL.THROTTLE k 0 1 1 0", "[0 1 1 -1 0]"},
      {"EXISTS k", ":0"}}},

    {"throttle_wrongtype_on_other_state",
     {{"ISALLOWED u a 60 10", ":1"},
      {"CL.THROTTLE hist:{u}:a 15 30 60", WRONGTYPE},
      {"CL.THROTTLE hist:{u}:a 15 30 60 0", WRONGTYPE},
      {"TYPE hist:{u}:a", "+zset", "+rlim-wlog"},
      {"SET s v", "+OK"},
      {"CL.THROTTLE s 15 30 60", WRONGTYPE},
      {"GET s", "$v"},
      {"INCR n", ":1"},
      /* The module keeps GCRA state as a string: an integer there reads as a TAT (1 ns after
       * the epoch, long past), and the call takes the key over. */
      {"CL.THROTTLE n 15 30 60", WRONGTYPE, "[0 16 15 -1 2]"},
      {"GET n", "$1", "~$1[0-9]*"}}},

    {"wrong_arity_aborts_a_transaction",
     /* Arity is checked when MULTI queues the call, as Redis does for its own commands. */
     {{"MULTI", "+OK"},
      {"CL.THROTTLE k", THROTTLE_ARITY},
      {"ISALLOWED u a", ISALLOWED_ARITY},
      {"CL.THROTTLE k2 1 1 60", "+QUEUED"},
      {"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
      {"EXISTS k2", ":0"},
      /* Too many arguments for CL.THROTTLE is its own check, made when it runs. */
      {"MULTI", "+OK"},
      {"CL.THROTTLE k 1 1 60 1 1", "+QUEUED"},
      {"CL.THROTTLE k2 1 1 60", "+QUEUED"},
      {"EXEC", "[" THROTTLE_ARITY " [0 2 1 -1 60]]"}}},

    {"isallowed_allows_max_count_then_denies",
     {{"ISALLOWED alice login 60 5", ":1"},
      {"ISALLOWED alice login 60 5", ":1"},
      {"ISALLOWED alice login 60 5", ":1"},
      {"ISALLOWED alice login 60 5", ":1"},
      {"ISALLOWED alice login 60 5", ":1"},
      {"ISALLOWED alice login 60 5", ":0"},
      {"ISALLOWED alice login 60 5", ":0"},
      {"isallowed alice login 60 5", ":0"},
      {"IsAllowed alice login 60 5", ":0"}}},

    {"isallowed_users_and_actions_are_separate",
     {{"ISALLOWED u1 a 60 1", ":1"},
      {"ISALLOWED u1 a 60 1", ":0"},
      {"ISALLOWED u1 b 60 1", ":1"},
      {"ISALLOWED u2 a 60 1", ":1"},
      {"ISALLOWED u2 a 60 1", ":0"},
      {"DBSIZE", ":3"},
      {"EXISTS hist:{u1}:a hist:{u1}:b hist:{u2}:a hist:{u2}:b", ":3"}}},

    {"isallowed_denied_attempts_are_recorded",
     /* A denied attempt moves the key's expiry to `period` after it: it was recorded. */
     {{"ISALLOWED bob pay 30 1", ":1"},
      {"@sleep 300", NULL},
      {"PTTL hist:{bob}:pay", ":1..29750"},
      {"ISALLOWED bob pay 30 1", ":0"},
      /* Bounds from the time measured around the calls: 30 s after the denied attempt. */
      {"PTTL hist:{bob}:pay", "%model"},
      {"ISALLOWED bob pay 30 1", ":0"},
      {"ISALLOWED bob pay 30 1", ":0"}}},

    {"isallowed_state_key_visible_to_key_commands",
     {{"EXISTS hist:{carol}:search", ":0"},
      {"ISALLOWED carol search 60 2", ":1"},
      {"EXISTS hist:{carol}:search", ":1"},
      {"TYPE hist:{carol}:search", "+zset", "+rlim-wlog"},
      {"PTTL hist:{carol}:search", ":50000..60000"},
      {"TTL hist:{carol}:search", ":50..60"},
      {"ISALLOWED carol search 60 2", ":1"},
      {"ISALLOWED carol search 60 2", ":0"},
      {"DEL hist:{carol}:search", ":1"},
      {"EXISTS hist:{carol}:search", ":0"},
      {"ISALLOWED carol search 60 2", ":1"},
      {"UNLINK hist:{carol}:search", ":1"},
      {"ISALLOWED carol search 60 2", ":1"}}},

    {"gcra_worked_example",
     {{GX, "[0 16 15 -1 2]"},  {GX, "[0 16 14 -1 4]"},  {GX, "[0 16 13 -1 6]"},
      {GX, "[0 16 12 -1 8]"},  {GX, "[0 16 11 -1 10]"}, {GX, "[0 16 10 -1 12]"},
      {GX, "[0 16 9 -1 14]"},  {GX, "[0 16 8 -1 16]"},  {GX, "[0 16 7 -1 18]"},
      {GX, "[0 16 6 -1 20]"},  {GX, "[0 16 5 -1 22]"},  {GX, "[0 16 4 -1 24]"},
      {GX, "[0 16 3 -1 26]"},  {GX, "[0 16 2 -1 28]"},  {GX, "[0 16 1 -1 30]"},
      {GX, "[0 16 0 -1 32]"},  {GX, "[1 16 0 2 32]"},   {GX, "[1 16 0 2 32]"},
      {GX, "[1 16 0 2 32]"},   {GX, "[1 16 0 2 32]"}}},

    {"gcra_tokens_and_the_request_that_never_passes",
     {{"GCRA q 15 30 60 TOKENS 5", "[0 16 11 -1 10]"},
      {"gcra q 15 30 60 tokens 11", "[0 16 0 -1 32]"},
      {"GCRA q 15 30 60", "[1 16 0 2 32]"},
      {"GCRA q 15 30 60 TOKENS 17", "[1 16 0 -1 32]"},
      {"GCRA big 15 30 60 TOKENS 17", "[1 16 16 -1 0]"},
      {"EXISTS big", ":0"},
      {"GCRA big 15 30 60.0 TOKENS 16", "[0 16 0 -1 32]"}}},

    {"gcra_and_cl_throttle_share_one_state",
     {{"CL.THROTTLE s 15 30 60", "[0 16 15 -1 2]"},
      {"GCRA s 15 30 60", "[0 16 14 -1 4]"},
      {"CL.THROTTLE s 15 30 60", "[0 16 13 -1 6]"},
      {"GCRA s 15 30 60 TOKENS 13", "[0 16 0 -1 32]"},
      {"CL.THROTTLE s 15 30 60", "[1 16 0 2 32]"},
      {"GCRA s 15 30 60", "[1 16 0 2 32]"},
      {"TYPE s", "+string"},
      /* GCRA wrote last: Redis's expiry, the TAT floored to the ms, at most 32 s away. */
      {"PTTL s", ":30000..32000"},
      {"DBSIZE", ":1"}}},

    {"gcra_remaining_beside_cl_throttle",
     /* EI 100.99 µs: GCRA rounds it to 101 µs, CL.THROTTLE keeps 100999 ns; both answer 1000
      * remaining (redis-cell: 1009). Reset: GCRA ceils 101 µs to 1 s, CL.THROTTLE truncates to
      * ms first, so 0. */
     {{"GCRA f 1000 9901 1", "[0 1001 1000 -1 1]"},
      {"CL.THROTTLE f2 1000 9901 1 1", "[0 1001 1000 -1 0]"}}},

    {"gcra_zero_burst_and_expiry_at_the_tat",
     {{"GCRA z 0 1 1", "[0 1 0 -1 1]"},
      {"GCRA z 0 1 1", "[1 1 0 1 1]"},
      {"PTTL z", ":1..1001"},
      {"@gone z", NULL},
      {"GCRA z 0 1 0.5", "[0 1 0 -1 1]"},
      {"GCRA z 0 1 0.5", "[1 1 0 1 1]"}}},

    {"gcra_validation_errors",
     {{"GCRA", GCRA_ARITY},
      {"GCRA k 1 2", GCRA_ARITY},
      {"GCRA k 1 2 3 TOKENS 1 x", GCRA_ARITY},
      {"GCRA k 1 2 3 TOKENS 1 TOKENS 2", GCRA_ARITY},
      {"GCRA k x 2 3", NOTINT},
      {"GCRA k 1.0 2 3", NOTINT},
      {"GCRA k -1 2 3", "-ERR value is out of range, must be positive"},
      {"GCRA k 1 x 3", NOTINT},
      {"GCRA k 1 0 3", GCRA_RANGE},
      {"GCRA k 1 -1 3", GCRA_RANGE},
      {"GCRA k 1 2 x", "-ERR value is not a valid float"},
      {"GCRA k 1 2 nan", "-ERR value is not a valid float"},
      {"GCRA k 1 2 0", "-ERR period must be > 0 and < 1e12"},
      {"GCRA k 1 2 -1", "-ERR period must be > 0 and < 1e12"},
      {"GCRA k 1 2 1e12", "-ERR period must be > 0 and < 1e12"},
      {"GCRA k 1 2 inf", "-ERR period must be > 0 and < 1e12"},
      {"GCRA k 1 2 3 TOKENS", "-ERR Missing TOKENS value"},
      {"GCRA k 1 2 3 COUNT 1", "-ERR syntax error"},
      {"GCRA k 1 2 3 7", "-ERR syntax error"},
      {"GCRA k 1 2 3 TOKENS 0", GCRA_RANGE},
      {"GCRA k 1 2 3 TOKENS -2", GCRA_RANGE},
      {"GCRA k 1 2 3 TOKENS 2.5", NOTINT},
      {"GCRA k 9223372036854 1 1", GCRA_OVF_BURST},
      {"GCRA k 0 1 1 TOKENS 9223372036855", GCRA_OVF_TOKENS},
      {"GCRA k 1 1 999999999999 TOKENS 10", GCRA_OVF_TOKENS},
      /* EI about 9.2e15 us: 1000 tokens fit int64, but not added to now. */
      {"GCRA k 0 100 922337203685 TOKENS 1000", GCRA_OVF_TOKENS},
      {"DBSIZE", ":0"},
      {"GCRA k 9223372036853 1 1", "[0 9223372036854 9223372036853 -1 1]"},
      {"GCRA k2 0 2000001 1", "[0 1 0 -1 1]"},
      {"GCRA k3 0 1 1e-6", "[0 1 0 -1 1]"}}},

    {"gcra_tat_past_the_year_2262",
     /* One token per 999,999,999,999 s: the TAT is ~31,700 years ahead, kept in microseconds as
      * Redis keeps it. The interval is the double nearest 999999999999e6 us, 64 us above, so
      * the first reset rounds up to 1e12 s (Redis's reply). */
     {{"GCRA far 1 1 999999999999", "[0 2 1 -1 1000000000000]"},
      /* Two intervals, less the microseconds since the first call: the 128 us the double adds
       * to them decide the rounding. */
      {"GCRA far 1 1 999999999999", "~[[]0 2 0 -1 199999999999[89]]"},
      {"GCRA far 1 1 999999999999", "~[[]1 2 0 [19]*[09] 199999999999[89]]"},
      {"TYPE far", "+string"},
      /* GET shows nanoseconds: the microseconds and three zeros, past int64. */
      {"GET far", "~$2[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]000"},
      /* The daemon keeps expiries in ns: none past 2262. Redis's ms expiry reaches it. */
      {"PTTL far", ":-1", ":1999999999990000..1999999999999000"},
      {"CL.THROTTLE far 1 1 1", "-ERR TAT out of range: clock or arguments too large"},
      {"GCRA far 1 1 999999999999", "~[[]1 2 0 [19]*[09] 199999999999[89]]"},
      {"DEL far", ":1"},
      {"GCRA far 1 1 999999999999", "[0 2 1 -1 1000000000000]"}}},

    {"gcra_expiry_is_the_tat_floored_to_the_ms",
     /* Redis sets PXAT at the TAT floored to the ms: 10 s ahead reads at most 10000. */
     {{"GCRA p 4 1 10", "[0 5 4 -1 10]"},
      {"PTTL p", ":9000..10000"},
      {"GCRA p 4 1 10", "[0 5 3 -1 20]"},
      {"PTTL p", ":19000..20000"}}},

    /* COMMANDS.md, THROTTLE.ALL: an LLM gateway's 3 requests and 100 tokens a minute, 40 tokens
     * a request. The third request fits the requests but not the tokens: refused, and nothing is
     * taken from either (the peeks and the next call show it). */
    {"throttle_all_llm_gateway",
     {{"THROTTLE.ALL 2 {u}:rpm {u}:tpm LIMIT 2 3 60 1 LIMIT 99 100 60 40",
       "[0 -1 -1 [0 3 2 -1 20] [0 100 60 -1 24]]"},
      {"THROTTLE.ALL 2 {u}:rpm {u}:tpm LIMIT 2 3 60 1 LIMIT 99 100 60 40",
       "[0 -1 -1 [0 3 1 -1 40] [0 100 20 -1 48]]"},
      {"THROTTLE.ALL 2 {u}:rpm {u}:tpm LIMIT 2 3 60 1 LIMIT 99 100 60 40",
       "[1 1 12 [0 3 1 -1 40] [1 100 20 12 48]]"},
      {"CL.THROTTLE {u}:rpm 2 3 60 0", "[0 3 1 -1 40]"},
      {"CL.THROTTLE {u}:tpm 99 100 60 0", "[0 100 20 -1 48]"},
      /* A smaller request fits both. */
      {"THROTTLE.ALL 2 {u}:rpm {u}:tpm LIMIT 2 3 60 1 LIMIT 99 100 60 20",
       "[0 -1 -1 [0 3 0 -1 60] [0 100 0 -1 60]]"},
      {"THROTTLE.ALL 2 {u}:rpm {u}:tpm LIMIT 2 3 60 1 LIMIT 99 100 60 1",
       "[1 0 20 [1 3 0 20 60] [1 100 0 1 60]]"},
      {"TYPE {u}:rpm", "+string"},
      {"DBSIZE", ":2"}}},

    {"throttle_all_never_and_peeks",
     /* Limit 1 can never take 3 of 2: retry -1, nothing stored anywhere. Quantity 0 peeks. */
     {{"THROTTLE.ALL 3 a b c LIMIT 15 30 60 1 LIMIT 1 1 60 3 LIMIT 0 1 1 1",
       "[1 1 -1 [0 16 16 -1 0] [1 2 2 -1 0] [0 1 1 -1 0]]"},
      {"DBSIZE", ":0"},
      {"THROTTLE.ALL 3 a b c LIMIT 15 30 60 1 LIMIT 1 1 60 0 LIMIT 0 1 1 1",
       "[0 -1 -1 [0 16 15 -1 2] [0 2 2 -1 0] [0 1 0 -1 1]]"},
      {"EXISTS a b c", ":2"},
      {"THROTTLE.ALL 1 a LIMIT 15 30 60 0", "[0 -1 -1 [0 16 15 -1 2]]"},
      {"throttle.all 1 a limit 15 30 60 1", "[0 -1 -1 [0 16 14 -1 4]]"}}},

    {"throttle_all_wrongtype_and_errors",
     {{"ISALLOWED w a 60 10", ":1"},
      {"THROTTLE.ALL 2 k hist:{w}:a LIMIT 1 1 1 1 LIMIT 1 1 1 1", WRONGTYPE},
      {"EXISTS k", ":0"},
      {"THROTTLE.ALL 1 k LIMIT 1 1 1", "-ERR wrong number of arguments for 'throttle.all' command"},
      {"THROTTLE.ALL x k LIMIT 1 1 1 1", NOTINT},
      {"THROTTLE.ALL 0 k LIMIT 1 1 1 1", "-ERR invalid numkeys: must be between 1 and 32"},
      {"THROTTLE.ALL 33 k LIMIT 1 1 1 1", "-ERR invalid numkeys: must be between 1 and 32"},
      {"THROTTLE.ALL 7 k LIMIT 1 1 1 1",
       "-ERR Number of keys can't be greater than number of args"},
      {"THROTTLE.ALL 2 k k LIMIT 1 1 1 1 LIMIT 1 1 1 1", "-ERR THROTTLE.ALL keys must be distinct"},
      {"THROTTLE.ALL 2 k j LIMIT 1 1 1 1", "-ERR THROTTLE.ALL needs one LIMIT per key"},
      {"THROTTLE.ALL 1 k LIMIT 1 1 1 1 LIMIT 1 1 1 1", "-ERR THROTTLE.ALL needs one LIMIT per key"},
      {"THROTTLE.ALL 1 k LIMIT 1 1 1 1 FOO", "-ERR syntax error"},
      {"THROTTLE.ALL 1 k LIMIT 1 x 1 1", NOTINT},
      {"THROTTLE.ALL 2 k j LIMIT 1 1 1 1 LIMIT 1 1 0 1",
       "-ERR limit 1: invalid period: must be >= 1"},
      {"THROTTLE.ALL 1 k LIMIT 1 1 1 1 WAIT -5", "-ERR timeout is negative"},
      {"THROTTLE.ALL 1 k LIMIT 1 1 1 1 WAIT x", "-ERR timeout is not an integer or out of range"},
      {"DBSIZE", ":1"}}},

    {"throttle_all_in_multi_and_scripts",
     {{"MULTI", "+OK"},
      {"THROTTLE.ALL 2 {s}a {s}b LIMIT 0 1 60 1 LIMIT 5 1 60 1", "+QUEUED"},
      {"THROTTLE.ALL 2 {s}a {s}b LIMIT 0 1 60 1 LIMIT 5 1 60 1", "+QUEUED"},
      {"EXEC", "[[0 -1 -1 [0 1 0 -1 60] [0 6 5 -1 60]] [1 0 60 [1 1 0 60 60] [0 6 5 -1 60]]]"},
      {"EVAL return\\x20redis.call('THROTTLE.ALL',2,KEYS[1],KEYS[2],'LIMIT',0,1,60,1,'LIMIT',5,1,60,1) 2 {s}c {s}b",
       "[0 -1 -1 [0 1 0 -1 60] [0 6 4 -1 120]]"}}},

    /* COMMANDS.md, LEASE.*: a pool of 2. Ids are the microseconds of the acquire (16 digits
     * this century), strictly increasing under a key. */
    {"lease_pool_of_two",
     {{"LEASE.ACQUIRE pool 2 60000", "~$1[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]"},
      {"LEASE.ACQUIRE pool 2 60000", "~$1[0-9]*"},
      {"LEASE.ACQUIRE pool 2 60000", "(nil)"},
      {"LEASE.COUNT pool", ":2"},
      {"TYPE pool", "+rlim-leas"},
      {"PTTL pool", ":59000..60000", ":59000..60001"},
      {"LEASE.RENEW pool 12345 1000", ":0"},
      {"LEASE.RELEASE pool 12345", ":0"},
      {"LEASE.ACQUIRE pool 3 60000", "~$1[0-9]*"},
      {"LEASE.RELEASE pool $LAST", ":1"},
      {"LEASE.RELEASE pool $LAST", ":0"},
      {"LEASE.COUNT pool", ":2"},
      {"LEASE.COUNT nopool", ":0"},
      {"EXISTS nopool", ":0"}}},

    {"lease_expiry_frees_the_slot_and_renew_keeps_it",
     {{"LEASE.ACQUIRE one 1 300", "~$1[0-9]*"},
      {"LEASE.RENEW one $LAST 60000", ":1"},
      /* The module rounds the expiry up to the ms. */
      {"PTTL one", ":59000..60000", ":59000..60001"},
      {"LEASE.ACQUIRE one 1 300", "(nil)"},
      {"LEASE.RENEW one $LAST 200", ":1"},
      {"LEASE.ACQUIRE one 1 300", "(nil)"},
      /* The key goes with its last lease. */
      {"@gone one", NULL},
      {"LEASE.COUNT one", ":0"},
      {"LEASE.ACQUIRE one 1 300", "~$1[0-9]*"},
      {"LEASE.RELEASE one $LAST", ":1"},
      {"EXISTS one", ":0"}}},

    {"lease_errors_and_wrongtype",
     {{"LEASE.ACQUIRE k", "-ERR wrong number of arguments for 'lease.acquire' command"},
      {"LEASE.ACQUIRE k 1", "-ERR wrong number of arguments for 'lease.acquire' command"},
      {"LEASE.ACQUIRE k x 1", NOTINT},
      {"LEASE.ACQUIRE k 0 1", "-ERR invalid limit: must be between 1 and 100000"},
      {"LEASE.ACQUIRE k 100001 1", "-ERR invalid limit: must be between 1 and 100000"},
      {"LEASE.ACQUIRE k 1 x", NOTINT},
      {"LEASE.ACQUIRE k 1 0", "-ERR invalid ttl_ms: must be between 1 and 3153600000000"},
      {"LEASE.ACQUIRE k 1 3153600000001", "-ERR invalid ttl_ms: must be between 1 and 3153600000000"},
      {"LEASE.ACQUIRE k 1 10 WAIT", "-ERR syntax error"},
      {"LEASE.ACQUIRE k 1 10 FOO 5", "-ERR syntax error"},
      {"LEASE.ACQUIRE k 1 10 WAIT 5 x", "-ERR syntax error"},
      {"LEASE.ACQUIRE k x 10 WAIT 5 x", NOTINT},
      {"LEASE.ACQUIRE k 1 10 WAIT -1", "-ERR timeout is negative"},
      {"LEASE.RELEASE k", "-ERR wrong number of arguments for 'lease.release' command"},
      {"LEASE.RELEASE k x", NOTINT},
      {"LEASE.RENEW k 1", "-ERR wrong number of arguments for 'lease.renew' command"},
      {"LEASE.RENEW k 1 0", "-ERR invalid ttl_ms: must be between 1 and 3153600000000"},
      {"LEASE.COUNT", "-ERR wrong number of arguments for 'lease.count' command"},
      {"DBSIZE", ":0"},
      {"SET s v", "+OK"},
      {"LEASE.ACQUIRE s 1 10", WRONGTYPE},
      {"LEASE.RELEASE s 1", WRONGTYPE},
      {"LEASE.RENEW s 1 10", WRONGTYPE},
      {"LEASE.COUNT s", WRONGTYPE},
      {"LEASE.ACQUIRE l 1 60000", "~$1[0-9]*"},
      {"GET l", WRONGTYPE},
      {"CL.THROTTLE l 1 1 1", WRONGTYPE},
      {"INCR l", WRONGTYPE}}},

    {"lease_in_multi_and_scripts",
     {{"MULTI", "+OK"},
      {"LEASE.ACQUIRE m 1 60000", "+QUEUED"},
      {"LEASE.ACQUIRE m 1 60000", "+QUEUED"},
      {"LEASE.COUNT m", "+QUEUED"},
      {"EXEC", "~[[]$1[0-9]* (nil) 1]"},
      {"EVAL local\\x20id=redis.call('LEASE.ACQUIRE',KEYS[1],2,60000)\\x20return\\x20redis.call('LEASE.RELEASE',KEYS[1],id) 1 m", ":1"},
      {"LEASE.COUNT m", ":1"}}},

    {"gcra_wrongtype_when_key_holds_other_state",
     /* Arguments are checked before the key, overflow after it, as in Redis. */
     {{"ISALLOWED w a 60 10", ":1"},
      {"GCRA hist:{w}:a 1 2 3", WRONGTYPE},
      {"GCRA hist:{w}:a -1 2 3", "-ERR value is out of range, must be positive"},
      {"GCRA hist:{w}:a 9223372036854 1 1", WRONGTYPE},
      {"SET str foo", "+OK"},
      {"GCRA str 1 2 3", WRONGTYPE},
      {"INCR n", ":1"},
      {"GCRA n 1 2 3", WRONGTYPE, "[0 2 1 -1 2]"},
      {"GET n", "$1", "~$1[0-9]*000"},
      {"GCRA g 15 30 60", "[0 16 15 -1 2]"},
      {"ISALLOWED g a 60 10", ":1"},
      /* The module's state is a string, which INCR may move (by a nanosecond here). */
      {"INCR g", WRONGTYPE, "~:1[0-9]*"}}},

    {"isallowed_window_expires_after_period",
     {{"ISALLOWED dave x 1 2", ":1"},
      {"ISALLOWED dave x 1 2", ":1"},
      {"ISALLOWED dave x 1 2", ":0"},
      {"@gone hist:{dave}:x", NULL},
      {"ISALLOWED dave x 1 2", ":1"}}},

    {"isallowed_max_count_zero_denies_everything",
     {{"ISALLOWED eve x 60 0", ":0"},
      {"ISALLOWED eve x 60 0", ":0"},
      {"EXISTS hist:{eve}:x", ":1"}}},

    {"isallowed_binary_safe_user_and_action",
     {{"ISALLOWED \\x00\\xff a\\x20b 60 1", ":1"},
      {"ISALLOWED \\x00\\xff a\\x20b 60 1", ":0"},
      {"EXISTS hist:{\\x00\\xff}:a\\x20b", ":1"},
      {"ISALLOWED \"\" \"\" 60 1", ":1"},
      {"EXISTS hist:{}:", ":1"}}},

    {"isallowed_validation_errors",
     {{"ISALLOWED", ISALLOWED_ARITY},
      {"ISALLOWED u a 60", ISALLOWED_ARITY},
      {"ISALLOWED u a 60 10 1", ISALLOWED_ARITY},
      {"isallowed u", ISALLOWED_ARITY},
      {"ISALLOWED u a sixty 10", NOTINT},
      {"ISALLOWED u a 60 ten", NOTINT},
      {"ISALLOWED u a 1.5 10", NOTINT},
      {"ISALLOWED u a 60 1.5", NOTINT},
      {"ISALLOWED u a 99999999999999999999 10", NOTINT},
      {"ISALLOWED u a 60 99999999999999999999", NOTINT},
      {"ISALLOWED u a 0 10", BAD_PERIOD},
      {"ISALLOWED u a -5 10", BAD_PERIOD},
      {"ISALLOWED u a 3153600001 10", BAD_PERIOD},
      {"ISALLOWED u a 60 -1", BAD_MAX_COUNT},
      {"ISALLOWED u a 60 1000001", BAD_MAX_COUNT},
      {"DBSIZE", ":0"},
      {"ISALLOWED u a 60 1000000", ":1"},
      {"ISALLOWED u b 3153600000 0", ":0"}}},

    {"isallowed_wrongtype_when_key_holds_other_state",
     {{"SET hist:{w}:a foo", "+OK"},
      {"ISALLOWED w a 60 10", WRONGTYPE},
      {"GET hist:{w}:a", "$foo"},
      {"INCR hist:{w}:n", ":1"},
      {"ISALLOWED w n 60 10", WRONGTYPE},
      {"GET hist:{w}:n", "$1"},
      {"CL.THROTTLE hist:{g}:a 15 30 60", "[0 16 15 -1 2]"},
      {"ISALLOWED g a 60 10", WRONGTYPE},
      {"CL.THROTTLE hist:{g}:a 15 30 60", "[0 16 14 -1 4]"}}},
};

const size_t lc_case_count = sizeof lc_cases / sizeof lc_cases[0];

size_t *lc_case_indices(void)
{
    static size_t idx[sizeof lc_cases / sizeof lc_cases[0]];
    for (size_t i = 0; i < lc_case_count; i++)
        idx[i] = i;
    return idx;
}
