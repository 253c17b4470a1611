#!/usr/bin/env bash
# counters.sh - what the limiter statistics (issue 20) cost: server CPU per CL.THROTTLE of this
# tree against a build of another commit without them, in one run, servers alternating.
#
#   bench/counters.sh [--base COMMIT | --base-bin PATH] [--rounds R] [--requests N] [--threads T]
#                     [--pipeline P]
#
# Builds rlimitd (release) from this tree into build-bench/ and from COMMIT (default 9cdee49,
# the main branch before issue 20) into a temporary directory (or takes --base-bin), then for R rounds (default 5)
# starts each in turn on a free loopback port and drives it with redis-benchmark (50 clients,
# pipeline P (default 16), N requests, default 1,000,000; threads T default 2) in two workloads:
#   allowed:  CL.THROTTLE on 100k random keys, burst 1000: every call allowed (the hot path);
#   limited:  CL.THROTTLE on 1000 random keys, burst 0, 1 per hour: nearly every call limited,
#             so nearly every call also goes into its thread's LIMITER TOP sketch.
# It reports server CPU (utime + stime of every thread, /proc/PID/stat) per request, the
# median over rounds, and the ratio new/base, and Redis's INCR through redis-server as the
# same-run reference the other benches use. CPU per request is the figure that counts on a
# shared machine; throughput is printed for context only.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=9cdee49
BASE_BIN=""
ROUNDS=5
REQUESTS=1000000
THREADS=2
PIPELINE=16

while [ $# -gt 0 ]; do
    case "$1" in
    --base) BASE="$2"; shift ;;
    --base-bin) BASE_BIN="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --requests) REQUESTS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --pipeline) PIPELINE="$2"; shift ;;
    *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
    shift
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_scratch

echo "building this tree and $BASE (release) ..."
if [ ! -f "$ROOT/build-bench/build.ninja" ]; then
    meson setup "$ROOT/build-bench" --buildtype=release >/dev/null
fi
ninja -C "$ROOT/build-bench" rlimitd >/dev/null
NEW="$ROOT/build-bench/rlimitd"
OLD="$BASE_BIN"
if [ -z "$OLD" ]; then
    git -C "$ROOT" archive "$BASE" | tar -x -C "$TMP" --one-top-level=base
    meson setup "$TMP/base/build" --buildtype=release >/dev/null
    ninja -C "$TMP/base/build" rlimitd >/dev/null
    OLD="$TMP/base/build/rlimitd"
fi
HZ=$(getconf CLK_TCK)

# run BIN WORKLOAD: one server, one benchmark; prints "cpu_us_per_request requests_per_s".
run() {
    local bin=$1 workload=$2 port pid t0 t1 out rps dir
    port=$(free_port)
    dir=$(mktemp -d "$TMP/run.XXXXXX") # empty: no snapshot of the previous server to load
    if [ "$bin" = redis ]; then
        redis-server --port "$port" --save '' --appendonly no --bind 127.0.0.1 \
            >"$TMP/server.log" 2>&1 &
    else
        "$bin" --port "$port" --bind 127.0.0.1 --threads "$THREADS" --save-interval 0 \
            --dir "$dir" >"$TMP/server.log" 2>&1 &
    fi
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.05
    done
    local args
    case $workload in
    allowed) args=(-r 100000 CL.THROTTLE 'k:__rand_int__' 1000 1 60 1) ;;
    limited) args=(-r 1000 CL.THROTTLE 'k:__rand_int__' 0 1 3600 1) ;;
    incr) args=(-r 100000 INCR 'k:__rand_int__') ;;
    esac
    t0=$(cpu_ticks "$pid")
    out=$(redis-benchmark -p "$port" -c 50 -P "$PIPELINE" -n "$REQUESTS" -q "${args[@]}" 2>&1 | tr '\r' '\n' |
        grep -E 'requests per second' | tail -1)
    t1=$(cpu_ticks "$pid")
    rps=$(echo "$out" | grep -oE '[0-9.]+ requests per second' | awk '{print $1}')
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$REQUESTS" -v rps="$rps" \
        'BEGIN { printf "%.4f %s\n", d / hz * 1e6 / n, rps }'
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "rounds $ROUNDS, $REQUESTS requests each, 50 clients, pipeline $PIPELINE, threads $THREADS"
for w in allowed limited; do
    : >"$TMP/new.$w"
    : >"$TMP/old.$w"
    for r in $(seq "$ROUNDS"); do
        # Alternate which goes first, so a drift in machine load hits both alike.
        if ((r % 2)); then order="OLD NEW"; else order="NEW OLD"; fi
        for which in $order; do
            if [ "$which" = NEW ]; then res=$(run "$NEW" "$w"); echo "$res" >>"$TMP/new.$w"
            else res=$(run "$OLD" "$w"); echo "$res" >>"$TMP/old.$w"; fi
            printf '  %-8s round %d %-4s cpu %s us/req, %s req/s\n' "$w" "$r" "$which" $res
        done
    done
done
: >"$TMP/redis.incr"
for r in $(seq "$ROUNDS"); do run redis incr >>"$TMP/redis.incr"; done

echo
printf '%-9s %14s %14s %8s %14s %14s\n' workload "base us/req" "new us/req" "new/base" "base req/s" "new req/s"
for w in allowed limited; do
    o=$(cut -d' ' -f1 "$TMP/old.$w" | median)
    n=$(cut -d' ' -f1 "$TMP/new.$w" | median)
    orps=$(cut -d' ' -f2 "$TMP/old.$w" | median)
    nrps=$(cut -d' ' -f2 "$TMP/new.$w" | median)
    awk -v w="$w" -v o="$o" -v n="$n" -v orps="$orps" -v nrps="$nrps" \
        'BEGIN { printf "%-9s %14.4f %14.4f %8.3f %14.0f %14.0f\n", w, o, n, n / o, orps, nrps }'
done
ri=$(cut -d' ' -f1 "$TMP/redis.incr" | median)
rr=$(cut -d' ' -f2 "$TMP/redis.incr" | median)
awk -v ri="$ri" -v rr="$rr" 'BEGIN { printf "redis-server INCR (reference): %.4f us/req, %.0f req/s\n", ri, rr }'
