#!/usr/bin/env bash
# module.sh - rlimit.so inside Debian's redis-server against the Lua recipes in the same server
# (issue 6; docs/SCALING.md). One redis-server, persistence off, with the module loaded and
# bench/gcra.lua and bench/window.lua loaded as scripts, so both sides share the process, the
# clients and the keys:
#   - redis-benchmark -c 50 -r 100000 at pipeline 1 and 16: module CL.THROTTLE vs EVALSHA gcra,
#     module ISALLOWED vs EVALSHA window, and INCR as the server's simplest write;
#   - memory per key: used_memory growth for N distinct 14-byte keys of GCRA state and of window
#     logs with 10 timestamps, module vs script.
# Prints a Markdown table with the module/Lua ratios. The module build goes to build-bench-mod/.
#
#   bench/module.sh [--requests N] [--keys N] [--no-build]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQUESTS=1000000
KEYS=200000
BUILD=1
while (($#)); do
    case "$1" in
    --requests) REQUESTS=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--requests N] [--keys N] [--no-build]" >&2; exit 2 ;;
    esac
done

for tool in redis-server redis-cli redis-benchmark meson ninja awk; do
    command -v "$tool" >/dev/null || { echo "module.sh: $tool not found (bash tests/deps.sh)" >&2; exit 1; }
done

MODULE=$ROOT/build-bench-mod/rlimit.so
if ((BUILD)); then
    if [[ ! -f "$ROOT/build-bench-mod/build.ninja" ]]; then
        meson setup "$ROOT/build-bench-mod" "$ROOT" --buildtype=release -Doptimization=2 \
            -Dtests=false -Dmodule=true >&2
    fi
    ninja -C "$ROOT/build-bench-mod" rlimit.so >&2
fi
[[ -f "$MODULE" ]] || { echo "module.sh: no $MODULE (run without --no-build)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rlimit-bench-mod.XXXXXX")
PID=""
cleanup() {
    if [[ -n "$PID" ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$((20000 + RANDOM % 10000))
redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" --loadmodule "$MODULE" &
PID=$!
for _ in $(seq 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && break
    sleep 0.05
done
cli() { redis-cli -p "$PORT" "$@"; }
SHA_GCRA=$(cli SCRIPT LOAD "$(cat "$ROOT/bench/gcra.lua")")
SHA_WINDOW=$(cli SCRIPT LOAD "$(cat "$ROOT/bench/window.lua")")

# rps p50 p99 of one redis-benchmark run (its --csv line: "name","rps","avg","min","p50","p95","p99","max").
bench() { # pipeline, command...
    local pipe=$1
    shift
    cli FLUSHALL >/dev/null
    redis-benchmark -p "$PORT" -c 50 -r 100000 -n "$REQUESTS" -P "$pipe" --csv "$@" 2>/dev/null |
        tail -1 | tr -d '"' | awk -F, '{ printf "%.0f %s %s\n", $2, $5, $7 }'
}

declare -A RPS P50 P99
run() { # label pipeline command...
    local label=$1 pipe=$2
    shift 2
    read -r RPS["$label:$pipe"] P50["$label:$pipe"] P99["$label:$pipe"] < <(bench "$pipe" "$@")
    echo "  $label P=$pipe: ${RPS["$label:$pipe"]} rps" >&2
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

for pipe in 1 16; do
    # Alternate module and script so drift hits both.
    run "INCR" "$pipe" INCR c:__rand_int__
    run "EVALSHA gcra" "$pipe" EVALSHA "$SHA_GCRA" 1 k:__rand_int__ 15 30 60
    run "module CL.THROTTLE" "$pipe" CL.THROTTLE k:__rand_int__ 15 30 60
    run "EVALSHA window" "$pipe" EVALSHA "$SHA_WINDOW" 1 'hist:{u:__rand_int__}:login' 60 10
    run "module ISALLOWED" "$pipe" ISALLOWED u:__rand_int__ login 60 10
done

# Memory: used_memory growth for KEYS distinct keys, written by redis-cli --pipe as inline
# commands: every key exactly `passes` times, so a window log holds exactly that many timestamps
# on both sides (the sorted-set recipe keeps every attempt of the period; the module keeps at
# most max_count + 1, here all 10).
used() { cli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
mem() { # label passes printf-format-of-one-command (one %012d: the key number)
    local label=$1 passes=$2 fmt=$3
    cli FLUSHALL >/dev/null
    local before after keys
    before=$(used)
    awk -v n="$KEYS" -v p="$passes" -v f="$fmt\n" \
        'BEGIN { for (j = 0; j < p; j++) for (i = 0; i < n; i++) printf f, i }' |
        redis-cli -p "$PORT" --pipe >/dev/null
    after=$(used)
    keys=$(cli DBSIZE)
    MEM["$label"]=$(awk -v a="$after" -v b="$before" -v k="$keys" 'BEGIN { printf "%.1f", (a - b) / k }')
    echo "  $label: ${MEM["$label"]} B/key over $keys keys" >&2
}
declare -A MEM
mem "EVALSHA gcra" 1 "EVALSHA $SHA_GCRA 1 k:%012d 15 30 60"
mem "module CL.THROTTLE" 1 "CL.THROTTLE k:%012d 15 30 60"
mem "EVALSHA window" 10 "EVALSHA $SHA_WINDOW 1 hist:{u:%012d}:login 60 10"
mem "module ISALLOWED" 10 "ISALLOWED u:%012d login 60 10"

echo "# rlimit.so vs Lua scripts in redis-server $(redis-server --version | awk '{ print $3 }' | tr -d 'v='), $(nproc) CPUs, $(date -u +%Y-%m-%d)"
echo
echo "redis-benchmark -c 50 -r 100000 -n $REQUESTS; one server, persistence off."
echo
echo "| command | P | rps | p50 ms | p99 ms | module / Lua |"
echo "|---|---|---|---|---|---|"
for pipe in 1 16; do
    for label in "INCR" "EVALSHA gcra" "module CL.THROTTLE" "EVALSHA window" "module ISALLOWED"; do
        k="$label:$pipe"
        case "$label" in
        "module CL.THROTTLE") r="$(ratio "${RPS[$k]}" "${RPS["EVALSHA gcra:$pipe"]}")x" ;;
        "module ISALLOWED") r="$(ratio "${RPS[$k]}" "${RPS["EVALSHA window:$pipe"]}")x" ;;
        *) r="" ;;
        esac
        echo "| $label | $pipe | ${RPS[$k]} | ${P50[$k]} | ${P99[$k]} | $r |"
    done
done
echo
echo "Memory per key (used_memory growth / $KEYS keys; 14-byte GCRA keys; window logs of 10 timestamps, keys hist:{u:…}:login):"
echo
echo "| state | Lua script | module | module / Lua |"
echo "|---|---|---|---|"
echo "| GCRA | ${MEM["EVALSHA gcra"]} | ${MEM["module CL.THROTTLE"]} | $(ratio "${MEM["module CL.THROTTLE"]}" "${MEM["EVALSHA gcra"]}")x |"
echo "| window log | ${MEM["EVALSHA window"]} | ${MEM["module ISALLOWED"]} | $(ratio "${MEM["module ISALLOWED"]}" "${MEM["EVALSHA window"]}")x |"
