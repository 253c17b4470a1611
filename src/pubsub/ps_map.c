/* ps_map.c - insertion-ordered string map (ps_map.h). */
#include "ps_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "rlimitd/alloc.h"
#include "rlimitd/hash.h"

#define PS_TOMB UINT32_MAX

static uint8_t seed[16];

void ps_map_seed(void)
{
    if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
        /* No entropy source: a key that still differs from run to run. */
        uint64_t t = (uint64_t)(uintptr_t)&seed ^ (uint64_t)clock();
        memcpy(seed, &t, sizeof(t));
    }
}

void ps_map_init(struct ps_map *m)
{
    memset(m, 0, sizeof(*m));
}

void ps_map_free(struct ps_map *m)
{
    for (uint32_t i = 0; i < m->nents; i++)
        free(m->ents[i].key);
    free(m->ents);
    free(m->idx);
    ps_map_init(m);
}

static uint64_t hash_of(const char *key, size_t len)
{
    return hash_siphash13(key, len, seed);
}

/* The slot holding key, or the slot an add would take (the first removed one on the way, else
 * the empty one that ends the run); *found says which. */
static uint32_t probe(const struct ps_map *m, const char *key, size_t len, uint64_t h,
                      int *found)
{
    uint32_t i = (uint32_t)h & m->mask, tomb = PS_TOMB;
    for (;;) {
        uint32_t s = m->idx[i];
        if (s == 0) {
            *found = 0;
            return tomb != PS_TOMB ? tomb : i;
        }
        if (s == PS_TOMB) {
            if (tomb == PS_TOMB)
                tomb = i;
        } else {
            const struct ps_ent *e = &m->ents[s - 1];
            if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) {
                *found = 1;
                return i;
            }
        }
        i = (i + 1) & m->mask;
    }
}

/* Closes the holes in ents and rebuilds the index for at least `want` entries, at most half
 * full. */
static void rebuild(struct ps_map *m, uint32_t want)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nents; i++)
        if (m->ents[i].key != NULL)
            m->ents[n++] = m->ents[i];
    m->nents = n;
    m->head = 0;
    uint32_t slots = 8;
    while (slots < 2 * want)
        slots *= 2;
    if (want > m->cap || m->cap > 4 * slots) {
        m->cap = want < 4 ? 4 : want;
        m->ents = xrealloc(m->ents, sizeof(*m->ents) * m->cap);
    }
    free(m->idx);
    m->idx = xcalloc(slots, sizeof(*m->idx));
    m->mask = slots - 1;
    for (uint32_t e = 0; e < n; e++) {
        uint32_t i = (uint32_t)m->ents[e].hash & m->mask;
        while (m->idx[i] != 0)
            i = (i + 1) & m->mask;
        m->idx[i] = e + 1;
    }
}

struct ps_ent *ps_map_get(const struct ps_map *m, const char *key, size_t len)
{
    if (m->count == 0)
        return NULL;
    int found;
    uint32_t i = probe(m, key, len, hash_of(key, len), &found);
    return found ? &m->ents[m->idx[i] - 1] : NULL;
}

struct ps_ent *ps_map_add(struct ps_map *m, const char *key, size_t len, void *val)
{
    /* Room for one more entry, and the index (holes counted) at most 3/4 full. */
    if (m->nents == m->cap || (uint64_t)(m->nents + 1) * 4 > (uint64_t)(m->mask + 1) * 3 ||
        m->idx == NULL) {
        uint32_t want = m->count + 1;
        if (want < m->nents + 1 && m->count * 2 >= m->nents)
            want = m->nents + 1;
        rebuild(m, want + want / 2);
    }
    uint64_t h = hash_of(key, len);
    int found;
    uint32_t i = probe(m, key, len, h, &found);
    struct ps_ent *e = &m->ents[m->nents];
    e->key = xmalloc(len + 1);
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->len = len;
    e->hash = h;
    e->val = val;
    m->idx[i] = ++m->nents;
    m->count++;
    return e;
}

int ps_map_del(struct ps_map *m, const char *key, size_t len, void **val)
{
    if (m->count == 0)
        return 0;
    int found;
    uint32_t i = probe(m, key, len, hash_of(key, len), &found);
    if (!found)
        return 0;
    struct ps_ent *e = &m->ents[m->idx[i] - 1];
    if (val != NULL)
        *val = e->val;
    free(e->key);
    e->key = NULL;
    e->val = NULL;
    m->idx[i] = PS_TOMB;
    m->count--;
    if (m->count == 0) {
        ps_map_free(m);
    } else if (m->nents > 16 && m->count < m->nents / 4) {
        rebuild(m, m->count * 2);
    }
    return 1;
}

struct ps_ent *ps_map_first(struct ps_map *m)
{
    while (m->head < m->nents && m->ents[m->head].key == NULL)
        m->head++;
    return m->head < m->nents ? &m->ents[m->head] : NULL;
}
