#!/usr/bin/env bash
# pubsub.sh - Pub/Sub publish-to-delivery cost, rlimitd beside redis-server in the same run
# (issue 30, bench/README.md "pubsub.sh").
#
#   bench/pubsub.sh [--rounds R] [--threads N] [--pipelines "1 16"] [--payload Z]
#                   [--build-dir DIR] [--no-build]
#
# For 1 subscriber and for 100 subscribers on one channel, and each publisher pipeline depth
# (default 1 and 16): a fresh redis-server and a fresh rlimitd with N I/O threads (default 2,
# so subscribers sit on both threads and most deliveries cross threads), alternating, R rounds
# (default 3). bench/pubsub_load.c publishes the messages (300000 with 1 subscriber, 30000
# with 100; Z bytes each, default 32) while every subscriber reads all of them; the server's CPU
# time (all threads, /proc) over the run is divided by the messages published. Prints a markdown
# table of medians: server CPU per message (us), messages per second, the rlimitd/Redis CPU
# ratio, and the target of issue 30 (ratio at most 1 in both subscriber counts).
# Builds this tree (release, -O2) into build-bench/ unless --no-build; --build-dir DIR instead.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-bench"
BUILD_IT=1
ROUNDS=3
THREADS=2
PIPES="1 16"
PAYLOAD=32

while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --pipelines) PIPES="$2"; shift ;;
    --payload) PAYLOAD="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --no-build) BUILD_IT=0 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) echo "pubsub.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_require redis-server redis-cli meson ninja awk
bench_build rlimitd bench/pubsub_load
LOAD="$BUILD/bench/pubsub_load"

bench_scratch

# start NAME -> PORT, PID (NAME: redis or rlimitd)
start() {
    PORT=$(free_port)
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
            >"$TMP/redis-$PORT.log" 2>&1 &
    else
        "$BUILD/rlimitd" --port "$PORT" --bind 127.0.0.1 --save-interval 0 --dir "$TMP" \
            --threads "$THREADS" >"$TMP/rlimitd-$PORT.log" 2>&1 &
    fi
    PID=$!
    PIDS+=("$PID")
    wait_ping "$PORT" 10 >/dev/null || exit 1
}

stop() {
    stop_server "$PID" "$PORT"
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | head -1; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# run NAME SUBS PIPE -> "us_per_msg msgs_per_s"
run() {
    local n=$((${2} == 1 ? 300000 : 30000))
    start "$1"
    # A short warm-up, so both servers have their buffers and the page cache is warm.
    "$LOAD" -p "$PORT" -s "$2" -n 2000 -d "$3" -z "$PAYLOAD" >/dev/null
    local out
    out=$("$LOAD" -p "$PORT" -s "$2" -n "$n" -d "$3" -z "$PAYLOAD" -P "$PID")
    stop
    echo "$(field us_per_msg <<<"$out") $(field msgs_per_s <<<"$out")"
}

echo "## Pub/Sub: server CPU per message published ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "One channel, one publisher pipelining PUBLISH of $PAYLOAD-byte messages, every subscriber"
echo "reading every message; rlimitd with $THREADS I/O threads. Medians of $ROUNDS alternating rounds;"
echo "CPU is the server's user+system time (all threads) over the run, per message published."
echo
echo "| subscribers | pipeline | rlimitd us/msg | redis-server us/msg | ratio | rlimitd msg/s | redis-server msg/s |"
echo "|---|---|---|---|---|---|---|"
for subs in 1 100; do
    for pipe in $PIPES; do
        rc=() rr=() dc=() dr=()
        for _ in $(seq 1 "$ROUNDS"); do
            read -r a b < <(run rlimitd "$subs" "$pipe")
            rc+=("$a"); rr+=("$b")
            read -r a b < <(run redis "$subs" "$pipe")
            dc+=("$a"); dr+=("$b")
        done
        r=$(printf '%s\n' "${rc[@]}" | median)
        d=$(printf '%s\n' "${dc[@]}" | median)
        ratio=$(awk -v r="$r" -v d="$d" 'BEGIN { printf "%.2f", r / d }')
        printf '| %d | %d | %s (%s) | %s (%s) | %s | %s | %s |\n' "$subs" "$pipe" "$r" \
            "${rc[*]}" "$d" "${dc[*]}" "$ratio" "$(printf '%s\n' "${rr[@]}" | median)" \
            "$(printf '%s\n' "${dr[@]}" | median)"
        echo "$subs $pipe $ratio" >>"$TMP/ratios"
    done
done
echo
echo "Target (issue 30): rlimitd's CPU per message at most redis-server's, 1 and 100 subscribers"
echo
awk '{ printf "- %d subscriber(s), pipeline %d: ratio %s, %s\n", $1, $2, $3, $3 <= 1 ? "met" : "MISSED" }' \
    "$TMP/ratios"
