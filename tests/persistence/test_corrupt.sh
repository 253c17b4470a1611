#!/usr/bin/env bash
# test_corrupt.sh - SNAPSHOT.md: "a corrupt or truncated snapshot stops the start with a clear message
# (path, offset, reason) and the file is left untouched for inspection".
#
# A real snapshot holding all four record types is damaged in each region (a flipped byte),
# truncated at several offsets, given a wrong magic or a future version, emptied. For each: the
# daemon exits 1 without opening its port, the log says "PATH: offset N: reason", the file is
# byte-identical afterwards, and --check-snapshot refuses it the same way.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export START_TIMEOUT=30

# ---- a good snapshot with every record type ----
G=$ROOT/good
mkdir -p "$G"
start_daemon good "$G" || { bad "daemon did not start"; finish; }
g_before=$(now_ns) # the first call, which fixes the TAT, happens between these two
rcli CL.THROTTLE g 15 30 36000 >/dev/null
g_after=$(now_ns)
for ((i = 1; i < 3; i++)); do
    rcli CL.THROTTLE g 15 30 36000 >/dev/null
done
rcli SET cnt 42 >/dev/null
rcli SET s hello >/dev/null
for ((i = 0; i < 3; i++)); do
    rcli ISALLOWED u a 3600 10 >/dev/null
    sleep 0.02
done
rcli SHUTDOWN >/dev/null 2>&1 || true
wait_exit "$PID" 30
expect_eq "$WAIT_RC" "0" "SHUTDOWN saved and exited"
GOOD=$ROOT/good.snap
cp "$G/rlimitd.snap" "$GOOD"
expect_true "rlimitd --check-snapshot accepts the good file" \
    "$RLIMITD_BIN" --check-snapshot "$GOOD"
expect_true "the independent reader accepts it" "${SNAPFILE[@]}" verify "$GOOD"
# What the file holds, read by the independent reader, against docs/SNAPSHOT.md.
dump=$("${SNAPFILE[@]}" dump "$GOOD")
expect_match "$dump" $'(^|\n)int cnt 0 42(\n|$)' "the counter is a type-2 record without expiry"
expect_match "$dump" $'(^|\n)raw s 0 hello(\n|$)' "the string is a type-3 record"
read -r _ _ gexp gtat < <(grep '^gcra g ' <<<"$dump")
expect_true "the GCRA record's expiry is its TAT ($gexp, $gtat)" test "$gexp" = "$gtat"
# 3 calls of 20 min from the first call's time (they all fit in the 5 h 20 min burst). The key
# lives an hour, so it is still there when the good file is loaded again at the end, however
# slow the machine.
expect_true "the TAT is an hour after the first call" \
    test "$gtat" -ge $((g_before + 3600000000000)) -a "$gtat" -le $((g_after + 3600000000000))
read -r _ _ wexp wts < <(grep '^wlog hist:{u}:a ' <<<"$dump")
IFS=, read -r -a ts <<<"$wts"
expect_eq "${#ts[@]}" "3" "the window log holds 3 attempts"
expect_true "its attempts are in ascending order, ms apart (${wts})" \
    test "${ts[0]}" -lt "${ts[1]}" -a "${ts[1]}" -lt "${ts[2]}"
expect_eq "$wexp" "$(((ts[2] + 3600000) * 1000000))" "it expires an hour after the newest attempt"
SIZE=$(stat -c %s "$GOOD")
note "good snapshot: $SIZE bytes; regions: $("${SNAPFILE[@]}" regions "$GOOD" | tr '\n' ' ')"

# refused NAME WANT [dbfilename]: the file $ROOT/case-NAME/<dbfilename> is already prepared.
# Starts the daemon on it and checks the refusal; WANT is an extended regex the reason must match.
refused() {
    local name=$1 want=$2 file=${3:-rlimitd.snap} dir=$ROOT/case-$1 path log out rc=0
    local -a extra=()
    path=$dir/$file
    if [[ "$file" != rlimitd.snap ]]; then
        extra=(--dbfilename "$file")
    fi
    cp "$path" "$ROOT/ref-$name"
    if start_daemon "case-$name" "$dir" "${extra[@]}"; then
        bad "$name: the daemon started on a damaged snapshot"
        crash_daemon
        return
    fi
    log=$(last_start_log)
    if [[ "$START_RC" == 1 ]]; then
        ok "$name: the start fails with exit code 1"
    else
        bad "$name: exit code '$START_RC', want 1"
    fi
    if grep -qE "$(printf '%s' "$path" | sed 's/[.[\*^$]/\\&/g'): offset [0-9]+: .*$want" \
        <<<"$log"; then
        ok "$name: the log names path, offset and reason"
    else
        bad "$name: log does not say '$path: offset N: ...$want': $(grep -v '^----' <<<"$log")"
    fi
    if grep -qE 'Listening on|Ready to accept' <<<"$log"; then
        bad "$name: the port was opened before the snapshot was verified"
    fi
    if cmp -s "$path" "$ROOT/ref-$name"; then
        ok "$name: the file is byte-identical afterwards"
    else
        bad "$name: the file was modified"
    fi
    expect_eq "$(ls "$dir")" "$file" "$name: nothing else was created in the directory"
    out=$("$RLIMITD_BIN" --check-snapshot "$path" 2>&1) || rc=$?
    if [[ "$rc" == 1 ]] && grep -qE "offset [0-9]+: .*$want" <<<"$out" &&
        grep -qF "$path" <<<"$out"; then
        ok "$name: --check-snapshot refuses it too"
    else
        bad "$name: --check-snapshot exit $rc: $out"
    fi
    if ! cmp -s "$path" "$ROOT/ref-$name"; then
        bad "$name: --check-snapshot modified the file"
    fi
}

# prepare NAME [dbfilename]: copies the good file into a fresh directory; prints its path.
prepare() {
    local dir=$ROOT/case-$1
    mkdir -p "$dir"
    cp "$GOOD" "$dir/${2:-rlimitd.snap}"
    echo "$dir/${2:-rlimitd.snap}"
}

# ---- a flipped byte in each region ----
while read -r region off; do
    f=$(prepare "flip-$region")
    "${SNAPFILE[@]}" flip "$f" "$off"
    case $region in
    magic) want='magic' ;;
    # 5 xor 1 is 4, a version this reader knows: the checksum refuses the file.
    version) want='checksum mismatch' ;;
    flags) want='flags' ;;
    *) want='' ;;
    esac
    refused "flip-$region" "$want"
done < <("${SNAPFILE[@]}" regions "$GOOD")
f=$(prepare flip-custom-name dump-custom.snap)
"${SNAPFILE[@]}" flip "$f" 40
refused flip-custom-name '' dump-custom.snap

# ---- truncations ----
for n in 0 1 8 16 31 32 33 48 49 $((SIZE / 2)) $((SIZE - 17)) $((SIZE - 16)) $((SIZE - 9)) \
    $((SIZE - 8)) $((SIZE - 1)); do
    f=$(prepare "truncated-$n")
    truncate -s "$n" "$f"
    refused "truncated-$n" ''
done

# ---- wrong magic, future version, empty file, structure under a valid checksum ----
f=$(prepare wrong-magic)
printf 'REDIS001' | dd of="$f" bs=1 seek=0 conv=notrunc status=none
"${SNAPFILE[@]}" rechecksum "$f"
refused wrong-magic 'magic'

f=$(prepare future-version)
"${SNAPFILE[@]}" setbyte "$f" 8 6
"${SNAPFILE[@]}" rechecksum "$f"
refused future-version 'unsupported format version'

f=$(prepare future-version-high)
"${SNAPFILE[@]}" setbyte "$f" 11 1
refused future-version-high 'unsupported format version'

f=$(prepare empty)
: >"$f"
refused empty ''

f=$(prepare appended)
printf 'x' >>"$f"
refused appended ''

count_off=$("${SNAPFILE[@]}" regions "$GOOD" | sed -n 's/^count //p')
f=$(prepare count-mismatch)
"${SNAPFILE[@]}" setbyte "$f" "$count_off" 5
"${SNAPFILE[@]}" rechecksum "$f"
refused count-mismatch 'count'

marker_off=$("${SNAPFILE[@]}" regions "$GOOD" | sed -n 's/^end-marker //p')
f=$(prepare unknown-type)
"${SNAPFILE[@]}" setbyte "$f" 32 9
"${SNAPFILE[@]}" rechecksum "$f"
refused unknown-type ''
f=$(prepare marker-as-zero)
"${SNAPFILE[@]}" setbyte "$f" "$marker_off" 0
"${SNAPFILE[@]}" rechecksum "$f"
refused marker-as-zero ''

# ---- and the good file still loads (the refusals above are not a broken harness) ----
f=$(prepare good-again)
if start_daemon good-again "$ROOT/case-good-again"; then
    expect_eq "$(rcli DBSIZE)" "4" "the undamaged file loads: 4 keys"
    expect_eq "$(rcli GET cnt)" "42" "and its values"
    expect_eq "$(rcli ISALLOWED u a 3600 3)" "0" "and its window log (3 attempts saved)"
    crash_daemon
else
    bad "the undamaged file was refused: $(last_start_log | tail -3)"
fi

finish
