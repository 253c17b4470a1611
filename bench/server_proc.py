"""server_proc.py - what the Python soaks share: a free loopback port, a server process started
and waited for (PING), and a process's resident memory."""
import socket
import subprocess
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    """VmRSS of pid in MiB; 0 once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def start(argv, port, log=None):
    """Starts argv (its output to the open file log, else discarded) and waits (up to 60 s)
    until it answers PING on port."""
    out = log if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdout=out, stderr=out)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if redis.Redis(port=port).ping():
                return proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("%s did not start" % argv[0])
