#!/usr/bin/env bash
# run.sh - every client/tool compatibility test against the real rlimitd (issue 4).
#
# Installs what the tests need (Debian packages with apt-get, ioredis with npm into
# tests/compat/node_modules), builds rlimitd into build-compat unless $RLIMITD names a binary,
# runs each test script, and ends with the total `N passed, N failed` (", N skipped" for the
# known gaps listed in known_failures.txt). Exits non-zero if anything failed.
#
#   bash tests/compat/run.sh                  # all
#   bash tests/compat/run.sh redis_cli.sh     # some
#   TARGET=redis bash tests/compat/run.sh test_zset_recipe.py zset_limiters.test.js
#                        # the sorted-set limiter tests against redis-server only (they run
#                        # against rlimitd and redis-server by default: TARGET="rlimitd redis")
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export DEBIAN_FRONTEND=noninteractive

# ---- dependencies ----
# command or file -> Debian package
declare -A NEED=(
    [/usr/bin/python3]=python3
    [/usr/lib/python3/dist-packages/redis/__init__.py]=python3-redis
    [redis-cli]=redis-tools
    [redis-benchmark]=redis-tools
    [prometheus-redis-exporter]=prometheus-redis-exporter
    [systemd-analyze]=systemd
    [strace]=strace
    [scdoc]=scdoc
    [tmux]=tmux
    [curl]=curl
    [man]=man-db
    [col]=bsdextrautils
    [node]=nodejs
    [npm]=npm
    [meson]=meson
    [ninja]=ninja-build
    [pkg-config]=pkg-config
    [cc]=gcc
    [/usr/include/uv.h]=libuv1-dev
    [/usr/include/hiredis/hiredis.h]=libhiredis-dev
    [/usr/include/xxhash.h]=libxxhash-dev
    [/usr/include/microhttpd.h]=libmicrohttpd-dev
)
missing=()
for what in "${!NEED[@]}"; do
    if [[ "$what" == /* ]]; then
        [[ -e "$what" ]] && continue
    else
        command -v "$what" >/dev/null 2>&1 && continue
    fi
    missing+=("${NEED[$what]}")
done
if ((${#missing[@]} > 0)); then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    echo "run.sh: installing ${missing[*]}"
    SUDO=""
    if [[ "$(id -u)" != 0 ]]; then
        SUDO=sudo
    fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef \
        -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
fi

# npm packages, local to this folder, never saved, installed in one go (a later --no-save install
# would prune the earlier ones): ioredis 5 (the client the brief names), the official `redis`
# client's current major (6: RESP3 by default), the sorted-set rate
# limiters zset_limiters.test.js drives and the script-based ones script_limiters.test.js drives
# (pinned: the tests know what they send), and Bottleneck, which coordinates through Pub/Sub.
NPM_PKGS=(ioredis@5 ratelimiter@3.4.1 rolling-rate-limiter@0.4.2 rate-limiter-flexible@11
    rate-limit-redis@6 redis@6 bottleneck@2.19.5)
npm_missing=()
for p in "${NPM_PKGS[@]}"; do
    [[ -f "$HERE/node_modules/${p%@*}/package.json" ]] || npm_missing+=("$p")
done
if ((${#npm_missing[@]} > 0)); then
    echo "run.sh: npm install ${NPM_PKGS[*]} into tests/compat/node_modules"
    mkdir -p "$HERE/node_modules"
    timeout 600 npm install --prefix "$HERE" --no-save --no-package-lock --no-audit --no-fund \
        --loglevel=error "${NPM_PKGS[@]}"
fi

# ---- the daemon ----
if [[ -z "${RLIMITD:-}" ]]; then
    if [[ ! -f "$ROOT/build-compat/build.ninja" ]]; then
        meson setup "$ROOT/build-compat" "$ROOT" -Dtests=false >/dev/null
    fi
    ninja -C "$ROOT/build-compat" rlimitd >/dev/null
    export RLIMITD="$ROOT/build-compat/rlimitd"
fi
# The scripts run from other directories: make the path absolute.
export RLIMITD="$(realpath "$RLIMITD")"
# The GCRA model (tests/cases/limit_model.h) for checks that must not assume a fast machine:
# two dependency-free C files, compiled here so this also works without a test build.
if [[ -z "${LIMIT_CHECK:-}" ]]; then
    LIMIT_CHECK=$(mktemp -d /tmp/rlimitd-compat-lc.XXXXXX)/limit_check
    cc -O1 -o "$LIMIT_CHECK" "$ROOT/tests/cases/limit_check.c" "$ROOT/tests/cases/limit_model.c"
fi
export LIMIT_CHECK
echo "run.sh: testing $RLIMITD ($("$RLIMITD" --version))"

# ---- the tests ----
ALL=(test_redis_py.py test_commands.py raw_clients.py ioredis.test.js node_redis.test.js redis_cli.sh
    redis_benchmark.sh exporter.sh systemd.sh test_zset_recipe.py zset_limiters.test.js
    script_limiters.test.js script_fixed_window.py script_token_bucket.py bottleneck.test.js)
if (($# > 0)); then
    ALL=("$@")
fi

passed=0
failed=0
skipped=0
summary=()
log=""
trap 'rm -f "$log"' EXIT # the per-test log (in $TMPDIR), also if run.sh is interrupted
for t in "${ALL[@]}"; do
    case "$t" in
    *.py) runner=(/usr/bin/python3) ;;
    *.js) runner=(node) ;;
    *.sh) runner=(bash) ;;
    *)
        echo "run.sh: unknown test $t" >&2
        exit 2
        ;;
    esac
    echo "=== $t"
    log="$(mktemp)"
    rc=0
    timeout 900 "${runner[@]}" "$HERE/$t" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
    last="$(tail -1 "$log")"
    rm -f "$log"
    log=""
    if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        p=${BASH_REMATCH[1]}
        f=${BASH_REMATCH[2]}
        s=${BASH_REMATCH[4]:-0}
        if ((rc != 0 && f == 0)); then
            f=1 # exited non-zero without saying why: count it
        fi
    else
        p=0
        f=1
        s=0
        echo "run.sh: $t ended without a summary line (exit $rc)"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    summary+=("$(printf '%-22s %4d passed, %d failed, %d skipped' "$t" "$p" "$f" "$s")")
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
tail=""
if ((skipped > 0)); then
    tail=", $skipped skipped"
fi
echo "$passed passed, $failed failed$tail"
((failed == 0))
