#!/usr/bin/python3
"""The step probe (--step-probe), end to end with the real daemon.

Two fake workers: each serves GetLoads from tests/lib/fake_worker.py (equal loads)
and, on its traffic port, tests/lib/probe_worker.py: a POST is answered as a
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

Then auth=bearer:FILE: a third worker, C (a 50 ms step, 2 s streams), in two
more services, requires a bearer token as smg's workers require their API
key (401 without it):

- with the first service's token the probe streams and C's steps reach the
  kernel; the second service lists C with another token: warned once, never
  sent;
- a token the worker does not take: 401s counted as failures, retried with
  the back-off, the other probes go on;
- SIGHUP after the token file is rewritten: the stream under way goes on,
  and the next POST carries the new token (the only one the worker then
  takes);
- no token in the log, /metrics or smg-steerctl's output.
"""
import json
import os
import secrets
import signal
import socket
import subprocess
import urllib.request

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
VIP2 = "127.0.0.101:8000"  # the same two backends: one probe stream each, both slots fed
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
C = "127.0.0.13:8000"  # requires a bearer token (the auth cases)
VIP3, VIP4 = "127.0.0.102:8000", "127.0.0.103:8000"  # C, with its token; C, with another
STEP = {A: 2.0, B: 0.02, C: 0.05}
TOKENS = {A: 1000, B: 60, C: 40}
TP = 1000000.0  # tokens/s: a connect's flat credit is 1 ms, far below A's step
DEFAULT_BODY = {"prompt": "0", "max_tokens": 1024, "stream": True, "ignore_eos": True,
                "temperature": 0}
t = Tap()
env = L.Env("probe")
control = os.path.join(env.tmp, "control")
os.mkdir(control)
CTL = os.path.join(L.BUILD, "smg-steerctl")
NAME = {A: "a", B: "b", C: "c"}
TOKEN1 = "probe-tok1-" + secrets.token_hex(16)
TOKEN2 = "probe-tok2-" + secrets.token_hex(16)
TOKEN_OTHER = "probe-other-" + secrets.token_hex(16)  # VIP4's, never sent
TOKEN_WRONG = "probe-wrong-" + secrets.token_hex(16)  # the worker's only, never the daemon's
TOKEN_FILE = os.path.join(env.tmp, "worker-api-key")
OTHER_FILE = os.path.join(env.tmp, "other-api-key")
CONFLICT = "step probe of 127.0.0.13:8000: services list it with different auth= tokens"
ROTATED = "step probe of 127.0.0.13:8000: its backend's auth= token changed"

loads = {A: L.Worker(env, "la", "127.0.0.11:7999", "127.0.0.11:30000",
                     {"mode": "ok", "loads": [L.rank(0, 0.0, TP)]}).start(),
         B: L.Worker(env, "lb", "127.0.0.12:7999", "127.0.0.12:30000",
                     {"mode": "ok", "loads": [L.rank(0, 0.0, TP)]}).start(),
         C: L.Worker(env, "lc", "127.0.0.13:7999", "127.0.0.13:30000",
                     {"mode": "ok", "loads": [L.rank(0, 0.0, TP)]}).start()}
for addr in (A, B, C):
    p = env.spawn([L.PY, os.path.join(L.TOP, "tests", "lib", "probe_worker.py"), "--name", NAME[addr],
                   "--traffic", addr, "--control", control, "--step", str(STEP[addr]),
                   "--tokens", str(TOKENS[addr])], stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("READY"):
        raise RuntimeError(f"probe worker {NAME[addr]} did not start")
env.enter_cgroup()
CFG = os.path.join(env.tmp, "steer.yaml")


def write_config(probe="step-probe: /v1/completions\n", auth=False):
    """A and B in VIP and VIP2; with auth, C too: in VIP3 with TOKEN_FILE's
    token, then in VIP4 with OTHER_FILE's."""
    text = f"load-check-interval: 500ms\nwire-estimator: fluid-step\n{probe}services:\n"
    for vip in (VIP, VIP2):
        text += f"  - vip: {vip}\n    backends:\n"
        for addr in (A, B):
            text += f"      - {addr},loads=grpc://{loads[addr].grpc}\n"
    for vip, key in ((VIP3, TOKEN_FILE), (VIP4, OTHER_FILE)) if auth else ():
        text += (f"  - vip: {vip}\n    backends:\n"
                 f"      - {C},loads=grpc://{loads[C].grpc},auth=bearer:{key}\n")
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


def write_file(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def worker_takes(*tokens):
    """The bearer tokens C's worker answers (probe_worker.py's NAME.token)."""
    write_file(os.path.join(control, "c.token"), "".join(tok + "\n" for tok in tokens))


def auths():
    """C's worker's verdict on each POST: "ok I" (the I-th token it takes) or "bad"."""
    return worker_file(C, "auth").split("\n")[:-1]


def auth_stats():
    return json.loads(worker_file(C, "stats") or "{}")


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

# ---- auth=bearer:FILE ----------------------------------------------------------------

with t.case("auth: with its backend's token the probe streams; its steps reach the kernel"):
    write_file(TOKEN_FILE, TOKEN1 + "\n")
    write_file(OTHER_FILE, TOKEN_OTHER + "\n")
    worker_takes(TOKEN1)
    write_config(auth=True)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: metric("smg_steer_probe_streaming", C, VIP3) == 1, 30,
               "C's probe streaming")
    for vip in (VIP3, VIP4):  # one stream: both slots fed
        L.wait_for(lambda: 0 < (steps(vip).get(C) or 0) <= 0.3e9, 30,
                   f"C's step a few tens of ms in {vip} (explain)")
    t.check(auths() and set(auths()) == {"ok 0"}, f"C's worker: {auths()}")
    t.check(auth_stats().get("auth_bad", 0) == 0, f"C's worker: {auth_stats()}")
    t.check(metric("smg_steer_probe_failures_total", C, VIP3) == 0, "C's failures")
    # VIP4 lists C with another token: the first service's is sent, and that is said.
    L.wait_for(lambda: CONFLICT in d.log_text(), 30, "the log names the two tokens' backend")

with t.case("auth: a wrong token: refused, counted, retried with the back-off"):
    before = metric("smg_steer_probe_failures_total", C, VIP3)
    bad0 = auth_stats().get("auth_bad", 0)
    worker_takes(TOKEN_WRONG)
    n0 = len(probe_times(C))  # every POST from here on is refused (see probe_worker.py)
    L.wait_for(lambda: metric("smg_steer_probe_failures_total", C, VIP3) >= before + 3 and
               metric("smg_steer_probe_streaming", C, VIP3) == 0, 60, "C's probe failing")
    L.wait_for(lambda: len(probe_times(C)) >= n0 + 4, 60, "four refused POSTs on C")
    ts = probe_times(C)[n0:n0 + 4]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    t.check(min(gaps) >= 0.2, f"probes {gaps} s apart: a tight loop")
    # The worker notes a POST's time before its verdict: wait for the fourth.
    L.wait_for(lambda: auth_stats().get("auth_bad", 0) >= bad0 + 4, 30,
               "C's worker refused the four POSTs")
    L.wait_for(lambda: "HTTP status 401" in d.log_text(), 30, "the log names the status")
    t.check(d.proc.poll() is None, "the daemon is running")
    t.check(metric("smg_steer_probe_streaming", A) == 1, "A's probe stopped")

with t.case("auth: SIGHUP after the token file is rewritten: the next POST has the new token"):
    # Long streams now, so that the one under way is still running at the reload.
    write_file(os.path.join(control, "c.tokens"), "100000")
    worker_takes(TOKEN1)
    n0 = len(auths())
    L.wait_for(lambda: "ok 0" in auths()[n0:] and
               metric("smg_steer_probe_streaming", C, VIP3) == 1, 60, "C streaming again")
    n1 = len(auths())
    write_file(TOKEN_FILE, TOKEN2 + "\n")
    d.send(signal.SIGHUP)
    L.wait_for(lambda: ROTATED in d.log_text(), 30, "the probe thread has the new token")
    # The stream under way goes on with the token it was started with.
    t.check(len(auths()) == n1 and open_streams(C) == 1,
            f"C: POSTs {auths()[n1:]}, {open_streams(C)} streams open")
    worker_takes(TOKEN2)  # the old key revoked
    write_file(os.path.join(control, "c.gen"), "1")  # the stream under way ends
    L.wait_for(lambda: len(auths()) > n1, 30, "a new POST on C")
    t.check(auths()[n1] == "ok 0", f"C's next POST: {auths()[n1]} (the old token?)")
    L.wait_for(lambda: metric("smg_steer_probe_streaming", C, VIP3) == 1, 30,
               "C streaming with the new token")
    os.unlink(os.path.join(control, "c.tokens"))

with t.case("auth: no token in the log, /metrics or smg-steerctl's output; warned once"):
    with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5) as r:
        outputs = {"daemon log": d.log_text(), "/metrics": r.read().decode()}
    for args in (["status"], ["explain", VIP3], ["explain", VIP4]):
        for fmt in ("json", "text"):
            p = subprocess.run([CTL, "--pin-path", env.pin, "-o", fmt, *args],
                               capture_output=True, text=True, timeout=30)
            outputs[f"smg-steerctl -o {fmt} {' '.join(args)}"] = p.stdout + p.stderr
    for what, text in outputs.items():
        for token in (TOKEN1, TOKEN2, TOKEN_OTHER, TOKEN_WRONG):
            t.check(token not in text, f"a token appears in the {what}")
    n = outputs["daemon log"].count(CONFLICT)
    t.check(n == 1, f"the two tokens of C warned about {n} times")

rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
    for needle in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        t.check(needle not in d.log_text(), f"{needle} in the daemon's log")
env.cleanup()
t.done()
