# shellcheck shell=bash disable=SC2034
# lib.sh - shared helpers for the shell compatibility tests (sourced, not run).
#
# start_daemon [--directive value...]   starts rlimitd on a free loopback port > 20000;
#                                       sets PORT, DPID, DDIR; every wait is bounded
# stop_daemon                           SIGTERM, bounded wait, SIGKILL; sets DRC (exit status)
# ok NAME / fail NAME DETAIL / check_eq NAME GOT WANT / check_contains NAME HAYSTACK NEEDLE
# finish                                prints "N passed, N failed" and exits 1 on any failure
#
# A check named in known_failures.txt ("<script name without .sh>:<check name>") is a known
# gap: counted as skipped while it fails, as a failure once it passes (see compat.py).

COMPAT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$COMPAT_DIR/../.." && pwd)"
RLIMITD="${RLIMITD:-$ROOT/build-compat/rlimitd}"
SUITE="$(basename "$0" .sh)"
PASSED=0
FAILED=0
SKIPPED=0
DPIDS=()
# Everything a script writes goes under $WORK (in $TMPDIR, like Python's and node's temporary
# directories), removed on exit: normal, failed, or by a signal (bash runs the EXIT trap then).
WORK="$(mktemp -d "${TMPDIR:-/tmp}/rlimitd-compat.XXXXXX")"

cleanup_all() {
    local p
    for p in "${DPIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
    if declare -F cleanup_extra >/dev/null; then
        cleanup_extra || true
    fi
    # Reap the killed daemons (our children) so none still writes into $WORK while it goes.
    for p in "${DPIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$WORK" 2>/dev/null || true
}
trap cleanup_all EXIT

if [[ ! -x "$RLIMITD" ]]; then
    echo "rlimitd binary not found at $RLIMITD: run tests/compat/run.sh, or set RLIMITD" >&2
    exit 2
fi

is_known() {
    grep -v '^[[:space:]]*#' "$COMPAT_DIR/known_failures.txt" 2>/dev/null |
        grep -Fxq "$SUITE:$1"
}

ok() {
    if is_known "$1"; then
        FAILED=$((FAILED + 1))
        echo "FAIL   $1: passes now, remove it from known_failures.txt"
    else
        PASSED=$((PASSED + 1))
        echo "ok     $1"
    fi
}

fail() {
    if is_known "$1"; then
        SKIPPED=$((SKIPPED + 1))
        echo "known  $1: $2"
    else
        FAILED=$((FAILED + 1))
        echo "FAIL   $1: $2"
    fi
}

check_eq() {
    if [[ "$2" == "$3" ]]; then
        ok "$1"
    else
        fail "$1" "got '$2', want '$3'"
    fi
}

check_contains() {
    if [[ "$2" == *"$3"* ]]; then
        ok "$1"
    else
        fail "$1" "'$3' not found in: $(printf '%s' "$2" | head -c 2000)"
    fi
}

finish() {
    local tail=""
    if ((SKIPPED > 0)); then
        tail=", $SKIPPED skipped"
    fi
    echo "$PASSED passed, $FAILED failed$tail"
    if ((FAILED > 0)); then
        exit 1
    fi
    exit 0
}

# A port above 20000 that nothing listens on (from the kernel's ephemeral range).
free_port() {
    local port
    for _ in $(seq 50); do
        port=$(/usr/bin/python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        if ((port > 20000)); then
            echo "$port"
            return 0
        fi
    done
    return 1
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s; fails after SECONDS.
wait_until() {
    local tries=$(($1 * 10))
    shift
    for _ in $(seq "$tries"); do
        if "$@"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

start_daemon() {
    PORT="$(free_port)"
    DDIR="$(mktemp -d "$WORK/d.XXXXXX")"
    "$RLIMITD" -c "$ROOT/conf/rlimitd.conf" --port "$PORT" --bind 127.0.0.1 --dir "$DDIR" \
        --threads 2 "$@" >"$DDIR/rlimitd.log" 2>&1 &
    DPID=$!
    DPIDS+=("$DPID")
    if ! wait_until 15 port_open "$PORT"; then
        echo "rlimitd did not listen on $PORT:" >&2
        cat "$DDIR/rlimitd.log" >&2
        kill -KILL "$DPID" 2>/dev/null || true
        return 1
    fi
}

daemon_gone() {
    ! kill -0 "$DPID" 2>/dev/null
}

stop_daemon() {
    kill -TERM "$DPID" 2>/dev/null || true
    if ! wait_until 15 daemon_gone; then
        kill -KILL "$DPID" 2>/dev/null || true
    fi
    DRC=0
    wait "$DPID" 2>/dev/null || DRC=$?
}
