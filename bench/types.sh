#!/usr/bin/env bash
# types.sh - issue 17's value types against Redis on this machine, in one run: memory per key of
# a token-bucket hash and of a moving-window list at 1M keys, and server CPU per HMGET+HSET and
# per LPUSH+LTRIM at pipeline 16 (see bench/types_bench.py for the method), 3 rounds each.
# Prints Markdown tables.
#
#   bench/types.sh [--quick] [--rounds N] [--only hash|list] [--rlimitd BIN]
#
# Builds rlimitd (release) into build-bench/ unless --rlimitd names a binary. --quick: 100k keys.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEYS=1000000
REQS=400000
RLIMITD=""
ROUNDS=3
ONLY=hash,list
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) KEYS=100000; REQS=50000 ;;
    --rlimitd) RLIMITD=$(realpath "$2"); shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    *) sed -n '2,8p' "$0"; exit 2 ;;
    esac
    shift
done
if [ -z "$RLIMITD" ]; then
    [ -f "$ROOT/build-bench/build.ninja" ] ||
        meson setup "$ROOT/build-bench" "$ROOT" --buildtype=release >/dev/null
    ninja -C "$ROOT/build-bench" rlimitd >/dev/null
    RLIMITD="$ROOT/build-bench/rlimitd"
fi
exec python3 "$ROOT/bench/types_bench.py" "$RLIMITD" "$KEYS" "$REQS" "$ROUNDS" "$ONLY"
