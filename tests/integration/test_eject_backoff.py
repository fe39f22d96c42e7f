#!/usr/bin/python3
"""Fast ejection backs off a worker that keeps failing, and forgets once it is well.

A worker whose traffic port accepts connects, and the daemon's probe (which
sends nothing) is held open, but that resets every connection as soon as its
request arrives: the daemon's probe gets through each time, the kernel
counts 4 failed connects each time, and the worker flaps. Each time the
kernel stops choosing it, the daemon keeps it out for a back-off: 1 s, then
twice the last, never more than --load-check-interval (2 s here); a worker
that stays back for 8 intervals starts again from 1 s. Asserted from the
daemon's debug lines (one per time it is stopped and per way back): the
back-offs are 1, 2, 2 s, no way back comes sooner than its back-off, and
after 8 intervals well the next back-off is 1 s again."""
import datetime
import re
import socket
import threading
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
INTERVAL = 2  # seconds: the back-off's cap
CALM = 8 * INTERVAL  # seconds back that reset the back-off (EJECT_CALM_CAPS)
t = Tap()
env = L.Env("ejectbackoff")
IDLE = {"mode": "ok", "loads": [L.rank(0, 0.1, 2000.0)]}
workers = {n: L.Worker(env, n, f"127.0.0.{o}:8000", f"127.0.0.{o}:30000", dict(IDLE))
           for n, o in (("wA", 41), ("wB", 42))}
for w in workers.values():
    w.start()
env.enter_cgroup()
args = ["--vip", VIP, "--load-check-interval", f"{INTERVAL}s", "--log-level", "debug"]
for w in workers.values():
    args += ["--backend", f"{w.traffic},loads={w.grpc}"]
d = L.Daemon(env, args).start()
wB = workers["wB"]
BACKOFF = re.compile(r"^(\S+Z) .* backend " + re.escape(wB.traffic) +
                     r": fast ejection: back-off ([0-9.]+) s$", re.M)
BACK = re.compile(r"^(\S+Z) .* backend " + re.escape(wB.traffic) +
                  r": fast ejection: back after ([0-9.]+) s$", re.M)


def request(addr, timeout=2):
    """Connect, send a request line, read the backend's name line: the name,
    or what went wrong."""
    fam, sa = L.parse_addr(addr)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sa)
        s.sendall(b"GET\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
        return data.decode().strip() or "EOF"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


class Client:
    """Sends requests to the VIP one after another until stopped."""

    def __init__(self):
        self.counts, self.stop, self.lock = {}, False, threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop:
            r = request(VIP)
            with self.lock:
                self.counts[r] = self.counts.get(r, 0) + 1

    def snapshot(self):
        with self.lock:
            return dict(self.counts)


def stamp(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def since(pattern, log_at):
    """[(time, seconds)] of the lines of pattern logged after offset log_at."""
    return [(stamp(m.group(1)), float(m.group(2)))
            for m in pattern.finditer(d.log_text()[log_at:])]


def flap_until(n):
    """wB resets every request until n more back-offs are logged: them."""
    log_at = len(d.log_text())
    wB.set_state(dict(IDLE, traffic="reset-on-request"))
    L.wait_for(lambda: len(since(BACKOFF, log_at)) >= n, 60, f"{n} back-offs of wB")
    wB.set_state(dict(IDLE))
    return since(BACKOFF, log_at), log_at


def chosen_again():
    before = c.snapshot().get("wB", 0)
    L.wait_for(lambda: c.snapshot().get("wB", 0) >= before + 10, 30, "wB chosen again")


c = Client()
c.thread.start()

with t.case("both workers answer requests"):
    L.wait_for(lambda: all(c.snapshot().get(n, 0) >= 20 for n in workers), 30,
               f"requests answered by both: {c.snapshot()}")

with t.case("a worker that resets every request: back-offs of 1 s, 2 s, then the cap (2 s)"):
    got, log_at = flap_until(3)
    waits = [w for _, w in got[:3]]
    t.check(waits == [1.0, 2.0, 2.0], f"back-offs {waits}")
    backs = since(BACK, log_at)
    for (at, wait), (back_at, out) in zip(got, backs):
        # Each way back comes no sooner than the back-off before it.
        t.check(out >= wait and back_at >= at, f"back after {out} s, back-off {wait} s")
    print(f"# back-offs {waits}; ways back after {[round(o, 2) for _, o in backs]} s")

with t.case("well again: chosen again"):
    chosen_again()

with t.case(f"after {CALM} s back, the next back-off starts from 1 s again"):
    last_back = since(BACK, 0)[-1][0]
    # The back-off forgets a worker that stayed back for 8 intervals: wait
    # out that span, measured from its way back as the daemon logged it.
    while time.time() < last_back + CALM + 1:
        time.sleep(0.2)
    got, _ = flap_until(1)
    t.check(got[0][1] == 1.0, f"back-off {got[0][1]} s after {CALM} s back")

with t.case("well again after that: chosen again"):
    chosen_again()

c.stop = True
c.thread.join(10)
rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
env.cleanup()
t.done()
