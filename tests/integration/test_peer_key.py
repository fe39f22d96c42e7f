#!/usr/bin/python3
"""Authenticated reports between routers (--peer-key), end to end.

Two real smg-steerd daemons, R1 and R2, steer the same VIP over the same two
fake workers (as tests/integration/test_peers.py) and report to each other over UDP on
127.0.0.1, each with its own key file. R1 also reports to a socket of the
test (CAP), so that its datagrams are read as they went out. A third, fake
router is made with Python's protobuf runtime and Python's hmac: it shares
nothing with user/peer/auth.c. Asserted, with exact numbers:

- same key: a request through R1 shows at R2 as exactly its tokens; R1's
  datagrams are valid Reports whose last 34 bytes are field 15 (0x7a 0x20)
  holding the HMAC-SHA256 of the bytes before it, with sent_unix_ns the
  sender's wall clock; nothing is refused; smg_steer_peer_key_enabled 1;
- R1's own datagram sent again from another address is refused (replay),
  and R2 does not count R1's request twice;
- forged reports (no tag, a tag of another key, a byte changed after
  signing, a cut tag) are refused (auth), counted, warned of with the
  sender's address, and nothing of them is applied (explain, and no row for
  the sender in /metrics); the same report signed with the key is applied;
- a report signed with the key but sent 60 s ago, or 60 s ahead, is refused
  (stale) and not applied;
- a signed report of a new router id at the address of a router that still
  reports is its restart, taken at once: the old one's work taken back
  (forgotten once), the new one's applied;
- rotation without a flag day (SIGHUP after each file change): "A\\nB" on
  both, then "B\\nA" on R2 (R2 signs with B, R1 with A: each accepts the
  other's), then on R1 too, then "B" alone: at each step a request through
  one router shows exactly at the other, nothing is refused, R1's datagrams
  carry the tag of the key on its first line; at the end a report signed
  with A is refused;
- R2 reloaded without the key (its file's peer-key removed): it applies R1's
  signed reports and an unsigned one, and R1 refuses R2's unsigned reports
  (auth, warned of with R2's address) and applies none; R2 reloaded with the
  key again: the exchange is whole again;
- a reload of R2 that changes its --peer-listen (which waits for a restart)
  and its key together still applies the key: R1 then refuses R2's reports;
- reports from more senders than R2 tracks (130 signed fake routers) are
  counted in smg_steer_peer_reports_rejected_total, and apply nothing;
- no key appears in either daemon's log, /metrics, or smg-steerctl explain;
- both exit cleanly.
"""
import hashlib
import hmac
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import e2e_lib as L
import peer_lib as P
from taplib import Tap

sys.path.insert(0, os.path.join(L.BUILD, "py"))
import steer_peer_pb2 as pb  # noqa: E402  (Python's protobuf runtime: shares nothing with peer.c)

L.enter_private_netns()

VIP = "127.0.0.100:8000"
BPT = 4
TP = 1000.0  # tokens/s
A, B = "127.0.0.11:8000", "127.0.0.12:8000"
P1, P2 = "127.0.0.1:9471", "127.0.0.1:9472"  # R1's and R2's --peer-listen
CAP = ("127.0.0.1", 9490)  # the test's socket, one more --peer of R1
FAKE = "127.0.0.1:9480"  # the fake router's address
KEY_A = b"alpha-key-0123456789-abcdefghij"
KEY_B = b"bravo-key-9876543210-zyxwvutsrq"
KEY_X = b"x-not-the-key-0123456789-abcdef"  # a key no router has
REFUSED = "smg_steer_peer_key_refused_total"
t = Tap()
env1, env2, control, loads = P.two_routers("peerkey", TP, {"a": A, "b": B})
K1, K2 = os.path.join(env1.tmp, "r1.key"), os.path.join(env2.tmp, "r2.key")


def write_key(path, text):
    """As a Kubernetes Secret volume changes: a new file renamed over the old."""
    with open(path + ".tmp", "wb") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


write_key(K1, KEY_A + b"\n")
write_key(K2, KEY_A + b"\n")
cap = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
cap.bind(CAP)


def start(env, listen, peers, extra, port):
    # A long timeout: the fake router stays heard between its reports however
    # slow the machine is. listen None: the config file's.
    a = P.router_args(VIP, BPT, loads, ["--peer", peers] +
                      (["--peer-listen", listen] if listen else []) +
                      ["--peer-interval", "1ms", "--peer-timeout", "60s"] + extra)
    return L.Daemon(env, a, metrics_port=port).start()


CFG2 = os.path.join(env2.tmp, "r2.yaml")  # R2's key is the file's: a reload can remove it


def write_cfg2(key, listen=P2):
    """R2's file: its --peer-listen (a reload that changes it needs a restart)
    and its key (None: none)."""
    with open(CFG2 + ".tmp", "w") as f:
        f.write(f"peer-listen: {listen}\n" + (f"peer-key: {key}\n" if key else ""))
    os.rename(CFG2 + ".tmp", CFG2)


write_cfg2(K2)
r1 = start(env1, P1, f"{P2},{CAP[0]}:{CAP[1]}", ["--peer-key", K1], 9464)
r2 = start(env2, None, P1, ["--config", CFG2], 9465)
rig = P.Rig(VIP, control, {"a": A, "b": B})
explain, backend, send_held = rig.explain, rig.backend, rig.send_held
connect_via, release, request, read_answer = rig.connect_via, rig.release, P.request, P.read_answer


def peer_pending(env, addr):
    return backend(env, addr)["peer_pending_tokens"]


def refused(d, reason):
    return d.metric(REFUSED, reason=reason) or 0


def refusals(d, m=None):
    """d's refusals by reason, from one /metrics scrape (m: that scrape's
    d.metrics(); None: a new one)."""
    if m is None:
        m = d.metrics()
    return {r: m.get((REFUSED, (("reason", r),))) or 0 for r in ("auth", "stale", "replay")}


def received(d, peer, m=None):
    """The reports d took (verified and applied) from peer, as refusals()."""
    if m is None:
        m = d.metrics()
    return m.get(("smg_steer_peer_reports_received_total", (("peer", peer),))) or 0


def mac(key, body):
    return hmac.new(key, body, hashlib.sha256).digest()


def sign(body, key):
    """The encoding of docs/algorithm.md, "Several routers": field 15 (bytes, 32 long) last."""
    return body + b"\x7a\x20" + mac(key, body)


def ip4(host):
    return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(host)


def report(router, seq, backends, sent_unix_ns):
    m = pb.Report(router=router, seq=seq, interval_us=1000, sent_unix_ns=sent_unix_ns)
    vip_host, vip_port = VIP.rsplit(":", 1)
    for addr, sent, answered in backends:
        host, port = addr.rsplit(":", 1)
        m.backends.append(pb.Backend(vip=ip4(vip_host), vip_port=int(vip_port), addr=ip4(host),
                                     port=int(port), sent_tokens=sent,
                                     answered_tokens=answered))
    return m.SerializeToString()


def send_to_r2(data, src=FAKE):
    host, port = src.rsplit(":", 1)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((host, int(port)))
    u.sendto(data, ("127.0.0.1", 9472))
    u.close()


def drain_cap():
    cap.setblocking(False)
    try:
        while True:
            cap.recv(65536)
    except BlockingIOError:
        pass
    cap.setblocking(True)


def captured(want, what):
    """R1's next datagram at CAP for which want(report) holds: (bytes, report)."""
    cap.settimeout(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            d = cap.recv(65536)
        except socket.timeout:
            continue
        m = pb.Report.FromString(d)
        if want(m):
            return d, m
    raise AssertionError(f"not within 60 s: R1 sent {what}")


def sent_of(m, addr):
    host, port = addr.rsplit(":", 1)
    return next((b.sent_tokens for b in m.backends if b.addr == ip4(host) and
                 b.port == int(port)), None)


def check_signed_by(d, m, key, what):
    body = d[:-34]
    t.check(d[-34:-32] == b"\x7a\x20" and m.auth_tag == d[-32:], f"{what}: no trailing tag")
    t.check(hmac.compare_digest(d[-32:], mac(key, body)), f"{what}: not signed by the key")
    t.check(abs(m.sent_unix_ns - time.time_ns()) < 10e9,
            f"{what}: sent_unix_ns {m.sent_unix_ns} is not the wall clock")


L.wait_for(lambda: all(b["mode"] == "snapshot" for b in explain(env1)["backends"]) and
           all(b["mode"] == "snapshot" for b in explain(env2)["backends"]), 30,
           "both routers scored both backends from their loads")


class Fake:
    """A fake router at src: cumulative counters per backend, as a real one
    keeps them; a report that is to be refused does not move them."""

    def __init__(self, router, src):
        self.router, self.src, self.seq = router, src, 100
        self.c = {A: [0, 0], B: [0, 0]}

    def send(self, changes, key=KEY_A, ago_s=0.0, keep=True):
        """changes: {backend: (more sent, more answered)}; key None: unsigned."""
        self.seq += 1
        bk = []
        for addr, (ds, da) in changes.items():
            c = [self.c[addr][0] + ds, self.c[addr][1] + da]
            if keep:
                self.c[addr] = c
            bk.append((addr, c[0], c[1]))
        body = report(self.router, self.seq, bk, time.time_ns() - int(ago_s * 1e9))
        send_to_r2(sign(body, key) if key else body, self.src)

    def outstanding(self, addr):
        return self.c[addr][0] - self.c[addr][1]


fake = Fake(0x5eed, FAKE)


def marked(n, key=KEY_A):
    """n more tokens of B from the fake router, signed: once R2 shows them, R2
    has handled every datagram sent before (one socket, in order)."""
    base = peer_pending(env2, B)
    fake.send({B: (n, 0)}, key=key)
    L.wait_for(lambda: peer_pending(env2, B) == base + n, 30,
               f"R2 applies the fake router's signed report ({n} more at B)")


def unmark(key=KEY_A):
    """The fake router's B answered: its pending there back to 0."""
    base, n = peer_pending(env2, B), fake.outstanding(B)
    fake.send({B: (0, n)}, key=key)
    L.wait_for(lambda: peer_pending(env2, B) == base - n, 30, "the fake router's B answered")


with t.case("same key: R1's request shows at R2 exactly; R1's datagrams carry the tag"):
    t.check(r1.metric("smg_steer_peer_key_enabled") == 1 and
            r2.metric("smg_steer_peer_key_enabled") == 1, "smg_steer_peer_key_enabled is not 1")
    big = request("big", b"x" * 40000)
    big_tokens = len(big) // BPT
    drain_cap()
    s1 = connect_via(env1)
    x = send_held(s1, big)
    L.wait_for(lambda: peer_pending(env2, x) == big_tokens, 30,
               f"R2 holds R1's {big_tokens} pending tokens at {x}")
    held, m = captured(lambda m: sent_of(m, x) == big_tokens, f"a report of {x}")
    check_signed_by(held, m, KEY_A, "R1's report")
    t.check(refusals(r1) == refusals(r2) == {"auth": 0, "stale": 0, "replay": 0},
            f"refusals between routers with the same key: {refusals(r1)} {refusals(r2)}")

with t.case("R1's datagram sent again from another address: refused as a replay"):
    before = refused(r2, "replay")
    send_to_r2(held, "127.0.0.1:9481")
    L.wait_for(lambda: refused(r2, "replay") == before + 1, 30, "R2 counts the replay")
    marked(7)  # handled after the replay
    want = big_tokens + fake.outstanding(x)  # the marker's too, when x is B
    t.check(peer_pending(env2, x) == want,
            f"R2 counts {peer_pending(env2, x)} tokens at {x}, want {want} (R1's once)")
    t.check(r2.metric("smg_steer_peer_reports_received_total", peer="127.0.0.1:9481") is None,
            "R2 has a row for the replaying address")
    release("big")
    read_answer(s1)
    L.wait_for(lambda: peer_pending(env2, x) == fake.outstanding(x), 30,
               "answered: nothing of R1's at R2")

with t.case("forged reports are refused, counted, warned of, and change nothing"):
    unmark()
    FORGER = "127.0.0.1:9483"
    before = refused(r2, "auth")
    body = report(0xbad, 1, [(A, 5000, 0)], time.time_ns())
    forged = [body, sign(body, KEY_X), sign(body, KEY_A)[:-1]]
    good = bytearray(sign(body, KEY_A))
    good[len(body) - 1] ^= 1  # answered_tokens changed after signing
    forged.append(bytes(good))
    for d in forged:
        send_to_r2(d, FORGER)
    L.wait_for(lambda: refused(r2, "auth") == before + len(forged), 30,
               f"R2 counts the {len(forged)} forged reports (auth)")
    marked(9)
    t.check(peer_pending(env2, A) == 0, f"a forged report applied {peer_pending(env2, A)} at A")
    t.check(r2.metric("smg_steer_peer_reports_received_total", peer=FORGER) is None,
            "R2 has a row for the forger")
    L.wait_for(lambda: f"peer: dropped a report from {FORGER}: " in r2.log_text(), 30,
               "R2 warns of the forger by address")
    send_to_r2(sign(body, KEY_A), FORGER)  # the same report, signed: applied
    L.wait_for(lambda: peer_pending(env2, A) == 5000, 30, "R2 applies the signed report")
    send_to_r2(sign(report(0xbad, 2, [(A, 5000, 5000)], time.time_ns()), KEY_A), FORGER)
    L.wait_for(lambda: peer_pending(env2, A) == 0, 30, "answered: A back to 0")

with t.case("a signed report 60 s old, or 60 s ahead, is refused as stale"):
    before = refused(r2, "stale")
    fake.send({A: (3000, 0)}, ago_s=60, keep=False)
    fake.send({A: (3000, 0)}, ago_s=-60, keep=False)
    L.wait_for(lambda: refused(r2, "stale") == before + 2, 30, "R2 counts both stale reports")
    marked(11)
    t.check(peer_pending(env2, A) == 0, f"a stale report applied {peer_pending(env2, A)} at A")
    unmark()


with t.case("a signed new router id at a live router's address: a restart, taken at once"):
    # Without a key the new id would wait for --peer-timeout (60 s here) of
    # silence from the old one: the key says the same router restarted.
    old, new = Fake(0xa1, "127.0.0.1:9484"), Fake(0xa2, "127.0.0.1:9484")
    old.send({A: (300, 0)})
    L.wait_for(lambda: peer_pending(env2, A) == 300, 30, "R2 applies the old router's report")
    new.send({A: (50, 0)})
    L.wait_for(lambda: peer_pending(env2, A) == 50, 30,
               "R2 takes back the old router's 300 tokens and applies the new one's 50")
    L.wait_for(lambda: r2.metric("smg_steer_peer_forgotten_total", peer=new.src) == 1, 30,
               "the restart counts as forgotten once")
    new.send({A: (0, 50)})
    L.wait_for(lambda: peer_pending(env2, A) == 0, 30, "answered: A back to 0")


def reload_key(d, path, text):
    line = f"reload: the keys of {path} changed"
    n = d.log_text().count(line)
    write_key(path, text)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: d.log_text().count(line) > n, 30, f"the reload of {path}")


def reported(env, addr):
    """What the router of env reports pending at addr: its cumulative bytes,
    each converted to tokens (so not always its pending bytes / BPT)."""
    b = backend(env, addr)
    return b["sent_bytes"] // BPT - b["answered_bytes"] // BPT


def exchange(step, key1, before=None):
    """A request through R1 shows exactly at R2 (R1's datagrams signed with
    key1), and one through R2 exactly at R1; nothing refused on either from
    before (R1's and R2's refusals; None: as they are now) on."""
    before1, before2 = before or (refusals(r1), refusals(r2))
    req = request(f"r1-{step}", b"p" * 4000)
    drain_cap()
    s = connect_via(env1)
    y = send_held(s, req)
    want = reported(env1, y)
    t.check(len(req) // BPT <= want <= len(req) // BPT + 1,
            f"{step}: R1 reports {want} tokens of {len(req)} bytes")
    L.wait_for(lambda: peer_pending(env2, y) == want, 30,
               f"{step}: R2 holds R1's {want} pending tokens at {y}")
    d, m = captured(lambda m: sent_of(m, y) is not None, f"{step}: a report of {y}")
    check_signed_by(d, m, key1, f"{step}: R1's report")
    release(f"r1-{step}")
    read_answer(s)
    s.close()
    L.wait_for(lambda: peer_pending(env2, y) == 0, 30, f"{step}: answered at R2")
    req = request(f"r2-{step}", b"q" * 2000)
    s = connect_via(env2)
    z = send_held(s, req)
    want = reported(env2, z)
    t.check(len(req) // BPT <= want <= len(req) // BPT + 1,
            f"{step}: R2 reports {want} tokens of {len(req)} bytes")
    L.wait_for(lambda: peer_pending(env1, z) == want, 30,
               f"{step}: R1 holds R2's {want} pending tokens at {z}")
    release(f"r2-{step}")
    read_answer(s)
    s.close()
    L.wait_for(lambda: peer_pending(env1, z) == 0, 30, f"{step}: answered at R1")
    t.check(refusals(r1) == before1 and refusals(r2) == before2,
            f"{step}: refusals {before1} -> {refusals(r1)}, {before2} -> {refusals(r2)}")


def r1_takes_r2_again(step, heard):
    """R2 was just reloaded with a key R1 accepts, after R1 refused its
    reports; heard: R1's count of reports taken from R2, read once R1 had
    refused one. A request through R2 shows exactly at R1 again. Returns
    R1's and R2's refusals from R1's first /metrics that counts a report
    taken from R2 after heard: R1 handles R2's datagrams in order (one
    socket), so that scrape counts every one of R2's that R1 refused. A
    scrape right after the reload's log line can miss the last of them: R1
    makes its /metrics copy at most once a second, and R2's peer thread
    takes the key only at its next report."""
    req = request(f"r2-{step}", b"w" * 2000)
    s = connect_via(env2)
    z = send_held(s, req)
    want = reported(env2, z)
    L.wait_for(lambda: peer_pending(env1, z) == want, 30,
               f"{step}: R1 takes R2's signed report ({want} pending tokens at {z})")
    release(f"r2-{step}")
    read_answer(s)
    s.close()
    L.wait_for(lambda: peer_pending(env1, z) == 0, 30, f"{step}: answered at R1")

    def counted():
        m = r1.metrics()
        return m if received(r1, P2, m) > heard else None
    m = L.wait_for(counted, 30, f"{step}: R1's /metrics counts a report it took from R2")
    return refusals(r1, m), refusals(r2)


with t.case("rotation: A, then B verifying too, then B signing, then B alone"):
    reload_key(r1, K1, KEY_A + b"\n" + KEY_B + b"\n")
    reload_key(r2, K2, KEY_A + b"\n" + KEY_B + b"\n")
    exchange("both A, B verifying", KEY_A)
    reload_key(r2, K2, KEY_B + b"\n" + KEY_A + b"\n")  # R2 signs with B, R1 still with A
    exchange("R2 signing B", KEY_A)
    reload_key(r1, K1, KEY_B + b"\n" + KEY_A + b"\n")
    exchange("both signing B", KEY_B)
    reload_key(r1, K1, KEY_B + b"\n")
    reload_key(r2, K2, KEY_B + b"\n")
    exchange("B alone", KEY_B)
    before = refused(r2, "auth")
    fake.send({A: (100, 0)}, key=KEY_A, keep=False)  # the retired key
    L.wait_for(lambda: refused(r2, "auth") == before + 1, 30,
               "R2 refuses a report signed with the retired key")
    marked(13, key=KEY_B)
    t.check(peer_pending(env2, A) == 0, "the retired key's report applied at A")
    unmark(key=KEY_B)

with t.case("R2 without the key (reload): it takes R1's signed reports, R1 refuses its own"):
    n = r2.log_text().count("--peer-key is gone")
    write_cfg2(None)
    r2.send(signal.SIGHUP)
    L.wait_for(lambda: r2.log_text().count("--peer-key is gone") > n, 30, "R2's reload")
    L.wait_for(lambda: r2.metric("smg_steer_peer_key_enabled") == 0, 30, "R2 keyed 0")
    req = request("r1-unkeyed", b"u" * 4000)
    s = connect_via(env1)
    y = send_held(s, req)
    want = reported(env1, y)
    L.wait_for(lambda: peer_pending(env2, y) == want, 30,
               f"unkeyed R2 holds R1's signed {want} tokens at {y}")
    release("r1-unkeyed")
    read_answer(s)
    s.close()
    L.wait_for(lambda: peer_pending(env2, y) == 0, 30, "answered at R2")
    marked(17, key=None)  # an unsigned report: applied by an unkeyed router
    unmark(key=None)
    before = refused(r1, "auth")
    req = request("r2-unkeyed", b"v" * 2000)
    s = connect_via(env2)
    z = send_held(s, req)
    L.wait_for(lambda: refused(r1, "auth") > before, 30, "R1 refuses R2's unsigned reports")
    heard = received(r1, P2)  # none of R2's counted from here until it signs again
    t.check(peer_pending(env1, z) == 0, f"R1 applied {peer_pending(env1, z)} of unsigned R2's")
    L.wait_for(lambda: f"peer: dropped a report from {P2}: " in r1.log_text(), 30,
               "R1 warns of R2 by address")
    release("r2-unkeyed")
    read_answer(s)
    s.close()
    n = r2.log_text().count("reload: reports are signed")
    write_cfg2(K2)
    r2.send(signal.SIGHUP)
    L.wait_for(lambda: r2.log_text().count("reload: reports are signed") > n, 30,
               "R2's reload with the key again")
    exchange("R2 keyed again", KEY_B, r1_takes_r2_again("keyed again", heard))

with t.case("a reload that also changes --peer-listen still rotates the key"):
    # The listen address waits for a restart; the key must not, or R2 would
    # drop out when the fleet takes the old key off. R2 now signs with A,
    # which R1 (B alone) refuses: that shows the new key is in use.
    before = refused(r1, "auth")
    n = r2.log_text().count("(a --peer-key change is applied)")
    write_key(K2, KEY_A + b"\n" + KEY_B + b"\n")
    write_cfg2(K2, listen="127.0.0.1:9474")
    r2.send(signal.SIGHUP)
    L.wait_for(lambda: r2.log_text().count("(a --peer-key change is applied)") > n, 30,
               "R2's reload names the listen change and applies the key")
    L.wait_for(lambda: refused(r1, "auth") > before, 30,
               "R1 refuses R2's reports signed with A (R2 took the new key)")
    heard = received(r1, P2)
    write_key(K2, KEY_B + b"\n")
    write_cfg2(K2)
    reload_key(r2, K2, KEY_B + b"\n")
    exchange("after the listen change", KEY_B, r1_takes_r2_again("listen change", heard))

with t.case("reports from more senders than R2 tracks are counted rejected"):
    REJ = "smg_steer_peer_reports_rejected_total"
    before = r2.metric(REJ) or 0
    senders = [Fake(0x7000 + i, f"127.0.2.{i + 1}:9480") for i in range(130)]
    for f in senders:
        f.send({A: (0, 0)}, key=KEY_B)  # nothing pending: only a place in the table
    L.wait_for(lambda: (r2.metric(REJ) or 0) >= before + 1, 30,
               "R2 counts the reports it has no room for as rejected")
    marked(19, key=KEY_B)
    t.check(peer_pending(env2, A) == 0, f"the senders applied {peer_pending(env2, A)} at A")
    unmark(key=KEY_B)

with t.case("no key in the logs, /metrics or explain"):
    ctl = os.path.join(L.BUILD, "smg-steerctl")
    texts = [r1.log_text(), r2.log_text()]
    for d in (r1, r2):
        with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics",
                                      timeout=5) as resp:
            texts.append(resp.read().decode())
    for env in (env1, env2):
        for fmt in (["-o", "json"], []):
            p = subprocess.run([ctl, "--pin-path", env.pin] + fmt + ["explain", VIP],
                               capture_output=True, text=True, timeout=30)
            texts.append(p.stdout + p.stderr)
    for key in (KEY_A, KEY_B):
        for i, text in enumerate(texts):
            t.check(key.decode() not in text, f"a key in text {i}")
    t.check(f"signed and verified with the key of {K1}" in texts[0],
            "R1's start line does not say that its reports are signed")

with t.case("both routers exit cleanly"):
    rc1, _ = r1.stop()
    rc2, _ = r2.stop()
    t.check(rc1 == 0 and rc2 == 0, f"exit codes {rc1}, {rc2}")

cap.close()
t.done()
