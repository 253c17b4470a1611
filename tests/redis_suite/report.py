#!/usr/bin/env python3
"""Reads what run.sh left in WORK (build/redis-suite) and prints, per Redis test file, the
counts on each server and rlimitd's failures grouped by cause.

    report.py [--check] WORK FILE...

WORK/<server>/<file with / as _>/final/records.jsonl is the last attempt's log written by
shim.tcl (one record per message of Redis's test client); events.jsonl next to it lists the
hangs and crashes that made run.sh run the file again with that test skipped.

Causes, in the order they are tried on a failure's error text:
  hang / crash                 the test was running when the file stopped progressing / the
                               server process ended (run.sh then skipped it and ran the file again)
  unimplemented command X      "unknown command 'x'", "unknown subcommand 'y'. Try X HELP", or
                               "Unknown Redis command called from script" (X then taken from the
                               error or the test's source)
  unsupported CONFIG parameter CONFIG SET/GET of a directive the server does not have
  RESP3 (HELLO 3)              -NOPROTO
  connection lost              the client's connection broke (I/O error, reset, refused)
  error reply: <text>          any other error reply the test did not expect
  wrong reply (assertion)      an assertion about a reply failed
"Not implemented" are the unimplemented-command causes: the failures issues 27, 29 and 30
allow. --check exits 1 when rlimitd has any other failure (a failure that redis-server has on
the same test too is the environment's and does not count), a test it did not reach, or an
error outside a test.
"""
import json
import os
import re
import sys

SCRIPTING = "unit/scripting"
NOT_IMPLEMENTED = ("unimplemented command",)


def read_jsonl(path):
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return out


# A block-level "ignore" carries only the reason, a test-level one "<name>: <reason>".
BLOCK_IGNORE = re.compile(r"^(Tag: .* denied|Tag: none of the tags allowed|Not supported .*|"
                          r"large memory flag not provided)$")
TEST_IGNORE = re.compile(r"^(.*): (Tag: .* denied|Tag: none of the tags allowed|"
                         r"Not supported .*|large memory flag not provided)$", re.S)


def read_commands(path):
    """A COMMAND LIST reply saved by run.sh, lower case; empty when there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            return {line.strip().lower() for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def split_error(details):
    """(test name or None, the error's first line, 'error' or 'assertion', full text) of an
    err record. With --durable a non-assertion error arrives as error[10:] + "\\n" + errorInfo
    (errorInfo begins with the whole error); an assertion as its message alone (its lines
    joined)."""
    first, _, rest = details.partition("\n")
    m = re.match(r"^(.*) in tests/\S+\.tcl$", first)
    name = m.group(1) if m else None
    if name is None:
        rest = details
    for nl in re.finditer("\n", rest):
        msg, info = rest[:nl.start()], rest[nl.start() + 1:]
        if len(info) >= 10 + len(msg) and info[10:10 + len(msg)] == msg:
            error = info[:10 + len(msg)]
            return name, error.split("\n")[0], "error", rest
    return name, re.sub(r"\s*\n\s*", " ", rest.strip()), "assertion", rest


def short(line, limit=300):
    """An assertion's context shortened to where it is and what it checked, the whole cut to
    `limit`."""
    line = re.sub(r"\(context: type (\S+) line (\d+) cmd \{(.*)\} proc \S+( level \d+)?\)\s*$",
                  r"(\1 line \2: \3)", line)
    line = re.sub(r"\(context: type (\S+) line (\d+).*\)\s*$", r"(\1 line \2)", line)
    line = line.replace("\r", "\\r")
    return line if len(line) <= limit else line[:limit] + "..."


class Run:
    """One server's final attempt at one file."""

    def __init__(self, base):
        self.base = base
        self.records = read_jsonl(os.path.join(base, "final", "records.jsonl"))
        self.events = read_jsonl(os.path.join(base, "events.jsonl"))
        self.present = os.path.isdir(os.path.join(base, "final"))
        self.tests = []          # dicts: key, name, pass, status, error, kind, text
        self.block_errors = []   # dicts: pass, error, kind, text, after
        self.block_ignores = []  # (pass, reason)
        self.notes = []
        self.resets = {}         # (pass, name) of a failed test: the resets it needed
        self.exception = None
        self.done = False
        self.running = ""        # a test left running at the end (hang not retried)
        final = os.path.join(base, "final")
        self.attempt = (int(os.readlink(final)[len("attempt"):])
                        if os.path.islink(final) else 0)
        # Events of earlier attempts: their tests are skipped (shim.tcl) in the final one.
        # An event of the final attempt is one run.sh could not retry.
        self.harness_skipped = {(e["pass"], e["test"]): e for e in self.events
                                if e.get("test") and e["attempt"] < self.attempt}
        self.unretried = [e for e in self.events if e["attempt"] == self.attempt]
        seen = {}
        last_test = ""

        def key(p, name):
            n = seen.get((p, name), 0)
            seen[(p, name)] = n + 1
            return (p, name, n)

        for r in self.records:
            st, data, p = r["status"], r["data"], r["pass"]
            if st == "testing":
                self.running = data
            elif st == "ok":
                self.running = ""
                last_test = data
                self.tests.append(dict(key=key(p, data), name=data, pass_=p, status="ok"))
            elif st == "err":
                name, err, kind, text = split_error(data)
                if name is None:
                    self.block_errors.append(dict(pass_=p, error=err, kind=kind, text=text,
                                                  after=last_test))
                    continue
                self.running = ""
                last_test = name
                self.tests.append(dict(key=key(p, name), name=name, pass_=p, status="err",
                                       error=err, kind=kind, text=text))
            elif st == "ignore":
                if BLOCK_IGNORE.match(data):
                    self.block_ignores.append((p, data))
                else:
                    m = TEST_IGNORE.match(data)
                    name = m.group(1) if m else data
                    self.tests.append(dict(key=key(p, name), name=name, pass_=p,
                                           status="ignore"))
            elif st == "skip":
                ev = self.harness_skipped.get((p, data))
                if ev:
                    self.tests.append(harness_failure(key(p, data), data, p, ev))
                else:
                    self.tests.append(dict(key=key(p, data), name=data, pass_=p,
                                           status="skip"))
            elif st == "note":
                m = re.match(r"reset: (DISCARD|readraw 0|HELLO \d) after '(.*)' failed$", data, re.S)
                if m:
                    self.resets.setdefault((p, m.group(2)), []).append(m.group(1))
                else:
                    self.notes.append(data)
            elif st == "done":
                self.done = True
            elif st == "exception" and not self.done:
                self.exception = "%s (after '%s')" % (data.split("\n")[0], last_test)

    def half(self, which):
        """The tests of one scripting pass: '1' EVAL, '0' FUNCTION, None all."""
        if which is None:
            return self.tests
        return [t for t in self.tests if t["pass_"] == which]


def harness_failure(key, name, p, ev):
    """The failure of a test run.sh skipped in the final attempt, from the event that made it."""
    t = dict(key=key, name=name, pass_=p, status="err", kind=ev["kind"], text="",
             where=ev.get("where", ""))
    if ev["kind"] == "crash":
        t["error"] = ("the server process ended (exit status %s) while this test %s" %
                      (ev.get("exit"), "ran" if ev.get("where") == "in-test" else
                       "had just finished"))
    elif ev.get("where") == "before-test":
        if ev.get("status") == "err":
            own = "failed: " + split_error(ev.get("details", ""))[1]
        else:
            own = "passed"
        t["error"] = ("%s; then a new connection got no reply: the next test, '%s', hung before "
                      "its first command" % (own, ev.get("stopped_at")))
    elif ev.get("where") == "after-test":
        t["error"] = ("finished, then the file made no progress for --timeout seconds (in the "
                      "code after this test)")
    else:
        t["error"] = "no progress for --timeout seconds while this test ran"
    return t


# Commands that block; the tests of them wait for INFO blocked_clients to rise.
BLOCKING = ("BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP",
            "XREAD", "XREADGROUP", "WAIT")


class Sources:
    """Test bodies of Redis's file, to name the unimplemented commands a failed test sends when
    its error does not (rlimitd's "Unknown Redis command called from script" carries no name;
    a deferred client's error is never read; an assertion shows only the wrong value)."""

    def __init__(self, tree, file, known, redis_known):
        self.bodies = []
        self.known = known              # rlimitd's COMMAND LIST, lower case
        self.redis_known = redis_known  # redis-server's
        try:
            with open(os.path.join(tree, "tests", file + ".tcl"), encoding="utf-8",
                      errors="replace") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return
        starts = []
        for i, line in enumerate(lines):
            m = re.match(r'\s*test\s+(\{([^}]*)\}|"([^"]*)")', line)
            if m:
                title = m.group(2) if m.group(2) is not None else m.group(3)
                pat = re.escape(title)
                pat = re.sub(r"\\\$(\\\{[^}]*\\\}|\w+)", ".*", pat)
                pat = re.sub(r"\\\[.*?\\\]", ".*", pat)
                starts.append((i, pat))
        for j, (i, pat) in enumerate(starts):
            end = starts[j + 1][0] if j + 1 < len(starts) else len(lines)
            self.bodies.append((re.compile("^" + pat + "$", re.S), "\n".join(lines[i:end])))

    def body(self, name):
        for pat, body in self.bodies:
            if pat.match(name):
                return body
        return ""

    def script_commands(self, name, text):
        found = re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z.|_-]+)", text)
        if not found:
            found = re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z.|_-]+)", self.body(name))
        names = sorted({n.upper() for n in found})
        if self.known:
            names = [n for n in names if n.lower() not in self.known]
        return names

    def unimplemented_in(self, name):
        """Commands the test's source sends (to `r`, `R n`, a `$client`, or from a script) that
        redis-server has and rlimitd has not."""
        if not self.known or not self.redis_known:
            return []
        body = self.body(name)
        words = re.findall(r"(?:^|[\s\[{;])(?:r|R\s+\d+|\$\w+)\s+(?:-\d+\s+)?"
                           r"([A-Za-z][A-Za-z0-9_|.-]*)", body)
        words += re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z.|_-]+)", body)
        return sorted({w.upper() for w in words
                       if w.lower() in self.redis_known and w.lower() not in self.known})


def classify(t, sources):
    """(cause, not-implemented?) of a failed test or block error."""
    kind = t.get("kind")
    err = t.get("error", "")
    text = t.get("text", "")
    if kind == "crash":
        return "crash (the server process ended)", False
    if kind == "hang":
        if t.get("where") == "before-test":
            return "hang: the server stopped answering new connections after this test", False
        return "hang", False
    m = re.search(r"unknown command '([^']*)'", err)
    if m:
        return "unimplemented command %s" % m.group(1).upper(), True
    m = re.search(r"unknown subcommand '([^']*)'\. Try (\S+) HELP", err)
    if m:
        return "unimplemented command %s %s" % (m.group(2).upper(), m.group(1).upper()), True
    m = re.search(r"unknown subcommand or wrong number of arguments for '([^']*)'", err)
    if m:
        return "unimplemented command (subcommand %s)" % m.group(1).upper(), True
    if "Unknown Redis command called from script" in err:
        names = sources.script_commands(t.get("name") or "", text)
        what = ", ".join(names) if names else "?"
        return "unimplemented command %s (called from a script)" % what, True
    m = (re.search(r"unknown directive '([^']*)'", err) or
         re.search(r"Unknown option or number of arguments for CONFIG SET - '([^']*)'", err))
    if m:
        return "unsupported CONFIG parameter %s" % m.group(1), False
    if "NOPROTO" in err:
        return "RESP3 (HELLO 3 refused)", False
    if re.search(r"I/O error|connection reset|broken pipe|connection refused|"
                 r"couldn't open socket|error reading|error writing", err, re.I):
        return ("connection lost (the server closed it; rlimitd closes a connection after a "
                "protocol error, such as a request over one of its limits)"), False
    if "Protocol error" in err:
        return ("protocol limit (the server answered a protocol error and closed the "
                "connection): " + short(re.sub(r"\d+", "N", err), 100)), False
    missing_blocking = [c for c in BLOCKING if sources.known and c.lower() not in sources.known]
    if re.search(r"no blocked clients|Timeout waiting for blocked clients", err) and \
            missing_blocking:
        return ("unimplemented command: a blocking one (the test waits for a blocked client; "
                "rlimitd has none of %s)" % ", ".join(missing_blocking)), True
    names = sources.unimplemented_in(t.get("name") or "")
    if names:
        return ("probably unimplemented command %s (the test sends it; its failure shows "
                "otherwise)" % ", ".join(names)), True
    if t.get("kind") == "error":
        norm = re.sub(r"'[^']*'", "'...'", err)
        norm = re.sub(r"\b[0-9a-f]{40}\b", "<sha>", norm)
        return "error reply: " + short(norm, 100), False
    return "wrong reply (assertion)", False


def counts(tests, blocks, block_ignores, not_reached):
    c = dict(passed=0, failed=0, skipped=0)
    for t in tests:
        if t["status"] == "ok":
            c["passed"] += 1
        elif t["status"] == "err":
            c["failed"] += 1
        else:
            c["skipped"] += 1
    c["block_errors"] = len(blocks)
    c["blocks_skipped"] = len(block_ignores)
    c["not_reached"] = not_reached
    return c


def fmt_counts(label, c):
    return ("  %-22s %6d %6d %7d %7s %7d %7d" %
            (label, c["passed"], c["failed"], c["skipped"],
             "-" if c["not_reached"] is None else c["not_reached"], c["block_errors"],
             c["blocks_skipped"]))


def section(title, rl, ctl, which, sources, out):
    """Prints one file (or one scripting half); returns the number of failures --check counts."""
    rtests = rl.half(which)
    ctests = ctl.half(which) if ctl else []
    rblocks = [b for b in rl.block_errors if which is None or b["pass_"] == which]
    cblocks = [b for b in ctl.block_errors if which is None or b["pass_"] == which] if ctl else []
    rign = [b for b in rl.block_ignores if which is None or b[0] == which]
    cign = [b for b in ctl.block_ignores if which is None or b[0] == which] if ctl else []
    rkeys = {t["key"] for t in rtests}
    ckeys = {t["key"] for t in ctests}
    # Tests redis-server ran (passed or failed) that never came up on rlimitd.
    not_reached = ([t for t in ctests if t["key"] not in rkeys and t["status"] in ("ok", "err")]
                   if ctl else [])
    cfailed = {t["key"] for t in ctests if t["status"] == "err"}

    out.append("")
    out.append(title)
    out.append("  %-22s %6s %6s %7s %7s %7s %7s" %
               ("", "passed", "failed", "skipped", "not-run", "blkerr", "blkskip"))
    if ctl:
        out.append(fmt_counts("redis-server", counts(ctests, cblocks, cign, None)))
    out.append(fmt_counts("rlimitd", counts(rtests, rblocks, rign,
                                            len(not_reached) if ctl else None)))

    bad = 0
    groups = {}
    for t in rtests:
        if t["status"] != "err":
            continue
        cause, ni = classify(t, sources)
        also = t["key"] in cfailed
        groups.setdefault((not ni, cause), []).append((t, also))
        if not ni and not also:
            bad += 1
    failed = sum(len(v) for v in groups.values())
    nimpl = sum(len(v) for (k, _), v in groups.items() if not k)
    if failed:
        out.append("  rlimitd failures by cause (%d; %d of them unimplemented commands):" %
                   (failed, nimpl))
        for (_, cause), items in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            out.append("    %s (%d):" % (cause, len(items)))
            for t, also in items:
                tag = " [fails on redis-server too]" if also else ""
                for what in rl.resets.get((t["pass_"], t["name"]), []):
                    tag += (" [left its connection inside MULTI: DISCARD sent]"
                            if what == "DISCARD" else
                            " [left its client on another protocol: %s sent]" % what
                            if what.startswith("HELLO") else
                            " [left its client reading raw replies: readraw 0]")
                out.append("      - %s%s: %s" % (t["name"], tag, short(t.get("error", ""))))
    for b in rblocks:
        cause, ni = classify(b, sources)
        also = any(cb["error"] == b["error"] for cb in cblocks)
        out.append("  rlimitd error outside a test (after '%s'; the rest of its block did not "
                   "run): %s%s: %s" % (b["after"], cause,
                                        " [redis-server too]" if also else "", short(b["error"])))
        if not also and not ni:
            bad += 1
    for b in cblocks:
        out.append("  redis-server error outside a test (after '%s'): %s" %
                   (b["after"], short(b["error"])))
    cfail_list = [t for t in ctests if t["status"] == "err"]
    if cfail_list:
        out.append("  redis-server failures (%d):" % len(cfail_list))
        for t in cfail_list:
            out.append("      - %s: %s" % (t["name"], short(t.get("error", ""))))
    if not_reached:
        out.append("  not reached on rlimitd (%d; ran on redis-server):" % len(not_reached))
        for t in not_reached:
            out.append("      - %s" % t["name"])
        bad += len(not_reached)
    extra = [t for t in rtests if ctl and t["key"] not in ckeys]
    if extra:
        out.append("  ran on rlimitd only (%d): %s" %
                   (len(extra), "; ".join(t["name"] for t in extra[:20])))
    return bad


def main():
    args = sys.argv[1:]
    check = False
    if args and args[0] == "--check":
        check = True
        args = args[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    work, files = args[0], args[1:]
    meta = {}
    try:
        with open(os.path.join(work, "meta.txt"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                meta[k] = v
    except FileNotFoundError:
        pass
    known = read_commands(os.path.join(work, "rlimitd-commands.txt"))
    redis_known = read_commands(os.path.join(work, "redis-server-commands.txt"))

    out = ["Redis's Tcl tests in external-server mode: rlimitd vs redis-server"]
    for k in ("redis-server", "rlimitd", "options", "lenient"):
        if k in meta:
            out.append("  %s: %s" % (k, meta[k]))
    out.append("  passed/failed/skipped: tests; not-run: passed or failed on redis-server, not "
               "reached on rlimitd; blkerr: errors outside a test (the rest of that start_server block "
               "did not run); blkskip: whole blocks skipped by tag")
    bad = 0
    summary = []
    for file in files:
        safe = file.replace("/", "_")
        rl = Run(os.path.join(work, "rlimitd", safe))
        ctl = Run(os.path.join(work, "redis-server", safe))
        if not ctl.present:
            ctl = None
        sources = Sources(os.path.join(work, "tree"), file, known, redis_known)
        parts = [(file, None)]
        if file == SCRIPTING:
            parts = [(file + " (EVAL half: is_eval=1 pass and the EVAL-only blocks after it)",
                      "1"),
                     (file + " (FUNCTION half: is_eval=0 pass)", "0")]
        for title, which in parts:
            n = section("== " + title, rl, ctl, which, sources, out)
            bad += n
            rt = rl.half(which)
            summary.append((title.split(" (")[0] + ("" if which is None else
                                                     (" EVAL" if which == "1" else " FUNCTION")),
                            sum(t["status"] == "ok" for t in (ctl.half(which) if ctl else [])),
                            sum(t["status"] == "ok" for t in rt),
                            sum(t["status"] == "err" for t in rt), n))
        tolerated = {}
        for note in rl.notes:
            m = re.match(r"tolerated: (CONFIG SET \S+|MEMORY USAGE)", note)
            if m:
                tolerated[m.group(1)] = tolerated.get(m.group(1), 0) + 1
        for note in sorted({n for n in rl.notes if not n.startswith("tolerated: ")}):
            out.append("  note (rlimitd): " + note)
        if tolerated:
            out.append("  tolerated on rlimitd (--lenient), times: " +
                       ", ".join("%s %d" % kv for kv in sorted(tolerated.items())))
        for ev in rl.unretried:
            out.append("  rlimitd %s in the last attempt, not retried (outside a test, blamed on "
                       "one already skipped, or the 8th attempt): stopped at '%s' (%s); "
                       "the tests after it did not run" %
                       (ev["kind"], ev.get("stopped_at") or "(no test entered)",
                        ev.get("where")))
            bad += 1
        if rl.exception:
            out.append("  rlimitd run ended by a harness exception: " + short(rl.exception))
            bad += 1
        if not rl.done:
            out.append("  rlimitd run did not reach the end of the file")
    out.append("")
    out.append("Summary (passed on redis-server / passed on rlimitd / failed on rlimitd / "
               "failures --check counts)")
    for name, cp, rp, rf, n in summary:
        out.append("  %-28s %5d %5d %5d %5d" % (name, cp, rp, rf, n))
    print("\n".join(out))
    if check and bad:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
