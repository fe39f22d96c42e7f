#!/usr/bin/python3
"""make demo: smg-steer steering live, in about 30 s (DEMO_SECONDS=N).

Four simulated SGLang workers (tests/lib/fake_worker.py) serve GetLoads and
accept traffic on 127.0.0.11-14. Their queues follow what they are sent and
drain at their own throughput. smg-steerd steers the virtual address
127.0.0.100:8000; a client opens connections at a steady rate from inside
the attached cgroup. Along the way one worker gets busy, one fills its KV
cache, one is killed and restarted; the table printed every second shows
where the connections go. Everything runs in a private network namespace
and is removed at the end.

Every column of a backend's row comes from one read of the pinned maps
(`smg-steerctl -o json explain`): the inputs (queue, throughput, KV) and the
published wait come from the same publish, as the kernel sees them.
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import e2e_lib as L  # noqa: E402

L.enter_private_netns()

SECONDS = max(5, int(os.environ.get("DEMO_SECONDS", "30")))
RATE = 20             # new connections per second
REQUEST_TOKENS = 1024  # work each connection brings to its worker
VIP = "127.0.0.100:8000"
TICK = 0.1
INTERVAL_S = 1.0      # --load-check-interval
UNHEALTHY_AFTER = 3   # --unhealthy-after (the daemon's default)

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
        self.ejected = {n: False for n, *_ in SPEC}  # as last seen in the maps

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
    daemon = L.Daemon(env, ["--vip", VIP, "--load-check-interval", f"{INTERVAL_S:g}s",
                            "--unhealthy-after", str(UNHEALTHY_AFTER), "--log-level", "warn"]
                      + sum((["--backend", f"127.0.0.{o}:8000,loads=127.0.0.{o}:30000"]
                             for _, o, _, _ in SPEC), []))
    daemon.start()
    env.enter_cgroup()

    per_second = {n: 0 for n, *_ in SPEC}
    totals = {n: 0 for n, *_ in SPEC}
    failed = Failures()
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
                    failed.count(model)
                next_conn += 1.0 / RATE
            if now >= next_print:
                print_table(env, model, per_second, totals, now - t0, failed)
                per_second = {n: 0 for n in per_second}
                next_print += 1
            time.sleep(0.005)
    finally:
        rc, _ = daemon.stop()
        for w in workers.values():
            w.kill()
        env.cleanup()
    print(f"\ntotal: " + ", ".join(f"{n} {c}" for n, c in totals.items())
          + f", failed {failed.summary()}; daemon exit {rc}; cleaned up.")
    return 0 if rc == 0 else 1


def timeline(seconds):
    s = seconds / 30.0
    return [
        [6 * s, "w2 gets busy: +60000 queued tokens from other clients",
         lambda m, w: m.add("w2", 60000)],
        [12 * s, "w3 fills its KV cache (token_usage 0.98)",
         lambda m, w: m.kv_floor.__setitem__("w3", 0.98)],
        [18 * s, "w4 is killed. Until smg-steerd ejects it, the connects the kernel steers\n"
         "    to w4 fail (ECONNREFUSED): the kernel steers by the last published table.\n"
         "    After 4 such failures in a row the kernel stops choosing w4 (fast ejection)\n"
         "    and smg-steerd polls it at once; a failed poll ejects it. The demo counts\n"
         "    those failures.",
         lambda m, w: kill(m, w, "w4")],
        [24 * s, "w4 restarts; w3's KV cache frees up", lambda m, w: restart(m, w, "w4")],
    ]


class Failures:
    """Failed connects, and why: those made while a killed worker had not
    been ejected yet are expected (see the timeline); any other is not."""

    def __init__(self):
        self.awaiting = {}  # worker -> failures while it was down, not ejected
        self.other = 0

    def count(self, model):
        down = [n for n, alive in model.alive.items() if not alive and not model.ejected[n]]
        if down:
            self.awaiting[down[0]] = self.awaiting.get(down[0], 0) + 1
        else:
            self.other += 1

    def total(self):
        return sum(self.awaiting.values()) + self.other

    def summary(self):
        why = ", ".join(f"{c} while {n} was down and not yet ejected"
                        for n, c in self.awaiting.items())
        return f"{self.total()} ({why + ', ' if why else ''}{self.other} other)"


def kill(model, workers, name):
    model.alive[name] = False
    model.ejected[name] = False
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


def read_explain(env):
    """{backend address: record} from `smg-steerctl -o json explain VIP`."""
    p = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin, "-o", "json",
                        "explain", VIP], capture_output=True, text=True, timeout=5)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip())
    return {b["address"]: b for b in json.loads(p.stdout)["backends"]}


STABLE_KEYS = ("health", "rank", "base_wait_ns", "queued_tokens", "throughput_tokens_per_s",
               "kv_ppm")


def backend_records(env):
    """Two reads 50 ms apart that agree: the daemon writes a backend's inputs
    just after it swaps in the new table, and a read between the two would
    pair the new wait with the old inputs."""
    last = read_explain(env)
    for _ in range(5):
        time.sleep(0.05)
        now = read_explain(env)
        if all({k: a.get(k) for k in STABLE_KEYS} == {k: now.get(b, {}).get(k) for k in STABLE_KEYS}
               for b, a in last.items()):
            return now
        last = now
    return last


# Column, alignment; widths follow the widest cell, so header and rows line up.
COLUMNS = [("backend", "<"), ("health", "<"), ("snap", ">"), ("queued", ">"), ("tput/s", ">"),
           ("kv", ">"), ("base ms", ">"), ("inflight", ">"), ("score ms", ">"), ("conn/s", ">"),
           ("total", ">")]


def format_rows(rows):
    """Header and rows (lists of cells) as aligned lines."""
    cells = [[c for c, _ in COLUMNS]] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    return ["  " + " ".join(f"{cell:{align}{w}}" for cell, (_, align), w in zip(r, COLUMNS, widths))
            for r in cells]


def backend_row(name, addr, rec, conn_s, total):
    health = "drained" if rec.get("drained") else rec.get("health", "?")
    age = rec.get("snapshot_age_s")
    base, npt = rec.get("base_wait_ns"), rec.get("ns_per_token")
    inflight = rec.get("inflight_tokens", 0)
    ranked = rec.get("rank") is not None  # the inputs are current only for a ranked backend
    return [f"{name} {addr}", health, "-" if age is None else f"{age:.1f}s",
            f"{rec['queued_tokens']}" if ranked else "-",
            f"{rec['throughput_tokens_per_s']:.0f}" if ranked else "-",
            f"{rec['kv_ppm'] / 1e6:.3f}" if ranked else "-",
            "-" if base is None else f"{base / 1e6:.1f}",
            f"{inflight}",
            # The score the kernel computes for the next connection, right now.
            "-" if base is None else f"{(base + inflight * npt) / 1e6:.1f}",
            f"{conn_s}", f"{total}"]


def print_table(env, model, per_second, totals, elapsed, failed):
    try:
        recs = backend_records(env)
    except Exception as e:  # the demo goes on even if one read fails
        print(f"(status unavailable: {e})")
        return
    print(f"t={elapsed:4.1f}s  failed connects: {failed.total()}")
    rows, notes = [], []
    for name, octet, _, _ in SPEC:
        addr = f"127.0.0.{octet}:8000"
        rec = recs.get(addr, {})
        rows.append(backend_row(name, addr, rec, per_second[name], totals[name]))
        if not model.alive[name] and not model.ejected[name] and rec.get("health") == "ejected":
            model.ejected[name] = True
            notes.append(f"  >>> smg-steerd ejected {name}: the {failed.awaiting.get(name, 0)} "
                         f"connects steered to it before that failed")
    print("\n".join(format_rows(rows) + notes))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
