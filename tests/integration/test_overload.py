#!/usr/bin/python3
"""Overload protection with real connects through the kernel's programs.

Two fake SGLang workers behind one VIP, smg-steerd configured from a file
that each case rewrites and reloads (SIGHUP), so that every option is turned
on and off by a reload. Asserted, each against the connects' real outcome:

- off (the default): an overloaded worker still takes connects;
- --worker-overload-protection (KV usage >= 0.9) and
  --worker-overload-waiting-requests skip the worker their poll shows over
  the bound; with every worker over it, the connect fails at once with
  ECONNREFUSED (no SYN: well under 10 ms), and steering comes back when a
  report comes back under the bound;
- --when-all-overloaded least gives the connect to the least bad instead;
- --worker-overload-wait fills both workers up to the bound under a burst of
  connects that hold their credit, and no further: each worker takes exactly
  the connects whose expected wait was within the bound;
- --worker-overload-connections: each worker takes that many live
  connections, then none until one closes;
- a drained worker and an overloaded one: refused;
- capacity pushback on the wire: an HTTP answer 429 or 503 makes the worker
  overloaded until its Retry-After; a 500 counts as a failed connect (fast
  ejection), a 404 never does;
- bad values exit 2 naming the option.
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
# One connect's credit: 200 tokens at 2,000 tokens/s, 100 ms of expected wait.
PREFILL = 200
TP = 2000.0
t = Tap()
env = L.Env("overload")


def idle():
    return {"mode": "ok", "loads": [L.rank(0, 0.1, TP)]}


wA = L.Worker(env, "wA", "127.0.0.51:8000", "127.0.0.51:30000", idle()).start()
wB = L.Worker(env, "wB", "127.0.0.52:8000", "127.0.0.52:30000", idle()).start()
cfg = os.path.join(env.tmp, "steer.yaml")


def write_config(interval="500ms", **over):
    """The file: both workers, and the overload keys given (name=value)."""
    text = (f"load-check-interval: {interval}\nlog-level: debug\n"
            f"least-load-mean-prefill-tokens: {PREFILL}\nservices:\n  - vip: {VIP}\n")
    for k, v in over.items():
        text += f"    {k.replace('_', '-')}: {v}\n"
    text += "    backends:\n"
    for w in (wA, wB):
        text += f"      - address: {w.traffic}\n        loads: {w.grpc}\n"
    tmp = cfg + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, cfg)


def reload(interval="500ms", **over):
    """Rewrite the file, SIGHUP, and wait for the reload and the publish of
    the cycle it runs at once."""
    start = d.publishes()
    seen = d.log_text().count("reloaded ")
    write_config(interval, **over)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: d.log_text().count("reloaded ") > seen, 30, "the reload applied")
    L.wait_for(lambda: d.publishes() > start, 30, "a publish after the reload")


def status_json():
    out = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin,
                          "-o", "json", "status"], capture_output=True, text=True).stdout
    return json.loads(out)["services"][0]


def backend_json(w):
    return next(b for b in status_json()["backends"] if b["address"] == w.traffic)


def status_text():
    return subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin,
                           "status"], capture_output=True, text=True).stdout


def connect(timeout=3.0):
    """(outcome, seconds): the worker's name, or the errno name."""
    t0 = time.monotonic()
    r = L.connect_name(VIP, timeout=timeout)
    return r, time.monotonic() - t0


def spread(n=40):
    out = {}
    for _ in range(n):
        r, _ = connect()
        out[r] = out.get(r, 0) + 1
    return out


def wait_spread(what, cond, n=20, bound=30):
    """Connect n times until cond(spread) holds (a poll and a publish may be
    under way); returns the last spread."""
    deadline = time.monotonic() + bound
    while True:
        s = spread(n)
        if cond(s):
            return s
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {bound} s: {what}: {s}")
        time.sleep(0.2)


def svc_metric(name):
    return d.metric(name, vip=VIP) or 0


def full():
    return {"mode": "ok", "loads": [L.rank(0, 0.95, TP)]}


write_config()
env.enter_cgroup()
d = L.Daemon(env, ["--config", cfg]).start()

try:
    with t.case("off: a worker at 95 % KV still takes connects"):
        wA.set_state(full())
        d.wait_publishes(2, timeout=30)
        s = spread(40)
        t.check(s.get("wA", 0) > 0 and s.get("wB", 0) > 0, f"{s}")

    with t.case("--worker-overload-protection: the worker at 95 % KV is skipped"):
        reload(worker_overload_protection="true")
        s = wait_spread("only wB", lambda s: s.get("wB", 0) == 20)
        t.check(backend_json(wA)["overload"] == "kv", f"{backend_json(wA)}")
        L.wait_for(lambda: d.metric("smg_steer_backend_overloaded", vip=VIP,
                                    backend=wA.traffic) == 1, 30, "wA overloaded on /metrics")
        out = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin,
                              "explain", VIP], capture_output=True, text=True)
        t.check("overloaded:     yes, by its last poll: KV usage" in out.stdout,
                f"explain: {out.stdout[-1500:]}")

    with t.case("every worker over the bound: ECONNREFUSED at once, then back"):
        wB.set_state(full())
        L.wait_for(lambda: connect()[0] == "ECONNREFUSED", 30, "refusals")
        times = [connect() for _ in range(50)]
        bad = [r for r, _ in times if r != "ECONNREFUSED"]
        slowest = max(s for _, s in times)
        t.check(not bad, f"not refused: {bad}")
        t.check(slowest < 0.010, f"slowest refusal {slowest * 1e3:.2f} ms")
        t.check(status_json()["overload_refused"] >= 50, "refusals not counted")
        L.wait_for(lambda: svc_metric("smg_steer_overload_refused_connections_total") >= 50,
                   30, "the refusals on /metrics")
        L.wait_for(lambda: "refusing connects: every backend is overloaded" in d.log_text(),
                   30, "the refusing line logged")
        wB.set_state(idle())
        wait_spread("wB again", lambda s: s.get("wB", 0) == 20)
        L.wait_for(lambda: "no longer refusing connects" in d.log_text(), 30,
                   "the recovery line logged")
        print(f"# slowest of 50 refusals: {slowest * 1e6:.0f} us")

    with t.case("--when-all-overloaded least: the least bad takes the connect"):
        reload(worker_overload_protection="true", when_all_overloaded="least")
        wB.set_state({"mode": "ok", "loads": [L.rank(4000, 0.95, TP)]})
        s = wait_spread("every connect to wA (the least bad)",
                        lambda s: s.get("wA", 0) == 20)
        t.check(status_json()["overload_admitted"] > 0, "no admission past the bound counted")

    with t.case("--worker-overload-token-usage 0.5: a worker at 60 % KV is skipped"):
        wA.set_state({"mode": "ok", "loads": [L.rank(0, 0.6, TP)]})
        wB.set_state(idle())
        reload(worker_overload_token_usage=0.5)
        wait_spread("only wB", lambda s: s.get("wB", 0) == 20)
        reload(worker_overload_token_usage=0.7)
        wait_spread("both at 0.7", lambda s: s.get("wA", 0) > 0 and s.get("wB", 0) > 0, n=40)

    with t.case("--worker-overload-waiting-requests: 8 waiting skips the worker"):
        wA.set_state(idle())
        wB.set_state({"mode": "ok", "loads": [L.rank(0, 0.1, TP, waiting=8)]})
        reload(worker_overload_waiting_requests=8)
        wait_spread("only wA", lambda s: s.get("wA", 0) == 20)
        reload()  # every option off again
        wait_spread("both again", lambda s: s.get("wA", 0) > 0 and s.get("wB", 0) > 0, n=40)
        wB.set_state(idle())

    def hold(n):
        """n connects through the VIP, held open: (sockets by worker, outcomes)."""
        held, outcomes = {}, {}
        for _ in range(n):
            fam, sa = L.parse_addr(VIP)
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(3)
            try:
                s.connect(sa)
                name = s.recv(64).decode().strip()
                held.setdefault(name, []).append(s)
            except OSError as e:
                name = "ECONNREFUSED" if e.errno == 111 else str(e)
                s.close()
            outcomes[name] = outcomes.get(name, 0) + 1
        return held, outcomes

    with t.case("--worker-overload-wait fills both workers to the bound, no further"):
        # Polls 30 s apart: the held connections keep their credit through the
        # burst. Each worker takes the connects that see a wait within 0.55 s:
        # 0, 0.1, ..., 0.5 s, six each; the rest are refused.
        reload(interval="30s", worker_overload_wait="550ms")
        L.wait_for(lambda: all(
            d.metric("smg_steer_backend_inflight_tokens", vip=VIP, backend=w.traffic) == 0
            for w in (wA, wB)), 40, "no credit left from before")
        held, outcomes = hold(20)
        for socks in held.values():
            for s in socks:
                s.close()
        t.check(outcomes == {"wA": 6, "wB": 6, "ECONNREFUSED": 8}, f"{outcomes}")
        t.check(status_json()["wait_refused"] == 8, f"{status_json()}")

    with t.case("--worker-overload-connections: 3 live each, then refused; a close admits"):
        reload(interval="30s", worker_overload_connections=3)
        held, outcomes = hold(8)
        t.check(outcomes == {"wA": 3, "wB": 3, "ECONNREFUSED": 2}, f"{outcomes}")
        t.check(backend_json(wA)["overload"] == "connections", f"{backend_json(wA)}")
        held["wA"].pop().close()
        L.wait_for(lambda: connect()[0] == "wA", 30, "wA admits again after a close")
        for socks in held.values():
            for s in socks:
                s.close()
        reload(interval="30s")  # off again
        _, outcomes = hold(8)
        t.check("ECONNREFUSED" not in outcomes, f"bound off: {outcomes}")

    with t.case("a drained worker and an overloaded one: refused"):
        reload(worker_overload_protection="true")
        wA.set_state(full())
        ctl = [os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin]
        subprocess.run(ctl + ["drain", wB.traffic], check=True, capture_output=True)
        L.wait_for(lambda: connect()[0] == "ECONNREFUSED", 30, "refused")
        subprocess.run(ctl + ["undrain", wB.traffic], check=True, capture_output=True)
        wait_spread("wB again", lambda s: s.get("wB", 0) == 20)
        wA.set_state(idle())

    def http_get():
        """A request through the VIP: (worker name or errno, HTTP status)."""
        fam, sa = L.parse_addr(VIP)
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect(sa)
            s.sendall(b"GET / HTTP/1.1\r\nHost: vip\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            return body.decode().strip(), int(head.split()[1])
        except OSError as e:
            return ("ECONNREFUSED" if e.errno == 111 else str(e)), 0
        finally:
            s.close()

    def http_spread(n=20):
        out = {}
        for _ in range(n):
            name, _ = http_get()
            out[name] = out.get(name, 0) + 1
        return out

    with t.case("pushback: a 429 with Retry-After keeps the worker out until then"):
        # Polls 30 s apart: only the Retry-After can end the pushback here.
        reload(interval="30s", worker_overload_protection="true")
        for w in (wA, wB):
            w.set_state(dict(idle(), traffic="http"))
        L.wait_for(lambda: {n for n, _ in (http_get() for _ in range(10))} == {"wA", "wB"}, 30,
                   "both answer HTTP")
        wA.set_state(dict(idle(), traffic="http", http_status=429, retry_after=3))
        L.wait_for(lambda: http_get() == ("wA", 429), 30, "a 429 from wA")
        pushed = time.monotonic()
        wA.set_state(dict(idle(), traffic="http"))
        s = http_spread(20)
        shown = status_text()
        during = time.monotonic() - pushed
        t.check(s == {"wB": 20} or during > 2.5, f"during the pushback: {s}")
        t.check("healthy,pushback" in shown or during > 2.5, f"status: {shown}")
        t.check(backend_json(wA)["pushbacks"] >= 1, f"{backend_json(wA)}")
        L.wait_for(lambda: http_spread(10).get("wA", 0) > 0, 30, "wA back after Retry-After")
        back = time.monotonic() - pushed
        t.check(back >= 2.9, f"wA back after {back:.2f} s, before its Retry-After of 3 s")
        print(f"# wA chosen again {back:.2f} s after its 429 (Retry-After: 3)")


    with t.case("pushback: a 503 ends at the next good poll"):
        reload(interval="1s", worker_overload_protection="true")
        ended = d.log_text().count("pushback over (a good poll)")
        wA.set_state(dict(idle(), traffic="http", http_status=503))
        L.wait_for(lambda: http_get() == ("wA", 503), 30, "a 503 from wA")
        wA.set_state(dict(idle(), traffic="http"))
        L.wait_for(lambda: d.log_text().count("pushback over (a good poll)") > ended, 30,
                   "the 503's pushback ended by a good poll")
        L.wait_for(lambda: http_spread(10).get("wA", 0) > 0, 30,
                   "wA back after a good poll (no Retry-After)")

    with t.case("a 500 counts toward fast ejection, a 404 never"):
        wA.set_state(dict(idle(), traffic="http", http_status=404))
        for _ in range(12):
            http_get()
        t.check(backend_json(wA)["server_errors"] == 0, f"a 404 counted: {backend_json(wA)}")
        wA.set_state(dict(idle(), traffic="http", http_status=500))
        L.wait_for(lambda: http_get() and "connects in a row failed" in d.log_text(), 30,
                   "fast ejection after 500s")
        t.check(backend_json(wA)["server_errors"] >= 4, f"{backend_json(wA)}")
        L.wait_for(lambda: (d.metric("smg_steer_backend_server_errors_total", vip=VIP,
                                     backend=wA.traffic) or 0) >= 4, 30, "500s on /metrics")
        wA.set_state(dict(idle(), traffic="http"))

    with t.case("bad values exit 2 naming the option"):
        steerd = os.path.join(L.BUILD, "smg-steerd")
        for flag, value in (("--worker-overload-token-usage", "0"),
                            ("--worker-overload-token-usage", "1.5"),
                            ("--worker-overload-waiting-requests", "0"),
                            ("--worker-overload-wait", "0s"),
                            ("--when-all-overloaded", "shed")):
            r = subprocess.run([steerd, "--check-config", "--vip", VIP, "--backend",
                                wA.traffic, flag, value], capture_output=True, text=True)
            t.check(r.returncode == 2 and flag in r.stderr,
                    f"{flag} {value}: rc {r.returncode}, {r.stderr.strip()}")
        r = subprocess.run([steerd, "--check-config", "--vip", VIP, "--backend", wA.traffic,
                            "--worker-overload-protection", "--worker-overload-wait", "2s",
                            "--when-all-overloaded", "least"], capture_output=True, text=True)
        t.check(r.returncode == 0, f"good values: rc {r.returncode}, {r.stderr.strip()}")
finally:
    env.cleanup()
t.done()
