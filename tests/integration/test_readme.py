#!/usr/bin/python3
"""README.md for a newcomer: the "A worker to try it with" walkthrough runs as
written, stops at its first error and cleans up either way; the README is at
most 200 lines and says what the demo's failed connects are.

The walkthrough is a script for `sh -eu`; it is run that way in a private
network namespace, with only its paths redirected: the cgroup2 mount it finds
to a throwaway cgroup of this test, its temp dir under the test's, build/ and
tests/ to this build and tree, the daemon's pins to a private directory,
`make` skipped, and its `sleep` replaced by a bounded wait for the condition it
stands for (a published table with both workers).
"""
import os
import re
import subprocess

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

t = Tap()
README = open(os.path.join(L.TOP, "README.md")).read()
env = L.Env("readme")
CTL = os.path.join(L.BUILD, "smg-steerctl")
STEERD = os.path.join(L.BUILD, "smg-steerd")
TRY_CG = os.path.join(env.cgroup, "smg-try")


def walkthrough():
    """The script of the first sh block after the heading "A worker to try it with":
    what the block feeds to `sudo sh -eu`."""
    at = README.index("### A worker to try it with")
    m = re.search(r"```sh\n(.*?)```", README[at:], re.S)
    t.check(m, "no sh block after the heading")
    block = m.group(1).splitlines()
    t.check(block[0] == "sudo sh -eu <<'EOF'" and block[-1] == "EOF",
            f"the block is not a script for sudo sh -eu: {block[0]!r} ... {block[-1]!r}")
    return block[1:-1]


WAIT = (f"timeout 20 sh -c 'until {CTL} --pin-path {env.pin} -o json status 2>/dev/null | "
        f"grep -q \"\\\"table_entries\\\": 2\"; do sleep 0.1; done'")


def localize(lines):
    out = []
    for line in lines:
        cmd = line.split("#")[0].strip()
        if cmd == "make":
            continue
        if re.fullmatch(r"sleep \d+", cmd):
            out.append(WAIT)
            continue
        if cmd.startswith("cg=$(awk"):
            t.check("cgroup2" in cmd and "/proc/mounts" in cmd, f"cg from where? {line}")
            out.append(f"cg={env.cgroup}")
            continue
        line = line.replace("mktemp -d /tmp/smg-try.", f"mktemp -d {env.tmp}/smg-try.")
        line = line.replace("--pb2-dir build/py", f"--pb2-dir {os.path.join(L.BUILD, 'py')}")
        line = re.sub(r"(?<![\w/])build/smg-steerctl", f"{CTL} --pin-path {env.pin}", line)
        line = re.sub(r"(?<![\w/])build/smg-steerd", f"{STEERD} --pin-path {env.pin}", line)
        line = line.replace("tests/lib/fake_worker.py",
                            os.path.join(L.TOP, "tests", "lib", "fake_worker.py"))
        out.append(line)
    return "\n".join(out) + "\n"


def run_script(script):
    """(exit code, output) of sh -eu running script, in a session of its own,
    so that anything it leaves running is found and killed afterwards."""
    log = os.path.join(env.tmp, "walkthrough.log")
    with open(log, "w") as f:
        p = subprocess.Popen(["sh", "-eu", "-c", script], stdout=f, stderr=subprocess.STDOUT,
                             cwd=L.TOP, start_new_session=True)
        try:
            rc = p.wait(90)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        try:
            os.killpg(p.pid, 9)
        except ProcessLookupError:
            pass
        p.wait()
    return rc, open(log).read()


def check_cleaned_up(what):
    t.check(not os.path.exists(env.pin), f"{what}: the daemon left its pins")
    t.check(not os.path.exists(TRY_CG), f"{what}: the walkthrough's cgroup was not removed")
    left = [n for n in os.listdir(env.tmp) if n.startswith("smg-try.")]
    t.check(not left, f"{what}: its temp dir was not removed: {left}")
    procs = subprocess.run(["pgrep", "-f", f"{env.tmp}/smg-try"], capture_output=True,
                           text=True).stdout
    t.check(not procs.strip(), f"{what}: processes left: {procs}")


with t.case("README: the walkthrough runs as written, steers to the idle worker, cleans up"):
    script = localize(walkthrough())
    t.check("fake_worker.py" in script and "smg-steerd" in script, script)
    rc, out = run_script(script)
    lines = out.splitlines()
    t.check(rc == 0, f"exit {rc}:\n{script}\n{out[-3000:]}")
    t.check("w2" in lines and "w1" not in lines, f"the connect did not print w2:\n{out}")
    t.check("next connection -> 127.0.0.12:8000" in out, f"explain:\n{out}")
    check_cleaned_up("after a run")

with t.case("README: the walkthrough stops at its first error, and cleans up all the same"):
    # The daemon refuses its arguments (a second --vip): the script must stop
    # there, before the connect, with the workers killed and everything removed.
    broken = localize(walkthrough()).replace(
        f"{STEERD} --pin-path {env.pin}", f"{STEERD} --pin-path {env.pin} --vip 127.0.0.1:1", 1)
    rc, out = run_script(broken)
    t.check(rc not in (0, "timeout"), f"exit {rc}:\n{out[-2000:]}")
    t.check("w2" not in out.splitlines(), f"it went on past the error:\n{out[-2000:]}")
    check_cleaned_up("after an error")

with t.case("README: at most 200 lines; says the default --cgroup steers every process"):
    n = len(README.splitlines())
    t.check(n <= 200, f"{n} lines")
    t.check(re.search(r"By default it steers every process on the host\*\* \(`--cgroup` is the "
                      r"cgroup2 root\)", README), "no warning about the default --cgroup")

with t.case("README: the demo's failed connects and fast ejection are explained"):
    t.check("fast ejection" in README.lower(), "fast ejection is not explained")
    m = re.search(r"`failed (\d+) \((\d+) while w4 was down and not yet ejected, 0 other\)`",
                  README)
    t.check(m and m.group(1) == m.group(2), "no sample of the demo's last line")

# The walkthrough's cgroup, should a run have left it: the test's own
# throwaway cgroup cannot go while it holds it.
if os.path.isdir(TRY_CG):
    os.rmdir(TRY_CG)
env.cleanup()
t.done()
