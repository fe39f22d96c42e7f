#!/usr/bin/python3
"""Routers found through DNS (--peer-dns), end to end.

Two real smg-steerd daemons, R1 on 127.0.0.1:9481 and R2 on 127.0.0.2:9481,
name no peer: each has --peer-dns routers.test.:9481, and a real DNS server
(dnsmasq in the test's network namespace) answers that name with the routers'
addresses, from a hosts file the test rewrites, as a Kubernetes headless
Service over a DaemonSet would. Asserted:

- each router reports to the other, and not to its own --peer-listen, which
  the name also gives, nor to the name's IPv6 address (the routers listen on
  IPv4);
- a large request sent through R1 shows at R2 as exactly that many pending
  tokens of the other routers, and its answer takes them back;
- a router added to the name (R3's address) is reported to;
- a router removed from the name (R2's) is no longer reported to: R2 stops
  hearing from R1 and reports it down, while R1 still hears R2;
- with the DNS server gone the last known routers stay (R1 still reports to
  R3 after several failed look-ups).
"""
import os

import e2e_lib as L
import peer_lib as P
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
NAME = "routers.test."  # absolute: never tried with the host's search domains
PORT = 9481
R1, R2, R3 = "127.0.0.1", "127.0.0.2", "127.0.0.3"
V6 = "2001:db8::9"  # an AAAA record of the name: not a peer of IPv4 routers
P1, P2, P3 = (f"{a}:{PORT}" for a in (R1, R2, R3))
DNS = "127.0.0.53"
t = Tap()
env1, env2, control, loads = P.two_routers("pdns", TP, {"a": A, "b": B})
HOSTS = os.path.join(env1.tmp, "hosts")


def write_hosts(addrs):
    tmp = HOSTS + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(f"{a} {NAME[:-1]}\n" for a in addrs))
    os.rename(tmp, HOSTS)


write_hosts([R1, R2, V6])
dns = L.Dnsmasq(env1, DNS, HOSTS).start()


def args(me):
    return P.router_args(VIP, BPT, loads, [
        "--peer-dns", f"{NAME}:{PORT}", "--peer-listen", f"{me}:{PORT}",
        "--peer-interval", "1ms", "--peer-timeout", "500ms",
        "--dns-server", f"{DNS}:5353", "--dns-interval", "200ms"])


r1 = L.Daemon(env1, args(R1), metrics_port=9466).start()
r2 = L.Daemon(env2, args(R2), metrics_port=9467).start()
rig = P.Rig(VIP, control, {"a": A, "b": B})


def counter(d, metric, peer):
    return d.metric(metric, peer=peer) or 0


def received(d, peer):
    return counter(d, "smg_steer_peer_reports_received_total", peer)


def sent(d, peer):
    return counter(d, "smg_steer_peer_reports_sent_total", peer)


def grows(what, read, n=10):
    """Waits until read() has grown by n from now."""
    start = read()
    L.wait_for(lambda: read() >= start + n, 60, what)


def dns_metric(d, metric, **labels):
    """A sample of the name's DNS families (their label `name` is also
    Daemon.metric's first parameter)."""
    labels["name"] = NAME
    return d.metrics().get((metric, tuple(sorted(labels.items()))))


def peer_pending(env, addr):
    return rig.backend(env, addr)["peer_pending_tokens"]


with t.case("each router reports to the other through the name, not to itself"):
    L.wait_for(lambda: received(r2, P1) >= 10 and received(r1, P2) >= 10, 60,
               "R1 and R2 hear each other")
    t.check(r1.metric("smg_steer_peer_reports_sent_total", peer=P1) is None,
            "R1 reports to its own --peer-listen")
    t.check(r2.metric("smg_steer_peer_reports_sent_total", peer=P2) is None,
            "R2 reports to its own --peer-listen")
    t.check((r1.metric("smg_steer_peer_own_reports_total") or 0) == 0,
            "R1's own reports came back")
    t.check(dns_metric(r1, "smg_steer_dns_addresses") == 3,
            "R1's look-up of the name has 3 addresses")
    t.check(r1.metric("smg_steer_peer_send_errors_total", peer=f"[{V6}]:{PORT}") is None,
            "R1 tried the IPv6 address")
    t.check("reporting to 1 router(s)" in r1.log_text(), "R1 did not log its router")

with t.case("a large request through R1 shows at R2, exactly, until it is answered"):
    L.wait_for(lambda: all(b["mode"] == "snapshot" for b in rig.explain(env2)["backends"]), 30,
               "R2 scored both backends from their loads")
    big = P.request("big", b"x" * 40000)
    s1 = rig.connect_via(env1)
    x = rig.send_held(s1, big)
    L.wait_for(lambda: peer_pending(env2, x) == len(big) // BPT, 30,
               f"R2 holds R1's {len(big) // BPT} pending tokens at {x}")
    rig.release("big")
    P.read_answer(s1)
    s1.close()
    L.wait_for(lambda: peer_pending(env2, x) == 0, 30, "R2: nothing pending from R1")

with t.case("a router added to the name is reported to"):
    write_hosts([R1, R2, R3])
    dns.reload()
    grows("R1 reports to R3", lambda: sent(r1, P3))
    grows("R2 reports to R3", lambda: sent(r2, P3))

with t.case("a router removed from the name is no longer reported to"):
    write_hosts([R1, R3])
    dns.reload()
    L.wait_for(lambda: r2.metric("smg_steer_peer_up", peer=P1) == 0, 60,
               "R2 stops hearing R1 (R1 no longer reports to it)")
    grows("R1 still hears R2 (R2 still resolves R1)", lambda: received(r1, P2))
    stopped = sent(r1, P2)
    grows("R1 keeps reporting to R3", lambda: sent(r1, P3))
    t.check(sent(r1, P2) == stopped, "R1 reported to R2 again")

with t.case("with the DNS server gone, the last known routers stay"):
    dns.kill()
    grows("R1's look-ups fail",
          lambda: dns_metric(r1, "smg_steer_dns_resolutions_total", result="failed") or 0, n=3)
    grows("R1 still reports to R3", lambda: sent(r1, P3))
    t.check(dns_metric(r1, "smg_steer_dns_stale") == 1, "the name is not marked stale")

t.done()
