#!/usr/bin/python3
"""A load endpoint that hangs does not hold back everyone else's publish.

Three fake SGLang workers; one hangs on every GetLoads. With a poll deadline
of 1.9 s (interval 2 s), waiting for it would make every cycle last ~1.9 s.
The daemon publishes once the answers have stopped coming (see
STRAGGLER_QUIET_MIN_NS in user/daemon/smg-steerd.c), so cycles stay far shorter, a
load change of a healthy worker is steered by at the next publish, and the
hung worker still fails its polls (deadline) and is ejected."""
import os

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
t = Tap()
env = L.Env("stragglers")
OCTET = {"wA": 21, "wB": 22, "wH": 23}
STATES = {
    "wA": {"mode": "ok", "loads": [L.rank(0, 0.1, 2000.0)]},
    "wB": {"mode": "ok", "loads": [L.rank(20000, 0.1, 2000.0)]},
    "wH": {"mode": "hang", "hang_seconds": 60, "loads": [L.rank(0, 0.1, 2000.0)]},
}
workers = {n: L.Worker(env, n, f"127.0.0.{o}:8000", f"127.0.0.{o}:30000", STATES[n])
           for n, o in OCTET.items()}
for w in workers.values():
    w.start()
env.enter_cgroup()
args = ["--vip", VIP, "--load-check-interval", "2s", "--load-timeout", "1900ms"]
for n, o in OCTET.items():
    args += ["--backend", f"127.0.0.{o}:8000,loads=127.0.0.{o}:30000"]
d = L.Daemon(env, args + ["--log-level", "debug"]).start()


def cycle_seconds():
    return d.metric("smg_steer_cycle_seconds")


with t.case("cycles end long before the hung poll's deadline"):
    seen = []
    for _ in range(4):
        d.wait_publishes(1, timeout=20)
        seen.append(cycle_seconds())
    # Waiting for the hung call would take >= 1.9 s per cycle; the cutoff is
    # 50 ms after the last answer (or twice the slowest answer).
    t.check(all(c is not None and c < 1.0 for c in seen), f"cycle seconds {seen}")

with t.case("a healthy worker's load change is steered by at the next publish"):
    t.check(L.connect_name(VIP) == "wA", "wA should be the best first")
    workers["wA"].set_state({"mode": "ok", "loads": [L.rank(40000, 0.1, 2000.0)]})
    workers["wB"].set_state({"mode": "ok", "loads": [L.rank(0, 0.1, 2000.0)]})
    d.wait_publishes(2, timeout=20)
    got = L.connect_name(VIP)
    t.check(got == "wB", f"after the change the next connect went to {got}")

with t.case("the hung worker fails its polls and is ejected"):
    deadline_polls = 0
    for _ in range(20):
        deadline_polls = d.metric("smg_steer_polls_total", vip=VIP, backend="127.0.0.23:8000",
                                  result="deadline_exceeded") or 0
        healthy = d.metric("smg_steer_backend_healthy", vip=VIP, backend="127.0.0.23:8000")
        if deadline_polls >= 3 and healthy == 0:
            break
        d.wait_publishes(1, timeout=20)
    t.check(deadline_polls >= 3, f"deadline polls {deadline_polls}")
    t.check(healthy == 0, f"healthy gauge {healthy}")

rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
env.cleanup()
t.done()
