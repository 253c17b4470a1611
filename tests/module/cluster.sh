#!/usr/bin/env bash
# cluster.sh - rlimit.so in a real Redis Cluster: 3 primaries + 3 replicas on loopback, each
# loading the module (issue 6). Numbered checks print PASS/FAIL; the last line is
# "N passed, M failed"; the exit status is non-zero on any failure.
#
#   1. bring-up: 6 nodes, `redis-cli --cluster create --cluster-replicas 1`, cluster_state:ok on
#      every node, every replica linked and at its primary's offset
#   2. `redis-cli -c` from a node that does not own the slot routes CL.THROTTLE and ISALLOWED to
#      the owner; exact replies; the keys exist on the owner only
#   3. redis-py RedisCluster: hundreds of keys on all 3 primaries, exact limiter replies, TYPE and
#      PTTL, limited calls and peeks propagate nothing        (cluster_check.py traffic)
#   4. every replica's state equals its primary's: same keys, DEBUG DIGEST-VALUE, DUMP bytes,
#      PEXPIRETIME; replicas ran only effects (SET, RLIMIT.*)  (cluster_check.py replicas)
#   5. CLUSTER FAILOVER on a replica while a client thread hammers its primary's keys: no key is
#      allowed more than its limit over the whole run, the new primary holds the old one's exact
#      state                                                  (cluster_check.py failover)
#   6. restart a primary from its RDB, from its AOF (effect commands), and from a rewritten AOF
#      without RDB preamble (the module's AOF rewrite): same digests, DUMPs, expiries; its replica
#      still equals it afterwards
#   7. resharding: a slot holding module keys MIGRATEd to another primary keeps the exact state
#      and the limiters continue there                        (cluster_check.py migrate)
#   9. (run before 8) issue 31's commands: THROTTLE.ALL routed by a hash tag with exact replies,
#      CROSSSLOT for keys in two slots, LEASE.ACQUIRE ... WAIT served by a release and its grant
#      on the slot's replicas                                  (cluster_check.py limits)
#   8. at the end every replica still equals its primary, and no node crashed
#
# Environment:
#   RLIMIT_MODULE        the module (default: build-mod/rlimit.so under the repo root)
#   RLIMIT_CLUSTER_PORT  first port (default 30100); nodes use PORT..PORT+5, cluster bus
#                        PORT+50..PORT+55, everything must stay within 30000-30999
#   REDIS_SERVER, REDIS_CLI, PYTHON   the binaries (default: from PATH; python needs redis-py)
#   KEEP_TMP=1           keep the temporary directory (node dirs, logs, snapshots)
# Every process started here is killed and the temporary directory removed on exit.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MODULE=${RLIMIT_MODULE:-$REPO/build-mod/rlimit.so}
BASE=${RLIMIT_CLUSTER_PORT:-30100}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
CHECK_PY=$HERE/cluster_check.py
N=6
START=$(date +%s)

PASS=0
FAIL=0
PIDS=()  # PIDS[i]: the running redis-server of node i
HELPER=  # the running cluster_check.py, if any
ROOT=

pass() {
    PASS=$((PASS + 1))
    echo "PASS $*"
}
fail() {
    FAIL=$((FAIL + 1))
    echo "FAIL $*"
}
note() { echo "# $*"; }

finish() {
    echo "$PASS passed, $FAIL failed"
    ((FAIL == 0))
    exit $?
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    local pid
    set +e
    [[ -n "$HELPER" ]] && kill "$HELPER" 2>/dev/null
    for pid in "${PIDS[@]}"; do
        [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}"; do
        [[ -n "$pid" ]] && wait "$pid" 2>/dev/null
    done
    if [[ -n "$ROOT" && -d "$ROOT" ]]; then
        if [[ -n "${KEEP_TMP:-}" ]]; then
            echo "# kept $ROOT"
        else
            rm -rf "$ROOT"
        fi
    fi
}
trap cleanup EXIT
trap 'echo "# interrupted"; exit 130' INT TERM HUP

port_of() { echo $((BASE + $1)); }
bus_of() { echo $((BASE + 50 + $1)); }
node_of_port() { echo $(($1 - BASE)); }
rcli() { # rcli PORT ARGS... (no redirects followed)
    local p=$1
    shift
    timeout 20 "$REDIS_CLI" -h 127.0.0.1 -p "$p" "$@" </dev/null
}

# ---- preconditions ----
if ! [[ "$BASE" =~ ^[0-9]+$ ]] || ((BASE < 30000 || BASE + 55 > 30999)); then
    fail "0 RLIMIT_CLUSTER_PORT=$BASE: must leave PORT..PORT+55 within 30000-30999"
    finish
fi
for b in "$REDIS_SERVER" "$REDIS_CLI" timeout; do
    if ! command -v "$b" >/dev/null; then
        fail "0 $b not found (Debian: redis-server, redis-tools, coreutils)"
        finish
    fi
done
if [[ ! -f "$MODULE" ]]; then
    fail "0 module $MODULE not found (build: meson setup build-mod -Dmodule=true -Dtests=false && ninja -C build-mod)"
    finish
fi
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
PY=
for c in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import redis.cluster' 2>/dev/null; then
        PY=$c
        break
    fi
done
if [[ -z "$PY" ]]; then
    fail "0 no python3 with redis-py's redis.cluster (Debian: python3-redis)"
    finish
fi
# The first port of the cluster's PORT..PORT+5 and buses that nothing listens on, or "".
ports_busy() {
    local i p
    for ((i = 0; i < N; i++)); do
        for p in $(port_of $i) $(bus_of $i); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
                echo "$p"
                return
            fi
        done
    done
}
busy=$(ports_busy)
# Without RLIMIT_CLUSTER_PORT, another test run on the machine may hold the default range: try
# the next hundreds of 30000-30999 before giving up.
if [[ -n "$busy" && -z "${RLIMIT_CLUSTER_PORT:-}" ]]; then
    for try in 30200 30300 30400 30500 30600 30700 30800 30900; do
        BASE=$try
        busy=$(ports_busy)
        [[ -z "$busy" ]] && break
    done
fi
if [[ -n "$busy" ]]; then
    fail "0 port $busy is in use (set RLIMIT_CLUSTER_PORT)"
    finish
fi
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/rlimit-cluster.XXXXXX")
note "module $MODULE, ports $BASE-$((BASE + N - 1)), dir $ROOT, python $PY"

# Python helper; its PASS/FAIL lines are counted here. A crash without a FAIL line is a FAIL.
py() {
    local out rc line nfail=0
    out=$ROOT/py.$RANDOM.out
    # In the background and waited for, so that a signal to this script is handled at once.
    timeout 240 "$PY" "$CHECK_PY" "$@" >"$out" 2>"$out.err" &
    HELPER=$!
    wait "$HELPER"
    rc=$?
    HELPER=
    while IFS= read -r line; do
        echo "$line"
        case $line in
        PASS\ *) PASS=$((PASS + 1)) ;;
        FAIL\ *)
            FAIL=$((FAIL + 1))
            nfail=$((nfail + 1))
            ;;
        esac
    done <"$out"
    if ((rc != 0 && nfail == 0)); then
        fail "cluster_check.py $1 exited $rc: $(tail -n 5 "$out.err" | tr '\n' ' ')"
    fi
    return $rc
}

# ---- nodes ----
write_conf() { # write_conf I
    local i=$1 d=$ROOT/node$1
    mkdir -p "$d"
    cat >"$d/redis.conf" <<EOF
port $(port_of "$i")
bind 127.0.0.1
protected-mode no
daemonize no
dir $d
logfile $d/redis.log
loadmodule $MODULE
enable-debug-command yes
cluster-enabled yes
cluster-config-file nodes.conf
cluster-port $(bus_of "$i")
# High: a primary restarted in check 6 must not be failed over while it is down.
cluster-node-timeout 15000
appendonly yes
appendfsync always
appenddirname appendonlydir
save 3600 1 300 100 60 10000
dbfilename dump.rdb
EOF
}

start_node() { # start_node I [extra redis-server args]; waits until it answers and has loaded
    local i=$1 p t
    shift
    p=$(port_of "$i")
    "$REDIS_SERVER" "$ROOT/node$i/redis.conf" "$@" >>"$ROOT/node$i/stdout.log" 2>&1 &
    PIDS[i]=$!
    for ((t = 0; t < 300; t++)); do
        if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
            note "node $i ($p) exited; log tail:"
            tail -n 5 "$ROOT/node$i/redis.log" "$ROOT/node$i/stdout.log" | sed 's/^/#   /'
            PIDS[i]=
            return 1
        fi
        if [[ $(rcli "$p" PING 2>/dev/null) == PONG ]] &&
            rcli "$p" INFO persistence 2>/dev/null | grep -q '^loading:0'; then
            return 0
        fi
        sleep 0.1
    done
    note "node $i ($p) did not answer within 30 s"
    return 1
}

kill_node() { # kill_node I: SIGKILL, no save
    local i=$1
    [[ -n "${PIDS[i]:-}" ]] || return 0
    kill -9 "${PIDS[i]}" 2>/dev/null
    wait "${PIDS[i]}" 2>/dev/null
    PIDS[i]=
}

cluster_ok() { # every running node says cluster_state:ok and knows all N nodes
    local i p inf
    for ((i = 0; i < N; i++)); do
        p=$(port_of $i)
        inf=$(rcli "$p" CLUSTER INFO 2>/dev/null | tr -d '\r')
        grep -q '^cluster_state:ok' <<<"$inf" || return 1
        grep -q "^cluster_known_nodes:$N\$" <<<"$inf" || return 1
    done
}

wait_cluster_ok() { # wait_cluster_ok SECONDS
    local t
    for ((t = 0; t < $1 * 10; t++)); do
        cluster_ok && return 0
        sleep 0.1
    done
    return 1
}

# The port of the primary that owns SLOT, from CLUSTER NODES on PORT.
slot_owner() { # slot_owner PORT SLOT
    rcli "$1" CLUSTER NODES | tr -d '\r' | awk -v s="$2" '
        $3 ~ /master/ {
            for (f = 9; f <= NF; f++) {
                if ($f ~ /^\[/) continue
                n = split($f, r, "-"); lo = r[1]; hi = (n > 1) ? r[2] : r[1]
                if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "[:@]"); print a[2]; exit }
            }
        }'
}

primaries() { # the primary ports, from CLUSTER NODES on PORT
    rcli "$1" CLUSTER NODES | tr -d '\r' | awk '$3 ~ /master/ && NF > 8 { split($2, a, "[:@]"); print a[2] }' | sort -n
}

# ============ 1. bring-up ============
started=0
for ((i = 0; i < N; i++)); do
    write_conf $i
    start_node $i && started=$((started + 1))
done
if ((started == N)); then
    pass "1.1 $N redis-server nodes started with --loadmodule $(basename "$MODULE") (cluster-enabled, AOF, RDB)"
else
    fail "1.1 only $started of $N nodes started"
    finish
fi
mods=$(rcli "$BASE" MODULE LIST | tr -d '\r' | tr '\n' ' ')
note "MODULE LIST: $mods"

addrs=()
for ((i = 0; i < N; i++)); do
    addrs+=("127.0.0.1:$(port_of $i)")
done
if timeout 60 "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
    </dev/null >"$ROOT/create.log" 2>&1 && wait_cluster_ok 60; then
    pass "1.2 redis-cli --cluster create: 3 primaries + 3 replicas, cluster_state:ok on all $N nodes"
else
    fail "1.2 cluster did not form: $(tail -n 3 "$ROOT/create.log" | tr '\n' ' ')"
    finish
fi
if timeout 60 "$REDIS_CLI" --cluster check "127.0.0.1:$BASE" </dev/null >"$ROOT/check.log" 2>&1 &&
    grep -q '\[OK\] All 16384 slots covered' "$ROOT/check.log" &&
    py sync "$BASE" 60 >/dev/null; then
    pass "1.3 redis-cli --cluster check: all 16384 slots covered, nodes agree; every replica linked and at its primary's offset"
else
    fail "1.3 cluster check / replica sync: $(grep -E 'ERR|WARN|not in sync' "$ROOT/check.log" | head -n 3 | tr '\n' ' ')"
    finish
fi
mapfile -t PRIMS < <(primaries "$BASE")
note "primaries: ${PRIMS[*]}"
$PY "$CHECK_PY" topology "$BASE" | sed 's/^/# shard: primary, replica: /'

# ============ 2. redis-cli -c routing ============
key='user:{x}'
slot=$(rcli "$BASE" CLUSTER KEYSLOT "$key")
owner=$(slot_owner "$BASE" "$slot")
other=
for p in "${PRIMS[@]}"; do
    [[ $p != "$owner" ]] && { other=$p; break; }
done
note "$key: slot $slot, owner $owner; asking $other"
moved=$(rcli "$other" CL.THROTTLE "$key" 15 30 3600 1 2>&1 | tr -d '\r')
if [[ $moved == "MOVED $slot 127.0.0.1:$owner" ]]; then
    pass "2.1 without -c, $other answers CL.THROTTLE $key with MOVED $slot 127.0.0.1:$owner (key spec at argument 1)"
else
    fail "2.1 without -c, $other answered '$moved', want 'MOVED $slot 127.0.0.1:$owner'"
fi
# 30 an hour: one every 120 s, so the key lives 240 s after the second call and is still there
# at 2.4 however slow the machine. The reset times count down while the calls run: the second
# is 240 s less the seconds between the calls, which only a very slow machine makes more than 10.
got=$(rcli "$other" -c CL.THROTTLE "$key" 15 30 3600 1 | tr -d '\r' | tr '\n' ' ')
got2=$(rcli "$other" -c CL.THROTTLE "$key" 15 30 3600 1 | tr -d '\r' | tr '\n' ' ')
reset2=${got2##0 16 14 -1 }
reset2=${reset2% }
if [[ $got == "0 16 15 -1 120 " && $got2 == "0 16 14 -1 $reset2 " && $reset2 =~ ^[0-9]+$ &&
      $reset2 -le 240 && $reset2 -gt 120 ]]; then
    pass "2.2 redis-cli -c -p $other CL.THROTTLE $key 15 30 3600 1 (twice): '0 16 15 -1 120', '0 16 14 -1 $reset2'"
else
    fail "2.2 redis-cli -c CL.THROTTLE replies '$got' '$got2', want '0 16 15 -1 120 ' '0 16 14 -1 (121..240) '"
fi
seq_got=
for ((j = 0; j < 6; j++)); do
    seq_got+=$(rcli "$other" -c ISALLOWED x login 60 5 | tr -d '\r')
done
if [[ $seq_got == 111110 ]]; then
    pass "2.3 redis-cli -c -p $other ISALLOWED x login 60 5 (x6): 1 1 1 1 1 0"
else
    fail "2.3 redis-cli -c ISALLOWED x6 gave '$seq_got', want 111110"
fi
where=
for p in "${PRIMS[@]}"; do
    where+="$p:$(rcli "$p" CLUSTER COUNTKEYSINSLOT "$slot" | tr -d '\r'):$(rcli "$p" DBSIZE | tr -d '\r') "
done
t1=$(rcli "$owner" TYPE "$key" | tr -d '\r')
t2=$(rcli "$owner" TYPE 'hist:{x}:login' | tr -d '\r')
want_where=
for p in "${PRIMS[@]}"; do
    if [[ $p == "$owner" ]]; then want_where+="$p:2:2 "; else want_where+="$p:0:0 "; fi
done
if [[ $where == "$want_where" && $t1 == string && $t2 == rlim-wlog ]]; then
    pass "2.4 $key (string) and hist:{x}:login (rlim-wlog) exist on the owner $owner only (slot:keys per primary $where)"
else
    fail "2.4 keys per primary (port:in-slot:dbsize) '$where' want '$want_where'; TYPEs '$t1' '$t2'"
fi
rcli "$owner" DEL "$key" 'hist:{x}:login' >/dev/null

# ============ 3. redis-py RedisCluster traffic ============
py traffic "$BASE"

# ============ 4. replicas equal their primaries ============
py replicas "$BASE" 4

# ============ 5. failover mid-traffic ============
py failover "$BASE"
if wait_cluster_ok 30; then
    py replicas "$BASE" 5.7 >"$ROOT/after-failover.out"
    # Report it as one check: every replica (the old primary among them) equals its primary.
    nfail=$(grep -c '^FAIL' "$ROOT/after-failover.out")
    npass=$(grep -c '^PASS' "$ROOT/after-failover.out")
    PASS=$((PASS - npass))
    FAIL=$((FAIL - nfail))
    if ((nfail == 0)); then
        pass "5.7 after the failover every replica (the old primary included) equals its primary ($npass sub-checks)"
    else
        fail "5.7 after the failover: $(grep '^FAIL' "$ROOT/after-failover.out" | head -n 3 | tr '\n' ' ')"
    fi
else
    fail "5.7 cluster_state not ok on every node after the failover"
fi

# ============ 6. restart a primary from RDB and from AOF ============
# The node: a current primary that holds state (after check 5, the promoted replica).
mapfile -t PRIMS < <(primaries "$BASE")
X=
for p in "${PRIMS[@]}"; do
    n=$(rcli "$p" DBSIZE | tr -d '\r')
    if [[ -z $X || $n -gt $(rcli "$X" DBSIZE | tr -d '\r') ]]; then X=$p; fi
done
xi=$(node_of_port "$X")
XD=$ROOT/node$xi
note "restarting primary $X (node $xi, $(rcli "$X" DBSIZE | tr -d '\r') keys)"
snap() { # snap FILE: state of X
    timeout 60 "$PY" "$CHECK_PY" snapshot "$X" "$1"
}
restarted() { # restarted WHAT: X answers again, is still a primary, cluster ok
    local r
    r=$(rcli "$X" ROLE | head -n 1 | tr -d '\r')
    if [[ $r != master ]]; then
        note "$X came back as $r"
        return 1
    fi
    wait_cluster_ok 30
}

newest() { # the last of the files given (the AOF files are numbered), or nothing
    local f last=
    for f in "$@"; do
        [[ -f $f ]] && last=$f
    done
    echo "$last"
}
cmd_counts() { # the effects and the user commands in an AOF file: "PXAT x12 RLIMIT.LOGPUSH x3 ..."
    grep -aioE 'rlimit\.[a-z]+|^pxat|cl\.throttle|isallowed|^gcra' "$1" 2>/dev/null | tr '[:lower:]' '[:upper:]' |
        sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? " " : ""), $2, $1 }'
}

py sync "$BASE" 30 >/dev/null
snap "$ROOT/s0.json"
T_S0=$(date +%s%3N)
slack() { echo $(($(date +%s%3N) - T_S0 + 1000)); } # PTTL may have dropped by the time since s0
logmark() { LOGMARK=$(wc -l <"$XD/redis.log"); }
newlog() { tail -n +$((LOGMARK + 1)) "$XD/redis.log"; } # what X logged since logmark
# 6.1: the incremental AOF holds effects, not user commands.
incr=$(newest "$XD"/appendonlydir/*.incr.aof)
if [[ -n $incr ]] && grep -qai 'rlimit\.' "$incr" && grep -qai '^pxat' "$incr" &&
    ! grep -qaiE 'cl\.throttle|isallowed|^gcra' "$incr"; then
    pass "6.1 $X's AOF ($(basename "$incr"), $(wc -c <"$incr") bytes) holds effects: SET ... PXAT and RLIMIT.* ($(cmd_counts "$incr")), no CL.THROTTLE/ISALLOWED/GCRA"
else
    fail "6.1 AOF '$incr' holds: $(cmd_counts "$incr")"
fi

# 6.2: RDB. SAVE, crash, start with appendonly no so the RDB is what loads.
rcli "$X" SAVE >/dev/null
kill_node "$xi"
logmark
if start_node "$xi" --appendonly no && restarted rdb &&
    newlog | grep -q 'DB loaded from disk' && snap "$ROOT/s1.json"; then
    py compare 6.2 "restarted from RDB (SAVE, kill -9, appendonly no)" "$ROOT/s0.json" "$ROOT/s1.json" "$(slack)"
else
    fail "6.2 restart from RDB: $(newlog | tail -n 3 | tr '\n' ' ')"
fi

# 6.3: AOF. Crash again, start with appendonly yes: base + incremental AOF (the effect commands).
kill_node "$xi"
logmark
if start_node "$xi" && restarted aof &&
    newlog | grep -q 'DB loaded from append only file' && snap "$ROOT/s2.json"; then
    py compare 6.3 "restarted from AOF (kill -9, appendonly yes, RLIMIT.* replayed)" "$ROOT/s0.json" "$ROOT/s2.json" "$(slack)"
else
    fail "6.3 restart from AOF: $(newlog | tail -n 3 | tr '\n' ' ')"
fi

# 6.4: rewritten AOF without RDB preamble: the base is the module's aof_rewrite output.
rcli "$X" CONFIG SET aof-use-rdb-preamble no >/dev/null
rcli "$X" BGREWRITEAOF >/dev/null
for ((t = 0; t < 300; t++)); do
    pi=$(rcli "$X" INFO persistence | tr -d '\r')
    grep -q '^aof_rewrite_in_progress:0' <<<"$pi" && grep -q '^aof_rewrite_scheduled:0' <<<"$pi" &&
        grep -q '^aof_last_bgrewrite_status:ok' <<<"$pi" && break
    sleep 0.1
done
base=$(newest "$XD"/appendonlydir/*.base.aof)
if [[ -n $base ]] && ! head -c 5 "$base" | grep -q REDIS && grep -qai 'rlimit\.' "$base"; then
    note "rewritten base $(basename "$base"): $(cmd_counts "$base")"
    kill_node "$xi"
    logmark
    if start_node "$xi" --aof-use-rdb-preamble no && restarted aof-rewrite &&
        newlog | grep -q 'DB loaded from append only file' && snap "$ROOT/s3.json"; then
        py compare 6.4 "restarted from a rewritten AOF without RDB preamble (module aof_rewrite)" "$ROOT/s0.json" "$ROOT/s3.json" "$(slack)"
    else
        fail "6.4 restart from rewritten AOF: $(newlog | tail -n 3 | tr '\n' ' ')"
    fi
else
    fail "6.4 BGREWRITEAOF without preamble: base '$base' $(head -c 40 "$base" 2>/dev/null | tr -c '[:print:]' .)"
fi

# 6.5: after all that the cluster is whole and X's replica still equals it.
if wait_cluster_ok 30; then
    py replicas "$BASE" 6.5 >"$ROOT/after-restart.out"
    nfail=$(grep -c '^FAIL' "$ROOT/after-restart.out")
    npass=$(grep -c '^PASS' "$ROOT/after-restart.out")
    PASS=$((PASS - npass))
    FAIL=$((FAIL - nfail))
    if ((nfail == 0)); then
        pass "6.5 after the restarts every replica equals its primary ($npass sub-checks)"
    else
        fail "6.5 after the restarts: $(grep '^FAIL' "$ROOT/after-restart.out" | head -n 3 | tr '\n' ' ')"
    fi
else
    fail "6.5 cluster_state not ok on every node after the restarts"
fi

# ============ 7. resharding: MIGRATE a slot of module keys ============
py migrate "$BASE"

# ============ 9. THROTTLE.ALL (issue 31) in the cluster ============
# Before the end state, so that check 8 compares the replicas of these keys too.
py limits "$BASE"

# ============ 8. the end state ============
if wait_cluster_ok 30; then
    py replicas "$BASE" 8.1 >"$ROOT/final.out"
    nfail=$(grep -c '^FAIL' "$ROOT/final.out")
    npass=$(grep -c '^PASS' "$ROOT/final.out")
    PASS=$((PASS - npass))
    FAIL=$((FAIL - nfail))
    if ((nfail == 0)); then
        pass "8.1 at the end every replica equals its primary ($npass sub-checks)"
    else
        fail "8.1 at the end: $(grep '^FAIL' "$ROOT/final.out" | head -n 3 | tr '\n' ' ')"
    fi
else
    fail "8.1 cluster_state not ok on every node at the end"
fi
crashed=
for ((i = 0; i < N; i++)); do
    if [[ -z "${PIDS[i]:-}" ]] || ! kill -0 "${PIDS[i]}" 2>/dev/null ||
        grep -q 'crashed by signal\|ASSERTION FAILED\|Guru Meditation' "$ROOT/node$i/redis.log"; then
        crashed+="node$i($(port_of $i)) "
    fi
done
if [[ -z $crashed ]]; then
    pass "8.2 all $N nodes still running, no crash report in any log"
else
    fail "8.2 crashed or gone: $crashed"
fi
note "run time $(($(date +%s) - START)) s"
finish
