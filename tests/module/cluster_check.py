#!/usr/bin/env python3
"""cluster_check.py - the redis-py half of tests/module/cluster.sh (read that file first).

Runs against a live Redis Cluster whose nodes load rlimit.so. cluster.sh owns the processes; this
file only talks to them. Each subcommand prints one line per check, "PASS <n.m> <what>" or
"FAIL <n.m> <what>: <why>", and exits 1 if any check failed (cluster.sh counts the lines).

  traffic   SEED                    check 3: RedisCluster routes the module commands, exact replies
  replicas  SEED CHECK              check 4: every replica's state equals its primary's
  failover  SEED                    check 5: CLUSTER FAILOVER mid-traffic, the limits hold
  migrate   SEED                    check 7: a slot of module keys MIGRATEd to another primary
  snapshot  PORT FILE               state of one node (every key's type, digest, expiry, DUMP)
  compare   CHECK WHAT OLD NEW      two snapshots: same keys, digests, DUMPs, PEXPIRETIMEs
  topology  SEED                    prints "primary_port replica_port" per shard
  sync      SEED                    waits until every replica has caught up with its primary

Needs redis-py with redis.cluster (Debian: python3-redis).
"""

import json
import logging
import os
import subprocess
import sys
import threading
import time

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

# RedisCluster logs every MOVED / connection error it retries, with a traceback: expected during
# the failover, and counted by this file where it matters.
logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)

HOST = "127.0.0.1"
TIMEOUT = 10  # seconds, every socket operation

failures = 0


def check(num, ok, what, why=""):
    global failures
    if ok:
        print(f"PASS {num} {what}", flush=True)
    else:
        failures += 1
        print(f"FAIL {num} {what}: {why}", flush=True)
    return ok


def note(msg):
    print(f"# {msg}", flush=True)


def node(port, decode=True):
    return redis.Redis(host=HOST, port=port, socket_timeout=TIMEOUT,
                       socket_connect_timeout=TIMEOUT, decode_responses=decode)


def cluster(seed):
    # More retries than the default 3: during a failover a call can meet a paused primary,
    # a MOVED to a node whose view is not updated yet, and a connection reset, in a row.
    return RedisCluster(host=HOST, port=seed, decode_responses=True,
                        socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                        cluster_error_retry_attempts=10)


# ---- topology ----

def shards(seed):
    """[(primary_port, [replica_ports], [(lo, hi), ...])] from CLUSTER NODES on the seed."""
    text = node(seed).execute_command("CLUSTER", "NODES")
    if isinstance(text, bytes):
        text = text.decode()
    nodes = {}
    for line in text.strip().splitlines():
        f = line.split()
        nid, addr, flags, master = f[0], f[1], f[2].split(","), f[3]
        port = int(addr.split("@")[0].rsplit(":", 1)[1])
        ranges = []
        for s in f[8:]:
            if s.startswith("["):
                continue  # a slot being migrated
            lo, _, hi = s.partition("-")
            ranges.append((int(lo), int(hi or lo)))
        nodes[nid] = dict(port=port, flags=flags, master=master, ranges=ranges)
    out = []
    for nid, n in nodes.items():
        if "master" in n["flags"] and n["ranges"]:
            reps = sorted(m["port"] for m in nodes.values() if m["master"] == nid)
            out.append((n["port"], reps, n["ranges"]))
    return sorted(out)


def owner(shard_list, slot):
    for prim, _, ranges in shard_list:
        if any(lo <= slot <= hi for lo, hi in ranges):
            return prim
    return None


def info(port, section):
    return node(port).info(section)


def wait_sync(seed, timeout=30):
    """Every replica connected and at its primary's replication offset. Returns '' or why not."""
    deadline = time.time() + timeout
    why = "no shards"
    while time.time() < deadline:
        why = ""
        sh = shards(seed)
        views = {p: shards(p) for prim, reps, _ in sh for p in [prim] + reps}
        if len(sh) != 3 or any(len(reps) != 1 for _, reps, _ in sh):
            why = f"seed {seed} sees {sh} (want 3 primaries with one replica each)"
        elif any(v != sh for v in views.values()):
            why = "the nodes disagree: " + "; ".join(f"{p}: {v}" for p, v in views.items())
        for prim, reps, _ in ([] if why else sh):
            p = info(prim, "replication")
            if p.get("role") != "master":
                why = f"{prim} is not a master"
                break
            for r in reps:
                ri = info(r, "replication")
                if ri.get("master_link_status") != "up":
                    why = f"replica {r}: link {ri.get('master_link_status')}"
                elif ri.get("master_sync_in_progress", 0) != 0:
                    why = f"replica {r}: sync in progress"
                elif ri.get("slave_repl_offset") != p.get("master_repl_offset"):
                    why = (f"replica {r} offset {ri.get('slave_repl_offset')} != primary {prim} "
                           f"{p.get('master_repl_offset')}")
                if why:
                    break
            if why:
                break
        if not why:
            return ""
        time.sleep(0.1)
    return why


# ---- the state of one node ----

def snapshot(port):
    """{key: {type, digest, pexpiretime, pttl, dump(hex)}} for every key on the node."""
    r = node(port, decode=False)
    r.execute_command("READONLY")  # key commands on a replica answer MOVED without it
    keys = sorted(set(r.scan_iter(count=1000)))
    out = {}
    for i in range(0, len(keys), 200):
        chunk = keys[i:i + 200]
        p = r.pipeline(transaction=False)
        for k in chunk:
            p.type(k)
            p.execute_command("DEBUG", "DIGEST-VALUE", k)
            p.execute_command("PEXPIRETIME", k)
            p.pttl(k)
            p.dump(k)
        res = p.execute(raise_on_error=False)
        for j, k in enumerate(chunk):
            t, dg, pet, pttl, dump = res[5 * j:5 * j + 5]
            if isinstance(dg, list):
                dg = dg[0] if dg else b""
            out[k.decode("latin-1")] = dict(
                type=t.decode() if isinstance(t, bytes) else str(t),
                digest=dg.decode() if isinstance(dg, bytes) else str(dg),
                pexpiretime=pet if isinstance(pet, int) else str(pet),
                pttl=pttl if isinstance(pttl, int) else str(pttl),
                dump=dump.hex() if isinstance(dump, bytes) else str(dump))
    return out


def diff(old, new, pttl_slack_ms=None, pexpiretime_slack_ms=0):
    """Differences between two snapshots, as a list of strings (empty: the same state).
    pttl_slack_ms: if set, also require new.pttl <= old.pttl and within the slack of it.
    pexpiretime_slack_ms: new.pexpiretime may be that much later than old's (MIGRATE)."""
    out = []
    for k in sorted(set(old) - set(new)):
        out.append(f"{k!r} missing")
    for k in sorted(set(new) - set(old)):
        out.append(f"{k!r} unexpected")
    for k in sorted(set(old) & set(new)):
        a, b = old[k], new[k]
        for f in ("type", "digest", "pexpiretime", "dump"):
            if f == "pexpiretime" and pexpiretime_slack_ms and isinstance(a[f], int) and \
                    isinstance(b[f], int) and 0 <= b[f] - a[f] <= pexpiretime_slack_ms:
                continue
            if a[f] != b[f]:
                out.append(f"{k!r} {f}: {str(a[f])[:80]} != {str(b[f])[:80]}")
        if pttl_slack_ms is not None and isinstance(a["pttl"], int) and isinstance(b["pttl"], int):
            if not (a["pttl"] - pttl_slack_ms <= b["pttl"] <= a["pttl"]):
                out.append(f"{k!r} pttl {a['pttl']} -> {b['pttl']} (slack {pttl_slack_ms} ms)")
    return out


def sane(snap):
    """Why a snapshot cannot show anything (no keys, digests all zero), or ''."""
    if not snap:
        return "no keys"
    digests = {v["digest"] for v in snap.values()}
    if digests <= {"0" * 40}:
        return "every DEBUG DIGEST-VALUE is zero (no digest callback?)"
    if any(not isinstance(v["pexpiretime"], int) or v["pexpiretime"] <= 0 for v in snap.values()):
        bad = [k for k, v in snap.items()
               if not isinstance(v["pexpiretime"], int) or v["pexpiretime"] <= 0]
        return f"{len(bad)} keys without an expiry, e.g. {bad[0]!r}"
    return ""


def show(lst, n=5):
    return "; ".join(lst[:n]) + (f"; ... ({len(lst)} in all)" if len(lst) > n else "")


# ---- check 3: RedisCluster traffic, exact semantics ----

def gcra_fits(key, args, calls):
    """The GCRA model (tests/cases/limit_model.h, through $LIMIT_CHECK): do the replies of
    `CL.THROTTLE key *args` fit some server time within the CLOCK_REALTIME bounds measured around
    each call? calls: (quantity, before_ns, after_ns, reply). Returns "" or why not."""
    lines = "".join("throttle %s %d %d %d %d %d %d %s\n" % (
        key, *args, q, b, a, " ".join(str(int(v)) for v in reply)) for (q, b, a, reply) in calls)
    p = subprocess.run([os.environ["LIMIT_CHECK"]], input=lines, capture_output=True, text=True)
    return "" if p.returncode == 0 else (p.stdout + p.stderr).strip()


def timed_throttle(rc, key, args, quantities):
    """CL.THROTTLE key *args q for each q: (replies, model failure or "", took_ns, t0)."""
    calls = []
    t0 = time.time_ns()
    for q in quantities:
        b = time.time_ns()
        reply = rc.execute_command("CL.THROTTLE", key, *args, *(() if q is None else (q,)))
        calls.append((1 if q is None else q, b, time.time_ns(), reply))
    why = gcra_fits(key, args, calls)
    return [c[3] for c in calls], why, calls[-1][2] - t0, t0


QUICK_NS = 1_000_000_000  # the exact replies hold for calls within one second


def throttle_expect(call, limit, ei_s):
    """Reply number `call` (0-based) to back-to-back CL.THROTTLE k (limit-1) 1 ei_s."""
    if call < limit:
        return [0, limit, limit - 1 - call, -1, ei_s * (call + 1)]
    return [1, limit, 0, ei_s, ei_s * limit]


def cmd_traffic(seed):
    rc = cluster(seed)
    sh = shards(seed)
    check("3.1", len(sh) == 3 and all(len(r) == 1 for _, r, _ in sh),
          "RedisCluster sees 3 primaries with one replica each", f"shards {sh}")
    nkeys, nusers = 150, 150

    # Every reply must fit the GCRA model with the time measured around it; the exact values
    # are due when a key's calls took under a second (nearly always).
    bad = []
    created = {}  # key -> CLOCK_REALTIME before its first call
    for i in range(nkeys):
        k = f"c3:thr:{i}"
        got, why, took, created[k] = timed_throttle(rc, k, (4, 1, 3600), [None] * 8)
        want = [throttle_expect(c, 5, 3600) for c in range(8)]
        if why:
            bad.append(f"{k}: {why}")
        elif got != want and took < QUICK_NS:
            bad.append(f"{k}: {got} want {want}")
    check("3.2", not bad, f"CL.THROTTLE k 4 1 3600 x8 on {nkeys} keys: 5 allowed, exact replies",
          show(bad))

    bad = []
    for i in range(40):
        k = f"c3:qty:{i}"
        got, why, took, created[k] = timed_throttle(rc, k, (9, 1, 3600), (3, 0, 7, 7, 6, 1))
        want = [[0, 10, 7, -1, 10800],        # 3 of 10 used
                [0, 10, 7, -1, 10800],        # peek: nothing consumed
                [0, 10, 0, -1, 36000],        # 10 of 10
                [1, 10, 0, 25200, 36000],     # 7 more: 7 intervals to wait
                [1, 10, 0, 21600, 36000],
                [1, 10, 0, 3600, 36000]]
        if why:
            bad.append(f"{k}: {why}")
        elif got != want and took < QUICK_NS:
            bad.append(f"{k}: {got} want {want}")
    check("3.3", not bad, "CL.THROTTLE with quantity (incl. peek 0) on 40 keys: exact replies",
          show(bad))

    bad = []
    for i in range(nusers):
        u = f"c3u{i}"
        created[f"hist:{{{u}}}:login"] = time.time_ns()
        got = [rc.execute_command("ISALLOWED", u, "login", 3600, 3) for _ in range(5)]
        if got != [1, 1, 1, 0, 0]:
            bad.append(f"{u}: {got}")
    check("3.4", not bad, f"ISALLOWED u login 3600 3 x5 on {nusers} users: 1,1,1,0,0", show(bad))

    # Every key is where the hash slot says, with the module's type and the state's expiry.
    per_primary = {}
    bad = []
    expect = {f"c3:thr:{i}": ("string", 18000_000) for i in range(nkeys)}
    expect.update({f"c3:qty:{i}": ("string", 36000_000) for i in range(40)})
    expect.update({f"hist:{{c3u{i}}}:login": ("rlim-wlog", 3600_000) for i in range(nusers)})
    for prim, _, _ in sh:
        r = node(prim)
        keys = set(r.scan_iter(match="c3:*", count=1000)) | \
            set(r.scan_iter(match="hist:{c3u*", count=1000))
        per_primary[prim] = len(keys)
        for k in keys:
            if owner(sh, key_slot(k.encode())) != prim:
                bad.append(f"{k} on {prim}, slot owned by {owner(sh, key_slot(k.encode()))}")
    total = sum(per_primary.values())
    check("3.5", total == len(expect) and not bad and all(per_primary.values()),
          f"{len(expect)} keys spread over all 3 primaries, each on its slot's owner "
          f"({', '.join(f'{p}: {n}' for p, n in sorted(per_primary.items()))})",
          f"total {total} want {len(expect)}; " + show(bad))

    bad = []
    for k, (typ, ttl_ms) in expect.items():
        prim = owner(sh, key_slot(k.encode()))
        r = node(prim)
        t, pttl = r.type(k), r.pttl(k)
        # Set ttl_ms after a call no earlier than the key's first: at most ttl_ms (+1 for the
        # module's rounding up to whole ms), at least that minus the time since then.
        low = ttl_ms - (time.time_ns() - created[k]) // 1_000_000 - 1
        mem = r.execute_command("MEMORY", "USAGE", k)
        if t != typ or not (low <= pttl <= ttl_ms + 1) or not (isinstance(mem, int)
                                                               and mem > 0):
            bad.append(f"{k}: TYPE {t} PTTL {pttl} MEMORY USAGE {mem}, want {typ}, "
                       f"[{low}, {ttl_ms + 1}], >0")
    check("3.6", not bad, "TYPE is string (GCRA state) / rlim-wlog, PTTL the state's expiry, MEMORY USAGE "
          "> 0", show(bad))

    # Effects, not commands: a limited CL.THROTTLE and a peek change no state, so the primary
    # propagates nothing (its replication offset stays). Background replication PINGs also move
    # the offset, so a move is retried a few times before it counts.
    k = "c3:thr:0"
    prim = owner(sh, key_slot(k.encode()))
    r = node(prim)
    moved = []
    for _ in range(5):
        before = r.info("replication")["master_repl_offset"]
        a = r.execute_command("CL.THROTTLE", k, 4, 1, 3600)
        b = r.execute_command("CL.THROTTLE", k, 4, 1, 3600, 0)
        after = r.info("replication")["master_repl_offset"]
        if after == before and a[0] == 1 and b[0] == 0:
            moved = []
            break
        moved.append(f"offset {before}->{after}, replies {a} {b}")
    check("3.7", not moved, "a limited call and a peek propagate nothing (primary offset unchanged)",
          show(moved))
    ranges = [rg for p_, _, rg in sh if p_ == prim][0]
    grow = keys_owned("c3:grow:", ranges, 1)[0]
    before = r.info("replication")["master_repl_offset"]
    r.execute_command("CL.THROTTLE", grow, 4, 1, 3600)
    after = r.info("replication")["master_repl_offset"]
    check("3.8", after > before, "an allowed call propagates (primary offset grows)",
          f"offset {before}->{after}")
    r.delete(grow)


# ---- check 4: replicas equal their primaries ----

def cmd_replicas(seed, num):
    why = wait_sync(seed)
    check(f"{num}.1", not why, "replication caught up (replica offset == primary offset)", why)
    sh = shards(seed)
    for i, (prim, reps, _) in enumerate(sh):
        a = snapshot(prim)
        for r in reps:
            b = snapshot(r)
            d = diff(a, b)
            s = sane(a)
            check(f"{num}.{2 + i}", not d and not s,
                  f"replica {r} == primary {prim}: {len(a)} keys, same TYPE, DEBUG DIGEST-VALUE, "
                  f"DUMP bytes, PEXPIRETIME", s or show(d))
    # The replicas applied the primaries' effects, never the user commands.
    bad, seen = [], {}
    for prim, reps, _ in sh:
        for r in reps:
            st = node(r).info("commandstats")
            for c in ("cl.throttle", "isallowed", "gcra"):
                n = st.get(f"cmdstat_{c}", {}).get("calls", 0)
                if n:
                    bad.append(f"replica {r} ran {c} {n} times")
            # GCRA state travels as SET key tat PXAT ms, window logs as RLIMIT.* effects.
            for c, v in st.items():
                if c.startswith("cmdstat_rlimit.") or c == "cmdstat_set":
                    seen[c[8:]] = seen.get(c[8:], 0) + v.get("calls", 0)
    check(f"{num}.{2 + len(sh)}", not bad and seen,
          "replicas ran only effects ("
          + ", ".join(f"{c} x{n}" for c, n in sorted(seen.items()))
          + "), no CL.THROTTLE/ISALLOWED/GCRA",
          show(bad) or "no effect ran on any replica")


# ---- check 5: failover mid-traffic ----

def keys_owned(prefix, ranges, n, fmt="{p}{i}"):
    out, i = [], 0
    while len(out) < n:
        k = fmt.format(p=prefix, i=i)
        s = key_slot(k.encode())
        if any(lo <= s <= hi for lo, hi in ranges):
            out.append(k)
        i += 1
    return out


def role(port):
    try:
        return node(port).execute_command("ROLE")[0]
    except redis.RedisError as e:
        return f"error: {e}"


class Traffic(threading.Thread):
    """Round after round of one CL.THROTTLE per A key and one ISALLOWED per A user, through its
    own RedisCluster client, until told to stop. Counts what it was allowed, per key."""

    LIMIT, WLIMIT = 50, 20

    def __init__(self, seed, keys, users):
        super().__init__(daemon=True)
        self.seed, self.keys, self.users = seed, keys, users
        self.allowed = {k: 0 for k in keys + users}
        self.rounds = 0
        self.errors = []       # calls that failed even after RedisCluster's retries (retried here)
        self.phase = "before"  # before -> during (failover asked) -> after (roles swapped)
        self.calls = {"before": 0, "during": 0, "after": 0}
        self.stop = threading.Event()
        self.exc = None

    def call(self, *args):
        for attempt in range(50):
            try:
                return self.rc.execute_command(*args)
            except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
                # A retried CL.THROTTLE may count twice on the server: that can only lower what
                # this client sees allowed, never raise it, so the check below stays sound.
                self.errors.append(f"{args[0]} {args[1]}: {type(e).__name__}: {e}")
                time.sleep(0.05)
                try:
                    self.rc.nodes_manager.initialize()
                except redis.RedisError:
                    pass
        raise RuntimeError(f"{args[:2]} failed 50 times: {self.errors[-1]}")

    def run(self):
        try:
            self.rc = cluster(self.seed)
            while not self.stop.is_set():
                for k in self.keys:
                    rep = self.call("CL.THROTTLE", k, self.LIMIT - 1, 1, 86400)
                    self.allowed[k] += rep[0] == 0
                    self.calls[self.phase] += 1
                for u in self.users:
                    rep = self.call("ISALLOWED", u, "act", 86400, self.WLIMIT)
                    self.allowed[u] += rep == 1
                    self.calls[self.phase] += 1
                self.rounds += 1
                time.sleep(0.01)
        except Exception as e:  # reported by the main thread
            self.exc = e


def cmd_failover(seed):
    sh = shards(seed)
    prim, reps, ranges = sh[0]
    rep = reps[0]
    note(f"failing over primary {prim} to its replica {rep}")
    rc = cluster(seed)

    # B: state written before the failover and never touched after it.
    bkeys = keys_owned("c5:b:", ranges, 20)
    busers = keys_owned("c5ub", ranges, 10)
    for k in bkeys:
        for _ in range(3):
            rc.execute_command("CL.THROTTLE", k, 49, 1, 86400)
    for u in busers:
        for _ in range(4):
            rc.execute_command("ISALLOWED", u, "act", 86400, 10)
    bnames = bkeys + [f"hist:{{{u}}}:act" for u in busers]
    why = wait_sync(seed)
    full = snapshot(prim)
    before = {k: full[k] for k in bnames if k in full}
    check("5.1", len(before) == len(bnames) and not why,
          f"{len(bnames)} untouched-later keys written on primary {prim} and replicated",
          why or f"{len(before)} of {len(bnames)} present")

    # A: keys the traffic thread keeps hitting across the failover.
    akeys = keys_owned("c5:a:", ranges, 12)
    ausers = keys_owned("c5ua", ranges, 6)
    t = Traffic(seed, akeys, ausers)
    t.start()
    deadline = time.time() + 30
    while t.rounds < 20 and t.is_alive() and time.time() < deadline:
        time.sleep(0.01)
    rounds_before = t.rounds
    t.phase = "during"
    res = node(rep).execute_command("CLUSTER", "FAILOVER")
    asked = time.time()
    swapped = False
    while time.time() < asked + 30:
        if role(rep) == "master" and role(prim) == "slave":
            nodes = node(rep).execute_command("CLUSTER", "NODES")
            if "myself,master" in nodes and \
                    node(rep).execute_command("CLUSTER", "INFO").find("cluster_state:ok") >= 0:
                swapped = True
                break
        time.sleep(0.05)
    took = time.time() - asked
    t.phase = "after"
    if swapped:
        # The old primary ran CL.THROTTLE/ISALLOWED while it was one; as a replica it must run
        # only effects from now on (checked in 5.7 via INFO commandstats), so count afresh.
        node(prim).execute_command("CONFIG", "RESETSTAT")
    rounds_swap = t.rounds
    # Keep going until every A key has been asked well past its limit.
    deadline = time.time() + 60
    while t.is_alive() and time.time() < deadline and \
            (t.rounds < rounds_swap + 20 or t.rounds < Traffic.LIMIT + 30):
        time.sleep(0.01)
    t.stop.set()
    t.join(30)
    check("5.2", res in ("OK", b"OK", True) and swapped,
          f"CLUSTER FAILOVER on {rep}: roles swapped in {took:.2f}s "
          f"(now {rep} {role(rep)}, {prim} {role(prim)})",
          f"reply {res!r}, {rep} {role(rep)}, {prim} {role(prim)}")
    check("5.3", t.exc is None and not t.is_alive() and t.calls["before"] > 0 and
          t.calls["after"] > 0,
          f"traffic ran across it: {t.rounds} rounds ({rounds_before} before the failover), "
          f"calls before/during/after {t.calls['before']}/{t.calls['during']}/{t.calls['after']}, "
          f"{len(t.errors)} errors retried",
          f"thread: {t.exc!r}, alive {t.is_alive()}, calls {t.calls}, errors {show(t.errors, 3)}")
    if t.errors:
        note(f"retried errors, e.g.: {show(t.errors, 3)}")

    over = [f"{k}: {n} allowed" for k, n in t.allowed.items()
            if n > (Traffic.LIMIT if k in akeys else Traffic.WLIMIT)]
    summary = sorted(set(t.allowed[k] for k in akeys)), sorted(set(t.allowed[u] for u in ausers))
    check("5.4", not over,
          f"no key allowed more than its limit across the failover: CL.THROTTLE limit "
          f"{Traffic.LIMIT} -> allowed {summary[0]}, ISALLOWED limit {Traffic.WLIMIT} -> "
          f"allowed {summary[1]}", show(over))
    # And the new primary really holds the used-up state: a peek says nothing remains, and
    # one more attempt is denied.
    rc2 = cluster(seed)
    bad = []
    for k in akeys:
        got = rc2.execute_command("CL.THROTTLE", k, Traffic.LIMIT - 1, 1, 86400, 0)
        if got[2] != 0:
            bad.append(f"{k}: peek {got}")
    for u in ausers:
        got = rc2.execute_command("ISALLOWED", u, "act", 86400, Traffic.WLIMIT)
        if got != 0:
            bad.append(f"{u}: ISALLOWED {got}")
    check("5.5", not bad, "on the new primary every A key is used up (peek remaining 0, "
          "ISALLOWED 0)", show(bad))

    after_full = snapshot(rep)
    after = {k: after_full[k] for k in bnames if k in after_full}
    d = diff(before, after)
    check("5.6", not d and not sane(before),
          f"new primary {rep} holds the old primary's exact state for the {len(bnames)} keys not "
          f"touched after the switch (digest, DUMP, PEXPIRETIME)", sane(before) or show(d))


# ---- check 7: resharding moves module state (MIGRATE = DUMP/RESTORE) ----

def cmd_migrate(seed):
    sh = shards(seed)
    (src, _, src_ranges), (dst, _, _) = sh[0], sh[1]
    # One slot of src, holding GCRA keys (tag t) and window logs (user t, several actions).
    t = keys_owned("mig", src_ranges, 1)[0]
    slot = key_slot(t.encode())
    rc = cluster(seed)
    gkeys = [f"mig:{{{t}}}:{i}" for i in range(10)]
    for k in gkeys:
        for _ in range(3):
            rc.execute_command("CL.THROTTLE", k, 9, 1, 86400)
    for i in range(5):
        for _ in range(2):
            rc.execute_command("ISALLOWED", t, f"act{i}", 86400, 3)
    names = gkeys + [f"hist:{{{t}}}:act{i}" for i in range(5)]
    wait_sync(seed)
    full = snapshot(src)
    before = {k: v for k, v in full.items() if key_slot(k.encode("latin-1")) == slot}

    s, d = node(src), node(dst)
    sid, did = s.execute_command("CLUSTER", "MYID"), d.execute_command("CLUSTER", "MYID")
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", did)
    keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    m0 = time.monotonic_ns()
    res = s.execute_command("MIGRATE", HOST, dst, "", 0, 10000, "KEYS", *keys)
    migrate_ms = (time.monotonic_ns() - m0) // 1_000_000 + 2  # + the ms roundings
    for p in [dst, src] + [p for p, _, _ in sh if p not in (src, dst)]:
        node(p).execute_command("CLUSTER", "SETSLOT", slot, "NODE", did)
    check("7.1", res == "OK" and sorted(keys) == sorted(names) == sorted(before),
          f"slot {slot} ({len(keys)} module keys) moved from {src} to {dst} with MIGRATE",
          f"MIGRATE {res!r}, keys {sorted(keys)} want {sorted(names)}")

    after_full = snapshot(dst)
    after = {k: v for k, v in after_full.items() if key_slot(k.encode("latin-1")) == slot}
    left = s.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
    # MIGRATE sends the TTL relative (RESTORE key ttl ...): the expiry may move later by at most
    # the time the MIGRATE call took, measured; the value must be the same bytes.
    dd = diff(before, after, pexpiretime_slack_ms=migrate_ms)
    check("7.2", not dd and left == 0 and not sane(before),
          f"{dst} holds the exact state (digest, DUMP; PEXPIRETIME up to the MIGRATE's "
          f"{migrate_ms} ms later, as RESTORE takes a relative TTL); none left on {src}",
          sane(before) or show(dd) or f"{left} keys left on {src}")

    # The limiters go on from where they were on the new owner (RedisCluster follows MOVED).
    why = f"the nodes did not agree that {dst} owns slot {slot}"
    deadline = time.time() + 20
    while time.time() < deadline:
        if all(owner(shards(q), slot) == dst for prim, reps, _ in sh for q in [prim] + reps):
            why = ""
            break
        time.sleep(0.1)
    rc2 = cluster(seed)
    got = [rc2.execute_command("CL.THROTTLE", k, 9, 1, 86400) for k in gkeys]
    bad = [f"{k}: {g}" for k, g in zip(gkeys, got) if g[:3] != [0, 10, 6]]
    got = [[rc2.execute_command("ISALLOWED", t, f"act{i}", 86400, 3) for _ in range(2)]
           for i in range(5)]
    bad += [f"act{i}: {g}" for i, g in enumerate(got) if g != [1, 0]]
    check("7.3", not bad and not why, "after the move the limits continue: 4th CL.THROTTLE "
          "leaves 6 of 10, 3rd and 4th ISALLOWED (max 3) give 1, 0", show(bad) or why)


# ---- check 9: issue 31's commands in the cluster ----

def keys_in_slot_of(prefix, tag, n):
    return [f"{prefix}:{{{tag}}}:{i}" for i in range(n)]


def cmd_limits(seed):
    # After check 7's SETSLOT every node must have learnt the slot's new owner first.
    why = wait_sync(seed)
    if why:
        note(f"not in sync before check 9: {why}")
    sh = shards(seed)
    # 9.1 THROTTLE.ALL with a hash tag: sent to the slot's owner, exact replies
    # (the LLM gateway example of COMMANDS.md), nothing taken when refused.
    rpm, tpm = "lim:{gw}:rpm", "lim:{gw}:tpm"
    call = ["THROTTLE.ALL", 2, rpm, tpm, "LIMIT", 2, 3, 3600, 1, "LIMIT", 99, 100, 3600, 40]
    # Sent to the slot's owner as CLUSTER NODES says (redis-py 4.3 cannot route a movablekeys
    # module command itself); a node that does not own it answers MOVED, as for any command.
    prim = owner(sh, key_slot(rpm.encode()))
    other = next(p for p, _, _ in sh if p != prim)
    try:
        node(other).execute_command(*call)
        moved = "no MOVED"
    except redis.exceptions.ResponseError as e:
        moved = str(e)
    got = [node(prim).execute_command(*call) for _ in range(3)]
    want = [[0, -1, -1, [0, 3, 2, -1, 1200], [0, 100, 60, -1, 1440]],
            [0, -1, -1, [0, 3, 1, -1, 2400], [0, 100, 20, -1, 2880]],
            [1, 1, 720, [0, 3, 1, -1, 2400], [1, 100, 20, 720, 2880]]]
    slot = key_slot(rpm.encode())
    where = [p for p, _, _ in sh if node(p).execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)]
    check("9.1", got == want and where == [prim] and moved.startswith("MOVED"),
          f"THROTTLE.ALL over 2 keys of one slot: {other} answers {moved}; on the owner {prim} "
          f"exact replies, nothing taken when refused", f"got {got}, keys on {where}, {moved}")
    # 9.2 keys in different slots: every node refuses them with Redis Cluster's own error.
    a, b = "lim:a", "lim:b"
    bad = []
    if key_slot(a.encode()) == key_slot(b.encode()):
        bad.append("test keys share a slot")
    for p, _, _ in sh:
        try:
            r = node(p).execute_command("THROTTLE.ALL", 2, a, b, "LIMIT", 1, 1, 60, 1,
                                        "LIMIT", 1, 1, 60, 1)
            bad.append(f"{p} answered {r}")
        except redis.exceptions.ResponseError as e:
            if str(e) != "Keys in request don't hash to the same slot" and \
                    not str(e).startswith("CROSSSLOT"):
                bad.append(f"{p}: {e}")
    check("9.2", not bad, "THROTTLE.ALL over keys of two slots: -CROSSSLOT Keys in request "
          "don't hash to the same slot, on every node", show(bad))
    # 9.3 WAIT on the slot's owner: a LEASE.ACQUIRE waiting on a full pool of one gets the slot
    # a release frees (after the release was sent, long before its timeout), and the slot's
    # replicas end with the same leases: the grant made on the module's timer is replicated.
    key = "lim:{pool}"
    prim = owner(sh, key_slot(key.encode()))
    reps = next(r for p, r, _ in sh if p == prim)
    held = node(prim).execute_command("LEASE.ACQUIRE", key, 1, 3600000)
    got = {}

    def waiter():
        got["id"] = node(prim).execute_command("LEASE.ACQUIRE", key, 1, 3600000, "WAIT", 60000)
        got["at"] = time.monotonic()

    th = threading.Thread(target=waiter)
    th.start()
    for _ in range(3000):
        if info(prim, "clients")["blocked_clients"] >= 1:
            break
        time.sleep(0.01)
    sent = time.monotonic()
    released = node(prim).execute_command("LEASE.RELEASE", key, held)
    th.join()
    why = wait_sync(seed)
    digests = {p: node(p).execute_command("DEBUG", "DIGEST-VALUE", key) for p in [prim] + reps}
    ok = (released == 1 and got.get("id") not in (None, held) and got["at"] >= sent and
          got["at"] - sent < 60 and not why and len({str(d) for d in digests.values()}) == 1)
    check("9.3", ok, "LEASE.ACQUIRE ... WAIT on the owner: the slot a release frees, the same "
          "leases on its replicas", f"released {released}, got {got}, {why}, digests {digests}")


def cmd_compare(num, what, old_file, new_file, slack):
    with open(old_file) as f:
        old = json.load(f)
    with open(new_file) as f:
        new = json.load(f)
    d = diff(old, new, pttl_slack_ms=slack)
    s = sane(old)
    check(num, not d and not s, f"{what}: {len(new)} keys, same TYPE, DEBUG DIGEST-VALUE, DUMP, "
          f"PEXPIRETIME; PTTL within {slack} ms", s or show(d))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "traffic":
        cmd_traffic(int(args[0]))
    elif cmd == "replicas":
        cmd_replicas(int(args[0]), args[1])
    elif cmd == "failover":
        cmd_failover(int(args[0]))
    elif cmd == "migrate":
        cmd_migrate(int(args[0]))
    elif cmd == "limits":
        cmd_limits(int(args[0]))
    elif cmd == "snapshot":
        with open(args[1], "w") as f:
            json.dump(snapshot(int(args[0])), f, indent=0, sort_keys=True)
    elif cmd == "compare":
        cmd_compare(args[0], args[1], args[2], args[3], int(args[4]) if len(args) > 4 else 5000)
    elif cmd == "topology":
        for prim, reps, _ in shards(int(args[0])):
            print(prim, " ".join(map(str, reps)))
    elif cmd == "sync":
        why = wait_sync(int(args[0]), int(args[1]) if len(args) > 1 else 30)
        if why:
            print(f"# not in sync: {why}")
            return 1
    else:
        print(f"unknown subcommand {cmd}", file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
