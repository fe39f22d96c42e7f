"""The XDP arm of the ingress benchmark (tools/bench/ingress.py).

Plugs smg-steer's XDP path into the topology of tools/bench/ingress_topo.py,
the way docs/deployment.md section 4 sets up an ingress node:
- every backend: bench/fastworker serving GetLoads (one idle SGLang rank) on
  its address, port 30000; `smg-steerctl decap attach eth0` (tc ingress, no
  pin); the VIP on lo (the topology adds it);
- the LB veth's bridge-side peer: bench/xdppass, the empty XDP program (a veth
  accepts XDP_TX frames only while its peer runs an XDP program; it is also
  the floor of the bpf_stats figures);
- the LB namespace (lbx): smg-steerd with three services on the VIP (port 8000
  for connbench, 8001 for the long-lived flows, 8002 for the SYN bursts, where
  nothing listens), --xdp-dev eth0 --xdp-mode
  native, outer sources from a documentation prefix, its connect hooks on an
  empty throwaway cgroup and its pins in a private directory, both removed at
  teardown.
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


class XdpPath:
    def __init__(self, t, args, log):
        self.t = t
        self.args = args
        self.log = log
        self.steerd = os.path.join(args.build, "smg-steerd")
        self.ctl = os.path.join(args.build, "smg-steerctl")
        self.pin = f"/sys/fs/bpf/{t.prefix}-xdp"
        self.cgroup = os.path.join(cgroup2_root(), f"{t.prefix}-xdp")
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
            lines.append(f"  - vip: {topo.VIP_XDP}:{port}")
            lines.append("    backends:")
            for b in topo.BACKENDS:
                lines.append(f"      - {b}:{port},loads={b}:{LOADS_PORT}")
        path = os.path.join(self.args.tmp, "ingress-steer.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self):
        t, bench = self.t, os.path.join(self.args.build, "bench")
        decaps = []
        for i, addr in enumerate(topo.BACKENDS):
            role = f"b{i + 1}"
            out = os.path.join(self.args.tmp, f"fastworker-{role}.out")
            p = t.spawn(role, [os.path.join(bench, "fastworker"), "--many", "1", "--base", addr,
                               "--port", str(LOADS_PORT)], out, f"fastworker {role}")
            t.wait_line(p, out, "READY", f"fastworker in {role}")
            t.run(role, self.ctl, "decap", "attach", "eth0")
            decaps += t.attached_progs(role, "eth0")["tc"]
        out = os.path.join(self.args.tmp, "xdppass.out")
        p = t.spawn("sw", [os.path.join(bench, "xdppass"), "--dev", "lbx"], out, "xdppass")
        floor = int(t.wait_line(p, out, "READY", "xdppass on the LB veth's peer").split()[1])
        os.mkdir(self.cgroup)
        t.cleanups.append(lambda: os.rmdir(self.cgroup) if os.path.isdir(self.cgroup) else None)
        t.cleanups.append(lambda: shutil.rmtree(self.pin, ignore_errors=True))
        out = os.path.join(self.args.tmp, "steerd-xdp.out")
        t.spawn("lbx", [self.steerd, "--config", self.config(), "--pin-path", self.pin,
                        "--cgroup", self.cgroup, "--metrics-listen", METRICS, "--xdp-dev", "eth0",
                        "--xdp-mode", "native", "--xdp-encap-src", ENCAP_SRC], out, "smg-steerd")
        self.log(f"XDP path: smg-steerd in {t.ns('lbx')}, decap on 3 backends, xdppass id {floor}")
        self.groups = {"floor": [floor], "decap": decaps}

    def wait_attached(self):
        xdp = self.t.attached_progs("lbx", "eth0")["xdp"]
        if not xdp:
            raise topo.TopoError("no XDP program on lbx eth0 after the path answered")
        self.groups["xdp"] = xdp

    def prog_groups(self):
        return self.groups

    def check_after(self):
        """The path's own counters, for the log: smg-steerctl status in the LB namespace."""
        r = subprocess.run(self.t.nsenter("lbx") + [self.ctl, "--pin-path", self.pin, "status"],
                           capture_output=True, text=True)
        with open(os.path.join(os.path.dirname(self.args.csv), "ingress_status.txt"), "w") as f:
            f.write(r.stdout + r.stderr)
