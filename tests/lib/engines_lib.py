"""Test-side helpers for the fake engines (tests/lib/fake_engines.py): start and
steer them, ask a traffic port who it is, and the independent reference of
what smg-steerd must make of each kind's answer. Run with /usr/bin/python3.
"""
import errno
import json
import math
import os
import socket
import subprocess
import time

import e2e_lib as L
import fake_payloads as P

# The source name smg-steerd must report for each kind (steer_source_name).
SOURCE = {
    "sglang-grpc": "grpc-sglang",
    "vllm-grpc": "grpc-vllm",
    "tokenspeed-grpc": "grpc-tokenspeed",
    "http-loads": "http-loads",
    "sglang-http": "http-loads",  # /v1/loads is preferred over /metrics
    "vllm-metrics": "http-metrics-vllm",
    "sglang-metrics": "http-metrics-sglang",
    "plain": "tcp",
}
# Kinds whose answer carries no queued-token count at all.
NO_QUEUED_TOKENS = ("vllm-grpc", "vllm-metrics", "sglang-metrics")
# Kinds whose answer carries no throughput (smg-steerd uses the default).
NO_THROUGHPUT = ("vllm-metrics",)


def rank(r, uncached=0, waiting=0, kv=0.0, tp=0.0, running=4):
    return {"dp_rank": r, "num_waiting_uncached_tokens": uncached, "num_waiting_reqs": waiting,
            "num_running_reqs": running, "token_usage": kv, "gen_throughput": tp,
            "cache_hit_rate": 0.25}


class Engine:
    """One fake engine process: its kind, traffic address and state file."""

    def __init__(self, env, name, kind, traffic, state=None, grpc=None, variant=None):
        self.env, self.name, self.kind, self.traffic = env, name, kind, traffic
        self.grpc, self.variant = grpc, variant
        self.state_path = os.path.join(env.tmp, f"{name}.json")
        self.proc = None
        self.set_state(state or {"mode": "ok", "loads": [rank(0)]})

    def set_state(self, state):
        self.state = state
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.rename(tmp, self.state_path)

    def update(self, **kw):
        self.set_state(dict(self.state, **kw))

    def argv(self):
        a = [L.PY, os.path.join(L.TOP, "tests", "lib", "fake_engines.py"), "--kind", self.kind,
             "--name", self.name, "--traffic", self.traffic, "--state", self.state_path,
             "--pb2-dir", os.path.join(L.BUILD, "py")]
        if self.grpc:
            a += ["--grpc", self.grpc]
        if self.variant:
            a += ["--variant", self.variant]
        return a

    def spawn(self):
        self.proc = self.env.spawn(self.argv(), stdout=subprocess.PIPE, text=True)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY") or not line:
                break
        if not line.startswith("READY"):
            raise RuntimeError(f"fake engine {self.name} ({self.kind}) did not start: "
                               f"exit {self.proc.poll()}")
        return self

    def start(self):
        return self.spawn().wait_ready()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stats(self):
        try:
            with open(self.state_path + ".stats") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def stat(self, key):
        return self.stats().get(key, 0)

    def expected(self, **kw):
        return expected_load(self.kind, self.state, **kw)


def start_all(engines):
    """Start every engine in parallel, then wait until each is bound."""
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()


# What whoami() sends, and what it weighs in the kernel: a steered socket's
# first send takes its connect's flat credit back, the request is pending until
# the first byte of the answer, then its real size is in flight (bytes / the
# default 4 bytes per token; docs/algorithm.md, "Request accounting"). Sequential whoami()
# connects therefore water-fill with this credit, not the flat one.
WHOAMI_REQUEST = b"GET /whoami HTTP/1.1\r\nHost: steer-test\r\nConnection: close\r\n\r\n"
WHOAMI_TOKENS = len(WHOAMI_REQUEST) // 4


def whoami(addr, timeout=3.0):
    """Connect to addr (steered when it is a VIP), ask GET /whoami and return
    the name in the answer, or the errno name of a failed connect, or
    'HTTP <status>' / 'EOF' for an unexpected answer. Also reads a bare
    "name\\n" line (tests/lib/fake_worker.py's traffic port)."""
    fam, sa = L.parse_addr(addr)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sa)
        s.sendall(WHOAMI_REQUEST)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
            if not data.startswith(b"HTTP/"[:len(data)]) and b"\n" in data:
                break  # a bare name line
        if not data.startswith(b"HTTP/"):
            return data.decode(errors="replace").strip() or "EOF"
        head, _, body = data.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1].decode()
        if status != "200":
            return f"HTTP {status}"
        return body.decode().strip()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    finally:
        s.close()


# ---- the reference: what smg-steerd must make of an answer ------------------------------

def expected_load(kind, state, prefill=1024, default_tp=2000.0, w=0.15, reports_uncached=False):
    """What an engine of `kind` serving `state` must be scored as, written out
    from upstream's mapping (docs/algorithm.md, "Load reports" and "Degradation") and not taken
    from the daemon: queued tokens and throughput summed over ranks (label
    sets), KV averaged; no queued-token field -> waiting requests x mean
    prefill; no throughput -> the default. Returns queued (tokens),
    estimated, throughput (tokens/s as scored), raw_throughput (as summed,
    for the fleet's nominal), kv (clamped), ranks, base_ns, ns_per_token."""
    ranks = [P.normalize_rank(e, i) for i, e in enumerate(state["loads"])]
    waiting = sum(r["num_waiting_reqs"] for r in ranks)
    uncached = 0 if kind in NO_QUEUED_TOKENS else sum(
        r["num_waiting_uncached_tokens"] for r in ranks)
    raw_tp = 0.0 if kind in NO_THROUGHPUT else sum(r["gen_throughput"] for r in ranks)
    kv = sum(r["token_usage"] for r in ranks) / len(ranks)
    estimated = not reports_uncached and uncached <= 0 and waiting > 0
    queued = float(waiting * prefill) if estimated else float(max(uncached, 0))
    tp = raw_tp if raw_tp > 0 and math.isfinite(raw_tp) else default_tp
    k = min(max(kv, 0.0), 0.999) if math.isfinite(kv) else 0.0
    work_s = queued / tp
    barrier_s = w * k / (1.0 - k)
    return {"queued": queued, "estimated": estimated, "throughput": tp, "raw_throughput": raw_tp,
            "kv": k, "ranks": len(ranks), "base_ns": int((work_s + barrier_s) * 1e9),
            "ns_per_token": int(1e9 / tp)}


def nominal_throughput(expectations, default_tp=2000.0):
    """The fleet's nominal throughput: mean of the positive summed
    throughputs of the backends with a snapshot (running mean, as policy.c)."""
    mean, n = 0.0, 0
    for e in expectations:
        if e["raw_throughput"] > 0:
            n += 1
            mean += (e["raw_throughput"] - mean) / n
    return mean if n else default_tp


def live_scored(live, nominal, prefill=1024):
    """(base_ns, ns_per_token) of a backend scored from live connections."""
    npt = int(1e9 / nominal)
    return live * prefill * npt, npt
