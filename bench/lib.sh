# bench/lib.sh - what the bench scripts share (sourced, not run): a scratch directory cleaned up
# at exit, free ports, waiting for a server, stopping one, and reading a process's RSS and CPU
# time from /proc.
# Messages name the sourcing script ($BENCH_NAME, default its file name).
: "${BENCH_NAME:=$(basename "$0")}"

# Whether anything uses loopback port $1: ss if there is one, else a connection attempt.
port_used() {
    if command -v ss >/dev/null; then
        [ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# A loopback port > 20000 nobody listens on. rlimitd binds with SO_REUSEPORT, so a port that
# another rlimitd holds would not fail to bind: it would be shared. Hence the explicit check.
free_port() {
    local p
    for _ in $(seq 1 100); do
        p=$((20001 + (RANDOM * 32768 + RANDOM) % 40000))
        if ! port_used "$p"; then
            echo "$p"
            return 0
        fi
    done
    echo "$BENCH_NAME: no free port found" >&2
    return 1
}

# Waits until PING answers on port $1, at most $2 seconds; prints the seconds waited.
wait_ping() {
    local port=$1 limit=$2 t0 now
    t0=$(date +%s.%N)
    while :; do
        if [ "$(redis-cli -p "$port" PING 2>/dev/null)" = "PONG" ]; then
            now=$(date +%s.%N)
            awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.3f\n", b - a }'
            return 0
        fi
        now=$(date +%s.%N)
        if awk -v a="$t0" -v b="$now" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
            echo "$BENCH_NAME: no PONG on port $port after $limit s" >&2
            return 1
        fi
        sleep 0.02
    done
}

# Stops the server process $1 listening on port $2: SHUTDOWN NOSAVE, then TERM, then KILL.
stop_server() {
    local pid=$1 port=$2
    [ -n "$pid" ] || return 0
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        sleep 1
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# RSS of process $1 in bytes (bash arithmetic: awk would print big numbers as 3.3e+09).
rss_bytes() {
    local kb
    kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status")
    echo $((kb * 1024))
}

# CPU time of process $1, all its threads, in clock ticks: utime + stime, the fields after the
# command name (which may hold spaces) counted from its closing parenthesis.
cpu_ticks() {
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# Sets TMP (a new scratch directory) and PIDS (empty; a script adds each process it starts):
# when the script exits, for any reason, those processes are killed and TMP removed.
bench_scratch() {
    TMP=$(mktemp -d "/tmp/rlimitd-${BENCH_NAME%.sh}.XXXXXX")
    PIDS=()
    trap bench_cleanup EXIT
}

bench_cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}

# Exits with a message unless every named tool is on PATH.
bench_require() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$BENCH_NAME: '$tool' not found" >&2; exit 1; }
    done
}

# Unless BUILD_IT is 0: configures $BUILD from $ROOT (release, -O2, no tests) if it has no build
# yet, and builds the named targets there.
bench_build() {
    [ "${BUILD_IT:-1}" = 0 ] && return
    if [ ! -d "$BUILD" ]; then
        meson setup "$BUILD" "$ROOT" --buildtype=release -Doptimization=2 -Dtests=false \
            >/dev/null
    fi
    ninja -C "$BUILD" "$@" >/dev/null
}
