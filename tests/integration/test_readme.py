#!/usr/bin/python3
"""README.md for a newcomer: the "A worker to try it with" walkthrough runs as
written, and the default --cgroup is flagged as steering the whole host.

The walkthrough's shell block is run by sh in a private network namespace,
with only its paths redirected: /tmp/smg-try to a temp dir, build/ and tests/
to this build and tree, its cgroup to a throwaway one, the daemon's pins to a
private directory, `make` skipped, and its `sleep` replaced by a bounded wait
for the condition it stands for (a published table with both workers).
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


def walkthrough():
    """The first sh block after the heading "A worker to try it with"."""
    at = README.index("### A worker to try it with")
    m = re.search(r"```sh\n(.*?)```", README[at:], re.S)
    t.check(m, "no sh block after the heading")
    return m.group(1)


WAIT = (f"timeout 20 sh -c 'until {CTL} --pin-path {env.pin} -o json status 2>/dev/null | "
        f"grep -q \"\\\"table_entries\\\": 2\"; do sleep 0.1; done'")


def localize(block):
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        cmd = line.split("#")[0].strip() if not line.lstrip().startswith("echo '") else line
        if not cmd or cmd == "make" or cmd.startswith("make "):
            continue
        if re.fullmatch(r"sleep \d+", cmd.strip()):
            out.append(WAIT)
            continue
        cmd = cmd.replace("/tmp/smg-try", env.tmp)
        cmd = cmd.replace("/sys/fs/cgroup/smg-try", env.cgroup)
        cmd = cmd.replace("/sys/fs/cgroup/cgroup.procs", os.path.join(env.root_cg, "cgroup.procs"))
        cmd = cmd.replace("build/py", os.path.join(L.BUILD, "py"))
        cmd = re.sub(r"(?<![\w/])build/smg-steerctl", f"{CTL} --pin-path {env.pin}", cmd)
        cmd = re.sub(r"(?<![\w/])build/smg-steerd",
                     f"{os.path.join(L.BUILD, 'smg-steerd')} --pin-path {env.pin}", cmd)
        cmd = cmd.replace("tests/lib/fake_worker.py", os.path.join(L.TOP, "tests", "lib", "fake_worker.py"))
        out.append(cmd)
    return "\n".join(out) + "\n"


with t.case("README: the fake-worker walkthrough runs as written and steers to the idle worker"):
    script = localize(walkthrough())
    t.check("fake_worker.py" in script and "smg-steerd" in script, script)
    # bash, as a reader's shell: `kill $(jobs -p)` needs its job table. Its own
    # session, so that anything the block leaves running can be killed at once.
    log = os.path.join(env.tmp, "walkthrough.log")
    with open(log, "w") as f:
        p = subprocess.Popen(["bash", "-e", "-c", script], stdout=f, stderr=subprocess.STDOUT,
                             cwd=L.TOP, start_new_session=True)
        try:
            rc = p.wait(90)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        # Whatever the block left running (it failed before its kill line,
        # or hung): bash without job control keeps its jobs in its group.
        try:
            os.killpg(p.pid, 9)
        except ProcessLookupError:
            pass
        p.wait()
    out = open(log).read()
    lines = out.splitlines()
    t.check(rc == 0, f"exit {rc}:\n{script}\n{out[-3000:]}")
    t.check("w2" in lines and "w1" not in lines, f"the connect did not print w2:\n{out}")
    t.check("next connection -> 127.0.0.12:8000" in out, f"explain:\n{out}")
    t.check(not os.path.exists(env.pin), "the daemon left its pins (it detaches on exit)")
    t.check(not os.path.exists(env.cgroup), "the walkthrough's cgroup was not removed")
    left = subprocess.run(["pgrep", "-f", env.tmp], capture_output=True, text=True).stdout
    t.check(not left.strip(), f"processes left: {left}")

with t.case("README: the default --cgroup is said to steer every process on the host"):
    row = [ln for ln in README.splitlines() if ln.startswith("| `--cgroup PATH`")]
    t.check(row and "every process on the host" in row[0], f"flag table row: {row}")
    t.check(re.search(r"default `--cgroup` is the cgroup2 root: it steers every process on the "
                      r"host", README), "no warning next to the example")

with t.case("README: the demo's failed connects are explained"):
    t.check(re.search(r"failed connects when the worker is killed", README) and
            "--unhealthy-after" in README, "no explanation of the demo's failed connects")

env.cleanup()
t.done()
