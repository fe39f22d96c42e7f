#!/usr/bin/python3
"""Cache affinity's options, status and metrics, with real connects.

Two fake SGLang workers behind one VIP, smg-steerd configured from a file
that each case rewrites and reloads (SIGHUP). Asserted:

- off (the default): status has no affinity line, its JSON says "off" with
  zeros, /metrics has every verdict at 0;
- a reload turns --affinity cgroup on: the table carries the mode, slack and
  timeout as configured (status text and JSON), connects of this process
  (one cgroup, one client) stay on their backend within the slack, and
  every connect is counted once by verdict, alike in status and /metrics;
- a slack of 0 moves the client as soon as the other backend's wait is less;
- sockopt: only a socket with the application's key is counted;
- a reload back to off publishes 0 for all three;
- bad values exit 2 naming the option.
"""
import json
import os
import signal
import subprocess

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
# One connect's credit: 200 tokens at 2,000 tokens/s, 100 ms of expected wait.
PREFILL = 200
TP = 2000.0
VERDICTS = ("new", "stay", "left_slack", "left_gone", "left_overload")
t = Tap()
env = L.Env("affopts")


def idle():
    return {"mode": "ok", "loads": [L.rank(0, 0.1, TP)]}


wA = L.Worker(env, "wA", "127.0.0.61:8000", "127.0.0.61:30000", idle()).start()
wB = L.Worker(env, "wB", "127.0.0.62:8000", "127.0.0.62:30000", idle()).start()
cfg = os.path.join(env.tmp, "steer.yaml")


def write_config(**over):
    """The file: both workers, and the service keys given (name=value)."""
    # A long interval: the connects' credit is not drained between them.
    text = ("load-check-interval: 5s\nlog-level: debug\n"
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


def reload(**over):
    """Rewrite the file, SIGHUP, and wait for a publish made after the reload
    applied (one taken before it may carry the old settings)."""
    seen = d.log_text().count("reloaded ")
    write_config(**over)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: d.log_text().count("reloaded ") > seen, 30, "the reload applied")
    start = d.publishes()
    L.wait_for(lambda: d.publishes() > start, 30, "a publish after the reload")


def ctl(*args):
    return subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin,
                           *args], capture_output=True, text=True).stdout


def status_json():
    return json.loads(ctl("-o", "json", "status"))["services"][0]


def counts():
    a = status_json()["affinity"]
    return {v: a[v] for v in VERDICTS}


def delta(before, after):
    return {v: after[v] - before[v] for v in VERDICTS}


def connect_key(key=None):
    """Connect with the application's key (or none), read the worker's name."""
    return L.connect_name(VIP, affinity_key=key)


def metric_counts():
    return {v: d.metric("smg_steer_affinity_connections_total", vip=VIP, verdict=v)
            for v in VERDICTS}


write_config()
env.enter_cgroup()
d = L.Daemon(env, ["--config", cfg]).start()

try:
    L.wait_for(lambda: d.publishes() > 0, 30, "a first publish")

    with t.case("off: no status line, 'off' in JSON, every verdict at 0 on /metrics"):
        text = ctl("status")
        t.check("affinity:" not in text, text)
        a = status_json()["affinity"]
        t.check(a == {"mode": "off", "slack_ns": 0, "timeout_ns": 0,
                      **{v: 0 for v in VERDICTS}}, f"{a}")
        t.check(metric_counts() == {v: 0 for v in VERDICTS}, f"{metric_counts()}")

    with t.case("reload to cgroup: the table's mode, slack and timeout; the client stays"):
        reload(affinity="cgroup", affinity_slack="2s", affinity_timeout="90s")
        a = status_json()["affinity"]
        t.check(a["mode"] == "cgroup" and a["slack_ns"] == 2 * 10**9 and
                a["timeout_ns"] == 90 * 10**9, f"{a}")
        before = counts()
        got = [L.connect_name(VIP) for _ in range(10)]
        dc = delta(before, counts())
        t.check(sum(dc.values()) == 10, f"each connect counted once: {dc}")
        t.check(dc["stay"] >= 8 and len(set(got)) == 1, f"{dc}, {got}")
        line = [ln for ln in ctl("status").splitlines() if "affinity:" in ln]
        t.check(len(line) == 1 and
                line[0].startswith("  affinity: cgroup, slack 2s, timeout 90s; stayed ") and
                len(line[0]) <= 120, f"{line}")
        after = counts()
        L.wait_for(lambda: metric_counts() == after, 30, "/metrics as status")

    with t.case("a slack of 0: the client leaves as soon as the other's wait is less"):
        reload(affinity="cgroup", affinity_slack="0")
        t.check(status_json()["affinity"]["slack_ns"] == 0, f"{status_json()['affinity']}")
        # Each connect adds 100 ms to its backend: within 25 the client's
        # backend passes the other's wait (at most 1 s of the case above).
        before = counts()
        got = [L.connect_name(VIP) for _ in range(25)]
        dc = delta(before, counts())
        t.check(sum(dc.values()) == 25 and dc["left_slack"] >= 2, f"{dc}, {got}")
        t.check(len(set(got)) == 2, f"{got}")

    with t.case("sockopt: only a socket with the application's key is counted"):
        reload(affinity="sockopt")
        t.check(status_json()["affinity"]["mode"] == "sockopt", "mode")
        before = counts()
        for _ in range(3):
            connect_key(None)
        t.check(sum(delta(before, counts()).values()) == 0, f"{delta(before, counts())}")
        got = [connect_key(0x1234) for _ in range(4)]
        dc = delta(before, counts())
        t.check(sum(dc.values()) == 4 and dc["new"] == 1 and dc["stay"] == 3, f"{dc}, {got}")

    with t.case("reload to off: 0 published for all three, the counters kept"):
        kept = counts()
        reload()
        a = status_json()["affinity"]
        t.check(a["mode"] == "off" and a["slack_ns"] == 0 and a["timeout_ns"] == 0, f"{a}")
        t.check(counts() == kept, f"{counts()} != {kept}")
        t.check("affinity:" not in ctl("status"), "a status line while off")

    with t.case("bad values exit 2 naming the option"):
        steerd = os.path.join(L.BUILD, "smg-steerd")
        for flag, value in (("--affinity", "pod"), ("--affinity", "source"),
                            ("--affinity-slack", "2h"), ("--affinity-timeout", "500ms"),
                            ("--affinity-timeout", "25h")):
            r = subprocess.run([steerd, "--check-config", "--vip", VIP, "--backend",
                                wA.traffic, flag, value], capture_output=True, text=True)
            t.check(r.returncode == 2 and flag in r.stderr,
                    f"{flag} {value}: rc {r.returncode}, {r.stderr.strip()}")
        r = subprocess.run([steerd, "--check-config", "--vip", VIP, "--backend", wA.traffic,
                            "--affinity", "netns", "--affinity-slack", "0s",
                            "--affinity-timeout", "24h"], capture_output=True, text=True)
        t.check(r.returncode == 0, f"good values: rc {r.returncode}, {r.stderr.strip()}")
finally:
    env.cleanup()
t.done()
