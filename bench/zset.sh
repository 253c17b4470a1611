#!/usr/bin/env bash
# zset.sh - sorted sets (issue 14): rlimitd against Redis on this machine, in one run.
#
#   bench/zset.sh [--quick] [--no-build] [--build-dir DIR] [--rounds R] [--rlimitd BIN]
#
# --rlimitd BIN: measure that rlimitd binary (e.g. another worktree's release build) instead of
#   the one built here; zset_load is still built from this tree.
# Builds rlimitd and bench/zset_load (release, -O2) into build-bench/ (or DIR), then, for each
# server in turn on a fresh process (rlimitd with 1 I/O thread, busy polling off; redis-server
# with persistence off), measures with zset_load and prints a Markdown table:
#   a. the rate-limit recipe's transaction (MULTI, ZREMRANGEBYSCORE, ZADD, ZCARD, PEXPIRE, EXEC)
#      over 100k keys, 10 rounds: server CPU time per transaction (utime+stime of the server
#      process, all threads, /proc/PID/stat) and transactions/s; target rlimitd <= 0.5x Redis;
#   b. memory of the recipe's shape at 1M keys (10 entries a key, 13-digit ms members equal to
#      their scores, a PEXPIRE on each key): used_memory growth per key (target rlimitd <= 0.5x),
#      RSS growth per key next to it;
#   c. one 1M-member set: filling it (ZADD of new members), then 500k each of ZADD re-scoring
#      existing members, ZRANK, ZRANGEBYSCORE of about 10 members: CPU per op (target <= 2x).
# --quick: 100k keys for (b) and a 100k-member set for (c), 10k keys for (a) (about a minute).
# --rounds R: run each CPU measurement R times, the median in the table and every round under it
#   (default 3; 1 with --quick).
# If rlimitd answers a command with an error (no sorted sets yet: "unknown command 'zadd'"),
# its cells say so and the ratios are n/a; the script still measures Redis and exits 0.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-bench"
QUICK=0
BUILD_IT=1
ROUNDS=""
RLIMITD=""

usage() {
    sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --no-build) BUILD_IT=0 ;;
    --build-dir) BUILD=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --rlimitd) RLIMITD=$(realpath "$2"); shift ;;
    -h | --help) usage ;;
    *) echo "zset.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

if [ "$QUICK" = 1 ]; then
    RECIPE_KEYS=10000
    MEM_KEYS=100000
    BIG=100000
    OPS=100000
    : "${ROUNDS:=1}"
else
    RECIPE_KEYS=100000
    MEM_KEYS=1000000
    BIG=1000000
    OPS=500000
    : "${ROUNDS:=3}"
fi
RECIPE_ROUNDS=10 # entries per key in the recipe's shape

for tool in redis-server redis-cli meson ninja awk; do
    command -v "$tool" >/dev/null || { echo "zset.sh: '$tool' not found (see bench/README.md)" >&2; exit 1; }
done

if [ "$BUILD_IT" = 1 ]; then
    if [ -d "$BUILD" ]; then
        meson configure "$BUILD" -Dbuildtype=release -Doptimization=2 -Dtests=false >/dev/null
    else
        meson setup "$BUILD" "$ROOT" --buildtype=release -Doptimization=2 -Dtests=false >/dev/null
    fi
    if [ -n "$RLIMITD" ]; then
        ninja -C "$BUILD" bench/zset_load >/dev/null
    else
        ninja -C "$BUILD" rlimitd bench/zset_load >/dev/null
    fi
fi
: "${RLIMITD:=$BUILD/rlimitd}"
LOAD="$BUILD/bench/zset_load"

WORK=$(mktemp -d /tmp/rlimitd-zset-bench.XXXXXX)
PID=""
PORT=""

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# start rlimitd|redis: a fresh server in a fresh directory; sets PID and PORT.
start() {
    local dir="$WORK/$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    PORT=$(free_port)
    if [ "$1" = rlimitd ]; then
        # One I/O thread like Redis's one, and no busy polling: a spinning thread's CPU time is
        # not work done for a request, and this bench divides CPU time by requests.
        "$RLIMITD" -c "$ROOT/conf/rlimitd.conf" --bind 127.0.0.1 --port "$PORT" --threads 1 \
            --busy-poll-us 0 --save-interval 0 --dir "$dir" --logfile "$dir/server.log" &
    else
        redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --dir "$dir" \
            --logfile "$dir/server.log" --daemonize no &
    fi
    PID=$!
    wait_ping "$PORT" 60 >/dev/null
}

stop() {
    stop_server "$PID" "$PORT"
    PID=""
}

cleanup() {
    stop
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

info_field() { # port section field
    redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}


ratio() { # a / b with two decimals, n/a unless both are numbers
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0)
        printf "%.2f", a / b; else print "n/a" }'
}

median() { # numbers on stdin
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

# R[name:server:field]: a measured value or "error: <the server's first error reply>".
declare -A R

# run NAME SERVER zset_load-args...: one zset_load run against the running server; stores
# cpu_us_per_op and ops_per_s, or the error.
run() {
    local name=$1 server=$2 out err
    shift 2
    if out=$("$LOAD" -p "$PORT" -P "$PID" "$@" 2>"$WORK/err"); then
        R["$name:$server:cpu"]=$(awk '{ print $12 }' <<<"$out")
        R["$name:$server:rate"]=$(awk '{ print $8 }' <<<"$out")
        return 0
    fi
    err=$(grep -m1 'first error' "$WORK/err" | sed 's/^zset_load: first error: //; s/, with args.*//' |
        cut -c1-70)
    R["$name:$server:cpu"]="error: ${err:-$(tail -1 "$WORK/err")}"
    R["$name:$server:rate"]="-"
    echo "  $server $name: ${R["$name:$server:cpu"]}" >&2
    return 1
}

# The median over ROUNDS runs (each on a fresh server: the recipe's state grows).
recipe_cpu() {
    local server=$1 i cpus=() rates=()
    for i in $(seq 1 "$ROUNDS"); do
        start "$server"
        if ! run recipe "$server" -m recipe -n "$RECIPE_KEYS" -a "$RECIPE_ROUNDS"; then
            stop
            return
        fi
        cpus+=("${R["recipe:$server:cpu"]}")
        rates+=("${R["recipe:$server:rate"]}")
        stop
    done
    R["recipe:$server:cpu"]=$(printf '%s\n' "${cpus[@]}" | median)
    R["recipe:$server:rate"]=$(printf '%s\n' "${rates[@]}" | median)
    R["recipe:$server:rounds"]="${cpus[*]}"
    R["recipe:$server:rate_rounds"]="${rates[*]}"
}

recipe_memory() {
    local server=$1 used0 rss0 used rss
    start "$server"
    used0=$(info_field "$PORT" memory used_memory)
    rss0=$(rss_bytes "$PID")
    if run memload "$server" -m recipe -n "$MEM_KEYS" -a "$RECIPE_ROUNDS"; then
        sleep 1
        used=$(info_field "$PORT" memory used_memory)
        rss=$(rss_bytes "$PID")
        R["mem:$server:used"]=$(awk -v a="$used" -v b="$used0" -v k="$MEM_KEYS" 'BEGIN { printf "%.1f", (a - b) / k }')
        R["mem:$server:rss"]=$(awk -v a="$rss" -v b="$rss0" -v k="$MEM_KEYS" 'BEGIN { printf "%.1f", (a - b) / k }')
        R["mem:$server:check"]="DBSIZE $(redis-cli -p "$PORT" DBSIZE), ZCARD $(redis-cli -p "$PORT" ZCARD z:000000000007), PTTL>0: $([ "$(redis-cli -p "$PORT" PTTL z:000000000007)" -gt 0 ] && echo yes || echo no)"
    else
        R["mem:$server:used"]=${R["memload:$server:cpu"]}
        R["mem:$server:rss"]="-"
        R["mem:$server:check"]="-"
    fi
    stop
}

big_set() {
    local server=$1 op i vals
    start "$server"
    if ! run fill "$server" -m load -n "$BIG"; then
        for op in zadd zrank zrangebyscore; do
            R["$op:$server:cpu"]=${R["fill:$server:cpu"]}
            R["$op:$server:rate"]="-"
        done
        stop
        return
    fi
    R["big:$server:card"]=$(redis-cli -p "$PORT" ZCARD big)
    for op in zadd zrank zrangebyscore; do
        vals=()
        for i in $(seq 1 "$ROUNDS"); do
            # A new seed each round: the same ZADDs again would re-score to the same scores.
            run "$op" "$server" -m "$op" -n "$OPS" -k "$BIG" -s $((i + 1)) || break
            vals+=("${R["$op:$server:cpu"]}:${R["$op:$server:rate"]}")
        done
        if [ "${#vals[@]}" = "$ROUNDS" ]; then
            R["$op:$server:cpu"]=$(printf '%s\n' "${vals[@]}" | cut -d: -f1 | median)
            R["$op:$server:rate"]=$(printf '%s\n' "${vals[@]}" | cut -d: -f2 | median)
            R["$op:$server:rounds"]=$(printf '%s\n' "${vals[@]}" | cut -d: -f1 | paste -sd' ' -)
        fi
    done
    stop
}

verdict() { # ratio op limit
    awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { if (op == "-") { print "-"; exit }
        if (v == "n/a") { print "n/a"; exit }
        ok = (op == "<=") ? (v <= l) : (v >= l); print ok ? "met" : "MISSED" }'
}

row() { # label key field unit target-op target-limit
    local a=${R["$2:rlimitd:$3"]:-n/a} b=${R["$2:redis:$3"]:-n/a} r
    r=$(ratio "$a" "$b")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$a" "$b" "$r" \
        "$([ "$5" = - ] && echo - || echo "$5 $6")" "$(verdict "$r" "$5" "$6")"
}

T0=$(date +%s)
echo "zset.sh: $(nproc) CPUs, Redis $(redis-server --version | awk '{ print $3 }' | tr -d 'v='), $("$RLIMITD" --version | head -1), quick: $QUICK, rounds: $ROUNDS" >&2
for server in rlimitd redis; do
    echo "  $server: (a) recipe CPU, $RECIPE_KEYS keys x $RECIPE_ROUNDS" >&2
    recipe_cpu "$server"
done
for server in rlimitd redis; do
    echo "  $server: (b) recipe memory, $MEM_KEYS keys x $RECIPE_ROUNDS entries" >&2
    recipe_memory "$server"
done
for server in rlimitd redis; do
    echo "  $server: (c) a $BIG-member set" >&2
    big_set "$server"
done

echo "# Sorted sets: rlimitd vs Redis $(redis-server --version | awk '{ print $3 }' | tr -d 'v=') on $(nproc) CPUs, $(date -u +%Y-%m-%d)"
echo
echo "zset_load (one connection, pipelined batches) runs on the same CPUs as the server. CPU is"
echo "the server's utime+stime (all threads) over the run divided by the ops; rlimitd runs with"
echo "1 I/O thread and busy polling off. Medians of $ROUNDS runs."
echo
echo "| measurement | rlimitd | Redis | rlimitd / Redis | target | verdict |"
echo "|---|---:|---:|---:|---:|---|"
row "(a) recipe transaction, $RECIPE_KEYS keys x $RECIPE_ROUNDS: CPU µs/transaction" recipe cpu "" "<=" 0.5
row "(a) recipe transactions/s" recipe rate "" - ""
row "(b) recipe shape, $MEM_KEYS keys x $RECIPE_ROUNDS entries: used_memory B/key" mem used "" "<=" 0.5
row "(b) same: RSS growth B/key" mem rss "" "<=" 0.5
row "(c) fill a $BIG-member set (ZADD new): CPU µs/op" fill cpu "" "<=" 2
row "(c) ZADD re-score on the $BIG-member set: CPU µs/op" zadd cpu "" "<=" 2
row "(c) ZRANK on it: CPU µs/op" zrank cpu "" "<=" 2
row "(c) ZRANGEBYSCORE (~10 members) on it: CPU µs/op" zrangebyscore cpu "" "<=" 2
row "(c) ZADD re-score ops/s" zadd rate "" - ""
row "(c) ZRANK ops/s" zrank rate "" - ""
row "(c) ZRANGEBYSCORE ops/s" zrangebyscore rate "" - ""
echo
echo "Each round's CPU µs/op (rlimitd | Redis; a fresh server per recipe round):"
for op in recipe zadd zrank zrangebyscore; do
    echo "- $op: ${R["$op:rlimitd:rounds"]:-n/a} | ${R["$op:redis:rounds"]:-n/a}"
done
echo "- recipe transactions/s: ${R["recipe:rlimitd:rate_rounds"]:-n/a} | ${R["recipe:redis:rate_rounds"]:-n/a}"
echo
echo "Checks after (b): rlimitd ${R["mem:rlimitd:check"]:-n/a}; Redis ${R["mem:redis:check"]:-n/a}."
echo "ZCARD big after (c)'s fill: rlimitd ${R["big:rlimitd:card"]:-n/a}; Redis ${R["big:redis:card"]:-n/a}."
echo
echo "zset.sh took $(($(date +%s) - T0)) s"
