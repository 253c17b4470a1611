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
bin="$dir/tests/fuzz/fuzz_resp"
corpus=tests/fuzz/corpus
echo "fuzz: replaying $(find "$corpus" -type f | wc -l) corpus files"
"$bin" -runs=0 "$corpus" 2>"$dir/fuzz-replay.log" || { cat "$dir/fuzz-replay.log"; exit 1; }
scratch="$dir/corpus-new"
mkdir -p "$scratch"
echo "fuzz: fuzzing for ${seconds}s"
if ! "$bin" -max_total_time="$seconds" -timeout=30 -dict=tests/fuzz/resp.dict -print_final_stats=1 \
        "$scratch" "$corpus" >"$dir/fuzz.log" 2>&1; then
    tail -60 "$dir/fuzz.log"
    echo "fuzz: FAILED (crash input saved in the working directory)"
    exit 1
fi
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/fuzz.log" | grep -o '[0-9]*$')
echo "fuzz: ${execs:-?} executions in ${seconds}s, no crash"

bin="$dir/tests/fuzz/fuzz_lua"
corpus=tests/fuzz/corpus_lua
echo "fuzz_lua: replaying $(find "$corpus" -type f | wc -l) corpus files"
"$bin" -runs=0 "$corpus" 2>"$dir/fuzz-lua-replay.log" || { cat "$dir/fuzz-lua-replay.log"; exit 1; }
scratch="$dir/corpus-lua-new"
mkdir -p "$scratch"
echo "fuzz_lua: fuzzing for ${lua_seconds}s"
if ! "$bin" -max_total_time="$lua_seconds" -timeout=30 -dict=tests/fuzz/lua.dict -print_final_stats=1 \
        "$scratch" "$corpus" >"$dir/fuzz-lua.log" 2>&1; then
    tail -60 "$dir/fuzz-lua.log"
    echo "fuzz_lua: FAILED (crash input saved in the working directory)"
    exit 1
fi
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/fuzz-lua.log" | grep -o '[0-9]*$')
echo "fuzz_lua: ${execs:-?} executions in ${lua_seconds}s, no crash"
