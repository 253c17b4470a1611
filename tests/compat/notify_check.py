#!/usr/bin/python3
"""The sd_notify(3) datagrams rlimitd sends to $NOTIFY_SOCKET (issue 4), received on a test
socket: STATUS= while the snapshot loads, READY=1 once the port listens, RELOADING=1 +
MONOTONIC_USEC on SIGHUP then READY=1, STOPPING=1 then EXTEND_TIMEOUT_USEC for the final save on
SIGTERM, all from the main process (systemd's default NotifyAccess=main drops datagrams from any
other pid). Run by systemd.sh; prints its own `N passed, N failed`.
"""

import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compat import CONF, Conn, Daemon, Results, mkdtemp, port_open, rmtree  # noqa: E402

T = Results("systemd")


class NotifySocket:
    """A datagram socket like systemd's: SO_PASSCRED on, so each message comes with its pid."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.dir = None
        if abstract:
            name = "rlimitd-compat-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            self.dir = mkdtemp("rlimitd-notify-")  # removed by close(), else at exit
            self.path = os.path.join(self.dir, "notify")
            self.sock.bind(self.path)
            self.env = self.path

    def recv(self, timeout=15):
        """(fields dict, raw text, sender pid), or (None, None, None) after timeout seconds."""
        self.sock.settimeout(timeout)
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return None, None, None
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        text = data.decode()
        fields = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
        return fields, text, pid

    def close(self):
        self.sock.close()
        if self.dir is not None:
            rmtree(self.dir)
            self.dir = None


def mono_usec():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def test_lifecycle():
    ns = NotifySocket()
    logdir = mkdtemp("rlimitd-log-")  # removed below, else at exit
    log = os.path.join(logdir, "rlimitd.log")
    d = Daemon("--supervised", "systemd", "--logfile", log, env={"NOTIFY_SOCKET": ns.env},
               wait_listen=False)
    try:
        # Before READY=1: STATUS= lines while the snapshot loads (before the port opens).
        early = []
        f, text, pid = ns.recv()
        while f is not None and f.get("READY") != "1" and len(early) < 10:
            early.append(text)
            f, text, pid = ns.recv()
        T.check("STATUS= while loading, before READY=1", any(
            "STATUS=" in t and "READY=1" not in t for t in early), repr(early))
        T.check("READY=1 arrives", f is not None and f.get("READY") == "1", repr(text))
        T.check("READY=1 only once the port listens", f is not None and port_open(d.port),
                "port %d not open when READY arrived" % d.port)
        T.check("READY=1 carries a STATUS= line", f is not None and f.get("STATUS", "") != "",
                repr(text))
        T.eq("READY=1 comes from the main pid (NotifyAccess=main)", pid, d.proc.pid)
        c = Conn(d.port)
        T.eq("serves commands after READY", c.call("CL.THROTTLE", "n", 15, 30, 60),
             [0, 16, 15, -1, 2])

        # SIGHUP: RELOADING=1 with the monotonic time it started, then READY=1 again; and the
        # log file is reopened, so a rotated file is recreated.
        os.rename(log, log + ".1")
        before = mono_usec()
        d.signal(signal.SIGHUP)
        f, text, pid = ns.recv()
        after = mono_usec()
        T.check("SIGHUP: RELOADING=1", f is not None and f.get("RELOADING") == "1", repr(text))
        usec = (f or {}).get("MONOTONIC_USEC", "")
        T.check("SIGHUP: MONOTONIC_USEC is CLOCK_MONOTONIC now (between before and after)",
                usec.isdigit() and before <= int(usec) <= after,
                "%r not in [%d, %d]" % (usec, before, after))
        T.eq("SIGHUP: RELOADING=1 from the main pid", pid, d.proc.pid)
        f, text, pid = ns.recv()
        T.check("SIGHUP: READY=1 after reloading", f is not None and f.get("READY") == "1",
                repr(text))
        T.check("SIGHUP: the log file is reopened (logrotate)", os.path.exists(log),
                "%s not recreated" % log)
        T.eq("still serves after SIGHUP", c.call("PING"), "PONG")

        # SIGTERM: STOPPING=1, connected clients are closed, then the final save asks for
        # more time (EXTEND_TIMEOUT_USEC), exit 0.
        d.signal(signal.SIGTERM)
        f, text, pid = ns.recv()
        T.check("SIGTERM: STOPPING=1", f is not None and f.get("STOPPING") == "1", repr(text))
        T.eq("SIGTERM: STOPPING=1 from the main pid", pid, d.proc.pid)
        T.check("SIGTERM: connected client is closed", c.closed_by_server(15), "still open")
        f, text, pid = ns.recv()
        T.check("SIGTERM: final save sends EXTEND_TIMEOUT_USEC",
                f is not None and f.get("EXTEND_TIMEOUT_USEC", "").isdigit() and
                int(f["EXTEND_TIMEOUT_USEC"]) > 0, repr(text))
        T.eq("SIGTERM: exit status 0", d.wait(15), 0)
        T.check("SIGTERM: the final snapshot is written",
                os.path.exists(os.path.join(d.dir, "rlimitd.snap")), os.listdir(d.dir))
        c.close()
    finally:
        d.kill()
        ns.close()
        rmtree(logdir)


def test_modes():
    # supervised auto: notifies because NOTIFY_SOCKET is set; abstract socket names work.
    ns = NotifySocket(abstract=True)
    d = Daemon("--supervised", "auto", env={"NOTIFY_SOCKET": ns.env}, wait_listen=False)
    f, text, _ = ns.recv()
    while f is not None and "READY" not in f and "STATUS" in f:
        f, text, _ = ns.recv()
    T.check("supervised auto + abstract @socket: READY=1", f is not None and
            f.get("READY") == "1", repr(text))
    T.eq("supervised auto: exit 0", d.stop(), 0)
    f, text, _ = ns.recv(timeout=5)
    T.check("supervised auto: STOPPING=1", f is not None and f.get("STOPPING") == "1", repr(text))
    ns.close()

    # supervised no: NOTIFY_SOCKET is ignored. Checked after the daemon has exited, so the
    # absence of datagrams needs no waiting.
    ns = NotifySocket()
    d = Daemon("--supervised", "no", env={"NOTIFY_SOCKET": ns.env})
    d.signal(signal.SIGHUP)
    Conn(d.port).call("PING")
    T.eq("supervised no: exit 0", d.stop(), 0)
    ns.sock.setblocking(False)
    try:
        data = ns.sock.recv(4096)
    except BlockingIOError:
        data = None
    T.eq("supervised no: nothing sent", data, None)
    ns.close()

    # supervised systemd without NOTIFY_SOCKET (started by hand): runs normally.
    saved = os.environ.pop("NOTIFY_SOCKET", None)
    try:
        d = Daemon("--supervised", "systemd")
        T.eq("supervised systemd without NOTIFY_SOCKET: serves", Conn(d.port).call("PING"),
             "PONG")
        T.eq("supervised systemd without NOTIFY_SOCKET: exit 0", d.stop(), 0)
    finally:
        if saved is not None:
            os.environ["NOTIFY_SOCKET"] = saved


def test_reload_settings():
    """Issue 4: SIGHUP re-reads the settings that can change live from the file."""
    tmp = mkdtemp("rlimitd-reload-")  # removed below, else at exit
    conf = os.path.join(tmp, "rlimitd.conf")
    with open(CONF) as f:
        text = f.read()
    with open(conf, "w") as f:
        f.write(text)
    ns = NotifySocket()
    d = Daemon("--supervised", "systemd", env={"NOTIFY_SOCKET": ns.env}, conf=conf,
               wait_listen=False)

    def until(key):
        """Reads datagrams up to the one with key=1 (bounded: each read waits 15 s at most)."""
        for _ in range(10):
            f, _, _ = ns.recv()
            if f is None or f.get(key) == "1":
                return f
        return None

    try:
        until("READY")
        c = Conn(d.port)
        before = c.call("CONFIG", "GET", "maxclients")
        with open(conf, "a") as f:
            f.write("\nmaxclients 4321\nslowlog-max-len 77\n")
        d.signal(signal.SIGHUP)
        until("RELOADING")
        until("READY")
        T.eq("SIGHUP: re-reads the live settings from the file",
             (before, c.call("CONFIG", "GET", "maxclients"),
              c.call("CONFIG", "GET", "slowlog-max-len")),
             ([b"maxclients", b"10000"], [b"maxclients", b"4321"],
              [b"slowlog-max-len", b"77"]))
        c.close()
        T.eq("SIGHUP reload: exit 0", d.stop(), 0)
    finally:
        d.kill()
        ns.close()
        rmtree(tmp)


def main():
    T.run("notify lifecycle", test_lifecycle)
    T.run("reload settings", test_reload_settings)
    T.run("notify modes", test_modes)
    T.finish()


if __name__ == "__main__":
    main()
