#!/usr/bin/python3
"""End to end: the real smg-steerd, real fake workers over gRPC, real
connects through the virtual address from inside the attached cgroup."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
INTERVAL = "1s"
t = Tap()
env = L.Env("e2e")


def worker(name, last_octet, state):
    return L.Worker(env, name, f"127.0.0.{last_octet}:8000", f"127.0.0.{last_octet}:30000",
                    state)


# Four workers with different loads; wB has two DP ranks.
STATES = {
    "wA": {"mode": "ok", "loads": [L.rank(4000, 0.30, 2000.0)]},
    "wB": {"mode": "ok", "loads": [L.rank(1000, 0.20, 1000.0, r=0), L.rank(1500, 0.60, 1000.0, r=1)]},
    "wC": {"mode": "ok", "loads": [L.rank(0, 0.95, 0.0)]},
    "wD": {"mode": "ok", "loads": [L.rank(6000, 0.10, 4000.0)]},
}
OCTET = {"wA": 11, "wB": 12, "wC": 13, "wD": 14, "wE": 15}
workers = {n: worker(n, OCTET[n], s) for n, s in STATES.items()}


def write_config(path, names, extra=""):
    lines = [f"load-check-interval: {INTERVAL}", "load-timeout: 500ms", "log-level: debug",
             extra, "services:", f"  - vip: {VIP}", "    backends:"]
    for n in names:
        lines.append(f"      - address: 127.0.0.{OCTET[n]}:8000")
        lines.append(f"        loads: 127.0.0.{OCTET[n]}:30000")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def reference(names, n):
    entries = [(nm, *L.reference_costs(workers[nm].state)) for nm in names]
    return L.water_fill(entries, n)


def burst(n):
    return [L.connect_name(VIP) for _ in range(n)]


def settle(d, names=None):
    """Every credit made by the connects so far is drained: two publishes,
    then no backend in the table holds in-flight tokens (a poll that failed
    on a loaded machine only delays a drain to the next good one)."""
    d.wait_publishes(2, timeout=30)

    def drained():
        m = d.metrics()
        return all(v == 0 for (n, lab), v in m.items()
                   if n == "smg_steer_backend_inflight_tokens"
                   and (names is None or dict(lab)["backend"] in names))
    L.wait_for(drained, 30, "in-flight tokens drained")
    # The drains happen after the publish that scored them: one more, so the
    # table in the kernel is scored with nothing in flight.
    d.wait_publishes(1, timeout=30)


def backend_metric(d, name, n, **labels):
    return d.metric(name, vip=VIP, backend=f"127.0.0.{OCTET[n]}:8000", **labels)


def service_status():
    p = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin, "-o",
                        "json", "status"], capture_output=True, text=True, timeout=30)
    return json.loads(p.stdout)["services"][0]


def frozen_burst(d, n, tries=10):
    """n connects with the daemon stopped (SIGSTOP), so that no publish and no
    drain lands among them and the kernel's picks follow the water-fill from
    a drained table, however slowly a loaded machine connects. Tried again
    when the stop caught a publish half done (credits not drained yet), or
    the table expired during the burst (fallbacks)."""
    for _ in range(tries):
        settle(d)
        d.send(signal.SIGSTOP)
        try:
            before = service_status()
            if before["expires_in_s"] < 2.0 or any(b["inflight_tokens"]
                                                   for b in before["backends"]):
                continue
            got = burst(n)
            after = service_status()
            if (after["fallbacks"], after["refused"]) == (before["fallbacks"],
                                                          before["refused"]):
                return got
        finally:
            d.send(signal.SIGCONT)
    raise AssertionError(f"no burst of {n} between two publishes in {tries} tries")


decoy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
decoy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
decoy.bind(("127.0.0.100", 8000))
decoy.listen(64)


def decoy_loop():
    while True:
        try:
            c, _ = decoy.accept()
        except OSError:
            return
        c.sendall(b"DECOY\n")
        c.close()


threading.Thread(target=decoy_loop, daemon=True).start()

for w in workers.values():
    w.start()
env.enter_cgroup()
cfg = os.path.join(env.tmp, "steer.yaml")
write_config(cfg, ["wA", "wB", "wC", "wD"])
NAMES = ["wA", "wB", "wC", "wD"]

with t.case("until the first publish connects are refused, never sent to the virtual address"):
    # Workers hang past the deadline: the first publish waits for it.
    for w in workers.values():
        w.set_state(dict(w.state, mode="hang", hang_seconds=3))
    d0 = L.Daemon(env, ["--config", cfg])
    d0.start(wait_publish=False)
    seen = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = L.connect_name(VIP, timeout=1)
        seen.append(r)
        if r.startswith("w"):
            break
        time.sleep(0.01)
    phases = []
    for r in seen:
        kind = "decoy" if r == "DECOY" else "refused" if r == "ECONNREFUSED" else "steered" \
            if r.startswith("w") else r
        if not phases or phases[-1] != kind:
            phases.append(kind)
    t.check(phases[-1] == "steered", f"never steered: {phases}")
    t.check("refused" in phases, f"no refusal before the first publish: {phases}")
    t.check(phases in (["decoy", "refused", "steered"], ["refused", "steered"]),
            f"unexpected order {phases}")
    rc, took = d0.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    for n, w in workers.items():
        w.set_state(STATES[n])

d = L.Daemon(env, ["--config", cfg])
d.start()

with t.case("distribution matches the independent reference (4 workers, one with 2 DP ranks)"):
    got = frozen_burst(d, 40)
    want = reference(NAMES, 40)
    t.check(got == want, f"got  {got}\nwant {want}")

with t.case("metrics report the fake loads, scores, polls and health"):
    settle(d)
    m = d.metrics()

    def g(name, n, **extra):
        labels = {"vip": VIP, "backend": f"127.0.0.{OCTET[n]}:8000", **extra}
        return m.get((name, tuple(sorted(labels.items()))))

    for n in NAMES:
        loads = workers[n].state["loads"]
        q = sum(r["num_waiting_uncached_tokens"] for r in loads)
        tp = sum(r["gen_throughput"] for r in loads) or 2000.0
        kv = sum(r["token_usage"] for r in loads) / len(loads)
        base_ns, _ = L.reference_costs(workers[n].state)
        t.check(g("smg_steer_backend_queued_tokens", n) == q, f"{n} queued {g('smg_steer_backend_queued_tokens', n)} != {q}")
        t.check(g("smg_steer_backend_throughput_tokens_per_second", n) == tp, f"{n} tput")
        t.check(abs(g("smg_steer_backend_kv_usage_ratio", n) - kv) < 1e-9, f"{n} kv")
        t.check(g("smg_steer_backend_healthy", n) == 1, f"{n} healthy")
        t.check(g("smg_steer_polls_total", n, result="ok") >= 2, f"{n} polls")
        t.check(g("smg_steer_polls_total", n, result="invalid") == 0, f"{n} invalid polls")
        # Nothing in flight after settling: the score is the base wait.
        t.check(g("smg_steer_backend_inflight_tokens", n) == 0, f"{n} in flight")
        t.check(abs(g("smg_steer_backend_score_seconds", n) - base_ns / 1e9) < 1e-6,
                f"{n} score {g('smg_steer_backend_score_seconds', n)} vs {base_ns / 1e9}")
    svc = (("vip", VIP),)
    t.check(m[("smg_steer_table_publishes_total", svc)] >= 3, "publishes")
    t.check(m[("smg_steer_poll_duration_seconds_count", svc)] >= 4 * 2, "poll histogram")
    t.check(m[("smg_steer_refused_connections_total", svc)] == 0, "nothing refused")
    t.check(m[("smg_steer_fallback_connections_total", svc)] == 0, "no fallbacks")
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/healthz", timeout=5) as r:
        t.check(r.status == 200, f"/healthz {r.status}")

with t.case("loads change and the distribution follows within two intervals"):
    workers["wD"].set_state({"mode": "ok", "loads": [L.rank(200, 0.05, 4000.0)]})
    workers["wA"].set_state({"mode": "ok", "loads": [L.rank(90000, 0.50, 2000.0)]})
    L.wait_for(lambda: backend_metric(d, "smg_steer_backend_queued_tokens", "wD") == 200
               and backend_metric(d, "smg_steer_backend_queued_tokens", "wA") == 90000, 30,
               "the new loads scored")
    got = frozen_burst(d, 30)
    want = reference(NAMES, 30)
    t.check(got == want, f"got  {got}\nwant {want}")
    t.check(got.count("wD") > got.count("wA"), "wD should now take most")

with t.case("a killed worker is ejected, gets nothing, and is readmitted after restart"):
    # Make wB clearly the best, then kill it.
    workers["wB"].set_state({"mode": "ok", "loads": [L.rank(0, 0.0, 8000.0, r=0),
                                                       L.rank(0, 0.0, 8000.0, r=1)]})
    settle(d)
    t.check(L.connect_name(VIP) == "wB", "wB should be the best before the kill")
    workers["wB"].kill()
    # --unhealthy-after 3
    L.wait_for(lambda: backend_metric(d, "smg_steer_backend_healthy", "wB") == 0, 30,
               "wB ejected")
    d.wait_publishes(1, timeout=30)  # a table without it
    got = burst(30)
    t.check("wB" not in got, f"a connect went to the dead worker: {got}")
    t.check(all(g.startswith("w") for g in got), f"failed connects: {got}")
    ok_before = d.metric("smg_steer_polls_total", vip=VIP, backend="127.0.0.12:8000",
                         result="ok")
    restarted = time.monotonic()
    workers["wB"].start()
    # A restarted backend is polled successfully again (about an interval
    # here; the bound is generous, test_poller checks the reconnect backoff).
    L.wait_for(lambda: (backend_metric(d, "smg_steer_polls_total", "wB", result="ok") or 0)
               > ok_before, 30, "a good poll of the restarted wB")
    print(f"# wB polled again {time.monotonic() - restarted:.2f} s after its restart")
    # --healthy-after 2
    L.wait_for(lambda: backend_metric(d, "smg_steer_backend_healthy", "wB") == 1, 30,
               "wB readmitted")
    settle(d)
    t.check(L.connect_name(VIP) == "wB", "wB readmitted but not chosen")

with t.case("a worker without GetLoads stays in the table, scored from live connections"):
    we = L.Worker(env, "wE", "127.0.0.15:8000", "127.0.0.15:30000",
                  {"mode": "unimplemented", "loads": []})
    we.start()
    workers["wE"] = we
    write_config(cfg, ["wA", "wB", "wC", "wD", "wE"])
    d.send(signal.SIGHUP)
    L.wait_for(lambda: (backend_metric(d, "smg_steer_polls_total", "wE",
                                       result="unimplemented") or 0) >= 2, 30,
               "two unimplemented polls of wE")
    t.check(d.metric("smg_steer_backend_healthy", vip=VIP, backend="127.0.0.15:8000") == 1,
            "an UNIMPLEMENTED backend must stay healthy")
    # Its peers report, so wE is estimated from its live connections (none):
    # base 0, at the fleet's nominal throughput (mean of the peers' positive ones).
    peers = ["wA", "wB", "wC", "wD"]
    tps = [sum(r["gen_throughput"] for r in workers[n].state["loads"]) for n in peers]
    nominal = sum(x for x in tps if x > 0) / len([x for x in tps if x > 0])
    entries = [(n, *L.reference_costs(workers[n].state)) for n in peers]
    entries.append(("wE", 0, int(1e9 / nominal)))
    got = frozen_burst(d, 16)
    want = L.water_fill(entries, 16)
    t.check("wE" in got, f"wE never chosen: {got}")
    t.check(got == want, f"got  {got}\nwant {want}")

with t.case("SIGHUP with a bad file is rejected and steering goes on"):
    polls_a = d.metric("smg_steer_polls_total", vip=VIP, backend="127.0.0.11:8000", result="ok")
    with open(cfg, "w") as f:
        f.write("services:\n  - vip: 127.0.0.100:8000\n    bakends: [oops\n")
    d.send(signal.SIGHUP)
    L.wait_for(lambda: "reload rejected" in d.log_text() or d.proc.poll() is not None, 30,
               "the bad file rejected")
    t.check(d.proc.poll() is None, "daemon died on a bad reload")
    d.wait_publishes(2, timeout=30)
    got = burst(10)
    t.check(all(g.startswith("w") for g in got), f"steering broke: {got}")
    polls_a2 = L.wait_for(lambda: (backend_metric(d, "smg_steer_polls_total", "wA",
                                                  result="ok") or 0) > polls_a and polls_a, 30,
                          "wA's good polls counted on")
    t.check(polls_a2, "state of an unchanged backend was reset")

with t.case("SIGHUP removes backends, keeping unchanged backends' state"):
    polls_a = d.metric("smg_steer_polls_total", vip=VIP, backend="127.0.0.11:8000", result="ok")
    write_config(cfg, ["wA", "wB", "wC"])
    reloads = d.log_text().count("reloaded ")
    d.send(signal.SIGHUP)
    L.wait_for(lambda: d.log_text().count("reloaded ") > reloads, 30, "the reload applied")
    d.wait_publishes(1, timeout=30)
    got = burst(20)
    t.check("wD" not in got and "wE" not in got, f"a removed backend got connects: {got}")
    t.check(d.metric("smg_steer_backend_healthy", vip=VIP, backend="127.0.0.14:8000") is None,
            "removed backend still exported")
    polls_a2 = L.wait_for(lambda: (backend_metric(d, "smg_steer_polls_total", "wA",
                                                  result="ok") or 0) > polls_a and polls_a, 30,
                          "wA's good polls counted on")
    t.check(polls_a2, "unchanged backend lost its counters")

with t.case("every backend ejected: fail open, publish them all, log each change"):
    for n in ["wA", "wB", "wC"]:
        workers[n].set_state({"mode": "garbage"})
    # --unhealthy-after 3: three failed polls each, then a table of all three;
    # once their last snapshots are older than --snapshot-max-age, they are
    # scored alike (fewest live connections), which spreads the connects.
    def failing_open(s):
        return s["fail_open"] and all(b["rank"] is not None and b["mode"] == "dark"
                                      for b in s["backends"])
    svc = L.wait_for(lambda: (lambda s: s if failing_open(s) else None)(service_status()), 30,
                     "failing open, every backend published and scored without a snapshot")
    ranks = sorted(b["rank"] for b in svc["backends"] if b["rank"] is not None)
    t.check(ranks == [0, 1, 2], f"not every backend published: {svc['backends']}")
    t.check(all(b["health"] == "ejected" for b in svc["backends"]), "health")
    got = burst(12)
    t.check(all(g.startswith("w") for g in got) and len(set(got)) == 3,
            f"fail-open table does not spread: {got}")
    t.check("failing open" in d.log_text(), "no error logged")
    for n in ["wA", "wB", "wC"]:
        workers[n].set_state(STATES.get(n, STATES["wA"]) if n != "wB" else
                             {"mode": "ok", "loads": [L.rank(0, 0.0, 8000.0)]})
    # --healthy-after 2
    L.wait_for(lambda: "no longer failing open" in d.log_text(), 30, "recovery logged")
    t.check(d.log_text().count("failing open: publishing") == 1, "logged more than once")

with t.case("a second daemon on the same pin path refuses to start"):
    d2 = L.Daemon(env, ["--vip", VIP, "--backend", "127.0.0.11:8000,loads=127.0.0.11:30000"],
                  metrics_port=9465)
    d2.start(wait_publish=False)
    try:
        rc = d2.proc.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    t.check(rc == 1, f"second daemon exit code {rc}")
    t.check("already owns" in d2.log_text(), d2.log_text())
    t.check(d.proc.poll() is None, "the first daemon died")

with t.case("SIGTERM exits 0 promptly and removes every pin"):
    rc, took = d.stop(timeout=30)
    t.check(rc == 0, f"exit code {rc}")
    # Well under a second normally (measured 0.1-0.2 s); generous for a loaded
    # machine and LeakSanitizer's check at exit, still far from an interval's wait.
    print(f"# stopped in {took:.2f} s")
    t.check(took < 10.0, f"took {took:.2f} s")
    t.check(not os.path.exists(env.pin), "pins left behind")
    t.check(L.connect_name(VIP) == "DECOY", "programs still attached after detach")

with t.case("--keep-pinned: a restarted daemon adopts without a gap"):
    write_config(cfg, ["wA", "wB", "wC"])
    d3 = L.Daemon(env, ["--config", cfg, "--keep-pinned"])
    d3.start()
    settle(d3)
    stop = threading.Event()
    results = []

    def hammer():
        while not stop.is_set():
            results.append(L.connect_name(VIP))

    th = threading.Thread(target=hammer)
    th.start()
    rc, _ = d3.stop()
    t.check(rc == 0, f"exit {rc}")
    t.check(os.path.exists(os.path.join(env.pin, "steer_gen")), "pins removed despite --keep-pinned")
    time.sleep(0.5)
    # A daemon that cannot start (its metrics port is taken) must leave the
    # adopted data plane alone, even without --keep-pinned.
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 9464))
    blocker.listen(1)
    bad = L.Daemon(env, ["--config", cfg])
    bad.start(wait_publish=False)
    rc_bad = bad.proc.wait(10)
    blocker.close()
    t.check(rc_bad == 1, f"a daemon without its metrics port exited {rc_bad}")
    t.check(os.path.exists(os.path.join(env.pin, "steer_gen")),
            "a failed start removed the adopted pins")
    d4 = L.Daemon(env, ["--config", cfg])
    d4.start()
    d4.wait_publishes(1)
    stop.set()
    th.join()
    bad = [r for r in results if not r.startswith("w")]
    t.check(results and not bad, f"{len(bad)} of {len(results)} connects failed across the handover: {bad[:5]}")
    rc, _ = d4.stop()
    t.check(rc == 0 and not os.path.exists(env.pin), "final stop")

with t.case("invalid flags exit 2 with a message naming the flag"):
    cases = [
        (["--least-load-default-throughput", "0"], "--least-load-default-throughput"),
        (["--least-load-kv-pressure-weight", "nan"], "--least-load-kv-pressure-weight"),
        (["--load-check-interval", "0s"], "--load-check-interval"),
        (["--backend", "127.0.0.11:8000", "--backend", "127.0.0.11:8000"], "listed twice"),
    ]
    for extra, needle in cases:
        argv = [os.path.join(L.BUILD, "smg-steerd"), "--vip", VIP] + \
            (extra if extra[0] == "--backend" else ["--backend", "127.0.0.11:8000"] + extra)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        t.check(p.returncode == 2, f"{extra}: exit {p.returncode}")
        t.check(needle in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                f"{extra}: {p.stderr!r}")

decoy.close()
env.cleanup()
t.done()
