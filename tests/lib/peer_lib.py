"""What the tests of routers sharing their work (tests/integration/test_peers.py,
tests/integration/test_peer_push.py, tests/integration/test_peer_spoof.py)
share: reading a router's view through smg-steerctl explain, HTTP/1.1 requests
through a steered connection to tests/lib/wire_worker.py workers, whose answers
the test holds and releases (a file named after the request's X-Hold tag in the
control directory), and reports made with Python's protobuf runtime, sent from
an address the test binds or spoofed from one it cannot (a raw socket: IPv4,
inside the test's own network namespace)."""
import json
import os
import socket
import struct
import subprocess

import e2e_lib as L

CTL = os.path.join(L.BUILD, "smg-steerctl")


def explain(env, vip):
    p = subprocess.run([CTL, "--pin-path", env.pin, "-o", "json", "explain", vip],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError(f"smg-steerctl explain: {p.returncode} {p.stderr}")
    return json.loads(p.stdout)


def backend(env, vip, addr):
    return next(b for b in explain(env, vip)["backends"] if b["address"] == addr)


def request(tag, body):
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: vip\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")
    if tag:
        head += f"X-Hold: {tag}\r\n"
    return head.encode() + b"\r\n" + body


def release(control, tag):
    open(os.path.join(control, tag), "w").close()


def logged(control, name):
    try:
        with open(os.path.join(control, name + ".log")) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def send_held(s, req, control, workers):
    """Sends req on s; returns the address of the worker (workers: name ->
    address) that read it."""
    before = {name: logged(control, name) for name in workers}
    s.sendall(req)

    def grew():
        for name, addr in workers.items():
            if logged(control, name) > before[name]:
                return addr
        return None
    return L.wait_for(grew, 30, "a worker read the request")


def read_answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    while len(rest) < n:
        rest += s.recv(65536)
    return rest


def connect_via(env, host, port):
    """A connection made in env's cgroup: the router of env steers it."""
    env.enter_cgroup()
    try:
        return socket.create_connection((host, port), timeout=30)
    finally:
        env.leave_cgroup()


def start_workers(env, control, tp, workers):
    """Per worker (name -> ADDR:8000): a fake GetLoads server on ADDR:30000
    reporting an empty queue at tp tokens/s, and a wire worker taking the
    traffic. Returns address -> its L.Worker."""
    loads = {}
    for name, addr in workers.items():
        host = addr.rsplit(":", 1)[0]
        loads[addr] = L.Worker(env, "l" + name, f"{host}:7999", f"{host}:30000",
                               {"mode": "ok", "loads": [L.rank(0, 0.0, tp)]}).start()
        p = env.spawn([L.PY, os.path.join(L.TOP, "tests", "lib", "wire_worker.py"), "--name", name,
                       "--traffic", addr, "--control", control], stdout=subprocess.PIPE,
                      text=True)
        if not p.stdout.readline().startswith("READY"):
            raise RuntimeError(f"wire worker {name} did not start")
    return loads


def two_routers(tag, tp, workers):
    """Two routers' environments (cgroup, pins: tag1 and tag2), the control
    directory of the wire workers, and the workers (start_workers) in the
    first: (env1, env2, control, loads)."""
    env1, env2 = L.Env(tag + "1"), L.Env(tag + "2")
    control = os.path.join(env1.tmp, "control")
    os.mkdir(control)
    return env1, env2, control, start_workers(env1, control, tp, workers)


def router_args(vip, bpt, loads, extra):
    """A router's smg-steerd arguments: vip over the workers of loads
    (address -> its L.Worker, from start_workers), their loads polled once at
    start (the next poll is minutes away, so that poll may take 10 s: a loaded
    machine's fake worker can answer it after the default second), then
    --bytes-per-token bpt, then extra."""
    a = ["--vip", vip, "--load-check-interval", "10m", "--load-timeout", "10s",
         "--bytes-per-token", str(bpt)] + extra
    for addr, w in loads.items():
        a += ["--backend", f"{addr},loads=grpc://{w.grpc}"]
    return a


class Rig:
    """One VIP over named wire workers, with its control directory: the
    helpers above bound to them."""

    def __init__(self, vip, control, workers):
        self.vip, self.control, self.workers = vip, control, workers

    def explain(self, env):
        return explain(env, self.vip)

    def backend(self, env, addr):
        return backend(env, self.vip, addr)

    def send_held(self, s, req):
        """Sends req on s; returns the backend whose worker read it."""
        return send_held(s, req, self.control, self.workers)

    def connect_via(self, env):
        """A connection made in env's cgroup: the router of env steers it."""
        host, port = self.vip.rsplit(":", 1)
        return connect_via(env, host, int(port))

    def release(self, tag):
        release(self.control, tag)


def ip4(host):
    """An IPv4 address as a report carries it (IPv4-mapped, 16 bytes)."""
    return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(host)


def report(vip, router, seq, backends, sent_unix_ns=0):
    """A report's bytes, made by Python's protobuf runtime (shares nothing with
    user/peer/): backends [(ADDR:PORT, sent tokens, answered tokens)] of vip."""
    import steer_peer_pb2 as pb  # the build's py/, on sys.path in each test
    m = pb.Report(router=router, seq=seq, interval_us=1000, sent_unix_ns=sent_unix_ns)
    vip_host, vip_port = vip.rsplit(":", 1)
    for addr, sent, answered in backends:
        host, port = addr.rsplit(":", 1)
        m.backends.append(pb.Backend(vip=ip4(vip_host), vip_port=int(vip_port), addr=ip4(host),
                                     port=int(port), sent_tokens=sent,
                                     answered_tokens=answered))
    return m.SerializeToString()


def send_udp(src, dst, data):
    """data from src (IPv4 ADDR:PORT, which the test binds) to dst."""
    host, port = src.rsplit(":", 1)
    dhost, dport = dst.rsplit(":", 1)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind((host, int(port)))
        u.sendto(data, (dhost, int(dport)))
    finally:
        u.close()


class Spoofer:
    """UDP datagrams with any IPv4 source, as a forger on the path would send
    them: a raw socket writes the IP header itself (root; the kernel fills in
    the header's length and checksum). A UDP checksum of 0 means none (IPv4)."""

    def __init__(self):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

    def send(self, src, dst, data):
        host, port = src.rsplit(":", 1)
        dhost, dport = dst.rsplit(":", 1)
        udp = struct.pack("!HHHH", int(port), int(dport), 8 + len(data), 0) + data
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP,
                         0, socket.inet_aton(host), socket.inet_aton(dhost))
        self.s.sendto(ip + udp, (dhost, 0))

    def close(self):
        self.s.close()
