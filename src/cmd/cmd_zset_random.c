/* cmd_zset_random.c - ZRANDMEMBER (docs/COMMANDS.md, Sorted sets): one member, distinct
 * members by selection sampling, or members with repetition, with Redis 7.0's limits. */
#include "cmd_zset.h"

/* ZRANDMEMBER with a negative count repeats members; a reply this long is refused instead of
 * being built (Redis would build it, whatever its size). */
#define RANDMEMBER_MAX_REPEAT (1 << 24)

static uint64_t rand_next(uint64_t *s)
{
    /* splitmix64: a per-call seed from the clock is enough for a random pick. */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void emit_at(struct rbuf *out, struct zs_iter *it, size_t rank, enum scores scores)
{
    struct zs_item item;
    zs_iter_seek(it, rank);
    if (zs_iter_next(it, &item))
        reply_member(out, &item, scores);
}

static void cmd_zrandmember(struct cmd_ctx *x)
{
    int64_t count = 0;
    int withscores = 0, with_count = x->argc >= 3;
    if (with_count) {
        if (arg_i64(x, 2, &count) != 0)
            return;
        if (count == INT64_MIN) {
            reply_error(x->out, "ERR value is out of range, value must between "
                                "-9223372036854775807 and 9223372036854775807");
            return;
        }
        if (x->argc > 4 || (x->argc == 4 && !arg_is(x, 3, "WITHSCORES"))) {
            reply_syntax_error(x->out);
            return;
        }
        withscores = x->argc == 4;
        /* Redis 7.0 refuses these before anything else (the reply would be too long). */
        if (withscores && count < -(INT64_MAX / 2)) {
            reply_error(x->out, "ERR value is out of range");
            return;
        }
    }
    struct ks_zref ref;
    if (open_key_read(x, &ref) != 0)
        return;
    uint64_t seed = (uint64_t)x->now ^ (uint64_t)(uintptr_t)x->s;
    if (!with_count) {
        if (ref.z == NULL) {
            reply_nil(x->out);
        } else {
            struct zs_iter it;
            zs_iter_init(&it, ref.z, 0, 0);
            emit_at(x->out, &it, rand_next(&seed) % zs_card(ref.z), SCORES_NONE);
        }
        close_key(x, &ref);
        return;
    }
    if (ref.z == NULL || count == 0) {
        reply_array(x->out, 0);
        close_key(x, &ref);
        return;
    }
    size_t card = zs_card(ref.z);
    struct zs_iter it;
    zs_iter_init(&it, ref.z, 0, 0);
    enum scores scores = withscores ? SCORES_PAIRS : SCORES_NONE;
    if (count < 0 || count == 1) {
        /* With repetition. */
        uint64_t n = count < 0 ? (uint64_t)-count : 1;
        if (n > RANDMEMBER_MAX_REPEAT) {
            close_key(x, &ref);
            reply_errorf(x->out, "ERR count is out of range, at most %d members with repetition",
                         RANDMEMBER_MAX_REPEAT);
            return;
        }
        reply_members(x->out, (size_t)n, scores);
        for (uint64_t k = 0; k < n; k++)
            emit_at(x->out, &it, rand_next(&seed) % card, scores);
    } else if ((uint64_t)count >= card) {
        /* The whole set, highest first, as Redis 7.0 answers it. */
        emit_ranks(x->out, ref.z, card - 1, card, 1, scores);
    } else {
        /* Distinct members: selection sampling over the ranks (Knuth's algorithm S), O(card). */
        size_t want = (size_t)count, seen = 0;
        reply_members(x->out, want, scores);
        struct zs_item item;
        zs_iter_seek(&it, 0);
        while (want > 0 && zs_iter_next(&it, &item)) {
            if (rand_next(&seed) % (card - seen) < want) {
                reply_member(x->out, &item, scores);
                want--;
            }
            seen++;
        }
    }
    close_key(x, &ref);
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

const struct cmd_def cmd_zset_random_table[] = {
    {"zrandmember", -2, CMD_READONLY, 1, 1, 1, "read sortedset slow", cmd_zrandmember,
     {.summary = "Returns random members of a sorted set", .since = "6.2.0", .group = "sorted-set",
      .complexity = "O(N), N the set's size (with a count)",
      .args = "key:key ?options{count:integer ?withscores=WITHSCORES}", .keyflags = "RO access",
      .tips = "nondeterministic_output"}},
};
const int cmd_zset_random_count = (int)(sizeof(cmd_zset_random_table) / sizeof(cmd_zset_random_table[0]));
