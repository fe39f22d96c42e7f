#!/usr/bin/python3
"""Least privilege of the running daemon: every thread's capabilities,
no_new_privs and seccomp as read from /proc/PID/task/*/status; a SIGHUP that
adds a service and a VIP after the drop still publishes and steers; no
system call is refused (the kernel logs each refusal); and the escape hatch
SMG_STEERD_NO_SANDBOX=1 keeps everything."""
import os
import re
import signal
import subprocess
import time

import yaml

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP1, VIP2 = "127.0.0.100:8000", "127.0.0.101:8000"
# CAP_BPF (39) and CAP_NET_ADMIN (12), nothing else.
KEPT = "0000008000001000"
t = Tap()
env = L.Env("dprivs")
w1 = L.Worker(env, "w1", "127.0.0.31:8000", "127.0.0.31:30000").start()
w2 = L.Worker(env, "w2", "127.0.0.32:8000", "127.0.0.32:30000").start()
cfg = os.path.join(env.tmp, "steer.yaml")


def write_config(services):
    with open(cfg, "w") as f:
        f.write("load-check-interval: 500ms\nservices:\n")
        for vip, backends in services:
            f.write(f"  - vip: {vip}\n    backends:\n")
            for b in backends:
                f.write(f"      - address: {b}:8000\n        loads: {b}:30000\n")


def threads(pid):
    """{tid: {field: value}} of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[tid] = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except FileNotFoundError:
            pass  # a thread that just ended (the publish's swap thread)
    return out


def cap_mask(caps):
    """The /proc status hex of a set of capability names."""
    nums = {"net_admin": 12, "sys_admin": 21, "perfmon": 38, "bpf": 39}
    return "%016x" % sum(1 << nums[c] for c in caps)


def check_reduced(pid, when, bounding=KEPT):
    ts = threads(pid)
    t.check(len(ts) >= 3, f"{when}: only {len(ts)} threads (gRPC and metrics start theirs)")
    names = sorted({s["Name"] for s in ts.values()})
    for tid, s in ts.items():
        got = {k: s[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb",
                                 "NoNewPrivs", "Seccomp")}
        want = {"CapEff": KEPT, "CapPrm": KEPT, "CapBnd": bounding, "CapInh": "0" * 16,
                "CapAmb": "0" * 16, "NoNewPrivs": "1", "Seccomp": "2"}
        t.check(got == want, f"{when}: thread {tid} ({s['Name']}): {got}")
    print(f"# {when}: {len(ts)} threads ({', '.join(names)}), each CapEff/CapPrm {KEPT}, "
          f"CapBnd {bounding}, NoNewPrivs 1, Seccomp 2")


def refused_syscalls(pid):
    """The kernel's audit lines for calls the filter refused in pid, or None
    when the kernel log cannot be read."""
    p = subprocess.run(["dmesg"], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return [ln for ln in p.stdout.splitlines()
            if "type=1326" in ln and re.search(rf"\bpid={pid}\b", ln)]


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


env.enter_cgroup()
write_config([(VIP1, ["127.0.0.31"])])
d = L.Daemon(env, ["--config", cfg]).start()
pid = d.proc.pid

with t.case("every thread keeps only CAP_BPF and CAP_NET_ADMIN, no_new_privs, seccomp"):
    d.wait_publishes(2, timeout=30)
    check_reduced(pid, "running")
    t.check(L.connect_name(VIP1) == "w1", "not steered")

with t.case("a SIGHUP adding a service and a VIP after the drop publishes and steers it"):
    write_config([(VIP1, ["127.0.0.31"]), (VIP2, ["127.0.0.32"])])
    d.send(signal.SIGHUP)
    # The new service is published and steered once its backend's first poll is good.
    got = wait_for(lambda: L.connect_name(VIP2) == "w2" or None, 30,
                   "a connect to the new VIP reaching w2")
    t.check(got, "new VIP not steered")
    t.check(L.connect_name(VIP1) == "w1", "the first VIP broke")
    # The count follows the kernel's swap by the publish's grace period.
    wait_for(lambda: (d.metric("smg_steer_table_publishes_total", vip=VIP2) or 0) >= 1, 30,
             "a publish for the new VIP counted")
    t.check("reloaded" in d.log_text(), "reload not logged")
    # Its backend had not been polled yet: nothing failed, so no alarm.
    t.check("no backend is healthy" not in d.log_text(),
            "a reload's new service logged 'failing open' for a backend never polled")
    check_reduced(pid, "after the reload")

with t.case("no system call was refused"):
    lines = refused_syscalls(pid)
    if lines is None:
        print("# the kernel log is not readable here: not checked")
    else:
        t.check(not lines, "refused: " + "\n".join(lines[:5]))
    rc, _ = d.stop()
    t.check(rc == 0, f"exit {rc} (LeakSanitizer's check at exit runs under the filter)")
    lines = refused_syscalls(pid)
    t.check(not lines, "refused at exit: " + "\n".join((lines or [])[:5]))

with t.case("SMG_STEERD_NO_SANDBOX=1 keeps every capability and installs no filter"):
    os.environ["SMG_STEERD_NO_SANDBOX"] = "1"
    try:
        d2 = L.Daemon(env, ["--config", cfg]).start()
    finally:
        del os.environ["SMG_STEERD_NO_SANDBOX"]
    ts = threads(d2.proc.pid)
    t.check(all(s["Seccomp"] == "0" and s["CapEff"] != KEPT for s in ts.values()),
            f"sandboxed anyway: {[(s['Name'], s['CapEff'], s['Seccomp']) for s in ts.values()]}")
    t.check("SMG_STEERD_NO_SANDBOX is set" in d2.log_text(), "no warning logged")
    rc, _ = d2.stop()
    t.check(rc == 0, f"exit {rc}")

def manifest_caps():
    """The capabilities the DaemonSet's smg-steerd container is given (add:)."""
    with open(os.path.join(L.TOP, "docs", "deploy", "smg-steer-daemonset.yaml")) as f:
        docs = [x for x in yaml.safe_load_all(f) if x]
    pod = [x for x in docs if x.get("kind") == "DaemonSet"][0]["spec"]["template"]["spec"]
    c = [c for c in pod["containers"]
         if "smg-steerd" in " ".join(c.get("command", []) + c.get("args", []))][0]
    return [cap.lower() for cap in c["securityContext"]["capabilities"]["add"]]


def unit_caps():
    """The systemd unit's CapabilityBoundingSet."""
    unit = os.path.join(L.TOP, "docs", "deploy", "smg-steerd.service")
    for line in open(unit):
        if line.startswith("CapabilityBoundingSet="):
            return [c[len("CAP_"):].lower() for c in line.split("=", 1)[1].split()]
    raise AssertionError(f"{unit}: no CapabilityBoundingSet")


class Bounded(L.Daemon):
    """smg-steerd started with only caps in its bounding set, as a container
    runtime or systemd starts it: no CAP_SETPCAP among them."""

    def __init__(self, env, args, caps):
        L.Daemon.__init__(self, env, args)
        self.caps = caps

    def argv(self):
        return (["setpriv", "--bounding-set=-all," + ",".join("+" + c for c in self.caps),
                 "--inh-caps=-all", "--"] + L.Daemon.argv(self))


for where, caps in (("the DaemonSet's", manifest_caps()), ("the systemd unit's", unit_caps())):
    with t.case(f"started with only {where} capabilities ({', '.join(caps)}): it runs, "
                f"steers, and keeps only CAP_BPF and CAP_NET_ADMIN"):
        t.check("setpcap" not in caps, f"{where} capabilities include SETPCAP: {caps}")
        write_config([(VIP1, ["127.0.0.31"])])
        db = Bounded(env, ["--config", cfg], caps).start()
        t.check(L.connect_name(VIP1) == "w1", "not steered")
        # Without CAP_SETPCAP the bounding set stays as given; no_new_privs
        # keeps an exec from raising any of it.
        check_reduced(db.proc.pid, f"with {where} capabilities", cap_mask(caps))
        rc, _ = db.stop()
        t.check(rc == 0, f"exit {rc}:\n{db.log_text()[-2000:]}")

class OtherGroup(L.Daemon):
    """smg-steerd run with group nobody: a process's /proc files belong to
    its own user and group unless it is not dumpable, when they belong to
    root's."""

    def argv(self):
        return ["setpriv", "--regid=65534", "--clear-groups", "--"] + L.Daemon.argv(self)


with t.case("no core dump can hold a token, and a readable token file is warned about"):
    token = os.path.join(env.tmp, "token")
    with open(token, "w") as f:
        f.write("s3cret-token-for-the-core-test\n")
    os.chmod(token, 0o644)
    with open(cfg, "w") as f:
        f.write(f"load-check-interval: 500ms\nservices:\n  - vip: {VIP1}\n    backends:\n"
                f"      - address: 127.0.0.31:8000\n        loads: 127.0.0.31:30000\n"
                f"        auth: bearer:{token}\n")
    dc = OtherGroup(env, ["--config", cfg]).start()
    with open(f"/proc/{dc.proc.pid}/limits") as f:
        core = [ln.split()[4:6] for ln in f if ln.startswith("Max core file size")][0]
    t.check(core == ["0", "0"], f"core file size soft/hard {core}, want 0 0")
    gid = os.stat(f"/proc/{dc.proc.pid}/environ").st_gid
    t.check(gid == 0, f"/proc/PID/environ has group {gid}: the process is dumpable")
    t.check(f"the token file {token} can be read by group or others (mode 0644)"
            in dc.log_text(), "no warning about the 0644 token file")
    t.check("s3cret-token" not in dc.log_text(), "the token is in the log")
    rc, _ = dc.stop()
    t.check(rc == 0, f"exit {rc}:\n{dc.log_text()[-2000:]}")

# Runs argv[2:] under the system calls of the systemd unit argv[1]
# (SystemCallFilter=, SystemCallErrorNumber=EPERM), as systemd would: a
# seccomp filter loaded just before the exec, with libseccomp.
LAUNCHER = r"""
import ctypes, errno, os, sys
names = set()
for line in open(sys.argv[1]):
    if line.startswith("SystemCallFilter="):
        names.update(line.split("=", 1)[1].split())
names.update(os.environ.get("EXTRA_SYSCALLS", "").split())
lib = ctypes.CDLL("libseccomp.so.2")
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
ctx = lib.seccomp_init(0x00050000 | errno.EPERM)
for n in names:
    nr = lib.seccomp_syscall_resolve_name(n.encode())
    if nr < 0 or lib.seccomp_rule_add(ctx, 0x7FFF0000, nr, 0) != 0:
        sys.exit(f"unknown system call {n}")
if lib.seccomp_load(ctx) != 0:
    sys.exit("seccomp_load failed")
os.execv(sys.argv[2], sys.argv[2:])
"""


class UnitFiltered(L.Daemon):
    def argv(self):
        unit = os.path.join(L.TOP, "docs", "deploy", "smg-steerd.service")
        return [L.PY, "-c", LAUNCHER, unit] + L.Daemon.argv(self)


with t.case("the systemd unit's SystemCallFilter lets the daemon start, reload and stop"):
    # ASan and LSan need a few more (see user/privs/privs.c), and the launcher
    # itself needs nothing past execve.
    if os.path.basename(L.BUILD.rstrip("/")) == "san":
        os.environ["EXTRA_SYSCALLS"] = "ptrace wait4 waitid kill mincore getrusage personality"
    write_config([(VIP1, ["127.0.0.31"])])
    d3 = UnitFiltered(env, ["--config", cfg]).start()
    write_config([(VIP1, ["127.0.0.31"]), (VIP2, ["127.0.0.32"])])
    d3.send(signal.SIGHUP)
    wait_for(lambda: L.connect_name(VIP2) == "w2" or None, 30, "the new VIP steered")
    rc, _ = d3.stop()
    t.check(rc == 0, f"exit {rc}:\n{d3.log_text()[-2000:]}")
    os.environ.pop("EXTRA_SYSCALLS", None)

env.cleanup()
t.done()
