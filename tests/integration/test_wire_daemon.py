#!/usr/bin/python3
"""Request bytes on the wire, end to end with the real daemon.

Two fake workers: each serves GetLoads from tests/lib/fake_worker.py (its load set
by the test) and HTTP/1.1 keep-alive traffic from tests/lib/wire_worker.py, whose
answers the test holds and releases. A client in the test's cgroup talks to
the VIP with requests of known sizes. Asserted, with exact numbers:

- the pending and sent figures of smg-steerctl explain -o json (read from the
  kernel's counters at once) and of /metrics (as of the next publish):
  pending = the bytes sent and not yet answered, added at the send and
  taken off at the first byte of the answer, streamed or not; the second
  request on a keep-alive connection counts like the first;
- a large request on an existing connection to worker A sends the next new
  connection to B at once, with no poll in between;
- after the poll that sees that request in A's queue, the daemon's published
  base holds the queue without A's busy time left at the poll (nothing counted
  twice), and the kernel's score is that base plus the busy time left now;
- a socket closed mid-request leaves nothing pending;
- a daemon restart (--keep-pinned) leaves every counter where it was;
- SIGHUP applies a changed bytes-per-token from the file;
- --wire-cgroup: a connection made outside it is steered but not counted,
  one made in it is; the pinned links move there at restart; a reload that
  changes it warns;
- --wire-estimator off attaches no accounting program and counts nothing.
"""
import json
import os
import signal
import socket
import subprocess
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4  # --bytes-per-token
TP = 1000.0  # tokens/s: 1,000,000 ns per token
NPT = 1000000
t = Tap()
env = L.Env("wire")
control = os.path.join(env.tmp, "control")
os.mkdir(control)
CTL = os.path.join(L.BUILD, "smg-steerctl")
A, B = "127.0.0.11:8000", "127.0.0.12:8000"


def load(queued):
    return {"mode": "ok", "loads": [L.rank(queued, 0.0, TP)]}


# A idle, B 10 tokens queued: with nothing pending every new connection goes to A.
loads = {A: L.Worker(env, "la", "127.0.0.11:7999", "127.0.0.11:30000", load(0)).start(),
         B: L.Worker(env, "lb", "127.0.0.12:7999", "127.0.0.12:30000", load(10)).start()}
for name, addr in (("a", A), ("b", B)):
    p = env.spawn([L.PY, os.path.join(L.TOP, "tests", "lib", "wire_worker.py"), "--name", name,
                   "--traffic", addr, "--control", control], stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith("READY"):
        raise RuntimeError(f"wire worker {name} did not start")
env.enter_cgroup()
ARGS = ["--vip", VIP, "--load-check-interval", "500ms", "--bytes-per-token", str(BPT),
        "--keep-pinned"]
for addr, w in loads.items():
    ARGS += ["--backend", f"{addr},loads=grpc://{w.grpc}"]
d = L.Daemon(env, ARGS).start()


CFG = os.path.join(env.tmp, "steer.yaml")


def write_config(bpt, extra=""):
    """The same service as ARGS, from a file, with bytes-per-token on the service."""
    text = (f"load-check-interval: 500ms\nkeep-pinned: true\nbytes-per-token: 7\n{extra}services:\n"
            f"  - vip: {VIP}\n    bytes-per-token: {bpt}\n    backends:\n")
    for addr, w in loads.items():
        text += f"      - {addr},loads=grpc://{w.grpc}\n"
    with open(CFG + ".tmp", "w") as f:
        f.write(text)
    os.rename(CFG + ".tmp", CFG)


def ctl(*args):
    p = subprocess.run([CTL, "--pin-path", env.pin] + list(args), capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError(f"smg-steerctl {' '.join(args)}: {p.returncode} {p.stderr}")
    return p.stdout


def explain():
    return json.loads(ctl("-o", "json", "explain", VIP))


def backend(e, addr):
    return next(b for b in e["backends"] if b["address"] == addr)


def request(tag=None, stream=None, body=b"x"):
    """An HTTP/1.1 POST; its exact size on the wire is len() of the result."""
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: vip\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")
    if tag:
        head += f"X-Hold: {tag}\r\n"
    if stream:
        head += f"X-Stream: {stream}\r\n"
    return head.encode() + b"\r\n" + body


def release(tag):
    open(os.path.join(control, tag), "w").close()


def logged(name):
    """Requests the worker has read in full."""
    try:
        with open(os.path.join(control, name + ".log")) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def worker_got(name, n):
    return logged(name) >= n


def held_by(before):
    """After a send: the backend whose worker read one more request than before
    (getpeername reports the VIP: the hook hides the backend, by design)."""
    def grew():
        for name, addr in (("a", A), ("b", B)):
            if logged(name) > before[name]:
                return addr
        return None
    return L.wait_for(grew, 30, "a worker read the request")


def counts():
    return {"a": logged("a"), "b": logged("b")}


def send_held(s, req):
    """Sends req on s; returns the backend that read it."""
    before = counts()
    s.sendall(req)
    return held_by(before)


def read_answer(s):
    """Reads one whole answer (JSON or a chunked stream) and returns it."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    if b"chunked" in head:
        while not rest.endswith(b"0\r\n\r\n"):
            rest += s.recv(65536)
    else:
        n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        while len(rest) < n:
            rest += s.recv(65536)
    return rest


def connect():
    return socket.create_connection(("127.0.0.100", 8000), timeout=30)


def wire(addr):
    b = backend(explain(), addr)
    return {k: b[k] for k in ("pending_bytes", "pending_tokens", "sent_bytes", "requests")}


def metrics_of(addr):
    m = d.metrics()
    lab = (("backend", addr), ("vip", VIP))
    return {k: m.get((f"smg_steer_backend_{k}", lab)) for k in
            ("pending_bytes", "pending_tokens", "sent_bytes_total", "requests_total")}


sent = {A: 0, B: 0}
reqs = {A: 0, B: 0}
with t.case("a keep-alive connection: each request pending from its send to its answer"):
    L.wait_for(lambda: all(b["mode"] == "snapshot" for b in explain()["backends"]), 30,
               "both backends scored from their loads")
    s = connect()
    r1 = request("r1", body=b"a" * 1000)
    peer = send_held(s, r1)
    t.check(peer == A, f"the first connection went to {peer}, not the idle A")
    sent[A] += len(r1)
    reqs[A] += 1
    w = wire(A)
    want = {"pending_bytes": len(r1), "pending_tokens": len(r1) // BPT,
            "sent_bytes": sent[A], "requests": reqs[A]}
    t.check(w == want, f"explain after the send: {w}, want {want}")
    release("r1")
    read_answer(s)
    L.wait_for(lambda: wire(A)["pending_bytes"] == 0, 30, "answered: nothing pending")
    r2 = request("r2", body=b"b" * 3001)
    s.sendall(r2)
    L.wait_for(lambda: worker_got("a", 2), 30, "A holds the second request")
    sent[A] += len(r2)
    reqs[A] += 1
    want = {"pending_bytes": len(r2), "pending_tokens": len(r2) // BPT,
            "sent_bytes": sent[A], "requests": reqs[A]}
    t.check(wire(A) == want, f"the second request: {wire(A)}, want {want}")
    mwant = {"pending_bytes": len(r2), "pending_tokens": len(r2) // BPT,
             "sent_bytes_total": sent[A], "requests_total": reqs[A]}
    L.wait_for(lambda: metrics_of(A) == mwant, 30,
               f"/metrics shows {mwant} (last: {metrics_of(A)})")
    e = explain()
    t.check(e["bytes_per_token"] == BPT, f"bytes_per_token {e.get('bytes_per_token')}")
    t.check(d.metric("smg_steer_bytes_per_token", vip=VIP) == BPT, "metric bytes_per_token")
    release("r2")
    read_answer(s)
    L.wait_for(lambda: wire(A)["pending_bytes"] == 0, 30, "the second answered")

with t.case("a streamed answer: pending ends at its first byte, not at its end"):
    r3 = request(None, stream="r3end", body=b"c" * 777)
    s.sendall(r3)
    sent[A] += len(r3)
    reqs[A] += 1
    first = b""
    while b"data: a" not in first:
        first += s.recv(65536)
    L.wait_for(lambda: wire(A)["pending_bytes"] == 0, 30, "first event: nothing pending")
    t.check(wire(A)["sent_bytes"] == sent[A], f"sent {wire(A)['sent_bytes']} != {sent[A]}")
    release("r3end")
    while not first.endswith(b"0\r\n\r\n"):
        first += s.recv(65536)

with t.case("a large request to A sends the next new connection to B, before any poll"):
    gen = explain()["generation"]
    polls = loads[A].stats().get("getloads", 0)
    big = request("big", body=b"d" * 400000)  # 100,000 tokens: 100 s at 1,000 tokens/s
    s.sendall(big)
    sent[A] += len(big)
    reqs[A] += 1
    L.wait_for(lambda: worker_got("a", 4), 30, "A holds the large request")
    e = explain()
    nxt = e["next_connection"]
    s2 = connect()
    peer2 = send_held(s2, request(None, body=b"g" * 10))
    read_answer(s2)
    sent[peer2] += len(request(None, body=b"g" * 10))
    reqs[peer2] += 1
    after = explain()["generation"]
    t.check(peer2 == B, f"the next connection went to {peer2}: {nxt}")
    t.check(nxt["backend"] == B, f"explain predicted {nxt}")
    if after != gen:
        # The pending work must be what moved it: the poll's answer has not changed.
        t.check(backend(e, A)["queued_tokens"] == 0, f"A's queue {backend(e, A)}")
    print(f"# tables published meanwhile: {after - gen}; A polled {loads[A].stats().get('getloads', 0) - polls} times")
    s2.close()

with t.case("after the poll that sees the request queued, nothing counted twice"):
    tokens = len(big) // BPT
    loads[A].set_state(load(tokens + 5000))  # the large request waits, 5,000 more ahead of it
    L.wait_for(lambda: backend(explain(), A)["queued_reported_tokens"] == tokens + 5000, 30,
               "a snapshot with the request in A's queue")
    e = explain()
    a = backend(e, A)
    # Taken off: A's busy time left when the poll was sent (the busy-until
    # estimate, E_poll), which the kernel's busy term counts instead. The
    # request's 100 s at 1,000 tokens/s had drained for the seconds since it
    # was sent, so E_poll is a little under its 100,000 tokens.
    taken = a["queued_pending_tokens"]
    t.check(tokens - 30000 < taken <= tokens, f"taken off: {taken}")
    t.check(a["queued_tokens"] + taken == tokens + 5000, f"queued as scored {a['queued_tokens']}")
    t.check(a["base_wait_ns"] == a["queued_tokens"] * NPT, f"base {a['base_wait_ns']}")
    t.check(a["pending_tokens"] == tokens, f"pending {a['pending_tokens']}")
    t.check(e["estimator"] == "fluid" and 0 < a["busy_ns"] <= tokens * NPT, f"busy {a}")
    t.check(a["score_ns"] == a["base_wait_ns"] + a["inflight_tokens"] * NPT + a["busy_ns"],
            f"score {a['score_ns']}, inflight {a['inflight_tokens']}")
    # Nothing counted twice: the base and the busy time left add up to the
    # 105,000 tokens' time, less only what drained between the poll's send
    # and this explain (twice would be 100 s more).
    total, want = a["base_wait_ns"] + a["busy_ns"], (tokens + 5000) * NPT
    t.check(want - 30 * 10**9 < total <= want + NPT, f"base + busy {total}, want {want}")
    # /metrics has the busy time left as of a publish: under the request's 100 s.
    lab = (("backend", A), ("vip", VIP))
    L.wait_for(lambda: (d.metrics().get(("smg_steer_backend_busy_seconds", lab)) or 0) > 50, 30,
               "the busy time in /metrics")
    busy_s = d.metrics().get(("smg_steer_backend_busy_seconds", lab))
    t.check(50 < busy_s <= 100, f"smg_steer_backend_busy_seconds {busy_s}")
    release("big")
    read_answer(s)
    L.wait_for(lambda: backend(explain(), A)["pending_bytes"] == 0, 30, "answered")
    loads[A].set_state(load(5000))
    L.wait_for(lambda: backend(explain(), A)["queued_reported_tokens"] == 5000, 30,
               "the next snapshot without it")
    a = backend(explain(), A)
    t.check(a["queued_pending_tokens"] == 0 and a["base_wait_ns"] == 5000 * NPT, f"{a}")

with t.case("a socket closed mid-request leaves nothing pending"):
    L.wait_for(lambda: backend(explain(), A)["inflight_tokens"] == 0, 30, "credits drained")
    s3 = connect()
    r4 = request("never", body=b"e" * 5000)
    peer3 = send_held(s3, r4)
    sent[peer3] += len(r4)
    reqs[peer3] += 1
    L.wait_for(lambda: wire(peer3)["pending_bytes"] == len(r4), 30, "pending while held")
    s3.close()
    L.wait_for(lambda: wire(peer3)["pending_bytes"] == 0, 30, "closed: nothing pending")
    t.check(wire(peer3)["sent_bytes"] == sent[peer3], f"{wire(peer3)} sent {sent[peer3]}")

with t.case("a daemon restart leaves every counter where it was"):
    before = {addr: wire(addr) for addr in (A, B)}
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    mid = {addr: wire(addr) for addr in (A, B)}
    write_config(BPT)  # the same settings, from a file this time
    d = L.Daemon(env, ["--config", CFG]).start()
    d.wait_publishes(2)
    after = {addr: wire(addr) for addr in (A, B)}
    t.check(before == mid == after, f"before {before}\nstopped {mid}\nafter {after}")
    t.check(all(w["pending_bytes"] == 0 for w in after.values()), f"{after}")
    r5 = request(None, body=b"f" * 99)
    s.sendall(r5)
    read_answer(s)
    sent[A] += len(r5)
    t.check(wire(A)["sent_bytes"] == sent[A] and wire(A)["pending_bytes"] == 0,
            f"{wire(A)}, sent {sent[A]}")

with t.case("SIGHUP applies a changed bytes-per-token (the service key beats the top level)"):
    write_config(3)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: explain()["bytes_per_token"] == 3, 30, "bytes per token 3 published")
    L.wait_for(lambda: d.metric("smg_steer_bytes_per_token", vip=VIP) == 3, 30, "metric 3")
    r6 = request("r6", body=b"h" * 1000)
    peer = send_held(s, r6)
    t.check(peer == A, f"keep-alive stays on A, got {peer}")
    w = wire(A)
    t.check(w["pending_bytes"] == len(r6) and w["pending_tokens"] == len(r6) // 3, f"{w}")
    release("r6")
    read_answer(s)
    s.close()

with t.case("SIGHUP to --wire-estimator fluid-step: a streamed answer's gap is its engine's step"):
    write_config(BPT, "wire-estimator: fluid-step\n")
    d.send(signal.SIGHUP)
    L.wait_for(lambda: explain()["estimator"] == "fluid-step", 30, "fluid-step published")
    s7 = connect()
    gap_s = 0.3  # between the stream's first event and the rest: one "step"
    peer7 = send_held(s7, request(None, stream="r10end", body=b"l" * 500))
    first = b""
    while b"data: " not in first:
        first += s7.recv(65536)
    time.sleep(gap_s)  # the gap itself is the stimulus, not a wait for a condition
    release("r10end")
    while not first.endswith(b"0\r\n\r\n"):
        first += s7.recv(65536)
    s7.close()
    b7 = backend(explain(), peer7)
    t.check(gap_s - 0.005 <= b7["step_ns"] / 1e9 < gap_s + 20,
            f"explain's step {b7['step_ns']} ns after a {gap_s} s gap")
    t.check(b7["step_left_ns"] <= b7["step_ns"], f"step left {b7['step_left_ns']}")
    lab = (("backend", peer7), ("vip", VIP))
    L.wait_for(lambda: (d.metrics().get(("smg_steer_backend_step_seconds", lab)) or 0)
               >= gap_s - 0.005, 30, "the step in /metrics")

with t.case("--wire-cgroup: only sockets made in it are counted; moved at restart; reload warns"):
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    child = env.child_cgroup("clients")
    write_config(BPT, f"wire-cgroup: {child}\n")
    d = L.Daemon(env, ["--config", CFG]).start()
    d.wait_publishes(2)
    t.check(f"request bytes counted only in cgroup {child}" in d.log_text(),
            "the start line does not say where accounting runs")
    t.check("request accounting moved from cgroup id" in d.log_text(),
            "the pinned links on the steering cgroup were not moved")
    links = sorted(n for n in os.listdir(env.pin) if n.startswith("steer_lnk_w"))
    t.check(links == ["steer_lnk_win", "steer_lnk_wout"], f"wire links pinned: {links}")
    before = {addr: wire(addr) for addr in (A, B)}
    s5 = connect()  # made in the steering cgroup, outside --wire-cgroup
    r8 = request(None, body=b"j" * 1500)
    peer5 = send_held(s5, r8)
    read_answer(s5)
    s5.close()
    t.check(peer5 in (A, B), f"not steered: {peer5}")
    t.check({addr: wire(addr) for addr in (A, B)} == before,
            f"counted outside --wire-cgroup: {before} -> {wire(peer5)}")
    env.enter(child)
    try:
        s6 = connect()  # the socket belongs to the child for good
    finally:
        env.enter_cgroup()
    r9 = request(None, body=b"k" * 2500)
    peer6 = send_held(s6, r9)
    w = wire(peer6)
    t.check(w["sent_bytes"] == before[peer6]["sent_bytes"] + len(r9),
            f"from the child: sent {before[peer6]['sent_bytes']} -> {w['sent_bytes']}, "
            f"want +{len(r9)}")
    read_answer(s6)
    s6.close()
    write_config(BPT)  # no wire-cgroup: a reload says it needs a restart
    d.send(signal.SIGHUP)
    L.wait_for(lambda: "a --wire-cgroup change needs a restart" in d.log_text(), 30,
               "the reload's warning")

with t.case("--wire-estimator off: no accounting programs attached, bytes not counted"):
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    write_config(BPT, "wire-estimator: off\n")
    d = L.Daemon(env, ["--config", CFG]).start()
    d.wait_publishes(2)
    t.check(explain()["estimator"] == "off", f"explain's estimator {explain()['estimator']}")
    links = sorted(n for n in os.listdir(env.pin) if n.startswith("steer_lnk_w"))
    t.check(links == [], f"wire links still pinned: {links}")
    before = {addr: wire(addr) for addr in (A, B)}
    s4 = connect()
    r7 = request(None, body=b"i" * 2000)
    peer4 = send_held(s4, r7)
    read_answer(s4)
    s4.close()
    t.check({addr: wire(addr) for addr in (A, B)} == before,
            f"counted with the estimator off: {before} -> {wire(peer4)}")
    write_config(BPT)  # a reload cannot attach the programs: it says so, and stays off
    d.send(signal.SIGHUP)
    L.wait_for(lambda: "--wire-estimator to or from off needs a restart" in d.log_text(), 30,
               "the reload's warning")
    t.check(sorted(n for n in os.listdir(env.pin) if n.startswith("steer_lnk_w")) == [],
            "a reload attached the wire programs")

rc, _ = d.stop()
with t.case("daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
env.cleanup()
t.done()
