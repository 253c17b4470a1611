#!/usr/bin/env bash
# script_scale.sh - do scripts on different keys run in parallel on rlimitd's I/O threads?
#
#   bench/script_scale.sh [--rlimitd BIN] [--no-build] [--build-dir DIR] [--rounds R]
#                         [--seconds S] [--iterations N] [--clients C] [--keys K]
#
# Drives bench/cpu_loop.lua (a deterministic Lua loop, about 1 ms a call at 50000 iterations,
# that writes one declared key) by EVALSHA on K random keys from C redis-benchmark connections,
# at pipeline 1, against four servers, one at a time: rlimitd with 1 and with 2 I/O threads, and
# redis-server with its default one thread and with io-threads 2 (the control: Redis runs every
# script on its main thread, so its factor shows what this measurement reads when nothing can
# scale). A call costs the server hundreds of times what it costs the client, so the client's CPU
# does not decide the outcome, as it does for short scripts on a 2-CPU machine.
#
# Per run: calls/s; the server's CPU time per call and the CPUs it used (utime + stime of all its
# threads from /proc/PID/stat, over the wall time); the client's CPU per call; what everything
# else on the machine used meanwhile (/proc/stat busy time minus server and client); the 1-minute
# load average; for rlimitd, each I/O thread's share of the server's CPU (every task but the
# signal watcher), which shows that the connections, and so the scripts, landed on both
# threads. The kernel spreads connections over the I/O threads (SO_REUSEPORT hashes each
# connection), and a script runs on its client's thread, so with C connections both threads get
# some. Each round runs the four servers in a rotated order, so the machine's drift does not
# always hit the same one; the summary gives each figure's range over the rounds.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

BUILD_DIR="$ROOT/build-bench"
RLIMITD=""
BUILD=1
ROUNDS=3
SECONDS_PER_RUN=5
ITER=50000
CLIENTS=50
KEYS=100000
while [ $# -gt 0 ]; do
    case "$1" in
    --rlimitd) RLIMITD="$2"; shift ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --iterations) ITER="$2"; shift ;;
    --clients) CLIENTS="$2"; shift ;;
    --keys) KEYS="$2"; shift ;;
    *) echo "usage: $0 [--rlimitd BIN] [--no-build] [--build-dir DIR] [--rounds R] [--seconds S] [--iterations N] [--clients C] [--keys K]" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$RLIMITD" ]; then
    if [ "$BUILD" = 1 ]; then
        [ -d "$BUILD_DIR" ] || meson setup "$BUILD_DIR" --buildtype=release -Doptimization=2 \
            -Dtests=false >&2
        ninja -C "$BUILD_DIR" rlimitd >&2
    fi
    RLIMITD="$BUILD_DIR/rlimitd"
fi
RLIMITD=$(realpath "$RLIMITD")
TICK=$(getconf CLK_TCK)
SCRIPT=$(cat "$ROOT/bench/cpu_loop.lua")
WORK=$(mktemp -d)
SRV_PID=""
SRV_PORT=""
cleanup() {
    stop_server "$SRV_PID" "$SRV_PORT"
    rm -rf "$WORK"
}
trap cleanup EXIT

# Starts one server configuration ($1) on a free port: SRV_PID, SRV_PORT.
start() {
    SRV_PORT=$(free_port)
    case "$1" in
    rlimitd-t*)
        # Busy polling off: a spinning thread's CPU time is not work for a call, and this bench
        # divides CPU time by calls. Nothing else is tuned.
        "$RLIMITD" --port "$SRV_PORT" --bind 127.0.0.1 --save "" --dir "$WORK" \
            --threads "${1#rlimitd-t}" --busy-poll-us 0 >"$WORK/server.log" 2>&1 &
        ;;
    redis)
        redis-server --port "$SRV_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$WORK" >"$WORK/server.log" 2>&1 &
        ;;
    redis-io2)
        redis-server --port "$SRV_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$WORK" --io-threads 2 --io-threads-do-reads yes >"$WORK/server.log" 2>&1 &
        ;;
    esac
    SRV_PID=$!
    wait_ping "$SRV_PORT" 10 >/dev/null
}

stop() {
    stop_server "$SRV_PID" "$SRV_PORT"
    SRV_PID=""
}

# Busy and total CPU ticks of the whole machine (all CPUs), from the first line of /proc/stat.
machine_ticks() {
    awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

# "tid ticks" for each thread of process $1 except rlimitd's signal watcher (not an I/O thread).
thread_ticks() {
    local t
    for t in /proc/"$1"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = "rlimitd-signals" ] && continue
        echo "${t##*/} $(sed 's/^.*) //' "$t/stat" | awk '{ print $12 + $13 }')"
    done
}

# Runs N calls against the running server; sets R_* (the run's figures).
measure() { # calls sha
    local n=$1 sha=$2 m0 m1 c0 c1 t0 t1 load
    load=$(cut -d' ' -f1 /proc/loadavg)
    thread_ticks "$SRV_PID" >"$WORK/threads0"
    m0=$(machine_ticks)
    c0=$(cpu_ticks "$SRV_PID")
    t0=$(date +%s.%N)
    /usr/bin/time -f '%U %S' -o "$WORK/client.time" redis-benchmark -p "$SRV_PORT" \
        -c "$CLIENTS" -n "$n" -r "$KEYS" -q EVALSHA "$sha" 1 "k:__rand_int__" "$ITER" \
        >"$WORK/bench.out" 2>&1
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$SRV_PID")
    m1=$(machine_ticks)
    thread_ticks "$SRV_PID" >"$WORK/threads1"
    if grep -q -i 'error' "$WORK/bench.out"; then
        echo "$BENCH_NAME: redis-benchmark reported an error:" >&2
        tr '\r' '\n' <"$WORK/bench.out" | grep -i error | head -3 >&2
        exit 1
    fi
    read -r R_RPS R_US R_CPUS R_CLIENT_US R_OTHERS < <(awk -v n="$n" -v t0="$t0" -v t1="$t1" \
        -v c0="$c0" -v c1="$c1" -v tick="$TICK" -v m0="$m0" -v m1="$m1" \
        -v client="$(cat "$WORK/client.time")" 'BEGIN {
            wall = t1 - t0
            srv = (c1 - c0) / tick
            split(client, cl, " "); cli = cl[1] + cl[2]
            split(m0, a, " "); split(m1, b, " ")
            busy = (b[1] - a[1]) / tick
            others = (busy - srv - cli) / wall
            if (others < 0) others = 0
            printf "%.0f %.1f %.2f %.1f %.2f\n", n / wall, srv * 1e6 / n, srv / wall,
                cli * 1e6 / n, others }')
    R_LOAD=$load
    # Each I/O thread's share of the server's CPU over the run, busiest first.
    R_SPLIT=$(awk 'NR == FNR { before[$1] = $2; next } { print $2 - before[$1] }' \
        "$WORK/threads0" "$WORK/threads1" | sort -rn | awk '{ v[NR] = $1; s += $1 }
        END { if (s == 0) { print "-"; exit }
              for (i = 1; i <= NR; i++) printf "%s%.0f", (i > 1 ? "/" : ""), 100 * v[i] / s
              print "%" }')
}

CONFIGS=(rlimitd-t1 rlimitd-t2 redis redis-io2)
CPUS_MACHINE=$(nproc --all)

# The script's answer on Redis is the reference every server must give.
start redis
SHA=$(redis-cli -p "$SRV_PORT" SCRIPT LOAD "$SCRIPT")
EXPECT=$(redis-cli -p "$SRV_PORT" EVALSHA "$SHA" 1 probe "$ITER")
stop

# Size the runs: N calls take about --seconds on rlimitd with one thread; every run makes N calls.
start rlimitd-t1
redis-cli -p "$SRV_PORT" SCRIPT LOAD "$SCRIPT" >/dev/null
measure $((CLIENTS * 4)) "$SHA"
N=$(awk -v r="$R_RPS" -v s="$SECONDS_PER_RUN" -v c="$CLIENTS" \
    'BEGIN { n = int(r * s); if (n < 10 * c) n = 10 * c; print n }')
stop

echo "# cpu_loop.lua ($ITER iterations) by EVALSHA: rlimitd 1 vs 2 I/O threads, Redis as control"
echo
echo "$N calls a run on $KEYS random keys, $CLIENTS connections, pipeline 1; $ROUNDS round(s);" \
    "machine: $CPUS_MACHINE CPUs; $(date -u +%Y-%m-%dT%H:%MZ); Redis" \
    "$(redis-server --version | awk '{ print $3 }' | tr -d 'v=')."
echo
echo "| round | server | calls/s | server CPU us/call | server CPUs used | CPUs it may use | I/O thread CPU split | client CPU us/call | others' CPUs | load avg 1 min |"
echo "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"
declare -A RPS US CPUS
declare -A ALL # "<figure>" -> each round's value, space separated
for round in $(seq "$ROUNDS"); do
    for i in "${!CONFIGS[@]}"; do
        cfg=${CONFIGS[$(((i + round - 1) % ${#CONFIGS[@]}))]}
        start "$cfg"
        got_sha=$(redis-cli -p "$SRV_PORT" SCRIPT LOAD "$SCRIPT")
        got=$(redis-cli -p "$SRV_PORT" EVALSHA "$SHA" 1 probe "$ITER")
        if [ "$got_sha" != "$SHA" ] || [ "$got" != "$EXPECT" ]; then
            echo "$BENCH_NAME: $cfg answered $got_sha / $got, Redis $SHA / $EXPECT" >&2
            exit 1
        fi
        allowed=$(python3 -c "import os; print(len(os.sched_getaffinity($SRV_PID)))")
        measure "$N" "$SHA"
        stop
        RPS[$cfg]=$R_RPS
        US[$cfg]=$R_US
        CPUS[$cfg]=$R_CPUS
        ALL["us $cfg"]+="$R_US "
        ALL["cpus $cfg"]+="$R_CPUS "
        ALL["others"]+="$R_OTHERS "
        ALL["load"]+="$R_LOAD "
        echo "| $round | $cfg | $R_RPS | $R_US | $R_CPUS | $allowed | $R_SPLIT | $R_CLIENT_US | $R_OTHERS | $R_LOAD |"
    done
    f() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
    ALL["rl rps"]+="$(f "${RPS[rlimitd-t2]}" "${RPS[rlimitd-t1]}") "
    ALL["rl cpus"]+="$(f "${CPUS[rlimitd-t2]}" "${CPUS[rlimitd-t1]}") "
    ALL["rl us"]+="$(f "${US[rlimitd-t2]}" "${US[rlimitd-t1]}") "
    ALL["rd rps"]+="$(f "${RPS[redis-io2]}" "${RPS[redis]}") "
    ALL["rd us"]+="$(f "${US[redis-io2]}" "${US[redis]}") "
    ALL["t1 vs redis"]+="$(f "${US[rlimitd-t1]}" "${US[redis]}") "
    ALL["t2 vs redis rps"]+="$(f "${RPS[rlimitd-t2]}" "${RPS[redis]}") "
done

range() { echo "$1" | tr ' ' '\n' | grep . | sort -g | sed -n '1p;$p' | paste -sd' ' |
    awk '{ print ($1 == $2 || NF == 1) ? $1 : $1 "-" $2 }'; }
echo
echo "Over $ROUNDS round(s) (ranges):"
echo
echo "| figure | range |"
echo "|---|---:|"
echo "| rlimitd calls/s, 2 I/O threads / 1 | $(range "${ALL["rl rps"]}")x |"
echo "| rlimitd server CPUs used, 2 I/O threads / 1 | $(range "${ALL["rl cpus"]}")x |"
echo "| rlimitd server CPU per call, 2 I/O threads / 1 | $(range "${ALL["rl us"]}")x |"
echo "| Redis calls/s, io-threads 2 / 1 (control) | $(range "${ALL["rd rps"]}")x |"
echo "| Redis server CPU per call, io-threads 2 / 1 | $(range "${ALL["rd us"]}")x |"
echo "| server CPU per call, rlimitd 1 thread / Redis | $(range "${ALL["t1 vs redis"]}")x |"
echo "| calls/s, rlimitd 2 I/O threads / Redis | $(range "${ALL["t2 vs redis rps"]}")x |"
for cfg in "${CONFIGS[@]}"; do
    echo "| $cfg: server CPU us/call; CPUs used | $(range "${ALL["us $cfg"]}"); $(range "${ALL["cpus $cfg"]}") |"
done
echo "| CPUs used by everything else during the runs | $(range "${ALL["others"]}") |"
echo "| load average (1 min) at the runs' start | $(range "${ALL["load"]}") |"
echo
echo "With $CPUS_MACHINE CPUs shared with the client and other work, 2 I/O threads can reach at most" \
    "about min(2, CPUs left free) times one thread's calls/s: the ideal factor is below 2 whenever" \
    "'others' CPUs' is above 0."
