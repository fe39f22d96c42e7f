#!/usr/bin/python3
"""The daemon's memory is bounded whatever its workers answer: 256 backends,
every one answering each /v1/loads poll with a body as large and as hostile
as the limits allow (3.9 MB of empty ranks, 2 M integers, or a body past the
4 MiB limit). The daemon under test is the build without sanitizers
(build/rel, which make test builds): its peak RSS (VmHWM) is what the
DaemonSet's memory limit sees."""
import os
import socket
import subprocess
import threading
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

N = 256
VIP = "127.0.0.100:8000"
RSS_TARGET_MIB = 64
REL = os.environ.get("STEER_REL_DAEMON") or os.path.join(L.TOP, "build", "rel", "smg-steerd")
BODIES = [
    b'{"loads": [' + b",".join([b"{}"] * 1300000) + b"]}",
    b'{"loads": [{"token_usage": 0, "x": [' + b",".join([b"1"] * 2000000) + b"]}]}",
    b'{"loads": [' + b" " * (5 << 20) + b"]}",
]
t = Tap()
env = L.Env("memory")


def backend_addr(i):
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


class HostileServer:
    """One thread per listener is too many: one thread accepts on all 256
    sockets (select) and hands each connection to a short-lived writer."""

    def __init__(self):
        self.socks, self.stop = {}, threading.Event()
        for i in range(N):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((backend_addr(i), 8000))
            s.listen(64)
            s.setblocking(False)
            self.socks[s] = BODIES[i % len(BODIES)]
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        import selectors
        sel = selectors.DefaultSelector()
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
        while not self.stop.is_set():
            for key, _ in sel.select(0.2):
                try:
                    c, _ = key.fileobj.accept()
                except OSError:
                    continue
                threading.Thread(target=self.answer, args=(c, self.socks[key.fileobj]),
                                 daemon=True).start()

    @staticmethod
    def answer(c, body):
        c.setblocking(True)
        c.settimeout(10)
        try:
            while True:  # one request after another on a kept connection
                req = b""
                while b"\r\n\r\n" not in req:
                    got = c.recv(4096)
                    if not got:
                        return
                    req += got
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.stop.set()
        self.th.join()
        for s in self.socks:
            s.close()


def vm_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def polls_done(d):
    """Polls counted so far (0 until the metrics server answers)."""
    if d.proc.poll() is not None:
        raise AssertionError(f"the daemon exited with {d.proc.returncode}")
    try:
        m = d.metrics()
    except OSError:
        return 0
    return sum(v for (n, _), v in m.items() if n == "smg_steer_polls_total")


class Rel(L.Daemon):
    def __init__(self, *a, **kw):
        L.Daemon.__init__(self, *a, **kw)
        self.binary = REL


cfg = os.path.join(env.tmp, "steer.yaml")
with open(cfg, "w") as f:
    f.write(f"load-check-interval: 2s\nload-timeout: 1500ms\nservices:\n  - vip: {VIP}\n"
            "    backends:\n")
    for i in range(N):
        a = backend_addr(i)
        f.write(f"      - {{address: '{a}:8001', loads: 'http://{a}:8000/v1/loads'}}\n")

server = None
try:
    with t.case(f"{N} hostile backends: peak RSS at most {RSS_TARGET_MIB} MiB, every poll failed"):
        t.check(os.path.exists(REL), f"{REL} is missing (make test builds it)")
        server = HostileServer()
        env.enter_cgroup()
        d = Rel(env, ["--config", cfg]).start(wait_publish=False)
        # Three polls of every backend, however slow the machine.
        L.wait_for(lambda: polls_done(d) >= 3 * N, 300, f"three polls of each of the {N} backends")
        m = d.metrics()
        polls = {}
        for (n, lb), v in m.items():
            if n == "smg_steer_polls_total" and v:
                polls[dict(lb)["result"]] = polls.get(dict(lb)["result"], 0) + int(v)
        ok = sum(v for (n, lb), v in m.items()
                 if n == "smg_steer_polls_total" and dict(lb).get("result") == "ok")
        hwm, rss = vm_kib(d.proc.pid, "VmHWM"), vm_kib(d.proc.pid, "VmRSS")
        print(f"# {N} backends, {sum(polls.values()):.0f} polls {polls}: VmHWM "
              f"{hwm / 1024:.1f} MiB, VmRSS {rss / 1024:.1f} MiB")
        t.check(d.proc.poll() is None, "the daemon died")
        t.check(ok == 0, f"{ok} hostile answers accepted")
        t.check(hwm <= RSS_TARGET_MIB * 1024, f"peak RSS {hwm / 1024:.1f} MiB")
        d.stop()
finally:
    if server:
        server.close()
    env.cleanup()
t.done()
