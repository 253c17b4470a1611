# lib.sh - shared by the persistence tests (sourced, not run). The real rlimitd ($RLIMITD_BIN) on
# free loopback ports above 20000, each daemon in its own directory under one temporary root,
# everything killed, unmounted and removed on exit. Every wait is bounded.
#
# Results: ok / bad / skip print one line each; finish prints "N passed, N failed" and exits
# non-zero on any failure.

set -euo pipefail

: "${RLIMITD_BIN:?set RLIMITD_BIN to the rlimitd binary (meson test does)}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this file
SNAPFILE=(python3 "$HERE/snapfile.py")
ROOT=$(mktemp -d /tmp/rlimitd-persist.XXXXXX)
PASS=0
FAIL=0
SKIP=0
PIDS=()   # every process started, killed on exit
MOUNTS=() # every mount made, unmounted on exit

cleanup() {
    local pid m i
    set +e
    for pid in "${PIDS[@]}"; do
        kill -9 "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        m=${MOUNTS[i]}
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    if [[ -n "${KEEP_TMP:-}" ]]; then
        echo "# kept $ROOT"
    else
        rm -rf "$ROOT"
    fi
}
trap cleanup EXIT
trap 'echo "# interrupted"; exit 130' INT TERM

ok() {
    PASS=$((PASS + 1))
    echo "ok - $*"
}

bad() {
    FAIL=$((FAIL + 1))
    echo "not ok - $*"
}

skip() {
    SKIP=$((SKIP + 1))
    echo "skip - $*"
}

note() {
    echo "# $*"
}

finish() {
    echo
    if ((SKIP > 0)); then
        echo "# $SKIP skipped (reasons above)"
    fi
    echo "$PASS passed, $FAIL failed"
    if ((FAIL > 0)); then
        exit 1
    fi
    exit 0
}

expect_eq() { # got want what
    if [[ "$1" == "$2" ]]; then
        ok "$3"
    else
        bad "$3: got '$1', want '$2'"
    fi
}

expect_match() { # got extended-regex what
    if [[ "$1" =~ $2 ]]; then
        ok "$3"
    else
        bad "$3: '$1' does not match /$2/"
    fi
}

expect_true() { # what command...
    local what=$1
    shift
    if "$@"; then
        ok "$what"
    else
        bad "$what"
    fi
}

sleep_ms() {
    sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# CLOCK_REALTIME in ns: the clock the daemon reads once per command.
now_ns() {
    date +%s%N
}

# throttle KEY MAX_BURST COUNT PERIOD QUANTITY: CL.THROTTLE on the current daemon; prints the reply
# on one line and logs the call with the time measured around it to $MODEL_LOG, for model_check.
MODEL_LOG=$ROOT/model.log
throttle() {
    local before after r
    before=$(now_ns)
    r=$(rcli CL.THROTTLE "$@" | flat)
    after=$(now_ns)
    echo "throttle $* $before $after $r" >>"$MODEL_LOG"
    echo "$r"
}

# throttle_n N KEY MAX_BURST COUNT PERIOD QUANTITY: N such calls through one redis-cli (quick, so
# the exact values are usually due); prints the replies one a line and logs each with the bounds
# of the whole batch.
throttle_n() {
    local n=$1 before after i out
    shift
    before=$(now_ns)
    out=$(for ((i = 0; i < n; i++)); do echo "CL.THROTTLE $*"; done |
        timeout 120 redis-cli -h 127.0.0.1 -p "$PORT" | paste -d ' ' - - - - -)
    after=$(now_ns)
    while read -r line; do
        echo "throttle $* $before $after $line" >>"$MODEL_LOG"
    done <<<"$out"
    echo "$out"
}

# model_check WHAT: every CL.THROTTLE reply logged so far fits the GCRA model for some server time
# within the bounds measured around its call (tests/cases/limit_model.h); a lost or corrupted
# state after a restart is a reply no such time explains.
model_check() {
    local out
    if out=$("${LIMIT_CHECK:?set LIMIT_CHECK to the limit_check binary (meson test does)}" \
        <"$MODEL_LOG" 2>&1); then
        ok "$1: the replies fit the GCRA model"
    else
        bad "$1: $out"
    fi
}

# A loopback port above 20000 that nothing listens on or is bound to right now.
free_port() {
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20001 + RANDOM % 12000))
        if python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' \
            "$p" 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo "free_port: no free port found" >&2
    return 1
}

# 0 while the process exists and is not a zombie.
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ -n "$st" && "$st" != Z* ]]
}

# Waits up to $2 seconds for process $1 (a child of this shell) to end and sets WAIT_RC to its
# exit code, or to "running" if it is still running. Not in $(...): only this shell can reap.
wait_exit() {
    local pid=$1 deadline=$(($(date +%s) + $2))
    WAIT_RC=0
    while alive "$pid"; do
        if (($(date +%s) >= deadline)); then
            WAIT_RC=running
            return 0
        fi
        sleep 0.05
    done
    wait "$pid" || WAIT_RC=$?
} 2>/dev/null # bash's "Killed" notice for the job comes out here

# redis-cli on the current daemon, bounded.
rcli() {
    timeout 120 redis-cli -h 127.0.0.1 -p "$PORT" "$@"
}

# Replies on one line, space-separated.
flat() {
    tr '\n' ' ' | sed 's/ $//'
}

# INFO persistence field $1.
info_field() {
    rcli INFO persistence | tr -d '\r' | sed -n "s/^$1://p"
}

# Waits (up to 30 s) until no background save runs; 1 if one still does.
wait_bgsave() {
    local i
    for ((i = 0; i < 600; i++)); do
        [[ "$(info_field rdb_bgsave_in_progress)" == 0 ]] && return 0
        sleep 0.05
    done
    return 1
}

# start_daemon NAME DIR [rlimitd args...]: starts rlimitd on a free port with --dir DIR (tests
# that check SAVE/BGSAVE replies pass --save-interval 0, so no periodic save interferes), logging
# to $ROOT/NAME.log (appended). Sets PORT, PID, LOG. Returns 0 once it answers PING, 1 if it
# exited (its exit code in START_RC) or did not answer within START_TIMEOUT seconds (default 60).
start_daemon() {
    local name=$1 dir=$2 try deadline
    shift 2
    LOG=$ROOT/$name.log
    START_RC=
    for ((try = 0; try < 3; try++)); do
        PORT=$(free_port)
        echo "---- start: --port $PORT --dir $dir $*" >>"$LOG"
        "$RLIMITD_BIN" --port "$PORT" --bind 127.0.0.1 --dir "$dir" "$@" >>"$LOG" 2>&1 &
        PID=$!
        PIDS+=("$PID")
        deadline=$(($(date +%s) + ${START_TIMEOUT:-60}))
        while (($(date +%s) < deadline)); do
            if ! alive "$PID"; then
                wait_exit "$PID" 1
                START_RC=$WAIT_RC
                break
            fi
            if [[ "$(timeout 5 redis-cli -h 127.0.0.1 -p "$PORT" PING 2>/dev/null)" == PONG ]]; then
                return 0
            fi
            sleep 0.05
        done
        if [[ -z "$START_RC" ]]; then
            echo "start_daemon: $name did not answer within ${START_TIMEOUT:-60}s" >&2
            kill -9 "$PID" 2>/dev/null || true
            wait_exit "$PID" 10
            return 1
        fi
        # Lost a race for the port: try another one.
        if tail -n 5 "$LOG" | grep -q 'in use'; then
            START_RC=
            continue
        fi
        return 1
    done
    return 1
}

# kill -9 the current daemon and reap it.
crash_daemon() {
    kill -9 "$PID" 2>/dev/null || true
    wait_exit "$PID" 30
}

# The log lines written since the last "---- start" marker.
last_start_log() {
    awk '/^---- start/ { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$LOG"
}

# Mounts a tmpfs (options $2) on $1; returns 1 (after a note) when not root or mount fails.
try_mount_tmpfs() {
    if [[ "$(id -u)" -ne 0 ]]; then
        note "not root: cannot mount a tmpfs"
        return 1
    fi
    mkdir -p "$1"
    if ! mount -t tmpfs -o "$2" tmpfs "$1" 2>"$ROOT/mount.err"; then
        note "mount -t tmpfs -o $2 failed: $(cat "$ROOT/mount.err")"
        return 1
    fi
    MOUNTS+=("$1")
    return 0
}
