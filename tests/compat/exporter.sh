#!/usr/bin/env bash
# prometheus-redis-exporter (Debian) scraping the real rlimitd (issue 4): redis_up 1, clients,
# memory, keyspace and per-command call counts, with and without requirepass.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

EXPORTER=${EXPORTER:-prometheus-redis-exporter}
EPID=""
cleanup_extra() {
    if [[ -n "$EPID" ]]; then
        kill -KILL "$EPID" 2>/dev/null || true
    fi
}

cli() {
    timeout 20 redis-cli -h 127.0.0.1 -p "$PORT" ${AUTH:+-a "$AUTH" --no-auth-warning} "$@"
}

metrics_up() {
    curl -sf --max-time 5 "http://127.0.0.1:$EPORT/metrics" >/dev/null
}

# start_exporter [exporter flags...]: on its own free loopback port.
start_exporter() {
    EPORT=$(free_port)
    "$EXPORTER" -redis.addr "redis://127.0.0.1:$PORT" -web.listen-address "127.0.0.1:$EPORT" \
        "$@" >"$WORK/exporter.log" 2>&1 &
    EPID=$!
    if ! wait_until 15 metrics_up; then
        fail "exporter serves /metrics" "$(cat "$WORK/exporter.log")"
        return 1
    fi
}

stop_exporter() {
    kill -TERM "$EPID" 2>/dev/null || true
    wait "$EPID" 2>/dev/null || true
    EPID=""
}

scrape() {
    curl -sf --max-time 30 "http://127.0.0.1:$EPORT/metrics"
}

# metric SCRAPE NAME_WITH_LABELS: the value of that exact series, or "missing".
metric() {
    printf '%s\n' "$1" |
        awk -v m="$2" '$1 == m { print $2; found = 1 } END { if (!found) print "missing" }'
}

# ---- a plain rlimitd ----
start_daemon
AUTH=""
for _ in $(seq 7); do cli CL.THROTTLE "exp:user" 15 30 60 1 >/dev/null; done
for _ in $(seq 3); do cli ISALLOWED alice login 60 5 >/dev/null; done
cli SET exp:plain 1 >/dev/null
cli CL.THROTTLE exp:user 1 >/dev/null || true # one arity error: rejected, counted per command
keys=$(cli DBSIZE)

start_exporter -redis-only-metrics
m=$(scrape)
check_eq "redis_up" "$(metric "$m" redis_up)" "1"
check_eq "redis_exporter_last_scrape_error" \
    "$(metric "$m" 'redis_exporter_last_scrape_error{err=""}')" "0"
v=$(metric "$m" redis_connected_clients)
if [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 1)); then
    ok "redis_connected_clients >= 1"
else
    fail "redis_connected_clients >= 1" "$v"
fi
v=$(metric "$m" redis_memory_used_bytes)
if awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then
    ok "redis_memory_used_bytes > 0"
else
    fail "redis_memory_used_bytes > 0" "$v"
fi
check_eq "redis_db_keys db0 = DBSIZE" "$(metric "$m" 'redis_db_keys{db="db0"}')" "$keys"
check_eq "redis_db_keys_expiring db0 (the two limiter keys)" \
    "$(metric "$m" 'redis_db_keys_expiring{db="db0"}')" "2"
check_eq "redis_commands_total cl.throttle" \
    "$(metric "$m" 'redis_commands_total{cmd="cl.throttle"}')" "7"
check_eq "redis_commands_total isallowed" \
    "$(metric "$m" 'redis_commands_total{cmd="isallowed"}')" "3"
check_eq "redis_commands_rejected_calls_total cl.throttle" \
    "$(metric "$m" 'redis_commands_rejected_calls_total{cmd="cl.throttle"}')" "1"
check_eq "redis_errors_total ERR" "$(metric "$m" 'redis_errors_total{err="ERR"}')" "1"
check_eq "redis_loading_dump_file" "$(metric "$m" redis_loading_dump_file)" "0"
check_contains "redis_instance_info: version and mode" "$m" \
    'redis_mode="standalone",redis_version="7.0.0"'
check_contains "redis_instance_info: tcp_port" "$m" "tcp_port=\"$PORT\""
if grep -Eq 'level=(error|warning)' "$WORK/exporter.log"; then
    fail "exporter logs no errors or warnings" "$(cat "$WORK/exporter.log")"
else
    ok "exporter logs no errors or warnings"
fi
stop_exporter

# Client list metrics (-export-client-list) read CLIENT LIST.
start_exporter -redis-only-metrics -export-client-list
cli CLIENT SETNAME x >/dev/null
m=$(scrape)
check_contains "-export-client-list: the exporter's own connection" "$m" \
    'redis_connected_clients_details{cmd="client"'
check_eq "-export-client-list: redis_up" "$(metric "$m" redis_up)" "1"
if printf '%s\n' "$m" | grep -Eq '^redis_connected_clients_details\{.*omem="[0-9]+"'; then
    ok "-export-client-list: omem from CLIENT LIST"
else
    fail "-export-client-list: omem from CLIENT LIST" \
        "$(printf '%s\n' "$m" | grep '^redis_connected_clients_details' || true)"
fi
stop_exporter
stop_daemon
check_eq "daemon exits 0 on SIGTERM" "$DRC" "0"

# ---- with requirepass ----
start_daemon --requirepass 'exp pass'
AUTH='exp pass'
cli CL.THROTTLE exp:pw 15 30 60 >/dev/null
start_exporter -redis-only-metrics -redis.password 'exp pass'
m=$(scrape)
check_eq "requirepass, -redis.password: redis_up" "$(metric "$m" redis_up)" "1"
check_eq "requirepass, -redis.password: cl.throttle calls" \
    "$(metric "$m" 'redis_commands_total{cmd="cl.throttle"}')" "1"
stop_exporter
printf '{"redis://127.0.0.1:%s": "exp pass"}\n' "$PORT" >"$WORK/passwords.json"
start_exporter -redis-only-metrics -redis.password-file "$WORK/passwords.json"
m=$(scrape)
check_eq "requirepass, -redis.password-file (README): redis_up" "$(metric "$m" redis_up)" "1"
stop_exporter
start_exporter -redis-only-metrics
m=$(scrape)
check_eq "requirepass, no password: redis_up 0" "$(metric "$m" redis_up)" "0"
check_eq "requirepass, no password: the scrape error is NOAUTH" \
    "$(printf '%s\n' "$m" | grep '^redis_exporter_last_scrape_error{' |
        sed 's/.*{err="\(.*\)"} \(.*\)/\2 \1/')" \
    "1 NOAUTH Authentication required."
stop_exporter
stop_daemon
check_eq "requirepass daemon exits 0 on SIGTERM" "$DRC" "0"

finish
