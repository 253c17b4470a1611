#!/usr/bin/env bash
# test_save_priority.sh - how a background save lowers its priority (persist.c bg_main): at
# SCHED_IDLE only where it may come back from it. Leaving SCHED_IDLE needs RLIMIT_NICE to allow
# nice 19 or CAP_SYS_NICE; an unprivileged daemon with the default limit (0) that entered it
# could starve for good on busy CPUs, so it must save at nice 19 instead, and the save must end.
#
#   A. as the test runs: SCHED_IDLE (no "not SCHED_IDLE" line) if it has CAP_SYS_NICE or
#      RLIMIT_NICE >= 1, as root usually has, else nice 19;
#   B. as nobody with RLIMIT_NICE 0: "at nice 19, not SCHED_IDLE" is logged, the save succeeds;
#   C. as nobody with RLIMIT_NICE 1 (systemd's LimitNICE=+19): SCHED_IDLE again.
# B and C need root (to switch user) and skip, saying why, without it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NOT_IDLE="Background save at nice 19, not SCHED_IDLE"

# bgsave_case NAME: 1000 keys, a BGSAVE, which must succeed; prints nothing.
bgsave_case() {
    local name=$1 i
    for ((i = 0; i < 1000; i++)); do echo "CL.THROTTLE prio:$i 15 30 60"; done |
        redis-cli -h 127.0.0.1 -p "$PORT" >/dev/null
    expect_eq "$(rcli BGSAVE)" "Background saving started" "$name: BGSAVE starts"
    expect_true "$name: the background save ends" wait_bgsave
    expect_eq "$(info_field rdb_last_bgsave_status)" "ok" "$name: rdb_last_bgsave_status:ok"
}

mkdir -p "$ROOT/a"
if start_daemon a "$ROOT/a" --loglevel verbose --save-interval 0; then
    bgsave_case "A (as run)"
    # What this process may do, the daemon may too: CAP_SYS_NICE (bit 23) or RLIMIT_NICE >= 1.
    cap=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
    nice_limit=$(ulimit -e)
    if (((0x${cap:-0} >> 23) & 1)) || [[ $nice_limit == unlimited ]] || ((nice_limit >= 1)); then
        expect_eq "$(last_start_log | grep -c "$NOT_IDLE")" "0" \
            "A (as run, CAP_SYS_NICE or RLIMIT_NICE >= 1): the save may use SCHED_IDLE"
    else
        expect_eq "$(last_start_log | grep -c "$NOT_IDLE")" "1" \
            "A (as run, neither CAP_SYS_NICE nor RLIMIT_NICE >= 1): saves at nice 19"
    fi
    crash_daemon
else
    bad "A: the daemon starts"
fi

# The daemon as nobody, with RLIMIT_NICE $1: a wrapper that keeps the pid (prlimit and setpriv
# exec), so that lib.sh's start_daemon can run it.
as_nobody() {
    local limit=$1 wrapper=$ROOT/as-nobody-$1
    printf '#!/bin/sh\nexec prlimit --nice=%s setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all "%s" "$@"\n' \
        "$limit" "$RLIMITD_BIN" >"$wrapper"
    chmod 755 "$wrapper"
    echo "$wrapper"
}

if [[ $(id -u) != 0 ]]; then
    skip "B, C: switching to nobody needs root"
elif ! id nobody >/dev/null 2>&1 || ! getent group nogroup >/dev/null ||
    ! command -v setpriv >/dev/null || ! command -v prlimit >/dev/null; then
    skip "B, C: needs the user nobody, the group nogroup, setpriv and prlimit"
elif ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$RLIMITD_BIN"; then
    skip "B, C: nobody cannot run $RLIMITD_BIN (a parent directory is not searchable)"
else
    chmod 711 "$ROOT" # nobody must reach its --dir inside
    for c in "B 0 1" "C 1 0"; do
        read -r name limit want_idle <<<"$c"
        if ! prlimit --nice="$limit" true 2>/dev/null; then
            # Raising the hard limit needs CAP_SYS_RESOURCE, which a container's root may lack.
            skip "$name: cannot set RLIMIT_NICE $limit here ($(prlimit --nice="$limit" true 2>&1))"
            continue
        fi
        mkdir -p "$ROOT/$name"
        chmod 777 "$ROOT/$name"
        REAL_BIN=$RLIMITD_BIN
        RLIMITD_BIN=$(as_nobody "$limit")
        if start_daemon "$name" "$ROOT/$name" --loglevel verbose --save-interval 0; then
            RLIMITD_BIN=$REAL_BIN
            bgsave_case "$name (nobody, RLIMIT_NICE $limit)"
            if [[ $want_idle == 1 ]]; then
                expect_eq "$(last_start_log | grep -c "$NOT_IDLE")" "1" \
                    "$name (nobody, RLIMIT_NICE $limit): saves at nice 19, not SCHED_IDLE"
            else
                expect_eq "$(last_start_log | grep -c "$NOT_IDLE")" "0" \
                    "$name (nobody, RLIMIT_NICE $limit): the save may use SCHED_IDLE"
            fi
            crash_daemon
        else
            RLIMITD_BIN=$REAL_BIN
            bad "$name: the daemon starts as nobody: $(tail -n 3 "$LOG")"
        fi
    done
fi

finish
