"""A network-namespace topology for XDP ingress (run with /usr/bin/python3, as root).

    client ----+
    lb --------+-- br0 (in the switch netns)
    b1, b2, b3 +

Every node is a network namespace of its own, created here and named
smgx<pid><role>, joined to a bridge by a veth pair ("eth0" inside the node).
Addresses are from the documentation ranges only:

    client  192.0.2.2        2001:db8::2
    lb      192.0.2.1        2001:db8::1      (XDP on its eth0, native mode)
    bN      192.0.2.1N       2001:db8::1N     (decap on eth0, the VIPs on lo)
    VIPs    203.0.113.10     2001:db8:ff::10  (routed via the lb by the client)
    outer sources of the encapsulation: 198.51.100.0/24, 2001:db8:5::/64

What XDP ingress needs of the links, and what this sets up:
  - XDP_TX into a veth needs an XDP program on its peer: the switch side of
    the lb's veth runs an XDP_PASS program (tests/data/xdp_pass.bpf.c);
  - the client's veth has TX checksum offload off (the ethtool ioctl; there is
    no ethtool binary here), or its packets reach the backends, after
    encapsulation, with a partial TCP checksum and are dropped;
  - the links behind the lb carry 40 more bytes (the IPv6 outer header) than
    the client's: MTU 1540 there, 1500 at the client;
  - backends: VIPs on lo, arp_ignore=1 / arp_announce=2 (the usual DSR
    settings), rp_filter as the kernel's default for a new netns.

Processes go into a node with `nsenter --net` (`ip netns exec` remounts /sys,
which hides bpffs and the cgroup mount). Sockets are made inside a node by
switching the calling thread's netns around socket() (Topo.socket): a socket
stays in the netns it was made in.

Topo.cleanup() deletes every namespace it made (with them every veth, the
bridge and the programs on them); it runs at exit and on SIGTERM/SIGINT, also
when setup failed half-way.
"""
import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x17

VIP4 = "203.0.113.10"
VIP6 = "2001:db8:ff::10"
CLIENT4, CLIENT6 = "192.0.2.2", "2001:db8::2"
LB4, LB6 = "192.0.2.1", "2001:db8::1"
ENCAP_SRC = "198.51.100.0/24,2001:db8:5::/64"
MTU_INNER = 1500
MTU_OUTER = 1540  # + the IPv6 outer header (IPv4-in-IPv4 needs 20)

_libc = ctypes.CDLL(None, use_errno=True)


def backend4(i):
    return f"192.0.2.1{i}"


def backend6(i):
    return f"2001:db8::1{i}"


def run(argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def _setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns {path}: {os.strerror(e)}")
    finally:
        os.close(fd)


def enter(path):
    """The calling thread (and the processes it starts from now on) into netns path."""
    _setns(path)


@contextlib.contextmanager
def in_netns(path):
    """The calling thread in netns `path` for the block, then back."""
    home = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    try:
        _setns(path)
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "cannot return to the original netns")
    finally:
        os.close(home)


class Topo:
    def __init__(self, n_backends=3, tag=None):
        self.tag = tag or f"smgx{os.getpid()}"
        self.n = n_backends
        self.roles = ["sw", "client", "lb"] + [f"b{i}" for i in range(1, n_backends + 1)]
        self.made = []
        atexit.register(self.cleanup)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, sig, frame):
        self.cleanup()
        sys.exit(1)

    # ---- names and entry points ------------------------------------------------

    def ns(self, role):
        return f"{self.tag}{role}"

    def path(self, role):
        return f"/run/netns/{self.ns(role)}"

    def cmd(self, role, argv):
        """argv run inside role's netns (nsenter --net: /sys stays as it is)."""
        return ["nsenter", f"--net={self.path(role)}", "--"] + list(argv)

    def ip(self, role, *args, check=True):
        return run(["ip", "-n", self.ns(role)] + list(args), check=check)

    def sysctl(self, role, key, value):
        run(self.cmd(role, ["sysctl", "-q", "-w", f"{key}={value}"]))

    def socket(self, role, family=socket.AF_INET, kind=socket.SOCK_STREAM, proto=0):
        with in_netns(self.path(role)):
            return socket.socket(family, kind, proto)

    # ---- building ----------------------------------------------------------------

    def build(self, xdp_pass_obj, decap_cmd=None):
        """Namespaces, bridge, links and addresses. decap_cmd (argv prefix,
        e.g. [smg-steerctl, "decap", "attach"]) is run on each backend's eth0."""
        try:
            for r in self.roles:
                run(["ip", "netns", "add", self.ns(r)])
                self.made.append(self.ns(r))
                self.ip(r, "link", "set", "lo", "up")
            self.ip("sw", "link", "add", "br0", "type", "bridge")
            self.ip("sw", "link", "set", "br0", "up")
            for r in self.roles[1:]:
                self._link(r)
            self._client()
            self._lb(xdp_pass_obj)
            for i in range(1, self.n + 1):
                self._backend(i, decap_cmd)
        except Exception:
            self.cleanup()
            raise
        return self

    def _link(self, role):
        peer = f"p{role}"
        self.ip(role, "link", "add", "eth0", "mtu", str(MTU_OUTER), "type", "veth", "peer",
                "name", peer, "netns", self.ns("sw"))
        self.ip("sw", "link", "set", peer, "mtu", str(MTU_OUTER), "master", "br0", "up")
        self.ip(role, "link", "set", "eth0", "up")

    def _addrs(self, role, a4, a6):
        self.ip(role, "addr", "add", f"{a4}/24", "dev", "eth0")
        self.ip(role, "-6", "addr", "add", f"{a6}/64", "dev", "eth0", "nodad")

    def _client(self):
        self.ip("client", "link", "set", "eth0", "mtu", str(MTU_INNER))
        self._addrs("client", CLIENT4, CLIENT6)
        self.ip("client", "route", "add", f"{VIP4}/32", "via", LB4)
        self.ip("client", "-6", "route", "add", f"{VIP6}/128", "via", LB6)
        self.tx_checksum_off("client", "eth0")

    def _lb(self, xdp_pass_obj):
        self._addrs("lb", LB4, LB6)
        # bpf_fib_lookup (the next hop of each flow) answers only where the
        # interface forwards.
        self.sysctl("lb", "net.ipv4.conf.eth0.forwarding", 1)
        self.sysctl("lb", "net.ipv6.conf.eth0.forwarding", 1)
        # veth: XDP_TX from the lb's eth0 lands in its peer, which must run XDP.
        self.ip("sw", "link", "set", "dev", "plb", "xdpdrv", "obj", xdp_pass_obj, "sec", "xdp")

    def _backend(self, i, decap_cmd):
        r = f"b{i}"
        self._addrs(r, backend4(i), backend6(i))
        self.ip(r, "addr", "add", f"{VIP4}/32", "dev", "lo")
        self.ip(r, "-6", "addr", "add", f"{VIP6}/128", "dev", "lo")
        self.sysctl(r, "net.ipv4.conf.all.arp_ignore", 1)
        self.sysctl(r, "net.ipv4.conf.all.arp_announce", 2)
        if decap_cmd:
            run(self.cmd(r, list(decap_cmd) + ["eth0"]))

    def tx_checksum_off(self, role, ifname):
        """ETHTOOL_STXCSUM 0 on ifname inside role (the ethtool ioctl)."""
        val = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_STXCSUM, 0))
        ifr = struct.pack("16sP", ifname.encode(), ctypes.addressof(val)) + b"\0" * 16
        s = self.socket(role, socket.AF_INET, socket.SOCK_DGRAM)
        try:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
        finally:
            s.close()

    # ---- reading ---------------------------------------------------------------------

    def link_stat(self, role, ifname, direction, what):
        """An interface counter inside role: direction rx or tx, what packets
        or bytes (not from /sys, which shows the netns that mounted it)."""
        r = self.ip(role, "-s", "-j", "link", "show", "dev", ifname)
        return int(json.loads(r.stdout)[0]["stats64"][direction][what])

    def cleanup(self):
        for name in reversed(self.made):
            run(["ip", "netns", "del", name], check=False)
        self.made = []
