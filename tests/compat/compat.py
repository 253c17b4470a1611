"""Shared helpers for the compatibility tests (README.md beside this file).

- Daemon: the real rlimitd on a free loopback port above 20000, started from the sample
  configuration with --overrides, stopped with SIGTERM (SIGKILL after a bounded wait) and always
  killed at exit.
- Conn: a raw RESP2 connection, to send the exact bytes a client library sends and to read the
  exact bytes of each reply.
- Results: counts checks and ends with the line `N passed, N failed` that CI reads.
- mkdtemp: a temporary directory (under $TMPDIR) removed at exit, whatever the outcome.

Every wait here is bounded; no check depends on how fast anything runs.
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONF = os.path.join(ROOT, "conf", "rlimitd.conf")


def rlimitd_binary():
    """$RLIMITD, else build-compat/rlimitd (what run.sh builds)."""
    path = os.environ.get("RLIMITD") or os.path.join(ROOT, "build-compat", "rlimitd")
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            "rlimitd binary not found at %s: run tests/compat/run.sh, or set RLIMITD\n" % path)
        sys.exit(2)
    return path


def gcra_fits(calls):
    """Checks CL.THROTTLE replies against the GCRA model (tests/cases/limit_model.h) through
    $LIMIT_CHECK (run.sh builds it). calls: (key, max_burst, count, period, quantity, before_ns,
    after_ns, reply) in order, the times CLOCK_REALTIME (time.time_ns()) around each call.
    Returns (True, "") if every reply fits some server time in its interval, else (False, why)."""
    lines = "".join("throttle %s %d %d %d %d %d %d %s\n" % (
        k, mb, n, per, q, b, a, " ".join(str(int(v)) for v in reply))
        for (k, mb, n, per, q, b, a, reply) in calls)
    p = subprocess.run([os.environ["LIMIT_CHECK"]], input=lines, capture_output=True, text=True)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def free_port():
    """A port above 20000 that nothing listens on right now (the kernel's ephemeral range)."""
    for _ in range(50):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port > 20000:
            return port
    raise RuntimeError("no free port above 20000")


def wait_for(pred, timeout=10.0, step=0.05):
    """Polls pred() until it is true or timeout seconds pass. Returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


_live = []
_tmpdirs = []


def mkdtemp(prefix):
    """tempfile.mkdtemp (so under $TMPDIR), removed at exit, after the daemons are killed."""
    path = tempfile.mkdtemp(prefix=prefix)
    _tmpdirs.append(path)
    return path


def rmtree(path):
    """Removes a directory made by mkdtemp now (ignoring errors) instead of at exit."""
    shutil.rmtree(path, ignore_errors=True)
    if path in _tmpdirs:
        _tmpdirs.remove(path)


@atexit.register
def _kill_leftovers():
    for d in list(_live):
        try:
            d.kill()
        except Exception:  # noqa: BLE001 - keep going: the directories must still go
            pass
    for path in list(_tmpdirs):
        rmtree(path)


def _exit_on_signal(signum, _frame):
    # SIGTERM (run.sh's timeout, a CI cancel) or SIGHUP would otherwise end the interpreter
    # without running atexit: exit normally instead, so daemons are killed and dirs removed.
    sys.exit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_DFL:
        signal.signal(_sig, _exit_on_signal)


class Daemon:
    """One rlimitd, from the configuration file conf (the sample by default). args are extra
    --directive value pairs; env is merged into os.environ."""

    def __init__(self, *args, env=None, port=None, wait_listen=True, conf=CONF):
        binary = rlimitd_binary()
        self.port = port or free_port()
        self.dir = mkdtemp("rlimitd-compat-")
        self.log_path = os.path.join(self.dir, "rlimitd.log")
        cmd = [binary, "-c", conf, "--port", str(self.port), "--bind", "127.0.0.1",
               "--dir", self.dir, "--threads", "2"] + [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=full_env, cwd=self.dir)
        _live.append(self)
        if wait_listen and not wait_for(lambda: self.proc.poll() is not None or
                                        port_open(self.port), 15):
            self.kill()
            raise RuntimeError("rlimitd did not listen on %d:\n%s" % (self.port, self.log()))
        if self.proc.poll() is not None:
            raise RuntimeError("rlimitd exited with %s:\n%s" % (self.proc.returncode, self.log()))

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=15):
        """The exit status, or None if it is still running after timeout seconds."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL if it has not exited in time. Returns the exit status (negative:
        killed by that signal)."""
        self.signal(signal.SIGTERM)
        rc = self.wait(timeout)
        if rc is None:
            self.kill()
            rc = self.proc.returncode
        self._done()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._done()

    def _done(self):
        if self in _live:
            _live.remove(self)
        if not self._log.closed:
            self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---- raw RESP2 ----

class Status(str):
    """A +simple string reply."""


class Error(str):
    """A -error reply (the text without the leading '-')."""


class Closed(Exception):
    """The server closed the connection."""


def encode(*args):
    """A command as a RESP2 multibulk, as every client library sends it."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a)
        if isinstance(a, str):
            a = a.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class Conn:
    """A raw connection. read_reply() returns one parsed reply; raw=True also returns the exact
    bytes it was made of."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, *args):
        self.sock.sendall(encode(*args))

    def send_raw(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Closed()
        self.buf += chunk

    def _line(self, pos):
        while True:
            end = self.buf.find(b"\r\n", pos)
            if end >= 0:
                return self.buf[pos:end], end + 2
            self._fill()

    def _parse(self, pos):
        line, pos = self._line(pos)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return Status(rest.decode()), pos
        if kind == b"-":
            return Error(rest.decode()), pos
        if kind == b":":
            return int(rest), pos
        if kind == b"_":  # RESP3: null, double, boolean, big number
            return None, pos
        if kind == b",":
            return float(rest), pos
        if kind == b"#":
            return rest == b"t", pos
        if kind == b"(":
            return int(rest), pos
        if kind in (b"$", b"="):  # a verbatim string comes back as its text
            n = int(rest)
            if n < 0:
                return None, pos
            while len(self.buf) < pos + n + 2:
                self._fill()
            if self.buf[pos + n:pos + n + 2] != b"\r\n":
                raise ValueError("bulk not followed by CRLF")
            return self.buf[pos + (4 if kind == b"=" else 0):pos + n], pos + n + 2
        if kind in (b"*", b"~", b"%", b">"):  # RESP3 sets and pushes as lists, maps as dicts
            n = int(rest)
            if n < 0:
                return None, pos
            items = []
            for _ in range(2 * n if kind == b"%" else n):
                v, pos = self._parse(pos)
                items.append(v)
            if kind == b"%":
                return {bytes(k) if isinstance(k, bytearray) else k: v
                        for k, v in zip(items[0::2], items[1::2])}, pos
            return items, pos
        raise ValueError("not a RESP reply: %r" % line[:80])

    def read_reply(self, raw=False):
        v, pos = self._parse(0)
        data, self.buf = self.buf[:pos], self.buf[pos:]
        return (v, data) if raw else v

    def call(self, *args, raw=False):
        self.send(*args)
        return self.read_reply(raw=raw)

    def closed_by_server(self, timeout=10):
        """True if the server closes the connection within timeout seconds (data before the
        close is kept in the buffer)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True


# ---- results ----

class Results:
    """Counts checks. A check whose name is listed in known_failures.txt (with the test file's
    name) is a known gap: its failure is reported as "known" and counted as skipped, and if it
    passes it is counted as failed, so that the list is kept honest."""

    def __init__(self, suite):
        self.suite = suite
        self.passed = self.failed = self.skipped = 0
        self.known = set()
        path = os.path.join(HERE, "known_failures.txt")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.split("#", 1)[0].strip()
                    if line.startswith(suite + ":"):
                        self.known.add(line[len(suite) + 1:].strip())

    def check(self, name, cond, detail=""):
        known = name in self.known
        if cond and not known:
            self.passed += 1
            print("ok     %s" % name)
        elif cond and known:
            self.failed += 1
            print("FAIL   %s: passes now, remove it from known_failures.txt" % name)
        elif known:
            self.skipped += 1
            print("known  %s: %s" % (name, detail))
        else:
            self.failed += 1
            print("FAIL   %s: %s" % (name, detail))
        sys.stdout.flush()
        return bool(cond)

    def eq(self, name, got, want):
        return self.check(name, got == want, "got %r, want %r" % (got, want))

    def run(self, name, fn):
        """Runs fn(), a group of checks; an exception fails the group instead of the script."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - any failure is a test failure
            self.check(name, False, "raised %s: %s" % (type(e).__name__, e))

    def finish(self):
        tail = ", %d skipped" % self.skipped if self.skipped else ""
        print("%d passed, %d failed%s" % (self.passed, self.failed, tail))
        sys.stdout.flush()
        sys.exit(1 if self.failed else 0)

