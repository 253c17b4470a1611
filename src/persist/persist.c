/* persist.c - the snapshot policy: SAVE, BGSAVE, periodic and final saves, loading, and the
 * INFO persistence fields (persist.h). The file format and its crash safety are snap.c's. */
#include "rlimitd/persist.h"
#include "rlimitd/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rlimitd/clock.h"
#include "rlimitd/log.h"
#include "rlimitd/snap.h"

#define BGSAVE_NICE 19
#define SAVE_SLICE_SLOTS 128 /* slots examined per lock hold by a save */
#define SAVE_RUN_US 250      /* a background save works this long, */
#define SAVE_PAUSE_US 750    /* then sleeps this long, */
#define SAVE_STARVED_NS (250 * CLOCK_NS_PER_MS) /* unless it got under 1/SAVE_STARVED_DIV of */
#define SAVE_STARVED_DIV 20                      /* a CPU over this window: see pace() */
#define SAVE_STARVED_RUN_US 50   /* then, at nice 19, it works at most this long at a time, */
#define SAVE_STARVED_PAUSE_US 50 /* and sleeps this long in between, */
#define SAVE_DEFAULT_BUDGET_S 60 /* unless behind its schedule: see struct pacer */

struct persist {
    struct keyspace *ks;
    struct conf *conf;
    pthread_mutex_t *conf_lock;

    pthread_mutex_t lock; /* guards everything below */
    int bg_running;
    int bg_joinable;
    pthread_t bg_thread;
    uint64_t bg_dirty;            /* dirty count when the running save started */
    int64_t bg_start_ns;
    int64_t last_save_s;          /* LASTSAVE */
    int64_t last_attempt_ns;      /* for save-interval, successful or not */
    uint64_t dirty_at_save;       /* dirty count captured by the last successful save */
    int last_bg_ok;
    int64_t last_bg_secs;
    uint64_t saves;
    pthread_mutex_t save_lock;    /* one save at a time, foreground or background */
};

struct persist *persist_create(struct keyspace *ks, struct conf *conf)
{
    struct persist *p = xcalloc(1, sizeof(*p));
    p->ks = ks;
    p->conf = conf;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->save_lock, NULL);
    p->last_save_s = clock_now_ns() / CLOCK_NS_PER_SEC;
    p->last_attempt_ns = clock_mono_ns();
    p->last_bg_ok = 1;
    p->last_bg_secs = -1;
    return p;
}

void persist_set_lock(struct persist *p, pthread_mutex_t *conf_lock)
{
    p->conf_lock = conf_lock;
}

void persist_wait(struct persist *p)
{
    pthread_mutex_lock(&p->lock);
    int joinable = p->bg_joinable;
    pthread_t t = p->bg_thread;
    p->bg_joinable = 0;
    pthread_mutex_unlock(&p->lock);
    if (joinable)
        pthread_join(t, NULL);
}

void persist_destroy(struct persist **pp)
{
    struct persist *p = *pp;
    if (p == NULL)
        return;
    persist_wait(p);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->save_lock);
    free(p);
    *pp = NULL;
}

/* dir and dbfilename, copied under the config lock (CONFIG SET may change them). */
static void target(struct persist *p, char *dir, size_t dlen, char *file, size_t flen)
{
    if (p->conf_lock != NULL)
        pthread_mutex_lock(p->conf_lock);
    snprintf(dir, dlen, "%s", p->conf->dir);
    snprintf(file, flen, "%s", p->conf->dbfilename);
    if (p->conf_lock != NULL)
        pthread_mutex_unlock(p->conf_lock);
}

/* ---- loading ---- */

/* Loading. Into the empty keyspace of a start (always, in the daemon) the records go through
 * ks_bulk_add, which defers building the tables to ks_bulk_end (ks_dump.c "Bulk loading"):
 * 10M keys load in about 1 s instead of 3.3 (docs/PERFORMANCE.md). */
struct load_state {
    struct keyspace *ks;
    const struct snap_info *info;
    int bulk;
    int reserved;
    int64_t now;
    uint64_t loaded, expired;
};

static int restore_record(void *ud, const struct ks_record *r)
{
    struct load_state *st = ud;
    if (!st->bulk && !st->reserved) {
        ks_reserve(st->ks, st->info->records);
        st->reserved = 1;
    }
    /* Before any thread runs: nobody else can touch a shard, no lock is needed. */
    int rc = st->bulk ? ks_bulk_add(st->ks, r, st->now) : ks_restore(st->ks, r, st->now);
    if (rc < 0)
        return -1;
    if (rc == 0)
        st->expired++;
    else
        st->loaded++;
    return 0;
}

/* A kill -9 during a save leaves dbfilename.tmp-PID behind, and every start has a new PID: left
 * alone they would pile up until the disk is full. Only files of processes that are gone are
 * removed, so a second rlimitd mistakenly sharing the directory keeps its save in progress. */
static void remove_stale_temporaries(const char *dir, const char *file)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char prefix[1100];
    int plen = snprintf(prefix, sizeof(prefix), "%s.tmp-", file);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, (size_t)plen) != 0)
            continue;
        char *end;
        long pid = strtol(de->d_name + plen, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue; /* not a name a save of ours would use */
        /* Our own PID can only be a leftover from before a reboot: nothing of ours is saving yet.
         * Any other live process (kill succeeds, or EPERM for another user's) keeps its file. */
        if (pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            log_notice("Removed %s/%s, left by a save that did not finish", dir, de->d_name);
    }
    closedir(d);
}

int persist_load(struct persist *p, char *err, size_t errlen)
{
    char dir[4096], file[1024], path[5200];
    target(p, dir, sizeof(dir), file, sizeof(file));
    remove_stale_temporaries(dir, file);
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    struct snap_info info;
    struct load_state st = {p->ks, &info, 0, 0, clock_now_ns(), 0, 0};
    st.bulk = ks_bulk_begin(p->ks) == 0;
    int64_t t0 = clock_mono_ns();
    int rc = snap_read(path, restore_record, &st, &info, err, errlen);
    if (st.bulk)
        ks_bulk_end(p->ks); /* also after a failure: the keyspace must be whole to be freed */
    if (rc == 1) {
        log_notice("No snapshot at %s: starting empty", path);
        return 0;
    }
    if (rc != 0)
        return -1;
    double secs = (double)(clock_mono_ns() - t0) / 1e9;
    log_notice("Snapshot %s loaded: %llu keys (%llu expired and skipped) in %.3f seconds", path,
               (unsigned long long)st.loaded, (unsigned long long)st.expired, secs);
    pthread_mutex_lock(&p->lock);
    p->last_save_s = info.created_ns / CLOCK_NS_PER_SEC;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

/* ---- saving ---- */

struct encode_state {
    struct rbuf buf;
};

static void encode_record(void *ud, const struct ks_record *r)
{
    struct encode_state *st = ud;
    snap_encode(&st->buf, r);
}

/* How a background save keeps out of the way of the I/O threads (see bg_main for why). It runs
 * as SCHED_IDLE and sleeps SAVE_PAUSE_US after every SAVE_RUN_US of work. An idle-class thread
 * only runs on a CPU nobody else wants, so when clients keep every CPU busy it would starve and
 * the save might never end; a save whose thread got less than 1/SAVE_STARVED_DIV of a CPU over
 * SAVE_STARVED_NS goes back to SCHED_OTHER at nice 19 for the rest of that save: a share the
 * scheduler guarantees, so the save ends. There it sleeps SAVE_STARVED_PAUSE_US after every
 * SAVE_STARVED_RUN_US: a nice-19 thread that never sleeps is given the CPU for a scheduler slice
 * at a time, milliseconds in which the I/O thread it displaced answers nobody; one that sleeps
 * every 50 us displaces it for at most that long.
 *
 * The pauses make a save on busy CPUs about 3x slower, so they are a courtesy only a save on
 * schedule can afford: one that should end within save-interval (SAVE_DEFAULT_BUDGET_S when
 * periodic saves are off), and has dumped a smaller share of its keys than of that time, goes
 * on without pauses. An operator who asks for a snapshot every second gets one as fast as the
 * CPU share allows; with the default minute, a save takes the gentle path. */
struct pacer {
    int background;
    int starved;
    int behind;
    int64_t run_start;
    int64_t window_wall, window_cpu;
    int64_t start, budget_ns;
    uint64_t total; /* keys when the save began */
};

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * CLOCK_NS_PER_SEC + ts.tv_nsec;
}

/* save_now's background argument: 0 for SAVE and the shutdown save, else how bg_main set up the
 * thread. */
enum { SAVE_BG_IDLE = 1, SAVE_BG_NICE = 2 };

static void pacer_start(struct pacer *pc, int background, int64_t interval_s, uint64_t total)
{
    memset(pc, 0, sizeof(*pc));
    pc->background = background;
    pc->starved = background == SAVE_BG_NICE; /* at nice 19 from the start: paced as if starved */
    pc->run_start = pc->window_wall = pc->start = clock_mono_ns();
    pc->window_cpu = thread_cpu_ns();
    pc->budget_ns = (interval_s > 0 ? interval_s : SAVE_DEFAULT_BUDGET_S) * CLOCK_NS_PER_SEC;
    pc->total = total;
}

/* Whether the share of the budget used exceeds the share of the keys dumped. Once behind, a save
 * stays so: pausing again on a brief catch-up would only make it fall behind again. */
static int behind_schedule(struct pacer *pc, int64_t now, uint64_t done)
{
    if (!pc->behind && pc->total > 0 &&
        (double)(now - pc->start) / (double)pc->budget_ns > (double)done / (double)pc->total) {
        pc->behind = 1;
        log_verbose("Background save behind its %lld s schedule (%llu of %llu keys): going on "
                    "without pauses",
                    (long long)(pc->budget_ns / CLOCK_NS_PER_SEC), (unsigned long long)done,
                    (unsigned long long)pc->total);
    }
    return pc->behind;
}

/* Called between slices with the number of keys dumped so far. */
static void pace(struct pacer *pc, uint64_t done)
{
    if (!pc->background)
        return;
    int64_t now = clock_mono_ns();
    if (!pc->starved && now - pc->window_wall >= SAVE_STARVED_NS) {
        int64_t cpu = thread_cpu_ns();
        if ((cpu - pc->window_cpu) * SAVE_STARVED_DIV < now - pc->window_wall) {
            /* bg_main set nice 19 and checked that RLIMIT_NICE lets the thread back. */
            struct sched_param sp = {0};
            int err = pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
            pc->starved = 1;
            if (err == 0)
                log_verbose("Background save starved of CPU: going on at nice %d", BGSAVE_NICE);
            else
                log_warning("Background save starved of CPU, and could not leave SCHED_IDLE: %s",
                            strerror(err));
        }
        pc->window_wall = now;
        pc->window_cpu = cpu;
    }
    int64_t run_ns = (pc->starved ? SAVE_STARVED_RUN_US : SAVE_RUN_US) * 1000;
    if (now - pc->run_start < run_ns)
        return;
    /* Behind schedule, not even a sched_yield: at nice 19 each yield cost it its turn, and
     * under persistence_crash_loop's load (ASan, save-interval 1) no save finished between
     * any two kills. A SCHED_BATCH I/O thread may then wait for the tick: the operator's
     * save-interval comes first. */
    if (!behind_schedule(pc, now, done))
        usleep(pc->starved ? SAVE_STARVED_PAUSE_US : SAVE_PAUSE_US);
    pc->run_start = clock_mono_ns();
}

/* Writes a snapshot of the keyspace as it is now, shard by shard, each shard in slices of
 * SAVE_SLICE_SLOTS slots per lock hold (ks_dump.c "Sliced dumps"); a background one paced. */
static int save_now(struct persist *p, int background, char *err, size_t errlen)
{
    char dir[4096], file[1024];
    target(p, dir, sizeof(dir), file, sizeof(file));
    int64_t now = clock_now_ns();
    struct snap_writer *w = snap_writer_open(dir, file, now, err, errlen);
    if (w == NULL)
        return -1;
    struct encode_state st;
    rbuf_init(&st.buf);
    unsigned n = ks_nshards(p->ks);
    struct pacer pc;
    pacer_start(&pc, background, __atomic_load_n(&p->conf->save_interval, __ATOMIC_RELAXED),
                ks_key_count(p->ks));
    uint64_t done_before = 0; /* keys dumped from the shards before s */
    const void *peek[SAVE_SLICE_SLOTS];
    for (unsigned s = 0; s < n; s++) {
        st.buf.len = 0;
        uint64_t count = 0;
        ks_lock(p->ks, s);
        ks_dump_begin(p->ks, s);
        ks_unlock(p->ks, s);
        /* A bounded slice per lock hold: a command on this shard waits for one slice (a few
         * microseconds), not for the whole shard (milliseconds at 10M keys). */
        for (int done = 0; !done;) {
            /* The slice's entries are random memory accesses. They are fetched into the cache
             * with the lock released, so the lock is held for the copying only: a thread
             * preempted while holding a shard lock stalls every client of the I/O thread that
             * next needs that shard, for as long as it stays preempted. */
            ks_lock(p->ks, s);
            size_t npeek = ks_dump_peek(p->ks, s, SAVE_SLICE_SLOTS, peek, SAVE_SLICE_SLOTS);
            ks_unlock(p->ks, s);
            for (size_t i = 0; i < npeek; i++)
                __builtin_prefetch(peek[i]);
            ks_lock(p->ks, s);
            done = ks_dump_slice(p->ks, s, now, SAVE_SLICE_SLOTS, encode_record, &st, &count);
            ks_unlock(p->ks, s);
            pace(&pc, done_before + count);
        }
        done_before += count;
        if (snap_writer_write(w, st.buf.p, st.buf.len, count, err, errlen) != 0) {
            rbuf_free(&st.buf);
            snap_writer_abort(w);
            return -1;
        }
    }
    rbuf_free(&st.buf);
    return snap_writer_commit(w, err, errlen);
}

/* Runs one save and records its outcome. */
static int run_save(struct persist *p, uint64_t dirty, int background, char *err, size_t errlen)
{
    int64_t t0 = clock_mono_ns();
    pthread_mutex_lock(&p->save_lock);
    int rc = save_now(p, background, err, errlen);
    pthread_mutex_unlock(&p->save_lock);
    int64_t secs = (clock_mono_ns() - t0 + CLOCK_NS_PER_SEC / 2) / CLOCK_NS_PER_SEC;
    pthread_mutex_lock(&p->lock);
    p->last_attempt_ns = clock_mono_ns();
    if (rc == 0) {
        p->last_save_s = clock_now_ns() / CLOCK_NS_PER_SEC;
        p->dirty_at_save = dirty;
        p->saves++;
    }
    if (background) {
        p->last_bg_ok = rc == 0;
        p->last_bg_secs = secs;
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == 0)
        log_notice("%s saved the snapshot in %lld s", background ? "Background save" : "SAVE",
                   (long long)secs);
    else
        log_warning("%s failed: %s", background ? "Background save" : "SAVE", err);
    return rc;
}

/* Whether this thread, once SCHED_IDLE, may switch back to SCHED_OTHER at nice BGSAVE_NICE: the
 * kernel treats SCHED_IDLE as below nice 19 and allows the switch if RLIMIT_NICE would allow
 * that nice (20 - nice <= limit), or with CAP_SYS_NICE. */
static int can_leave_idle(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NICE, &rl) == 0 &&
        (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)(20 - BGSAVE_NICE)))
        return 1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return 0;
    char line[256];
    unsigned long long eff = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return (eff >> 23) & 1; /* CAP_SYS_NICE */
}

static void *bg_main(void *arg)
{
    struct persist *p = arg;
    char err[512];
    /* The I/O threads come first: p99 during a save stays within 2x of p99 without. Nice 19
     * alone is not enough (a nice-19 thread still gets whole scheduler slices), so two things
     * are combined. SCHED_IDLE: a waking I/O thread preempts an idle-class
     * thread at once, where a nice-19 one may finish its slice first. And a duty cycle: the save
     * walks gigabytes of entries in random order, which costs the I/O threads cache and TLB
     * misses and memory bandwidth even when they get every CPU cycle they want, so it pauses
     * SAVE_PAUSE_US after every SAVE_RUN_US (a save takes about 4x longer). Both per thread on
     * Linux. On CPUs kept busy by clients it falls back to nice 19 (struct pacer).
     *
     * Nice 19 first: raising one's nice is always allowed, and it is what the thread keeps if it
     * leaves SCHED_IDLE. Leaving needs RLIMIT_NICE to allow nice 19 (or CAP_SYS_NICE), which an
     * unprivileged daemon often lacks (the default limit is 0); a thread that entered SCHED_IDLE
     * anyway could starve for good on busy CPUs, so it then stays at nice 19 throughout. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), BGSAVE_NICE) != 0)
        log_verbose("Could not lower the background save's priority: %s", strerror(errno));
    int mode = SAVE_BG_NICE;
    struct sched_param sp = {0};
    if (!can_leave_idle())
        log_verbose("Background save at nice %d, not SCHED_IDLE: RLIMIT_NICE does not allow "
                    "nice %d, so it could not come back if starved",
                    BGSAVE_NICE, BGSAVE_NICE);
    else if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0)
        mode = SAVE_BG_IDLE;
    pthread_mutex_lock(&p->lock);
    uint64_t dirty = p->bg_dirty;
    pthread_mutex_unlock(&p->lock);
    run_save(p, dirty, mode, err, sizeof(err));
    pthread_mutex_lock(&p->lock);
    p->bg_running = 0;
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Starts a background save unless one runs. Returns 0, or -1 with err set. */
static int start_background(struct persist *p, uint64_t dirty, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->lock);
    if (p->bg_running) {
        pthread_mutex_unlock(&p->lock);
        snprintf(err, errlen, "Background save already in progress");
        return -1;
    }
    int joinable = p->bg_joinable;
    pthread_t old = p->bg_thread;
    p->bg_joinable = 0;
    pthread_mutex_unlock(&p->lock);
    if (joinable)
        pthread_join(old, NULL); /* finished: it cleared bg_running */

    pthread_mutex_lock(&p->lock);
    p->bg_running = 1;
    p->bg_dirty = dirty;
    p->bg_start_ns = clock_mono_ns();
    int rc = pthread_create(&p->bg_thread, NULL, bg_main, p);
    if (rc != 0) {
        p->bg_running = 0;
        pthread_mutex_unlock(&p->lock);
        snprintf(err, errlen, "cannot start the background save: %s", strerror(rc));
        return -1;
    }
    p->bg_joinable = 1;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int persist_save(struct persist *p, int background, uint64_t dirty_now, char *err,
                 size_t errlen)
{
    if (background)
        return start_background(p, dirty_now, err, errlen);
    pthread_mutex_lock(&p->lock);
    int busy = p->bg_running;
    pthread_mutex_unlock(&p->lock);
    if (busy) {
        snprintf(err, errlen, "Background save already in progress");
        return -1;
    }
    return run_save(p, dirty_now, 0, err, errlen);
}

void persist_tick(struct persist *p, uint64_t dirty_now)
{
    int64_t interval = __atomic_load_n(&p->conf->save_interval, __ATOMIC_RELAXED);
    if (interval <= 0)
        return;
    pthread_mutex_lock(&p->lock);
    int due = !p->bg_running && dirty_now != p->dirty_at_save &&
              clock_mono_ns() - p->last_attempt_ns >= interval * CLOCK_NS_PER_SEC;
    pthread_mutex_unlock(&p->lock);
    if (due) {
        char err[512];
        if (start_background(p, dirty_now, err, sizeof(err)) != 0)
            log_warning("Periodic save not started: %s", err);
    }
}

void persist_info(struct persist *p, struct rbuf *out, uint64_t dirty_now)
{
    char buf[1024];
    pthread_mutex_lock(&p->lock);
    int64_t current =
        p->bg_running ? (clock_mono_ns() - p->bg_start_ns) / CLOCK_NS_PER_SEC : -1;
    int n = snprintf(buf, sizeof(buf),
                     "rdb_changes_since_last_save:%llu\r\n"
                     "rdb_bgsave_in_progress:%d\r\n"
                     "rdb_last_save_time:%lld\r\n"
                     "rdb_last_bgsave_status:%s\r\n"
                     "rdb_last_bgsave_time_sec:%lld\r\n"
                     "rdb_current_bgsave_time_sec:%lld\r\n"
                     "rdb_saves:%llu\r\n"
                     "aof_enabled:0\r\n"
                     "aof_rewrite_in_progress:0\r\n"
                     "aof_rewrite_scheduled:0\r\n"
                     "aof_last_rewrite_time_sec:-1\r\n"
                     "aof_current_rewrite_time_sec:-1\r\n"
                     "aof_last_bgrewrite_status:ok\r\n"
                     "aof_last_write_status:ok\r\n",
                     (unsigned long long)(dirty_now - p->dirty_at_save), p->bg_running,
                     (long long)p->last_save_s, p->last_bg_ok ? "ok" : "err",
                     (long long)p->last_bg_secs, (long long)current,
                     (unsigned long long)p->saves);
    pthread_mutex_unlock(&p->lock);
    if (n > 0)
        rbuf_append(out, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

int64_t persist_lastsave(struct persist *p)
{
    pthread_mutex_lock(&p->lock);
    int64_t t = p->last_save_s;
    pthread_mutex_unlock(&p->lock);
    return t;
}
