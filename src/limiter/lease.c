/* lease.c - a key's concurrency leases (lease.h, COMMANDS.md, LEASE.*): the set and its
 * changes, and the commands' argument rules. A set is small (at most its limit, usually tens),
 * so purging and finding the earliest expiry are linear passes; finding an id is a binary search,
 * ids being ascending. */
#include "rlimitd/lease.h"

#include <string.h>

#include "rlimitd/util.h"
#include "rlimitd/wait.h"

static const char not_int[] = "value is not an integer or out of range";

size_t lease_set_bytes(uint32_t cap)
{
    return sizeof(struct lease_set) + (size_t)cap * sizeof(struct lease);
}

void lease_set_init(struct lease_set *s, uint32_t cap, int64_t last_id)
{
    s->n = 0;
    s->cap = cap;
    s->last_id = last_id;
}

uint32_t lease_grow_cap(const struct lease_set *s, int64_t limit)
{
    uint64_t want = s->cap < 4 ? 4 : (uint64_t)s->cap * 2;
    uint64_t most = (uint64_t)(limit > (int64_t)s->n + 1 ? limit : (int64_t)s->n + 1);
    return (uint32_t)(want < most ? want : most);
}

uint32_t lease_purge(struct lease_set *s, int64_t now)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->l[i].expire > now)
            s->l[kept++] = s->l[i];
    uint32_t gone = s->n - kept;
    s->n = kept;
    return gone;
}

uint32_t lease_count_live(const struct lease_set *s, int64_t now)
{
    uint32_t live = 0;
    for (uint32_t i = 0; i < s->n; i++)
        live += s->l[i].expire > now;
    return live;
}

int64_t lease_new_id(const struct lease_set *s, int64_t now)
{
    int64_t us = now / 1000;
    return us > s->last_id ? us : s->last_id + 1;
}

int lease_find(const struct lease_set *s, int64_t id)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->l[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->l[lo].id == id ? (int)lo : -1;
}

void lease_put(struct lease_set *s, int64_t id, int64_t expire)
{
    int i = lease_find(s, id);
    if (i >= 0) {
        s->l[i].expire = expire;
        return;
    }
    s->l[s->n].id = id;
    s->l[s->n].expire = expire;
    s->n++;
    if (id > s->last_id)
        s->last_id = id;
}

void lease_remove(struct lease_set *s, int index)
{
    memmove(&s->l[index], &s->l[index + 1], (s->n - (uint32_t)index - 1) * sizeof(s->l[0]));
    s->n--;
}

int64_t lease_min_expire(const struct lease_set *s)
{
    int64_t m = s->l[0].expire;
    for (uint32_t i = 1; i < s->n; i++)
        if (s->l[i].expire < m)
            m = s->l[i].expire;
    return m;
}

int64_t lease_max_expire(const struct lease_set *s)
{
    int64_t m = s->l[0].expire;
    for (uint32_t i = 1; i < s->n; i++)
        if (s->l[i].expire > m)
            m = s->l[i].expire;
    return m;
}

/* ---- arguments ---- */

int lease_parse_ttl(const char *s, size_t len, int64_t *ms, const char **err)
{
    if (util_parse_i64(s, len, ms) != 0) {
        *err = not_int;
        return -1;
    }
    if (*ms < 1 || *ms > LEASE_MAX_TTL_MS) {
        *err = "invalid ttl_ms: must be between 1 and 3153600000000";
        return -1;
    }
    return 0;
}

int lease_parse_id(const char *s, size_t len, int64_t *id, const char **err)
{
    if (util_parse_i64(s, len, id) != 0) {
        *err = not_int;
        return -1;
    }
    return 0;
}

int lease_acquire_parse(int argc, const char *const *argv, const size_t *lens,
                        struct lease_acquire_args *a, const char **err)
{
    if (argc < 4) {
        *err = "wrong number of arguments for 'lease.acquire' command";
        return -1;
    }
    if (util_parse_i64(argv[2], lens[2], &a->limit) != 0) {
        *err = not_int;
        return -1;
    }
    if (a->limit < 1 || a->limit > LEASE_MAX_LIMIT) {
        *err = "invalid limit: must be between 1 and 100000";
        return -1;
    }
    if (lease_parse_ttl(argv[3], lens[3], &a->ttl_ms, err) != 0)
        return -1;
    a->has_wait = 0;
    a->wait_ms = 0;
    if (argc == 4)
        return 0;
    /* Only argv[0..5] are read (rlimit.so passes no more). */
    if (argc != 6 || !wait_is_option(argv[4], lens[4])) {
        *err = "syntax error";
        return -1;
    }
    if (wait_parse_ms(argv[5], lens[5], &a->wait_ms, err) != 0)
        return -1;
    a->has_wait = 1;
    return 0;
}
