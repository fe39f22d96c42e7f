#!/usr/bin/python3
"""Two routers share their request accounting (--peer), end to end.

Two real smg-steerd daemons, R1 and R2, each with its own cgroup and pins,
steer the same VIP over the same two fake workers (GetLoads from
tests/lib/fake_worker.py, HTTP/1.1 traffic from tests/lib/wire_worker.py, whose
answers the test holds and releases). Each reports to the other over UDP on
127.0.0.1 every 1 ms. The loads are polled once at start (the next poll is
minutes away), so whatever moves a connection is the other router's report.
Asserted, with exact numbers:

- a large request sent through R1 shows at R2 as that many pending tokens
  of the other routers (explain -o json, /metrics), and R2's next new
  connection avoids that backend; its answer takes them back to 0; R2's
  table has its random phase (the default --peer-phase on); R2 measures
  round trips to R1 (smg_steer_peer_rtt_seconds, from R1's echoes);
- R1 killed (SIGKILL): after --peer-timeout R2 takes back what R1 had pending,
  and reports R1 down;
- R1 restarted on its pins (--keep-pinned): a new router id, and R2 applies
  what R1's kernel still has pending, once;
- R2 restarted on its pins: it takes back what its predecessor applied and
  applies R1's pending work again, once (no drift), also when its own
  reports reach it (a --peer list that names itself);
- a datagram that is not a report is counted as rejected and changes nothing;
- a third (fake) router's reports, made with Python's protobuf runtime: the
  first applied whole, a late one (overtaken) ignored, one with more answered
  than sent rejected, an unknown backend counted, a gap counted lost, and a
  new router id from the same address refused while the old one reports
  (without --peer-key it may be a forgery: tests/integration/test_peer_spoof.py
  has a real restart taken once the old one falls silent);
- reports to a peer that is not there are counted as sent, nothing else.
"""
import os
import signal
import socket
import time

import sys

import e2e_lib as L
import peer_lib as P
from taplib import Tap

sys.path.insert(0, os.path.join(L.BUILD, "py"))
import steer_peer_pb2 as pb  # noqa: E402  (Python's protobuf runtime: shares nothing with peer.c)

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0  # tokens/s: 1 ms per token
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
P1, P2 = "127.0.0.1:9471", "127.0.0.1:9472"  # R1's and R2's --peer-listen
TIMEOUT_S = 0.5
t = Tap()
env1, env2, control, loads = P.two_routers("peer", TP, {"a": A, "b": B})


def args(listen, peer, timeout_s):
    return P.router_args(VIP, BPT, loads, [
        "--keep-pinned", "--peer", peer, "--peer-listen", listen, "--peer-interval", "1ms",
        "--peer-timeout", f"{int(timeout_s * 1000)}ms"])


def start(env, listen, peer, port, timeout_s=TIMEOUT_S):
    return L.Daemon(env, args(listen, peer, timeout_s), metrics_port=port).start()


r1 = start(env1, P1, P2, 9464)
r2 = start(env2, P2, P1, 9465)


rig = P.Rig(VIP, control, {"a": A, "b": B})
explain, backend, send_held = rig.explain, rig.backend, rig.send_held
connect_via, release = rig.connect_via, rig.release
request, read_answer = P.request, P.read_answer


def peer_pending(env, addr):
    return backend(env, addr)["peer_pending_tokens"]


def other(addr):
    return B if addr == A else A


def peer_up(d, peer):
    return d.metric("smg_steer_peer_up", peer=peer)


def received_after(d, peer, n):
    """Wait until d has accepted n more reports from peer than now (R1's full
    report comes a few times a second even when nothing moves)."""
    metric = "smg_steer_peer_reports_received_total"
    start = d.metric(metric, peer=peer) or 0
    L.wait_for(lambda: (d.metric(metric, peer=peer) or 0) >= start + n, 60,
               f"{n} more reports from {peer}")


L.wait_for(lambda: all(b["mode"] == "snapshot" for b in explain(env1)["backends"]) and
           all(b["mode"] == "snapshot" for b in explain(env2)["backends"]), 30,
           "both routers scored both backends from their loads")
big = request("big", b"x" * 40000)
big_tokens = len(big) // BPT

with t.case("a large request through R1 keeps R2's next connection off its backend"):
    s1 = connect_via(env1)
    t0 = time.monotonic()
    x = send_held(s1, big)
    L.wait_for(lambda: peer_pending(env2, x) == big_tokens, 30,
               f"R2 holds R1's {big_tokens} pending tokens at {x}")
    seen_s = time.monotonic() - t0
    e = backend(env2, x)
    t.check(e["pending_tokens"] == 0, f"R2's own pending moved: {e['pending_tokens']}")
    t.check(e["busy_ns"] > 1e9, f"R2 holds {x} busy for {e['busy_ns']} ns only")
    t.check(peer_pending(env2, other(x)) == 0, "the other backend has pending work")
    t.check(peer_pending(env1, x) == 0, "R1 applied its own report")
    phases = [b["phase_ns"] for b in explain(env2)["backends"]]
    t.check(all(ph > 0 for ph in phases), f"R2's random phase (--peer-phase on): {phases}")
    s2 = connect_via(env2)
    y = send_held(s2, request(None, b"y" * 10))
    read_answer(s2)
    s2.close()
    t.check(y == other(x), f"R2's next connection went to {y}, the backend R1 loaded")
    L.wait_for(lambda: r2.metric("smg_steer_backend_peer_pending_tokens", vip=VIP, backend=x)
               == big_tokens, 30, "R2's /metrics shows the pending tokens")
    t.check(peer_up(r2, P1) == 1 and peer_up(r1, P2) == 1, "the routers see each other up")
    # Each router's full reports echo the other's: round trips are measured.
    L.wait_for(lambda: (r2.metric("smg_steer_peer_rtt_seconds_count", peer=P1) or 0) >= 3, 30,
               "R2 measures round trips to R1")
    n_rtt = r2.metric("smg_steer_peer_rtt_seconds_count", peer=P1)
    mean_rtt = r2.metric("smg_steer_peer_rtt_seconds_sum", peer=P1) / n_rtt
    t.check(0 < mean_rtt < 1, f"R2's mean round trip to R1: {mean_rtt} s")
    t.check(r2.metric("smg_steer_peer_rtt_seconds_bucket", peer=P1, le="+Inf") == n_rtt,
            "the +Inf bucket is not the count")
    print(f"# R1's request seen at R2 within {seen_s * 1000:.1f} ms (send, worker read, "
          f"explain polled); R2's mean round trip to R1 {mean_rtt * 1e3:.3f} ms over {n_rtt:.0f}")

with t.case("R1's answer takes its work back at R2"):
    release("big")
    read_answer(s1)
    L.wait_for(lambda: peer_pending(env2, x) == 0, 30, "R2: nothing pending from R1")
    t.check(backend(env2, x)["busy_ns"] == 0, f"R2 still holds {x} busy")

with t.case("R1 killed: R2 forgets its pending work after --peer-timeout"):
    held = request("held", b"h" * 8000)
    held_tokens = len(held) // BPT
    x2 = send_held(s1, held)
    L.wait_for(lambda: peer_pending(env2, x2) == held_tokens, 30, "R2 holds R1's request")
    forgotten = r2.metric("smg_steer_peer_forgotten_total", peer=P1) or 0
    t0 = time.monotonic()
    r1.stop(signal.SIGKILL)
    L.wait_for(lambda: peer_pending(env2, x2) == 0, 30, "R2 forgets R1's work")
    gone_s = time.monotonic() - t0
    # Not a timing assertion (R1's last report may have come earlier than the
    # kill on a loaded machine): the log says why, and the count is exact.
    L.wait_for(lambda: "fell silent; its %d pending token(s) no longer count" % held_tokens
               in r2.log_text(), 30, "R2 logs what it forgot")
    L.wait_for(lambda: peer_up(r2, P1) == 0, 30, "R2 reports R1 down")
    t.check(r2.metric("smg_steer_peer_forgotten_total", peer=P1) == forgotten + 1,
            "forgotten_total did not count it once")
    print(f"# forgotten {gone_s * 1000:.0f} ms after the kill began (timeout "
          f"{TIMEOUT_S * 1000:.0f} ms)")

with t.case("R1 restarted on its pins: R2 applies what R1's kernel still has pending, once"):
    r1 = start(env1, P1, P2, 9464)
    L.wait_for(lambda: peer_up(r2, P1) == 1, 30, "R2 hears the new R1")
    L.wait_for(lambda: peer_pending(env2, x2) == held_tokens, 30,
               "R2 holds the request R1's kernel kept pending")
    received_after(r2, P1, 10)  # ten more reports: still once
    t.check(peer_pending(env2, x2) == held_tokens,
            f"R2 holds {peer_pending(env2, x2)}, want {held_tokens}")

with t.case("R2 restarted on its pins: its successor takes back and applies again, once"):
    r2.stop(signal.SIGKILL)
    t.check(peer_pending(env2, x2) == held_tokens, "the pins lost the applied work")
    # Listening on every address, with a --peer list that reaches itself too:
    # its own reports come back and must not count.
    # A long timeout from here on: the fake router below must stay heard
    # between its reports however slow the machine is.
    r2 = start(env2, "0.0.0.0:9472", f"{P1},{P2}", 9465, timeout_s=60)
    L.wait_for(lambda: peer_up(r2, P1) == 1, 30, "the new R2 hears R1")
    L.wait_for(lambda: (r2.metric("smg_steer_peer_own_reports_total") or 0) > 0, 30,
               "R2 counts its own reports that came back")
    received_after(r2, P1, 10)
    t.check(peer_pending(env2, x2) == held_tokens,
            f"the new R2 holds {peer_pending(env2, x2)}, want {held_tokens}")
    release("held")
    read_answer(s1)
    s1.close()
    L.wait_for(lambda: peer_pending(env2, x2) == 0, 30, "answered: nothing pending at R2")

with t.case("a datagram that is not a report is rejected and changes nothing"):
    before = r2.metric("smg_steer_peer_reports_rejected_total") or 0
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"\xff\xfe not a protobuf", ("127.0.0.1", 9472))
    u.close()
    L.wait_for(lambda: (r2.metric("smg_steer_peer_reports_rejected_total") or 0) > before, 30,
               "R2 counts the rejected datagram")
    t.check(peer_pending(env2, A) == 0 and peer_pending(env2, B) == 0, "pending moved")
    t.check(r2.proc.poll() is None, "R2 exited")

def fake_report(router, seq, backends, port=9480):
    """A report from a fake router on 127.0.0.1:port, made by Python's protobuf."""
    m = pb.Report(router=router, seq=seq, interval_us=1000)
    for addr, sent, answered in backends:
        host, p = addr.rsplit(":", 1)
        vip_host, vip_port = VIP.rsplit(":", 1)
        m.backends.append(pb.Backend(
            vip=b"\0" * 10 + b"\xff\xff" + socket.inet_aton(vip_host), vip_port=int(vip_port),
            addr=b"\0" * 10 + b"\xff\xff" + socket.inet_aton(host), port=int(p),
            sent_tokens=sent, answered_tokens=answered))
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", port))
    u.sendto(m.SerializeToString(), ("127.0.0.1", 9472))
    u.close()


with t.case("a third router's reports: exact, in any order, and checked"):
    FAKE = "127.0.0.1:9480"
    base, base_b = peer_pending(env2, A), peer_pending(env2, B)

    def marked(seq, b_sent):
        """A report of B only, after the ones before it: once R2 shows it, R2
        has handled every datagram sent before it (one socket, in order)."""
        fake_report(0x5eed, seq, [(B, b_sent, 0)])
        L.wait_for(lambda: peer_pending(env2, B) == base_b + b_sent, 30,
                   f"R2 handled the reports before seq {seq}")

    fake_report(0x5eed, 5, [(A, 3000, 1000)])
    L.wait_for(lambda: peer_pending(env2, A) == base + 2000, 30,
               "R2 applies the fake router's first report whole (sent - answered)")
    fake_report(0x5eed, 4, [(A, 2500, 0)])  # overtaken by seq 5: older, not a restart
    marked(6, 10)
    t.check(peer_pending(env2, A) == base + 2000,
            f"after a late report: {peer_pending(env2, A)}, want {base + 2000}")
    fake_report(0x5eed, 7, [(A, 3500, 1000)])
    L.wait_for(lambda: peer_pending(env2, A) == base + 2500, 30, "R2 applies seq 7's change")
    rej = r2.metric("smg_steer_peer_reports_rejected_total") or 0
    fake_report(0x5eed, 8, [(A, 3500, 4000)])  # answered > sent: the whole report is refused
    marked(9, 20)
    t.check(peer_pending(env2, A) == base + 2500, "a refused report changed A")
    L.wait_for(lambda: (r2.metric("smg_steer_peer_reports_rejected_total") or 0) == rej + 1,
               30, "R2 counts the report with more answered than sent as rejected")
    unknown = r2.metric("smg_steer_peer_unknown_backends_total") or 0
    fake_report(0x5eed, 10, [("127.0.0.99:8000", 10, 0), (A, 4000, 4000)])
    L.wait_for(lambda: peer_pending(env2, A) == base, 30, "all answered: back to the base")
    L.wait_for(lambda: (r2.metric("smg_steer_peer_unknown_backends_total") or 0) == unknown + 1,
               30, "R2 counts the backend it does not steer to")
    # Seqs 5, 4 (late), 6, 7, 9, 10 arrived; 8 was refused: one lost.
    L.wait_for(lambda: r2.metric("smg_steer_peer_reports_lost_total", peer=FAKE) == 1, 30,
               "R2 counts one report lost")
    fake_report(0x5eed, 11, [(A, 6000, 4000)])
    L.wait_for(lambda: peer_pending(env2, A) == base + 2000, 30, "2000 pending again")
    rej = r2.metric("smg_steer_peer_reports_rejected_total") or 0
    # The same address, a new router id, while 0x5eed reports: refused.
    fake_report(0x7777, 1, [(A, 100, 0)])
    marked(12, 30)
    t.check(peer_pending(env2, A) == base + 2000,
            f"a new router id took 0x5eed's place: A holds {peer_pending(env2, A) - base}")
    L.wait_for(lambda: (r2.metric("smg_steer_peer_reports_rejected_total") or 0) == rej + 1,
               30, "R2 counts the new router id at a live router's address rejected")
    t.check(not r2.metric("smg_steer_peer_forgotten_total", peer=FAKE),
            "0x5eed's work was forgotten")
    L.wait_for(lambda: f"peer: ignored a report from {FAKE}: router 0000000000007777, while "
               "router 0000000000005eed still reports from there" in r2.log_text(), 30,
               "R2 warns of the new router id")
    fake_report(0x5eed, 13, [(A, 6000, 6000)])
    L.wait_for(lambda: peer_pending(env2, A) == base, 30, "answered: back to the base")

with t.case("both routers exit cleanly"):
    rc1, _ = r1.stop()
    rc2, _ = r2.stop()
    t.check(rc1 == 0 and rc2 == 0, f"exit codes {rc1}, {rc2}")
    # --keep-pinned: the pins stay; each Env removes its own.

t.done()
