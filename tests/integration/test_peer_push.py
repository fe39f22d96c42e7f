#!/usr/bin/python3
"""Routers that push each request to each other as it is sent (--peer-push on).

Two real smg-steerd daemons, R1 and R2, steer the same VIP over the same two
fake workers (as tests/integration/test_peers.py), with --peer-push on --peer-phase off
and a 10 s --peer-interval: between two of R1's report ticks, only its kernel's
wake-ups can send a report. Asserted, with exact numbers:

- neither router adds a random phase to its table (explain: phase_ns 0), and
  explain shows the push (peer_push);
- ten held requests sent one at a time through R1 on one keep-alive
  connection: each shows at R2 as exactly its tokens, and each answer takes
  them back to 0;
- R2 received at least one report per change (20), which R1's ticks alone
  cannot send (one every 10 s, a full one every 15 s): the pushes carried them;
  R1's kernel woke its peer thread at least once per change
  (smg_steer_peer_push_wakeups_total >= 20), R2's never (nothing was sent
  through it);
- R2's next new connection avoids the backend of R1's request in flight;
- a reload of R2's file (peer-push off, peer-phase on) takes effect with the
  next table: explain shows no push and a phase at R2, R1 unchanged;
- both exit cleanly.

How late the pushes arrive is measured by `make bench` (part peer, mode push),
not here.
"""
import os
import signal
import time

import e2e_lib as L
import peer_lib as P
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0  # tokens/s
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
P1, P2 = "127.0.0.1:9481", "127.0.0.1:9482"  # R1's and R2's --peer-listen
REQUESTS = 10
t = Tap()
env1, env2, control, loads = P.two_routers("push", TP, {"a": A, "b": B})


CFG2 = os.path.join(env2.tmp, "steer.yaml")  # R2's push and phase: a reload changes them


def write_cfg2(push, phase):
    with open(CFG2 + ".tmp", "w") as f:
        f.write(f"peer-push: {push}\npeer-phase: {phase}\n")
    os.rename(CFG2 + ".tmp", CFG2)


def start(env, listen, peer, port, extra):
    a = P.router_args(VIP, BPT, loads, ["--peer", peer, "--peer-listen", listen,
                                         "--peer-interval", "10s", "--peer-timeout", "60s"]
                      + extra)
    return L.Daemon(env, a, metrics_port=port).start()


write_cfg2("on", "off")
r1 = start(env1, P1, P2, 9466, ["--peer-push", "on", "--peer-phase", "off"])
r2 = start(env2, P2, P1, 9467, ["--config", CFG2])


rig = P.Rig(VIP, control, {"a": A, "b": B})
explain, backend, send_held = rig.explain, rig.backend, rig.send_held
connect_via = rig.connect_via
request, read_answer = P.request, P.read_answer


def peer_pending(env, addr):
    return backend(env, addr)["peer_pending_tokens"]


def whole_tokens(tag, n):
    """A request of about n body bytes whose length is a whole number of
    tokens: R1 reports its cumulative bytes / BPT, so each request then moves
    R2's count by exactly its own tokens."""
    req = request(tag, b"x" * n)
    while len(req) % BPT:
        n += 1
        req = request(tag, b"x" * n)
    return req


def received(d):
    return d.metric("smg_steer_peer_reports_received_total", peer=P1) or 0


def wakeups(d):
    return d.metric("smg_steer_peer_push_wakeups_total") or 0


L.wait_for(lambda: all(b["mode"] == "snapshot" for b in explain(env1)["backends"]) and
           all(b["mode"] == "snapshot" for b in explain(env2)["backends"]), 30,
           "both routers scored both backends from their loads")
L.wait_for(lambda: r2.metric("smg_steer_peer_up", peer=P1) == 1, 30, "R2 hears R1")

with t.case("--peer-phase off: no random phase in either table; explain shows the push"):
    for name, env in (("R1", env1), ("R2", env2)):
        e = explain(env)
        phases = [b["phase_ns"] for b in e["backends"]]
        t.check(phases == [0, 0], f"{name}: phase_ns {phases}")
        t.check(e["peer_push"] is True, f"{name}: explain says peer_push {e['peer_push']}")

with t.case(f"{REQUESTS} requests on one connection: each pushed to R2 as sent and answered"):
    rx0, wk0 = received(r2), wakeups(r1)
    t0 = time.monotonic()
    s1 = connect_via(env1)
    seen_ms = []
    for i in range(REQUESTS):
        req = whole_tokens(f"r{i}", 4000 + 400 * i)
        tokens = len(req) // BPT
        sent = time.monotonic()
        x = send_held(s1, req)
        L.wait_for(lambda: peer_pending(env2, x) == tokens, 30,
                   f"R2 holds request {i}'s {tokens} tokens at {x}")
        seen_ms.append((time.monotonic() - sent) * 1000)
        y = B if x == A else A
        t.check(peer_pending(env2, y) == 0, f"request {i}: {y} has pending work at R2")
        open(os.path.join(control, f"r{i}"), "w").close()
        read_answer(s1)
        L.wait_for(lambda: peer_pending(env2, x) == 0, 30, f"request {i} answered at R2")
    s1.close()
    # /metrics is refreshed once a second: wait for the counts, then compare.
    L.wait_for(lambda: received(r2) >= rx0 + 2 * REQUESTS, 30,
               f"R2 received a report for each of the {2 * REQUESTS} changes "
               f"(has {received(r2) - rx0} more)")
    reports, elapsed = received(r2) - rx0, time.monotonic() - t0
    # R1's ticks send at most one datagram each (two backends), one every
    # 10 s: without the pushes R2 could not have received more than this.
    by_ticks = int(elapsed / 10) + 1
    t.check(reports > by_ticks, f"{reports} reports in {elapsed:.1f} s: no more than ticks "
            f"alone could send ({by_ticks})")
    L.wait_for(lambda: wakeups(r1) >= wk0 + 2 * REQUESTS, 30,
               f"R1's kernel woke its peer thread for each change (has {wakeups(r1) - wk0})")
    t.check(wakeups(r2) == 0, f"R2 pushed {wakeups(r2)} times with nothing sent through it")
    seen_ms.sort()
    print(f"# {REQUESTS} requests: R2 received {reports:.0f} reports in {elapsed:.1f} s, ticks "
          f"alone could send {by_ticks}. Send -> seen at R2 through explain (a subprocess): "
          f"median {seen_ms[len(seen_ms) // 2]:.0f} ms")

with t.case("R2's next connection avoids the backend of R1's request in flight"):
    s1 = connect_via(env1)
    big = whole_tokens("big", 40000)
    x = send_held(s1, big)
    L.wait_for(lambda: peer_pending(env2, x) == len(big) // BPT, 30, "R2 holds the request")
    s2 = connect_via(env2)
    y = send_held(s2, request(None, b"y" * 10))
    read_answer(s2)
    s2.close()
    t.check(y != x, f"R2's connection went to {y}, where R1's request waits")
    open(os.path.join(control, "big"), "w").close()
    read_answer(s1)
    s1.close()
    L.wait_for(lambda: peer_pending(env2, x) == 0, 30, "answered: nothing pending at R2")

with t.case("a reload turns R2's push off and its phase on, with the next table"):
    write_cfg2("off", "on")
    r2.send(signal.SIGHUP)
    L.wait_for(lambda: "reloaded" in r2.log_text(), 30, "R2 reloads")
    L.wait_for(lambda: not explain(env2)["peer_push"], 30, "R2's table without the push")
    phases = [b["phase_ns"] for b in explain(env2)["backends"]]
    t.check(all(ph > 0 for ph in phases), f"R2's phase after the reload: {phases}")
    t.check(explain(env1)["peer_push"] is True, "R1's push changed too")

with t.case("both routers exit cleanly"):
    rc1, _ = r1.stop()
    rc2, _ = r2.stop()
    t.check(rc1 == 0 and rc2 == 0, f"exit codes {rc1}, {rc2}")

t.done()
