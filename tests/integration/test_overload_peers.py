#!/usr/bin/python3
"""Overload protection with --peer: another router's work counts toward the
wait bound.

Two real smg-steerd, R1 and R2, steer one VIP over two wire workers
(HTTP/1.1, answers held until the test releases them) and share their
request accounting every 1 ms. Both run --worker-overload-wait 5s. The loads
are polled once at start, so the only work either router sees is in flight.
R1 sends a request of 10 s of work to each worker. R2 has sent nothing, yet
its next connect is refused with ECONNREFUSED, counted as a wait refusal:
its kernel's wait includes R1's pending work. Once R1's answers come back,
R2 steers again.
"""
import json
import os
import subprocess

import e2e_lib as L
import peer_lib as P
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0  # tokens/s: 1 ms per token
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
P1, P2 = "127.0.0.1:9471", "127.0.0.1:9472"
t = Tap()
env1, env2, control, loads = P.two_routers("ovpeer", TP, {"a": A, "b": B})


def args(listen, peer):
    return P.router_args(VIP, BPT, loads, [
        "--peer", peer, "--peer-listen", listen, "--peer-interval", "1ms",
        "--worker-overload-wait", "5s", "--least-load-mean-prefill-tokens", "100"])


try:
    r1 = L.Daemon(env1, args(P1, P2), metrics_port=9464).start()
    r2 = L.Daemon(env2, args(P2, P1), metrics_port=9465).start()
    rig = P.Rig(VIP, control, {"a": A, "b": B})

    def status(env):
        out = subprocess.run([os.path.join(L.BUILD, "smg-steerctl"), "--pin-path", env.pin,
                              "-o", "json", "status"], capture_output=True, text=True).stdout
        return json.loads(out)["services"][0]

    def r2_connect():
        """R2's outcome: the address getpeername reports (the VIP, for a steered
        connection), or the errno name."""
        try:
            s = rig.connect_via(env2)
        except ConnectionRefusedError:
            return "ECONNREFUSED"
        addr = "%s:%d" % s.getpeername()
        s.close()
        return addr

    L.wait_for(lambda: all(b["mode"] == "snapshot" for b in rig.explain(env1)["backends"]) and
               all(b["mode"] == "snapshot" for b in rig.explain(env2)["backends"]), 30,
               "both routers scored both backends from their loads")
    big = [P.request(tag, b"x" * 40000) for tag in ("big1", "big2")]
    tokens = len(big[0]) // BPT  # 10,000 tokens: 10 s of work each

    with t.case("R1's work on both workers: R2's connect is refused by the wait bound"):
        held = [rig.connect_via(env1) for _ in big]
        sent_to = [rig.send_held(s, r) for s, r in zip(held, big)]
        t.check(sorted(sent_to) == [A, B], f"R1 sent its requests to {sent_to}")
        L.wait_for(lambda: all(rig.backend(env2, a)["peer_pending_tokens"] == tokens
                               for a in (A, B)), 30, "R2 holds R1's pending work at both")
        t.check(status(env2)["wait_refused"] == 0, "a refusal before the test's connect")
        got = r2_connect()
        t.check(got == "ECONNREFUSED", f"R2's connect went to {got}")
        t.check(status(env2)["wait_refused"] == 1, f"R2: {status(env2)}")
        t.check(all(rig.backend(env2, a)["pending_tokens"] == 0 for a in (A, B)),
                "R2 has pending work of its own")

    with t.case("R1's answers back: R2 steers again"):
        for tag in ("big1", "big2"):
            rig.release(tag)
        for s in held:
            P.read_answer(s)
            s.close()
        L.wait_for(lambda: all(rig.backend(env2, a)["peer_pending_tokens"] == 0
                               for a in (A, B)), 30, "R2: nothing pending from R1")
        steered = status(env2)["steered"]
        got = r2_connect()
        t.check(got == VIP and status(env2)["steered"] == steered + 1,
                f"R2's connect: {got}, {status(env2)}")

    with t.case("both routers exit cleanly"):
        for d in (r1, r2):
            rc, _ = d.stop()
            t.check(rc == 0, f"exit {rc}")
finally:
    env2.cleanup()
    env1.cleanup()
t.done()
