#!/usr/bin/env bash
# counters_instr.sh - the limiter statistics' cost (issue 20) as user-space instructions per
# CL.THROTTLE, counted by valgrind's callgrind: deterministic, so it resolves differences of a
# few percent that CPU time on a shared machine cannot. Kernel time (the sockets) is not
# counted, so a ratio here overstates the same difference in counters.sh's CPU per request.
#
#   bench/counters_instr.sh --base-bin PATH [--new-bin PATH] [--requests N]
#
# Needs valgrind (Debian package valgrind). Runs each server (2 I/O threads) under callgrind
# with redis-benchmark (50 clients, pipeline 16, N requests, default 200,000) in counters.sh's
# two workloads, and prints instructions per request, base and new, and their ratio. Startup
# and shutdown are included (a few million instructions, under 1% at the default N).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE_BIN=""
NEW_BIN="$ROOT/build-bench/rlimitd"
REQUESTS=200000
while [ $# -gt 0 ]; do
    case "$1" in
    --base-bin) BASE_BIN="$2"; shift ;;
    --new-bin) NEW_BIN="$2"; shift ;;
    --requests) REQUESTS="$2"; shift ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
    shift
done
[ -n "$BASE_BIN" ] || { echo "--base-bin is required (counters.sh builds one)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/rlimitd-instr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# instr BIN WORKLOAD: prints user-space instructions per request.
instr() {
    local bin=$1 workload=$2 port pid args dir
    port=$(free_port)
    dir=$(mktemp -d "$TMP/run.XXXXXX") # empty: no snapshot of an earlier run to load
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$bin" --port "$port" \
        --bind 127.0.0.1 --threads 2 --save-interval 0 --dir "$dir" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 200); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.1
    done
    case $workload in
    allowed) args=(-r 100000 CL.THROTTLE 'k:__rand_int__' 1000 1 60 1) ;;
    limited) args=(-r 1000 CL.THROTTLE 'k:__rand_int__' 0 1 3600 1) ;;
    esac
    redis-benchmark -p "$port" -c 50 -P 16 -n "$REQUESTS" -q "${args[@]}" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    callgrind_annotate "$dir/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }' |
        awk -v n="$REQUESTS" '{ printf "%.0f\n", $1 / n }'
}

printf '%-9s %12s %12s %8s\n' workload "base instr" "new instr" "new/base"
for w in allowed limited; do
    o=$(instr "$BASE_BIN" "$w")
    n=$(instr "$NEW_BIN" "$w")
    awk -v w="$w" -v o="$o" -v n="$n" 'BEGIN { printf "%-9s %12d %12d %8.3f\n", w, o, n, n / o }'
done
