"""resp.py - a raw-socket RESP2/RESP3 client and server launchers for the scripting tests.

Self-contained on purpose (only the standard library): replies are kept as the exact bytes the
server sent, so two servers can be compared byte for byte. A connection made with resp=3 opens
with HELLO 3 (RESP3 replies are read, and parsed as their RESP2 counterparts)."""
import os
import socket
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a)
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=120.0, resp=2):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        if resp == 3:
            hello = self.call("HELLO", "3")
            if not hello.startswith(b"%7\r\n") or b"proto\r\n:3\r\n" not in hello:
                raise ConnectionError("HELLO 3 answered %r" % hello[:200])

    def close(self):
        self.sock.close()

    def _fill(self):
        d = self.sock.recv(1 << 16)
        if not d:
            raise ConnectionError("connection closed")
        self.buf += d

    def _line(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _value_end(self, pos):
        """End offset of the RESP value starting at pos (reads more as needed)."""
        i = self._line(pos)
        t = self.buf[pos:pos + 1]
        if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return i + 2
        n = int(self.buf[pos + 1:i])
        if t in (b"$", b"=", b"!"):
            if n < 0:
                return i + 2
            while len(self.buf) < i + 2 + n + 2:
                self._fill()
            return i + 2 + n + 2
        if t in (b"*", b"~", b"%", b"|", b">"):
            p = i + 2
            for _ in range(max(n, 0) * (2 if t in (b"%", b"|") else 1)):
                p = self._value_end(p)
            return p
        raise ValueError("bad reply %r" % self.buf[pos:pos + 40])

    def raw(self):
        """The next reply's exact bytes."""
        while not self.buf:
            self._fill()
        end = self._value_end(0)
        r, self.buf = self.buf[:end], self.buf[end:]
        return r

    def send(self, *args):
        self.sock.sendall(encode(args))

    def call(self, *args):
        self.send(*args)
        return self.raw()

    def value(self, *args):
        """The reply parsed: bytes, int, None, list, or an Exception for an error."""
        return parse(self.call(*args))


def parse(b):
    v, _ = _parse(b, 0)
    return v


def _parse(b, pos):
    i = b.index(b"\r\n", pos)
    t, body = b[pos:pos + 1], b[pos + 1:i]
    if t in (b"+", b",", b"("):
        return body, i + 2
    if t == b"-":
        return Exception(body.decode(errors="replace")), i + 2
    if t == b":":
        return int(body), i + 2
    if t == b"#":
        return int(body == b"t"), i + 2
    if t == b"_":
        return None, i + 2
    n = int(body)
    if t in (b"$", b"="):
        skip = 4 if t == b"=" else 0
        return (None, i + 2) if n < 0 else (b[i + 2 + skip:i + 2 + n], i + 2 + n + 2)
    if n < 0:
        return None, i + 2
    out, p = [], i + 2
    for _ in range(2 * n if t == b"%" else n):
        v, p = _parse(b, p)
        out.append(v)
    return out, p


def wait_port(port, proc, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, proc.returncode))
        try:
            c = Conn(port, timeout=2)
            c.call("PING")
            c.close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not start on port %d" % (what, port))


class Server:
    """rlimitd (binary path) or redis-server, on a free port, stopped by stop()."""

    def __init__(self, kind, binary=None, extra=()):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rlscript-")
        self.log = os.path.join(self.dir, "log")
        if kind == "redis":
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", self.dir,
                   "--logfile", self.log]
        else:
            cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--dir", self.dir, "--logfile", self.log]
        cmd += list(extra)
        self.stderr_path = os.path.join(self.dir, "stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        wait_port(self.port, self.proc, kind)

    def conn(self, timeout=120.0, resp=2):
        return Conn(self.port, timeout, resp)

    def alive(self):
        return self.proc.poll() is None

    def pid(self):
        return self.proc.pid

    def stop(self):
        """Stops the server; returns the sanitizer reports it wrote to stderr ("" if none)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with open(self.stderr_path, errors="replace") as f:
            text = f.read()
        bad = ("runtime error:", "AddressSanitizer", "LeakSanitizer")
        return text if any(b in text for b in bad) else ""


def stop_pair(rl, rd):
    """Stops the rlimitd and redis-server a differential test ran; returns the failures to add:
    1 for rlimitd having died during the test, 1 for a sanitizer report it wrote (printed)."""
    failed = 0
    if not rl.alive():
        print("FAIL rlimitd died")
        failed += 1
    report = rl.stop()
    rd.stop()
    if report:
        failed += 1
        print("FAIL sanitizer report from rlimitd:\n" + report[:4000])
    return failed
