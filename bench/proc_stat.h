/* proc_stat.h - a server process as the benches measure it, from /proc (proc_stat.c). */
#ifndef BENCH_PROC_STAT_H
#define BENCH_PROC_STAT_H

/* The process's utime + stime in seconds, all its threads (fields 14 and 15 of /proc/PID/stat).
 * Exits with a message naming the file when it cannot be read or parsed. */
double proc_cpu_s(long pid);
/* A field of /proc/PID/status in kB (VmRSS, VmHWM), -1 when absent. */
long proc_status_kb(long pid, const char *field);

#endif
