#!/usr/bin/env bash
# connections.sh - what idle connections and connection storms cost, rlimitd against Redis in
# one run (issue 19, docs/PERFORMANCE.md "Connections").
#
#   bench/connections.sh [--conns N] [--rounds R] [--build-dir DIR] [--old-build DIR]
#                        [--cpu-requests N]
#
# Starts rlimitd from DIR (default build-bench/, built release if missing) and Debian's
# redis-server on free loopback ports, persistence off, maxclients above N. For each, N idle
# connections (default 9000) are opened, held, closed, R times (3); prints a markdown table of
# RSS per held idle connection and RSS growth 2 s after all closed (against the RSS before the
# first round), per round, for connections that only connect and for ones that run one command
# first (a fresh server each). The descriptor limit is raised to the hard limit first.
# With --old-build DIR (another build, e.g. of main before issue 19), that rlimitd is measured
# too, and CL.THROTTLE server CPU per request at pipeline 1 and 16 (redis-benchmark -c 50,
# --cpu-requests requests, 100k random keys; utime+stime of the server process from /proc,
# all threads) is compared between the two builds, 3 alternating runs, median.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-bench"
OLD=""
CONNS=9000
ROUNDS=3
CPU_REQ=400000

while [ $# -gt 0 ]; do
    case "$1" in
    --conns) CONNS="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --old-build) OLD="$2"; shift ;;
    --cpu-requests) CPU_REQ="$2"; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) echo "connections.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

for tool in redis-server redis-benchmark python3; do
    command -v "$tool" >/dev/null || { echo "connections.sh: $tool not found" >&2; exit 1; }
done
if [ ! -x "$BUILD/rlimitd" ]; then
    meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
    ninja -C "$BUILD" rlimitd >/dev/null
fi
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((CONNS + 200)) ]; then
    CONNS=$(($(ulimit -n) - 200))
    echo "connections.sh: descriptor limit $(ulimit -n): $CONNS connections" >&2
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_scratch

wait_ready() {
    wait_ping "$1" 10 >/dev/null || exit 1
}

# start_rlimitd BIN -> sets PORT, PID
start_rlimitd() {
    PORT=$(free_port)
    "$1" --port "$PORT" --bind 127.0.0.1 --save "" --maxclients $((CONNS + 100)) \
        >"$TMP/rlimitd-$PORT.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    wait_ready "$PORT"
}

start_redis() {
    PORT=$(free_port)
    # (no argument: the same shape as start_rlimitd for both())
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --maxclients $((CONNS + 100)) >"$TMP/redis-$PORT.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    wait_ready "$PORT"
}

THROTTLE=$'*5\r\n$11\r\nCL.THROTTLE\r\n$5\r\nstorm\r\n$3\r\n100\r\n$6\r\n100000\r\n$2\r\n60\r\n'

# storm NAME WHAT CMD -> rows "NAME | WHAT | round | per-conn | growth"
storm() {
    python3 "$ROOT/bench/conn_storm.py" "$PORT" "$PID" "$CONNS" "$ROUNDS" "$3" |
        while read -r round per growth; do
            printf '| %s | %s | %d | %d | %.1f |\n' "$1" "$2" "$((round + 1))" "$per" \
                "$(awk -v g="$growth" 'BEGIN { print g / 1048576 }')"
        done
}

# both NAME START BIN CMD: a fresh server for each kind of idle connection.
both() {
    "$2" "$3"
    storm "$1" "connect only" -
    kill "$PID"
    "$2" "$3"
    storm "$1" "one command" "$4"
    kill "$PID"
}

echo "## Idle connections ($CONNS opened, held, closed; $ROUNDS rounds; $(nproc) CPUs)"
echo
echo "| server | connections | round | RSS per held idle connection (B) | RSS growth 2 s after all closed (MiB) |"
echo "|---|---|---|---|---|"
both "rlimitd" start_rlimitd "$BUILD/rlimitd" "$THROTTLE"
if [ -n "$OLD" ]; then
    both "rlimitd (old build)" start_rlimitd "$OLD/rlimitd" "$THROTTLE"
fi
# Redis has no CL.THROTTLE; what one command leaves behind does not depend on which.
both "redis-server $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')" start_redis "" \
    $'*2\r\n$3\r\nGET\r\n$5\r\nstorm\r\n'
echo

[ -n "$OLD" ] || exit 0

# cpu_per_req BIN PIPELINE -> microseconds of server CPU per request
cpu_per_req() {
    start_rlimitd "$1"
    redis-benchmark -p "$PORT" -c 50 -n 20000 -r 100000 -P "$2" -q \
        CL.THROTTLE key:__rand_int__ 100 1000 60 >/dev/null # warm-up: keys exist
    local t0 t1
    t0=$(cpu_ticks "$PID")
    redis-benchmark -p "$PORT" -c 50 -n "$CPU_REQ" -r 100000 -P "$2" -q \
        CL.THROTTLE key:__rand_int__ 100 1000 60 >/dev/null
    t1=$(cpu_ticks "$PID")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$CPU_REQ" \
        'BEGIN { printf "%.3f", d / hz * 1e6 / n }'
}

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "## CL.THROTTLE server CPU per request, this build against $OLD"
echo
echo "| pipeline | this build (us/req) | old build (us/req) | ratio |"
echo "|---|---|---|---|"
for pipe in 1 16; do
    new=()
    old=()
    for run in 1 2 3; do
        new+=("$(cpu_per_req "$BUILD/rlimitd" "$pipe")")
        old+=("$(cpu_per_req "$OLD/rlimitd" "$pipe")")
    done
    n=$(printf '%s\n' "${new[@]}" | median)
    o=$(printf '%s\n' "${old[@]}" | median)
    printf '| %d | %s (%s) | %s (%s) | %s |\n' "$pipe" "$n" "${new[*]}" "$o" "${old[*]}" \
        "$(awk -v n="$n" -v o="$o" 'BEGIN { printf "%.3f", n / o }')"
done
