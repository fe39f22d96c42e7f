"""The XDP arms of the ingress benchmark (tools/bench/ingress.py).

Plug smg-steer's XDP path into the topology of tools/bench/ingress_topo.py,
the way docs/deployment.md, "Ingress nodes", sets up an ingress node:
- every backend (start_backend_side, once): bench/fastworker serving GetLoads
  (one idle SGLang rank) on its address, port 30000; `smg-steerctl decap
  attach eth0` (tc ingress, no pin); the VIPs on lo (the topology adds them);
- per arm, its own LB namespace: smg-steerd with three services on the arm's
  VIP (port 8000 for connbench, 8001 for the long-lived flows, 8002 for the SYN
  bursts, where nothing listens), --xdp-dev eth0 and the arm's --xdp-mode,
  outer sources from a documentation prefix, its connect hooks on an empty
  throwaway cgroup and its pins in a private directory, both removed at
  teardown. xdp = native mode, with bench/xdppass on the LB veth's
  bridge-side peer (a veth accepts XDP_TX frames only while its peer runs an
  XDP program; also the floor of the bpf_stats figures); xdpg = generic mode,
  which sends XDP_TX frames as skbs and needs no program on the peer.
"""
import os
import shutil
import subprocess

import ingress_topo as topo

LOADS_PORT = 30000
ENCAP_SRC = "198.51.100.0/24"  # outer sources: a documentation prefix
METRICS = "127.0.0.1:9464"  # inside lbx's own namespace


def cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[2] == "cgroup2":
                return parts[1]
    raise topo.TopoError("no cgroup2 mount")


def start_backend_side(t, args, log):
    """Load sources and the decap on every backend; returns the decap programs' ids."""
    bench, ctl = os.path.join(args.build, "bench"), os.path.join(args.build, "smg-steerctl")
    decaps = []
    for i, addr in enumerate(topo.BACKENDS):
        role = f"b{i + 1}"
        out = os.path.join(args.tmp, f"fastworker-{role}.out")
        p = t.spawn(role, [os.path.join(bench, "fastworker"), "--many", "1", "--base", addr,
                           "--port", str(LOADS_PORT)], out, f"fastworker {role}")
        t.wait_line(p, out, "READY", f"fastworker in {role}")
        t.run(role, ctl, "decap", "attach", "eth0")
        decaps += t.attached_progs(role, "eth0")["tc"]
    log(f"backends: fastworker and decap on {len(topo.BACKENDS)}")
    return decaps


class XdpPath:
    def __init__(self, t, args, log, arm, role, vip, mode):
        self.t, self.args, self.log = t, args, log
        self.arm, self.role, self.vip, self.mode = arm, role, vip, mode
        self.steerd = os.path.join(args.build, "smg-steerd")
        self.ctl = os.path.join(args.build, "smg-steerctl")
        self.pin = f"/sys/fs/bpf/{t.prefix}-{arm}"
        self.cgroup = os.path.join(cgroup2_root(), f"{t.prefix}-{arm}")
        self.groups = {}

    def unavailable(self):
        """None when this build has the XDP path, else why not."""
        helps = []
        for b in (self.steerd, self.ctl):
            if not os.access(b, os.X_OK):
                return f"{b} missing"
            r = subprocess.run([b, "--help"], capture_output=True, text=True)
            helps.append(r.stdout + r.stderr)
        if "--xdp-dev" not in helps[0]:
            return "smg-steerd has no --xdp-dev (the xdp branch is not merged into this build)"
        if "decap" not in helps[1]:
            return "smg-steerctl has no decap command (the xdp branch is not merged into this build)"
        return None

    def config(self):
        lines = ["load-check-interval: 1s", "log-level: info", "services:"]
        for port in (topo.PORT, topo.FLOW_PORT, topo.SYN_PORT):
            lines.append(f"  - vip: {self.vip}:{port}")
            lines.append("    backends:")
            for b in topo.BACKENDS:
                lines.append(f"      - {b}:{port},loads={b}:{LOADS_PORT}")
        path = os.path.join(self.args.tmp, f"ingress-steer-{self.arm}.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self, decaps):
        t, bench = self.t, os.path.join(self.args.build, "bench")
        self.groups = {"decap": decaps}
        if self.mode == "native":
            out = os.path.join(self.args.tmp, f"xdppass-{self.arm}.out")
            p = t.spawn("sw", [os.path.join(bench, "xdppass"), "--dev", self.role], out,
                        f"xdppass {self.arm}")
            line = t.wait_line(p, out, "READY", "xdppass on the LB veth's peer")
            self.groups["floor"] = [int(line.split()[1])]
        os.mkdir(self.cgroup)
        t.cleanups.append(lambda: os.rmdir(self.cgroup) if os.path.isdir(self.cgroup) else None)
        t.cleanups.append(lambda: shutil.rmtree(self.pin, ignore_errors=True))
        out = os.path.join(self.args.tmp, f"steerd-{self.arm}.out")
        t.spawn(self.role, [self.steerd, "--config", self.config(), "--pin-path", self.pin,
                            "--cgroup", self.cgroup, "--metrics-listen", METRICS, "--xdp-dev",
                            "eth0", "--xdp-mode", self.mode, "--xdp-encap-src", ENCAP_SRC], out,
                f"smg-steerd {self.arm}")
        self.log(f"XDP path {self.arm}: smg-steerd in {t.ns(self.role)}, {self.mode} mode")

    def wait_attached(self):
        xdp = self.t.attached_progs(self.role, "eth0")["xdp"]
        if not xdp:
            raise topo.TopoError(f"no XDP program on {self.role} eth0 after the path answered")
        self.groups["xdp"] = xdp

    def prog_groups(self):
        return self.groups

    def check_after(self):
        """The path's own counters, for the record: smg-steerctl status in the LB namespace."""
        r = subprocess.run(self.t.nsenter(self.role) + [self.ctl, "--pin-path", self.pin, "status"],
                           capture_output=True, text=True)
        path = os.path.join(os.path.dirname(self.args.csv), f"ingress_status_{self.arm}.txt")
        with open(path, "w") as f:
            f.write(r.stdout + r.stderr)
