#!/usr/bin/python3
"""The step probe (--step-probe), end to end with the real daemon.

Two fake workers: each serves GetLoads from tests/fake_worker.py (equal loads)
and, on its traffic port, tests/probe_worker.py: a POST is answered as a
completion stream with one event per "engine step", A's every 2 s, B's every
20 ms (B's streams end after 60 events, 1.2 s, so its probe restarts). With
--wire-estimator fluid-step and --step-probe, and no client traffic at all:

- each backend receives the probe's POST with the path and the default body,
  once, though two services steer to it;
- the kernel's step of each backend (explain) is its stream's gap, in both
  services' slots: A about 2 s, B a few tens of ms;
- new connections from the test's cgroup avoid A, whose step under way is
  long (they split evenly when the probe does not reach the kernel);
- /metrics counts requests, steps and applies per backend, exactly: every
  packet applied once per service;
- a probe refused (HTTP 503) is counted and retried, the other goes on, and
  the refused one streams again once the worker takes it;
- a stream that ends at once (2 events) counts as a failure and is retried
  with the back-off, not in a tight loop;
- a reload with a new body restarts the probes with it; a reload without
  --step-probe ends every stream.
"""
import json
import os
import signal
import socket
import subprocess

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
VIP2 = "127.0.0.101:8000"  # the same two backends: one probe stream each, both slots fed
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
STEP = {A: 2.0, B: 0.02}
TOKENS = {A: 1000, B: 60}
TP = 1000000.0  # tokens/s: a connect's flat credit is 1 ms, far below A's step
DEFAULT_BODY = {"prompt": "0", "max_tokens": 1024, "stream": True, "ignore_eos": True,
                "temperature": 0}
t = Tap()
env = L.Env("probe")
control = os.path.join(env.tmp, "control")
os.mkdir(control)
CTL = os.path.join(L.BUILD, "smg-steerctl")
NAME = {A: "a", B: "b"}

loads = {A: L.Worker(env, "la", "127.0.0.11:7999", "127.0.0.11:30000",
                     {"mode": "ok", "loads": [L.rank(0, 0.0, TP)]}).start(),
         B: L.Worker(env, "lb", "127.0.0.12:7999", "127.0.0.12:30000",
                     {"mode": "ok", "loads": [L.rank(0, 0.0, TP)]}).start()}
for addr in (A, B):
    p = env.spawn([L.PY, os.path.join(L.TOP, "tests", "probe_worker.py"), "--name", NAME[addr],
                   "--traffic", addr, "--control", control, "--step", str(STEP[addr]),
                   "--tokens", str(TOKENS[addr])], stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("READY"):
        raise RuntimeError(f"probe worker {NAME[addr]} did not start")
env.enter_cgroup()
CFG = os.path.join(env.tmp, "steer.yaml")


def write_config(probe="step-probe: /v1/completions\n"):
    text = f"load-check-interval: 500ms\nwire-estimator: fluid-step\n{probe}services:\n"
    for vip in (VIP, VIP2):
        text += f"  - vip: {vip}\n    backends:\n"
        for addr, w in loads.items():
            text += f"      - {addr},loads=grpc://{w.grpc}\n"
    with open(CFG + ".tmp", "w") as f:
        f.write(text)
    os.rename(CFG + ".tmp", CFG)


def explain(vip=VIP):
    p = subprocess.run([CTL, "--pin-path", env.pin, "-o", "json", "explain", vip],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError(f"smg-steerctl explain: {p.returncode} {p.stderr}")
    return json.loads(p.stdout)


def steps(vip=VIP):
    return {b["address"]: b["step_ns"] for b in explain(vip)["backends"]}


def probes(addr):
    try:
        with open(os.path.join(control, NAME[addr] + ".probes")) as f:
            return [json.loads(line) for line in f]
    except OSError:
        return []


def worker_file(addr, suffix):
    try:
        with open(os.path.join(control, f"{NAME[addr]}.{suffix}")) as f:
            return f.read()
    except OSError:
        return ""


def probe_times(addr):
    """When the worker received each probe (its time.monotonic())."""
    return [float(x) for x in worker_file(addr, "probe_times").split()]


def gets(addr):
    return worker_file(addr, "gets").count("\n")


def open_streams(addr):
    return int(worker_file(addr, "open") or "0")


def metric(name, addr, vip=VIP):
    return d.metrics().get((name, (("backend", addr), ("vip", vip))))


def steps_apart(vip=VIP):
    s = steps(vip)
    return 1.9e9 <= s[A] <= 10e9 and 0 < s[B] <= 0.3e9


write_config()
d = L.Daemon(env, ["--config", CFG]).start()

with t.case("each backend gets the probe: a streaming POST of the path and the default body"):
    L.wait_for(lambda: probes(A) and len(probes(B)) >= 2, 30,
               "a probe on A, and a second on B after its stream ended")
    for addr in (A, B):
        got = probes(addr)[0]
        t.check(got == {"path": "/v1/completions", "body": DEFAULT_BODY},
                f"{addr} got {got}")
    # Two services steer to A: still one probe, whose packets feed both slots.
    t.check(len(probes(A)) == 1, f"A's stream has not ended, yet {len(probes(A))} probes")
    t.check(open_streams(A) == 1, f"{open_streams(A)} streams open on A")

with t.case("the kernel's step of each backend is its probe stream's gap, in both services"):
    L.wait_for(steps_apart, 30, "A's step about 2 s and B's a few ms (explain)")
    L.wait_for(lambda: steps_apart(VIP2), 30, "the same in the second service")
    e = explain()
    t.check(e["estimator"] == "fluid-step", f"estimator {e['estimator']}")
    a = next(b for b in e["backends"] if b["address"] == A)
    t.check(0 < a["step_left_ns"] <= a["step_ns"], f"A's step left {a['step_left_ns']}")

with t.case("new connections avoid the backend whose step under way is long"):
    L.wait_for(steps_apart, 30, "the steps apart again")
    before = {addr: gets(addr) for addr in (A, B)}
    for i in range(12):
        with socket.create_connection(("127.0.0.100", 8000), timeout=30) as s:
            s.sendall(b"GET /c%d HTTP/1.1\r\nHost: vip\r\nConnection: close\r\n\r\n" % i)
            while s.recv(4096):
                pass
    got = {addr: gets(addr) - before[addr] for addr in (A, B)}
    t.check(got[A] + got[B] == 12, f"connections answered: {got}")
    # A's step_until lapses only while its next event is late (ms in 2 s).
    t.check(got[B] >= 10, f"{got}: B should take the connections while A is in a 2 s step")

with t.case("/metrics: each backend's probe requests, steps and the kernel's applies"):
    L.wait_for(lambda: metric("smg_steer_probe_streaming", A) == 1 and
               (metric("smg_steer_probe_requests_total", B) or 0) >= 2, 30,
               "A streaming, B restarted")
    m = d.metrics()
    t.check((metric("smg_steer_probe_steps_total", B) or 0) >= 60,
            f"B's steps {metric('smg_steer_probe_steps_total', B)}")
    t.check(metric("smg_steer_probe_failures_total", A) == 0, "A's failures")
    t.check(metric("smg_steer_probe_steps_total", B, VIP2) ==
            metric("smg_steer_probe_steps_total", B), "one stream: the same steps in both rows")
    t.check((m.get(("smg_steer_probe_applied_total", ())) or 0) >= 60,
            f"applied {m.get(('smg_steer_probe_applied_total', ()))}")
    t.check(m.get(("smg_steer_probe_apply_errors_total", ())) == 0, "apply errors")
    # Exact: every packet applied once per service that steers to its backend
    # (the counts come from one reading of the thread's statistics).
    seen = sum(m.get(("smg_steer_probe_steps_total", (("backend", a), ("vip", VIP))))
               for a in (A, B))
    t.check(m.get(("smg_steer_probe_applied_total", ())) == 2 * seen,
            f"applied {m.get(('smg_steer_probe_applied_total', ()))}, want 2 x {seen}")

with t.case("a refused probe is counted and retried; the other goes on; it comes back"):
    with open(os.path.join(control, "b.status"), "w") as f:
        f.write("503")
    L.wait_for(lambda: (metric("smg_steer_probe_failures_total", B) or 0) >= 2 and
               metric("smg_steer_probe_streaming", B) == 0, 30, "B's probe failing")
    t.check("HTTP status 503" in d.log_text(), "the log names the status")
    t.check(metric("smg_steer_probe_streaming", A) == 1, "A's probe stopped")
    os.unlink(os.path.join(control, "b.status"))
    L.wait_for(lambda: metric("smg_steer_probe_streaming", B) == 1, 30, "B streaming again")
    L.wait_for(lambda: "step probe of 127.0.0.12:8000: streaming again" in d.log_text(), 30,
               "the log says so")

with t.case("a stream that ends at once is a failure, retried with the back-off"):
    before = metric("smg_steer_probe_failures_total", B)
    with open(os.path.join(control, "b.tokens"), "w") as f:
        f.write("2")
    L.wait_for(lambda: "the stream ended after" in d.log_text(), 30, "the log says why")
    L.wait_for(lambda: metric("smg_steer_probe_failures_total", B) >= before + 2, 30,
               "B's early ends counted")
    # The next three POSTs come at least a back-off apart (0.5 s and more by
    # now; a tight loop would start one every 40 ms stream); a busy machine
    # only widens the gaps.
    n0 = len(probe_times(B))
    L.wait_for(lambda: len(probe_times(B)) >= n0 + 3, 60, "three more probes on B")
    ts = probe_times(B)[n0 - 1:n0 + 3]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    t.check(min(gaps) >= 0.2, f"probes {gaps} s apart: a tight loop")
    os.unlink(os.path.join(control, "b.tokens"))
    L.wait_for(lambda: metric("smg_steer_probe_streaming", B) == 1, 30, "B streaming again")

with t.case("a reload with a new body restarts every probe with it"):
    body = {"prompt": "1", "stream": True, "max_tokens": 9}
    write_config("step-probe: /generate\nstep-probe-body: '" + json.dumps(body) + "'\n")
    d.send(signal.SIGHUP)
    for addr in (A, B):
        L.wait_for(lambda: probes(addr)[-1] == {"path": "/generate", "body": body}, 30,
                   f"{addr}'s probe with the new path and body")

with t.case("a reload without --step-probe ends every stream; its families are gone"):
    write_config("")
    d.send(signal.SIGHUP)
    L.wait_for(lambda: open_streams(A) == 0 and open_streams(B) == 0, 30, "no stream open")
    L.wait_for(lambda: not any(k[0].startswith("smg_steer_probe_") for k in d.metrics()), 30,
               "no probe family in /metrics")

rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
env.cleanup()
t.done()
