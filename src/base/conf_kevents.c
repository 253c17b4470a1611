/* conf_kevents.c - notify-keyspace-events' letters to NOTIFY_* classes and back, with Redis
 * 7.0's letters, order and quirks (conf_kevents.h), so CONFIG GET reads back what Redis would. */
#include "conf_kevents.h"


struct letter {
    char c;
    int64_t flag;
};

/* The classes A stands for, in the order CONFIG GET spells them when A is not complete. */
static const struct letter classes[] = {
    {'g', NOTIFY_GENERIC}, {'$', NOTIFY_STRING}, {'l', NOTIFY_LIST},    {'s', NOTIFY_SET},
    {'h', NOTIFY_HASH},    {'z', NOTIFY_ZSET},   {'x', NOTIFY_EXPIRED}, {'e', NOTIFY_EVICTED},
    {'t', NOTIFY_STREAM},  {'d', NOTIFY_MODULE}, {'n', NOTIFY_NEW},
};
/* Spelled after the classes, whatever else is set. */
static const struct letter after[] = {
    {'K', NOTIFY_KEYSPACE},
    {'E', NOTIFY_KEYEVENT},
    {'m', NOTIFY_KEY_MISS},
    {'r', NOTIFY_LIMITER},
};

int64_t conf_kevents_parse(const char *v)
{
    int64_t flags = 0;
    for (; *v != '\0'; v++) {
        int64_t f = 0;
        if (*v == 'A')
            f = NOTIFY_ALL;
        for (size_t i = 0; f == 0 && i < sizeof classes / sizeof classes[0]; i++)
            if (classes[i].c == *v)
                f = classes[i].flag;
        for (size_t i = 0; f == 0 && i < sizeof after / sizeof after[0]; i++)
            if (after[i].c == *v)
                f = after[i].flag;
        if (f == 0)
            return -1;
        flags |= f;
    }
    return flags;
}

void conf_kevents_format(int64_t flags, char *buf, size_t len)
{
    char s[sizeof classes / sizeof classes[0] + sizeof after / sizeof after[0] + 1];
    size_t n = 0;
    if ((flags & NOTIFY_ALL) == NOTIFY_ALL) {
        s[n++] = 'A';
    } else {
        for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
            if (flags & classes[i].flag)
                s[n++] = classes[i].c;
    }
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++)
        if (flags & after[i].flag)
            s[n++] = after[i].c;
    s[n] = '\0';
    if (len > 0) {
        size_t k = n < len - 1 ? n : len - 1;
        for (size_t i = 0; i < k; i++)
            buf[i] = s[i];
        buf[k] = '\0';
    }
}
