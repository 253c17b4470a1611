"""Shared parts of the differential tests (tests/diff/README.md): a raw RESP client that returns
each reply's exact bytes, starters for redis-server and rlimitd on free loopback ports, and the
runner that sends one command stream to two servers and compares the replies one by one.

Standard library only, so any later suite (lists, hashes, scripting) can import it:

    from common import Resp, start_redis, start_rlimitd, run_streams

A generator yields Cmd objects; run_streams pipelines them in batches to both servers, reads
every reply as raw bytes and hands each pair to a comparator (byte equality unless the Cmd says
otherwise). Nothing here depends on the machine being fast: every wait is bounded and generous.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ---- RESP ---------------------------------------------------------------------------------


def encode(args):
    """One command as a RESP2 array of bulk strings. args: str, bytes or int items."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode("utf-8", "surrogateescape")
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class ProtocolError(Exception):
    pass


class Resp:
    """A connection that returns each reply as its exact bytes (RESP2 and RESP3 types). With
    resp=3 it opens with HELLO 3, so every reply after that is in RESP3."""

    def __init__(self, port, host="127.0.0.1", timeout=120.0, resp=2):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0
        self.port = port
        self.resp = resp
        if resp == 3:
            hello = self.call("HELLO", "3")
            if not hello.startswith(b"%7\r\n") or b"$5\r\nproto\r\n:3\r\n" not in hello:
                raise ProtocolError("HELLO 3 on port %d answered %r" % (port, hello[:200]))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, cmds):
        """Sends a list of commands (each a list of args) in one write."""
        self.sock.sendall(b"".join(encode(c) for c in cmds))

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ProtocolError("server closed the connection (port %d)" % self.port)
        self.buf += chunk

    def _line_end(self, start):
        while True:
            i = self.buf.find(b"\r\n", start)
            if i >= 0:
                return i
            self._fill()

    def _skip(self, start):
        """Index just past the reply that starts at start (reading more as needed)."""
        while start >= len(self.buf):
            self._fill()
        t = self.buf[start : start + 1]
        end = self._line_end(start)
        if t in b"+-:_,#(":
            return end + 2
        if t in b"$=!":
            n = int(self.buf[start + 1 : end])
            if n < 0:
                return end + 2
            stop = end + 2 + n + 2
            while len(self.buf) < stop:
                self._fill()
            return stop
        if t in b"*~>%|":
            n = int(self.buf[start + 1 : end])
            if t in b"%|":
                n *= 2
            p = end + 2
            for _ in range(max(n, 0)):
                p = self._skip(p)
            return p
        raise ProtocolError("bad reply type %r at %r" % (t, bytes(self.buf[start : start + 60])))

    def read(self):
        """The next reply, as bytes."""
        if self.pos > (1 << 20):  # drop what was read; never during a parse (indexes move)
            del self.buf[: self.pos]
            self.pos = 0
        end = self._skip(self.pos)
        reply = bytes(self.buf[self.pos : end])
        self.pos = end
        return reply

    def call(self, *args):
        self.send([list(args)])
        return self.read()


def parse(raw):
    """A raw RESP2 or RESP3 reply as Python values: bytes, int, None, list, or ('err', text).
    RESP3's types come out as their RESP2 counterparts, so a check reads either protocol: a
    null as None, a double as the bytes of its text (a score's bulk string in RESP2), a boolean
    as 1 or 0, a verbatim string as its text, a big number as its digits, a set as a list, a
    map as the flat list of its keys and values. RESP3's nested pairs (ZRANGE ... WITHSCORES)
    stay nested: pairs() flattens them."""

    def one(p):
        t = raw[p : p + 1]
        e = raw.index(b"\r\n", p)
        body = raw[p + 1 : e]
        if t in (b"+", b",", b"("):
            return bytes(body), e + 2
        if t == b"-":
            return ("err", body.decode("utf-8", "replace")), e + 2
        if t == b":":
            return int(body), e + 2
        if t == b"#":
            return int(body == b"t"), e + 2
        if t == b"_":
            return None, e + 2
        if t in (b"$", b"="):
            n = int(body)
            if n < 0:
                return None, e + 2
            skip = 4 if t == b"=" else 0
            return raw[e + 2 + skip : e + 2 + n], e + 2 + n + 2
        if t in (b"*", b"~", b"%", b">"):
            n = int(body)
            if n < 0:
                return None, e + 2
            if t == b"%":
                n *= 2
            items = []
            p = e + 2
            for _ in range(n):
                v, p = one(p)
                items.append(v)
            return items, p
        raise ProtocolError("cannot parse %r" % raw[:60])

    return one(0)[0]


def split(raw):
    """An aggregate reply's header line and its elements, each as its exact bytes (a map's keys
    and values alternate)."""
    r = Resp.__new__(Resp)  # a parser over the bytes, no socket
    r.buf, r.pos, r.port = bytearray(raw), 0, 0

    def fill():
        raise ProtocolError("truncated reply %r" % raw[:60])

    r._fill = fill
    e = raw.index(b"\r\n")
    n = int(raw[1:e])
    n = 2 * n if raw[:1] == b"%" else max(n, 0)
    items, p = [], e + 2
    for _ in range(n):
        q = r._skip(p)
        items.append(bytes(raw[p:q]))
        p = q
    return bytes(raw[: e + 2]), items


def pairs(v):
    """A parsed list of (member, score) pairs as the flat list RESP2 sends: RESP3's
    [[m, s], ...] is flattened, a flat list returned as it is."""
    if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 for x in v):
        return [y for x in v for y in x]
    return v


# ---- servers ------------------------------------------------------------------------------


def port_used(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port():
    """A loopback port above 20000 that nothing listens on. rlimitd binds with SO_REUSEPORT, so
    it would share a port another rlimitd holds: hence the connection attempt as well."""
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port > 20000 and not port_used(port):
            return port
    raise RuntimeError("no free port found")


SANITIZER_MARKS = ("runtime error:", "AddressSanitizer", "LeakSanitizer")


class Server:
    """A server process this test started; stop() kills it and removes its directory."""

    def __init__(self, name, argv, port, workdir):
        self.name = name
        self.port = port
        self.workdir = workdir
        self.log = os.path.join(workdir, "server.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=workdir)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s at start:\n%s"
                                   % (name, self.proc.returncode, self.log_tail()))
            try:
                c = Resp(port, timeout=5)
                ok = c.call("PING") == b"+PONG\r\n"
                c.close()
                if ok:
                    break
            except (OSError, ProtocolError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("%s did not answer PING on port %d within 60 s" % (name, port))
            time.sleep(0.05)

    def log_tail(self, n=4000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM (SIGKILL after 30 s), then the directory goes. Returns None if all is well,
        else what was wrong: an exit status other than 0, or sanitizer reports in the log (an
        ASan build's daemon writes them there; printed here so the test log has them)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        log = self.log_tail(1 << 20)
        shutil.rmtree(self.workdir, ignore_errors=True)
        problem = None
        if any(m in log for m in SANITIZER_MARKS):
            problem = "%s: sanitizer report in its log:\n%s" % (self.name, log[-20000:])
        elif self.proc.returncode != 0:
            problem = "%s exited with status %s; its log:\n%s" % (
                self.name, self.proc.returncode, log[-4000:])
        return problem


def start_redis(extra=()):
    """Debian's redis-server on a free port, persistence off."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="rlimitd-diff-redis.")
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", d, *extra]
    return Server("redis-server", argv, port, d)


def start_rlimitd(binary, extra=()):
    """rlimitd with the shipped conf/rlimitd.conf on a free port, snapshots off."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="rlimitd-diff.")
    argv = [binary, "-c", os.path.join(ROOT, "conf", "rlimitd.conf"), "--port", str(port),
            "--bind", "127.0.0.1", "--dir", d, "--save-interval", "0", "--threads", "2", *extra]
    return Server("rlimitd", argv, port, d)


# ---- the comparison -----------------------------------------------------------------------


class Cmd:
    """One command of a stream. key: the key it is about (for the context dump); check: None for
    byte equality, else a function (cmds, replies_a, replies_b, i) -> None or a difference text,
    for replies that are allowed to differ (randomness, clocks). sleep_after: seconds to wait
    after its reply, on both servers (an expiry barrier); the batch ends there. follow: how many
    of the commands after it its check reads (they are sent in the same batch)."""

    __slots__ = ("args", "key", "check", "sleep_after", "follow")

    def __init__(self, args, key=None, check=None, sleep_after=0.0, follow=0):
        self.args = args
        self.key = key
        self.check = check
        self.sleep_after = sleep_after
        self.follow = follow


def show(x, limit=400):
    if isinstance(x, (list, tuple)):
        s = " ".join(show(a, 80) for a in x)
    else:
        if isinstance(x, int):
            x = str(x).encode()
        if isinstance(x, str):
            x = x.encode("utf-8", "surrogateescape")
        s = repr(bytes(x))[2:-1]
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


class Mismatch(Exception):
    pass


def run_streams(gen, conn_a, conn_b, names=("rlimitd", "redis"), batch=500, seed=None,
                context=20, progress=None, observe=None):
    """Sends every Cmd from gen to both connections, in pipelined batches, and compares the
    replies one by one. Returns the number of commands compared; raises Mismatch with a full
    report (seed, index, command, both replies, the last `context` commands on that key) at the
    first difference. observe(cmd, reply), if given, sees every command and its (common)
    reply, e.g. to count what the stream covered."""
    history = {}  # key -> recent (index, args, reply_a, reply_b)
    recent = []   # the same for the last few commands of the stream, whatever their key
    index = 0
    pending = []
    done = False
    it = iter(gen)
    while not done:
        pending.clear()
        need = 0  # commands a check in this batch still needs after it
        while len(pending) < batch or need > 0:
            c = next(it, None)
            if c is None:
                done = True
                break
            pending.append(c)
            need = max(need - 1, c.follow)
            if c.sleep_after and need == 0:
                break
        if not pending:
            break
        conn_a.send([c.args for c in pending])
        conn_b.send([c.args for c in pending])
        ra = [conn_a.read() for _ in pending]
        rb = [conn_b.read() for _ in pending]
        for j, c in enumerate(pending):
            if c.check is None:
                diff = None if ra[j] == rb[j] else "replies differ"
            else:
                diff = c.check(pending, ra, rb, j)
            if diff is not None:
                raise Mismatch(report(seed, index + j, c, ra[j], rb[j], diff, names,
                                      history.get(c.key, [])[-context:], recent[-8:]))
            if observe is not None:
                observe(c, ra[j])
            recent.append((index + j, c.args, ra[j], rb[j]))
            if len(recent) > 64:
                del recent[:32]
            if c.key is not None:
                h = history.setdefault(c.key, [])
                h.append((index + j, c.args, ra[j], rb[j]))
                if len(h) > 4 * context:
                    del h[: len(h) - context]
        index += len(pending)
        if pending[-1].sleep_after:
            time.sleep(pending[-1].sleep_after)
        if progress:
            progress(index)
    return index


def report(seed, index, cmd, ra, rb, why, names, hist, recent):
    lines = [
        "MISMATCH (%s) seed=%s command #%d" % (why, seed, index),
        "  command: %s" % show(cmd.args, 2000),
        "  %-8s %s" % (names[0] + ":", show(ra, 4000)),
        "  %-8s %s" % (names[1] + ":", show(rb, 4000)),
        "  rerun: DIFF_SEED=%s (same --count) reproduces it" % seed,
        "  the last %d commands on key %s before it:" % (len(hist), show(cmd.key or b"-")),
    ]
    for i, args, a, b in hist:
        lines.append(context_line(i, args, a, b, names))
    lines.append("  the last %d commands of the stream before it (any key):" % len(recent))
    for i, args, a, b in recent:
        lines.append(context_line(i, args, a, b, names))
    return "\n".join(lines)


def context_line(i, args, a, b, names):
    same = "" if a == b else "   <- %s: %s" % (names[1], show(b, 300))
    return "    #%d %s -> %s%s" % (i, show(args, 300), show(a, 300), same)


class Tally:
    """The named checks of one test run: check() records each (printing a failure with what it
    got and wanted), done() prints "N passed, N failed" and answers the exit status."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, what, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s: got %r, want %r" % (what, got, want))

    def ok(self, what, cond, detail=""):
        """A check that is a condition: a failure prints what and the detail given."""
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s %s" % (what, detail))

    def done(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def info_int(info, field):
    """An integer field of an INFO reply's bytes (RESP framing around it is ignored)."""
    prefix = field.encode() + b":"
    for line in info.split(b"\r\n"):
        if line.startswith(prefix):
            return int(line[len(prefix):])
    raise RuntimeError("no %s in INFO" % field)


def pick_seed(arg=None):
    """The run's seed: the argument, else $DIFF_SEED, else one from the clock."""
    if arg is not None:
        return arg
    return int(os.environ.get("DIFF_SEED", "0") or 0) or int(time.time() * 1000) % 1000000007


def resolve_rlimitd(arg=None):
    """The rlimitd binary: the argument, $RLIMITD_BIN, $RLIMITD, or build/rlimitd."""
    for cand in (arg, os.environ.get("RLIMITD_BIN"), os.environ.get("RLIMITD"),
                 os.path.join(ROOT, "build", "rlimitd")):
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    sys.exit("no rlimitd binary: pass --rlimitd PATH or set RLIMITD_BIN")
