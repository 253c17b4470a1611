#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan + UBSan: fuzz_resp (request parsing and every
# command) and fuzz_lua (the Lua surface: hostile library calls, kills and flushes mid-run).
# For each, replays its seed corpus, then fuzzes (fuzz_resp for FUZZ_SECONDS, default 60;
# fuzz_lua for FUZZ_LUA_SECONDS, default 60) and prints how many inputs were executed. Fails on
# any crash, and on an input that runs 30 s (scripts end within milliseconds in this build; one
# that does not is stuck in a Lua C function that SCRIPT KILL could not stop either).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${FUZZ_SECONDS:-60}"
lua_seconds="${FUZZ_LUA_SECONDS:-60}"
dir=build-fuzz
if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined \
        -Db_lundef=false -Dwerror=true >/dev/null
fi
ninja -C "$dir" tests/fuzz/fuzz_resp tests/fuzz/fuzz_lua >/dev/null
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# fuzz NAME CORPUS DICT SECONDS LOG: replay the corpus, then fuzz; exits the script on a failure.
fuzz() {
    local name=$1 corpus=$2 dict=$3 secs=$4 log=$5
    local bin="$dir/tests/fuzz/$name" scratch="$dir/corpus-new-$name" execs
    echo "$name: replaying $(find "$corpus" -type f | wc -l) corpus files"
    "$bin" -runs=0 "$corpus" 2>"$dir/$log-replay.log" || { cat "$dir/$log-replay.log"; exit 1; }
    mkdir -p "$scratch"
    echo "$name: fuzzing for ${secs}s"
    if ! "$bin" -max_total_time="$secs" -timeout=30 -dict="$dict" -print_final_stats=1 \
            "$scratch" "$corpus" >"$dir/$log.log" 2>&1; then
        tail -60 "$dir/$log.log"
        echo "$name: FAILED (crash input saved in the working directory)"
        exit 1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/$log.log" | grep -o '[0-9]*$')
    echo "$name: ${execs:-?} executions in ${secs}s, no crash"
}

fuzz fuzz_resp tests/fuzz/corpus tests/fuzz/resp.dict "$seconds" fuzz
fuzz fuzz_lua tests/fuzz/corpus_lua tests/fuzz/lua.dict "$lua_seconds" fuzz-lua
