/* proc_stat.c - a process's CPU time and memory from /proc (proc_stat.h). */
#include "proc_stat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *open_or_exit(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    return f;
}

double proc_cpu_s(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = open_or_exit(path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields are counted after the ')' that ends the command name, which may hold spaces. */
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2) {
        fprintf(stderr, "cannot parse %s\n", path);
        exit(1);
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long proc_status_kb(long pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = open_or_exit(path);
    long v = -1;
    size_t flen = strlen(field);
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, flen) == 0 && line[flen] == ':')
            v = strtol(line + flen + 1, NULL, 10);
    fclose(f);
    return v;
}
