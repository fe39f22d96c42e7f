"""The ingress benchmark's topology: network namespaces joined by a bridge.

Used by tools/bench/ingress.py (run with /usr/bin/python3, as root). Every
namespace is a named one (`ip netns add PREFIX-ROLE`), every interface is
created inside them (`ip -n NS link add ... peer ... netns OTHER`), so the
namespace the caller runs in, and the host's interfaces, are never touched.
Topo.teardown() stops every process started here and deletes every
namespace, which removes their interfaces, routes, nftables rules and XDP
programs with them; it runs on any exit, also on failure, SIGTERM or Ctrl-C.

Addresses (documentation ranges only):
  bridge segment 192.0.2.0/24: client .1, LB of the XDP path .2, nftables
  LB .3, HAProxy LB .4, router .5, LB of the generic-mode XDP path .6,
  backends .11, .12, .13;
  virtual addresses 203.0.113.10 and .11 (XDP native and generic, also on
  every backend's lo for direct server return), 203.0.113.20 (nftables DNAT), 203.0.113.30 (HAProxy, on
  its LB's lo), 203.0.113.40 (on every backend's lo; the router forwards it
  by an ECMP route over the backends); the client routes each /32 via its LB.
Each load balancer has a namespace of its own, so that no path pays for
another's set-up (conntrack of the DNAT, the XDP program on a veth); they are
identical otherwise (one veth into the same bridge, same MTU).
"""
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import time

NET = "192.0.2"
CLIENT = f"{NET}.1"
LB = {"lbx": f"{NET}.2", "lbn": f"{NET}.3", "lbh": f"{NET}.4", "lbr": f"{NET}.5",
      "lbg": f"{NET}.6"}
BACKENDS = [f"{NET}.11", f"{NET}.12", f"{NET}.13"]
VIP_XDP = "203.0.113.10"
VIP_XDPG = "203.0.113.11"
VIP_NFT = "203.0.113.20"
VIP_HAP = "203.0.113.30"
VIP_RT = "203.0.113.40"
PORT = 8000  # onebyte on every backend (wildcard address)
FLOW_PORT = 8001  # the sink of long-lived flows (non-SYN packets)
SYN_PORT = 8002  # nobody listens: a SYN burst's SYNs get a stateless reset
# The links of the load balancers and backends carry IPIP: 20 bytes more than
# the client's 1500, so that a full-size client packet still fits encapsulated.
MTU_CLIENT = 1500
MTU_ENCAP = 1520

CLONE_NEWNET = 0x40000000
SIOCETHTOOL = 0x8946
ETHTOOL_GTXCSUM = 0x16
ETHTOOL_STXCSUM = 0x17


class TopoError(RuntimeError):
    pass


def sh(*argv, check=True, capture=False):
    r = subprocess.run(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise TopoError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout if capture else r.returncode


class Topo:
    def __init__(self, prefix, log):
        self.prefix = prefix
        self.log = log
        self.names = []  # namespaces created, in order
        self.procs = []  # (Popen, name)
        self.cleanups = []  # callables run at teardown, after the processes stopped

    def ns(self, role):
        return f"{self.prefix}-{role}"

    def ip(self, role, *args):
        return sh("ip", "-n", self.ns(role), *args)

    def nsenter(self, role):
        return ["nsenter", f"--net=/run/netns/{self.ns(role)}", "--"]

    def sysctl(self, role, *settings):
        sh(*self.nsenter(role), "sysctl", "-qw", *settings)

    def run(self, role, *argv, capture=True, check=True):
        return sh(*self.nsenter(role), *argv, capture=capture, check=check)

    def spawn(self, role, argv, out_path, name):
        """Start a process in a namespace (nsenter execs it: the PID is the process's)."""
        out = open(out_path, "w")
        p = subprocess.Popen(self.nsenter(role) + list(argv), stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        out.close()
        self.procs.append((p, name))
        return p

    def wait_line(self, p, path, word, what, timeout=15.0):
        """Wait until a process prints a line starting with word; return that line."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open(path) as f:
                for line in f:
                    if line.startswith(word):
                        return line.strip()
            if p.poll() is not None:
                break
            time.sleep(0.05)
        with open(path) as f:
            text = f.read()
        raise TopoError(f"{what} did not start (exit {p.poll()}):\n{text}")

    def stop(self, p, timeout=10.0):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = [(q, n) for q, n in self.procs if q is not p]

    # ---- building ------------------------------------------------------------------

    def add_ns(self, role):
        sh("ip", "netns", "add", self.ns(role))
        self.names.append(self.ns(role))
        self.ip(role, "link", "set", "lo", "up")
        # IPv4 only: no router solicitations or DAD in the counters.
        self.sysctl(role, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")

    def plug(self, role, addr, mtu):
        """A veth from the bridge (sw: ROLE) to the namespace (eth0), addressed, up."""
        self.ip("sw", "link", "add", role, "mtu", str(mtu), "type", "veth", "peer", "name", "eth0",
                "netns", self.ns(role))
        self.ip(role, "link", "set", "eth0", "mtu", str(mtu))
        self.ip("sw", "link", "set", role, "master", "br0", "up")
        self.ip(role, "addr", "add", f"{addr}/24", "dev", "eth0")
        self.ip(role, "link", "set", "eth0", "up")

    def build(self):
        self.log(f"topology: namespaces {self.prefix}-{{sw,cli,lbx,lbg,lbn,lbh,lbr,b1,b2,b3}}")
        self.add_ns("sw")
        self.ip("sw", "link", "add", "br0", "type", "bridge")
        self.ip("sw", "link", "set", "br0", "up")
        self.add_ns("cli")
        self.plug("cli", CLIENT, MTU_CLIENT)
        for role, addr in LB.items():
            self.add_ns(role)
            self.plug(role, addr, MTU_ENCAP)
        for i, addr in enumerate(BACKENDS):
            role = f"b{i + 1}"
            self.add_ns(role)
            self.plug(role, addr, MTU_ENCAP)
            self.ip(role, "addr", "add", f"{VIP_XDP}/32", "dev", "lo")
            self.ip(role, "addr", "add", f"{VIP_XDPG}/32", "dev", "lo")
            self.ip(role, "addr", "add", f"{VIP_RT}/32", "dev", "lo")
            # The VIP on lo must not be announced or answered for on the segment.
            self.sysctl(role, "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
        for vip, lb in ((VIP_XDP, "lbx"), (VIP_XDPG, "lbg"), (VIP_NFT, "lbn"), (VIP_HAP, "lbh"),
                        (VIP_RT, "lbr")):
            self.ip("cli", "route", "add", f"{vip}/32", "via", LB[lb])
        self.ip("lbh", "addr", "add", f"{VIP_HAP}/32", "dev", "lo")
        self.sysctl("lbn", "net.ipv4.ip_forward=1")
        # The XDP program's bpf_fib_lookup answers only on an interface that forwards
        # (smg-steerd refuses one that does not).
        for lb in ("lbx", "lbg"):
            self.sysctl(lb, "net.ipv4.conf.eth0.forwarding=1")
        # The router: plain forwarding, one ECMP route over the backends hashed on the
        # 5-tuple (a flow stays on one backend), no redirects (it sends the packets
        # back out of the interface they came in by, as the XDP program does).
        self.sysctl("lbr", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0",
                    "net.ipv4.conf.eth0.send_redirects=0", "net.ipv4.fib_multipath_hash_policy=1")
        hops = [w for b in BACKENDS for w in ("nexthop", "via", b)]
        self.ip("lbr", "route", "add", f"{VIP_RT}/32", *hops)
        self.sysctl("cli", "net.ipv4.conf.all.accept_redirects=0",
                    "net.ipv4.conf.eth0.accept_redirects=0")
        # Short connections at full speed from one client address.
        self.sysctl("cli", "net.ipv4.ip_local_port_range=10240 65535", "net.ipv4.tcp_tw_reuse=1")
        self.set_tx_csum(self.ns("cli"), "eth0", False)

    def set_tx_csum(self, netns, dev, on):
        """TX checksum offload of a device in a namespace, by the ethtool ioctl.

        Off on the client: a veth otherwise hands on packets whose TCP checksum
        is only partial, and after the XDP program encapsulates them nobody
        completes it, so the backends drop them. (No ethtool binary here.)
        """
        pid = os.fork()
        if pid == 0:  # the child enters the namespace; the parent stays where it is
            code = 1
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
                if libc.setns(fd, CLONE_NEWNET) == 0:
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    for cmd in (ETHTOOL_STXCSUM, ETHTOOL_GTXCSUM):
                        val = ctypes.create_string_buffer(struct.pack("II", cmd, int(on)), 8)
                        ifr = struct.pack("16sP", dev.encode(), ctypes.addressof(val)).ljust(40, b"\0")
                        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
                    code = 0 if struct.unpack("II", val.raw)[1] == int(on) else 2
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise TopoError(f"cannot set tx checksum offload of {dev} in {netns} to {on}")

    def attached_progs(self, role, dev):
        """{'xdp': [ids], 'tc': [ids]}: the programs attached to a device of a namespace."""
        out = self.run(role, "bpftool", "-j", "net", "show", "dev", dev)
        found = {"xdp": [], "tc": []}
        for block in json.loads(out):
            for kind in ("xdp", "tc"):
                for e in block.get(kind, []):
                    pid = e.get("id", e.get("prog_id"))
                    if e.get("devname") == dev and pid is not None:
                        found[kind].append(int(pid))
        return found

    # ---- taking down ------------------------------------------------------------------

    def teardown(self):
        for p, _ in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p, name in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                self.log(f"{name} ignored SIGTERM; killing it")
                p.kill()
                p.wait()
        self.procs = []
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # keep tearing down: the namespaces must go
                self.log(f"cleanup: {e}")
        self.cleanups = []
        for n in reversed(self.names):
            sh("ip", "netns", "del", n, check=False)
        self.names = []


def leftover_namespaces(prefix):
    """Namespaces with this prefix (a crashed run's), for run.sh's cleanup."""
    out = sh("ip", "netns", "list", capture=True)
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]
