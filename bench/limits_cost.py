#!/usr/bin/env python3
"""limits_cost.py - what issue 31's commands cost the server next to CL.THROTTLE, in one run.

    bench/limits_cost.py RLIMITD_BINARY [--rounds R] [--batch B] [--batches N] [--threads T]

Starts the daemon (persistence off, T I/O threads, default 2) and, for R rounds (default 5),
drives each workload over one pipelined connection: B commands written at once, their replies
read, N times (defaults 1000 and 200), over the same keys each time (so after the first batch
every command finds its key, as a limiter's traffic mostly does):
  cl.throttle   CL.THROTTLE on B distinct keys (one limit);
  throttle.all  THROTTLE.ALL 3 over 3 distinct keys (3 limits), no common hash tag, so the three
                keys lie in different shards;
  lease         LEASE.ACQUIRE on 100 pool keys (B in all), then LEASE.RELEASE of each id it
                answered (2B commands a batch: the figure is per command); each pool key
                also holds one lease taken before the batch is measured.
  lease.empty   pools that empty on every pair: LEASE.ACQUIRE on 100 pool keys that hold no
                other lease, then LEASE.RELEASE of each (so each release deletes its key, and
                with 100 keys over the daemon's 256 shards most pool keys are the only key of
                their shard, which each release leaves empty), B/100 times a batch (2B
                commands, pipelined 100 deep; the figure is per command).
Every limit admits everything (burst and slots far above the calls), so each command does its
whole work. Reports the server's CPU time (utime + stime of every thread, /proc/PID/stat) per
command, the median over rounds, and the ratio to CL.THROTTLE's. The issue's targets:
THROTTLE.ALL of 3 limits at most 1.5x one CL.THROTTLE; LEASE.ACQUIRE and LEASE.RELEASE each at
most one CL.THROTTLE. The client is one Python connection, so throughput is not the figure;
the server's CPU per command is."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "diff"))
from common import Resp, free_port  # noqa: E402


class Conn(Resp):
    def run(self, cmds):
        """Sends every command in one write and answers the raw replies, in order."""
        self.send(cmds)
        return [self.read() for _ in cmds]


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Worker pools: for lease the leases go to 100 keys, each also holding one lease taken before
# the measured part (a pool with steady holders), so a release never deletes its key; for
# lease.empty each pair creates and deletes its pool key (a key whose last lease goes is
# deleted), leaving its shard empty.
POOLS = 100
LEASE_LIMIT = "100000"  # LEASE.ACQUIRE's largest limit: no acquire is refused


def expect(replies, first, what):
    """Every reply starts with first (b"*", b"$", b":1"): a workload that got errors would
    measure the error path, not the command."""
    for r in replies:
        if not r.startswith(first):
            sys.exit("%s answered %r" % (what, r))
    return replies


def workload(c, name, batch, round_no):
    """The commands of one batch (and, for lease, the releases built from the replies)."""
    tag = "%s:%d" % (name, round_no)
    if name == "lease":
        expect(c.run([["LEASE.ACQUIRE", "%s:%d" % (tag, i), LEASE_LIMIT, "600000"]
                      for i in range(POOLS)]), b"$", "LEASE.ACQUIRE")
    if name == "cl.throttle":
        expect(c.run([["CL.THROTTLE", "%s:%d" % (tag, i), "1000000", "1000000", "60"]
                      for i in range(batch)]), b"*5\r\n:0\r\n", "CL.THROTTLE")
        return batch
    if name == "throttle.all":
        expect(c.run([["THROTTLE.ALL", "3", "%s:a%d" % (tag, i), "%s:b%d" % (tag, i),
                       "%s:c%d" % (tag, i), "LIMIT", "1000000", "1000000", "60", "1", "LIMIT",
                       "1000000", "1000000", "3600", "1", "LIMIT", "1000000", "1000000", "86400",
                       "1"] for i in range(batch)]), b"*", "THROTTLE.ALL")
        return batch
    if name == "lease.empty":
        for _ in range(max(1, batch // POOLS)):
            ids = expect(c.run([["LEASE.ACQUIRE", "%s:%d" % (tag, i), LEASE_LIMIT, "60000"]
                                for i in range(POOLS)]), b"$", "LEASE.ACQUIRE")
            expect(c.run([["LEASE.RELEASE", "%s:%d" % (tag, i), r.split(b"\r\n")[1]]
                          for i, r in enumerate(ids)]), b":1\r\n", "LEASE.RELEASE")
        return 2 * POOLS * max(1, batch // POOLS)
    ids = expect(c.run([["LEASE.ACQUIRE", "%s:%d" % (tag, i % POOLS), LEASE_LIMIT, "60000"]
                        for i in range(batch)]), b"$", "LEASE.ACQUIRE")
    expect(c.run([["LEASE.RELEASE", "%s:%d" % (tag, i % POOLS), r.split(b"\r\n")[1]]
                  for i, r in enumerate(ids)]), b":1\r\n", "LEASE.RELEASE")
    return 2 * batch


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    binary, opts = args[0], dict(zip(args[1::2], args[2::2]))
    rounds = int(opts.get("--rounds", 5))
    batch = int(opts.get("--batch", 1000))
    batches = int(opts.get("--batches", 200))
    threads = opts.get("--threads", "2")
    port = free_port()
    work = tempfile.mkdtemp(prefix="rlimitd-limits-cost.")
    srv = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--threads", threads, "--dir", work],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                c = Conn(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        # A first lease reply shows the id's framing ($<len> or :<int>) is what release parses.
        first = c.run([["LEASE.ACQUIRE", "probe", "10", "1000"]])[0]
        if not first.startswith(b"$"):
            sys.exit("LEASE.ACQUIRE answered %r" % first)
        names = ["cl.throttle", "throttle.all", "lease", "lease.empty"]
        per = {n: [] for n in names}
        for r in range(rounds):
            for n in names:
                c.run([["FLUSHALL"]])
                t0, done = cpu_s(srv.pid), 0
                for b in range(batches):
                    done += workload(c, n, batch, r)
                per[n].append((cpu_s(srv.pid) - t0) / done * 1e6)
        base = statistics.median(per["cl.throttle"])
        print("| workload | server CPU per command (us), median (rounds) | ratio to CL.THROTTLE |")
        print("|---|---|---|")
        for n in names:
            m = statistics.median(per[n])
            print("| %s | %.3f (%s) | %.2f |" % (n, m, " ".join("%.3f" % v for v in per[n]),
                                                m / base))
    finally:
        srv.terminate()
        srv.wait(30)


if __name__ == "__main__":
    main()
