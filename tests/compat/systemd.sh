#!/usr/bin/env bash
# systemd integration (issue 4):
# - `meson install` (into a DESTDIR) puts the binary in sbin, the configuration in /etc/rlimitd,
#   the unit in lib/systemd/system and the man page rlimitd(8) in man8;
# - `systemd-analyze verify` accepts the unit (its ExecStart pointed at the installed binary,
#   since nothing is installed on the host), and its offline security exposure stays low;
# - the unit has the hardening of Debian's redis-server.service;
# - notify_check.py: the sd_notify datagrams on a test NOTIFY_SOCKET.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

UNIT="$ROOT/systemd/rlimitd.service"

# ---- the unit's contents ----
for line in Type=notify StateDirectory=rlimitd RuntimeDirectory=rlimitd DynamicUser=yes \
    NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes PrivateDevices=yes \
    PrivateUsers=yes ProtectKernelTunables=yes ProtectKernelModules=yes ProtectControlGroups=yes \
    'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' SystemCallFilter=@system-service \
    'SystemCallFilter=~@privileged @resources' \
    'SystemCallFilter=sched_setscheduler sched_setattr setpriority' SystemCallErrorNumber=EPERM LimitNICE=+19 \
    CapabilityBoundingSet= MemoryDenyWriteExecute=yes \
    LimitNOFILE=131072 'ExecReload=/bin/kill -HUP $MAINPID'; do
    if grep -Fxq -- "$line" "$UNIT"; then
        ok "unit has $line"
    else
        fail "unit has $line" "missing from $UNIT"
    fi
done
check_contains "unit: ExecStart runs supervised by systemd, state in /var/lib/rlimitd" \
    "$(grep '^ExecStart=' "$UNIT")" "--supervised systemd --dir /var/lib/rlimitd"

# ---- meson install into a DESTDIR ----
BUILD="$WORK/build"
DEST="$WORK/root"
if meson setup "$BUILD" "$ROOT" --prefix=/usr -Dtests=false >"$WORK/meson.log" 2>&1 &&
    meson install -C "$BUILD" --destdir "$DEST" >>"$WORK/meson.log" 2>&1; then
    ok "meson install --destdir"
else
    fail "meson install --destdir" "$(tail -30 "$WORK/meson.log")"
fi
for f in usr/sbin/rlimitd etc/rlimitd/rlimitd.conf usr/lib/systemd/system/rlimitd.service \
    usr/share/man/man8/rlimitd.8; do
    if [[ -f "$DEST/$f" ]]; then
        ok "installs /$f"
    else
        fail "installs /$f" "not in $(cd "$DEST" 2>/dev/null && find . -type f | head -20)"
    fi
done
if cmp -s "$UNIT" "$DEST/usr/lib/systemd/system/rlimitd.service"; then
    ok "installed unit (--prefix=/usr) is systemd/rlimitd.service"
else
    fail "installed unit (--prefix=/usr) is systemd/rlimitd.service" \
        "$(diff "$UNIT" "$DEST/usr/lib/systemd/system/rlimitd.service" || true)"
fi
check_contains "installed rlimitd --version" "$("$DEST/usr/sbin/rlimitd" --version 2>&1)" "rlimitd "
check_contains "installed configuration passes --test-config" \
    "$("$DEST/usr/sbin/rlimitd" -c "$DEST/etc/rlimitd/rlimitd.conf" --test-config 2>&1)" "is OK"
man_text=$(MANWIDTH=100 man -l "$DEST/usr/share/man/man8/rlimitd.8" 2>&1 | col -b || true)
check_contains "man page renders: NAME" "$man_text" \
    "rlimitd - rate-limit server speaking the Redis protocol"
check_contains "man page renders: SIGNALS" "$man_text" "SIGHUP"
check_eq "man -w finds rlimitd(8)" \
    "$(MANPATH="$DEST/usr/share/man" man -w 'rlimitd(8)' 2>&1 || true)" \
    "$DEST/usr/share/man/man8/rlimitd.8"

# ---- systemd-analyze ----
mkdir -p "$WORK/unit"
sed -e "s|/usr/sbin/rlimitd|$DEST/usr/sbin/rlimitd|g" "$UNIT" >"$WORK/unit/rlimitd.service"
rc=0
out=$(MANPATH="$DEST/usr/share/man" systemd-analyze verify "$WORK/unit/rlimitd.service" 2>&1) ||
    rc=$?
check_eq "systemd-analyze verify: exit status" "$rc" "0"
check_eq "systemd-analyze verify: no complaints" "$out" ""
exposure=$(systemd-analyze security --offline=true "$WORK/unit/rlimitd.service" 2>&1 |
    sed -n 's/.*Overall exposure level for rlimitd.service: \([0-9.]*\).*/\1/p')
if [[ -n "$exposure" ]] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
    ok "systemd-analyze security: exposure $exposure <= 2.0 (Debian's redis-server: 1.2)"
else
    fail "systemd-analyze security: exposure <= 2.0" "got '$exposure'"
fi

# ---- protected default ----
# Bound to a non-loopback address without requirepass, rlimitd must log a loud warning. The
# daemon runs in a private network namespace (unshare -n) so that 0.0.0.0 reaches nothing.
# protected_log ARGS...: the log of a daemon started with ARGS in that namespace.
protected_log() {
    local dir
    dir=$(mktemp -d "$WORK/prot.XXXXXX")
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 60 unshare -n bash -c '
        bin=$1 conf=$2 dir=$3
        shift 3
        "$bin" -c "$conf" --dir "$dir" --port 23456 "$@" >"$dir/log" 2>&1 &
        pid=$!
        for _ in $(seq 150); do
            grep -q "Ready to accept" "$dir/log" && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -TERM "$pid" 2>/dev/null
        wait "$pid"' _ "$RLIMITD" "$ROOT/conf/rlimitd.conf" "$dir" "$@" >/dev/null 2>&1 || true
    cat "$dir/log"
}
# A warning-level line (Redis's " # " marker) that names requirepass.
protected_warning() {
    grep -E '^[0-9]+:M [^#]* # ' | grep -i 'requirepass' || true
}
if timeout 10 unshare -n true 2>/dev/null; then
    log=$(protected_log --bind 0.0.0.0)
    check_contains "protected default: --bind 0.0.0.0 starts" "$log" "Ready to accept"
    if [[ -n "$(printf '%s\n' "$log" | protected_warning)" ]]; then
        ok "protected default: warning for 0.0.0.0 without requirepass"
    else
        fail "protected default: warning for 0.0.0.0 without requirepass" "$log"
    fi
    log=$(protected_log --bind 0.0.0.0 --requirepass x)
    check_eq "protected default: no warning with requirepass" \
        "$(printf '%s\n' "$log" | protected_warning)" ""
    log=$(protected_log --bind 127.0.0.1)
    check_eq "protected default: no warning on loopback" \
        "$(printf '%s\n' "$log" | protected_warning)" ""
else
    fail "protected default: unshare -n available (root)" "cannot make a network namespace"
fi

# ---- the scheduling calls the unit lets through ----
# The unit filters @resources except the calls on its last SystemCallFilter= line. Every call
# from @resources the daemon makes (traced through a start with io-sched-policy batch, a
# background save and a shutdown) must be on that line: under systemd any other fails with
# EPERM, and before the unit said SystemCallErrorNumber=EPERM it killed the daemon (SIGSYS).
allowed=" $(sed -n 's/^SystemCallFilter=\([a-z_][a-z_ ]*\)$/\1/p' "$UNIT") "
resources=$(systemd-analyze syscall-filter @resources | sed -n 's/^ *\([a-z_0-9]*\)$/\1/p' |
    paste -sd, -)
trace="$WORK/sched.strace"
PORT="$(free_port)"
DDIR="$(mktemp -d "$WORK/d.XXXXXX")"
strace -f -qq -o "$trace" -e trace="$resources" "$RLIMITD" -c "$ROOT/conf/rlimitd.conf" \
    --port "$PORT" --bind 127.0.0.1 --dir "$DDIR" --threads 2 --io-sched-policy batch \
    --save-interval 0 >"$DDIR/rlimitd.log" 2>&1 &
DPID=$!
DPIDS+=("$DPID")
bgsave_done() {
    redis-cli -p "$PORT" INFO persistence | tr -d '\r' | grep -qx 'rdb_bgsave_in_progress:0'
}
if wait_until 30 port_open "$PORT"; then
    redis-cli -p "$PORT" CL.THROTTLE sched:k 15 30 60 >/dev/null
    check_eq "traced daemon: BGSAVE" "$(redis-cli -p "$PORT" BGSAVE)" "Background saving started"
    wait_until 30 bgsave_done || true
    check_eq "traced daemon: the background save succeeded" \
        "$(redis-cli -p "$PORT" INFO persistence | tr -d '\r' | grep '^rdb_last_bgsave_status:')" \
        "rdb_last_bgsave_status:ok"
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait_until 30 daemon_gone || kill -KILL "$DPID" 2>/dev/null || true
    wait "$DPID" 2>/dev/null || true
    used=$(sed -n 's/^[0-9]* *\([a-z_0-9]*\)(.*/\1/p' "$trace" | sort -u)
    check_contains "traced daemon: sched_setscheduler seen (SCHED_BATCH, SCHED_IDLE)" \
        "$used" "sched_setscheduler"
    for call in $used; do
        if [[ "$allowed" == *" $call "* ]]; then
            ok "unit allows $call, which the daemon makes"
        else
            fail "unit allows $call, which the daemon makes" "not on '$allowed'"
        fi
    done
else
    fail "traced daemon listens" "$(cat "$DDIR/rlimitd.log")"
fi

# ---- NOTIFY_SOCKET ----
rc=0
out=$(/usr/bin/python3 "$COMPAT_DIR/notify_check.py" 2>&1) || rc=$?
printf '%s\n' "$out" | sed '$d'
last=$(printf '%s\n' "$out" | tail -1)
if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
    PASSED=$((PASSED + BASH_REMATCH[1]))
    FAILED=$((FAILED + BASH_REMATCH[2]))
    SKIPPED=$((SKIPPED + ${BASH_REMATCH[4]:-0}))
else
    fail "notify_check.py ran" "exit $rc: $out"
fi

finish
