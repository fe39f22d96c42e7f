#!/usr/bin/python3
"""A dead worker stops getting connections after a handful of failed connects.

Two fake SGLang workers with equal loads; a client connects to the VIP in a
tight loop while one worker is killed (its traffic and GetLoads ports die
together). The kernel stops choosing it after STEER_FAIL_EJECT (4) steered
connects in a row were never established; the daemon polls it at once and
ejects it when that poll fails too. Asserted: at most 20 failed connects in
all, fewer than two kernel thresholds (no publish listed the suspect again),
the worker is ejected, the survivor takes every later connect, and the
restarted worker is readmitted by its polls.

Then the same worker stays up while its traffic port misbehaves and its
GetLoads answers well throughout: first the port refuses, then it accepts
and resets every connection before a byte. A good poll must not put it
back (only a connect of the daemon's own to the traffic port does), so
each costs at most 10 failed connects in 20 s of the tight loop, with few
warnings logged; once the port is well again the worker is chosen again."""
import os
import signal
import threading
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
t = Tap()
env = L.Env("fasteject")
IDLE = {"mode": "ok", "loads": [L.rank(0, 0.1, 2000.0)]}
workers = {n: L.Worker(env, n, f"127.0.0.{o}:8000", f"127.0.0.{o}:30000", dict(IDLE))
           for n, o in (("wA", 31), ("wB", 32))}
for w in workers.values():
    w.start()
env.enter_cgroup()
args = ["--vip", VIP, "--load-check-interval", "1s"]
for w in workers.values():
    args += ["--backend", f"{w.traffic},loads={w.grpc}"]
d = L.Daemon(env, args).start()


class Client:
    """Connects to the VIP one after another until stopped; counts outcomes."""

    def __init__(self):
        self.counts, self.stop, self.lock = {}, False, threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop:
            r = L.connect_name(VIP, timeout=2)
            with self.lock:
                self.counts[r] = self.counts.get(r, 0) + 1

    def snapshot(self):
        with self.lock:
            return dict(self.counts)


def failures(counts):
    return sum(v for k, v in counts.items() if k not in ("wA", "wB"))


def wait_for(what, cond, bound=30):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        ok, detail = cond()
        if ok:
            return detail
        time.sleep(0.05)
    raise AssertionError(f"not within {bound} s: {what}: {cond()[1]}")


c = Client()
c.thread.start()

with t.case("both workers take connects before the kill"):
    wait_for("connects to both", lambda: (
        all(c.snapshot().get(n, 0) >= 20 for n in workers), c.snapshot()))

with t.case("a killed worker: at most 20 failed connects, then ejected"):
    before = c.snapshot()
    workers["wB"].kill()
    healthy = lambda: d.metric("smg_steer_backend_healthy", vip=VIP,  # noqa: E731
                               backend=workers["wB"].traffic)
    wait_for("wB ejected", lambda: (healthy() == 0, healthy()))
    ejected_at = c.snapshot()
    # Keep connecting a while longer: nothing more may fail.
    wait_for("1,000 more connects", lambda: (
        sum(c.snapshot().values()) >= sum(ejected_at.values()) + 1000, c.snapshot()), 60)
    after = c.snapshot()
    failed = failures(after) - failures(before)
    t.check(failed <= 20, f"{failed} failed connects: {after} (before {before})")
    # The kernel alone would allow 4 more after every publish that still lists
    # the backend (until 3 failed polls eject it): the daemon keeps it out.
    t.check(failed < 2 * 4, f"{failed} failed connects: a publish listed the suspect again")
    t.check(failures(after) == failures(ejected_at),
            f"failures after the ejection: {failures(after) - failures(ejected_at)}")
    t.check("so did its poll" in d.log_text() or "ejected" in d.log_text(),
            "no ejection logged")
    print(f"# failed connects in all: {failed}; connects meanwhile: "
          f"{sum(after.values()) - sum(before.values())}")

with t.case("the restarted worker is readmitted by its polls and chosen again"):
    workers["wB"].start()
    before = c.snapshot().get("wB", 0)
    wait_for("wB chosen again", lambda: (c.snapshot().get("wB", 0) >= before + 10, c.snapshot()))

# ---- a traffic port that fails while the loads answer -----------------------------

WINDOW = 20  # seconds of the tight connect loop that each bound covers
MAX_FAILED = 10
MAX_WARNINGS = 5


def warnings_in(text):
    return sum(1 for line in text.splitlines() if " warn: " in line)


def measure(what):
    """Keep connecting for WINDOW seconds as things are: (failed connects,
    connects, warnings the daemon logged meanwhile)."""
    log_at = len(d.log_text())
    before = c.snapshot()
    time.sleep(WINDOW)
    after = c.snapshot()
    failed = failures(after) - failures(before)
    total = sum(after.values()) - sum(before.values())
    warns = warnings_in(d.log_text()[log_at:])
    print(f"# {what}: {failed} failed connects of {total} in {WINDOW} s; "
          f"{warns} warnings logged")
    return failed, total, warns


def good_polls(w):
    return d.metric("smg_steer_polls_total", vip=VIP, backend=w.traffic, result="ok") or 0


def traffic_fails_while_loads_answer(mode, what):
    wB = workers["wB"]
    polls = good_polls(wB)
    wB.set_state(dict(IDLE, traffic=mode))
    failed, total, warns = measure(what)
    t.check(total >= 100, f"only {total} connects in {WINDOW} s: the loop did not run")
    t.check(good_polls(wB) > polls + 1, f"its polls did not keep answering: {good_polls(wB)}")
    t.check(failed <= MAX_FAILED, f"{failed} failed connects in {WINDOW} s, "
            f"at most {MAX_FAILED}: {c.snapshot()}")
    t.check(warns <= MAX_WARNINGS, f"{warns} warnings in {WINDOW} s, at most {MAX_WARNINGS}")


def traffic_well_again():
    wB = workers["wB"]
    wB.set_state(dict(IDLE))
    before = c.snapshot().get("wB", 0)
    wait_for("wB chosen again", lambda: (c.snapshot().get("wB", 0) >= before + 10, c.snapshot()))


with t.case(f"traffic port refusing, loads answering: at most {MAX_FAILED} failed connects "
            f"in {WINDOW} s"):
    traffic_fails_while_loads_answer("refuse", "traffic port refusing")

with t.case("its traffic port takes connects again: chosen again"):
    traffic_well_again()

with t.case(f"traffic port accepting then resetting, loads answering: at most {MAX_FAILED} "
            f"failed connects in {WINDOW} s"):
    traffic_fails_while_loads_answer("reset", "traffic port resetting")

with t.case("its traffic port answers again: chosen again"):
    traffic_well_again()

c.stop = True
c.thread.join(10)
rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
env.cleanup()
t.done()
