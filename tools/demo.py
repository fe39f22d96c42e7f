#!/usr/bin/python3
"""make demo: smg-steer steering live, in about 30 s (DEMO_SECONDS=N).

Four simulated SGLang workers (tests/fake_worker.py) serve GetLoads and
accept traffic on 127.0.0.11-14. Their queues follow what they are sent and
drain at their own throughput. smg-steerd steers the virtual address
127.0.0.100:8000; a client opens connections at a steady rate from inside
the attached cgroup. Along the way one worker gets busy, one fills its KV
cache, one is killed and restarted; the table printed every second shows
where the connections go. Everything runs in a private network namespace
and is removed at the end.
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import e2e_lib as L  # noqa: E402

L.enter_private_netns()

SECONDS = max(5, int(os.environ.get("DEMO_SECONDS", "30")))
RATE = 20             # new connections per second
REQUEST_TOKENS = 1024  # work each connection brings to its worker
VIP = "127.0.0.100:8000"
TICK = 0.1

# name, last octet, throughput (tokens/s), KV capacity (tokens)
SPEC = [("w1", 11, 8000.0, 60000), ("w2", 12, 12000.0, 90000),
        ("w3", 13, 6000.0, 45000), ("w4", 14, 10000.0, 75000)]


class Model:
    """Each worker's queue: + what it is sent, - its throughput."""

    def __init__(self):
        self.lock = threading.Lock()
        self.queued = {n: 0.0 for n, *_ in SPEC}
        self.kv_floor = {n: 0.0 for n, *_ in SPEC}
        self.alive = {n: True for n, *_ in SPEC}

    def add(self, name, tokens):
        with self.lock:
            self.queued[name] += tokens

    def step(self, dt):
        with self.lock:
            for n, _, tput, _ in SPEC:
                if self.alive[n]:
                    self.queued[n] = max(0.0, self.queued[n] - tput * dt)

    def state(self, name):
        _, _, tput, cap = next(s for s in SPEC if s[0] == name)
        with self.lock:
            q = self.queued[name]
            kv = min(0.99, max(self.kv_floor[name], 0.2 + q / cap * 0.6))
        return {"mode": "ok", "loads": [L.rank(int(q), round(kv, 4), tput if q > 0 else tput * 0.5,
                                               waiting=int(q // REQUEST_TOKENS))]}


def main():
    if os.geteuid() != 0:
        sys.exit("make demo must run as root (it loads BPF programs)")
    env = L.Env("demo")
    model = Model()
    workers = {}
    for name, octet, _, _ in SPEC:
        w = L.Worker(env, name, f"127.0.0.{octet}:8000", f"127.0.0.{octet}:30000",
                     model.state(name))
        workers[name] = w.start()
    daemon = L.Daemon(env, ["--vip", VIP, "--load-check-interval", "1s", "--log-level", "warn"]
                      + sum((["--backend", f"127.0.0.{o}:8000,loads=127.0.0.{o}:30000"]
                             for _, o, _, _ in SPEC), []))
    daemon.start()
    env.enter_cgroup()

    per_second = {n: 0 for n, *_ in SPEC}
    totals = {n: 0 for n, *_ in SPEC}
    failed = [0]
    events = timeline(SECONDS)
    print(f"smg-steer demo: {len(SPEC)} workers, virtual address {VIP}, {RATE} connections/s, "
          f"{SECONDS} s\n")
    t0 = time.monotonic()
    next_conn = t0
    next_print = t0 + 1
    next_state = t0
    try:
        while time.monotonic() - t0 < SECONDS:
            now = time.monotonic()
            run_events(events, now - t0, model, workers)
            if now >= next_state:
                model.step(TICK)
                for n, w in workers.items():
                    if model.alive[n]:
                        w.set_state(model.state(n))
                next_state += TICK
            if now >= next_conn:
                name = L.connect_name(VIP, timeout=1)
                if name in totals:
                    per_second[name] += 1
                    totals[name] += 1
                    model.add(name, REQUEST_TOKENS)
                else:
                    failed[0] += 1
                next_conn += 1.0 / RATE
            if now >= next_print:
                print_table(env, daemon, per_second, totals, now - t0, failed[0])
                per_second = {n: 0 for n in per_second}
                next_print += 1
            time.sleep(0.005)
    finally:
        rc, _ = daemon.stop()
        for w in workers.values():
            w.kill()
        env.cleanup()
    print(f"\ntotal: " + ", ".join(f"{n} {c}" for n, c in totals.items())
          + f", failed {failed[0]}; daemon exit {rc}; cleaned up.")
    return 0 if rc == 0 else 1


def timeline(seconds):
    s = seconds / 30.0
    return [
        [6 * s, "w2 gets busy: +60000 queued tokens from other clients",
         lambda m, w: m.add("w2", 60000)],
        [12 * s, "w3 fills its KV cache (token_usage 0.98)",
         lambda m, w: m.kv_floor.__setitem__("w3", 0.98)],
        [18 * s, "w4 is killed", lambda m, w: kill(m, w, "w4")],
        [24 * s, "w4 restarts; w3's KV cache frees up", lambda m, w: restart(m, w, "w4")],
    ]


def kill(model, workers, name):
    model.alive[name] = False
    workers[name].kill()


def restart(model, workers, name):
    with model.lock:
        model.queued[name] = 0.0
        model.kv_floor["w3"] = 0.0
    model.alive[name] = True
    workers[name].set_state(model.state(name))
    workers[name].start()


def run_events(events, elapsed, model, workers):
    while events and elapsed >= events[0][0]:
        at, text, fn = events.pop(0)
        print(f"\n>>> t={elapsed:4.1f}s  {text}\n")
        fn(model, workers)


def ctl_status(env):
    """Per-backend records straight from the pinned maps (smg-steerctl)."""
    p = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin, "-o", "json",
                        "status"], capture_output=True, text=True, timeout=5)
    if p.returncode != 0:
        return {}
    out = {}
    for svc in json.loads(p.stdout)["services"]:
        for b in svc["backends"]:
            out[b["address"]] = b
    return out


def print_table(env, daemon, per_second, totals, elapsed, failed):
    try:
        m = daemon.metrics()
        st = ctl_status(env)
    except Exception as e:  # the demo goes on even if one read fails
        print(f"(status unavailable: {e})")
        return

    def g(name, backend):
        return m.get((name, tuple(sorted({"vip": VIP, "backend": backend}.items())))) or 0.0

    print(f"t={elapsed:4.1f}s  failed connects: {failed}")
    print(f"  {'backend':16} {'health':8} {'snap':>5} {'queued':>7} {'tput/s':>7} {'kv':>5} "
          f"{'base ms':>8} {'inflight':>8} {'score ms':>9} {'conn/s':>6} {'total':>6}")
    for name, octet, _, _ in SPEC:
        b = f"127.0.0.{octet}:8000"
        rec = st.get(b, {})
        health = "drained" if rec.get("drained") else rec.get("health", "?")
        age = rec.get("snapshot_age_s")
        base, npt = rec.get("base_wait_ns"), rec.get("ns_per_token")
        inflight = rec.get("inflight_tokens", 0)
        # The score the kernel computes for the next connection, right now.
        score = "-" if base is None else f"{(base + inflight * npt) / 1e6:9.1f}"
        print(f"  {name} {b:13} {health:8} {'-' if age is None else f'{age:4.1f}s':>5} "
              f"{g('smg_steer_backend_queued_tokens', b):7.0f} "
              f"{g('smg_steer_backend_throughput_tokens_per_second', b):7.0f} "
              f"{g('smg_steer_backend_kv_usage_ratio', b):5.2f} "
              f"{'-' if base is None else f'{base / 1e6:8.1f}':>8} "
              f"{inflight:8d} {score:>9} {per_second[name]:6d} {totals[name]:6d}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
