#!/usr/bin/env bash
# test_measure.sh - numbers for issue 3's closing note, printed, never asserted (only the
# functional results under them are: every save succeeds, every load is complete):
#   - snapshot bytes per key for 1M GCRA keys with 14-byte keys;
#   - SAVE time and load time (start to first PONG, and the daemon's own "loaded in") for 1M
#     keys, and for 10M with RLIMITD_BIG=1;
#   - p99 of CL.THROTTLE under redis-benchmark (50 clients, no pipelining, 1M requests on random
#     keys) with and without background saves of the whole keyspace running back to back;
#   - for reference, Debian's redis-server on the same keys as strings with a TTL (RDB size, SAVE
#     and load time), when redis-server is installed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export START_TIMEOUT=600
BENCH_N=${RLIMITD_BENCH_N:-1000000}
RESULTS=()

result() {
    RESULTS+=("$*")
    echo "# MEASURED: $*"
}

ms_since() {
    echo $((($(date +%s%N) - $1) / 1000000))
}

# pipe_keys N PREFIX: N CL.THROTTLE calls on distinct 14-byte keys PREFIX + digits.
pipe_keys() {
    local digits=$((14 - ${#2}))
    "${SNAPFILE[@]}" resp-throttle "$1" "$2" "$digits" |
        timeout 1200 redis-cli -h 127.0.0.1 -p "$PORT" --pipe >"$ROOT/pipe.out" 2>&1 || true
}

# p99 (and rps) of CL.THROTTLE on random keys: "rps p50 p99 max".
bench_p99() {
    timeout 600 redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -n "$BENCH_N" -r 1000000 --csv \
        CL.THROTTLE 'rl:__rand_int__' 0 1 86400 2>/dev/null | tail -1 | tr -d '"' |
        awk -F, '{ print $2, $5, $7, $8 }'
}

measure() { # N LABEL
    local n=$1 label=$2 dir=$ROOT/m$1 t0 ms size load_ms loaded
    mkdir -p "$dir"
    start_daemon "m$n" "$dir" --save-interval 0 || { bad "$label: daemon did not start"; return; }
    t0=$(date +%s%N)
    pipe_keys "$n" "rl:"
    note "$label: $n keys inserted in $(ms_since "$t0") ms"
    expect_eq "$(rcli DBSIZE)" "$n" "$label: $n keys"
    t0=$(date +%s%N)
    expect_eq "$(rcli SAVE)" "OK" "$label: SAVE"
    ms=$(ms_since "$t0")
    size=$(stat -c %s "$dir/rlimitd.snap")
    result "$label: SAVE $ms ms, snapshot $size bytes," \
        "$(awk -v s="$size" -v n="$n" 'BEGIN { printf "%.2f", s / n }') bytes/key," \
        "RSS $(($(ps -o rss= -p "$PID") / 1024)) MiB"
    t0=$(date +%s%N)
    expect_eq "$(rcli BGSAVE)" "Background saving started" "$label: BGSAVE"
    while [[ "$(info_field rdb_bgsave_in_progress)" != 0 ]]; do
        sleep 0.02
        if (($(ms_since "$t0") > 600000)); then
            break
        fi
    done
    result "$label: BGSAVE $(ms_since "$t0") ms (idle server)"
    expect_eq "$(info_field rdb_last_bgsave_status)" "ok" "$label: BGSAVE status"
    crash_daemon
    t0=$(date +%s%N)
    if start_daemon "m$n" "$dir" --save-interval 0; then
        load_ms=$(ms_since "$t0")
        loaded=$(last_start_log | sed -n 's/.*loaded: .* in \([0-9.]*\) seconds.*/\1/p')
        result "$label: start with the snapshot to first PONG $load_ms ms (load itself ${loaded}s)"
        expect_eq "$(rcli DBSIZE)" "$n" "$label: every key loaded"
    else
        bad "$label: restart failed"
        return
    fi
    if [[ "$n" -ge 1000000 ]]; then
        local r
        r=$(bench_p99)
        result "$label: CL.THROTTLE, no save running:     rps p50 p99 max (ms) = $r"
        # Background saves back to back while the same benchmark runs.
        bench_p99 >"$ROOT/bench.out" &
        local bench=$! saves=0 i
        PIDS+=("$bench")
        while alive "$bench"; do
            if [[ "$(rcli BGSAVE 2>/dev/null)" == "Background saving started" ]]; then
                saves=$((saves + 1))
            fi
            for ((i = 0; i < 3000; i++)); do
                [[ "$(info_field rdb_bgsave_in_progress)" == 0 ]] && break
                sleep 0.01
            done
        done
        wait_exit "$bench" 600
        result "$label: CL.THROTTLE, BGSAVE back to back: rps p50 p99 max (ms) =" \
            "$(cat "$ROOT/bench.out")" \
            "($saves saves of $n keys during the run)"
        expect_eq "$(info_field rdb_last_bgsave_status)" "ok" "$label: saves under load succeed"
        r=$(bench_p99)
        result "$label: CL.THROTTLE, no save running (again): rps p50 p99 max (ms) = $r"
    fi
    rcli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait_exit "$PID" 60
    rm -rf "$dir"
}

# The same keys in redis-server: a string holding a TAT, with the same TTL.
redis_reference() {
    local n=$1 dir=$ROOT/redis$1 port t0 rpid size
    command -v redis-server >/dev/null || { note "no redis-server: reference skipped"; return; }
    mkdir -p "$dir"
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
        --daemonize no >"$ROOT/redis.log" 2>&1 &
    rpid=$!
    PIDS+=("$rpid")
    for ((i = 0; i < 200; i++)); do
        [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]] && break
        sleep 0.05
    done
    python3 - "$n" <<'PY' | timeout 1200 redis-cli -p "$port" --pipe >/dev/null 2>&1 || true
import sys, time
n = int(sys.argv[1])
tat = b"%d" % (time.time_ns() + 86400 * 10**9)
out = sys.stdout.buffer
chunk = []
for i in range(n):
    k = b"rl:%011d" % i
    chunk.append(b"*5\r\n$3\r\nSET\r\n$14\r\n" + k + b"\r\n$%d\r\n" % len(tat) + tat +
                 b"\r\n$2\r\nPX\r\n$8\r\n86400000\r\n")
    if len(chunk) == 10000:
        out.write(b"".join(chunk))
        chunk = []
out.write(b"".join(chunk))
PY
    t0=$(date +%s%N)
    redis-cli -p "$port" SAVE >/dev/null
    local save_ms
    save_ms=$(ms_since "$t0")
    size=$(stat -c %s "$dir/dump.rdb")
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait_exit "$rpid" 60
    t0=$(date +%s%N)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
        --daemonize no >>"$ROOT/redis.log" 2>&1 &
    rpid=$!
    PIDS+=("$rpid")
    for ((i = 0; i < 60000; i++)); do
        [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]] && break
        sleep 0.01
    done
    result "redis-server reference, $n keys: SAVE $save_ms ms, RDB $size bytes" \
        "($(awk -v s="$size" -v n="$n" 'BEGIN { printf "%.2f", s / n }') bytes/key)," \
        "start to first PONG $(ms_since "$t0") ms"
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait_exit "$rpid" 60
    rm -rf "$dir"
}

note "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ { print $2 }') GiB RAM;" \
    "redis-benchmark and rlimitd share the CPUs"
measure 1000000 "1M keys"
redis_reference 1000000
if [[ "${RLIMITD_BIG:-}" == 1 ]]; then
    measure 10000000 "10M keys"
    redis_reference 10000000
else
    note "10M keys: set RLIMITD_BIG=1 to measure (a few minutes, about 2 GB of memory)"
fi

echo
echo "# ---- measurements ----"
for r in "${RESULTS[@]}"; do
    echo "# $r"
done
finish
