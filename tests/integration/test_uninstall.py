#!/usr/bin/python3
"""smg-steerctl uninstall: after it, connects to the VIP behave as if smg-steer
had never been installed; it is idempotent, refuses while a daemon runs, and
refuses what is not a pin directory of ours.

Real programs in a throwaway cgroup, in a private network namespace. Something
listens on the VIP itself ("vip"), so that "not steered" is visible: the
connect reaches the VIP's own listener, and once that is gone it is refused,
exactly as before the daemon ever started. The uninstall command is the one
the cleanup DaemonSet (docs/deploy/smg-steer-cleanup.yaml) runs, with the
capabilities that manifest grants.
"""
import os
import re
import subprocess
import tempfile

import yaml

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
CTL = os.path.join(L.BUILD, "smg-steerctl")
CLEANUP = os.path.join(L.TOP, "docs", "deploy", "smg-steer-cleanup.yaml")
t = Tap()
env = L.Env("uninst")


def cleanup_container():
    """The container of the cleanup DaemonSet that runs smg-steerctl uninstall."""
    with open(CLEANUP) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    pod = [d for d in docs if d.get("kind") == "DaemonSet"][0]["spec"]["template"]["spec"]
    found = [c for c in pod.get("initContainers", []) + pod["containers"]
             if "uninstall" in c.get("command", []) + c.get("args", [])]
    assert len(found) == 1, f"{CLEANUP}: no single container runs uninstall"
    return found[0]


def uninstall_argv(pin):
    """The manifest's command with our binary and pin path, confined to the
    manifest's capabilities (a root process keeps only its bounding set)."""
    c = cleanup_container()
    argv = c.get("command", []) + c.get("args", [])
    t.check(os.path.basename(argv[0]) == "smg-steerctl", f"cleanup runs {argv}")
    argv = [CTL] + [f"--pin-path={pin}" if a.startswith("--pin-path=") else a for a in argv[1:]]
    caps = ",".join("+" + cap.lower() for cap in c["securityContext"]["capabilities"]["add"])
    return ["setpriv", f"--bounding-set=-all,{caps}", "--inh-caps=-all", "--"] + argv


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def attached_programs(cgroup):
    p = run(["bpftool", "cgroup", "show", cgroup])
    t.check(p.returncode == 0, f"bpftool cgroup show: {p.stderr}")
    return [line for line in p.stdout.splitlines()[1:] if line.strip()]


def pins(pin):
    out = []
    for root, dirs, files in os.walk(pin):
        out += [os.path.relpath(os.path.join(root, n), pin) for n in dirs + files]
    return sorted(out)


def names(n=12):
    return [L.connect_name(VIP, timeout=2) for _ in range(n)]


workers = [L.Worker(env, f"w{i}", f"127.0.0.2{i}:8000", f"127.0.0.2{i}:30000").start()
           for i in (1, 2)]
vip = L.Worker(env, "vip", VIP, None).start()
env.enter_cgroup()
daemon_args = ["--vip", VIP, "--load-check-interval", "200ms", "--keep-pinned"] + sum(
    (["--backend", f"127.0.0.2{i}:8000,loads=127.0.0.2{i}:30000"] for i in (1, 2)), [])

with t.case("before smg-steer: connects to the VIP reach the VIP's own listener"):
    got = names()
    t.check(set(got) == {"vip"}, f"{got}")
    t.check(attached_programs(env.cgroup) == [], "programs attached before the daemon ran")

d = L.Daemon(env, daemon_args).start()

with t.case("uninstall refuses while smg-steerd runs, and removes nothing"):
    before = pins(env.pin)
    p = run(uninstall_argv(env.pin))
    t.check(p.returncode == 1 and "is running" in p.stderr, f"exit {p.returncode}: {p.stderr}")
    t.check(pins(env.pin) == before, "pins changed")
    got = names()
    t.check(set(got) <= {"w1", "w2"}, f"no longer steered: {got}")

with t.case("after the daemon stopped with --keep-pinned, connects are still steered"):
    rc, _ = d.stop()
    t.check(rc == 0, f"daemon exit {rc}")
    links = [n for n in pins(env.pin) if "lnk" in n]
    t.check(len(links) >= 2 and attached_programs(env.cgroup), f"pins {pins(env.pin)}")
    got = names()
    t.check(set(got) <= {"w1", "w2"}, f"{got}")

with t.case("uninstall detaches every link, removes every pin and says so"):
    before = pins(env.pin)
    p = run(uninstall_argv(env.pin))
    t.check(p.returncode == 0, f"exit {p.returncode}: {p.stdout}{p.stderr}")
    out = p.stdout
    for n in before:
        verb = "detached and removed" if n in links else "removed"
        t.check(re.search(rf"^{verb} {re.escape(os.path.join(env.pin, n))} \(", out, re.M),
                f"no '{verb}' line for {n}:\n{out}")
    m = re.search(r"^uninstalled: (\d+) link\(s\) detached, (\d+) pin\(s\)", out, re.M)
    t.check(m and int(m.group(1)) == len(links) and int(m.group(2)) == len(before),
            f"summary does not match {len(links)} links, {len(before)} pins:\n{out}")
    t.check(not os.path.exists(env.pin), "the pin directory is still there")
    t.check(attached_programs(env.cgroup) == [], f"still attached: "
            f"{attached_programs(env.cgroup)}")

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
         "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
         "fourteen": 14, "fifteen": 15}


def number(text):
    return int(text) if text.isdigit() else WORDS[text.lower()]


with t.case("the counts the docs quote hold: maps, links, pins, attached programs"):
    # What this run pinned and attached, against every count the docs give.
    n_links, n_pins = len(links), len(before)
    n_maps = n_pins - n_links
    quoted = 0
    for doc in ["README.md"] + [os.path.join("docs", f) for f in os.listdir(
            os.path.join(L.TOP, "docs")) if f.endswith(".md")]:
        text = open(os.path.join(L.TOP, doc)).read()
        for m in re.finditer(r"\b(\w+) maps and (\w+) links\b", text):
            quoted += 1
            t.check(number(m.group(1)) == n_maps and number(m.group(2)) == n_links,
                    f"{doc}: '{m.group(0)}', but a daemon pins {n_maps} maps and {n_links} links")
        for m in re.finditer(r"uninstalled: (\d+) link\(s\) detached, (\d+) pin\(s\)", text):
            quoted += 1
            t.check(int(m.group(1)) == n_links and int(m.group(2)) == n_pins,
                    f"{doc}: '{m.group(0)}', but uninstall removes {n_links} links, "
                    f"{n_pins} pins")
        for m in re.finditer(r"lists the (\w+) programs", text):
            quoted += 1
            t.check(number(m.group(1)) == n_links, f"{doc}: '{m.group(0)}', but {n_links} "
                    f"programs are attached")
    t.check(quoted >= 3, f"only {quoted} counts found in the docs: has the wording changed?")

with t.case("after uninstall: connects reach the VIP's listener, as if never installed"):
    got = names()
    t.check(set(got) == {"vip"}, f"{got}")

with t.case("after uninstall, with nothing on the VIP: refused, as without smg-steer"):
    vip.kill()
    got = names(5)
    t.check(set(got) == {"ECONNREFUSED"}, f"{got}")

with t.case("uninstall again: exit 0, nothing to remove"):
    p = run(uninstall_argv(env.pin))
    t.check(p.returncode == 0 and "nothing to remove" in p.stdout,
            f"exit {p.returncode}: {p.stdout}{p.stderr}")

# ---- what uninstall refuses, on a private bpffs (never the host's) -------------------

PRIVATE = r"""
set -u
d=$1; ctl=$2
mount -t bpf bpf "$d" || exit 99
mk() { mkdir -p "$(dirname "$1")"; bpftool map create "$1" type array key 4 value 4 entries 1 name "$2"; }
mk "$d/other/tool_map" tool_map
mk "$d/old/steer_slots" steer_slots
mk "$d/old/steer_gone_in_v2" steer_gone
mk "$d/old/v2/steer_gen" steer_gen
echo "== root"; "$ctl" uninstall --pin-path "$d"; echo "rc=$?"
echo "== other"; "$ctl" uninstall --pin-path "$d/other"; echo "rc=$?"
echo "== old"; "$ctl" uninstall --pin-path "$d/old"; echo "rc=$?"
echo "== left"; cd "$d" && find . ! -name '*.debug' | sort  # *.debug: the kernel's own
"""

with t.case("refuses a bpffs root and a directory of another tool; removes any layout of ours"):
    with tempfile.TemporaryDirectory(prefix="smg-steer-uninst-") as d:
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "--", "sh", "-c", PRIVATE,
                            "sh", d, CTL], capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        t.check(p.returncode == 0 and "rc=99" not in out, f"setup failed: {out}")
        part = dict(re.findall(r"== (\w+)\n(.*?)(?=\n== |\Z)", p.stdout + "\n", re.S))
        t.check(part["root"].strip().endswith("rc=1") and "root of a bpffs" in p.stderr,
                f"bpffs root not refused:\n{out}")
        t.check(part["other"].strip().endswith("rc=1") and "holds no steer_* pin" in p.stderr,
                f"another tool's directory not refused:\n{out}")
        t.check(part["old"].strip().endswith("rc=0") and "steer_gone_in_v2" in part["old"]
                and "uninstalled: 0 link(s) detached, 3 pin(s) and 2 directory(ies)" in
                part["old"], f"an unknown layout was not removed:\n{out}")
        left = part["left"].split()
        t.check(left == [".", "./other", "./other/tool_map"], f"left behind: {left}")

env.cleanup()
t.done()
