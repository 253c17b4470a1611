/* cmd_table.c - the command table: the areas' rows joined once (CMD_AREAS, cmd_internal.h)
 * and the lookup of a command by name, for the dispatcher, COMMAND and INFO. */
#include "cmd_table.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The areas' tables joined, in CMD_AREAS order: an index into it is the command's number for
 * INFO commandstats (stats.h). Built once, before the first lookup. */
struct cmd_def cmd_defs[STATS_MAX_CMDS];
static int ncommands;

static void join_areas(void)
{
#define CMD_JOIN_AREA(a)                                                                          \
    for (int i = 0; i < cmd_##a##_count; i++) {                                                   \
        if (ncommands == STATS_MAX_CMDS) {                                                        \
            fprintf(stderr, "rlimitd: more commands than STATS_MAX_CMDS (%d)\n", STATS_MAX_CMDS); \
            abort();                                                                              \
        }                                                                                         \
        cmd_defs[ncommands++] = cmd_##a##_table[i];                                               \
    }
    CMD_AREAS(CMD_JOIN_AREA)
#undef CMD_JOIN_AREA
}

/* Lookup: an open-addressing table over a case-folded hash, built once, answers in one or two
 * probes. A slot keeps its name lower-cased in 8-byte words and, per word, the bits that make an
 * ASCII letter lower case (0x20 on letters, 0 elsewhere): an argument word w names the command
 * exactly when (w | fold) equals the name's word, so names are compared a word at a time. */
#define LOOKUP_SLOTS 512
#define NAME_WORDS 4 /* command names are at most 32 bytes */

struct lookup_slot {
    int idx; /* -1: empty */
    uint32_t len;
    uint64_t w[NAME_WORDS];
    uint64_t fold[NAME_WORDS];
};

static struct lookup_slot lookup_slots[LOOKUP_SLOTS];
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;

/* The len (<= 8 * NAME_WORDS) bytes of s in (len + 7) / 8 words: whole words as loaded, the
 * last rem bytes in the low bytes of the last word (little-endian order), zero above. Names,
 * their fold masks and arguments all go through here, so their bytes line up. Loaded, not copied
 * through a buffer: byte stores read back as words stall the load. */
static void name_words(const char *s, size_t len, uint64_t *w)
{
    size_t full = len / 8, rem = len % 8;
    for (size_t k = 0; k < full; k++)
        memcpy(&w[k], s + 8 * k, 8);
    if (rem == 0)
        return;
    uint64_t t = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len >= 8) {
        memcpy(&t, s + len - 8, 8); /* overlaps the word before: shift it out */
        w[full] = t >> (8 * (8 - rem));
        return;
    }
#endif
    for (size_t i = rem; i-- > 0;)
        t = (t << 8) | (unsigned char)s[full * 8 + i];
    w[full] = t;
}

/* The same for "ZADD" and "zadd": every byte has 0x20 set before mixing. */
static uint32_t name_hash(const uint64_t *w, size_t len)
{
    uint64_t h = len;
    for (size_t k = 0; k < (len + 7) / 8; k++)
        h = (h ^ (w[k] | 0x2020202020202020ull)) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h ^ (h >> 29));
}

static void build_lookup(void)
{
    join_areas();
    for (int i = 0; i < LOOKUP_SLOTS; i++)
        lookup_slots[i].idx = -1;
    for (int i = 0; i < ncommands; i++) {
        const char *name = cmd_defs[i].name;
        size_t len = strlen(name);
        char low[8 * NAME_WORDS] = {0}, fold[8 * NAME_WORDS] = {0};
        if (len > sizeof(low)) {
            fprintf(stderr, "rlimitd: command name '%s' longer than %zu bytes\n", name,
                    sizeof(low));
            abort();
        }
        for (size_t j = 0; j < len; j++) {
            unsigned char c = (unsigned char)name[j];
            int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            low[j] = (char)(letter ? c | 0x20 : c);
            fold[j] = (char)(letter ? 0x20 : 0);
        }
        struct lookup_slot e = {.idx = i, .len = (uint32_t)len};
        name_words(low, len, e.w);
        name_words(fold, len, e.fold);
        uint32_t h = name_hash(e.w, len);
        while (lookup_slots[h % LOOKUP_SLOTS].idx != -1)
            h++;
        lookup_slots[h % LOOKUP_SLOTS] = e;
    }
}

int cmd_lookup(const char *name, size_t len)
{
    pthread_once(&lookup_once, build_lookup);
    if (len > 8 * NAME_WORDS)
        return -1;
    uint64_t w[NAME_WORDS];
    name_words(name, len, w);
    size_t words = (len + 7) / 8;
    for (uint32_t h = name_hash(w, len);; h++) {
        const struct lookup_slot *e = &lookup_slots[h % LOOKUP_SLOTS];
        if (e->idx < 0)
            return -1;
        if (e->len != len)
            continue;
        uint64_t diff = 0;
        for (size_t k = 0; k < words; k++)
            diff |= (w[k] | e->fold[k]) ^ e->w[k];
        if (diff == 0)
            return e->idx;
    }
}

const struct cmd_def *cmd_table(int *n)
{
    pthread_once(&lookup_once, build_lookup);
    *n = ncommands;
    return cmd_defs;
}

int cmd_count(void)
{
    pthread_once(&lookup_once, build_lookup);
    return ncommands;
}

const char *cmd_name(int idx)
{
    pthread_once(&lookup_once, build_lookup);
    return idx >= 0 && idx < ncommands ? cmd_defs[idx].name : NULL;
}
