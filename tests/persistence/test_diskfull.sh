#!/usr/bin/env bash
# test_diskfull.sh - SNAPSHOT.md / issue 3: "A full disk or an unwritable dir fails the save with a
# logged reason and an error reply; the daemon keeps serving and keeps the old snapshot."
#
#   A. the --dir is replaced by a regular file while the daemon runs (no root needed);
#   B. the --dir is a tmpfs remounted read-only (root);
#   C. the --dir is a 300 KiB tmpfs and the keyspace no longer fits (root).
# In each: SAVE answers -ERR with the reason, BGSAVE reports rdb_last_bgsave_status:err, the server
# keeps answering, the old snapshot stays byte-identical, no temporary file is left; SHUTDOWN
# (without NOSAVE) refuses with "ERR Errors trying to SHUTDOWN. Check logs." and the server keeps
# running; SHUTDOWN NOSAVE (or SIGTERM) stops it. Mount cases are skipped when not root or when
# mount fails; everything mounted is unmounted on exit.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SHUTDOWN_REFUSED="ERR Errors trying to SHUTDOWN. Check logs."

# failing_saves CASE DIR SNAPCOPY REASON: SAVE, BGSAVE, SHUTDOWN against a directory that cannot
# take the snapshot; SNAPCOPY is the previous snapshot's expected bytes, at DIR/rlimitd.snap.
failing_saves() {
    local name=$1 dir=$2 copy=$3 reason=$4 r
    r=$(rcli SAVE)
    expect_match "$r" "^ERR .*$reason" "$name: SAVE answers an error naming the reason"
    expect_match "$(last_start_log | grep 'SAVE failed' | tail -1)" "$reason" \
        "$name: the failed SAVE is logged with its reason"
    expect_eq "$(rcli BGSAVE)" "Background saving started" "$name: BGSAVE starts"
    expect_true "$name: the background save ends" wait_bgsave
    expect_eq "$(info_field rdb_last_bgsave_status)" "err" "$name: rdb_last_bgsave_status:err"
    expect_match "$(last_start_log | grep 'Background save failed' | tail -1)" "$reason" \
        "$name: the failed BGSAVE is logged with its reason"
    expect_eq "$(rcli PING)" "PONG" "$name: still answering"
    expect_eq "$(rcli CL.THROTTLE after 15 30 60 | flat)" "0 16 15 -1 2" \
        "$name: limits still work"
    expect_true "$name: the old snapshot is byte-identical" cmp -s "$dir/rlimitd.snap" "$copy"
}

# shutdown_refused CASE DIR SNAPCOPY: SHUTDOWN must refuse while the snapshot cannot be written.
shutdown_refused() {
    local name=$1 dir=$2 copy=$3 r
    r=$(rcli SHUTDOWN 2>&1 || true)
    expect_eq "$r" "$SHUTDOWN_REFUSED" "$name: SHUTDOWN refuses"
    sleep 0.3
    if alive "$PID" && [[ "$(rcli PING 2>/dev/null)" == PONG ]]; then
        ok "$name: the server keeps running after the refused SHUTDOWN"
    else
        bad "$name: the server stopped after SHUTDOWN although the snapshot cannot be written"
        wait_exit "$PID" 30
        note "$name: exit code $WAIT_RC; log: $(last_start_log | tail -4 | tr '\n' '|')"
    fi
    expect_true "$name: the old snapshot is still byte-identical" \
        cmp -s "$dir/rlimitd.snap" "$copy"
}

# ---- A. the directory becomes a regular file ----
A=$ROOT/a
mkdir -p "$A"
start_daemon a "$A" --save-interval 0 || { bad "A: daemon did not start"; finish; }
rcli SET k 1 >/dev/null
rcli CL.THROTTLE t 15 30 60 >/dev/null
expect_eq "$(rcli SAVE)" "OK" "A: first SAVE"
mv "$A" "$ROOT/a.moved"
: >"$A"
cp "$ROOT/a.moved/rlimitd.snap" "$ROOT/a.copy"
# The old snapshot is now in a.moved: failing_saves checks it there.
failing_saves_moved() {
    local r
    r=$(rcli SAVE)
    expect_match "$r" "^ERR .*$A.*Not a directory" "A: SAVE answers an error naming path and reason"
    expect_eq "$(rcli BGSAVE)" "Background saving started" "A: BGSAVE starts"
    expect_true "A: the background save ends" wait_bgsave
    expect_eq "$(info_field rdb_last_bgsave_status)" "err" "A: rdb_last_bgsave_status:err"
    expect_eq "$(rcli PING)" "PONG" "A: still answering"
    r=$(rcli SHUTDOWN 2>&1 || true)
    expect_eq "$r" "$SHUTDOWN_REFUSED" "A: SHUTDOWN refuses"
    expect_eq "$(rcli PING)" "PONG" "A: the server keeps running after the refused SHUTDOWN"
    expect_match "$(last_start_log | grep -i 'shutdown' | tail -1)" 'Not a directory' \
        "A: the log says why SHUTDOWN was refused"
}
failing_saves_moved
# Back to a directory: saving works again and the status recovers.
rm -f "$A"
mv "$ROOT/a.moved" "$A"
expect_eq "$(rcli BGSAVE)" "Background saving started" "A: BGSAVE once the directory is back"
wait_bgsave || true
expect_eq "$(info_field rdb_last_bgsave_status)" "ok" "A: rdb_last_bgsave_status back to ok"
expect_true "A: the new snapshot verifies" "$RLIMITD_BIN" --check-snapshot "$A/rlimitd.snap"
cp "$A/rlimitd.snap" "$ROOT/a.copy2"
mv "$A" "$ROOT/a.moved"
: >"$A"
rcli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait_exit "$PID" 30
expect_eq "$WAIT_RC" "0" "A: SHUTDOWN NOSAVE stops it"
expect_true "A: the snapshot survives byte-identical" cmp -s "$ROOT/a.moved/rlimitd.snap" \
    "$ROOT/a.copy2"

# ---- B. a read-only filesystem ----
B=$ROOT/b
if try_mount_tmpfs "$B" size=1m; then
    start_daemon b "$B" --save-interval 0 || { bad "B: daemon did not start"; finish; }
    rcli SET k 1 >/dev/null
    expect_eq "$(rcli SAVE)" "OK" "B: first SAVE"
    cp "$B/rlimitd.snap" "$ROOT/b.copy"
    rcli SET k2 2 >/dev/null
    if mount -o remount,ro "$B" 2>"$ROOT/mount.err"; then
        failing_saves B "$B" "$ROOT/b.copy" 'Read-only file system'
        shutdown_refused B "$B" "$ROOT/b.copy"
        expect_eq "$(ls "$B")" "rlimitd.snap" "B: nothing else in the directory"
        # SIGTERM cannot be refused: the final save fails, the old file must survive.
        kill -TERM "$PID"
        wait_exit "$PID" 60
        if [[ "$WAIT_RC" == running ]]; then
            bad "B: SIGTERM did not stop the daemon within 60 s"
        else
            ok "B: SIGTERM stops the daemon (exit code $WAIT_RC)"
        fi
        expect_match "$(last_start_log | grep -i 'final snapshot' | tail -1)" \
            'Read-only file system' "B: the failed final save is logged"
        expect_true "B: the old snapshot survives SIGTERM byte-identical" \
            cmp -s "$B/rlimitd.snap" "$ROOT/b.copy"
    else
        skip "B: remount read-only failed: $(cat "$ROOT/mount.err")"
        crash_daemon
    fi
else
    skip "B: read-only filesystem (needs root and mount)"
fi

# ---- C. a full filesystem ----
C=$ROOT/c
if try_mount_tmpfs "$C" size=300k; then
    start_daemon c "$C" --save-interval 0 || { bad "C: daemon did not start"; finish; }
    rcli SET k 1 >/dev/null
    rcli ISALLOWED u a 3600 5 >/dev/null
    expect_eq "$(rcli SAVE)" "OK" "C: first SAVE"
    cp "$C/rlimitd.snap" "$ROOT/c.copy"
    # 20,000 GCRA keys of 14 bytes: a 640 KB snapshot in a 300 KiB filesystem.
    "${SNAPFILE[@]}" resp-throttle 20000 "fl:" 11 |
        timeout 120 redis-cli -h 127.0.0.1 -p "$PORT" --pipe >/dev/null 2>&1 || true
    expect_eq "$(rcli DBSIZE)" "20002" "C: 20,000 keys added"
    failing_saves C "$C" "$ROOT/c.copy" 'No space left on device'
    expect_eq "$(ls "$C")" "rlimitd.snap" "C: no temporary file left behind"
    deleted=$(find "/proc/$PID/fd" -lname '*(deleted)' 2>/dev/null | wc -l)
    expect_eq "$deleted" "0" "C: no descriptor left open on a deleted temporary file"
    used=$(df -k --output=used "$C" | tail -1 | tr -d ' ')
    expect_true "C: the space of the failed saves is given back (${used} KiB used)" \
        test "$used" -le 16
    # Periodic saves fail the same way and clean up after themselves.
    expect_eq "$(rcli CONFIG SET save-interval 1)" "OK" "C: CONFIG SET save-interval 1"
    # The BGSAVE above already logged one failure: wait for one more, the periodic save's (a
    # bound of 60 s for a starved machine).
    failed=$(last_start_log | grep -c 'Background save failed.*No space' || true)
    rcli SET k 3 >/dev/null
    for ((i = 0; i < 600; i++)); do
        (($(last_start_log | grep -c 'Background save failed.*No space' || true) > failed)) && break
        sleep 0.1
    done
    rcli CONFIG SET save-interval 0 >/dev/null
    wait_bgsave || true
    if (($(last_start_log | grep -c 'Background save failed.*No space' || true) > failed)); then
        ok "C: the periodic save failed and logged why"
    else
        bad "C: no failed periodic save in the log"
    fi
    expect_eq "$(ls "$C")" "rlimitd.snap" "C: still no temporary file"
    expect_true "C: the old snapshot is still byte-identical" \
        cmp -s "$C/rlimitd.snap" "$ROOT/c.copy"
    # Room again: saving works again.
    expect_eq "$(rcli FLUSHALL)" "OK" "C: FLUSHALL"
    expect_eq "$(rcli SAVE)" "OK" "C: SAVE works once the keyspace fits"
    cp "$C/rlimitd.snap" "$ROOT/c.copy"
    # Full again, then SHUTDOWN: its final save cannot fit.
    "${SNAPFILE[@]}" resp-throttle 20000 "fl:" 11 |
        timeout 120 redis-cli -h 127.0.0.1 -p "$PORT" --pipe >/dev/null 2>&1 || true
    expect_eq "$(rcli DBSIZE)" "20000" "C: full again"
    shutdown_refused C "$C" "$ROOT/c.copy"
    if alive "$PID"; then
        rcli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
        wait_exit "$PID" 30
        expect_eq "$WAIT_RC" "0" "C: SHUTDOWN NOSAVE stops it"
        expect_true "C: the snapshot survives byte-identical" \
            cmp -s "$C/rlimitd.snap" "$ROOT/c.copy"
    fi
    expect_true "C: the surviving snapshot verifies" \
        "$RLIMITD_BIN" --check-snapshot "$C/rlimitd.snap"
else
    skip "C: full filesystem (needs root and mount)"
fi

finish
