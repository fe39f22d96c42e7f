"""The XDP arm of the ingress benchmark (tools/bench/ingress.py).

Plugs smg-steer's XDP path into the topology of tools/bench/ingress_topo.py:
smg-steerd with --xdp-dev on the LB's veth (lbx), the shipped BPF decap on
every backend, the empty XDP program on the LB veth's bridge-side peer (a veth
accepts XDP_TX frames only while its peer runs an XDP program).
"""
import os
import subprocess


class XdpPath:
    def __init__(self, t, args, log):
        self.t = t
        self.args = args
        self.log = log

    def unavailable(self):
        """None when this build has the XDP path, else why not."""
        steerd = os.path.join(self.args.build, "smg-steerd")
        ctl = os.path.join(self.args.build, "smg-steerctl")
        helps = []
        for b in (steerd, ctl):
            if not os.access(b, os.X_OK):
                return f"{b} missing"
            r = subprocess.run([b, "--help"], capture_output=True, text=True)
            helps.append(r.stdout + r.stderr)
        if "--xdp-dev" not in helps[0]:
            return "smg-steerd has no --xdp-dev (the xdp branch is not merged into this build)"
        if "decap" not in helps[1]:
            return "smg-steerctl has no decap command (the xdp branch is not merged into this build)"
        return "the XDP arm's set-up is not written yet"

    def start(self):
        raise NotImplementedError

    def prog_groups(self):
        raise NotImplementedError

    def check_after(self):
        pass
