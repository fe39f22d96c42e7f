#!/usr/bin/python3
"""Ingress benchmark: new connections per second and per-connection latency
from a client off the node, through six paths over the same three backends,
interleaved round by round in one run.

    ingress.py run --build build --tmp DIR --prefix NAME --rounds 6 --seconds 1 \\
        --concurrency 1,4 --csv ingress.csv --bpf-csv ingress_bpf.csv \\
        [--arms xdp,xdpg,nft,haproxy,ecmp,direct]

Called by tools/bench/run.sh (BENCH_PARTS=ingress); runs as root, standalone
too. The topology (tools/bench/ingress_topo.py) is network namespaces joined
by a bridge, documentation addresses only, removed at exit whatever happens.
Every backend runs bench/onebyte --request (accept, read the request, write
one byte naming the backend, close) on port 8000; the client runs
bench/connbench --request (connect, write a one-byte request, read the answer,
close, as fast as it can) against:
  xdp      203.0.113.10:8000, steered by smg-steerd's XDP program on the LB's
           veth (new flows chosen by the published scores, IPIP to the backend
           with XDP_TX); the backends decapsulate with the shipped BPF decap and
           answer the client directly (DSR), from the VIP on their lo;
  xdpg     203.0.113.11:8000, the same in generic mode (--xdp-mode generic) on
           an LB namespace of its own;
  nft      203.0.113.20:8000, nftables DNAT in the LB namespace laid out as
           kube-proxy's nftables mode lays out a LoadBalancer service with
           externalTrafficPolicy Cluster: a service-ips verdict map, `numgen
           random mod 3 vmap` over one chain per endpoint, masquerade (port-
           preserving: kube-proxy's `fully-random` with one client opening ~10k
           connections/s picks NAT tuples that a backend still holds in
           TIME_WAIT from an unrelated connection, whose SYN is then answered
           with an ACK and retried 1 s later: measured here, 1% of SYNs);
  haproxy  203.0.113.30:8000, HAProxy 2.6 mode tcp, balance leastconn;
  ecmp     203.0.113.40:8000, a router namespace forwarding by one ECMP route
           over the backends (5-tuple hash), the address on every backend's lo:
           the XDP path's packet path (client -> LB -> backend, replies
           direct) with the kernel's forwarding instead of XDP and IPIP;
  direct   192.0.2.11:8000, the first backend itself, no LB: the limit.
The XDP path also gets bpf_stats (BPF_ENABLE_STATS, held by this process):
the program's run time per packet over the connection rounds, over a phase
of long-lived flows that send only non-SYN packets, and over a burst of SYNs of
new flows only (raw, from addresses nobody has), the empty XDP program's
(bench/xdppass, which the LB veth's peer needs anyway to accept XDP_TX) as the
floor, and the decap's on the backends.

Modes used inside the namespaces: `ingress.py sink --port P` (accept, read
and discard), `ingress.py stream --addr A:P --flows N --seconds S` (N
connections sending one-byte writes, TCP_NODELAY), `ingress.py syns --src S
--dst A:P --count N` (raw SYNs) and `ingress.py probe --addr A:P` (one
exchange: is the path up).
"""
import argparse
import csv
import ctypes
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ingress_topo as topo  # noqa: E402
import ingress_xdp  # noqa: E402

PY = "/usr/bin/python3"
# The SYN bursts' sources: addresses of the bridge's segment that no namespace has.
SYN_SRC_FIRST, SYN_SRC_COUNT = 100, 100
ME = os.path.abspath(__file__)
CONN_FIELDS = ["label", "concurrency", "seconds", "connections", "errors", "conns_per_s", "p50_us",
               "p99_us", "mean_us", "per_conn_us", "backends_seen", "attempts"]
ARM_ADDR = {"xdp": topo.VIP_XDP, "xdpg": topo.VIP_XDPG, "nft": topo.VIP_NFT, "haproxy": topo.VIP_HAP,
            "ecmp": topo.VIP_RT, "direct": topo.BACKENDS[0]}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] ingress: {msg}", flush=True)


# ---- the comparison paths ---------------------------------------------------------------

def nft_ruleset():
    """kube-proxy's nftables layout for one external service, three endpoints."""
    n = len(topo.BACKENDS)
    vmap = ", ".join(f"{i} : goto endpoint-{i}" for i in range(n))
    eps = "\n".join(f"""	chain endpoint-{i} {{
		ip saddr {b} jump mark-for-masquerade
		meta l4proto tcp dnat to {b}:{topo.PORT}
	}}""" for i, b in enumerate(topo.BACKENDS))
    return f"""table ip smg-bench {{
	map service-ips {{
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = {{ {topo.VIP_NFT} . tcp . {topo.PORT} : goto external-svc }}
	}}
	chain nat-prerouting {{
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr . meta l4proto . th dport vmap @service-ips
	}}
	chain nat-postrouting {{
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}}
	chain mark-for-masquerade {{
		mark set mark or 0x4000
	}}
	chain masquerading {{
		mark and 0x4000 == 0 return
		mark set mark xor 0x4000
		masquerade
	}}
	chain external-svc {{
		jump mark-for-masquerade
		goto service-svc
	}}
	chain service-svc {{
		numgen random mod {n} vmap {{ {vmap} }}
	}}
{eps}
}}
"""


def haproxy_conf():
    servers = "\n".join(f"\tserver b{i + 1} {b}:{topo.PORT}" for i, b in enumerate(topo.BACKENDS))
    return f"""global
	maxconn 8000
defaults
	mode tcp
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend ingress
	bind {topo.VIP_HAP}:{topo.PORT}
	default_backend ingress
backend ingress
	balance leastconn
{servers}
"""


def start_backends(t, args):
    for i in range(len(topo.BACKENDS)):
        role = f"b{i + 1}"
        out = os.path.join(args.tmp, f"onebyte-{role}.out")
        p = t.spawn(role, [os.path.join(args.build, "bench", "onebyte"), "--base", "0.0.0.0", "--port",
                           str(topo.PORT), "--count", "1", "--byte", str(i + 1), "--request"], out,
                  f"onebyte {role}")
        t.wait_line(p, out, "READY", f"onebyte in {role}")
        out = os.path.join(args.tmp, f"sink-{role}.out")
        p = t.spawn(role, [PY, ME, "sink", "--port", str(topo.FLOW_PORT)], out, f"sink {role}")
        t.wait_line(p, out, "READY", f"sink in {role}")


def start_nft(t, args):
    path = os.path.join(args.tmp, "ingress.nft")
    with open(path, "w") as f:
        f.write(nft_ruleset())
    t.run("lbn", "nft", "-f", path)


def start_haproxy(t, args):
    path = os.path.join(args.tmp, "ingress-haproxy.cfg")
    with open(path, "w") as f:
        f.write(haproxy_conf())
    t.spawn("lbh", ["haproxy", "-f", path, "-db"], os.path.join(args.tmp, "haproxy.out"), "haproxy")


def wait_path(t, arm, timeout=15.0):
    """One connection through the path succeeds (ARP resolved, proxies up)."""
    end = time.monotonic() + timeout
    last = ""
    while time.monotonic() < end:
        r = subprocess.run(t.nsenter("cli") + [PY, ME, "probe", "--addr", f"{ARM_ADDR[arm]}:{topo.PORT}"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return
        last = r.stderr.strip()
        time.sleep(0.2)
    raise topo.TopoError(f"path {arm} does not answer on {ARM_ADDR[arm]}:{topo.PORT}: {last}")


# ---- bpf_stats ---------------------------------------------------------------------------

BPF_ENABLE_STATS = 32
SYS_BPF = 321  # x86_64


def enable_bpf_stats():
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): on while the returned fd is open,
    off again by itself when this process exits, however it exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)  # enable_stats.type = BPF_STATS_RUN_TIME (0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, attr, 8)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def prog_stats(prog_id):
    """(run_time_ns, run_cnt) of a program, by id."""
    r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)], capture_output=True,
                       text=True, check=True)
    info = json.loads(r.stdout)
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


class StatSet:
    """Named groups of program ids; delta() over an interval, summed per group."""

    def __init__(self, groups):
        self.groups = groups  # name -> [prog ids]

    def snap(self):
        return {g: [prog_stats(i) for i in ids] for g, ids in self.groups.items()}

    @staticmethod
    def delta(a, b):
        out = {}
        for g in a:
            ns = sum(y[0] - x[0] for x, y in zip(a[g], b[g]))
            cnt = sum(y[1] - x[1] for x, y in zip(a[g], b[g]))
            out[g] = (ns, cnt)
        return out


# ---- measuring ---------------------------------------------------------------------------

def connbench(t, args, arm, conc, seconds, warmup_ms=250):
    argv = [os.path.join(args.build, "bench", "connbench"), "--addr", f"{ARM_ADDR[arm]}:{topo.PORT}",
            "--seconds", str(seconds), "--concurrency", str(conc), "--label", arm,
            "--warmup-ms", str(warmup_ms), "--request"]
    out = t.run("cli", *argv)
    row = dict(zip(CONN_FIELDS, out.strip().split(",")))
    if len(row) != len(CONN_FIELDS):
        raise topo.TopoError(f"connbench printed {out!r}")
    return row


def stream(t, vip, seconds, flows):
    t.run("cli", PY, ME, "stream", "--addr", f"{vip}:{topo.FLOW_PORT}", "--flows", str(flows),
          "--seconds", str(seconds))
    return flows


def syn_burst(t, vip, r, count):
    """count SYNs of new flows to the VIP from unassigned client addresses (round r's own
    address), so the XDP program runs its new-flow path only. Nothing listens on that
    port: each backend answers with a reset to an address nobody has, and no packet
    of these flows follows the SYN. Returns the SYNs sent."""
    src = f"{topo.NET}.{SYN_SRC_FIRST + r % SYN_SRC_COUNT}"
    out = t.run("cli", PY, ME, "syns", "--src", src, "--dst", f"{vip}:{topo.SYN_PORT}",
                "--count", str(count))
    return int(out.strip())


def rotated(items, r):
    """The round's order: rotated by one each round, so no path always runs first."""
    k = r % len(items)
    return items[k:] + items[:k]


# The XDP arms: name -> (LB namespace, VIP, --xdp-mode, prefix of their bpf_stats phases).
XDP_ARMS = {"xdp": ("lbx", topo.VIP_XDP, "native", ""),
            "xdpg": ("lbg", topo.VIP_XDPG, "generic", "g-")}


def start_xdp_arms(t, args, arms):
    """Start the XDP arms asked for; drop them from arms (and say why) if the build
    has no XDP path. Returns {arm: XdpPath}."""
    paths = {a: ingress_xdp.XdpPath(t, args, log, a, *XDP_ARMS[a][:3]) for a in XDP_ARMS
             if a in arms}
    if not paths:
        return {}
    why = next(iter(paths.values())).unavailable()
    if why:
        log(f"XDP path WAITING, not measured: {why}")
        with open(os.path.join(os.path.dirname(args.csv), "ingress_waiting.txt"), "w") as f:
            f.write(why + "\n")
        for a in paths:
            arms.remove(a)
        return {}
    stale = os.path.join(os.path.dirname(args.csv), "ingress_waiting.txt")
    if os.path.exists(stale):
        os.unlink(stale)
    decaps = ingress_xdp.start_backend_side(t, args, log)
    for p in paths.values():
        p.start(decaps)
    return paths


def bpf_phase(stats, r, phase, fn):
    """Run fn() between two snapshots; rows of the programs' run time and count."""
    before = stats.snap()
    syns = fn()
    d = StatSet.delta(before, stats.snap())
    return [{"round": r, "phase": phase, "prog": g, "run_time_ns": ns, "run_cnt": cnt,
             "syns": syns} for g, (ns, cnt) in d.items()]


def bench(args):
    t = topo.Topo(args.prefix, log)
    paths = {}
    rows, bpf_rows = [], []
    try:
        t.build()
        start_backends(t, args)
        arms = [a for a in args.arms.split(",") if a]
        if "nft" in arms:
            start_nft(t, args)
        if "haproxy" in arms:
            start_haproxy(t, args)
        paths = start_xdp_arms(t, args, arms)
        for arm in arms:
            wait_path(t, arm, timeout=30.0)  # the XDP paths: once smg-steerd has published
        stats = {}
        if paths:
            enable_bpf_stats.fd = enable_bpf_stats()  # held open until this process exits
        for a, p in paths.items():
            p.wait_attached()
            stats[a] = StatSet(p.prog_groups())
        concs = [int(c) for c in args.concurrency.split(",")]
        log(f"warm-up: {', '.join(arms)}")
        for arm in arms:
            connbench(t, args, arm, concs[-1], 0.3, warmup_ms=0)
        for r in range(1, args.rounds + 1):
            for conc in concs:
                log(f"round {r} of {args.rounds}, concurrency {conc}: {' '.join(rotated(arms, r))}")
                for arm in rotated(arms, r):
                    if arm not in stats:
                        rows.append({"round": r, "arm": arm, **connbench(t, args, arm, conc,
                                                                         args.seconds)})
                        continue
                    out = {}

                    def one():
                        out.update(connbench(t, args, arm, conc, args.seconds))
                        return out["attempts"]
                    bpf_rows += bpf_phase(stats[arm], r, f"{XDP_ARMS[arm][3]}conn{conc}", one)
                    rows.append({"round": r, "arm": arm, **out})
            for a, st in stats.items():
                vip, pre = XDP_ARMS[a][1], XDP_ARMS[a][3]
                bpf_rows += bpf_phase(st, r, f"{pre}flows",
                                      lambda: stream(t, vip, args.flow_seconds, args.flows))
                bpf_rows += bpf_phase(st, r, f"{pre}syns", lambda: syn_burst(t, vip, r, args.syns))
        for p in paths.values():
            p.check_after()
    finally:
        t.teardown()
    write_csv(args.csv, ["round", "arm"] + CONN_FIELDS[1:], rows)
    write_csv(args.bpf_csv, ["round", "phase", "prog", "run_time_ns", "run_cnt", "syns"], bpf_rows)


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


# ---- helpers run inside the namespaces ----------------------------------------------------

def split_addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def sink_main(args):
    """Accept on the wildcard address, read and discard until each peer closes."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", args.port))
    ls.listen(128)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("READY", flush=True)
    while True:
        for key, _ in sel.select():
            if key.fileobj is ls:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()


def stream_main(args):
    """N established flows sending one-byte segments (TCP_NODELAY) for S seconds."""
    addr = split_addr(args.addr)
    socks = []
    for _ in range(args.flows):
        s = socket.create_connection(addr, timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append(s)
    end = time.monotonic() + args.seconds
    sent = 0
    while time.monotonic() < end:
        for s in socks:
            s.send(b"x")
            sent += 1
    for s in socks:
        s.close()
    print(sent)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def syns_main(args):
    """--count TCP SYNs from --src (ports 1024, 1025, ...) to --dst, raw; prints the count."""
    host, port = split_addr(args.dst)
    src, dst = socket.inet_aton(args.src), socket.inet_aton(host)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)  # IP_HDRINCL
    sent = 0
    for i in range(args.count):
        sport = 1024 + i % 64512
        tcp = struct.pack("!HHIIBBHHH", sport, port, i * 7919, 0, 5 << 4, 0x02, 64240, 0, 0)
        pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xFFFF, 0x4000, 64,
                         socket.IPPROTO_TCP, 0, src, dst)  # the kernel fills the checksum
        s.sendto(ip + tcp, (host, 0))
        sent += 1
    print(sent)


def probe_main(args):
    """One exchange (a byte each way): exit 0, else 1 with the reason."""
    try:
        with socket.create_connection(split_addr(args.addr), timeout=2) as s:
            s.sendall(b"r")
            if len(s.recv(1)) != 1:
                raise OSError("closed without the byte")
    except OSError as e:
        print(e, file=sys.stderr)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode")
    b = sub.add_parser("run")
    b.add_argument("--build", required=True)
    b.add_argument("--tmp", required=True)
    b.add_argument("--prefix", default=f"smgb{os.getpid()}")
    b.add_argument("--rounds", type=int, default=5)
    b.add_argument("--seconds", type=float, default=1.0)
    b.add_argument("--concurrency", default="1,4")
    b.add_argument("--arms", default="xdp,xdpg,nft,haproxy,ecmp,direct")
    b.add_argument("--flows", type=int, default=4)
    b.add_argument("--flow-seconds", type=float, default=0.5)
    b.add_argument("--syns", type=int, default=10000)
    b.add_argument("--csv", required=True)
    b.add_argument("--bpf-csv", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    s = sub.add_parser("stream")
    s.add_argument("--addr", required=True)
    s.add_argument("--flows", type=int, default=4)
    s.add_argument("--seconds", type=float, default=0.5)
    s = sub.add_parser("syns")
    s.add_argument("--src", required=True)
    s.add_argument("--dst", required=True)
    s.add_argument("--count", type=int, default=10000)
    s = sub.add_parser("probe")
    s.add_argument("--addr", required=True)
    args = ap.parse_args()
    if args.mode == "sink":
        return sink_main(args)
    if args.mode == "stream":
        return stream_main(args)
    if args.mode == "syns":
        return syns_main(args)
    if args.mode == "probe":
        return probe_main(args)
    if args.mode != "run":
        ap.error("a mode: run, sink, stream, syns or probe")
    if os.geteuid() != 0:
        sys.exit("ingress: must run as root (network namespaces, BPF)")
    # SIGTERM (run.sh's cleanup) and Ctrl-C unwind through bench()'s finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench(args)


if __name__ == "__main__":
    main()
