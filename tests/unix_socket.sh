#!/usr/bin/env bash
# The unix socket listener (CONFIG.md: unixsocket, unixsocketperm) on the real daemon: it serves
# with TCP disabled (port 0), has the configured mode, and is removed at a clean shutdown.
# Ends with "N passed, N failed"; exits 1 on any failure.
set -euo pipefail
bin=${RLIMITD_BIN:?set RLIMITD_BIN}
dir=$(mktemp -d)
pid=
cleanup() {
    [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
pass=0
fail=0
check() {
    local what=$1 got=$2 want=$3
    if [[ "$got" == "$want" ]]; then
        pass=$((pass + 1))
    else
        echo "FAIL: $what: got '$got', want '$want'"
        fail=$((fail + 1))
    fi
}
sock="$dir/rlimitd.sock"
"$bin" --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$dir" --save-interval 0 \
    >"$dir/log" 2>&1 &
pid=$!
for ((i = 0; i < 200; i++)); do
    [[ -S "$sock" ]] && redis-cli -s "$sock" PING >/dev/null 2>&1 && break
    sleep 0.05
done
check "PING over the socket" "$(redis-cli -s "$sock" PING)" "PONG"
check "socket mode" "$(stat -c %a "$sock")" "700"
check "CL.THROTTLE over the socket" "$(redis-cli -s "$sock" CL.THROTTLE u 1 1 60 | tr '\n' ' ')" \
    "0 2 1 -1 60 "
check "no TCP listener with port 0" "$(grep -c 'Listening on [0-9:.]*:' "$dir/log" || true)" "0"
redis-cli -s "$sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
status=0
wait "$pid" || status=$?
pid=
check "exit status after SHUTDOWN" "$status" "0"
check "socket removed at shutdown" "$([[ -e "$sock" ]] && echo present || echo gone)" "gone"
echo "unix_socket: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
