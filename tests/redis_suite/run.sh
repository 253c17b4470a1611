#!/usr/bin/env bash
# Redis 7.0's own Tcl test files, run against rlimitd and, as the control, against Debian's
# redis-server, both in Redis's external-server mode; then report.py compares the two.
#
#   tests/redis_suite/run.sh [--build DIR] [--redis-src DIR] [--no-control] [--check]
#                            [--timeout S] [--lenient] [FILE...]
#
# --redis-src (or $REDIS_SRC, or a first argument that is a directory): a Redis source tree with
#     tests/test_helper.tcl and runtest (7.0.15's, to match Debian's redis-server). Nothing of it
#     is built. Without one the script says so and exits 0: skipped (CI has no network).
# --build: the build directory holding rlimitd (default: build; $RLIMITD_BIN overrides the
#     binary); the work files go to DIR/redis-suite.
# FILE: Redis test units (default: the seven below), e.g. unit/type/incr.
# --timeout: seconds a file may go without finishing a test before it counts as hung (30; the
#     slowest test of these files takes about 2 s on redis-server).
# --lenient: gets past the three walls that end whole blocks (or files) of list.tcl, zset.tcl
#     and hash.tcl on a server without them, to show what fails behind: CONFIG SET of Redis's
#     encoding tunables (list below) answered "unknown directive" counts as OK; the RESP3 halves
#     Redis's harness can leave out are left out (tag -resp3); Redis's memory_usage helper
#     answers 1 when MEMORY USAGE is an unknown command (what the helper itself answers on a
#     non-jemalloc build). Each is logged and reported. Not the files as Redis runs them, so
#     not with --check.
# --no-control: rlimitd only. --check: exit 1 when rlimitd has a failure that is not a command
#     it does not implement (the "done" condition of issues 27, 29, 30).
# $RLIMITD_SUITE_ARGS: extra rlimitd arguments; $RLIMITD_SUITE_TAGS replaces the tag filter.
# rlimitd runs with --proto-max-args 4194304 (its ceiling; its default of 1024 arguments is a
# limit redis-server does not have, and hash.tcl's and zset.tcl's big HMSET/ZADD send ~2050).
#
# Each file runs once per server, on a fresh server on a free port. A file that hangs (no
# progress for --timeout seconds) or whose server dies is run again on a fresh server with the
# test to blame skipped (stopped.py says which; shim.tcl skips it, in its scripting pass
# only), up to 8 times, so that one hang does not hide the rest of the file; report.py lists
# each such test as a hang or a crash.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

build=build
src=${REDIS_SRC:-}
control=1
check=0
noprogress=30
lenient=0
files=()
while (($#)); do
    case $1 in
    --build) build=$2; shift 2 ;;
    --redis-src) src=$2; shift 2 ;;
    --no-control) control=0; shift ;;
    --check) check=1; shift ;;
    --timeout) noprogress=$2; shift 2 ;;
    --lenient) lenient=1; shift ;;
    -h | --help) sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *)
        if [[ -z $src && ${#files[@]} -eq 0 && -d $1 ]]; then
            src=$1
        else
            files+=("$1")
        fi
        shift
        ;;
    esac
done
if ((check && lenient)); then
    echo "run.sh: --check judges the files as Redis runs them: not with --lenient" >&2
    exit 2
fi
if ((${#files[@]} == 0)); then
    files=(unit/scripting unit/multi unit/type/list unit/type/zset unit/type/hash
        unit/type/incr unit/pubsub)
fi

if [[ -z $src ]]; then
    echo "redis_suite: skipped: no Redis source tree (set REDIS_SRC or pass its path)"
    exit 0
fi
if [[ ! -f $src/tests/test_helper.tcl || ! -f $src/runtest ]]; then
    echo "redis_suite: $src is not a Redis source tree (no tests/test_helper.tcl or runtest)" >&2
    exit 1
fi
if ! command -v tclsh8.6 >/dev/null && ! command -v tclsh8.5 >/dev/null; then
    echo "redis_suite: skipped: Redis's runtest needs tclsh 8.5 or 8.6"
    exit 0
fi
[[ $build = /* ]] || build=$root/$build
rlimitd=${RLIMITD_BIN:-$build/rlimitd}
if [[ ! -x $rlimitd ]]; then
    echo "redis_suite: no rlimitd at $rlimitd (build first, or set RLIMITD_BIN)" >&2
    exit 1
fi
redis_server=${REDIS_SERVER:-$(command -v redis-server || true)}
targets=(rlimitd)
if ((control)); then
    if [[ -z $redis_server ]]; then
        echo "redis_suite: no redis-server: the control run is left out" >&2
    else
        targets+=(redis-server)
    fi
fi

# The options of Redis's own external-server CI job without DEBUG (test-external-nodebug),
# plus what a server with one database and no replication, DEBUG or SAVE needs:
#   --singledb         no SELECT 9 (rlimitd has only db 0; singledb:skip tests are skipped)
#   --durable          an error that is not an assertion fails its test instead of ending the
#                      whole run (the first unknown command would otherwise stop the file)
#   --ignore-encoding  OBJECT ENCODING is not asserted (rlimitd's shapes are its own)
#   --ignore-digest    DEBUG DIGEST comparisons are not made
#   --tags             tests needing DEBUG, replication, SAVE/AOF, PFDEBUG, latency monitor,
#                      CONFIG RESETSTAT, maxmemory settings or a local server process are
#                      skipped ("ignored"), on both servers alike; slow tests run
tags=${RLIMITD_SUITE_TAGS:-"-needs:debug -needs:repl -needs:save -needs:pfdebug -needs:latency -needs:config-resetstat -needs:config-maxmemory -needs:local-process"}
encoding_config=(list-max-ziplist-size list-max-listpack-size list-compress-depth
    zset-max-ziplist-entries zset-max-ziplist-value zset-max-listpack-entries
    zset-max-listpack-value hash-max-ziplist-entries hash-max-ziplist-value
    hash-max-listpack-entries hash-max-listpack-value set-max-intset-entries)
tolerated=""
if ((lenient)); then
    tolerated="${encoding_config[*]}"
    tags="$tags -resp3"
fi
read -ra extra_args <<<"${RLIMITD_SUITE_ARGS:-}"
hard=$((noprogress * 3 + 600))   # the whole file, a backstop behind runtest's own --timeout

work=$build/redis-suite
rm -rf "$work"
mkdir -p "$work/tree"
# A private copy of Redis's tests: runtest writes into tests/tmp, and the copy's
# test_helper.tcl gets one added line that loads shim.tcl (see there); Redis's files are
# otherwise run as they are.
cp -r "$src/tests" "$src/runtest" "$work/tree/"
rm -rf "$work/tree/tests/tmp" && mkdir "$work/tree/tests/tmp"
helper=$work/tree/tests/test_helper.tcl
if [[ $(grep -c '^if {$::client} {' "$helper") != 1 ]]; then
    echo "redis_suite: $src/tests/test_helper.tcl has not the one 'if {\$::client} {' line" \
        "the shim is loaded before; not a Redis 7.0 tree?" >&2
    exit 1
fi
sed -i "/^if {\$::client} {/i source {$here/shim.tcl}" "$helper"

{
    echo "rlimitd=$("$rlimitd" --version 2>&1 | head -1) ($rlimitd)"
    [[ ${#targets[@]} -gt 1 ]] && echo "redis-server=$("$redis_server" --version)"
    echo "options=--singledb --durable --ignore-encoding --ignore-digest --tags \"$tags\"" \
        "--timeout $noprogress; rlimitd --proto-max-args 4194304${RLIMITD_SUITE_ARGS:+ $RLIMITD_SUITE_ARGS}"
    ((lenient)) && echo "lenient=CONFIG SET of $tolerated accepted; -resp3; MEMORY USAGE as 1"
} >"$work/meta.txt"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_server TARGET DIR: starts it on a free port in the background, inside a subshell that
# waits for it, writes its exit status to DIR/exit and, unless DIR/stopping exists (we stopped
# it), how many records the test log had when it died to DIR/died_at. Sets PORT and SPID.
start_server() {
    local target=$1 dir=$2
    PORT=$(free_port)
    (
        if [[ $target == rlimitd ]]; then
            "$rlimitd" --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save-interval 0 \
                --proto-max-args 4194304 "${extra_args[@]}" >"$dir/server.log" 2>&1 &
        else
            "$redis_server" --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save '' \
                --appendonly no --daemonize no --logfile '' >"$dir/server.log" 2>&1 &
        fi
        echo $! >"$dir/pid"
        rc=0
        wait $! || rc=$?
        echo "$rc" >"$dir/exit"
        if [[ ! -e $dir/stopping ]]; then
            wc -l <"$dir/records.jsonl" >"$dir/died_at" 2>/dev/null || echo 0 >"$dir/died_at"
        fi
    ) &
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -s $dir/pid ]] && port_open "$PORT" && break
        sleep 0.1
    done
    SPID=$(cat "$dir/pid" 2>/dev/null)
    if ! port_open "$PORT"; then
        echo "redis_suite: $target did not listen on $PORT:" >&2
        cat "$dir/server.log" >&2
        return 1
    fi
}

stop_server() {
    local dir=$1 i
    touch "$dir/stopping"
    kill -TERM "$SPID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        [[ -e $dir/exit ]] && return 0
        sleep 0.1
    done
    kill -KILL "$SPID" 2>/dev/null
    for ((i = 0; i < 50; i++)); do
        [[ -e $dir/exit ]] && return 0
        sleep 0.1
    done
}

run_file() {
    local target=$1 file=$2
    local base=$work/$target/${file//\//_}
    local skips=() attempt dir rc name args
    mkdir -p "$base"
    : >"$base/events.jsonl"
    for ((attempt = 1; attempt <= 8; attempt++)); do
        dir=$base/attempt$attempt
        mkdir -p "$dir"
        : >"$dir/records.jsonl"
        start_server "$target" "$dir" || return 1
        args=(--host 127.0.0.1 --port "$PORT" --single "$file" --singledb --durable
            --ignore-encoding --ignore-digest --tags "$tags" --timeout "$noprogress")
        printf '%s\n' "${skips[@]}" >"$dir/skip"
        if [[ ! -s $work/$target-commands.txt ]] && command -v redis-cli >/dev/null; then
            # Both servers' command names let report.py name the unimplemented commands a
            # failed test sends when its error does not.
            redis-cli -p "$PORT" COMMAND LIST >"$work/$target-commands.txt" 2>/dev/null || true
        fi
        echo "redis_suite: $target $file (attempt $attempt, port $PORT)" >&2
        rc=0
        (cd "$work/tree" && RLIMITD_SUITE_LOG=$dir/records.jsonl RLIMITD_SUITE_SKIP=$dir/skip \
            RLIMITD_SUITE_TOLERATE=$tolerated RLIMITD_SUITE_LENIENT=$lenient TERM=dumb \
            timeout -k 10 "$hard" ./runtest "${args[@]}") >"$dir/runtest.out" 2>&1 </dev/null ||
            rc=$?
        echo "$rc" >"$dir/runtest.rc"
        local kind="" at="" limit=() i
        if ! kill -0 "$SPID" 2>/dev/null; then
            for ((i = 0; i < 50; i++)); do
                [[ -e $dir/died_at ]] && break
                sleep 0.1
            done
        fi
        if [[ -e $dir/died_at ]]; then
            kind=crash
            limit=("$(cat "$dir/died_at")")
        elif ((rc == 124 || rc == 137)) || grep -q 'TIMEOUT\]' "$dir/runtest.out"; then
            kind=hang
        fi
        stop_server "$dir"
        ln -sfn "attempt$attempt" "$base/final"
        [[ -z $kind ]] && return 0
        at=$(python3 "$here/stopped.py" "$dir/records.jsonl" "$kind" "$attempt" \
            "$(cat "$dir/exit" 2>/dev/null)" "$base/events.jsonl" "${limit[@]}")
        # Only a test can be skipped; a hang or crash outside one (or blamed again on one
        # already skipped) ends the file here.
        [[ -z $at ]] && return 0
        for name in "${skips[@]}"; do
            [[ $name == "$at" ]] && return 0
        done
        skips+=("$at")
    done
}

for target in "${targets[@]}"; do
    for file in "${files[@]}"; do
        run_file "$target" "$file" || exit 1
    done
done

report_args=("$work" "${files[@]}")
((check)) && report_args=(--check "${report_args[@]}")
python3 "$here/report.py" "${report_args[@]}" | tee "$work/report.txt"
exit "${PIPESTATUS[0]}"
