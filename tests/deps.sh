#!/usr/bin/env bash
# Installs the Debian packages needed to build, test, fuzz and bench rlimitd.
# Idempotent: packages already installed are left alone, and apt is not touched at all when
# nothing is missing. Runs non-interactively; uses sudo only when not root.
set -euo pipefail

packages=(
    meson ninja-build pkg-config gcc clang libclang-rt-14-dev   # build, sanitizers, libFuzzer
    libuv1-dev libhiredis-dev libxxhash-dev libmicrohttpd-dev    # the daemon's libraries
    liblua5.1-0-dev lua-cjson-dev lua-bitop-dev                  # scripting (EVAL)
    libcriterion-dev                                             # unit and integration tests
    redis-tools                                                  # redis-cli, redis-benchmark
    redis-server                                                 # the bench's baseline
    prometheus                                                   # promtool check metrics (tests)
    python3 coreutils procps                                     # scripts, timeout, ps
    python3-redis                                                # the module's cluster test
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "deps.sh: all ${#packages[@]} packages already installed"
    exit 0
fi

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
    sudo=(sudo)
fi

echo "deps.sh: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" >/dev/null
echo "deps.sh: done"
