/* script_cache.c - the scripts' SHA1, their shebang line, and the cache of sources that every
 * connection and thread shares (script.h).
 *
 * The cache maps a SHA1 to the body the client sent. It is guarded by one mutex: it is touched
 * only by SCRIPT LOAD, EVAL of a new body, SCRIPT EXISTS/FLUSH and a thread's first EVALSHA of a
 * script; a warm EVALSHA finds its compiled function in the thread's own Lua state without it. */
#include "rlimitd/script.h"
#include "rlimitd/alloc.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

/* ---- SHA1 (FIPS 180-4) ---- */

struct sha1 {
    uint32_t h[5];
    uint64_t bytes;
    unsigned char buf[64];
    size_t fill;
};

static uint32_t rol(uint32_t v, int n)
{
    return (v << n) | (v >> (32 - n));
}

static void sha1_block(struct sha1 *c, const unsigned char *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = c->h[0], b = c->h[1], d = c->h[3], e = c->h[4], cc = c->h[2];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & cc) | (~b & d);
            k = 0x5A827999u;
        } else if (i < 40) {
            f = b ^ cc ^ d;
            k = 0x6ED9EBA1u;
        } else if (i < 60) {
            f = (b & cc) | (b & d) | (cc & d);
            k = 0x8F1BBCDCu;
        } else {
            f = b ^ cc ^ d;
            k = 0xCA62C1D6u;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = cc;
        cc = rol(b, 30);
        b = a;
        a = t;
    }
    c->h[0] += a;
    c->h[1] += b;
    c->h[2] += cc;
    c->h[3] += d;
    c->h[4] += e;
}

static void sha1_update(struct sha1 *c, const unsigned char *p, size_t n)
{
    c->bytes += n;
    while (n > 0) {
        size_t take = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->buf + c->fill, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill == 64) {
            sha1_block(c, c->buf);
            c->fill = 0;
        }
    }
}

void script_sha1hex(const void *p, size_t n, char out[41])
{
    struct sha1 c = {{0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u}, 0, {0}, 0};
    sha1_update(&c, p, n);
    uint64_t bits = c.bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = (c.fill < 56 ? 56 : 120) - c.fill;
    for (int i = 0; i < 8; i++)
        pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_update(&c, pad, padlen + 8);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        unsigned char byte = (unsigned char)(c.h[i / 4] >> (24 - 8 * (i % 4)));
        out[2 * i] = hex[byte >> 4];
        out[2 * i + 1] = hex[byte & 15];
    }
    out[40] = '\0';
}

/* ---- the cache: chained hash table keyed by the SHA1's first 64 bits ---- */

struct entry {
    struct entry *next;
    char sha[41];
    size_t len;
    char body[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry **buckets;
static size_t nbuckets; /* power of two, or 0 */
static uint64_t count, bytes;
static _Atomic uint64_t generation;
/* bytes plus the bucket array, republished under the lock after each change: every EVAL reads
 * it (maxmemory counts the cache), and must not take the lock other threads' EVALs take. */
static _Atomic uint64_t bytes_pub;

static void publish_bytes_locked(void)
{
    atomic_store_explicit(&bytes_pub, bytes + nbuckets * sizeof(*buckets), memory_order_relaxed);
}

static int sha_norm(const char *sha, size_t shalen, char out[41])
{
    if (shalen != 40)
        return -1;
    for (size_t i = 0; i < 40; i++) {
        out[i] = (char)tolower((unsigned char)sha[i]);
        if (!isxdigit((unsigned char)out[i]))
            return -1;
    }
    out[40] = '\0';
    return 0;
}

static size_t bucket_of(const char *sha, size_t n)
{
    uint64_t h = 0;
    for (int i = 0; i < 16; i++)
        h = h << 4 | (uint64_t)(sha[i] <= '9' ? sha[i] - '0' : sha[i] - 'a' + 10);
    return (size_t)h & (n - 1);
}

static struct entry *find(const char *sha)
{
    if (nbuckets == 0)
        return NULL;
    for (struct entry *e = buckets[bucket_of(sha, nbuckets)]; e != NULL; e = e->next)
        if (memcmp(e->sha, sha, 40) == 0)
            return e;
    return NULL;
}

static void grow(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 64;
    struct entry **b = xcalloc(n, sizeof(*b));
    for (size_t i = 0; i < nbuckets; i++) {
        struct entry *e = buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            size_t j = bucket_of(e->sha, n);
            e->next = b[j];
            b[j] = e;
            e = next;
        }
    }
    free(buckets);
    buckets = b;
    nbuckets = n;
}

void script_cache_put(const char *body, size_t len, const char sha[41])
{
    pthread_mutex_lock(&lock);
    if (find(sha) == NULL) {
        if (count >= nbuckets)
            grow();
        struct entry *e = xmalloc(sizeof(*e) + len + 1);
        memcpy(e->sha, sha, 41);
        e->len = len;
        memcpy(e->body, body, len);
        e->body[len] = '\0';
        size_t j = bucket_of(sha, nbuckets);
        e->next = buckets[j];
        buckets[j] = e;
        count++;
        bytes += sizeof(*e) + len + 1;
        publish_bytes_locked();
    }
    pthread_mutex_unlock(&lock);
}

char *script_cache_get(const char *sha, size_t shalen, size_t *len)
{
    char key[41];
    if (sha_norm(sha, shalen, key) != 0)
        return NULL;
    char *copy = NULL;
    pthread_mutex_lock(&lock);
    struct entry *e = find(key);
    if (e != NULL) {
        copy = xmalloc(e->len + 1);
        memcpy(copy, e->body, e->len + 1);
        *len = e->len;
    }
    pthread_mutex_unlock(&lock);
    return copy;
}

int script_cache_exists(const char *sha, size_t shalen)
{
    char key[41];
    if (sha_norm(sha, shalen, key) != 0)
        return 0;
    pthread_mutex_lock(&lock);
    int found = find(key) != NULL;
    pthread_mutex_unlock(&lock);
    return found;
}

static void free_all_locked(void)
{
    for (size_t i = 0; i < nbuckets; i++) {
        struct entry *e = buckets[i];
        while (e != NULL) {
            struct entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(buckets);
    buckets = NULL;
    nbuckets = 0;
    count = bytes = 0;
    publish_bytes_locked();
}

void script_cache_flush(void)
{
    pthread_mutex_lock(&lock);
    free_all_locked();
    atomic_fetch_add(&generation, 1);
    pthread_mutex_unlock(&lock);
}

void script_cache_free(void)
{
    pthread_mutex_lock(&lock);
    free_all_locked();
    pthread_mutex_unlock(&lock);
}

uint64_t script_cache_count(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = count;
    pthread_mutex_unlock(&lock);
    return n;
}

uint64_t script_cache_bytes(void)
{
    return atomic_load_explicit(&bytes_pub, memory_order_relaxed);
}

uint64_t script_cache_generation(void)
{
    return atomic_load(&generation);
}

/* ---- shebang ---- */

static const struct {
    const char *name;
    unsigned flag;
} shebang_flags[] = {
    {"no-writes", SCRIPT_FLAG_NO_WRITES},     {"allow-oom", SCRIPT_FLAG_ALLOW_OOM},
    {"allow-stale", SCRIPT_FLAG_ALLOW_STALE}, {"no-cluster", SCRIPT_FLAG_NO_CLUSTER},
    {"allow-cross-slot-keys", SCRIPT_FLAG_CROSS_SLOT},
};

/* Redis's rules: the first line's words are "#!<engine>" then options; the only option is
 * "flags=" with a comma separated list (possibly empty). */
int script_shebang(const char *body, size_t len, unsigned *flags, char *err, size_t errlen)
{
    *flags = 0;
    if (len < 2 || body[0] != '#' || body[1] != '!')
        return 0;
    const char *eol = memchr(body, '\n', len);
    size_t linelen = eol ? (size_t)(eol - body) : len;
    const char *p = body, *end = body + linelen;
    const char *w = p;
    while (p < end && *p != ' ')
        p++;
    if ((size_t)(p - w) != 5 || memcmp(w, "#!lua", 5) != 0) {
        snprintf(err, errlen, "ERR Unexpected engine in script shebang: %.*s", (int)(p - w), w);
        return -1;
    }
    *flags = SCRIPT_FLAG_SHEBANG;
    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        if (p == end)
            break;
        w = p;
        while (p < end && *p != ' ')
            p++;
        size_t wl = (size_t)(p - w);
        if (wl < 6 || memcmp(w, "flags=", 6) != 0) {
            snprintf(err, errlen, "ERR Unknown lua shebang option: %.*s", (int)wl, w);
            return -1;
        }
        const char *f = w + 6;
        while (f < p) {
            const char *c = memchr(f, ',', (size_t)(p - f));
            size_t fl = c ? (size_t)(c - f) : (size_t)(p - f);
            size_t i;
            for (i = 0; i < sizeof(shebang_flags) / sizeof(shebang_flags[0]); i++)
                if (strlen(shebang_flags[i].name) == fl &&
                    memcmp(shebang_flags[i].name, f, fl) == 0)
                    break;
            if (i == sizeof(shebang_flags) / sizeof(shebang_flags[0])) {
                snprintf(err, errlen, "ERR Unexpected flag in script shebang: %.*s", (int)fl, f);
                return -1;
            }
            *flags |= shebang_flags[i].flag;
            f += fl + (c ? 1 : 0);
        }
    }
    return 0;
}
