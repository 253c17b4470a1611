#!/usr/bin/env bash
# redis-cli (Debian's redis-tools) against the real rlimitd (issue 4): one-shot commands, -a
# password, and an interactive session driven through tmux. On start an interactive redis-cli 7
# sends COMMAND DOCS to build its help and hints; a malformed reply would abort it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

TMUX_SESSION="rlimitd-compat-$$"
# A tmux server of our own (other runs on the machine use the default one), kept alive by an idle
# session: a server whose last session was just killed exits, and a new-session racing that exit
# fails with "server exited unexpectedly".
tmux() {
    command tmux -L "$TMUX_SESSION" -f /dev/null "$@"
}
tmux new-session -d -s keeper "sleep 3600"
cleanup_extra() {
    tmux kill-server 2>/dev/null || true
}

cli() {
    timeout 20 redis-cli -h 127.0.0.1 -p "$PORT" "$@" 2>&1
}

cmdstat_calls() { # cmdstat_calls NAME: calls= of cmdstat_NAME, 0 if none
    cli INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:calls=\([0-9]*\).*/\1/p" |
        grep . || echo 0
}

# ---- one-shot ----
start_daemon
check_eq "one-shot PING" "$(cli PING)" "PONG"
check_eq "one-shot CL.THROTTLE (COMMANDS.md, CL.THROTTLE first reply)" \
    "$(cli CL.THROTTLE user123 15 30 60 1 | tr '\n' ' ')" "0 16 15 -1 2 "
check_eq "one-shot ISALLOWED" "$(cli ISALLOWED alice login 60 3)" "1"
check_eq "one-shot PTTL of the window key is positive" \
    "$(v=$(cli PTTL 'hist:{alice}:login'); ((v > 0 && v <= 60000)) && echo yes || echo "$v")" "yes"
check_eq "one-shot unknown command: Redis's text" "$(cli SADD s 1 | head -1)" \
    "ERR unknown command 'SADD', with args beginning with: 's' '1' "
check_eq "one-shot HELLO 3: the map, as redis-cli prints Redis 7.0's" \
    "$(cli HELLO 3 | sed -n '1p;3p' | tr '\n' ' ')" "server rlimitd proto 3 "
check_eq "one-shot HELLO 4: NOPROTO" "$(cli HELLO 4 | head -1)" \
    "NOPROTO unsupported protocol version"
for i in 1 2 3; do cli SET "cli:$i" "$i" >/dev/null; done
check_eq "--scan --pattern" "$(cli --scan --pattern 'cli:*' | sort | tr '\n' ' ')" \
    "cli:1 cli:2 cli:3 "
check_contains "INFO keyspace" "$(cli INFO keyspace | tr -d '\r')" "db0:keys="
check_contains "INFO everything: loading:0" "$(cli INFO everything | tr -d '\r')" $'\nloading:0\n'
check_eq "pipe mode (--pipe)" \
    "$(printf 'SET p1 a\r\nINCR p2\r\nCL.THROTTLE p3 15 30 60\r\n' |
        timeout 20 redis-cli -p "$PORT" --pipe 2>&1 | tail -1)" \
    "errors: 0, replies: 3"

# ---- interactive, through tmux ----
pane() {
    tmux capture-pane -p -t "$TMUX_SESSION" 2>/dev/null || true
}
pane_has() {
    [[ "$(pane)" == *"$1"* ]]
}
docs_before=$(cmdstat_calls command)
tmux new-session -d -s "$TMUX_SESSION" -x 200 -y 50 \
    "redis-cli -h 127.0.0.1 -p $PORT; echo REDIS-CLI-EXITED=\$?; sleep 30"
PROMPT="127.0.0.1:$PORT>"
if wait_until 10 pane_has "$PROMPT"; then
    ok "interactive: prompt appears"
else
    fail "interactive: prompt appears" "$(pane)"
fi
# The COMMAND DOCS of its start-up is counted once the prompt is there.
docs_after=$(cmdstat_calls command)
if ((docs_after > docs_before)); then
    ok "interactive: redis-cli sent COMMAND (DOCS) on start"
else
    fail "interactive: redis-cli sent COMMAND (DOCS) on start" "calls $docs_before -> $docs_after"
fi
tmux send-keys -t "$TMUX_SESSION" 'help cl.throttle' Enter
if wait_until 10 pane_has "summary: Applies a GCRA rate limit"; then
    ok "interactive: help cl.throttle shows the summary from COMMAND DOCS"
else
    fail "interactive: help cl.throttle shows the summary from COMMAND DOCS" "$(pane)"
fi
check_contains "interactive: help cl.throttle shows the syntax" "$(pane)" \
    "CL.THROTTLE key max_burst count period [quantity]"
tmux send-keys -t "$TMUX_SESSION" 'help isallowed' Enter
if wait_until 10 pane_has "ISALLOWED user action period max_count"; then
    ok "interactive: help isallowed"
else
    fail "interactive: help isallowed" "$(pane)"
fi
tmux send-keys -t "$TMUX_SESSION" 'clear' Enter
wait_until 5 pane_has "$PROMPT" || true
# Hints: typing the command name shows its arguments greyed after the cursor.
tmux send-keys -t "$TMUX_SESSION" 'CL.THROTTLE '
if wait_until 10 pane_has "CL.THROTTLE key max_burst count period [quantity]"; then
    ok "interactive: argument hint for CL.THROTTLE"
else
    fail "interactive: argument hint for CL.THROTTLE" "$(pane)"
fi
tmux send-keys -t "$TMUX_SESSION" 'session 15 30 60 1' Enter
if wait_until 10 pane_has "5) (integer) 2"; then
    ok "interactive: CL.THROTTLE reply"
else
    fail "interactive: CL.THROTTLE reply" "$(pane)"
fi
check_contains "interactive: CL.THROTTLE reply is the 5 integers" "$(pane)" \
    $'1) (integer) 0\n2) (integer) 16\n3) (integer) 15\n4) (integer) -1\n5) (integer) 2'
tmux send-keys -t "$TMUX_SESSION" 'MULTI' Enter
tmux send-keys -t "$TMUX_SESSION" 'INCR tmuxwin' Enter
tmux send-keys -t "$TMUX_SESSION" 'EXPIRE tmuxwin 60 NX' Enter
tmux send-keys -t "$TMUX_SESSION" 'EXEC' Enter
if wait_until 10 pane_has "2) (integer) 1"; then
    ok "interactive: MULTI/EXEC"
else
    fail "interactive: MULTI/EXEC" "$(pane)"
fi
check_contains "interactive: prompt shows (TX) while queueing" "$(pane)" "127.0.0.1:$PORT(TX)>"
tmux send-keys -t "$TMUX_SESSION" 'quit' Enter
if wait_until 10 pane_has "REDIS-CLI-EXITED=0"; then
    ok "interactive: quit exits 0"
else
    fail "interactive: quit exits 0" "$(pane)"
fi
tmux kill-session -t "$TMUX_SESSION" 2>/dev/null || true

# --stat reads INFO (keys from db0, used_memory, clients, requests) once per interval.
tmux new-session -d -s "$TMUX_SESSION" -x 200 -y 50 \
    "redis-cli -h 127.0.0.1 -p $PORT --stat -i 0.2; sleep 30"
keys=$(cli DBSIZE)
stat_row() {
    pane | grep -Eq "^$keys +[0-9.]+[BKMG] +[0-9]+ +0 +[0-9]+ \(\+[0-9]+\) +[0-9]+"
}
if wait_until 10 stat_row; then
    ok "--stat: rows with the key count, memory, clients and requests from INFO"
else
    fail "--stat: rows with the key count, memory, clients and requests from INFO" "$(pane)"
fi
tmux kill-session -t "$TMUX_SESSION" 2>/dev/null || true

# SHUTDOWN from redis-cli: no reply, the server drains and exits 0.
out=$(cli SHUTDOWN || true)
check_eq "SHUTDOWN: redis-cli prints nothing" "$out" ""
if wait_until 15 daemon_gone; then
    DRC=0
    wait "$DPID" 2>/dev/null || DRC=$?
    check_eq "SHUTDOWN: daemon exits 0" "$DRC" "0"
else
    fail "SHUTDOWN: daemon exits 0" "still running"
    stop_daemon
fi

# ---- -a password ----
start_daemon --requirepass 'cli secret'
check_eq "-a: PING" "$(cli -a 'cli secret' --no-auth-warning PING)" "PONG"
check_eq "-a: CL.THROTTLE" \
    "$(cli -a 'cli secret' --no-auth-warning CL.THROTTLE pw 15 30 60 | tr '\n' ' ')" \
    "0 16 15 -1 2 "
check_eq "REDISCLI_AUTH: PING" "$(REDISCLI_AUTH='cli secret' cli PING)" "PONG"
check_eq "no -a: NOAUTH" "$(cli PING | head -1)" "NOAUTH Authentication required."
check_contains "wrong -a: AUTH failed, WRONGPASS" "$(cli -a nope --no-auth-warning PING)" \
    "AUTH failed: WRONGPASS invalid username-password pair or user is disabled."
check_eq "--user default --pass" \
    "$(cli --user default --pass 'cli secret' --no-auth-warning PING)" "PONG"
stop_daemon
check_eq "requirepass daemon exits 0 on SIGTERM" "$DRC" "0"

finish
