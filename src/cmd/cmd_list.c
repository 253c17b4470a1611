/* cmd_list.c - list commands as Redis 7.0 answers them (docs/COMMANDS.md "Lists"): LPUSH, RPUSH,
 * LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LINDEX, LRANGE, LTRIM, LSET, LREM, LINSERT, LPOS. Arguments
 * are checked in Redis's order (some before the key is looked at, some after); commands that
 * add elements are refused whole over maxmemory, as Redis refuses its deny-oom commands. The
 * moving-window recipe (LPUSH ts, LTRIM 0 n-1, LINDEX -1) keeps its key in one small block. */
#include "cmd_internal.h"
#include "cmd_notify.h"

#include <string.h>

#include "rlimitd/util.h"

#define ERR_POSITIVE "ERR value is out of range, must be positive"

/* Opens key's list; on WRONGTYPE or OOM replies the error and returns -1. */
static int open_list(struct cmd_ctx *x, int mode, struct ks_lref *r)
{
    int rc = ks_list_open(x->env->ks, &x->keys[0], x->now, mode, r);
    if (rc != KS_OK) {
        reply_ks_error(x->out, rc);
        return -1;
    }
    if (mode == KS_H_READ && r->l == NULL) /* only the read commands open for reading */
        notify_keymiss(&x->keys[0]);
    return 0;
}

static void close_list(struct cmd_ctx *x, struct ks_lref *r, int changed)
{
    ks_list_close(x->env->ks, &x->keys[0], r, changed);
}

/* Closes a list elements were taken from, raising event and, when the list went with its last
 * element, "del" (Redis's order). */
static void close_list_removed(struct cmd_ctx *x, struct ks_lref *r, const char *event)
{
    int emptied = r->l == NULL || lv_count(r->l) == 0;
    close_list(x, r, 1);
    notify_key(NOTIFY_LIST, event, &x->keys[0]);
    if (emptied)
        notify_key(NOTIFY_GENERIC, "del", &x->keys[0]);
}

/* Redis checks deny-oom commands before running them, whatever the key holds. */
static int refused_oom(struct cmd_ctx *x)
{
    if (!ks_over_maxmemory(x->env->ks))
        return 0;
    reply_ks_error(x->out, KS_OOM);
    return 1;
}

/* A non-negative integer argument, else Redis's getPositiveLong reply (msg). */
static int arg_positive(struct cmd_ctx *x, int i, const char *msg, int64_t *out)
{
    if (util_parse_i64(x->argv[i], x->lens[i], out) != 0 || *out < 0) {
        reply_error(x->out, msg);
        return -1;
    }
    return 0;
}

static void reply_elem(struct cmd_ctx *x, const struct lv_elem *e)
{
    reply_bulk(x->out, e->p, e->len);
}

/* LPUSH, RPUSH, LPUSHX, RPUSHX. */
static void push_generic(struct cmd_ctx *x, int tail, int only_existing)
{
    if (refused_oom(x))
        return;
    struct ks_lref r;
    if (open_list(x, only_existing ? KS_H_WRITE : KS_H_CREATE, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
        reply_int(x->out, 0);
        return;
    }
    for (int i = 2; i < x->argc; i++)
        lv_insert(&r.l, tail ? lv_count(r.l) : 0, x->argv[i], x->lens[i]);
    int64_t n = (int64_t)lv_count(r.l);
    close_list(x, &r, 1);
    notify_key(NOTIFY_LIST, tail ? "rpush" : "lpush", &x->keys[0]);
    reply_int(x->out, n);
}

static void cmd_lpush(struct cmd_ctx *x)
{
    push_generic(x, 0, 0);
}

static void cmd_rpush(struct cmd_ctx *x)
{
    push_generic(x, 1, 0);
}

static void cmd_lpushx(struct cmd_ctx *x)
{
    push_generic(x, 0, 1);
}

static void cmd_rpushx(struct cmd_ctx *x)
{
    push_generic(x, 1, 1);
}

/* LPOP and RPOP, with or without a count: popped elements in the order they leave the list. */
static void pop_generic(struct cmd_ctx *x, int tail)
{
    int has_count = x->argc == 3;
    int64_t count = 0;
    if (x->argc > 3) {
        reply_errorf(x->out, "ERR wrong number of arguments for '%s' command",
                     tail ? "rpop" : "lpop");
        return;
    }
    if (has_count && arg_positive(x, 2, ERR_POSITIVE, &count) != 0)
        return;
    struct ks_lref r;
    if (open_list(x, KS_H_WRITE, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
        if (has_count)
            reply_null_array(x->out);
        else
            reply_nil(x->out);
        return;
    }
    size_t n = lv_count(r.l);
    struct lv_elem e;
    if (!has_count) {
        lv_get(r.l, tail ? n - 1 : 0, &e);
        reply_elem(x, &e);
        lv_remove(&r.l, tail ? n - 1 : 0, 1);
        close_list_removed(x, &r, tail ? "rpop" : "lpop");
        return;
    }
    size_t k = (uint64_t)count < n ? (size_t)count : n;
    reply_array(x->out, (int64_t)k);
    struct lv_iter it;
    lv_iter_init(&it, r.l, tail ? n - 1 : 0, tail);
    for (size_t i = 0; i < k && lv_next(&it, &e); i++)
        reply_elem(x, &e);
    lv_remove(&r.l, tail ? n - k : 0, k);
    if (k > 0)
        close_list_removed(x, &r, tail ? "rpop" : "lpop");
    else
        close_list(x, &r, 0);
}

static void cmd_lpop(struct cmd_ctx *x)
{
    pop_generic(x, 0);
}

static void cmd_rpop(struct cmd_ctx *x)
{
    pop_generic(x, 1);
}

static void cmd_llen(struct cmd_ctx *x)
{
    struct ks_lref r;
    if (open_list(x, KS_H_READ, &r) == 0)
        reply_int(x->out, r.l != NULL ? (int64_t)lv_count(r.l) : 0);
}

/* A Redis index (negative counts from the tail) as a position, -1 if out of range. */
static int64_t abs_index(int64_t idx, size_t n)
{
    if (idx < 0)
        idx += (int64_t)n;
    return idx < 0 || (uint64_t)idx >= n ? -1 : idx;
}

static void cmd_lindex(struct cmd_ctx *x)
{
    struct ks_lref r;
    int64_t idx;
    if (open_list(x, KS_H_READ, &r) != 0)
        return;
    if (r.l == NULL) {
        reply_nil(x->out);
        return;
    }
    if (arg_i64(x, 2, &idx) != 0)
        return;
    int64_t at = abs_index(idx, lv_count(r.l));
    if (at < 0) {
        reply_nil(x->out);
        return;
    }
    struct lv_elem e;
    lv_get(r.l, (size_t)at, &e);
    reply_elem(x, &e);
}

static void cmd_lset(struct cmd_ctx *x)
{
    if (refused_oom(x))
        return;
    struct ks_lref r;
    int64_t idx;
    if (open_list(x, KS_H_WRITE, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
        reply_error(x->out, "ERR no such key");
        return;
    }
    if (arg_i64(x, 2, &idx) != 0) {
        close_list(x, &r, 0);
        return;
    }
    int64_t at = abs_index(idx, lv_count(r.l));
    if (at < 0) {
        close_list(x, &r, 0);
        reply_error(x->out, "ERR index out of range");
        return;
    }
    lv_set(&r.l, (size_t)at, x->argv[3], x->lens[3]);
    close_list(x, &r, 1);
    notify_key(NOTIFY_LIST, "lset", &x->keys[0]);
    reply_ok(x->out);
}

/* LRANGE/LTRIM's range on a list of n: [*from, *to] inclusive, 0 if it is empty. */
static int clamp_range(int64_t start, int64_t end, size_t n, size_t *from, size_t *to)
{
    int64_t len = (int64_t)n;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len)
        return 0;
    if (end >= len)
        end = len - 1;
    *from = (size_t)start;
    *to = (size_t)end;
    return 1;
}

/* LRANGE and LTRIM: start and end (arguments 2 and 3), then the list opened in mode; -1 when
 * an error was replied. */
static int open_with_range(struct cmd_ctx *x, int mode, int64_t *start, int64_t *end,
                           struct ks_lref *r)
{
    if (arg_i64(x, 2, start) != 0 || arg_i64(x, 3, end) != 0)
        return -1;
    return open_list(x, mode, r);
}

static void cmd_lrange(struct cmd_ctx *x)
{
    int64_t start, end;
    struct ks_lref r;
    if (open_with_range(x, KS_H_READ, &start, &end, &r) != 0)
        return;
    size_t from, to;
    if (r.l == NULL || !clamp_range(start, end, lv_count(r.l), &from, &to)) {
        reply_array(x->out, 0);
        return;
    }
    reply_array(x->out, (int64_t)(to - from + 1));
    struct lv_iter it;
    struct lv_elem e;
    lv_iter_init(&it, r.l, from, 0);
    for (size_t i = from; i <= to && lv_next(&it, &e); i++)
        reply_elem(x, &e);
}

static void cmd_ltrim(struct cmd_ctx *x)
{
    int64_t start, end;
    struct ks_lref r;
    if (open_with_range(x, KS_H_WRITE, &start, &end, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
    } else {
        size_t n = lv_count(r.l), from, to;
        if (clamp_range(start, end, n, &from, &to)) {
            lv_remove(&r.l, to + 1, n - to - 1);
            lv_remove(&r.l, 0, from);
        } else {
            lv_remove(&r.l, 0, n);
        }
        /* Redis signals the key as modified, and raises ltrim, even when nothing went. */
        close_list_removed(x, &r, "ltrim");
    }
    reply_ok(x->out);
}

static void cmd_lrem(struct cmd_ctx *x)
{
    int64_t count;
    if (arg_i64(x, 2, &count) != 0)
        return;
    struct ks_lref r;
    if (open_list(x, KS_H_WRITE, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
        reply_int(x->out, 0);
        return;
    }
    size_t n = lv_rem(&r.l, x->argv[3], x->lens[3], count);
    if (n > 0)
        close_list_removed(x, &r, "lrem");
    else
        close_list(x, &r, 0);
    reply_int(x->out, (int64_t)n);
}

static void cmd_linsert(struct cmd_ctx *x)
{
    if (refused_oom(x))
        return;
    int after;
    if (arg_is(x, 2, "after"))
        after = 1;
    else if (arg_is(x, 2, "before"))
        after = 0;
    else {
        reply_syntax_error(x->out);
        return;
    }
    struct ks_lref r;
    if (open_list(x, KS_H_WRITE, &r) != 0)
        return;
    if (r.l == NULL) {
        close_list(x, &r, 0);
        reply_int(x->out, 0);
        return;
    }
    struct lv_iter it;
    struct lv_elem e;
    size_t i = 0;
    lv_iter_init(&it, r.l, 0, 0);
    while (lv_next(&it, &e)) {
        if (lv_elem_eq(&e, x->argv[3], x->lens[3])) {
            lv_insert(&r.l, i + (size_t)after, x->argv[4], x->lens[4]);
            int64_t n = (int64_t)lv_count(r.l);
            close_list(x, &r, 1);
            notify_key(NOTIFY_LIST, "linsert", &x->keys[0]);
            reply_int(x->out, n);
            return;
        }
        i++;
    }
    close_list(x, &r, 0);
    reply_int(x->out, -1);
}

/* LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len], Redis's texts and order. */
static void cmd_lpos(struct cmd_ctx *x)
{
    int64_t rank = 1, count = -1, maxlen = 0;
    for (int j = 3; j < x->argc; j++) {
        int more = x->argc - 1 - j > 0;
        if (arg_is(x, j, "rank") && more) {
            j++;
            if (arg_i64(x, j, &rank) != 0)
                return;
            if (rank == 0) {
                reply_error(x->out, "ERR RANK can't be zero: use 1 to start from the first "
                                    "match, 2 from the second ... or use negative to start from "
                                    "the end of the list");
                return;
            }
        } else if (arg_is(x, j, "count") && more) {
            j++;
            if (arg_positive(x, j, "ERR COUNT can't be negative", &count) != 0)
                return;
        } else if (arg_is(x, j, "maxlen") && more) {
            j++;
            if (arg_positive(x, j, "ERR MAXLEN can't be negative", &maxlen) != 0)
                return;
        } else {
            reply_syntax_error(x->out);
            return;
        }
    }
    /* Redis negates a negative rank in two's complement: -9223372036854775808 stays negative,
     * so every match qualifies and, with COUNT, none stops the scan. The same arithmetic here. */
    int rev = rank < 0;
    int64_t want = rev ? (int64_t)((uint64_t)0 - (uint64_t)rank) : rank;
    struct ks_lref r;
    if (open_list(x, KS_H_READ, &r) != 0)
        return;
    if (r.l == NULL) {
        if (count != -1)
            reply_array(x->out, 0);
        else
            reply_nil(x->out);
        return;
    }
    size_t n = lv_count(r.l);
    /* The matches are counted first: the reply's array length comes before its elements. The
     * second pass replies the same positions. */
    struct lv_iter it;
    struct lv_elem e;
    for (int pass = count == -1 ? 1 : 0; pass < 2; pass++) {
        int64_t matches = 0;
        uint64_t emitted = 0, index = 0;
        lv_iter_init(&it, r.l, rev ? n - 1 : 0, rev);
        while ((maxlen == 0 || index < (uint64_t)maxlen) && lv_next(&it, &e)) {
            if (lv_elem_eq(&e, x->argv[2], x->lens[2]) && ++matches >= want) {
                int64_t pos = rev ? (int64_t)(n - index - 1) : (int64_t)index;
                if (count == -1) {
                    reply_int(x->out, pos);
                    return;
                }
                if (pass == 1)
                    reply_int(x->out, pos);
                emitted++;
                if (count != 0 && (int64_t)((uint64_t)matches - (uint64_t)want + 1) >= count)
                    break;
            }
            index++;
        }
        if (count == -1) {
            reply_nil(x->out);
            return;
        }
        if (pass == 0)
            reply_array(x->out, (int64_t)emitted);
    }
}

/* ---- the table (cmd_internal.h "one row per command") ---- */

#define LIST_DOC(sum, since_, cx, a)                                                               \
    .summary = sum, .since = since_, .group = "list", .complexity = cx, .args = a

const struct cmd_def cmd_list_table[] = {
    {"lpush",
     -3,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_lpush,
     {LIST_DOC("Prepends elements to a list, creating it if absent; returns the new length",
               "1.0.0",
               "O(1) for each element added, so O(N) to add N elements when the command is "
               "called with multiple arguments.",
               "key:key *element:string"),
      .keyflags = "RW insert"}},
    {"rpush",
     -3,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_rpush,
     {LIST_DOC("Appends elements to a list, creating it if absent; returns the new length", "1.0.0",
               "O(1) for each element added, so O(N) to add N elements when the command is "
               "called with multiple arguments.",
               "key:key *element:string"),
      .keyflags = "RW insert"}},
    {"lpushx",
     -3,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_lpushx,
     {LIST_DOC("Prepends elements to a list only if it exists", "2.2.0",
               "O(1) for each element added, so O(N) to add N elements when the command is "
               "called with multiple arguments.",
               "key:key *element:string"),
      .keyflags = "RW insert"}},
    {"rpushx",
     -3,
     CMD_WRITE | CMD_DENYOOM | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_rpushx,
     {LIST_DOC("Appends elements to a list only if it exists", "2.2.0",
               "O(1) for each element added, so O(N) to add N elements when the command is "
               "called with multiple arguments.",
               "key:key *element:string"),
      .keyflags = "RW insert"}},
    {"lpop",
     -2,
     CMD_WRITE | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_lpop,
     {LIST_DOC("Removes and returns the first elements of a list; the key goes with the last",
               "1.0.0", "O(N) where N is the number of elements returned",
               "key:key ?count:integer"),
      .keyflags = "RW access delete"}},
    {"rpop",
     -2,
     CMD_WRITE | CMD_FAST,
     1,
     1,
     1,
     "write list fast",
     cmd_rpop,
     {LIST_DOC("Removes and returns the last elements of a list; the key goes with the last",
               "1.0.0", "O(N) where N is the number of elements returned",
               "key:key ?count:integer"),
      .keyflags = "RW access delete"}},
    {"llen",
     2,
     CMD_READONLY | CMD_FAST,
     1,
     1,
     1,
     "read list fast",
     cmd_llen,
     {LIST_DOC("Returns the length of a list", "1.0.0", "O(1)", "key:key"), .keyflags = "RO"}},
    {"lindex",
     3,
     CMD_READONLY,
     1,
     1,
     1,
     "read list slow",
     cmd_lindex,
     {LIST_DOC("Returns an element of a list by its index", "1.0.0",
               "O(N) where N is the number of elements to traverse to get to the element at "
               "index. This makes asking for the first or the last element of the list O(1).",
               "key:key index:integer"),
      .keyflags = "RO access"}},
    {"lrange",
     4,
     CMD_READONLY,
     1,
     1,
     1,
     "read list slow",
     cmd_lrange,
     {LIST_DOC("Returns a range of elements of a list", "1.0.0",
               "O(S+N) where S is the distance of start offset from HEAD for small lists, from "
               "nearest end (HEAD or TAIL) for large lists; and N is the number of elements in "
               "the specified range.",
               "key:key start:integer stop:integer"),
      .keyflags = "RO access"}},
    {"ltrim",
     4,
     CMD_WRITE,
     1,
     1,
     1,
     "write list slow",
     cmd_ltrim,
     {LIST_DOC("Keeps only a range of elements of a list; the key goes if none is left", "1.0.0",
               "O(N) where N is the number of elements to be removed by the operation.",
               "key:key start:integer stop:integer"),
      .keyflags = "RW delete"}},
    {"lset",
     4,
     CMD_WRITE | CMD_DENYOOM,
     1,
     1,
     1,
     "write list slow",
     cmd_lset,
     {LIST_DOC("Sets an element of a list by its index", "1.0.0",
               "O(N) where N is the length of the list. Setting either the first or the last "
               "element of the list is O(1).",
               "key:key index:integer element:string"),
      .keyflags = "RW update"}},
    {"lrem",
     4,
     CMD_WRITE,
     1,
     1,
     1,
     "write list slow",
     cmd_lrem,
     {LIST_DOC("Removes elements equal to a value from a list", "1.0.0",
               "O(N+M) where N is the length of the list and M is the number of elements "
               "removed.",
               "key:key count:integer element:string"),
      .keyflags = "RW delete"}},
    {"linsert",
     5,
     CMD_WRITE | CMD_DENYOOM,
     1,
     1,
     1,
     "write list slow",
     cmd_linsert,
     {LIST_DOC("Inserts an element before or after another one in a list", "2.2.0",
               "O(N) where N is the number of elements to traverse before seeing the value "
               "pivot. This means that inserting somewhere on the left end on the list (head) "
               "can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
               "key:key where(before=BEFORE after=AFTER) pivot:string element:string"),
      .keyflags = "RW insert"}},
    {"lpos",
     -3,
     CMD_READONLY,
     1,
     1,
     1,
     "read list slow",
     cmd_lpos,
     {LIST_DOC("Returns the positions of elements equal to a value in a list", "6.0.6",
               "O(N) where N is the number of elements in the list, for the average case. When "
               "searching for elements near the head or the tail of the list, or when the MAXLEN "
               "option is provided, the command may run in constant time.",
               "key:key element:string ?rank:integer=RANK ?num-matches:integer=COUNT "
               "?len:integer=MAXLEN"),
      .keyflags = "RO access"}},
};
const int cmd_list_count = (int)(sizeof(cmd_list_table) / sizeof(cmd_list_table[0]));
