#!/usr/bin/env bash
# redis-benchmark (Debian's redis-tools) against the real rlimitd (issue 4).
#
# The default run (`redis-benchmark -p PORT -q`) tests, in order: PING_INLINE, PING_MBULK, SET,
# GET, INCR, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_*, MSET. rlimitd
# supports the first nine (through RPOP) and the LRANGE tests; sets (SADD, SPOP) it does not
# have, and redis-benchmark stops at SADD with Redis's unknown command error. So the supported
# run is `-t ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,lrange`, plus the limiter
# commands themselves given as custom commands. -n 2000 keeps it short; nothing here
# depends on how fast it runs.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

SUPPORTED="ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,lrange"
N=2000

bench() {
    timeout 300 redis-benchmark -h 127.0.0.1 -p "$PORT" "$@" 2>&1
}

info_field() { # info_field SECTION FIELD
    timeout 20 redis-cli -h 127.0.0.1 -p "$PORT" ${AUTH:+-a "$AUTH" --no-auth-warning} INFO "$1" |
        tr -d '\r' | sed -n "s/^$2:\(.*\)/\1/p"
}

# csv_ok NAME OUTPUT TEST...: each TEST has a CSV row with a positive rate; no error lines.
csv_ok() {
    local name=$1 out=$2 t rps
    shift 2
    for t in "$@"; do
        rps=$(printf '%s\n' "$out" | sed -n "s/^\"$t\",\"\([0-9.]*\)\".*/\1/p")
        if [[ -n "$rps" ]] && awk -v r="$rps" 'BEGIN { exit !(r > 0) }'; then
            ok "$name: $t"
        else
            fail "$name: $t" "no result row: $out"
        fi
    done
    if printf '%s\n' "$out" | grep -Eqi 'error|warning'; then
        fail "$name: no errors or warnings" "$out"
    else
        ok "$name: no errors or warnings"
    fi
}

start_daemon
AUTH=""
rc=0
out=$(bench -n "$N" --csv -t "$SUPPORTED") || rc=$?
check_eq "supported tests (-t $SUPPORTED): exit status" "$rc" "0"
csv_ok "supported tests" "$out" PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP \
    "LPUSH (needed to benchmark LRANGE)" "LRANGE_100 (first 100 elements)" \
    "LRANGE_600 (first 600 elements)"

rc=0
out=$(bench -n "$N" -q -P 16 -t "$SUPPORTED") || rc=$?
check_eq "supported tests pipelined (-P 16, -q): exit status" "$rc" "0"
if printf '%s\n' "$out" | grep -qi 'error'; then
    fail "supported tests pipelined: no errors" "$out"
else
    ok "supported tests pipelined: no errors"
fi

rc=0
out=$(bench -n "$N" -r 100000 --csv CL.THROTTLE 'user:__rand_int__' 15 30 60 1) || rc=$?
check_eq "custom CL.THROTTLE (-r 100000): exit status" "$rc" "0"
csv_ok "custom CL.THROTTLE" "$out" "CL.THROTTLE user:__rand_int__ 15 30 60 1"
rc=0
out=$(bench -n "$N" -r 1000 -P 8 --csv ISALLOWED 'user:__rand_int__' login 60 100) || rc=$?
check_eq "custom ISALLOWED (-P 8): exit status" "$rc" "0"
csv_ok "custom ISALLOWED" "$out" "ISALLOWED user:__rand_int__ login 60 100"

calls=$(info_field commandstats 'cmdstat_cl\.throttle' | sed -n 's/^calls=\([0-9]*\).*/\1/p')
check_eq "INFO counts every benchmark CL.THROTTLE" "$calls" "$N"
check_eq "no error replies during the supported runs" "$(info_field stats total_error_replies)" "0"

# The plain default run: the supported tests pass, then it stops at SADD with Redis's error.
rc=0
out=$(bench -n 200 -q) || rc=$?
for t in PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP; do
    check_contains "default run: $t completes" "$out" "$t: "
done
check_contains "default run: stops at SADD with the unknown-command error" "$out" \
    "ERR unknown command 'SADD', with args beginning with:"
check_eq "default run: daemon still answers afterwards" \
    "$(timeout 20 redis-cli -h 127.0.0.1 -p "$PORT" PING)" "PONG"
stop_daemon
check_eq "daemon exits 0 on SIGTERM" "$DRC" "0"

# With a password: -a works; without it, the server's NOAUTH error, non-zero exit.
start_daemon --requirepass 'bench pass'
AUTH='bench pass'
rc=0
out=$(bench -a 'bench pass' -n "$N" --csv -t "$SUPPORTED") || rc=$?
check_eq "-a password: exit status" "$rc" "0"
csv_ok "-a password" "$out" PING_INLINE PING_MBULK SET GET INCR
rc=0
out=$(bench -a 'bench pass' -n "$N" --csv CL.THROTTLE 'user:__rand_int__' 15 30 60) || rc=$?
check_eq "-a password: custom CL.THROTTLE exit status" "$rc" "0"
rc=0
out=$(bench -n 200 -q -t ping) || rc=$?
check_eq "no password: fails" "$rc" "1"
check_contains "no password: NOAUTH error" "$out" "NOAUTH Authentication required."
stop_daemon
check_eq "requirepass daemon exits 0 on SIGTERM" "$DRC" "0"

finish
