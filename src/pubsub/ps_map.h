/* ps_map.h - a hash map from byte strings to pointers that remembers insertion order: the
 * subscription tables of src/pubsub (a connection's names, a thread's subscribers by name).
 * SipHash-1-3 under a per-process random key, so names chosen by clients cannot aim at one
 * probe run. Entries live in an array in insertion order (removed ones leave a hole that a
 * later rebuild closes); an index of open-addressing slots points into it. */
#ifndef RLIMITD_PS_MAP_H
#define RLIMITD_PS_MAP_H

#include <stddef.h>
#include <stdint.h>

struct ps_ent {
    char *key; /* malloc'd copy, NUL-terminated; NULL: removed */
    size_t len;
    uint64_t hash;
    void *val;
};

struct ps_map {
    struct ps_ent *ents;
    uint32_t nents; /* used entries, holes included */
    uint32_t cap;   /* of ents */
    uint32_t count; /* live entries */
    uint32_t head;  /* no live entry before this one */
    uint32_t *idx;  /* slots: 0 empty, PS_TOMB removed, else entry index + 1 */
    uint32_t mask;  /* slots - 1 (0 while idx is NULL) */
};

void ps_map_seed(void); /* once per process, before the first map is used */
void ps_map_init(struct ps_map *m);
/* Frees the keys and the map's arrays (not the values). */
void ps_map_free(struct ps_map *m);
/* The entry of key, or NULL. */
struct ps_ent *ps_map_get(const struct ps_map *m, const char *key, size_t len);
/* Adds key (which must not be in m) with val; returns its entry (valid until the next add or
 * remove). */
struct ps_ent *ps_map_add(struct ps_map *m, const char *key, size_t len, void *val);
/* Removes key; returns its value through *val. Returns 1 if it was there. */
int ps_map_del(struct ps_map *m, const char *key, size_t len, void **val);
/* The oldest live entry, or NULL. */
struct ps_ent *ps_map_first(struct ps_map *m);

#endif
