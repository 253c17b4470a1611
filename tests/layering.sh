#!/usr/bin/env bash
# Keeps the module layering of docs/DESIGN.md true by checking #include lines:
#   net (server.c, client.c) -> resp -> cmd -> keyspace (+ gcra, swlog) ; persist/snap read the
#   keyspace; the limiter core includes no libuv, no hiredis, nothing above it; the Redis module
#   (src/module) uses only the limiter library.
# Prints each violation and a final "N passed, N failed" line; exits 1 on any violation.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
cd "$root/src"
pass=0
fail=0

# check FILE PATTERN WHY: FILE must not include anything matching PATTERN.
check() {
    local file=$1 pattern=$2 why=$3 hits
    hits=$(grep -nE "^#include [<\"]($pattern)" "$file" || true)
    if [[ -n "$hits" ]]; then
        echo "layering: $file: $why"
        echo "$hits" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

upper='uv\.h|hiredis|rlimitd/(resp|cmd|server|conf|log|snap|persist|notify|reply|stats)\.h|cmd_internal\.h|server_internal\.h|slowlog\.h'
for f in gcra.c swlog.c isallowed.c keyspace.c hash.c clock.c util.c; do
    check "$f" "$upper" "the limiter core must not include I/O, protocol or anything above it"
done
for f in resp.c reply.c; do
    check "$f" 'uv\.h|rlimitd/(cmd|server|keyspace|persist|snap)\.h|cmd_internal\.h|server_internal\.h' \
        "the protocol layer must not reach the command layer, the keyspace or the network"
done
for f in cmd.c cmd_*.c slowlog.c; do
    check "$f" 'uv\.h|hiredis|rlimitd/(resp|server|persist|snap)\.h|server_internal\.h' \
        "commands reach the network and persistence only through struct server_hooks"
done
for f in snap.c persist.c; do
    check "$f" 'uv\.h|hiredis|rlimitd/(resp|cmd|server)\.h|cmd_internal\.h|server_internal\.h' \
        "persistence must not depend on the network or the command layer"
done
# The busy-poll policy takes its times as arguments, so that it is tested on a simulated loop.
check busypoll.c 'uv\.h|hiredis|time\.h|rlimitd/(resp|cmd|server|conf|log|snap|persist|notify|reply|stats|keyspace|clock|hash|util|gcra|swlog|isallowed)\.h|server_internal\.h' \
    "busypoll.c is pure bookkeeping: no libuv, no clock, nothing but busypoll.h"
# The Redis module links only rlimit_limiter: Redis is its keyspace, network and persistence.
for f in module/*.c; do
    check "$f" 'uv\.h|hiredis|xxhash|rlimitd/(resp|cmd|server|conf|log|snap|persist|notify|reply|stats|keyspace|clock|hash)\.h|cmd_internal\.h|server_internal\.h|slowlog\.h' \
        "the module may use only the limiter (gcra, swlog, isallowed, util) and the module API"
done
# The Lua engine reaches the commands only through cmd_from_script (script.h), and Lua itself
# stays inside script_lua.c.
for f in script_cache.c script_lua.c; do
    check "$f" 'uv\.h|hiredis|rlimitd/(resp|server|persist|snap|keyspace)\.h|cmd_internal\.h|server_internal\.h' \
        "the script engine reaches the commands only through cmd_from_script (script.h)"
done
for f in *.c; do
    [[ $f == script_lua.c ]] && continue
    check "$f" 'lua\.h|lauxlib\.h|lualib\.h|lua-' "only script_lua.c embeds Lua"
done
echo "layering: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
