#!/usr/bin/python3
"""The shape of the shipped tree, read from the sources (no build needed):

- every library module of user/ is a folder with one interface header,
  user/MODULE/MODULE.h, and the other folders include only that header;
- the folders' includes form no cycle, and follow the Makefile's MODULES
  order (a module uses only modules after it), which is also its link order;
- bpf/ includes nothing of user space, and holds only the programs
  smg-steerd loads (and their headers);
- no code, comment or doc cites an "issue N" or a "run N" (the tracker and
  the measurement log are not in the repository), and nothing shipped (bpf/,
  user/, the operator docs, the README, the manifests) offers an ablation.
"""
import os
import re

from taplib import Tap

TOP = os.environ.get("STEER_TOP") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER = os.path.join(TOP, "user")
# The programs: folders that link modules and are linked by nobody.
PROGRAMS = {"daemon", "ctl"}
# The BPF objects smg-steerd and smg-steerctl load.
SHIPPED_BPF = {"steer.bpf.c", "steer_wire.bpf.c", "steer_xdp.bpf.c", "steer_decap.bpf.c"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

t = Tap()


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def folders():
    return sorted(d for d in os.listdir(USER) if os.path.isdir(os.path.join(USER, d)))


def sources(folder):
    d = os.path.join(USER, folder)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".c", ".h")))


def includes_of(folder):
    """[(file, included path)] of the folder's sources."""
    return [(path, inc) for path in sources(folder) for inc in INCLUDE.findall(read(path))]


def folder_uses(folder):
    """The other user/ folders whose headers the folder includes."""
    uses = set()
    for _, inc in includes_of(folder):
        head = inc.split("/")[0]
        if "/" in inc and head in folders() and head != folder:
            uses.add(head)
    return uses


def makefile_modules():
    m = re.search(r"^MODULES := (.*)$", read(os.path.join(TOP, "Makefile")), re.M)
    t.check(m, "the Makefile has no MODULES line")
    return m.group(1).split()


with t.case("each library module is a folder with one interface header, MODULE/MODULE.h"):
    libs = [f for f in folders() if f not in PROGRAMS]
    t.check(len(libs) >= 8, f"only {libs}")
    for f in libs:
        t.check(os.path.exists(os.path.join(USER, f, f + ".h")), f"user/{f}/{f}.h is missing")
    stray = [f for f in os.listdir(USER) if os.path.isfile(os.path.join(USER, f))]
    t.check(not stray, f"files at the top of user/: {stray}")

with t.case("another folder's header is included only as its interface, FOLDER/FOLDER.h"):
    bad = []
    for f in folders():
        for path, inc in includes_of(f):
            head, _, name = inc.partition("/")
            if name and head in folders() and head != f and name != head + ".h":
                bad.append(f"{os.path.relpath(path, TOP)}: \"{inc}\"")
            if not name and os.path.exists(os.path.join(USER, inc)):
                bad.append(f"{os.path.relpath(path, TOP)}: \"{inc}\" (top of user/)")
    t.check(not bad, "internal headers of other folders:\n" + "\n".join(bad))

with t.case("a folder's own files include its headers by their folder-less name or FOLDER/"):
    bad = []
    for f in folders():
        for path, inc in includes_of(f):
            if "/" not in inc and inc.endswith(".h") and not os.path.exists(
                    os.path.join(USER, f, inc)) and not inc.startswith("steer") \
                    and not inc.endswith(".pb-c.h") and not inc.endswith(".skel.h"):
                bad.append(f"{os.path.relpath(path, TOP)}: \"{inc}\"")
    t.check(not bad, "includes that resolve nowhere in the folder:\n" + "\n".join(bad))

with t.case("no include cycle between folders; the Makefile's MODULES order holds"):
    order = makefile_modules()
    libs = [f for f in folders() if f not in PROGRAMS]
    t.check(sorted(order) == sorted(libs), f"MODULES {order} but folders {libs}")
    for i, m in enumerate(order):
        above = set(order[:i + 1]) | PROGRAMS
        wrong = folder_uses(m) & above
        t.check(not wrong, f"user/{m} uses {sorted(wrong)}, listed before it (or itself, or "
                f"a program): a cycle, or MODULES out of order")
    for p in PROGRAMS:
        t.check(p not in set().union(*(folder_uses(f) for f in folders())),
                f"a folder includes the program {p}")

with t.case("bpf/ includes nothing of user space and holds only the loaded programs"):
    bpf = os.path.join(TOP, "bpf")
    for name in os.listdir(bpf):
        path = os.path.join(bpf, name)
        for inc in INCLUDE.findall(read(path)):
            t.check("/" not in inc and not os.path.exists(os.path.join(USER, inc)),
                    f"bpf/{name} includes \"{inc}\"")
        if name.endswith(".bpf.c"):
            t.check(name in SHIPPED_BPF, f"bpf/{name} is not loaded by smg-steerd: the lab's "
                    f"programs live in tools/bench/bpf/")

SHIPPED_TEXT = ["README.md", "Dockerfile", "docs/operations.md", "docs/deployment.md",
                "docs/algorithm.md", "docs/man/smg-steerd.8", "docs/man/smg-steerctl.8"]
HISTORY = re.compile(r"(?<!-)\b(?:issue|run)s? #?\d+\b", re.I)
ABLATION = re.compile(r"ablation", re.I)


def tree_files(*dirs):
    """Text files under dirs (relative to TOP), build output and caches aside."""
    out = []
    for d in dirs:
        for root, subdirs, files in os.walk(os.path.join(TOP, d)):
            subdirs[:] = [s for s in subdirs if s not in ("build", "__pycache__", ".git")]
            out += [os.path.join(root, f) for f in sorted(files)
                    if not f.endswith((".png", ".bin", ".pyc"))]
    return out


def lines_matching(paths, pattern):
    hits = []
    for path in paths:
        try:
            text = read(path)
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{os.path.relpath(path, TOP)}:{n}: {line.strip()[:100]}")
    return hits


with t.case("no code, comment or doc cites an issue or a run by number"):
    paths = [os.path.join(TOP, f) for f in ("README.md", "Makefile", "Dockerfile")]
    hits = lines_matching(paths + tree_files("bpf", "user", "tools", "tests", "docs", ".ci"),
                          HISTORY)
    t.check(not hits, f"{len(hits)} line(s):\n" + "\n".join(hits[:40]))

with t.case("nothing shipped carries or offers ablation code"):
    paths = [os.path.join(TOP, p) for p in SHIPPED_TEXT if os.path.exists(os.path.join(TOP, p))]
    hits = lines_matching(paths + tree_files("bpf", "user", "docs/deploy"), ABLATION)
    t.check(not hits, f"{len(hits)} line(s):\n" + "\n".join(hits[:40]))

t.done()
