#!/usr/bin/python3
"""End to end: smg-steerd reads load from every source upstream smg
reads. The real daemon, fake engines built from the upstream wire formats
(tests/lib/fake_engines.py, self-tested by tests/integration/test_fakes.py), real steered
connects from a throwaway cgroup, all in a private network namespace.

Five services in one daemon:
  A  six kinds, auto-detected: SGLang, vLLM, TokenSpeed gRPC; HTTP /v1/loads;
     vLLM and SGLang /metrics. Scores and the distribution of 40 connects.
  B  explicit loads=grpc://, loads=http://.../metrics, engine=, the old
     loads=ADDR:PORT, the YAML mapping form, SGLang HTTP (prefers /v1/loads).
  C  a plain HTTP worker without any load endpoint: "tcp", steered, kept;
     ejected once killed.
  D  bad answers: failed polls, never an idle worker, nothing crashes.
  E  auth=bearer:FILE: HTTP and gRPC, a wrong token, SIGHUP re-reads the file,
     the token never in the log.
"""
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.request

import e2e_lib as L
import engines_lib as E
from taplib import CheckFailed, Tap

L.enter_private_netns()

INTERVAL = "1s"
TIMEOUT = "500ms"
UNHEALTHY_AFTER = 3
HEALTHY_AFTER = 2
PREFILL = 1024
BOUND_S = 40  # generous bound on every condition waited for
# All waits together stay within tests/run.sh's 300 s, so that a daemon that
# fails every wait still yields a complete TAP plan.
BUDGET_END = time.monotonic() + 250
CTL = os.path.join(L.BUILD, "smg-steerctl")
NOT_FAILED = ("ok", "unimplemented")  # every other poll result is a failed poll

t = Tap()
env = L.Env("sources")
R = E.rank
TOKEN1 = "tok1-" + secrets.token_hex(16)
TOKEN2 = "tok2-" + secrets.token_hex(16)
TOKEN_FILE = os.path.join(env.tmp, "worker-api-key")


def st(*ranks, **kw):
    return dict({"mode": "ok", "loads": list(ranks)}, **kw)


class B:
    """A backend under test: its fake engine, its config entry, the source
    the daemon must report for it. `keys` follow the address in the entry
    ({a} is the address); a dict is the YAML mapping form."""

    def __init__(self, name, kind, octet, keys="", state=None, **kw):
        self.addr = f"127.0.0.{octet}:8000"
        self.engine = E.Engine(env, name, kind, self.addr, state, **kw)
        self.name = name
        self.kind = kind
        if isinstance(keys, dict):
            self.entry = {k: v.format(a=self.addr) for k, v in keys.items()}
        else:
            self.entry = ",".join([self.addr] + ([keys.format(a=self.addr)] if keys else []))
        self.source = E.SOURCE[kind]

    def expected(self):
        return self.engine.expected(prefill=PREFILL)


AUTH_KEY = "auth=bearer:" + TOKEN_FILE
VIP_A, VIP_B, VIP_C, VIP_D, VIP_E = (f"127.0.0.{i}:8000" for i in range(100, 105))
SERVICES = {
    VIP_A: [  # no loads=: auto-detection on the traffic port
        B("sg", "sglang-grpc", 11, state=st(R(0, 1500, 2, 0.20, 1000.0),
                                            R(1, 2500, 3, 0.30, 1000.0))),
        B("vl", "vllm-grpc", 12, state=st(R(0, 0, 1, 0.10, 0.0), R(1, 0, 2, 0.20, 0.0))),
        B("ts", "tokenspeed-grpc", 13, state=st(R(0, 1000, 1, 0.50, 1500.0),
                                                R(1, 1000, 1, 0.10, 1500.0))),
        B("hl", "http-loads", 14, state=st(R(0, 500, 1, 0.40, 800.0),
                                           R(1, 700, 2, 0.20, 1200.0))),
        # The state's queued tokens and throughput are not in vLLM's or
        # SGLang's /metrics: the fakes must not leak them, the daemon must
        # degrade (waiting x prefill; vLLM: the default throughput).
        B("vm", "vllm-metrics", 15, state=st(R(0, 9999, 0, 0.05, 777.0),
                                             R(1, 9999, 1, 0.15, 777.0))),
        B("sm", "sglang-metrics", 16, variant="sglang_",
          state=st(R(0, 9999, 1, 0.60, 2500.0), R(1, 9999, 1, 0.40, 1500.0))),
    ],
    VIP_B: [  # explicit sources
        B("b_old", "sglang-grpc", 21, "loads=127.0.0.21:30000",
          st(R(0, 800, 1, 0.30, 900.0), R(1, 400, 1, 0.10, 1100.0)), grpc="127.0.0.21:30000"),
        B("b_vl", "vllm-grpc", 22, "loads=grpc://{a},engine=vllm",
          st(R(0, 0, 2, 0.35, 0.0), R(1, 0, 0, 0.25, 0.0))),
        B("b_ts", "tokenspeed-grpc", 23, "engine=tokenspeed",
          st(R(0, 3000, 2, 0.70, 2500.0), R(1, 100, 0, 0.10, 2500.0))),
        B("b_v0", "vllm-metrics", 24, "loads=http://{a}/metrics",
          st(R(0, 0, 2, 0.45, 0.0), R(1, 0, 1, 0.17, 0.0)), variant="v0"),
        B("b_sc", "sglang-metrics", 25, "loads=http://{a}/metrics,engine=sglang",
          st(R(0, 0, 3, 0.20, 1000.0), R(1, 0, 0, 0.30, 3000.0)), variant="sglang:"),
        B("b_np", "vllm-metrics", 26, "loads=http://{a}",  # no path: /v1/loads, then /metrics
          st(R(0, 0, 1, 0.05, 0.0), R(1, 0, 1, 0.05, 0.0))),
        B("b_sh", "sglang-http", 27, "",  # auto: /v1/loads preferred to /metrics
          st(R(0, 2200, 2, 0.40, 1800.0), R(1, 1800, 1, 0.20, 2200.0))),
        B("b_map", "http-loads", 28,
          {"address": "{a}", "loads": "http://{a}/v1/loads?include=core", "engine": "sglang"},
          st(R(0, 600, 1, 0.15, 3000.0), R(1, 600, 1, 0.15, 1000.0))),
    ],
    VIP_C: [  # a plain HTTP worker and one peer that reports
        B("pl", "plain", 31, state=st(R(0))),
        B("c_peer", "sglang-grpc", 32, state=st(R(0, 3000, 1, 0.20, 1000.0),
                                                R(1, 1000, 1, 0.20, 1000.0))),
    ],
    VIP_D: [  # bad answers, each on an explicitly configured source
        B("d_trunc", "http-loads", 41, "loads=http://{a}/v1/loads?include=core"),
        B("d_nan", "vllm-metrics", 42, "loads=http://{a}/metrics,engine=vllm"),
        B("d_500", "http-loads", 43, "loads=http://{a}/v1/loads"),
        B("d_401", "sglang-metrics", 44, "loads=http://{a}/metrics,engine=sglang",
          variant="sglang_"),
        B("d_slow", "http-loads", 45, "loads=http://{a}/v1/loads"),
        B("d_h1", "sglang-grpc", 46, "loads=grpc://{a},engine=sglang"),
        B("d_h2", "vllm-metrics", 47, "loads=http://{a}/metrics"),
        B("d_tst", "tokenspeed-grpc", 48, "loads=grpc://{a},engine=tokenspeed"),
        B("d_vnan", "vllm-grpc", 49, "loads=grpc://{a},engine=vllm"),
        B("d_nokv", "vllm-metrics", 50, "loads=http://{a}/metrics"),
        B("d_big", "sglang-grpc", 52, "loads=grpc://{a},engine=sglang"),
        B("d_good", "sglang-grpc", 51, state=st(R(0, 100, 1, 0.05, 4000.0))),
    ],
    VIP_E: [  # auth=bearer:FILE, explicit and auto-detected
        B("a_http", "http-loads", 61, "loads=http://{a}/v1/loads," + AUTH_KEY,
          st(R(0, 1000, 1, 0.30, 2000.0), token=TOKEN1)),
        B("a_grpc", "sglang-grpc", 62, "loads=grpc://{a},engine=sglang," + AUTH_KEY,
          st(R(0, 1000, 1, 0.30, 2000.0), token=TOKEN1)),
        B("a_auto", "vllm-metrics", 63, AUTH_KEY, st(R(0, 0, 1, 0.30, 0.0), token=TOKEN1)),
        B("a_vgrpc", "vllm-grpc", 64, AUTH_KEY, st(R(0, 0, 1, 0.30, 0.0), token=TOKEN1)),
    ],
}
# Bad modes of service D, and the poll result each must be counted as where
# it is unambiguous (None: any failed result).
BAD = {"d_trunc": ("truncated", "invalid"), "d_nan": ("nan_kv", "invalid"),
       "d_500": ("http_500", None), "d_401": ("http_401", None),
       "d_slow": ("slow_body", "deadline_exceeded"), "d_h1": ("http_on_grpc", None),
       "d_h2": ("grpc_on_http", None), "d_tst": ("truncated", "invalid"),
       "d_vnan": ("nan_kv", "invalid"), "d_nokv": ("no_kv", "invalid"),
       "d_big": ("oversized", None)}
BUSY = st(R(0, 2000, 2, 0.40, 1000.0), R(1, 3000, 2, 0.60, 1000.0))
for b in SERVICES[VIP_D]:
    if b.name in BAD:
        b.engine.set_state(BUSY)
BK = {b.name: b for bs in SERVICES.values() for b in bs}


def yaml_entry(entry):
    if isinstance(entry, str):
        return [f'      - "{entry}"']
    lines = []
    for i, (k, v) in enumerate(entry.items()):
        lines.append(f'      {"- " if i == 0 else "  "}{k}: "{v}"')
    return lines


def write_config(path):
    lines = [f"load-check-interval: {INTERVAL}", f"load-timeout: {TIMEOUT}",
             f"unhealthy-after: {UNHEALTHY_AFTER}", f"healthy-after: {HEALTHY_AFTER}",
             "log-level: debug", "services:"]
    for vip, bs in SERVICES.items():
        lines += [f"  - vip: {vip}", "    backends:"]
        for b in bs:
            lines += yaml_entry(b.entry)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- the daemon, seen through smg-steerctl and /metrics ----------------------------------

d = None


def alive():
    if d.proc.poll() is not None:
        raise CheckFailed(f"smg-steerd exited with {d.proc.returncode}; log tail:\n"
                          + d.log_text()[-3000:])


class CtlError(CheckFailed):
    """smg-steerctl failed: also while the daemon has not published yet."""


def ctl_json(*args):
    p = subprocess.run([CTL, "--pin-path", env.pin, "-o", "json", *args], capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0:
        raise CtlError(f"smg-steerctl {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def explain(vip):
    alive()
    return ctl_json("explain", vip)


def by_addr(ex):
    return {b["address"]: b for b in ex["backends"]}


def describe(ex, names=None):
    rows = []
    for b in ex["backends"]:
        if names and b["address"] not in names:
            continue
        rows.append(f"  {b['address']}: source={b.get('source', '<no source key>')} "
                    f"health={b['health']} mode={b['mode']} last_poll={b['last_poll']} "
                    f"queued={b.get('queued_tokens')} est={b.get('queued_estimated')} "
                    f"tput={b.get('throughput_tokens_per_s')} kv_ppm={b.get('kv_ppm')} "
                    f"base_ns={b.get('base_wait_ns')} inflight={b.get('inflight_tokens')}")
    return "\n".join(rows)


def wait_until(what, probe, timeout=BOUND_S):
    """probe() -> (done, detail). Wait for done, or fail naming what and the
    last detail."""
    deadline = min(time.monotonic() + timeout, BUDGET_END)
    detail = ""
    while time.monotonic() < deadline:
        alive()
        try:
            done, detail = probe()
        except CtlError as e:  # not published yet: wait on
            done, detail = False, str(e)
        if done:
            return detail
        time.sleep(0.1)
    spent = " (the test's time budget is used up)" if time.monotonic() >= BUDGET_END else ""
    raise CheckFailed(f"not within {timeout} s{spent}: {what}\n{detail}")


def metrics():
    alive()
    return d.metrics()


def backend_samples(m, name, vip, addr):
    """[(labels, value)] of a family's samples for one backend (whatever
    other labels, such as a source, they carry)."""
    return [(dict(labels), v) for (n, labels), v in m.items()
            if n == name and dict(labels).get("vip") == vip and dict(labels).get("backend") == addr]


def polls(m, vip, addr):
    """{result: count} of smg_steer_polls_total for one backend."""
    out = {}
    for lab, v in backend_samples(m, "smg_steer_polls_total", vip, addr):
        out[lab.get("result")] = out.get(lab.get("result"), 0) + v
    return out


def failed(p):
    return sum(v for k, v in p.items() if k not in NOT_FAILED)


def metric(m, name, vip, addr):
    """The one sample of a per-backend gauge, or None."""
    found = backend_samples(m, name, vip, addr)
    return found[0][1] if len(found) == 1 else None


def metric_sources(m, vip, addr):
    """Every 'source' label value of a sample labelled with this backend."""
    out = set()
    for (_, labels), _ in m.items():
        lab = dict(labels)
        if lab.get("vip") == vip and lab.get("backend") == addr and "source" in lab:
            out.add(lab["source"])
    return out


def wait_sources(vip):
    """Until every backend of the service reports its expected source and is
    healthy (with a snapshot, unless it is 'tcp')."""
    want = {b.addr: b for b in SERVICES[vip]}

    def probe():
        ex = explain(vip)
        got = by_addr(ex)
        bad = [a for a, b in want.items() if a not in got
               or got[a].get("source") != b.source or got[a]["health"] != "healthy"
               or (b.source != "tcp" and got[a]["mode"] != "snapshot")]
        wrong = "\n".join(f"  {a}: want source {want[a].source}"
                          + ("" if a in got else " (not listed)") for a in bad)
        return not bad, f"{describe(ex, bad)}\n{wrong}"
    return wait_until(f"every backend of {vip} healthy on its source", probe)


def check_scored(vip):
    """explain's terms and /metrics equal what the fakes serve, by upstream's
    aggregation (engines_lib.expected_load)."""
    ex = explain(vip)
    got = by_addr(ex)
    m = metrics()
    missing = [b.addr for b in SERVICES[vip] if b.addr not in got]
    if missing:
        return [f"explain {vip} lists no {missing}:\n{json.dumps(ex, indent=1)}"], ""
    errors = []
    for b in SERVICES[vip]:
        e, x = b.expected(), got[b.addr]

        def err(msg):
            errors.append(f"{b.name} ({b.kind}, {b.addr}): {msg}")
        if x.get("source") != b.source:
            err(f"source {x.get('source')!r}, want {b.source!r}")
        if x["mode"] != "snapshot":
            err(f"mode {x['mode']}, want snapshot (last poll {x['last_poll']})")
            continue
        if x["queued_tokens"] != int(e["queued"]) or x["queued_estimated"] != e["estimated"]:
            err(f"queued {x['queued_tokens']} (estimated {x['queued_estimated']}), want "
                f"{int(e['queued'])} (estimated {e['estimated']})")
        if abs(x["throughput_tokens_per_s"] - e["throughput"]) > 0.0011:
            err(f"throughput {x['throughput_tokens_per_s']}, want {e['throughput']}")
        if abs(x["kv_ppm"] - e["kv"] * 1e6) > 1.0:
            err(f"kv_ppm {x['kv_ppm']}, want {e['kv'] * 1e6:.1f}")
        if abs(x["base_wait_ns"] - e["base_ns"]) > 1 or x["ns_per_token"] != e["ns_per_token"]:
            err(f"published base {x['base_wait_ns']} ns, {x['ns_per_token']} ns/token; want "
                f"{e['base_ns']}, {e['ns_per_token']}")
        if b.kind in ("sglang-grpc", "vllm-grpc", "tokenspeed-grpc", "http-loads",
                      "sglang-http") and x["dp_ranks"] != e["ranks"]:
            err(f"dp_ranks {x['dp_ranks']}, want {e['ranks']}")
        mq = metric(m, "smg_steer_backend_queued_tokens", vip, b.addr)
        mt = metric(m, "smg_steer_backend_throughput_tokens_per_second", vip, b.addr)
        mk = metric(m, "smg_steer_backend_kv_usage_ratio", vip, b.addr)
        if mq != e["queued"] or mt != e["throughput"] or mk is None or abs(mk - e["kv"]) > 1e-9:
            err(f"/metrics queued {mq} tput {mt} kv {mk}; want {e['queued']} "
                f"{e['throughput']} {e['kv']}")
    return errors, describe(ex)


# ---- steered connects -----------------------------------------------------------------

def next_publish(vip, after):
    """The explain JSON of the first table generation after `after`."""
    out = {}

    def probe():
        ex = explain(vip)
        out["ex"] = ex
        return ex.get("generation", 0) > after, f"generation {ex.get('generation')}"
    wait_until(f"a publish of {vip} after generation {after}", probe)
    return out["ex"]


def burst(vip, n, tries=3):
    """n sequential connects to the VIP, all within one published table and
    starting with no credit in flight (two publishes after the last
    connects), so the independent water-fill predicts every pick. A burst
    that a publish cut into is repeated."""
    why = ""
    for _ in range(tries):
        ex = explain(vip)
        ex = next_publish(vip, ex.get("generation", 0))
        ex = next_publish(vip, ex["generation"])
        inflight = {b["address"]: b["inflight_tokens"] for b in ex["backends"]
                    if b["inflight_tokens"]}
        got = [E.whoami(vip) for _ in range(n)]
        gen = explain(vip).get("generation")
        if gen == ex["generation"] and not inflight:
            return got
        why = f"generation {ex['generation']} -> {gen}, in flight at the start {inflight}"
    raise CheckFailed(f"{tries} bursts of {n} connects could not run within one table: {why}")


def reference(vip, n, live_scored=()):
    """The water-fill over the service's backends in configuration order;
    live_scored names backends without loads (scored from live connections,
    none open, at the fleet's nominal throughput)."""
    bs = SERVICES[vip]
    exp = {b.name: b.expected() for b in bs if b.name not in live_scored}
    nominal = E.nominal_throughput(exp.values())
    entries = []
    for b in bs:
        if b.name in live_scored:
            entries.append((b.name, *E.live_scored(0, nominal, PREFILL)))
        else:
            entries.append((b.name, exp[b.name]["base_ns"], exp[b.name]["ns_per_token"]))
    # Each connect's credit is its request's real size (engines_lib.WHOAMI_TOKENS).
    return L.water_fill(entries, n, credit=E.WHOAMI_TOKENS)


# ---- start -----------------------------------------------------------------------------

with open(TOKEN_FILE, "w") as f:
    f.write(TOKEN1 + "\n")
E.start_all([b.engine for b in BK.values()])
env.enter_cgroup()
cfg = os.path.join(env.tmp, "steer.yaml")
write_config(cfg)
d = L.Daemon(env, ["--config", cfg])
d.start(wait_publish=False)

with t.case("auto-detection: each of six kinds gets its source (no loads=)"):
    wait_sources(VIP_A)

with t.case("six kinds in one service: explain and /metrics report what was served"):
    errors, table = check_scored(VIP_A)
    t.check(not errors, "\n".join(errors) + "\n" + table)

with t.case("six kinds in one service: 40 connections follow the scores"):
    got = burst(VIP_A, 40)
    want = reference(VIP_A, 40)
    t.check(got == want, f"got  {got}\nwant {want}")

with t.case("loads changed live are read again from every source"):
    NEW = {"sg": st(R(0, 100, 0, 0.85, 500.0), R(1, 300, 4, 0.65, 700.0)),
           "vl": st(R(0, 0, 5, 0.70, 0.0), R(1, 0, 0, 0.60, 0.0)),
           "ts": st(R(0, 50, 0, 0.05, 900.0), R(1, 70, 3, 0.15, 300.0)),
           "hl": st(R(0, 9000, 6, 0.90, 100.0), R(1, 1, 0, 0.10, 100.0)),
           "vm": st(R(0, 0, 3, 0.33, 0.0), R(1, 0, 3, 0.55, 0.0)),
           "sm": st(R(0, 0, 0, 0.01, 50.0), R(1, 0, 2, 0.03, 60.0))}
    for name, state in NEW.items():
        BK[name].engine.set_state(state)

    def follows():
        errors, table = check_scored(VIP_A)
        return not errors, "\n".join(errors) + "\n" + table
    wait_until("service A scored from the new loads", follows)

with t.case("explicit loads=grpc://, loads=http://.../metrics, engine=, old loads=ADDR:PORT"):
    wait_sources(VIP_B)
    errors, table = check_scored(VIP_B)
    t.check(not errors, "\n".join(errors) + "\n" + table)
    got = burst(VIP_B, 40)
    want = reference(VIP_B, 40)
    t.check(got == want, f"got  {got}\nwant {want}")

with t.case("/metrics labels each backend with its source"):
    m = metrics()
    errors = []
    for vip in (VIP_A, VIP_B):
        for b in SERVICES[vip]:
            found = metric_sources(m, vip, b.addr)
            if found != {b.source}:
                errors.append(f"{b.addr}: source labels {sorted(found) or 'none'}, want "
                              f"{b.source!r}")
    t.check(not errors, "\n".join(errors))

with t.case("SGLang over HTTP: /v1/loads is preferred, /metrics is not polled"):
    sh = BK["b_sh"].engine
    loads0, metrics0 = sh.stat("GET /v1/loads"), sh.stat("GET /metrics")
    wait_until("three more /v1/loads polls of the SGLang HTTP worker",
               lambda: (sh.stat("GET /v1/loads") >= loads0 + 3, str(sh.stats())))
    t.check(sh.stat("GET /metrics") == metrics0,
            f"/metrics polled although /v1/loads answers: {sh.stats()}")

with t.case("a plain HTTP worker without load endpoints: source tcp, steered, never ejected"):
    wait_sources(VIP_C)

    def warnings():
        return [ln for ln in d.log_text().splitlines()
                if " warn: " in ln and BK["pl"].addr in ln]
    warned = warnings()
    ex = explain(VIP_C)
    gen = ex["generation"]
    for _ in range(2 * UNHEALTHY_AFTER + 1):  # each publish would have ejected it
        ex = next_publish(VIP_C, gen)
        gen = ex["generation"]
        pl = by_addr(ex)[BK["pl"].addr]
        t.check(pl["health"] == "healthy" and pl.get("source") == "tcp" and pl["rank"] is not None,
                f"the plain worker left the table:\n{describe(ex)}")
    t.check(BK["pl"].engine.stat("whoami") == 0, "connects reached it before the burst")
    got = burst(VIP_C, 12)
    want = reference(VIP_C, 12, live_scored=("pl",))
    t.check("pl" in got, f"the plain worker got no connection: {got}")
    t.check(got == want, f"got  {got}\nwant {want}")
    t.check(warned, "no warning names the worker without a load endpoint")
    t.check(warnings() == warned, f"the warning is repeated: {warnings()[len(warned):][:3]}")

with t.case("a killed plain worker is ejected and gets nothing"):
    BK["pl"].engine.kill()

    def ejected():
        ex = explain(VIP_C)
        return by_addr(ex)[BK["pl"].addr]["health"] == "ejected", describe(ex)
    wait_until("the killed plain worker ejected", ejected)
    got = [E.whoami(VIP_C) for _ in range(10)]
    t.check(got == ["c_peer"] * 10, f"connects after the ejection: {got}")

# ---- D: bad answers --------------------------------------------------------------------

with t.case("bad answers: every backend first healthy on its explicit source"):
    wait_sources(VIP_D)
    errors, table = check_scored(VIP_D)
    t.check(not errors, "\n".join(errors) + "\n" + table)


def bad_phase():
    """Turn every bad backend bad at once and watch them until each is
    ejected with at least --unhealthy-after failed polls. Returns the poll
    counters before, and per backend what was seen: any sample where it was
    scored from a snapshot other than what it served before turning bad (an
    "idle" or partial reading of a bad answer), its polls and its health."""
    m = metrics()
    before = {n: polls(m, VIP_D, BK[n].addr) for n in BAD}
    busy = {n: BK[n].expected() for n in BAD}
    seen = {n: {"idle": [], "ejected": False, "polls": {}} for n in BAD}
    for n, (mode, _) in BAD.items():
        BK[n].engine.update(mode=mode, hang_seconds=5)
    deadline = min(time.monotonic() + BOUND_S, BUDGET_END)
    while time.monotonic() < deadline:
        ex, m = by_addr(explain(VIP_D)), metrics()
        for n, w in seen.items():
            x, e = ex[BK[n].addr], busy[n]
            w["polls"] = polls(m, VIP_D, BK[n].addr)
            w["health"], w["last_poll"] = x["health"], x["last_poll"]
            if x["mode"] == "snapshot" and (x["queued_tokens"] != int(e["queued"])
                                            or abs(x["kv_ppm"] - e["kv"] * 1e6) > 1):
                w["idle"].append(f"queued {x['queued_tokens']} kv_ppm {x['kv_ppm']}")
            w["ejected"] |= x["health"] == "ejected"
        if all(w["ejected"] and failed(w["polls"]) - failed(before[n]) >= UNHEALTHY_AFTER
               for n, w in seen.items()):
            break
        time.sleep(0.2)
    return before, seen


try:
    bad_before, bad_seen, bad_error = *bad_phase(), None
except (CheckFailed, OSError) as e:
    bad_before, bad_seen, bad_error = {}, {}, str(e)

for name, (mode, result) in BAD.items():
    with t.case(f"bad answer {mode} ({BK[name].kind}): failed polls, never idle, ejected"):
        t.check(not bad_error, f"the bad phase stopped: {bad_error}")
        w, b0 = bad_seen[name], bad_before[name]
        p = w["polls"]
        grew = failed(p) - failed(b0)
        t.check(grew >= UNHEALTHY_AFTER, f"{grew} failed polls counted: {p} (before {b0}); "
                f"last poll {w.get('last_poll')}")
        # One good poll may have been in flight at the switch.
        t.check(p.get("ok", 0) <= b0.get("ok", 0) + 1,
                f"bad answers counted as good polls: {p} (before {b0})")
        t.check(not w["idle"], f"scored from the bad answer: {w['idle'][:3]}")
        if result:
            t.check(p.get(result, 0) - b0.get(result, 0) >= UNHEALTHY_AFTER,
                    f"want {result} polls: {p} (before {b0})")
        t.check(w["ejected"], f"never ejected: health {w.get('health')}")

with t.case("bad answers: the good peer takes every connect, nothing crashed"):
    alive()
    got = [E.whoami(VIP_D) for _ in range(10)]
    t.check(got == ["d_good"] * 10, f"connects while the others are ejected: {got}")
    stats = BK["d_slow"].engine.stats()
    t.check(stats.get("GET /v1/loads", 0) >= UNHEALTHY_AFTER, f"slow body never asked: {stats}")

with t.case("bad answers: every backend is readmitted once it answers well again"):
    for name in BAD:
        BK[name].engine.update(mode="ok")
    wait_sources(VIP_D)
    errors, table = check_scored(VIP_D)
    t.check(not errors, "\n".join(errors) + "\n" + table)

# ---- E: auth=bearer:FILE ---------------------------------------------------------------

AUTH = SERVICES[VIP_E]

with t.case("auth=bearer:FILE: the token reaches the HTTP and gRPC engines"):
    wait_sources(VIP_E)
    errors, table = check_scored(VIP_E)
    t.check(not errors, "\n".join(errors) + "\n" + table)
    for b in AUTH:
        s = b.engine.stats()
        t.check(s.get("auth_ok", 0) >= 2 and s.get("auth_bad", 0) == 0,
                f"{b.name}: {s}")

with t.case("auth: a wrong token: failed polls, ejected, no fallback to tcp"):
    m = metrics()
    before = {b.name: polls(m, VIP_E, b.addr) for b in AUTH}
    sources = {b.name: set() for b in AUTH}
    for b in AUTH:
        b.engine.update(token=TOKEN2)

    def all_failing():
        # Twice --unhealthy-after: an auto-detected backend has been probed
        # again in between, and the probe must fail on the 401 as well
        # rather than settle for a TCP connect.
        m, ex = metrics(), by_addr(explain(VIP_E))
        rows, done = [], True
        for b in AUTH:
            p = polls(m, VIP_E, b.addr)
            sources[b.name].add(ex[b.addr].get("source"))
            done &= failed(p) - failed(before[b.name]) >= 2 * UNHEALTHY_AFTER
            done &= ex[b.addr]["health"] == "ejected"
            rows.append(f"  {b.name}: {p} (before {before[b.name]}), health "
                        f"{ex[b.addr]['health']}, engine {b.engine.stats()}")
        return done, "\n".join(rows)
    wait_until("every backend with the wrong token failing and ejected", all_failing)
    m = metrics()
    for b in AUTH:
        p, b0 = polls(m, VIP_E, b.addr), before[b.name]
        t.check(p.get("ok", 0) <= b0.get("ok", 0) + 1 and
                p.get("unimplemented", 0) == b0.get("unimplemented", 0),
                f"{b.name}: polls with a wrong token that did not fail: {p} (before {b0})")
        t.check("tcp" not in sources[b.name], f"{b.name} fell back to tcp: {sources[b.name]}")
        t.check(b.engine.stat("auth_bad") >= UNHEALTHY_AFTER, f"{b.name}: {b.engine.stats()}")

with t.case("auth: SIGHUP reads the token file again"):
    with open(TOKEN_FILE + ".tmp", "w") as f:
        f.write(TOKEN2 + "\n")
    os.rename(TOKEN_FILE + ".tmp", TOKEN_FILE)
    d.send(signal.SIGHUP)
    wait_sources(VIP_E)
    errors, table = check_scored(VIP_E)
    t.check(not errors, "\n".join(errors) + "\n" + table)

with t.case("auth: the token is never in the log, /metrics or smg-steerctl's output"):
    alive()
    outputs = {"daemon log": d.log_text()}
    with urllib.request.urlopen(
            f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5) as r:
        outputs["/metrics"] = r.read().decode()
    for args in (["status"], ["explain", VIP_E]):
        for fmt in ("json", "text"):
            p = subprocess.run([CTL, "--pin-path", env.pin, "-o", fmt, *args],
                               capture_output=True, text=True, timeout=30)
            outputs[f"smg-steerctl -o {fmt} {' '.join(args)}"] = p.stdout + p.stderr
    for what, text in outputs.items():
        for token in (TOKEN1, TOKEN2):
            t.check(token not in text, f"a token appears in the {what}")

with t.case("nothing crashed: the daemon exits 0 on SIGTERM, no sanitizer report"):
    alive()
    rc, _ = d.stop()
    log = d.log_text()
    t.check(rc == 0, f"exit code {rc}:\n{log[-3000:]}")
    for needle in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        t.check(needle not in log, f"{needle} in the daemon's log:\n{log[-3000:]}")

env.cleanup()
t.done()
