#!/usr/bin/env bash
# slow_readers.sh - what clients that pipeline commands with big replies and never read them do
# to the other clients of the server: rlimitd and Redis in one run (issue 28, bench/README.md
# "slow_readers.sh", docs/PERFORMANCE.md "Clients that do not read").
#
#   bench/slow_readers.sh [--rounds R] [--clients "1 10"] [--commands N] [--elements E]
#                         [--threads "1 2"] [--build-dir DIR] [--no-build] [--old-build DIR]
#                         [--cpu-requests N]
#
# For each round (R, default 3) and each number of slow clients (default 1 and 10): a fresh
# redis-server, and a fresh rlimitd at each --threads count (default 1 and 2), each on a free
# loopback port with persistence off, get a list and a sorted set of E members (500), then
# bench/slow_readers.c's scenario: the slow clients each send N (10000) LRANGE/ZRANGE of the
# whole value and never read, while one bystander connection PINGs every 0.5 ms; the servers
# alternate. Prints a markdown table: the bystander's latency (p50, p99, p99.9, max), how long
# the server was busy with the slow clients, its CPU time, its peak RSS; then the targets of
# issue 28 (bystander p99.9 under 10 ms and max under 50 ms with 10 slow clients), met or missed
# in every round.
# --old-build DIR: another build's rlimitd (e.g. main before this change) runs the scenario too,
# and CL.THROTTLE's server CPU per request is compared between the two builds at pipeline 1 and
# 16 (redis-benchmark -c 50 -r 100000, --cpu-requests requests, 400000), with one client
# pipelining 1000 INCRs, and with 50 clients pipelining 16 LRANGEs of the whole list (the cases
# the slices of a busy connection could cost), 3 alternating runs each, medians.
# Builds this tree (release, -O2) into build-bench/ unless --no-build; --build-dir DIR instead.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-bench"
BUILD_IT=1
OLD=""
ROUNDS=3
CLIENTS="1 10"
COMMANDS=10000
ELEMENTS=500
THREADS="1 2"
CPU_REQ=400000

while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --clients) CLIENTS="$2"; shift ;;
    --commands) COMMANDS="$2"; shift ;;
    --elements) ELEMENTS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --no-build) BUILD_IT=0 ;;
    --old-build) OLD="$2"; shift ;;
    --cpu-requests) CPU_REQ="$2"; shift ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) echo "slow_readers.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_require redis-server redis-cli redis-benchmark meson ninja awk
bench_build rlimitd bench/slow_readers
SR="$BUILD/bench/slow_readers"

bench_scratch

# start NAME [THREADS] -> PORT, PID (NAME: redis, or an rlimitd binary)
start() {
    PORT=$(free_port)
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
            >"$TMP/redis-$PORT.log" 2>&1 &
    else
        "$1" --port "$PORT" --bind 127.0.0.1 --save-interval 0 --dir "$TMP" --threads "$2" \
            >"$TMP/rlimitd-$PORT.log" 2>&1 &
    fi
    PID=$!
    PIDS+=("$PID")
    wait_ping "$PORT" 10 >/dev/null || exit 1
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p; s/^$1=\([^ ]*\).*/\1/p" | head -1; }

# scenario LABEL NAME THREADS K ROUND -> one table row; the row also goes to $TMP/rows
scenario() {
    start "$2" "$3"
    "$SR" -p "$PORT" -m setup -e "$ELEMENTS" >/dev/null
    local out
    out=$("$SR" -p "$PORT" -m run -P "$PID" -c "$4" -n "$COMMANDS")
    stop
    local row
    row=$(printf '| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |' "$1" "$4" "$5" \
        "$(field p50_ms <<<"$out")" "$(field p99_ms <<<"$out")" "$(field p999_ms <<<"$out")" \
        "$(field max_ms <<<"$out")" "$(field busy_s <<<"$out")" \
        "$(field server_cpu_s <<<"$out")" "$(field hwm_mib <<<"$out")")
    echo "$row"
    echo "$1|$4|$(field p999_ms <<<"$out")|$(field max_ms <<<"$out")" >>"$TMP/rows"
}

echo "## Clients that pipeline big replies and never read them ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Each slow client sends $COMMANDS LRANGE/ZRANGE of a $ELEMENTS-member list/sorted set and never reads;"
echo "one bystander PINGs every 0.5 ms. Latencies in ms; busy: seconds until the server went quiet."
echo
echo "| server | slow clients | round | p50 | p99 | p99.9 | max | busy (s) | server CPU (s) | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
REDIS_LABEL="redis-server $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')"
for round in $(seq 1 "$ROUNDS"); do
    for k in $CLIENTS; do
        scenario "$REDIS_LABEL" redis 0 "$k" "$round"
        for th in $THREADS; do
            scenario "rlimitd, $th thread(s)" "$BUILD/rlimitd" "$th" "$k" "$round"
            if [ -n "$OLD" ]; then
                scenario "rlimitd old build, $th thread(s)" "$OLD/rlimitd" "$th" "$k" "$round"
            fi
        done
    done
done
echo
echo "Targets (issue 28), rlimitd with 10 slow clients, every round: bystander p99.9 < 10 ms, max < 50 ms"
echo
awk -F'|' '$1 ~ /^rlimitd, / && $2 == 10 {
        n[$1]++; if ($3 < 10 && $4 < 50) ok[$1]++
        if ($3 > w999[$1]) w999[$1] = $3; if ($4 > wmax[$1]) wmax[$1] = $4 }
    END { for (s in n) printf "- %s: %s (%d of %d rounds; worst p99.9 %.3f ms, worst max %.3f ms)\n",
              s, ok[s] == n[s] ? "met" : "MISSED", ok[s], n[s], w999[s], wmax[s] }' "$TMP/rows"
echo

[ -n "$OLD" ] || exit 0

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# cpu_per_req BIN CLIENTS PIPELINE REQUESTS CMD... -> "us_per_req rps"
cpu_per_req() {
    local bin=$1 clients=$2 pipe=$3 req=$4
    shift 4
    start "$bin" 2
    "$SR" -p "$PORT" -m setup -e "$ELEMENTS" >/dev/null # the list LRANGE reads
    redis-benchmark -p "$PORT" -c "$clients" -n 20000 -r 100000 -P "$pipe" -q "$@" \
        >/dev/null # warm-up: the keys exist
    local t0 t1 rps
    t0=$(cpu_ticks "$PID")
    rps=$(redis-benchmark -p "$PORT" -c "$clients" -n "$req" -r 100000 -P "$pipe" -q "$@" |
        tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
    t1=$(cpu_ticks "$PID")
    stop
    awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$req" -v r="$rps" \
        'BEGIN { printf "%.3f %s\n", d / hz * 1e6 / n, r }'
}

echo "## Server CPU per request, this build against $OLD (rlimitd 2 threads, median of 3)"
echo
echo "| load | this build (us/req) | old build (us/req) | ratio | this build (req/s) | old build (req/s) |"
echo "|---|---|---|---|---|---|"
cpu_row() {
    local label=$1 clients=$2 pipe=$3 req=$4
    shift 4
    local new=() old=() nr=() or=() a b
    for _ in 1 2 3; do
        read -r a b < <(cpu_per_req "$BUILD/rlimitd" "$clients" "$pipe" "$req" "$@")
        new+=("$a"); nr+=("$b")
        read -r a b < <(cpu_per_req "$OLD/rlimitd" "$clients" "$pipe" "$req" "$@")
        old+=("$a"); or+=("$b")
    done
    local n o
    n=$(printf '%s\n' "${new[@]}" | median)
    o=$(printf '%s\n' "${old[@]}" | median)
    printf '| %s | %s (%s) | %s (%s) | %s | %s | %s |\n' "$label" "$n" "${new[*]}" "$o" \
        "${old[*]}" "$(awk -v n="$n" -v o="$o" 'BEGIN { printf "%.3f", n / o }')" \
        "$(printf '%s\n' "${nr[@]}" | median)" "$(printf '%s\n' "${or[@]}" | median)"
}
cpu_row "CL.THROTTLE, 50 clients, P=1" 50 1 "$CPU_REQ" CL.THROTTLE key:__rand_int__ 100 1000 60
cpu_row "CL.THROTTLE, 50 clients, P=16" 50 16 "$CPU_REQ" CL.THROTTLE key:__rand_int__ 100 1000 60
cpu_row "INCR, 1 client, P=1000" 1 1000 $((CPU_REQ * 10)) INCR c:__rand_int__
cpu_row "LRANGE of $ELEMENTS, 50 clients, P=16" 50 16 $((CPU_REQ / 20)) LRANGE sr:list 0 -1
