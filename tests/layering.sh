#!/usr/bin/env bash
# Keeps the layering of docs/DESIGN.md ("Layers") true by checking every #include line under src/.
# A folder of src/ is a layer; a file may include headers of its own layer and of the layers its
# row below allows, and nothing else of ours. A new .c file is checked by the rules of the folder
# it lands in; a new public header must be given a layer in HEADER_LAYER (an unmapped one fails).
# Prints each violation and a final "N passed, N failed" line; exits 1 on any violation.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
cd "$root/src"
pass=0
fail=0

# include/rlimitd/<name>.h -> the layer that owns it.
declare -A HEADER_LAYER=(
    [util]=base [alloc]=base [buf]=base [clock]=base [log]=base [stats]=base [conf]=base
    [gcra]=limiter [gcra_redis]=limiter [topk]=limiter [swlog]=limiter [isallowed]=limiter
    [keyspace]=store [zset]=store [hashval]=store [listval]=store [hash]=base
    [resp]=proto [reply]=proto
    [script]=script
    [cmd]=cmd
    [snap]=persist [persist]=persist
    [server]=net [busypoll]=net [notify]=net
    [redismodule_api]=module
)

# Per layer: the layers (besides itself) whose headers it may include, and system headers it may
# not include. "pure" layers also may not include base's log, conf or stats (no I/O, no config).
declare -A ALLOWED=(
    [base]=""
    [limiter]="base"
    [store]="base limiter"
    [proto]="base"
    [script]="base proto"
    [cmd]="base limiter store proto script"
    [persist]="base limiter store"
    [net]="base limiter store proto cmd persist"
    [main]="base limiter store proto cmd persist net"
    [module]="base limiter"
)
declare -A FORBIDDEN_SYS=(
    [base]='uv\.h|hiredis'
    [limiter]='uv\.h|hiredis|xxhash'
    [store]='uv\.h|hiredis|xxhash'
    [proto]='uv\.h|hiredis'
    [script]='uv\.h|hiredis|xxhash'
    [cmd]='uv\.h|hiredis'
    [persist]='uv\.h|hiredis'
    [net]=''
    [main]=''
    [module]='uv\.h|hiredis|xxhash'
)
# Headers of base that the pure layers may not use: the limiter and the store do no I/O and read
# no configuration; rlimit.so may use only util from base (Redis is its clock, log and config).
declare -A PURE_DENY=(
    [limiter]='log conf stats'
    [store]='log conf stats'
    [module]='log conf stats clock'
)
# Within cmd, only resp.h of proto is off limits: commands write replies but never parse requests.
# The script engine likewise writes replies only, and reads no configuration and no counters:
# what it needs of them (SCRIPT KILL's threshold) its callers pass in.
declare -A HEADER_DENY=(
    [cmd]='resp'
    [script]='resp conf stats'
)

violation() {
    echo "layering: $1"
    fail=$((fail + 1))
}

check_file() {
    local file=$1 layer=$2 line name owner allowed bad
    allowed=" $layer ${ALLOWED[$layer]} "
    bad=0
    if [[ -n "${FORBIDDEN_SYS[$layer]}" ]] &&
        grep -qE "^#include <(${FORBIDDEN_SYS[$layer]})" "$file"; then
        violation "$file ($layer) includes a library its layer may not use: $(grep -nE "^#include <(${FORBIDDEN_SYS[$layer]})" "$file" | head -1)"
        bad=1
    fi
    while IFS= read -r line; do
        name=${line#*rlimitd/}
        name=${name%%.h*}
        owner=${HEADER_LAYER[$name]:-}
        if [[ -z "$owner" ]]; then
            violation "$file: rlimitd/$name.h has no layer in tests/layering.sh HEADER_LAYER"
            bad=1
        elif [[ "$allowed" != *" $owner "* ]]; then
            violation "$file ($layer) includes rlimitd/$name.h of layer $owner"
            bad=1
        elif [[ " ${PURE_DENY[$layer]:-} " == *" $name "* ]]; then
            violation "$file ($layer) includes rlimitd/$name.h: this layer does no I/O and reads no configuration"
            bad=1
        elif [[ " ${HEADER_DENY[$layer]:-} " == *" $name "* ]]; then
            violation "$file ($layer) includes rlimitd/$name.h"
            bad=1
        fi
    done < <(grep -oE '^#include "rlimitd/[a-z_]+\.h"' "$file" || true)
    # A local header ("x.h" without rlimitd/) must live in the same folder.
    while IFS= read -r line; do
        name=${line#\#include \"}
        name=${name%\"}
        if [[ "$name" != rlimitd_version.h && ! -f "$(dirname "$file")/$name" ]]; then
            violation "$file ($layer) includes \"$name\" from another folder"
            bad=1
        fi
    done < <(grep -oE '^#include "[a-z_]+\.h"' "$file" || true)
    ((bad == 0)) && pass=$((pass + 1))
    return 0
}

# The busy-poll policy takes its times as arguments, so that it is tested on a simulated loop.
if grep -nE '^#include' net/busypoll.c | grep -vE 'rlimitd/busypoll\.h|<std(int|def|bool)\.h>' | grep -q .; then
    violation "net/busypoll.c is pure bookkeeping: nothing but busypoll.h and std headers"
else
    pass=$((pass + 1))
fi

for layer in base limiter store proto script cmd persist net module; do
    shopt -s nullglob
    files=("$layer"/*.c "$layer"/*.h)
    shopt -u nullglob
    if ((${#files[@]} == 0)); then
        violation "src/$layer has no source files: the layer map in this script is out of date"
        continue
    fi
    for f in "${files[@]}"; do
        check_file "$f" "$layer"
    done
done
check_file main.c main
for h in ../include/rlimitd/*.h; do
    name=$(basename "$h" .h)
    if [[ -z "${HEADER_LAYER[$name]:-}" ]]; then
        violation "include/rlimitd/$name.h has no layer in HEADER_LAYER"
    else
        check_file "$h" "${HEADER_LAYER[$name]}"
    fi
done
# Every source file lives in a layer folder (or is main.c).
while IFS= read -r f; do
    violation "$f is outside the layer folders"
done < <(find . -maxdepth 1 -name '*.[ch]' ! -name main.c)

# Lua stays inside src/script (the engine and the libraries it opens for scripts), and the
# engine reaches the keyspace only through the dispatcher's door: the function EVAL hands
# script_run (cmd_from_script), which every client command's checks and locks also guard. So
# no file of src/script includes the store's or the command layer's headers (its ALLOWED row
# says so too; this names the rule).
while IFS= read -r f; do
    case $f in
    ./script/*) continue ;;
    esac
    violation "$f includes Lua's headers: only src/script embeds Lua"
done < <(grep -rlE '^#include [<"](lua\.h|lauxlib\.h|lualib\.h|lua-)' . || true)
for f in script/*.[ch] ../include/rlimitd/script.h; do
    if grep -qE '^#include "(rlimitd/(keyspace|cmd|zset|hashval|listval)\.h|cmd_internal\.h)"' "$f"; then
        violation "$f reaches the keyspace or the dispatcher's internals: only through script_call_fn"
    else
        pass=$((pass + 1))
    fi
done

# No two source files depend on each other through includes. A header belongs to the .c file of
# its name (x.h and x_internal.h to x.c); a file including another's header depends on it. Any
# cycle (strongly connected set of files) is a violation: dependencies point one way.
while IFS= read -r line; do
    if [[ $line == ok ]]; then
        pass=$((pass + 1))
    else
        violation "include cycle: $line"
    fi
done < <(python3 - <<'PY'
import os, re
impl, deps = {}, {}
for d, _, names in os.walk('.'):
    for n in names:
        if n.endswith('.c'):
            impl[n[:-2]] = os.path.join(d, n)
for mod, path in impl.items():
    out = set()
    for line in open(path, encoding='utf-8'):
        m = re.match(r'#include "(?:rlimitd/)?([a-z_0-9]+)\.h"', line)
        if m:
            h = m.group(1)
            h = h[:-len('_internal')] if h.endswith('_internal') else h
            if h != mod and h in impl:
                out.add(h)
    deps[mod] = out
index, low, stack, on, counter, cycles = {}, {}, [], set(), [0], []
def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in sorted(deps[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            cycles.append(' <-> '.join(sorted(comp)))
for v in sorted(deps):
    if v not in index:
        visit(v)
print('\n'.join(cycles) if cycles else 'ok')
PY
)

echo "layering: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
