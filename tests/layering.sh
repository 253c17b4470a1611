#!/usr/bin/env bash
# Keeps the layering of docs/DESIGN.md ("Layers") true by checking every #include line under src/
# and, from the objects a build made of them, every call between source files.
# A folder of src/ is a layer; a file may include headers of its own layer and of the layers its
# row below allows, and nothing else of ours, and may call only into those layers. A new .c file
# is checked by the rules of the folder it lands in; a new public header must be given a layer in
# HEADER_LAYER (an unmapped one fails). No two files depend on each other, through includes or
# calls, directly or around a circle, inside a folder or across folders; no source file under
# src/ is over 800 lines.
# Usage: layering.sh [source root] [build directory]. The build directory (meson's, built) is
# where the calls are read from; without one the check fails, as it cannot see them.
# Prints each violation and a final "N passed, N failed" line; exits 1 on any violation.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
build=${2:-}
if [[ -n "$build" ]]; then
    build=$(cd "$build" && pwd)
fi
cd "$root/src"
pass=0
fail=0

# include/rlimitd/<name>.h -> the layer that owns it.
declare -A HEADER_LAYER=(
    [util]=base [alloc]=base [buf]=base [clock]=base [log]=base [stats]=base [conf]=base
    [gcra]=limiter [gcra_redis]=limiter [topk]=limiter [swlog]=limiter [isallowed]=limiter
    [throttle_all]=limiter [wait]=limiter [lease]=limiter [fifo]=limiter
    [keyspace]=store [zset]=store [hashval]=store [listval]=store [hash]=base
    [resp]=proto [reply]=proto
    [script]=script
    [cmd]=cmd [waiters]=cmd
    [snap]=persist [persist]=persist
    [pubsub]=pubsub
    [server]=net [busypoll]=net [notify]=net
    [redismodule_api]=module
)

# Per layer: the layers (besides itself) whose headers it may include and whose functions it may
# call, and system headers it may not include. "pure" layers also may not include base's log,
# conf or stats (no I/O, no config).
declare -A ALLOWED=(
    [base]=""
    [limiter]="base"
    [store]="base limiter"
    [proto]="base"
    [script]="base proto"
    [pubsub]="base"
    [cmd]="base limiter store proto pubsub script"
    [persist]="base limiter store"
    [net]="base limiter store proto pubsub cmd persist"
    [main]="base limiter store proto pubsub cmd persist net"
    [module]="base limiter"
)
declare -A FORBIDDEN_SYS=(
    [base]='uv\.h|hiredis'
    [limiter]='uv\.h|hiredis|xxhash'
    [store]='uv\.h|hiredis|xxhash'
    [proto]='uv\.h|hiredis'
    [pubsub]='uv\.h|hiredis|xxhash'
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
    [pubsub]='log conf stats'
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

for layer in base limiter store proto pubsub script cmd persist net module; do
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

# No source file is over 800 lines: a file that grows past it has more than one job.
long=0
while IFS= read -r f; do
    n=$(wc -l <"$f")
    if ((n > 800)); then
        violation "${f#./} has $n lines: no source file under src/ may have more than 800"
        long=1
    fi
done < <(find . -name '*.[ch]' | sort)
((long == 0)) && pass=$((pass + 1))

# No two source files depend on each other, through includes or through calls.
# Includes: a header belongs to the .c file of its name (x.h and x_internal.h to x.c); a file
# including another's header depends on it.
# Calls: read from the objects of the build directory (compile_commands.json says which object
# each source became). A file calls another when its object refers to a function the other's
# object defines (nm: undefined there, T or W here), by a call or by taking its address; data
# (the command areas' rows the table joins, the module's API pointers) is not a call. A call
# from one layer into another must go to a layer that layer's ALLOWED row names.
# Either way, any cycle (a strongly connected set of files) is a violation: dependencies point
# one way. Each call cycle is printed with the functions that close it.
allowed_rows=$(for l in "${!ALLOWED[@]}"; do echo "$l=${ALLOWED[$l]}"; done)
while IFS= read -r line; do
    case $line in
    ok) pass=$((pass + 1)) ;;
    note:*) echo "layering: ${line#note: }" ;;
    *) violation "$line" ;;
    esac
done < <(LAYERING_BUILD="$build" LAYERING_ALLOWED="$allowed_rows" python3 - <<'PY'
import json, os, re, subprocess, sys

def cycles(deps):
    """The strongly connected sets of more than one file (Tarjan), each sorted."""
    sys.setrecursionlimit(10000)
    index, low, stack, on, counter, found = {}, {}, [], set(), [0], []
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
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
                found.append(sorted(comp))
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found

# ---- includes ----
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
found = cycles(deps)
for comp in found:
    print('include cycle: ' + ' <-> '.join(comp))
if not found:
    print('ok')

# ---- calls ----
build = os.environ['LAYERING_BUILD']
if not build:
    print('calls not checked: give the build directory (tests/layering.sh <root> <build>)')
    sys.exit(0)
src = os.getcwd()
allowed = {}
for row in os.environ['LAYERING_ALLOWED'].splitlines():
    layer, _, below = row.partition('=')
    allowed[layer] = set(below.split())
def layer_of(rel):
    return rel.split('/')[0] if '/' in rel else 'main'
try:
    commands = json.load(open(os.path.join(build, 'compile_commands.json')))
except OSError as e:
    print('calls not checked: %s has no compile_commands.json (%s)' % (build, e.strerror))
    sys.exit(0)
objects = {}
for e in commands:
    f = os.path.normpath(os.path.join(e['directory'], e['file']))
    rel = os.path.relpath(f, src)
    if rel.startswith('..') or not rel.endswith('.c') or '/tests/' in '/' + e['output']:
        continue
    objects.setdefault(rel, os.path.join(e['directory'], e['output']))
ok = True
for d, _, names in os.walk('.'):
    for n in names:
        rel = os.path.normpath(os.path.join(d, n))
        if n.endswith('.c') and rel not in objects:
            if layer_of(rel) == 'module':
                continue  # noted below
            print('%s is not compiled in %s: its calls are not known' % (rel, build))
            ok = False
if not any(layer_of(r) == 'module' for r in objects):
    print('note: src/module is not built in %s (-Dmodule=false): its calls are not checked' % build)
defined, wanted, source_of = {}, {}, {}
for rel, obj in sorted(objects.items()):
    if os.path.exists(obj):
        source_of[obj] = rel
        wanted[rel] = set()
    else:
        print('%s is not built yet (%s): build before checking' % (rel, obj))
        ok = False
# One nm for every object: each line is "<object>:[address] type symbol".
nm = subprocess.run(['nm', '-A'] + sorted(source_of), capture_output=True, text=True, check=True)
obj = ''
for line in nm.stdout.splitlines():
    if not line.startswith(obj + ':'):
        obj = next((o for o in source_of if line.startswith(o + ':')), '')
        if not obj:
            continue
    rel = source_of[obj]
    p = line[len(obj) + 1:].split()
    if len(p) == 3 and p[1] in ('T', 'W'):
        defined.setdefault(p[2], rel)
    elif len(p) == 2 and p[0] in ('U', 'w'):
        wanted[rel].add(p[1])
if source_of and (not defined or not any(wanted.values())):
    print('nm found no functions in the objects of %s: the call check read nothing' % build)
    ok = False
calls = {}
for a, syms in wanted.items():
    for s in syms:
        b = defined.get(s)
        if b is not None and b != a:
            calls.setdefault(a, {}).setdefault(b, set()).add(s)
for a in sorted(calls):
    for b in sorted(calls[a]):
        la, lb = layer_of(a), layer_of(b)
        if la != lb and lb not in allowed.get(la, set()):
            print('%s (%s) calls %s of layer %s: %s' % (a, la, b, lb, ', '.join(sorted(calls[a][b]))))
            ok = False
found = cycles({a: set(calls[a]) for a in calls})
for comp in found:
    members = set(comp)
    why = []
    for a in comp:
        for b in sorted(calls[a]):
            if b in members:
                fns = sorted(calls[a][b])
                why.append('%s -> %s: %s%s' % (a, b, ', '.join(fns[:3]), ', ...' if len(fns) > 3 else ''))
    print('call cycle: %s (%s)' % (' <-> '.join(comp), '; '.join(why)))
if ok and not found:
    print('ok')
PY
)

echo "layering: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
