/* main.c - command line, configuration, keyspace, server_run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "rlimitd/conf.h"
#include "rlimitd/hashval.h"
#include "rlimitd/keyspace.h"
#include "rlimitd/log.h"
#include "rlimitd/notify.h"
#include "rlimitd/persist.h"
#include "rlimitd/server.h"
#include "rlimitd/snap.h"
#include "rlimitd/zset.h"
#include "rlimitd_version.h"

/* 256 shards: a power of two, 16 per thread even at the CONF_MAX_THREADS maximum (DESIGN.md). */
#define SHARD_BITS 8
_Static_assert((1 << SHARD_BITS) >= 16 * CONF_MAX_THREADS, "16 shards per thread at the maximum");

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: rlimitd [-c FILE] [--<directive> <value>...]...\n"
            "       rlimitd -c FILE --test-config\n"
            "       rlimitd --version | --help\n"
            "\n"
            "A rate-limit server speaking the Redis protocol (CL.THROTTLE, ISALLOWED).\n"
            "\n"
            "  -c, --config FILE   read the configuration file (redis.conf syntax)\n"
            "  --test-config       check the configuration and exit\n"
            "  --check-snapshot F  verify the snapshot file F, print its record counts, exit\n"
            "  --<directive> ARGS  override a directive, e.g. --port 7380 --bind 127.0.0.1\n"
            "  -v, --version       print the version\n"
            "  -h, --help          print this help\n"
            "\n"
            "Directives and defaults: docs/CONFIG.md, conf/rlimitd.conf.\n");
}

/* --check-snapshot: verify a file without starting anything. Exit 0 if it is valid. */
static int check_snapshot(const char *path)
{
    struct snap_info info;
    char err[512];
    int rc = snap_read(path, NULL, NULL, &info, err, sizeof(err));
    if (rc == 1) {
        fprintf(stderr, "rlimitd: %s: no such file\n", path);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "rlimitd: %s\n", err);
        return 1;
    }
    printf("%s: valid rlimitd snapshot, format version %u, %llu bytes\n"
           "created: %lld (unix seconds)\n"
           "records: %llu (gcra %llu, counters %llu, strings %llu, window logs %llu with %llu "
           "timestamps, sorted sets %llu with %llu members, hashes %llu, lists %llu, lease "
           "sets %llu with %llu leases)\n",
           path, info.version, (unsigned long long)info.bytes,
           (long long)(info.created_ns / 1000000000), (unsigned long long)info.records,
           (unsigned long long)info.by_type[KS_GCRA], (unsigned long long)info.by_type[KS_INT],
           (unsigned long long)info.by_type[KS_RAW], (unsigned long long)info.by_type[KS_SWLOG],
           (unsigned long long)info.timestamps, (unsigned long long)info.by_type[KS_ZSET],
           (unsigned long long)info.zmembers, (unsigned long long)info.by_type[KS_HASH],
           (unsigned long long)info.by_type[KS_LIST], (unsigned long long)info.by_type[KS_LEASE],
           (unsigned long long)info.leases);
    return 0;
}

static int write_pidfile(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f);
}

int main(int argc, char **argv)
{
    struct conf conf;
    conf_init(&conf);
    const char *config_file = NULL;
    int test_config = 0;
    char err[512];

    /* First pass: the file, so that command-line overrides apply on top of it. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            conf_free(&conf);
            return 0;
        }
        if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--version") == 0) {
            printf("rlimitd %s\n", RLIMITD_VERSION);
            conf_free(&conf);
            return 0;
        }
        if (strcmp(argv[i], "--check-snapshot") == 0) {
            conf_free(&conf);
            if (i + 1 >= argc) {
                fprintf(stderr, "rlimitd: --check-snapshot needs a file name\n");
                return 1;
            }
            return check_snapshot(argv[i + 1]);
        }
        if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rlimitd: %s needs a file name\n", argv[i]);
                conf_free(&conf);
                return 1;
            }
            config_file = argv[++i];
        }
    }
    if (config_file != NULL && conf_load_file(&conf, config_file, err, sizeof(err)) != 0) {
        fprintf(stderr, "rlimitd: %s\n", err);
        conf_free(&conf);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
            i++;
            continue;
        }
        if (strcmp(argv[i], "--test-config") == 0) {
            test_config = 1;
            continue;
        }
        if (strncmp(argv[i], "--", 2) != 0 || argv[i][2] == '\0') {
            fprintf(stderr, "rlimitd: unexpected argument '%s' (see --help)\n", argv[i]);
            conf_free(&conf);
            return 1;
        }
        /* "--name v1 v2 ..." up to the next "--" option. */
        int first = i + 1, n = 0;
        while (first + n < argc && strncmp(argv[first + n], "--", 2) != 0)
            n++;
        if (conf_set(&conf, argv[i] + 2, n, (const char *const *)&argv[first], 0, err,
                     sizeof(err)) != 0) {
            fprintf(stderr, "rlimitd: command line: --%s: %s\n", argv[i] + 2, err);
            conf_free(&conf);
            return 1;
        }
        i += n;
    }
    conf_resolve(&conf);
    if (conf_check(&conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "rlimitd: %s%s%s\n", config_file ? config_file : "",
                config_file ? ": " : "", err);
        conf_free(&conf);
        return 1;
    }
    if (test_config) {
        printf("rlimitd: configuration %s is OK\n", config_file ? config_file : "(defaults)");
        conf_free(&conf);
        return 0;
    }

    log_set_level((enum log_level)conf.loglevel);
    if (conf.logfile != NULL && conf.logfile[0] != '\0' && log_open(conf.logfile) != 0) {
        fprintf(stderr, "rlimitd: cannot open logfile %s: %s\n", conf.logfile, strerror(errno));
        conf_free(&conf);
        return 1;
    }
    log_notice("rlimitd %s starting, pid %ld", RLIMITD_VERSION, (long)getpid());
    if (conf.pidfile != NULL && conf.pidfile[0] != '\0' && write_pidfile(conf.pidfile) != 0)
        log_warning("Could not write pidfile %s: %s", conf.pidfile, strerror(errno));

    uint8_t seed[16];
    if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
        log_warning("getrandom failed: %s", strerror(errno));
        conf_free(&conf);
        return 1;
    }
    struct keyspace *ks = ks_create(SHARD_BITS, seed);
    /* The snapshot's hashes and sorted sets load into the encodings the configuration's bounds
     * give, as Redis's do (the command layer watches the same words once it starts). */
    hv_watch_limits(&conf.hash_max_listpack_entries, &conf.hash_max_listpack_value);
    zs_watch_limits(&conf.zset_max_listpack_entries, &conf.zset_max_listpack_value);
    struct persist *persist = persist_create(ks, &conf);
    /* SNAPSHOT.md: the snapshot is loaded before the port opens; a bad one stops the start. */
    notify_init((int)conf.supervised);
    notify_send("STATUS=Loading the snapshot");
    int rc;
    if (persist_load(persist, err, sizeof(err)) != 0) {
        log_warning("Cannot load the snapshot: %s", err);
        log_warning("The file was left untouched. Move it away (or fix it) to start.");
        rc = 1;
    } else {
        rc = server_run(&conf, config_file, ks, persist);
    }
    persist_destroy(&persist);
    ks_destroy(&ks);
    if (conf.pidfile != NULL && conf.pidfile[0] != '\0')
        unlink(conf.pidfile);
    log_close();
    conf_free(&conf);
    return rc;
}
