#!/usr/bin/env bash
# compare.sh - rlimitd against Redis on this machine, in one run (issue 5, bench/README.md).
#
#   bench/compare.sh [--quick] [--threads "1 2"] [--seconds S] [--rounds R] [--no-build]
#                    [--skip-memory] [--build-dir DIR] [--only snapshot|window]
#
# Builds rlimitd (release, -O2) into build-bench/, starts it and Debian's redis-server on free
# loopback ports with persistence off, loads bench/gcra.lua and bench/window.lua into Redis, and
# prints:
#   1. throughput and latency: redis-benchmark (50 clients, 100k random keys, pipeline 1 and 16)
#      for rlimitd CL.THROTTLE, GCRA, ISALLOWED, PING, INCR and Redis INCR, EVALSHA gcra, EVALSHA
#      window, the servers alternating, with rlimitd at each --threads value, R rounds (3; 1
#      with --quick) of which the median is shown; rps ratios, and the server's CPU time per
#      request (/proc/PID/stat utime + stime, all threads) with its ratio to CL.THROTTLE's;
#   2. memory per key: 1M and 10M distinct 14-byte keys of GCRA state and of window logs,
#      rlimitd's RSS growth against Redis's used_memory growth (and both other views);
#   3. p99 of CL.THROTTLE while rlimitd writes background snapshots of the 10M keys, against
#      p99 without, and the time to load that snapshot at start (if BGSAVE exists);
#   4. bench_core, the no-network micro-benchmark of the limiter core;
#   5. the issue 5 targets, met or missed.
# --quick: 200k keys instead of 1M/10M, 1 s per benchmark, 1 round (under 2 minutes, for CI).
# --only snapshot: only section 3 (load the 10M GCRA keys, or 200k with --quick, into rlimitd,
#   p99 with and without background saves, time to load the snapshot); --only window: only
#   rlimitd's side of the window-log memory rows (1 and 10 timestamps, and the 10M set unless
#   --quick). Both measure exactly as the full run does; Redis is not started.
# --build-dir DIR: build into and run from DIR instead of build-bench/.
# A full run takes 25-40 minutes on 2 cores, most of it Redis running the window script 100M times.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-bench"
QUICK=0
THREADS="1 2"
SECONDS_PER_RUN=""
ROUNDS=""
BUILD_IT=1
MEMORY=1
ONLY=""

usage() {
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --threads) THREADS="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --no-build) BUILD_IT=0 ;;
    --skip-memory) MEMORY=0 ;;
    --build-dir) BUILD=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    --only) ONLY="$2"; shift ;;
    -h | --help) usage ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

if [ "$QUICK" = 1 ]; then
    : "${SECONDS_PER_RUN:=1}"
    : "${ROUNDS:=1}"
    SMALL=200000
    LARGE=""
else
    : "${SECONDS_PER_RUN:=5}"
    : "${ROUNDS:=3}"
    SMALL=1000000
    LARGE=10000000
fi
CLIENTS=50
RANDKEYS=100000
WINDOW_ATTEMPTS=10 # timestamps per window key in the memory test (max_count 10)

for tool in redis-server redis-cli redis-benchmark meson ninja awk; do
    command -v "$tool" >/dev/null || { echo "compare.sh: '$tool' not found (see bench/README.md)" >&2; exit 1; }
done

# ---- build ---------------------------------------------------------------------------------

if [ "$BUILD_IT" = 1 ]; then
    if [ -d "$BUILD" ]; then
        meson configure "$BUILD" -Dbuildtype=release -Doptimization=2 -Dtests=false >/dev/null
    else
        meson setup "$BUILD" "$ROOT" --buildtype=release -Doptimization=2 -Dtests=false >/dev/null
    fi
    ninja -C "$BUILD" rlimitd bench/bench_core bench/bench_load >/dev/null
fi
RLIMITD="$BUILD/rlimitd"
LOADER="$BUILD/bench/bench_load"
CORE="$BUILD/bench/bench_core"

WORK=$(mktemp -d /tmp/rlimitd-bench.XXXXXX)
RL_PID=""
RL_PORT=""
RD_PID=""
RD_PORT=""
BG_PID=""

# ---- servers -------------------------------------------------------------------------------

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# Starts rlimitd with $1 threads in directory $2; sets RL_PID and RL_PORT.
start_rlimitd() {
    local threads=$1 dir=$2
    mkdir -p "$dir"
    RL_PORT=$(free_port)
    "$RLIMITD" -c "$ROOT/conf/rlimitd.conf" --bind 127.0.0.1 --port "$RL_PORT" \
        --threads "$threads" --save-interval 0 --dir "$dir" --logfile "$dir/rlimitd.log" &
    RL_PID=$!
    wait_ping "$RL_PORT" 120 >/dev/null
}

stop_rlimitd() {
    stop_server "$RL_PID" "$RL_PORT"
    RL_PID=""
}

# Starts redis-server without persistence and loads the two scripts; sets RD_PID, RD_PORT,
# SHA_GCRA, SHA_WINDOW.
start_redis() {
    local dir="$WORK/redis"
    mkdir -p "$dir"
    RD_PORT=$(free_port)
    redis-server --bind 127.0.0.1 --port "$RD_PORT" --save '' --appendonly no --dir "$dir" \
        --logfile "$dir/redis.log" --daemonize no &
    RD_PID=$!
    wait_ping "$RD_PORT" 30 >/dev/null
    SHA_GCRA=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$(cat "$ROOT/bench/gcra.lua")")
    SHA_WINDOW=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$(cat "$ROOT/bench/window.lua")")
}

stop_redis() {
    stop_server "$RD_PID" "$RD_PORT"
    RD_PID=""
}

cleanup() {
    if [ -n "$BG_PID" ]; then
        kill "$BG_PID" 2>/dev/null || true
        wait "$BG_PID" 2>/dev/null || true
    fi
    stop_rlimitd
    stop_redis
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

info_field() { # port section field
    redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}


# ---- 1. throughput -------------------------------------------------------------------------

declare -A RPS P50 P99 CPU ALL_RPS ALL_P50 ALL_P99 ALL_CPU

CLK_TCK=$(getconf CLK_TCK)

# CPU time of process $1 so far, all threads: utime + stime (fields 14 and 15 of
# /proc/PID/stat, counted after the ")" that ends the command name), in clock ticks.
cpu_ticks() {
    awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# redis-benchmark on port $1 (server pid $2), pipeline $3, the command in the rest; prints
# "rps p50 p99 cpu_us", cpu_us being the server's CPU time per request in the measured run.
# A short run first sizes -n so that the measured run lasts about SECONDS_PER_RUN.
bench_cmd() {
    local port=$1 pid=$2 pipe=$3 calib n line t0 t1
    shift 3
    calib=$((pipe == 1 ? 20000 : 200000))
    line=$(redis-benchmark -p "$port" -c "$CLIENTS" -r "$RANDKEYS" -P "$pipe" -n "$calib" --csv \
        "$@" | tail -1)
    n=$(echo "$line" | awk -F'","' -v s="$SECONDS_PER_RUN" -v c="$calib" \
        '{ n = int($2 * s); print (n < c ? c : n) }')
    t0=$(cpu_ticks "$pid")
    line=$(redis-benchmark -p "$port" -c "$CLIENTS" -r "$RANDKEYS" -P "$pipe" -n "$n" --csv "$@" |
        tail -1 | tr -d '"' | awk -F, '{ print $2, $5, $7 }')
    t1=$(cpu_ticks "$pid")
    echo "$line $(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.3f", d * 1e6 / hz / n }')"
}

# Runs one test; appends its numbers to the lists under "threads:pipe:name".
run_test() {
    local threads=$1 pipe=$2 name=$3 port=$4 r k pid
    shift 4
    pid=$([ "$port" = "$RL_PORT" ] && echo "$RL_PID" || echo "$RD_PID")
    redis-cli -p "$port" FLUSHALL >/dev/null
    local rps p50 p99 cpu
    r=$(bench_cmd "$port" "$pid" "$pipe" "$@")
    read -r rps p50 p99 cpu <<<"$r"
    k="$threads:$pipe:$name"
    ALL_RPS["$k"]="${ALL_RPS["$k"]:-} $rps"
    ALL_P50["$k"]="${ALL_P50["$k"]:-} $p50"
    ALL_P99["$k"]="${ALL_P99["$k"]:-} $p99"
    ALL_CPU["$k"]="${ALL_CPU["$k"]:-} $cpu"
    printf '  threads %s P=%-2s %-22s %s\n' "$threads" "$pipe" "$name" "$r" >&2
}

median() { # numbers as words
    echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { # a / b with two decimals
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
}

throughput() {
    local threads pipe round k
    start_redis
    for threads in $THREADS; do
        start_rlimitd "$threads" "$WORK/rl-$threads"
        for round in $(seq 1 "$ROUNDS"); do
            for pipe in 1 16; do
                # Alternate the servers so that drift (other load, thermal) hits both.
                run_test "$threads" "$pipe" "rlimitd PING" "$RL_PORT" PING
                run_test "$threads" "$pipe" "Redis INCR" "$RD_PORT" INCR c:__rand_int__
                run_test "$threads" "$pipe" "rlimitd INCR" "$RL_PORT" INCR c:__rand_int__
                run_test "$threads" "$pipe" "Redis EVALSHA gcra" "$RD_PORT" \
                    EVALSHA "$SHA_GCRA" 1 k:__rand_int__ 15 30 60
                run_test "$threads" "$pipe" "rlimitd CL.THROTTLE" "$RL_PORT" \
                    CL.THROTTLE k:__rand_int__ 15 30 60
                run_test "$threads" "$pipe" "rlimitd GCRA" "$RL_PORT" \
                    GCRA k:__rand_int__ 15 30 60
                run_test "$threads" "$pipe" "Redis EVALSHA window" "$RD_PORT" \
                    EVALSHA "$SHA_WINDOW" 1 'hist:{u:__rand_int__}:login' 60 10
                run_test "$threads" "$pipe" "rlimitd ISALLOWED" "$RL_PORT" \
                    ISALLOWED u:__rand_int__ login 60 10
            done
        done
        stop_rlimitd
    done
    stop_redis
    # A burst of other load on the machine hits one run; the median of the rounds resists it.
    for k in "${!ALL_RPS[@]}"; do
        RPS["$k"]=$(median ${ALL_RPS["$k"]})
        P50["$k"]=$(median ${ALL_P50["$k"]})
        P99["$k"]=$(median ${ALL_P99["$k"]})
        CPU["$k"]=$(median ${ALL_CPU["$k"]})
    done
}

print_throughput() {
    local threads pipe name k incr
    echo
    echo "## Throughput and latency (redis-benchmark -c $CLIENTS -r $RANDKEYS, ~${SECONDS_PER_RUN} s per run, median of $ROUNDS)"
    echo
    echo "Server CPU µs/req: the server process's utime + stime (all threads) over the measured run,"
    echo "per request; the CPU column's ratio is to CL.THROTTLE's in the same block."
    echo
    echo "| threads | P | server and command | rps | p50 ms | p99 ms | server CPU µs/req | CPU / CL.THROTTLE | rps / Redis INCR | rps / Redis Lua |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for threads in $THREADS; do
        for pipe in 1 16; do
            incr=${RPS["$threads:$pipe:Redis INCR"]}
            for name in "rlimitd CL.THROTTLE" "rlimitd GCRA" "rlimitd ISALLOWED" "rlimitd PING" \
                "rlimitd INCR" "Redis INCR" "Redis EVALSHA gcra" "Redis EVALSHA window"; do
                k="$threads:$pipe:$name"
                local lua="-" vs_incr="-"
                local vs_cl="$(ratio "${CPU[$k]}" "${CPU["$threads:$pipe:rlimitd CL.THROTTLE"]}")x"
                case "$name" in
                "rlimitd CL.THROTTLE" | "rlimitd GCRA") lua="$(ratio "${RPS[$k]}" "${RPS["$threads:$pipe:Redis EVALSHA gcra"]}")x gcra" ;;
                "rlimitd ISALLOWED") lua="$(ratio "${RPS[$k]}" "${RPS["$threads:$pipe:Redis EVALSHA window"]}")x window" ;;
                esac
                case "$name" in rlimitd*) vs_incr="$(ratio "${RPS[$k]}" "$incr")x" ;; esac
                printf '| %s | %s | %s | %.0f | %.3f | %.3f | %.2f | %s | %s | %s |\n' "$threads" \
                    "$pipe" "$name" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${CPU[$k]}" "$vs_cl" \
                    "$vs_incr" "$lua"
            done
        done
    done
}

# ---- 2. memory -----------------------------------------------------------------------------

declare -A MEM
MEM_ROWS=()


# Loads one data set into a fresh rlimitd and a fresh Redis: name, mode, keys, calls per key.
# With keep=1, the snapshot measurements (section 3) run on rlimitd while it holds the keys.
memory_set() {
    local name=$1 mode=$2 keys=$3 attempts=$4 keep=${5:-0}
    local id="$name:$keys:$attempts" base base_rss rss used dbsize out sha
    echo "  memory: $name, $keys keys x $attempts calls" >&2

    # A fresh directory: a snapshot left by section 3 would be loaded at start.
    rm -rf "$WORK/rl-mem"
    start_rlimitd 1 "$WORK/rl-mem"
    base=$(rss_bytes "$RL_PID")
    out=$("$LOADER" -p "$RL_PORT" -m "$mode" -n "$keys" -a "$attempts")
    sleep 1
    rss=$(rss_bytes "$RL_PID")
    used=$(info_field "$RL_PORT" memory used_memory)
    MEM["$id:rl_rss"]=$(per_key $((rss - base)) "$keys")
    MEM["$id:rl_used"]=$(per_key "$used" "$keys")
    MEM["$id:rl_rate"]=$(echo "$out" | awk '{ print $10 }')
    MEM["$id:rl_keys"]=$(redis-cli -p "$RL_PORT" DBSIZE)
    if [ "$keep" = 1 ]; then
        snapshot_tests "$keys"
    fi
    stop_rlimitd
    MEM_ROWS+=("$id")
    if [ "$ONLY" = window ]; then
        return 0
    fi

    start_redis
    base=$(info_field "$RD_PORT" memory used_memory)
    base_rss=$(info_field "$RD_PORT" memory used_memory_rss)
    sha=$SHA_GCRA
    if [ "$mode" = window ]; then sha=$SHA_WINDOW; fi
    out=$("$LOADER" -p "$RD_PORT" -m "$mode" -n "$keys" -a "$attempts" -l "$sha")
    sleep 1
    used=$(info_field "$RD_PORT" memory used_memory)
    rss=$(info_field "$RD_PORT" memory used_memory_rss)
    MEM["$id:rd_used"]=$(per_key $((used - base)) "$keys")
    MEM["$id:rd_rss"]=$(per_key $((rss - base_rss)) "$keys")
    MEM["$id:rd_rate"]=$(echo "$out" | awk '{ print $10 }')
    MEM["$id:rd_keys"]=$(redis-cli -p "$RD_PORT" DBSIZE)
    stop_redis
}

per_key() { # bytes keys
    awk -v b="$1" -v k="$2" 'BEGIN { printf "%.1f", b / k }'
}

memory() {
    memory_set GCRA gcra "$SMALL" 1
    if [ -n "$LARGE" ]; then
        memory_set GCRA gcra "$LARGE" 1 1
    fi
    memory_set window window "$SMALL" 1
    memory_set window window "$SMALL" "$WINDOW_ATTEMPTS"
    if [ -n "$LARGE" ]; then
        memory_set window window "$LARGE" "$WINDOW_ATTEMPTS"
    else
        # Quick run: the snapshot measurements on the small GCRA set.
        rm -rf "$WORK/rl-mem"
        start_rlimitd 1 "$WORK/rl-mem"
        "$LOADER" -p "$RL_PORT" -m gcra -n "$SMALL" >/dev/null
        snapshot_tests "$SMALL"
        stop_rlimitd
    fi
}

print_memory() {
    local id name keys attempts
    echo
    echo "## Memory per key (14-byte keys; rlimitd: RSS growth, Redis: used_memory growth)"
    echo
    echo "| state | keys | calls/key | rlimitd RSS B/key | rlimitd used_memory B/key | Redis used_memory B/key | Redis RSS B/key | Redis used / rlimitd RSS | load calls/s rlimitd | load calls/s Redis |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for id in "${MEM_ROWS[@]}"; do
        IFS=: read -r name keys attempts <<<"$id"
        printf '| %s | %s | %s | %s | %s | %s | %s | %sx | %s | %s |\n' "$name" "$keys" "$attempts" \
            "${MEM["$id:rl_rss"]}" "${MEM["$id:rl_used"]}" "${MEM["$id:rd_used"]}" \
            "${MEM["$id:rd_rss"]}" "$(ratio "${MEM["$id:rd_used"]}" "${MEM["$id:rl_rss"]}")" \
            "${MEM["$id:rl_rate"]}" "${MEM["$id:rd_rate"]}"
        if [ "${MEM["$id:rl_keys"]}" != "$keys" ] || [ "${MEM["$id:rd_keys"]}" != "$keys" ]; then
            echo "(warning: DBSIZE rlimitd ${MEM["$id:rl_keys"]}, Redis ${MEM["$id:rd_keys"]}, expected $keys)"
        fi
        # The largest set of each kind is the one the targets are checked against.
        MEM["last:$name:$attempts:rl"]=${MEM["$id:rl_rss"]}
        MEM["last:$name:$attempts:keys"]=$keys
    done
    local one="${MEM["window:$SMALL:1:rl_rss"]:-}" ten="${MEM["window:$SMALL:$WINDOW_ATTEMPTS:rl_rss"]:-}"
    if [ -n "$one" ] && [ -n "$ten" ]; then
        echo
        awk -v a="$one" -v b="$ten" -v n="$WINDOW_ATTEMPTS" -v k="$SMALL" 'BEGIN {
            ts = (b - a) / (n - 1)
            printf "rlimitd window logs, %d keys: %.1f B per timestamp beyond the first, " \
                "%.1f B per key besides its timestamps (from 1 and %d timestamps a key)\n", \
                k, ts, a - ts, n }'
    fi
}

# ---- 3. snapshots --------------------------------------------------------------------------

SNAP_BASE=""
SNAP_DURING=""
SNAP_LOAD=""
SNAP_NOTE=""

bgsave_running() {
    [ "$(info_field "$RL_PORT" persistence rdb_bgsave_in_progress)" = 1 ]
}

# Keeps a background snapshot running on rlimitd until killed: BGSAVE every 50 ms from one
# redis-cli process over one connection (while a save runs the answer is "Background save already
# in progress"; the next starts at most 50 ms after one ends). This used to be a shell loop that
# started redis-cli, tr and awk 20 times a second to poll INFO first: on 2 CPUs that alone, with
# no save at all, raised the P=1 p99 1.9-2.6x (docs/PERFORMANCE.md), so the ratio measured the
# poller as much as the save.
bgsave_loop() {
    exec redis-cli -p "$RL_PORT" -r -1 -i 0.05 BGSAVE >/dev/null 2>&1
}

# rlimitd holds $1 GCRA keys: p99 of CL.THROTTLE (P=1) with and without a background save, then
# the time a restart takes to load the snapshot.
snapshot_tests() {
    local keys=$1 reply r i t
    reply=$(redis-cli -p "$RL_PORT" BGSAVE 2>&1 || true)
    if [ "$reply" != "Background saving started" ]; then
        SNAP_NOTE="n/a: BGSAVE not available (answered: ${reply:0:80})"
        echo "  snapshot: $SNAP_NOTE" >&2
        return 0
    fi
    for i in $(seq 1 600); do bgsave_running || break; sleep 0.1; done
    echo "  snapshot: p99 without and with a background save of $keys keys" >&2
    r=$(bench_cmd "$RL_PORT" 1 CL.THROTTLE k:__rand_int__ 15 30 60)
    SNAP_BASE=$(echo "$r" | awk '{ print $3 }')
    bgsave_loop &
    BG_PID=$!
    sleep 0.3
    r=$(bench_cmd "$RL_PORT" 1 CL.THROTTLE k:__rand_int__ 15 30 60)
    SNAP_DURING=$(echo "$r" | awk '{ print $3 }')
    kill "$BG_PID" 2>/dev/null || true
    wait "$BG_PID" 2>/dev/null || true
    BG_PID=""
    for i in $(seq 1 600); do bgsave_running || break; sleep 0.1; done
    # A last, complete snapshot of the loaded keys, then a restart that loads it.
    redis-cli -p "$RL_PORT" SAVE >/dev/null
    local dir="$WORK/rl-mem" size
    size=0
    for f in "$dir"/*.snap; do
        if [ -f "$f" ]; then size=$((size + $(stat -c %s "$f"))); fi
    done
    stop_rlimitd
    RL_PORT=$(free_port)
    t=$(date +%s.%N)
    "$RLIMITD" -c "$ROOT/conf/rlimitd.conf" --bind 127.0.0.1 --port "$RL_PORT" --threads 1 \
        --save-interval 0 --dir "$dir" --logfile "$dir/rlimitd.log" &
    RL_PID=$!
    wait_ping "$RL_PORT" 300 >/dev/null
    SNAP_LOAD=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    SNAP_NOTE="snapshot file $size bytes ($(ratio "$size" "$keys") B/key), keys after restart: $(redis-cli -p "$RL_PORT" DBSIZE)"
}

print_snapshot() {
    echo
    echo "## Background snapshot"
    echo
    if [ -z "$SNAP_BASE" ]; then
        echo "${SNAP_NOTE:-n/a: not measured}"
        return
    fi
    echo "| measurement | value |"
    echo "|---|---:|"
    echo "| CL.THROTTLE P=1 p99, no snapshot running | $SNAP_BASE ms |"
    echo "| CL.THROTTLE P=1 p99, background snapshots back to back | $SNAP_DURING ms |"
    echo "| ratio | $(ratio "$SNAP_DURING" "$SNAP_BASE")x |"
    echo "| start to first PONG, loading the snapshot | $SNAP_LOAD s |"
    echo
    echo "$SNAP_NOTE"
}

# ---- 5. targets ----------------------------------------------------------------------------

check() { # description value op limit
    local verdict
    verdict=$(awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN {
        if (v == "" || v == "n/a") { print "n/a"; exit }
        ok = (op == ">=") ? (v >= l) : (v <= l); print ok ? "met" : "MISSED" }')
    printf '| %s | %s | %s %s | %s |\n' "$1" "${2:-n/a}" "$3" "$4" "$verdict"
}

print_targets() {
    local threads
    echo
    echo "## Issue 5 targets"
    echo
    echo "| target | measured | wanted | verdict |"
    echo "|---|---:|---:|---|"
    for threads in $THREADS; do
        check "threads $threads: CL.THROTTLE P=16 / Redis INCR" \
            "$(ratio "${RPS["$threads:16:rlimitd CL.THROTTLE"]}" "${RPS["$threads:16:Redis INCR"]}")" ">=" 1.0
        check "threads $threads: CL.THROTTLE P=16 / EVALSHA gcra" \
            "$(ratio "${RPS["$threads:16:rlimitd CL.THROTTLE"]}" "${RPS["$threads:16:Redis EVALSHA gcra"]}")" ">=" 5
        check "threads $threads: ISALLOWED P=16 / EVALSHA window" \
            "$(ratio "${RPS["$threads:16:rlimitd ISALLOWED"]}" "${RPS["$threads:16:Redis EVALSHA window"]}")" ">=" 5
        check "threads $threads: CL.THROTTLE P=1 / Redis INCR" \
            "$(ratio "${RPS["$threads:1:rlimitd CL.THROTTLE"]}" "${RPS["$threads:1:Redis INCR"]}")" ">=" 1.0
    done
    if [ "$MEMORY" = 1 ]; then
        check "GCRA bytes/key (rlimitd RSS, ${MEM["last:GCRA:1:keys"]} keys)" "${MEM["last:GCRA:1:rl"]}" "<=" 40
        check "window bytes/key, $WINDOW_ATTEMPTS timestamps (${MEM["last:window:$WINDOW_ATTEMPTS:keys"]} keys)" \
            "${MEM["last:window:$WINDOW_ATTEMPTS:rl"]}" "<=" $((40 + 8 * WINDOW_ATTEMPTS))
        check "p99 during background save / p99 without" \
            "$( [ -n "$SNAP_BASE" ] && ratio "$SNAP_DURING" "$SNAP_BASE" || echo n/a)" "<=" 2
        check "seconds to load the snapshot at start" "${SNAP_LOAD:-n/a}" "<=" 2
    fi
}

# ---- run -----------------------------------------------------------------------------------

case "$ONLY" in
"") ;;
snapshot)
    N=${LARGE:-$SMALL}
    rm -rf "$WORK/rl-mem"
    start_rlimitd 1 "$WORK/rl-mem"
    echo "  snapshot only: loading $N GCRA keys" >&2
    "$LOADER" -p "$RL_PORT" -m gcra -n "$N" >/dev/null
    snapshot_tests "$N"
    stop_rlimitd
    print_snapshot
    echo
    echo "| target | measured | wanted | verdict |"
    echo "|---|---:|---:|---|"
    check "p99 during background save / p99 without" \
        "$( [ -n "$SNAP_BASE" ] && ratio "$SNAP_DURING" "$SNAP_BASE" || echo n/a)" "<=" 2
    check "seconds to load the snapshot at start" "${SNAP_LOAD:-n/a}" "<=" 2
    grep -h 'loaded' "$WORK"/rl-mem/rlimitd.log | tail -1 || true
    exit 0
    ;;
window)
    memory_set window window "$SMALL" 1
    memory_set window window "$SMALL" "$WINDOW_ATTEMPTS"
    if [ -n "$LARGE" ]; then
        memory_set window window "$LARGE" "$WINDOW_ATTEMPTS"
    fi
    echo "| state | keys | calls/key | rlimitd RSS B/key | rlimitd used_memory B/key | load calls/s |"
    echo "|---|---:|---:|---:|---:|---:|"
    for id in "${MEM_ROWS[@]}"; do
        IFS=: read -r name keys attempts <<<"$id"
        printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$keys" "$attempts" \
            "${MEM["$id:rl_rss"]}" "${MEM["$id:rl_used"]}" "${MEM["$id:rl_rate"]}"
    done
    exit 0
    ;;
*) echo "compare.sh: --only takes snapshot or window" >&2; exit 2 ;;
esac

T0=$(date +%s)
echo "compare.sh: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)," \
    "Redis $(redis-server --version | awk '{ print $3 }' | tr -d 'v='), $("$RLIMITD" --version 2>/dev/null | head -1)," \
    "threads: $THREADS, quick: $QUICK" >&2
echo
echo "# rlimitd vs Redis $(redis-server --version | awk '{ print $3 }' | tr -d 'v=') on $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(date -u +%Y-%m-%d)"
echo
echo "redis-benchmark runs on the same CPUs as the server it measures."
# Each section is printed as soon as it is measured, so a failure late in a long run keeps the
# earlier ones.
throughput
print_throughput
if [ "$MEMORY" = 1 ]; then
    memory
    print_memory
    print_snapshot
fi
print_targets
echo
echo "## bench_core"
echo
echo '```'
if [ "$QUICK" = 1 ]; then "$CORE" "$SMALL"; else "$CORE"; fi
echo '```'
echo
echo "compare.sh took $(($(date +%s) - T0)) s"
