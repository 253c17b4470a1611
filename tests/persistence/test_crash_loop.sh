#!/usr/bin/env bash
# test_crash_loop.sh - SNAPSHOT.md: "a crash at any moment leaves either the old or the new snapshot,
# never a torn one". A background save every second (--save-interval 1) under continuous
# redis-benchmark load (CL.THROTTLE on random keys, and INCR), and kill -9 at random moments,
# RLIMITD_CRASHES times (default 25). A million keys are loaded first so that a save takes a good
# part of each second and many kills land in the middle of one. After every kill the snapshot
# must verify (rlimitd --check-snapshot), and the next start must load it completely.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CRASHES=${RLIMITD_CRASHES:-25}
D=$ROOT/crash
SNAP=$D/rlimitd.snap
mkdir -p "$D"
BENCH=()

stop_bench() {
    local pid
    for pid in "${BENCH[@]}"; do
        kill -9 "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH[@]}"; do
        wait_exit "$pid" 30
    done
    BENCH=()
}

start_bench() {
    redis-benchmark -h 127.0.0.1 -p "$PORT" -c 8 -P 16 -n 100000000 -r 300000 -q \
        CL.THROTTLE 'rl:__rand_int__' 100 1 3600 >/dev/null 2>&1 &
    BENCH+=("$!")
    PIDS+=("$!")
    redis-benchmark -h 127.0.0.1 -p "$PORT" -c 4 -P 16 -n 100000000 -r 50000 -q \
        INCR 'ctr:__rand_int__' >/dev/null 2>&1 &
    BENCH+=("$!")
    PIDS+=("$!")
}

# Temporary files (rlimitd.snap.tmp-PID) in the directory.
count_temps() {
    local f n=0
    for f in "$D"/rlimitd.snap.tmp-*; do
        [[ -e "$f" ]] && n=$((n + 1))
    done
    echo "$n"
}

# Preloading with periodic saves off, so that the SAVE below cannot meet a BGSAVE.
start_daemon crash "$D" --save-interval 0 || { bad "first start failed"; finish; }
"${SNAPFILE[@]}" resp-throttle 1000000 "pre:" 10 >"$ROOT/preload.resp"
timeout 300 redis-cli -h 127.0.0.1 -p "$PORT" --pipe <"$ROOT/preload.resp" >/dev/null 2>&1 || true
rm -f "$ROOT/preload.resp"
expect_eq "$(rcli SAVE)" "OK" "SAVE after preloading"
expect_eq "$(rcli DBSIZE)" "1000000" "a million keys preloaded"
expect_eq "$(rcli CONFIG SET save-interval 1)" "OK" "CONFIG SET save-interval 1"

refused=0 not_started=0 incomplete=0 no_load_line=0 mid_save=0 temps=0
declare -A created_seen=()
for ((round = 1; round <= CRASHES; round++)); do
    saves=$(info_field rdb_saves)
    start_bench
    # A random moment in [0.2, 2.7) s: anywhere in the save cycle.
    sleep_ms $((200 + RANDOM % 2500))
    if ((round <= 2)); then
        # However slow the machine, a periodic save completes before each of the first two kills
        # (bounded at 120 s): two distinct snapshots for the check below, at any speed.
        for ((i = 0; i < 2400; i++)); do
            (($(info_field rdb_saves) > saves)) && break
            sleep 0.05
        done
    fi
    kill -9 "$PID"
    wait_exit "$PID" 30
    stop_bench
    after=$(count_temps)
    if ((after > temps)); then
        mid_save=$((mid_save + 1)) # killed while writing a temporary file
    fi
    temps=$after

    out=$("$RLIMITD_BIN" --check-snapshot "$SNAP" 2>&1) || {
        refused=$((refused + 1))
        bad "round $round: the snapshot left by kill -9 is refused: $out"
        cp "$SNAP" "$ROOT/refused-$round.snap" 2>/dev/null || true
        continue
    }
    records=$(sed -n 's/^records: \([0-9]*\) .*/\1/p' <<<"$out")
    created=$(sed -n 's/^created: \([0-9]*\) .*/\1/p' <<<"$out")
    created_seen[$created]=1

    if ! start_daemon crash "$D" --save-interval 1; then
        not_started=$((not_started + 1))
        bad "round $round: restart failed (rc $START_RC): $(tail -n 3 "$LOG")"
        break
    fi
    if ! last_start_log | grep -q "Snapshot $SNAP loaded: $records keys (0 expired"; then
        no_load_line=$((no_load_line + 1))
        bad "round $round: no 'loaded: $records keys' line: $(last_start_log | grep -i snapshot)"
    fi
    keys=$(rcli DBSIZE)
    if [[ "$keys" != "$records" ]]; then
        incomplete=$((incomplete + 1))
        bad "round $round: DBSIZE $keys after loading a snapshot of $records records"
    fi
    echo "# round $round: $records keys loaded, snapshot created $created, temp files $after"
done
ok "$CRASHES kill -9 rounds ($mid_save during a save): $refused refused snapshots," \
    "$not_started failed starts, $incomplete incomplete loads"
expect_eq "$refused $not_started $incomplete $no_load_line" "0 0 0 0" \
    "every snapshot left by kill -9 was valid and loaded completely"
expect_true "background saves happened between kills (${#created_seen[@]} distinct snapshots)" \
    test "${#created_seen[@]}" -ge 2
pre=$(rcli --scan --pattern 'pre:*' | wc -l)
expect_eq "$pre" "1000000" "the preloaded keys all survived $CRASHES crashes"

# The daemon's last word, read by the independent reader of docs/SNAPSHOT.md.
rcli CONFIG SET save-interval 0 >/dev/null
wait_bgsave || true
expect_eq "$(rcli SAVE)" "OK" "SAVE at the end"
expect_true "the final snapshot passes the independent reader" "${SNAPFILE[@]}" verify "$SNAP"
crash_daemon

# A kill during a save leaves its temporary file (rlimitd.snap.tmp-PID). It is never loaded, but
# if nothing removes it, a crash-looping daemon (systemd Restart=always) fills the disk with
# full-size copies until saves fail. At most the last crash's file may be left.
left=$(count_temps)
if ((left > 0)); then
    note "temporary files in $D after $CRASHES kills ($mid_save during a save): $left files," \
        "$(du -ch "$D"/*tmp* | tail -1 | cut -f1)"
fi
expect_true "stale temporary files do not pile up across crashes ($left left)" test "$left" -le 1

finish
