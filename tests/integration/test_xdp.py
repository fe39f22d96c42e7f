#!/usr/bin/python3
"""XDP ingress end to end: real TCP connections from a client namespace, through
smg-steerd's XDP program on a load balancer's veth (native mode), to three
backends that run the shipped decap with the VIPs on lo (tests/lib/topo_lib.py).
With cache affinity on, one client address's flows keep to one backend.

The backends are fake SGLang workers (tests/lib/fake_worker.py) whose static
loads the daemon polls and scores; the test predicts every pick with the
reference water-fill (tests/lib/e2e_lib.py), independent of the daemon's code.
"""
import errno
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import topo_lib as T  # noqa: E402  (first: its cleanup runs after Env's)
import e2e_lib as L  # noqa: E402
from taplib import Tap  # noqa: E402

CTL = os.path.join(L.BUILD, "smg-steerctl")
PORT = 8000
VIP4S, VIP6S = f"{T.VIP4}:{PORT}", f"[{T.VIP6}]:{PORT}"

t = Tap()
topo = T.Topo()
env = L.Env("xdp")
cfg = os.path.join(env.tmp, "steer.yaml")


def ctl(*args, check=True):
    r = subprocess.run([CTL, "--pin-path", env.pin] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"smg-steerctl {' '.join(args)}: {r.returncode}: {r.stderr}")
    return r


def status():
    return json.loads(ctl("-o", "json", "status").stdout)


def xdp_vip(st, vip):
    return next(s for s in st["xdp"]["services"] if s["vip"] == vip)


def xdp_backends(st, vip):
    return {b["address"]: b for b in xdp_vip(st, vip)["backends"]}


def decap_total(kind):
    """ipip or ip6ip6 packets decapsulated by all backends."""
    n = 0
    for i in range(1, 4):
        out = T.run(topo.cmd(f"b{i}", [CTL, "decap", "status"])).stdout
        n += int(out.split(f"{kind} ")[1].split(",")[0])
    return n


# ---- workers ------------------------------------------------------------------------

class Backend:
    """A fake worker inside backend netns bN, serving VIP:port (DSR) and GetLoads."""

    def __init__(self, i, family):
        self.i, self.family = i, family
        self.name = f"b{i}"
        self.addr = T.backend4(i) if family == 4 else T.backend6(i)
        self.traffic = f"{self.addr}:{PORT}" if family == 4 else f"[{self.addr}]:{PORT}"
        self.state_path = os.path.join(env.tmp, f"b{i}v{family}.json")
        self.state = None

    def set_state(self, state):
        self.state = state
        with open(self.state_path + ".tmp", "w") as f:
            json.dump(state, f)
        os.rename(self.state_path + ".tmp", self.state_path)

    def start(self):
        bind = "0.0.0.0" if self.family == 4 else "[::]"
        grpc = f"{self.addr}:30000" if self.family == 4 else f"[{self.addr}]:30000"
        argv = [L.PY, os.path.join(L.TOP, "tests", "lib", "fake_worker.py"), "--name", self.name,
                "--traffic", f"{bind}:{PORT}", "--grpc", grpc, "--state", self.state_path,
                "--pb2-dir", os.path.join(L.BUILD, "py")]
        self.proc = env.spawn(topo.cmd(self.name, argv), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
        return self

    def wait_ready(self):
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"worker {self.name} v{self.family} did not start")


def write_config(backends, extra=()):
    lines = ["load-check-interval: 200ms", "snapshot-max-age: 30s", "xdp-dev: eth0",
             "xdp-mode: native", f"xdp-encap-src: {T.ENCAP_SRC}", *extra, "services:"]
    for vip, fam in ((VIP4S, 4), (VIP6S, 6)):
        lines += [f'  - vip: "{vip}"', "    backends:"]
        for b in backends:
            if b.family == fam:
                lines += [f'      - address: "{b.traffic}"',
                          f'        loads: "{b.traffic.rsplit(":", 1)[0]}:30000"']
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- the client side ------------------------------------------------------------------

def connect(vip, timeout=6.0):
    """(socket, backend name) of a new connection from the client netns; the
    name is an errno name when the connect failed."""
    fam, sa = L.parse_addr(vip)
    s = topo.socket("client", fam)
    s.settimeout(timeout)
    try:
        s.connect(sa)
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
        return s, data.decode().strip() or "EOF"
    except OSError as e:
        s.close()
        return None, errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__


def connect_name(vip):
    s, name = connect(vip)
    if s:
        s.close()
    return name


def burst(vip, n):
    return [connect_name(vip) for _ in range(n)]


def close_cleanly(s):
    """Half-close and read to the end: b'' when the backend that accepted the
    connection still holds it; a reset raises."""
    s.sendall(b"bye\n")
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    rest = s.recv(4096)
    s.close()
    return rest


def settle(d, names=None):
    """Every credit drained and one publish since (see test_e2e.settle)."""
    d.wait_publishes(2, timeout=30)

    def drained():
        m = d.metrics()
        return all(v == 0 for (n, _), v in m.items() if n == "smg_steer_backend_inflight_tokens")
    L.wait_for(drained, 30, "in-flight tokens drained")
    d.wait_publishes(1, timeout=30)


def frozen_burst(d, vip, n, tries=10):
    """n connects with the daemon stopped, so that no publish or drain lands
    among them (see test_e2e.frozen_burst)."""
    for _ in range(tries):
        settle(d)
        d.send(signal.SIGSTOP)
        try:
            svc = next(s for s in status()["services"] if s["vip"] == vip)
            if svc["expires_in_s"] < 5.0 or any(b["inflight_tokens"] for b in svc["backends"]):
                continue
            got = burst(vip, n)
            after = next(s for s in status()["services"] if s["vip"] == vip)
            if (after["fallbacks"], after["refused"]) == (svc["fallbacks"], svc["refused"]):
                return got
        finally:
            d.send(signal.SIGCONT)
    raise AssertionError(f"no burst of {n} between two publishes in {tries} tries")


def reference(backends, family, n):
    entries = [(b.name, *L.reference_costs(b.state)) for b in backends if b.family == family]
    return L.water_fill(entries, n)


def csum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def send_bare_ack(sport):
    """One TCP ACK (no SYN) from the client to VIP4:PORT, of no connection."""
    src, dst = socket.inet_aton(T.CLIENT4), socket.inet_aton(T.VIP4)
    hdr = struct.pack("!HHIIBBHHH", sport, PORT, 12345, 67890, 5 << 4, 0x10, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(hdr))
    hdr = hdr[:16] + struct.pack("!H", csum16(pseudo + hdr)) + hdr[18:]
    # SOCK_RAW with IPPROTO_TCP: the kernel adds the IP header.
    s = topo.socket("client", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    try:
        s.sendto(hdr, (T.VIP4, 0))
    finally:
        s.close()


def tcpext(role, name):
    """A TcpExt counter of /proc/net/netstat inside role's netns."""
    rows = [ln.split() for ln in T.run(topo.cmd(role, ["cat", "/proc/net/netstat"])).stdout
            .splitlines() if ln.startswith("TcpExt:")]
    return int(rows[1][rows[0].index(name)])


def send_too_big(family, cport):
    """ICMP fragmentation-needed (ICMPv6 packet-too-big) from the client's side
    to the VIP, quoting a packet VIP:PORT -> client:cport, as a router between a
    backend and the client sends it."""
    ports = struct.pack("!HHI", PORT, cport, 12345)
    if family == 4:
        inner = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 0, 0x4000, 64, 6, 0,
                            socket.inet_aton(T.VIP4), socket.inet_aton(T.CLIENT4))
        body = struct.pack("!BBHHH", 3, 4, 0, 0, 1400) + inner + ports
        body = body[:2] + struct.pack("!H", csum16(body)) + body[4:]
        s = topo.socket("client", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        dst = (T.VIP4, 0)
    else:
        inner = struct.pack("!IHBB16s16s", 6 << 28, 1460, 6, 64,
                            socket.inet_pton(socket.AF_INET6, T.VIP6),
                            socket.inet_pton(socket.AF_INET6, T.CLIENT6))
        body = struct.pack("!BBHI", 2, 0, 0, 1280) + inner + ports  # the kernel sums it
        s = topo.socket("client", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        dst = (T.VIP6, 0)
    try:
        s.sendto(body, dst)
    finally:
        s.close()


def ping(dst, timeout=5.0):
    """An ICMP echo from the client (no ping binary here): True on a reply."""
    s = topo.socket("client", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    try:
        ident = os.getpid() & 0xffff
        body = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"smg-steer"
        body = body[:2] + struct.pack("!H", csum16(body)) + body[4:]
        s.settimeout(timeout)
        s.sendto(body, (dst, 0))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pkt, (src, _) = s.recvfrom(2048)
            ihl = (pkt[0] & 0xf) * 4
            if src == dst and pkt[ihl] == 0 and struct.unpack("!H", pkt[ihl + 4:ihl + 6])[0] == ident:
                return True
        return False
    except socket.timeout:
        return False
    finally:
        s.close()


class Sniffer:
    """Frames the LB's stack receives on eth0 (after XDP), by IP source."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind(("eth0", 0))
        self.sock.settimeout(0.2)
        self.counts = {}
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while self.running:
            try:
                frame, meta = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            if meta[2] in (socket.PACKET_OUTGOING, socket.PACKET_OTHERHOST):
                continue  # sent by the LB, or flooded by the bridge to everyone
            proto = struct.unpack("!H", frame[12:14])[0]
            if proto == 0x0800:
                src = socket.inet_ntop(socket.AF_INET, frame[26:30])
            elif proto == 0x86DD:
                src = socket.inet_ntop(socket.AF_INET6, frame[22:38])
            else:
                continue
            self.counts[src] = self.counts.get(src, 0) + 1

    def stop(self):
        self.running = False
        self.thread.join(5)
        self.sock.close()
        return self.counts


def xdp_link():
    """The XDP program attached to the LB's eth0: (mode, program name) or None."""
    out = json.loads(T.run(["ip", "-d", "-j", "link", "show", "dev", "eth0"]).stdout)[0]
    x = out.get("xdp")
    if not x:
        return None
    return x.get("mode"), x.get("prog", {}).get("name")


# ---- set-up -----------------------------------------------------------------------------

topo.build(os.path.join(L.BUILD, "tests", "xdp_pass.bpf.o"), [CTL, "decap", "attach"])
T.enter(topo.path("lb"))  # the daemon, its metrics and the sniffer live on the LB
backends = [Backend(i, fam) for fam in (4, 6) for i in (1, 2, 3)]
STATES4 = [L.rank(0, 0.0, 1000.0), L.rank(1000, 0.0, 1000.0), L.rank(0, 0.5, 2000.0)]
STATES6 = [L.rank(500, 0.0, 1000.0), L.rank(0, 0.0, 1000.0), L.rank(0, 0.2, 4000.0)]
for b in backends:
    b.set_state({"mode": "ok", "loads": [(STATES4 if b.family == 4 else STATES6)[b.i - 1]]})
    b.start()
for b in backends:
    b.wait_ready()
write_config(backends)
d = L.Daemon(env, ["--config", cfg]).start()

with t.case("the XDP program runs on the LB's eth0 in native mode, visible in bpftool"):
    link = L.wait_for(xdp_link, 10, "XDP attached")
    t.check(link == (1, "steer_xdp"), f"attachment {link} (mode 1 is native)")
    progs = json.loads(T.run(["bpftool", "-j", "prog", "show", "name", "steer_xdp"]).stdout)
    progs = progs if isinstance(progs, list) else [progs]
    t.check(progs and progs[0]["type"] == "xdp", f"bpftool: {progs}")
    for m in ("steer_xflows", "steer_xvipst", "steer_xbkst"):
        T.run(["bpftool", "map", "show", "pinned", os.path.join(env.pin, m)])
    st = status()
    t.check(st["xdp"]["devices"] == ["eth0"], f"status xdp: {st['xdp']}")

with t.case("IPv4 connections from the client follow the reference water-fill"):
    before = status()
    got = frozen_burst(d, VIP4S, 12)
    want = reference(backends, 4, 12)
    t.check(got == want, f"got  {got}\nwant {want}")
    after = status()
    nf = xdp_vip(after, VIP4S)["new_flows"] - xdp_vip(before, VIP4S)["new_flows"]
    t.check(nf >= 12, f"new flows counted {nf}")
    bk = {a.split(":")[0]: v["new_flows"] - xdp_backends(before, VIP4S)[a]["new_flows"]
          for a, v in xdp_backends(after, VIP4S).items()}
    for i in (1, 2, 3):
        t.check(bk[T.backend4(i)] >= got.count(f"b{i}"), f"backend counters {bk} for {got}")
    L.wait_for(lambda: (d.metric("smg_steer_xdp_new_flows_total", vip=VIP4S) or 0) >= 12, 10,
               "/metrics smg_steer_xdp_new_flows_total >= 12")
    L.wait_for(lambda: (d.metric("smg_steer_xdp_backend_new_flows_total", vip=VIP4S,
                                 backend=f"{T.backend4(1)}:{PORT}") or 0) >= got.count("b1"),
               10, "/metrics smg_steer_xdp_backend_new_flows_total of b1")

with t.case("IPv6 works: connections follow the water-fill, IPv6-in-IPv6 decapsulated"):
    d6 = decap_total("ip6ip6")
    got = frozen_burst(d, VIP6S, 9)
    want = reference(backends, 6, 9)
    t.check(got == want, f"got  {got}\nwant {want}")
    t.check(decap_total("ip6ip6") > d6, "no IPv6-in-IPv6 packet decapsulated")

with t.case("replies go from the backend to the client directly (DSR)"):
    sn = Sniffer()
    p0 = xdp_vip(status(), VIP4S)["packets"]
    s, name = connect(VIP4S)
    t.check(s is not None, f"connect: {name}")
    s.sendall(b"x" * 300000)  # the backend ACKs it: ~100+ packets come back
    t.check(close_cleanly(s) == b"", "connection not closed cleanly")
    time.sleep(1.0)  # at least one load poll's answer reaches the LB: the capture works
    counts = sn.stop()
    p1 = xdp_vip(status(), VIP4S)["packets"]
    t.check(counts.get(T.VIP4, 0) == 0, f"the LB received {counts.get(T.VIP4)} packets from the VIP")
    t.check(p1 - p0 >= 100, f"XDP forwarded only {p1 - p0} packets of the upload")
    t.check(sum(counts.get(T.backend4(i), 0) for i in (1, 2, 3)) > 0,
            f"the capture saw nothing from the backends: {counts}")

with t.case("ICMP too-big for a VIP follows its flow to the backend (IPv4 and IPv6)"):
    for fam, vip in ((4, VIP4S), (6, VIP6S)):
        s, name = connect(vip)
        t.check(s is not None, f"connect: {name}")
        before = {f"b{i}": tcpext(f"b{i}", "OutOfWindowIcmps") for i in (1, 2, 3)}
        icmp0 = xdp_vip(status(), vip)["icmp"]
        send_too_big(fam, s.getsockname()[1])
        # The backend's TCP found the connection the error quotes (its made-up
        # sequence number is then out of window): the error reached the
        # backend that holds the flow.
        L.wait_for(lambda: tcpext(name, "OutOfWindowIcmps") > before[name], 10,
                   f"the too-big error at {name}")
        after = {f"b{i}": tcpext(f"b{i}", "OutOfWindowIcmps") for i in (1, 2, 3)}
        t.check(all(after[b] == before[b] for b in after if b != name),
                f"the error reached another backend: {before} -> {after}")
        t.check(xdp_vip(status(), vip)["icmp"] == icmp0 + 1, "icmp not counted once")
        t.check(close_cleanly(s) == b"", f"flow to {name} not closed cleanly")

with t.case("a non-SYN packet of no known flow is dropped and counted, never forwarded"):
    miss0 = xdp_vip(status(), VIP4S)["lru_miss"]
    dec0 = decap_total("ipip")
    send_bare_ack(40001)
    L.wait_for(lambda: xdp_vip(status(), VIP4S)["lru_miss"] > miss0, 10, "the LRU miss counted")
    t.check(xdp_vip(status(), VIP4S)["lru_miss"] == miss0 + 1, "more than one miss counted")
    t.check(decap_total("ipip") == dec0, "the stray ACK reached a backend")

with t.case("unrelated traffic passes untouched: ping and TCP to the LB's own address"):
    before = xdp_vip(status(), VIP4S)
    listeners = []
    for port in (PORT, 2222):  # a VIP's port, and another
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((T.LB4, port))
        ls.listen(8)
        listeners.append(ls)

    def serve(ls):
        c, _ = ls.accept()
        c.sendall(b"lb\n")
        c.close()
    threads = [threading.Thread(target=serve, args=(ls,), daemon=True) for ls in listeners]
    for th in threads:
        th.start()
    t.check(ping(T.LB4), "no echo reply from the LB")
    for port in (PORT, 2222):
        name = connect_name(f"{T.LB4}:{port}")
        t.check(name == "lb", f"TCP to the LB's port {port}: {name}")
    for ls in listeners:
        ls.close()
    after = xdp_vip(status(), VIP4S)
    t.check(after["packets"] == before["packets"] and after["new_flows"] == before["new_flows"],
            f"XDP counted unrelated traffic: {before} -> {after}")

with t.case("a SYN reusing a closed flow's 4-tuple is chosen afresh (not sent to the old backend)"):
    def from_port(sport):
        s = topo.socket("client", socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((T.CLIENT4, sport))
        s.settimeout(6)
        s.connect((T.VIP4, PORT))
        name = s.recv(64).decode().strip()
        # RST, not FIN: no TIME_WAIT, so that the port can connect again at once.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        return name
    first = from_port(41000)
    ctl("drain", f"{T.backend4(int(first[1]))}:{PORT}")
    try:
        second = from_port(41000)
        t.check(second.startswith("b") and second != first,
                f"the reused 4-tuple went to {second}, drained {first}")
    finally:
        ctl("undrain", f"{T.backend4(int(first[1]))}:{PORT}")

with t.case("long-lived flows survive 50 republishes, score changes and a drain, no reset"):
    flows = [connect(VIP4S) for _ in range(6)] + [connect(VIP6S) for _ in range(3)]
    t.check(all(s for s, _ in flows), f"connects: {[n for _, n in flows]}")
    live0 = {(sv["vip"], b["address"]): b["live"] for sv in status()["services"]
             for b in sv["backends"]}
    drained = T.backend4(int(flows[0][1][1]))
    # Scores change: the picks for new connections move.
    for b in backends:
        b.set_state({"mode": "ok", "loads": [L.rank(300 * b.i, 0.1, 1500.0)]})
    start = d.publishes()
    deadline = time.monotonic() + 120
    drained_at = None
    while d.publishes() < start + 50:
        t.check(time.monotonic() < deadline, "no 50 publishes within 120 s")
        for s, _ in flows:
            s.sendall(b".")
        if drained_at is None and d.publishes() >= start + 25:
            ctl("drain", f"{drained}:{PORT}")
            drained_at = d.publishes()
        time.sleep(0.1)
    new = burst(VIP4S, 6)
    t.check(f"b{flows[0][1][1]}" not in new and all(n.startswith("b") for n in new),
            f"new connections after draining {drained}: {new}")
    ended0 = sum(b["ended"] for sv in status()["xdp"]["services"] for b in sv["backends"])
    for s, name in flows:
        t.check(close_cleanly(s) == b"", f"flow to {name} not closed cleanly")
    L.wait_for(lambda: sum(b["ended"] for sv in status()["xdp"]["services"]
                                   for b in sv["backends"]) >= ended0 + 9, 10,
                       "the clients' FINs counted")
    live1 = {(sv["vip"], b["address"]): b["live"] for sv in status()["services"]
             for b in sv["backends"]}
    # Every XDP flow is closed now: the clients' FINs took each off its live count.
    t.check(sum(live0.values()) >= 9 and not any(live1.values()),
            f"live counts with 9 flows open {live0}, all closed {live1}")
    ctl("undrain", f"{drained}:{PORT}")

def reload_with(extra):
    seen = d.log_text().count("reloaded ")
    write_config(backends, extra)
    d.send(signal.SIGHUP)
    L.wait_for(lambda: d.log_text().count("reloaded ") > seen, 30, "the reload applied")
    settle(d)


with t.case("cache affinity at XDP ingress: one client address keeps to one backend"):
    reload_with(["affinity: cgroup", "affinity-slack: 1h"])
    before = next(s for s in status()["services"] if s["vip"] == VIP4S)["affinity"]
    got = burst(VIP4S, 8)
    after = next(s for s in status()["services"] if s["vip"] == VIP4S)["affinity"]
    t.check(len(set(got)) == 1 and got[0].startswith("b"), f"one client's flows: {got}")
    t.check(after["stay"] - before["stay"] >= 7, f"stays counted: {before} -> {after}")
    reload_with([])
    got = burst(VIP4S, 8)
    t.check(len(set(got)) > 1, f"affinity off again, the flows spread: {got}")


with t.case("a daemon restart and --keep-pinned keep the XDP program attached, flows going"):
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    t.check(xdp_link() is None, "the daemon without --keep-pinned left XDP attached")
    t.check(not os.path.exists(os.path.join(env.pin, "steer_xflows")), "pins left behind")
    d = L.Daemon(env, ["--config", cfg, "--keep-pinned"]).start()
    L.wait_for(xdp_link, 10, "XDP attached again")
    settle(d)
    flows = [connect(VIP4S) for _ in range(3)] + [connect(VIP6S)]
    t.check(all(s for s, _ in flows), f"connects: {[n for _, n in flows]}")
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    t.check(xdp_link() == (1, "steer_xdp"), "XDP detached by a --keep-pinned exit")
    for s, _ in flows:
        s.sendall(b"still here\n")
    got = burst(VIP4S, 3)  # the pinned tables still steer (they expire after 30 s)
    t.check(all(n.startswith("b") for n in got), f"new connections while down: {got}")
    d = L.Daemon(env, ["--config", cfg, "--keep-pinned"]).start()
    t.check("(adopted)" in d.log_text(), "the restarted daemon did not adopt the pins")
    t.check(xdp_link() == (1, "steer_xdp"), "XDP not attached after the restart")
    for s, name in flows:
        s.sendall(b"after restart\n")
        t.check(close_cleanly(s) == b"", f"flow to {name} broke across the restart")
    got = burst(VIP6S, 3)
    t.check(all(n.startswith("b") for n in got), f"new connections after the restart: {got}")

with t.case("a restart with --xdp-mode generic re-attaches in generic mode, flows going"):
    s, name = connect(VIP4S)
    t.check(s is not None, f"connect: {name}")
    d.stop()
    d = L.Daemon(env, ["--config", cfg, "--keep-pinned", "--xdp-mode", "generic"]).start()
    t.check(xdp_link() == (2, "steer_xdp"), f"attachment {xdp_link()} (mode 2 is generic)")
    s.sendall(b"generic\n")
    t.check(close_cleanly(s) == b"", f"flow to {name} broke across the mode change")
    got = burst(VIP4S, 3) + burst(VIP6S, 3)
    t.check(all(n.startswith("b") for n in got), f"new connections in generic mode: {got}")

with t.case("bad XDP settings are refused, naming the field; nothing running is lost"):
    r = subprocess.run([os.path.join(L.BUILD, "smg-steerd"), "--vip", VIP4S, "--backend",
                        f"{T.backend4(1)}:{PORT}", "--xdp-mode", "fast", "--check-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t.check(r.returncode == 2 and "--xdp-mode: must be native or generic" in r.stderr, r.stderr)
    r = subprocess.run([os.path.join(L.BUILD, "smg-steerd"), "--vip", VIP4S, "--backend",
                        f"{T.backend4(1)}:{PORT}", "--xdp-encap-src", "198.51.100.0/30",
                        "--check-config"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    t.check(r.returncode == 2 and "--xdp-encap-src" in r.stderr, r.stderr)
    s, name = connect(VIP4S)
    t.check(s is not None, f"connect: {name}")
    rc, _ = d.stop()  # --keep-pinned: the XDP program stays
    bad = L.Daemon(env, ["--config", cfg, "--xdp-dev", "nosuch0"])
    bad.start(wait_publish=False)
    rc = bad.proc.wait(30)
    t.check(rc == 1 and "no interface 'nosuch0'" in bad.log_text(), bad.log_text()[-500:])
    t.check(xdp_link() == (2, "steer_xdp"), "a refused start touched the running XDP program")
    t.check(close_cleanly(s) == b"", f"flow to {name} broke")

with t.case("smg-steerctl uninstall detaches the XDP program and removes its pins"):
    ctl("uninstall")
    t.check(xdp_link() is None, "uninstall left XDP attached")
    t.check(not os.path.exists(env.pin), "pins left")

with t.case("decap attach --pin-dir pins under the given path; detach removes it all"):
    pin = f"/sys/fs/bpf/smg-steer-test-decap-{os.getpid()}"
    try:
        T.run(topo.cmd("b1", [CTL, "decap", "attach", "eth0", "--pin-dir", pin]))
        t.check(sorted(os.listdir(pin)) == ["steer_dcp_ctr", "steer_dcp_prog"],
                f"pins: {os.listdir(pin)}")
        out = T.run(topo.cmd("b1", [CTL, "decap", "status"])).stdout
        t.check(out.startswith("eth0: decap attached"), out)
        T.run(topo.cmd("b1", [CTL, "decap", "detach", "eth0", "--pin-dir", pin]))
        t.check(not os.path.exists(pin), "the pin directory is left")
        out = T.run(topo.cmd("b1", [CTL, "decap", "status"])).stdout
        t.check("no interface" in out, out)
        r = T.run(topo.cmd("b1", [CTL, "decap", "detach", "eth0"]), check=False)
        t.check(r.returncode == 1 and "no smg-steer decap on eth0" in r.stderr, r.stderr)
    finally:
        T.run(["rm", "-rf", pin], check=False)
t.done()
