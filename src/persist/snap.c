/* snap.c - snapshot file format, crash-safe writing and verified reading (snap.h, SNAPSHOT.md,
 * docs/SNAPSHOT.md).
 *
 * Crash safety comes from the order of operations, as in Redis's rdbSave: the records go to a
 * temporary file in the same directory, which is fsync'd, renamed over the snapshot (rename is
 * atomic within a filesystem) and then the directory is fsync'd so the rename itself is durable.
 * A crash at any point leaves the previous file or the new one, never a mix.
 *
 * Reading trusts nothing: the whole file is checked (size, magic, version, XXH3-64 checksum)
 * before the first record reaches the keyspace, and every length is bounds-checked, so a corrupt
 * file stops the start with a precise message instead of loading half of it. */
#include "rlimitd/snap.h"
#include "rlimitd/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "rlimitd/lease.h"
#include "rlimitd/swlog.h"
#include "rlimitd/zset.h"

#define HEADER_SIZE 32
#define TRAILER_SIZE 17 /* end marker, record count, checksum */
#define END_MARKER 0xFF
#define WRITE_BUF (1 << 20)

/* ---- encoding ---- */

static void put_u64(struct rbuf *out, uint64_t v)
{
    unsigned char *p = (unsigned char *)rbuf_reserve(out, 8);
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    out->len += 8;
}

static void put_varint(struct rbuf *out, uint64_t v)
{
    unsigned char *p = (unsigned char *)rbuf_reserve(out, 10);
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    out->len += n;
}

void snap_encode(struct rbuf *out, const struct ks_record *r)
{
    unsigned char type = (unsigned char)r->type;
    rbuf_append(out, &type, 1);
    put_varint(out, r->klen);
    rbuf_append(out, r->key, r->klen);
    put_u64(out, (uint64_t)r->expire);
    switch (r->type) {
    case KS_GCRA:
    case KS_INT:
        put_u64(out, (uint64_t)r->i);
        break;
    case KS_RAW:
        put_varint(out, r->len);
        rbuf_append(out, r->p, r->len);
        break;
    case KS_HASH: {
        struct hv_iter it;
        const char *f, *v;
        size_t flen, vlen;
        put_varint(out, hv_count(r->hv));
        hv_iter_init(&it, r->hv);
        while (hv_next(&it, &f, &flen, &v, &vlen)) {
            put_varint(out, flen);
            rbuf_append(out, f, flen);
            put_varint(out, vlen);
            rbuf_append(out, v, vlen);
        }
        break;
    }
    case KS_LIST: {
        /* Elements head to tail, each its length and bytes. */
        struct lv_iter it;
        struct lv_elem e;
        put_varint(out, lv_count(r->lv));
        lv_iter_init(&it, r->lv, 0, 0);
        while (lv_next(&it, &e)) {
            put_varint(out, e.len);
            rbuf_append(out, e.p, e.len);
        }
        break;
    }
    case KS_LEASE: {
        /* The highest id handed out, then each lease's id and expiry, ids ascending. */
        const struct lease_set *s = r->leases;
        put_varint(out, s->n);
        put_u64(out, (uint64_t)s->last_id);
        for (uint32_t i = 0; i < s->n; i++) {
            put_u64(out, (uint64_t)s->l[i].id);
            put_u64(out, (uint64_t)s->l[i].expire);
        }
        break;
    }
    case KS_SWLOG: {
        /* Timestamps are sorted: the first in full, then small deltas. */
        uint32_t n = r->log->len;
        put_varint(out, n);
        int64_t prev = 0;
        for (uint32_t i = 0; i < n; i++) {
            int64_t t = swlog_at(r->log, i);
            if (i == 0)
                put_u64(out, (uint64_t)t);
            else
                put_varint(out, (uint64_t)(t - prev));
            prev = t;
        }
        break;
    }
    case KS_ZSET: {
        /* Members in set order: member length, member, score (IEEE 754 bits). */
        struct zs_iter it;
        struct zs_item item;
        put_varint(out, zs_card(r->zs));
        zs_iter_init(&it, r->zs, 0, 0);
        while (zs_iter_next(&it, &item)) {
            uint64_t bits;
            memcpy(&bits, &item.score, 8);
            put_varint(out, item.len);
            rbuf_append(out, item.m, item.len);
            put_u64(out, bits);
        }
        break;
    }
    default:
        break;
    }
}

/* ---- writing ---- */

struct snap_writer {
    int fd;
    char *tmp;   /* temporary path */
    char *final; /* dir/file */
    char *dir;
    XXH3_state_t *hash;
    unsigned char *buf;
    size_t used;
    uint64_t records;
};

static void set_err(char *err, size_t errlen, const char *path, const char *what, int e)
{
    snprintf(err, errlen, "%s: %s%s%s", path, what, e ? ": " : "", e ? strerror(e) : "");
}

static char *join(const char *dir, const char *file, const char *suffix)
{
    size_t n = strlen(dir) + strlen(file) + strlen(suffix) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s%s", dir, file, suffix);
    return p;
}

static void writer_free(struct snap_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    XXH3_freeState(w->hash);
    free(w->buf);
    free(w->tmp);
    free(w->final);
    free(w->dir);
    free(w);
}

static int drain(struct snap_writer *w, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < w->used) {
        ssize_t n = write(w->fd, w->buf + off, w->used - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            set_err(err, errlen, w->tmp, "write", n < 0 ? errno : EIO);
            return -1;
        }
        off += (size_t)n;
    }
    w->used = 0;
    return 0;
}

static int emit(struct snap_writer *w, const void *p, size_t len, char *err, size_t errlen)
{
    XXH3_64bits_update(w->hash, p, len);
    const unsigned char *src = p;
    while (len > 0) {
        size_t room = WRITE_BUF - w->used;
        size_t n = len < room ? len : room;
        memcpy(w->buf + w->used, src, n);
        w->used += n;
        src += n;
        len -= n;
        if (w->used == WRITE_BUF && drain(w, err, errlen) != 0)
            return -1;
    }
    return 0;
}

struct snap_writer *snap_writer_open(const char *dir, const char *file, int64_t created_ns,
                                     char *err, size_t errlen)
{
    struct snap_writer *w = xcalloc(1, sizeof(*w));
    char suffix[48];
    snprintf(suffix, sizeof(suffix), ".tmp-%ld", (long)getpid());
    w->fd = -1;
    w->tmp = join(dir, file, suffix);
    w->final = join(dir, file, "");
    w->dir = xstrdup(dir);
    w->hash = XXH3_createState();
    w->buf = xmalloc(WRITE_BUF);
    if (w->hash == NULL)
        alloc_fail(576); /* about XXH3_state_t, opaque here */
    XXH3_64bits_reset(w->hash);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        set_err(err, errlen, w->tmp, "cannot create", errno);
        writer_free(w);
        return NULL;
    }
    struct rbuf h;
    rbuf_init(&h);
    rbuf_append(&h, SNAP_MAGIC, 8);
    put_u64(&h, SNAP_VERSION); /* version (low 4 bytes) and flags 0 (high 4) */
    put_u64(&h, (uint64_t)created_ns);
    put_u64(&h, 0); /* reserved */
    int rc = emit(w, h.p, h.len, err, errlen);
    rbuf_free(&h);
    if (rc != 0) {
        snap_writer_abort(w);
        return NULL;
    }
    return w;
}

int snap_writer_write(struct snap_writer *w, const void *p, size_t len, uint64_t count,
                      char *err, size_t errlen)
{
    w->records += count;
    return emit(w, p, len, err, errlen);
}

void snap_writer_abort(struct snap_writer *w)
{
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    unlink(w->tmp);
    writer_free(w);
}

int snap_writer_commit(struct snap_writer *w, char *err, size_t errlen)
{
    struct rbuf t;
    rbuf_init(&t);
    unsigned char marker = END_MARKER;
    rbuf_append(&t, &marker, 1);
    put_u64(&t, w->records);
    int rc = emit(w, t.p, t.len, err, errlen);
    t.len = 0;
    if (rc == 0)
        rc = drain(w, err, errlen);
    if (rc == 0) {
        /* The checksum covers everything before it, so it is not hashed itself. */
        put_u64(&t, XXH3_64bits_digest(w->hash));
        memcpy(w->buf, t.p, 8);
        w->used = 8;
        rc = drain(w, err, errlen);
    }
    rbuf_free(&t);
    if (rc == 0 && fsync(w->fd) != 0) {
        set_err(err, errlen, w->tmp, "fsync", errno);
        rc = -1;
    }
    if (rc == 0) {
        /* After close(), even a failed one, the descriptor is gone: never close it twice. */
        int closed = close(w->fd);
        int e = errno;
        w->fd = -1;
        if (closed != 0) {
            set_err(err, errlen, w->tmp, "close", e);
            rc = -1;
        }
    }
    /* On failure w->fd may still be open here; snap_writer_abort closes and unlinks. */
    if (rc == 0 && rename(w->tmp, w->final) != 0) {
        set_err(err, errlen, w->final, "rename", errno);
        rc = -1;
    }
    if (rc != 0) {
        snap_writer_abort(w);
        return -1;
    }
    /* Make the rename durable: without this a crash could bring the old name back. */
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        set_err(err, errlen, w->dir, "fsync directory", errno);
        rc = -1;
    }
    if (dfd >= 0)
        close(dfd);
    writer_free(w);
    return rc;
}

/* ---- reading ---- */

struct cursor {
    const unsigned char *p;
    size_t off, end;
};

static int get_u64(struct cursor *c, uint64_t *v)
{
    if (c->end - c->off < 8)
        return -1;
    uint64_t x;
    memcpy(&x, c->p + c->off, 8); /* one load instead of eight on the 10M-record load path */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    c->off += 8;
    *v = x;
    return 0;
}

static int get_varint(struct cursor *c, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->off >= c->end)
            return -1;
        unsigned char b = c->p[c->off++];
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

#define FAIL(off_, ...)                                                                          \
    do {                                                                                       \
        char why_[200];                                                                        \
        snprintf(why_, sizeof(why_), __VA_ARGS__);                                             \
        snprintf(err, errlen, "%s: offset %zu: %s", path, (size_t)(off_), why_);               \
        goto fail;                                                                             \
    } while (0)

/* One pass over the records, from c->off up to the end marker (left unread). Pass 0 checks the
 * structure and counts into info; pass 1 hands every record to cb. Returns 0, or -1 with err
 * set. */
struct range_pass {
    const char *path;
    const unsigned char *map;
    int pass;
    snap_record_fn cb;
    void *ud;
    struct snap_info *info; /* pass 0 */
    uint64_t n;             /* records seen */
    int64_t *ts;            /* pass 1: the timestamps of the current window log */
    size_t ts_cap;
    struct lease_set *ls;   /* pass 1: the current lease set */
    uint32_t ls_cap;
    uint32_t version;       /* of the file */
    struct zset *zs;        /* pass 1: the current sorted set, freed after the callback */
    const char *zerr;       /* why parse_zset failed */
    char *err;
    size_t errlen;
};

/* A lease-set record's value (SNAPSHOT.md, type 8): count >= 1, the highest id, then the
 * leases, ids ascending and none above the highest. Pass 1 builds it in rp->ls for r->leases. */
static int parse_leases(struct range_pass *rp, struct cursor *c, struct ks_record *r)
{
    uint64_t count, v, id, exp;
    if (get_varint(c, &count) != 0 || count == 0 || count > (c->end - c->off) / 16 ||
        count > UINT32_MAX) {
        rp->zerr = "bad lease count";
        return -1;
    }
    if (get_u64(c, &v) != 0) {
        rp->zerr = "truncated lease set";
        return -1;
    }
    if (rp->pass == 1 && count > rp->ls_cap) {
        free(rp->ls);
        rp->ls_cap = (uint32_t)count;
        rp->ls = xmalloc(lease_set_bytes(rp->ls_cap));
    }
    struct lease_set *s = rp->pass == 1 ? rp->ls : NULL;
    if (s != NULL)
        lease_set_init(s, rp->ls_cap, (int64_t)v);
    int64_t prev = INT64_MIN;
    for (uint64_t i = 0; i < count; i++) {
        if (get_u64(c, &id) != 0 || get_u64(c, &exp) != 0) {
            rp->zerr = "truncated lease set";
            return -1;
        }
        if ((int64_t)id <= prev || (int64_t)id > (int64_t)v) {
            rp->zerr = "lease ids not ascending or above the highest id";
            return -1;
        }
        prev = (int64_t)id;
        if (s != NULL)
            lease_put(s, (int64_t)id, (int64_t)exp);
    }
    if (rp->pass == 0)
        rp->info->leases += count;
    r->leases = s;
    return 0;
}

/* A sorted-set record's value: varint count >= 1, then count (varint length, member, 8-byte
 * score) in strictly ascending (score, member) order, no NaN. Pass 1 builds the set in rp->zs
 * and points r->zs at it. Returns 0, or -1 with rp->zerr set. */
static int parse_zset(struct range_pass *rp, struct cursor *c, struct ks_record *r)
{
    uint64_t count, len, bits;
    const char *prev = NULL;
    size_t prev_len = 0;
    double prev_score = 0;
    if (get_varint(c, &count) != 0 || count == 0 || count > (c->end - c->off) / 9) {
        rp->zerr = "bad sorted set length";
        return -1;
    }
    if (rp->pass == 1) {
        /* Packed only if the whole set fits the bounds, as Redis loads one (a -0 score stays -0
         * in a set that does not): the longest member first, read ahead; the loop below checks
         * what this skims. */
        struct cursor ahead = *c;
        uint64_t longest = 0;
        for (uint64_t i = 0; i < count; i++) {
            if (get_varint(&ahead, &len) != 0 || len > ahead.end - ahead.off ||
                ahead.end - ahead.off - len < 8)
                break;
            longest = len > longest ? len : longest;
            ahead.off += (size_t)len + 8;
        }
        rp->zs = zs_new((size_t)count, (size_t)longest);
    }
    for (uint64_t i = 0; i < count; i++) {
        if (get_varint(c, &len) != 0 || len > c->end - c->off) {
            rp->zerr = "bad sorted set member length";
            return -1;
        }
        const char *m = (const char *)rp->map + c->off;
        c->off += (size_t)len;
        if (get_u64(c, &bits) != 0) {
            rp->zerr = "truncated sorted set";
            return -1;
        }
        double score;
        memcpy(&score, &bits, 8);
        int order = 1;
        if (prev != NULL && score == prev_score) {
            int d = memcmp(prev, m, prev_len < len ? prev_len : (size_t)len);
            order = d < 0 || (d == 0 && prev_len < len);
        } else if (prev != NULL) {
            order = prev_score < score;
        }
        if (score != score || !order) {
            rp->zerr = "sorted set members out of order or NaN score";
            return -1;
        }
        prev = m;
        prev_len = (size_t)len;
        prev_score = score;
        if (rp->pass == 1) {
            double out;
            int skipped;
            zs_add(&rp->zs, m, (size_t)len, score, 0, &out, &skipped);
        }
    }
    if (rp->pass == 0)
        rp->info->zmembers += count;
    r->zs = rp->zs;
    return 0;
}

static int parse_range(struct range_pass *rp, struct cursor *c)
{
    const char *path = rp->path;
    const unsigned char *map = rp->map;
    char *err = rp->err;
    size_t errlen = rp->errlen;
    int pass = rp->pass;
    for (;;) {
        size_t at = c->off;
        if (c->off >= c->end)
            FAIL(at, "truncated: no end marker");
        unsigned char type = map[c->off++];
        if (type == END_MARKER) {
            c->off--; /* left for the caller: the marker ends the records */
            break;
        }
        if (type < KS_GCRA || type > KS_LEASE || (type == KS_ZSET && rp->version < 2) ||
            (type == KS_HASH && rp->version < 3) || (type == KS_LIST && rp->version < 4) ||
            (type == KS_LEASE && rp->version < 5))
            FAIL(at, "unknown record type %u", type);
        struct ks_record r = {0};
        r.type = (enum ks_type)type;
        uint64_t klen, v;
        if (get_varint(c, &klen) != 0 || klen > c->end - c->off)
            FAIL(at, "bad key length");
        r.key = (const char *)map + c->off;
        r.klen = (size_t)klen;
        c->off += (size_t)klen;
        if (get_u64(c, &v) != 0)
            FAIL(at, "truncated record");
        r.expire = (int64_t)v;
        if (type == KS_GCRA || type == KS_INT) {
            if (get_u64(c, &v) != 0)
                FAIL(at, "truncated record");
            r.i = (int64_t)v;
        } else if (type == KS_RAW) {
            if (get_varint(c, &v) != 0 || v > c->end - c->off)
                FAIL(at, "bad string length");
            r.p = (const char *)map + c->off;
            r.len = (size_t)v;
            c->off += (size_t)v;
        } else if (type == KS_ZSET) {
            if (parse_zset(rp, c, &r) != 0)
                FAIL(at, "%s", rp->zerr);
        } else if (type == KS_HASH) {
            /* Pairs: varint length and bytes of the field, then of the value. */
            uint64_t count;
            if (get_varint(c, &count) != 0 || count == 0 || count > (c->end - c->off) / 2)
                FAIL(at, "bad hash length");
            struct hashval *h = pass == 1 ? hv_new() : NULL;
            const char *f = NULL;
            size_t flen = 0;
            for (uint64_t i = 0; i < 2 * count; i++) {
                uint64_t len;
                if (get_varint(c, &len) != 0 || len > c->end - c->off) {
                    hv_free(h);
                    FAIL(at, "bad hash field or value length");
                }
                const char *s = (const char *)map + c->off;
                if (i % 2 == 0) {
                    f = s;
                    flen = (size_t)len;
                } else if (h != NULL) {
                    hv_set(&h, f, flen, s, (size_t)len);
                }
                c->off += (size_t)len;
            }
            if (h != NULL && hv_count(h) != count) {
                hv_free(h);
                FAIL(at, "duplicate hash field");
            }
            r.hv = h;
        } else if (type == KS_LIST) {
            /* Elements head to tail: varint length and bytes each. */
            uint64_t count;
            if (get_varint(c, &count) != 0 || count == 0 || count > c->end - c->off)
                FAIL(at, "bad list length");
            struct listval *l = pass == 1 ? lv_new() : NULL;
            for (uint64_t i = 0; i < count; i++) {
                uint64_t len;
                if (get_varint(c, &len) != 0 || len > c->end - c->off) {
                    lv_free(l);
                    FAIL(at, "bad list element length");
                }
                if (l != NULL)
                    lv_insert(&l, (size_t)i, (const char *)map + c->off, (size_t)len);
                c->off += (size_t)len;
            }
            r.lv = l;
        } else if (type == KS_LEASE) {
            if (parse_leases(rp, c, &r) != 0)
                FAIL(at, "%s", rp->zerr);
        } else {
            uint64_t count;
            if (get_varint(c, &count) != 0 || count == 0 || count > UINT32_MAX ||
                count > c->end - c->off)
                FAIL(at, "bad window log length");
            if (pass == 1 && count > rp->ts_cap) {
                free(rp->ts);
                rp->ts_cap = (size_t)count;
                rp->ts = xmalloc(rp->ts_cap * sizeof(*rp->ts));
            }
            int64_t t = 0;
            for (uint64_t i = 0; i < count; i++) {
                if (i == 0) {
                    if (get_u64(c, &v) != 0)
                        FAIL(at, "truncated window log");
                    t = (int64_t)v;
                } else {
                    if (get_varint(c, &v) != 0 || v > (uint64_t)INT64_MAX - (uint64_t)t)
                        FAIL(at, "bad window log timestamp");
                    t += (int64_t)v;
                }
                if (pass == 1)
                    rp->ts[i] = t;
            }
            r.ts = rp->ts;
            r.nts = (uint32_t)count;
            if (pass == 0)
                rp->info->timestamps += count;
        }
        rp->n++;
        if (pass == 0) {
            rp->info->by_type[type]++;
        } else {
            int rejected = rp->cb(rp->ud, &r) != 0;
            zs_free(rp->zs);
            rp->zs = NULL;
            hv_free((struct hashval *)r.hv); /* the keyspace keeps a copy */
            lv_free((struct listval *)r.lv);
            if (rejected)
                FAIL(at, "record rejected (key %.*s)", (int)(r.klen > 64 ? 64 : r.klen), r.key);
        }
    }
    return 0;
fail:
    zs_free(rp->zs);
    rp->zs = NULL;
    return -1;
}

int snap_read(const char *path, snap_record_fn cb, void *ud, struct snap_info *info, char *err,
              size_t errlen)
{
    struct snap_info local;
    if (info == NULL)
        info = &local;
    memset(info, 0, sizeof(*info));
    const unsigned char *map = NULL;
    size_t size = 0;
    struct range_pass rp = {0};

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    size = (size_t)st.st_size;
    info->bytes = size;
    if (size < HEADER_SIZE + TRAILER_SIZE) {
        close(fd);
        snprintf(err, errlen, "%s: offset 0: file too short to be a snapshot (%zu bytes)", path,
                 size);
        return -1;
    }
    /* PROT_READ + MAP_PRIVATE: the file cannot be changed through this mapping. MAP_POPULATE
     * reads it in one go instead of one page fault per 4 KiB (it is read whole anyway). */
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return -1;
    }
    struct cursor c = {map, 0, size};
    if (memcmp(map, SNAP_MAGIC, 8) != 0)
        FAIL(0, "bad magic: not an rlimitd snapshot");
    c.off = 8;
    uint64_t word;
    get_u64(&c, &word);
    info->version = (uint32_t)word;
    if (info->version < SNAP_VERSION_MIN || info->version > SNAP_VERSION)
        FAIL(8, "unsupported format version %u (this rlimitd reads versions %u to %u)",
             info->version, SNAP_VERSION_MIN, SNAP_VERSION);
    if ((word >> 32) != 0)
        FAIL(12, "unknown flags 0x%x", (unsigned)(word >> 32));
    get_u64(&c, &word);
    info->created_ns = (int64_t)word;
    c.off = HEADER_SIZE;

    c.end = size - 8;
    uint64_t want = XXH3_64bits(map, size - 8);
    struct cursor tail = {map, size - 8, size};
    uint64_t have;
    get_u64(&tail, &have);
    if (want != have)
        FAIL(size - 8, "checksum mismatch: the file is corrupt or truncated");

    /* First pass: structure and counts; second pass: hand the records over. */
    rp.path = path;
    rp.version = info->version;
    rp.map = map;
    rp.cb = cb;
    rp.ud = ud;
    rp.info = info;
    rp.err = err;
    rp.errlen = errlen;
    for (rp.pass = 0; rp.pass < 2; rp.pass++) {
        if (rp.pass == 1 && cb == NULL)
            break;
        rp.n = 0;
        c.off = HEADER_SIZE;
        c.end = size - 8;
        if (parse_range(&rp, &c) != 0)
            goto fail;
        c.off++; /* the end marker */
        uint64_t count;
        if (get_u64(&c, &count) != 0)
            FAIL(c.off, "truncated trailer");
        if (c.off != size - 8)
            FAIL(c.off, "unexpected bytes after the trailer");
        if (count != rp.n)
            FAIL(c.off - 8, "record count %llu does not match the %llu records found",
                 (unsigned long long)count, (unsigned long long)rp.n);
        info->records = rp.n;
    }
    free(rp.ts);
    free(rp.ls);
    munmap((void *)map, size);
    return 0;

fail:
    free(rp.ts);
    free(rp.ls);
    munmap((void *)map, size);
    return -1;
}
