"""script_servers.py - what the redis-py script tests share: rlimitd or redis-server started on
a free port with its own directory and log file, and the pass/fail count."""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RLIMITD = os.environ.get("RLIMITD", os.path.join(ROOT, "build-compat", "rlimitd"))

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok     " + name)
    else:
        failed += 1
        print("FAIL   %s: %s" % (name, detail))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(kind, workdir):
    port = free_port()
    log = os.path.join(workdir, "log")
    if kind == "rlimitd":
        cmd = [RLIMITD, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir,
               "--save", "", "--logfile", log, "--threads", "2"]
    else:
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir,
               "--save", "", "--appendonly", "no", "--logfile", log]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port, socket_timeout=2).ping()
            return proc, port, log
        except redis.ConnectionError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("%s did not start" % kind)


@contextlib.contextmanager
def server(kind):
    """Yields (port, log file) of a fresh server of that kind; stops and removes it after."""
    workdir = tempfile.mkdtemp(prefix="script-test-")
    proc = None
    try:
        proc, port, log = start(kind, workdir)
        yield port, log
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def summary():
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
