#!/usr/bin/env bash
# scripts.sh - EVALSHA on rlimitd against Redis, side by side in one run (issue 16).
#
#   bench/scripts.sh [RLIMITD_BINARY] [--requests N] [--rounds R]
#
# Starts Debian's redis-server and rlimitd (with 1, then 2 I/O threads, busy polling off) on free
# loopback ports, SCRIPT LOADs into each rate-limiter-flexible's consume script (its
# incr-with-TTL script, verbatim) and bench/gcra.lua, and drives each with redis-benchmark (50 clients, pipeline 16,
# 100k random keys, so the scripts run on different keys and shards). For every run it prints
# the server's CPU time per call (utime + stime of the whole process, all threads, from
# /proc/PID/stat) and throughput; then, per round, the ratios rlimitd/Redis of CPU per call
# (the figure that counts on a shared machine), and over all rounds the range of each.
# No 2-thread/1-thread throughput factor here: these scripts cost the server a few
# microseconds, about what they cost redis-benchmark, which runs on the same CPUs, so on a
# small machine the client decides that factor. bench/script_scale.sh measures it with a
# script whose cost is the server's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RLIMITD="$ROOT/build/rlimitd"
N=400000
ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --requests) N="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    *) RLIMITD="$1" ;;
    esac
    shift
done
RLIMITD=$(realpath "$RLIMITD")
TICK=$(getconf CLK_TCK)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_up() {
    for _ in $(seq 200); do
        redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "scripts.sh: server on $1 did not start" >&2
    exit 1
}

cpu_ticks() {
    # Fields 14 and 15 of /proc/PID/stat (utime, stime), after the ")" that ends the name.
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

RLFLX='redis.call('"'"'set'"'"', KEYS[1], 0, '"'"'EX'"'"', ARGV[2], '"'"'NX'"'"') local consumed = redis.call('"'"'incrby'"'"', KEYS[1], ARGV[1]) local ttl = redis.call('"'"'pttl'"'"', KEYS[1]) if ttl == -1 then redis.call('"'"'expire'"'"', KEYS[1], ARGV[2]) ttl = 1000 * ARGV[2] end return {consumed, ttl}'
GCRA=$(cat "$ROOT/bench/gcra.lua")

declare -A CPU
run() { # label pid port sha args...
    local label=$1 pid=$2 port=$3 sha=$4
    shift 4
    local t0 c0 c1 t1 out
    c0=$(cpu_ticks "$pid")
    t0=$(date +%s.%N)
    out=$(redis-benchmark -p "$port" -c 50 -P 16 -n "$N" -r 100000 -q EVALSHA "$sha" 1 \
        "key:__rand_int__" "$@" 2>&1 | tr '\r' '\n' | grep -E 'requests per second' | tail -1)
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$pid")
    local us rps
    us=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / t * 1e6 / n }')
    rps=$(awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.0f", n / (b - a) }')
    CPU[$label]=$us
    printf '%-34s %8s us CPU/call %9s calls/s\n' "$label" "$us" "$rps"
}

start_rlimitd() { # threads
    local port
    port=$(free_port)
    # No busy polling, as in zset.sh and types.sh: a spinning thread's CPU time is not work
    # done for the calls (and with as many I/O threads as CPUs it is off anyway).
    "$RLIMITD" --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK" --threads "$1" \
        --busy-poll-us 0 >/dev/null 2>&1 &
    PIDS+=($!)
    RL_PID=$!
    RL_PORT=$port
    wait_up "$port"
}

echo "# EVALSHA: rlimitd vs Redis $(redis-server --version | awk '{ print $3 }' | tr -d 'v='), $N calls each, $ROUNDS round(s), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
declare -A ALL # "<figure> <script>" -> the round's values, space separated
for round in $(seq "$ROUNDS"); do
    echo "## round $round"
    RD_PORT=$(free_port)
    redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
        >/dev/null 2>&1 &
    PIDS+=($!)
    RD_PID=$!
    wait_up "$RD_PORT"
    SHA_FLX=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$RLFLX")
    SHA_GCRA=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$GCRA")
    run "redis rate-limiter-flexible" "$RD_PID" "$RD_PORT" "$SHA_FLX" 1 10 5 10
    run "redis gcra.lua" "$RD_PID" "$RD_PORT" "$SHA_GCRA" 10 100 60
    kill -TERM "$RD_PID"
    wait "$RD_PID" 2>/dev/null || true

    for threads in 1 2; do
        start_rlimitd "$threads"
        redis-cli -p "$RL_PORT" SCRIPT LOAD "$RLFLX" >/dev/null
        redis-cli -p "$RL_PORT" SCRIPT LOAD "$GCRA" >/dev/null
        run "rlimitd t$threads rate-limiter-flexible" "$RL_PID" "$RL_PORT" "$SHA_FLX" 1 10 5 10
        run "rlimitd t$threads gcra.lua" "$RL_PID" "$RL_PORT" "$SHA_GCRA" 10 100 60
        kill -TERM "$RL_PID"
        wait "$RL_PID" 2>/dev/null || true
    done

    for s in rate-limiter-flexible gcra.lua; do
        r1=$(ratio "${CPU["rlimitd t1 $s"]}" "${CPU["redis $s"]}")
        r2=$(ratio "${CPU["rlimitd t2 $s"]}" "${CPU["redis $s"]}")
        ALL["t1 $s"]+="$r1 "
        ALL["t2 $s"]+="$r2 "
        echo "$s: CPU/call rlimitd(1 thread)/Redis ${r1}x, rlimitd(2 threads)/Redis ${r2}x"
    done
done

range() { echo "$1" | tr ' ' '\n' | grep . | sort -n | sed -n '1p;$p' | paste -sd- | sed 's/-/x-/; s/$/x/'; }
echo
echo "## over $ROUNDS round(s): CPU/call rlimitd/Redis (1 thread; 2 threads)"
for s in rate-limiter-flexible gcra.lua; do
    echo "$s: $(range "${ALL["t1 $s"]}"); $(range "${ALL["t2 $s"]}")"
done
