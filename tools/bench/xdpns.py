#!/usr/bin/python3
"""XDP ingress and decap: nanoseconds per packet, by kind of packet.

    STEER_BUILD=$PWD/build /usr/bin/python3 tools/bench/xdpns.py [N]

Builds the test topology (tests/lib/topo_lib.py: client, LB with XDP in native
mode, three backends with the decap), starts the real smg-steerd against
three fake workers, and runs the attached programs on crafted frames with
BPF_PROG_TEST_RUN (libbpf's bpf_prog_test_run_opts), whose duration the
kernel measures around the program alone:

  syn        a SYN of a new flow: choose() under the service lock, credit,
             flow insert, FIB look-up, encapsulation (one run per flow, N flows)
  syn-retx   the same SYN again: flow found, not credited again
  est        an ACK of an established flow (flow hit, counters, encapsulation)
  pass-tcp   TCP to a port no VIP uses (one array look-up, XDP_PASS)
  pass-udp   not TCP (no look-up at all)
  decap      the backend's tc program on an IPv4-in-IPv4 frame (one run per
             frame: a run shrinks the frame it is given)

Every kind is run once per call, N times, averaged: a run rewrites the frame
it is given, so the kernel's repeat would measure the rewritten frame. A
single run's duration includes the test-run timer reads and bottom-half
toggling around it; pass-udp (parse and return) bounds that overhead.

Also prints the live bpf_stats (run_time_ns / run_cnt) of both programs over
an upload through the topology, if kernel.bpf_stats_enabled is 1.
Everything it creates is removed at exit. Not part of `make test`.
"""
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "tests", "lib"))
os.environ.setdefault("STEER_BUILD", os.path.join(TOP, "build"))
import topo_lib as T  # noqa: E402
import e2e_lib as L  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
CTL = os.path.join(L.BUILD, "smg-steerctl")
PORT = 8000


class TestRunOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p),
                ("data_out", ctypes.c_void_p), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_void_p),
                ("ctx_out", ctypes.c_void_p), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32)]


bpf = ctypes.CDLL("libbpf.so.1", use_errno=True)


def prog_fd(prog_id):
    fd = bpf.bpf_prog_get_fd_by_id(ctypes.c_uint32(prog_id))
    if fd < 0:
        raise OSError(-fd, f"prog id {prog_id}")
    return fd


def run_prog(fd, frame, repeat=1, ctx=None):
    """(retval, duration ns per run)."""
    data = ctypes.create_string_buffer(frame, len(frame))
    out = ctypes.create_string_buffer(len(frame) + 256)
    o = TestRunOpts(sz=ctypes.sizeof(TestRunOpts), data_in=ctypes.addressof(data),
                    data_size_in=len(frame), data_out=ctypes.addressof(out),
                    data_size_out=len(out), repeat=repeat)
    if ctx is not None:
        c = ctypes.create_string_buffer(ctx, len(ctx))
        o.ctx_in = ctypes.addressof(c)
        o.ctx_size_in = len(ctx)
    rc = bpf.bpf_prog_test_run_opts(fd, ctypes.byref(o))
    if rc != 0:
        raise OSError(-rc, "bpf_prog_test_run_opts")
    return o.retval, o.duration


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s >> 16) + (s & 0xffff)
    return ~s & 0xffff


def ipv4(src, dst, proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def tcp(src, dst, sport, dport, flags):
    h = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 65535, 0, 0)
    ph = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(h))
    return h[:16] + struct.pack("!H", csum(ph + h)) + h[18:]


def frame(l3, ethertype=0x0800):
    return b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + \
        struct.pack("!H", ethertype) + l3


def xdp_ctx(ifindex, length):
    return struct.pack("IIIIII", 0, length, 0, ifindex, 0, 0)


def prog_stats(name):
    out = json.loads(T.run(["bpftool", "-j", "prog", "show", "name", name]).stdout)
    out = out if isinstance(out, list) else [out]
    return sum(p.get("run_time_ns", 0) for p in out), sum(p.get("run_cnt", 0) for p in out)


def main():
    topo = T.Topo()
    env = L.Env("xdpns")
    topo.build(os.path.join(L.BUILD, "tests", "xdp_pass.bpf.o"), [CTL, "decap", "attach"])
    T.enter(topo.path("lb"))
    cfg = os.path.join(env.tmp, "steer.yaml")
    lines = ["load-check-interval: 500ms", "snapshot-max-age: 60s", "xdp-dev: eth0",
             f"xdp-encap-src: {T.ENCAP_SRC}", "services:", f'  - vip: "{T.VIP4}:{PORT}"',
             "    backends:"]
    for i in (1, 2, 3):
        st = os.path.join(env.tmp, f"b{i}.json")
        with open(st, "w") as f:
            json.dump({"mode": "ok", "loads": [L.rank(0, 0.0, 1000.0)]}, f)
        env.spawn(topo.cmd(f"b{i}", [L.PY, os.path.join(TOP, "tests", "lib", "fake_worker.py"),
                                     "--name", f"b{i}", "--traffic", f"0.0.0.0:{PORT}",
                                     "--grpc", f"{T.backend4(i)}:30000", "--state", st,
                                     "--pb2-dir", os.path.join(L.BUILD, "py")]),
                  stdout=subprocess.DEVNULL)
        lines += [f'      - address: "{T.backend4(i)}:{PORT}"',
                  f'        loads: "{T.backend4(i)}:30000"']
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")
    d = L.Daemon(env, ["--config", cfg]).start()
    d.wait_publishes(3, timeout=30)  # polls answered: the backends' neighbours resolved

    link = json.loads(T.run(["ip", "-d", "-j", "link", "show", "dev", "eth0"]).stdout)[0]
    fd = prog_fd(link["xdp"]["prog"]["id"])
    ifindex = link["ifindex"]
    res = {}

    syns = [frame(ipv4(T.CLIENT4, T.VIP4, 6, tcp(T.CLIENT4, T.VIP4, 20000 + k, PORT, 0x02)))
            for k in range(N)]
    total = 0
    for f in syns:
        rv, dur = run_prog(fd, f, 1, xdp_ctx(ifindex, len(f)))
        if rv != 3:  # XDP_TX
            raise RuntimeError(f"SYN: XDP action {rv}, not XDP_TX")
        total += dur
    res["syn"] = total / N
    # One run per call: a run rewrites the frame it is given (encapsulation),
    # and repeated runs would see the rewritten one.
    def avg(f, want=None):
        total = 0
        for _ in range(N):
            rv, dur = run_prog(fd, f, 1, xdp_ctx(ifindex, len(f)))
            if want is not None and rv != want:
                raise RuntimeError(f"XDP action {rv}, not {want}")
            total += dur
        return total / N

    res["syn-retx"] = avg(syns[0], 3)
    res["est"] = avg(frame(ipv4(T.CLIENT4, T.VIP4, 6,
                                tcp(T.CLIENT4, T.VIP4, 20000, PORT, 0x10))), 3)
    res["pass-tcp"] = avg(frame(ipv4(T.CLIENT4, T.LB4, 6,
                                     tcp(T.CLIENT4, T.LB4, 20000, 22, 0x10))), 2)
    res["pass-udp"] = avg(frame(ipv4(T.CLIENT4, T.LB4, 17, b"\0" * 16)), 2)

    with T.in_netns(topo.path("b1")):
        out = T.run(["tc", "-j", "filter", "show", "dev", "eth0", "ingress"]).stdout
    dec_id = next(e["options"]["prog"]["id"] for e in json.loads(out)
                  if e.get("options", {}).get("prog", {}).get("name") == "steer_decap")
    dfd = prog_fd(dec_id)
    inner = ipv4(T.CLIENT4, T.VIP4, 6, tcp(T.CLIENT4, T.VIP4, 20000, PORT, 0x10))
    f = frame(ipv4("198.51.100.7", T.backend4(1), 4, inner))
    total = 0
    for _ in range(N):
        total += run_prog(dfd, f, 1)[1]
    res["decap"] = total / N

    for k, v in res.items():
        print(f"{k:10s} {v:8.0f} ns/packet")

    with open("/proc/sys/kernel/bpf_stats_enabled") as fh:
        if fh.read().strip() == "1":
            x0, d0 = prog_stats("steer_xdp"), prog_stats("steer_decap")
            fam, sa = socket.AF_INET, (T.VIP4, PORT)
            for _ in range(20):
                s = topo.socket("client", fam)
                s.settimeout(5)
                s.connect(sa)
                s.sendall(b"x" * 100000)
                s.close()
            time.sleep(0.5)
            x1, d1 = prog_stats("steer_xdp"), prog_stats("steer_decap")
            for name, a, b in (("steer_xdp", x0, x1), ("steer_decap", d0, d1)):
                n = b[1] - a[1]
                print(f"live {name}: {(b[0] - a[0]) / max(n, 1):.0f} ns/packet over {n} "
                      "packets (bpf_stats)")
    os.close(fd)
    os.close(dfd)
    d.stop()


if __name__ == "__main__":
    main()
