#!/usr/bin/env bash
# Install, build and pass every test, as CI does (.ci/run):
#   1. tests/deps.sh (Debian packages);
#   2. build-ci:   -Dwerror=true, every unit and integration test, and rlimit.so (-Dmodule=true)
#                  with its tests against Debian's redis-server, a 3+3 Redis Cluster included;
#   3. build-asan: ASan + UBSan, every test again; fails on any sanitizer report in the test log
#      (Criterion runs each test in a forked child, so a report there does not always fail the run
#      by itself);
#   4. build-tsan: ThreadSanitizer: tsan_limiter_top (LIMITER TOP's sketches written by two
#      threads while read, resized and reset), then the daemon driven by build-ci's config_race
#      test (CONFIG SET of every live directive while traffic flows on two I/O threads),
#      concurrency test, script_race test, pubsub test (delivery across two I/O threads) and
#      wait test (WAIT's waiters, timers and wake-ups across the I/O threads); fails on any report;
#   5. tests/fuzz/run.sh, when it exists (fuzz_resp and fuzz_lua, a minute each).
# Keeps going after a failure so the summary shows everything, then exits non-zero if anything
# failed. Works from a fresh clone, without a terminal or standard input.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
start=$(date +%s)

failures=()     # one line per failed step
summaries=()    # build dirs whose test logs go into the summary
test_args=()    # extra `meson test` arguments for the next build_and_test

step() {
    printf '\n==== %s ====\n' "$*"
}

# meson setup that also works on a directory left over from an earlier run.
setup() {
    local dir=$1
    shift
    if [[ -f "$dir/build.ninja" ]]; then
        meson setup --reconfigure "$dir" "$@"
    else
        rm -rf "$dir"
        meson setup "$dir" "$@"
    fi
}

# Configure, build and test one build directory. Records failures instead of stopping.
build_and_test() {
    local dir=$1
    shift
    step "$dir: configure ($*)"
    if ! setup "$dir" "$@" </dev/null; then
        failures+=("$dir: meson setup failed")
        return
    fi
    step "$dir: build"
    if ! meson compile -C "$dir" </dev/null; then
        failures+=("$dir: build failed")
        return
    fi
    step "$dir: test"
    rm -f "$dir/meson-logs/testlog.json" "$dir/meson-logs/testlog.txt"
    if ! meson test -C "$dir" --print-errorlogs "${test_args[@]}" </dev/null; then
        failures+=("$dir: meson test reported failures")
    fi
    summaries+=("$dir")
}

step "dependencies"
if ! bash tests/deps.sh </dev/null; then
    echo "run-all: tests/deps.sh failed" >&2
    exit 1
fi

build_and_test build-ci -Dwerror=true -Dtests=true -Dmodule=true

# The ASan+UBSan run. The options reach the test processes and, through them, the daemon the
# integration tests start.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The self-checks run redis-server against itself (no rlimitd code for the sanitizers to see);
# build-ci has run them.
test_args=(--no-suite selfcheck)
build_and_test build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true -Dmodule=true \
    -Dtests=true
asan_log=build-asan/meson-logs/testlog.txt
if [[ -f "$asan_log" ]]; then
    reports=$(grep -c -E 'runtime error:|LeakSanitizer|AddressSanitizer' "$asan_log" || true)
    if ((reports > 0)); then
        grep -n -E 'runtime error:|LeakSanitizer|AddressSanitizer' "$asan_log" | head -20 || true
        failures+=("build-asan: $reports sanitizer report lines in $asan_log (first ones above)")
    fi
elif [[ -f build-asan/build.ninja ]]; then
    failures+=("build-asan: no $asan_log")
fi
unset ASAN_OPTIONS UBSAN_OPTIONS

# ThreadSanitizer. Only the daemon is built with it: Criterion's test runner cannot start under
# TSan (its shared arena mapping fails), and the daemon is what runs the threads. build-ci's
# it_config_race, it_concurrency (50 clients on 2 threads, issue 31) and it_script_race
# (EVAL/EVALSHA/SCRIPT FLUSH/SCRIPT KILL from many connections, issue 27), it_pubsub (delivery
# and subscriptions across two I/O threads, issue 30) and it_wait (WAIT's waiters woken across
# the I/O threads, issue 31) drive it; TSan writes
# its reports to files (log_path), so they are found even when halt_on_error stops the daemon
# before the test prints its log.
tsan_result="skipped (no build-ci/tests/integration/it_config_race)"
if [[ -x build-ci/tests/integration/it_config_race ]]; then
    step "build-tsan: configure, build the daemon and tsan_limiter_top, run both"
    tsan_reports=$root/build-tsan/tsan-reports
    if setup build-tsan -Db_sanitize=thread -Dwerror=true -Dtests=true -Dmodule=false \
        </dev/null && meson compile -C build-tsan rlimitd tests/unit/tsan_limiter_top </dev/null; then
        rm -rf "$tsan_reports"
        mkdir -p "$tsan_reports"
        tsan_result=passed
        if ! TSAN_OPTIONS="halt_on_error=1:log_path=$tsan_reports/report" \
            timeout 300 build-tsan/tests/unit/tsan_limiter_top </dev/null 2>&1 |
            tee build-tsan/tsan.log; then
            tsan_result=FAILED
            failures+=("build-tsan: tsan_limiter_top failed (build-tsan/tsan.log)")
        fi
        for it in it_config_race it_concurrency it_script_race it_pubsub it_wait; do
            [[ $tsan_result == passed ]] || break
            if ! TSAN_OPTIONS="halt_on_error=1:log_path=$tsan_reports/report" \
                RLIMITD_BIN=$root/build-tsan/rlimitd RLIMITD_SOURCE_ROOT=$root \
                timeout 600 build-ci/tests/integration/$it --jobs=1 </dev/null 2>&1 |
                tee -a build-tsan/tsan.log; then
                tsan_result=FAILED
                failures+=("build-tsan: $it failed against the TSan daemon (build-tsan/tsan.log)")
            fi
        done
        reports=$(cat "$tsan_reports"/report* build-tsan/tsan.log 2>/dev/null |
            grep -c 'WARNING: ThreadSanitizer' || true)
        if ((reports > 0)); then
            cat "$tsan_reports"/report* 2>/dev/null | head -60 || true
            tsan_result="FAILED: $reports ThreadSanitizer reports"
            failures+=("build-tsan: $reports ThreadSanitizer reports in $tsan_reports (above)")
        fi
    else
        tsan_result="FAILED: build"
        failures+=("build-tsan: setup or build failed")
    fi
fi

# Real clients and tools against the -Werror build (issue 4): redis-py, ioredis, redis-cli,
# redis-benchmark, prometheus-redis-exporter, the systemd unit and notify protocol.
compat_result="skipped (no build-ci/rlimitd)"
if [[ -x build-ci/rlimitd ]]; then
    step "compat: tests/compat/run.sh"
    compat_log=build-ci/compat.log
    if RLIMITD=build-ci/rlimitd bash tests/compat/run.sh </dev/null 2>&1 | tee "$compat_log"; then
        compat_result=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$compat_log" | tail -1)
    else
        compat_result="FAILED: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$compat_log" | tail -1)"
        failures+=("tests/compat/run.sh failed")
    fi
fi

if [[ -f tests/fuzz/run.sh ]]; then
    step "fuzz: tests/fuzz/run.sh"
    if bash tests/fuzz/run.sh </dev/null; then
        fuzz_result=passed
    else
        fuzz_result=FAILED
        failures+=("tests/fuzz/run.sh failed")
    fi
else
    fuzz_result="skipped (no tests/fuzz/run.sh)"
fi

# Per-suite counts from meson's JSON test logs: a Criterion executable reports how many tests
# it ran and how many passed; any other test counts as one.
step "summary"
total_pass=0
total_fail=0
if ((${#summaries[@]} > 0)); then
    counts=$(python3 - "${summaries[@]}" <<'PY'
import json, os, re, sys

synth = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+)")
tp = tf = 0
for d in sys.argv[1:]:
    path = os.path.join(d, "meson-logs", "testlog.json")
    if not os.path.exists(path):
        print(f"  {d}: no test log")
        tf += 1
        continue
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            m = synth.findall(out)
            if m:
                tested, passing = map(int, m[-1])
                failed = tested - passing
                if t["result"] != "OK" and failed == 0:
                    failed = 1  # crashed or timed out after its last report
            else:
                tested, passing = 1, int(t["result"] in ("OK", "EXPECTEDFAIL", "SKIP"))
                failed = 1 - passing
            tp += passing
            tf += failed
            name = t["name"].split(":", 1)[-1].strip()
            print(f"  {d:<11} {name:<40} {passing:4d} passed, {failed:3d} failed"
                  f"  [{t['result']}, {t['duration']:.1f}s]")
print(f"TOTALS {tp} {tf}")
PY
    )
    grep -v '^TOTALS ' <<<"$counts" || true
    read -r _ total_pass total_fail < <(grep '^TOTALS ' <<<"$counts")
fi
echo "  tsan: $tsan_result"
echo "  compat: $compat_result"
echo "  fuzz: $fuzz_result"
elapsed=$(($(date +%s) - start))
echo "  time: $((elapsed / 60))m$((elapsed % 60))s  (repository: $root)"
if ((${#failures[@]} > 0)); then
    echo
    echo "FAILED:"
    printf '  - %s\n' "${failures[@]}"
    # Make sure the closing count never reads as a success when a step failed outside tests.
    if ((total_fail == 0)); then
        total_fail=${#failures[@]}
    fi
fi
echo
echo "run-all: ${total_pass} passed, ${total_fail} failed"
if ((${#failures[@]} > 0 || total_fail > 0)); then
    exit 1
fi
