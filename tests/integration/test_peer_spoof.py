#!/usr/bin/python3
"""Forged reports between routers without --peer-key, end to end.

Three real smg-steerd daemons steer the same VIP over the same two fake
workers (as tests/integration/test_peers.py): R2 lists R1 and R3 as its peers
(--peer), R1 and R3 list R2. No key: whatever can send UDP to R2's
--peer-listen is heard. The forger is the test, with reports made by Python's
protobuf runtime, sent from addresses of 127.0.0.0/8 it binds, or with a raw
socket from R1's own address (all inside the test's network namespace). A
10 s --peer-timeout: a router heard a few times a second is never taken for
silent, however loaded the machine. Asserted:

- 2000 empty reports spoofed from R1's address, each with a new router id,
  while R1 reports: none is taken for R1's restart: R1's pending request
  stays at R2 exactly its tokens, smg_steer_peer_forgotten_total of R1 does
  not move, and the forgeries are counted rejected; R1 then restarted at once
  on its pins (a new router id while the old one's reports are fresh at R2)
  is taken once the old one has been silent for --peer-timeout: the old
  one's work taken back once, the new one's (the same request, still pending
  in R1's kernel) applied once;
- R2 logs at most one line about those forgeries per 10 s (counted);
- 200 empty reports from 200 addresses, more senders than R2 has places for:
  R3, a router of R2's list that starts only then, is heard and its request
  applied at once; a sender not in the list is heard too once the 200 have
  fallen silent; R2's lines about the 200 are bounded as well;
- all three exit cleanly.
"""
import os
import signal
import sys
import time

import e2e_lib as L
import peer_lib as P
from taplib import Tap

sys.path.insert(0, os.path.join(L.BUILD, "py"))  # steer_peer_pb2, for P.report

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0  # tokens/s
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
P1, P2, P3 = "127.0.0.1:9471", "127.0.0.1:9472", "127.0.0.1:9473"  # --peer-listen
MARKER = "127.0.0.1:9480"  # a sender outside R2's list: the test's marker
NEWCOMER = "127.0.0.1:9485"  # another, that comes after the 200
TIMEOUT_S = 10
WARN_EVERY_S = 10  # PEER_WARN_EVERY_NS: how often R2 may log a line any sender can cause
FORGERIES = 2000
SENDERS = 200
REJ = "smg_steer_peer_reports_rejected_total"
t = Tap()
env1, env2, control, loads = P.two_routers("spoof", TP, {"a": A, "b": B})
env3 = L.Env("spoof3")


def start(env, listen, peers, port):
    return L.Daemon(env, P.router_args(VIP, BPT, loads, [
        "--keep-pinned", "--peer", peers, "--peer-listen", listen, "--peer-interval", "1ms",
        "--peer-timeout", f"{TIMEOUT_S}s"]), metrics_port=port).start()


r2 = start(env2, P2, f"{P1},{P3}", 9465)
r1 = start(env1, P1, P2, 9464)
rig = P.Rig(VIP, control, {"a": A, "b": B})
spoofer = P.Spoofer()


def peer_pending(env, addr):
    return rig.backend(env, addr)["peer_pending_tokens"]


def other(addr):
    return B if addr == A else A


def metric(d, name, **labels):
    return d.metric(name, **labels) or 0


def lines_about(text, what):
    return [line for line in text.splitlines() if what in line]


class Marker:
    """A sender outside R2's list whose reports say `sent` tokens pending at
    one backend: once R2 shows them, R2 has handled every datagram that
    reached it before (one socket, in order). Sent again while not shown: a
    datagram lost to a full buffer costs nothing, counters being cumulative."""

    def __init__(self, router):
        self.router, self.seq, self.sent, self.answered = router, 0, 0, 0

    def send(self, at):
        self.seq += 1
        P.send_udp(MARKER, P2, P.report(VIP, self.router, self.seq,
                                        [(at, self.sent, self.answered)]))

    def wait(self, at, want, what):
        def shown():
            if peer_pending(env2, at) == want:
                return True
            self.send(at)
            return False
        L.wait_for(shown, 60, what)

    def mark(self, at):
        self.sent += 10
        self.wait(at, self.sent - self.answered, "R2 handled the datagrams before the marker")

    def clear(self, at):
        self.answered = self.sent
        self.wait(at, 0, "the marker's work answered")


L.wait_for(lambda: all(b["mode"] == "snapshot" for b in rig.explain(env1)["backends"]) and
           all(b["mode"] == "snapshot" for b in rig.explain(env2)["backends"]), 30,
           "both routers scored both backends from their loads")
flood = {}

with t.case(f"{FORGERIES} new router ids spoofed from R1's address leave its work; "
            "its real restart is taken after --peer-timeout"):
    big = P.request("big", b"x" * 40000)
    big_tokens = len(big) // BPT
    s1 = rig.connect_via(env1)
    x = rig.send_held(s1, big)
    y = other(x)
    L.wait_for(lambda: peer_pending(env2, x) == big_tokens, 30,
               f"R2 holds R1's {big_tokens} pending tokens at {x}")
    marker = Marker(0x3a4c3)
    marker.mark(y)
    rejected = metric(r2, REJ)
    log0 = len(r2.log_text())
    t0 = time.monotonic()
    seen = []  # R2's view of R1's work between bursts of forgeries
    for i in range(FORGERIES):
        spoofer.send(P1, P2, P.report(VIP, 0x5f00000 + i, 1, []))
        if i % 200 == 199:
            seen.append(peer_pending(env2, x))
    marker.mark(y)
    flood["s"] = time.monotonic() - t0
    flood["log"] = r2.log_text()[log0:]
    seen.append(peer_pending(env2, x))
    t.check(all(v == big_tokens for v in seen),
            f"R2's pending tokens of R1 at {x} during the forgeries: {seen}, want {big_tokens}")
    m = L.wait_for(lambda: (lambda m: m if (m.get((REJ, ())) or 0) > rejected else None)(
        r2.metrics()), 30, "R2 counts the forgeries rejected")
    forgotten = m.get(("smg_steer_peer_forgotten_total", (("peer", P1),))) or 0
    t.check(forgotten == 0, f"R2 forgot R1's work {forgotten} time(s)")
    t.check(lines_about(flood["log"], f"ignored a report from {P1}: router "),
            "R2 does not warn of the forgeries")
    print(f"# R2 held {big_tokens} tokens of R1 at every one of {len(seen)} looks during "
          f"{FORGERIES} forgeries; {int(m.get((REJ, ())) - rejected)} counted rejected so far")

    # A genuine restart: the old router stops, the new one reports at once.
    t0 = time.monotonic()
    r1.stop(signal.SIGKILL)
    r1 = start(env1, P1, P2, 9464)
    forgot = f"fell silent; its {big_tokens} pending token(s) no longer count"
    L.wait_for(lambda: any(forgot in line for line in lines_about(r2.log_text(), f"peer {P1} ")),
               60, "R2 takes back the old R1's work once it has been silent")
    L.wait_for(lambda: peer_pending(env2, x) == big_tokens, 60,
               "R2 applies the new R1's report: the request its kernel still has pending")
    taken_s = time.monotonic() - t0
    L.wait_for(lambda: metric(r2, "smg_steer_peer_forgotten_total", peer=P1) == 1, 30,
               "R2 counts R1's restart forgotten once")
    received = metric(r2, "smg_steer_peer_reports_received_total", peer=P1)
    L.wait_for(lambda: metric(r2, "smg_steer_peer_reports_received_total", peer=P1) >=
               received + 10, 60, "ten more reports of the new R1")
    t.check(peer_pending(env2, x) == big_tokens,
            f"R2 holds {peer_pending(env2, x)} tokens of R1 at {x}, want {big_tokens} (once)")
    print(f"# R1's restart taken {taken_s:.1f} s after the kill (--peer-timeout {TIMEOUT_S} s)")
    P.release(control, "big")
    P.read_answer(s1)
    s1.close()
    L.wait_for(lambda: peer_pending(env2, x) == 0, 30, "answered: nothing of R1's at R2")
    marker.clear(y)

with t.case(f"R2's log lines about {FORGERIES} forgeries are bounded"):
    n = len(lines_about(flood["log"], P1))
    bound = 1 + int(flood["s"] / WARN_EVERY_S)
    print(f"# {n} line(s) naming {P1} in R2's log for {FORGERIES} forgeries in "
          f"{flood['s']:.1f} s")
    t.check(n <= bound, f"{n} lines, want at most {bound}: "
            + " | ".join(lines_about(flood["log"], P1)[:3]))

with t.case(f"{SENDERS} spoofed senders, then a new router's work is applied"):
    log0 = len(r2.log_text())
    rejected = metric(r2, REJ)
    t0 = time.monotonic()
    for i in range(SENDERS):
        P.send_udp(f"127.0.3.{i + 1}:9480", P2, P.report(VIP, 0x6f00000 + i, 1, []))
    L.wait_for(lambda: metric(r2, REJ) > rejected, 30,
               "R2 refuses the senders it has no place for")
    r3 = start(env3, P3, P2, 9466)
    req = P.request("three", b"z" * 8000)
    s3 = rig.connect_via(env3)
    z = rig.send_held(s3, req)
    L.wait_for(lambda: peer_pending(env2, z) == len(req) // BPT, 60,
               f"R2 applies R3's {len(req) // BPT} pending tokens at {z}")
    L.wait_for(lambda: metric(r2, "smg_steer_peer_up", peer=P3) == 1, 30, "R2 reports R3 up")
    P.release(control, "three")
    P.read_answer(s3)
    s3.close()
    L.wait_for(lambda: peer_pending(env2, z) == 0, 30, "answered: nothing of R3's at R2")
    # A sender outside the list waits for a place: it is heard once the
    # 200 have been silent for --peer-timeout, whose places it may take.
    newcomer = {"seq": 0}

    def newcomer_heard():
        if peer_pending(env2, A) == 700:
            return True
        newcomer["seq"] += 1
        P.send_udp(NEWCOMER, P2, P.report(VIP, 0x1ee7, newcomer["seq"], [(A, 700, 0)]))
        return False
    L.wait_for(newcomer_heard, 60, "R2 applies a new sender outside its list")
    elapsed = time.monotonic() - t0
    newcomer["seq"] += 1
    P.send_udp(NEWCOMER, P2, P.report(VIP, 0x1ee7, newcomer["seq"], [(A, 700, 700)]))
    L.wait_for(lambda: peer_pending(env2, A) == 0, 30, "the new sender's work answered")
    text = r2.log_text()[log0:]
    n = len(lines_about(text, "127.0.3."))
    # Two lines any sender can cause name them: a sender refused, and a
    # sender's work taken back; each at most once per window.
    bound = 2 * (1 + int(elapsed / WARN_EVERY_S))
    print(f"# {n} line(s) naming the {SENDERS} senders in R2's log over {elapsed:.1f} s")
    t.check(n <= bound, f"{n} lines, want at most {bound}: "
            + " | ".join(lines_about(text, "127.0.3.")[:3]))

with t.case("all three routers exit cleanly"):
    spoofer.close()
    rcs = [d.stop()[0] for d in (r1, r2, r3)]
    t.check(rcs == [0, 0, 0], f"exit codes {rcs}")

t.done()
