#!/usr/bin/env python3
"""Where a run of one Redis test file stopped, for run.sh after a hang or a crash.

    stopped.py RECORDS KIND ATTEMPT EXIT EVENTS [LIMIT]

Reads the first LIMIT records (all without it) of shim.tcl's log RECORDS, appends one JSON
event to EVENTS and prints the "<is_eval>\\t<name>" of the test to skip in the next attempt
(nothing when no test can be blamed). KIND is hang or crash, EXIT the server's exit status.

  where "in-test":     the test had sent its "testing" record and no result: it is skipped.
  where "before-test": the test had been entered but not started (in external mode the harness
                       first opens a new connection for DEBUG LOG): the server already did not
                       answer, so the last test that ran before it left it so, and that one
                       is skipped (its own result, kept in the event, is reported with the
                       hang).
  where "after-test":  the last test had finished and no other was entered: it is skipped.
  where "outside":     no test was entered at all: nothing to skip.
A crash blames the last test entered, whatever its state.
"""
import json
import sys


def main():
    records, kind, attempt, exit_status, events = sys.argv[1:6]
    limit = int(sys.argv[6]) if len(sys.argv) > 6 else None
    entered = []   # [pass, name, state, err details] per test entered, in order
    with open(records, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            try:
                r = json.loads(line)
            except ValueError:
                continue
            st = r["status"]
            if st == "begin":
                entered.append([r["pass"], r["data"], "begun", ""])
            elif st == "testing" and entered:
                entered[-1][2] = "running"
            elif st in ("ok", "err") and entered:
                entered[-1][2] = st
                if st == "err":
                    entered[-1][3] = r["data"]
            elif st in ("ignore", "skip") and entered and entered[-1][2] == "begun" and \
                    r["data"].startswith(entered[-1][1]):
                # Entered, then left out by its tags: it never ran, so it is not blamed.
                entered.pop()
    ev = {"kind": kind, "attempt": int(attempt), "exit": exit_status, "where": "outside",
          "pass": "", "test": "", "stopped_at": "", "status": "", "details": ""}
    target = None
    if entered:
        last = entered[-1]
        ev["stopped_at"] = last[1]
        if kind == "crash" or last[2] == "running":
            target = last
            ev["where"] = "in-test" if last[2] in ("begun", "running") else "after-test"
        elif last[2] == "begun":
            ran = [e for e in entered[:-1] if e[2] in ("ok", "err")]
            if ran:
                target = ran[-1]
            ev["where"] = "before-test"
        else:
            target = last
            ev["where"] = "after-test"
    if target:
        ev.update({"pass": target[0], "test": target[1], "status": target[2],
                   "details": target[3]})
    with open(events, "a", encoding="utf-8") as f:
        f.write(json.dumps(ev) + "\n")
    if target:
        print(target[0] + "\t" + target[1])


if __name__ == "__main__":
    main()
