#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#
# dec_ab.sh - two builds' BPF time per connect, side by side: deccost of each
# build (tools/bench/deccost.c at that revision, its own BPF programs) takes
# turns, round by round, in one private network namespace, against one set of
# backends. Each round runs every shape in each build's process, so each
# build's "shape - anchor" differences are paired within its rounds, and the
# two builds' rounds interleave in time.
#
#   tools/bench/dec_ab.sh REV_A REV_B     (root; git revisions; a few minutes)
#
#   DEC_AB_ROUNDS    outer rounds, builds alternating (8)
#   DEC_AB_INNER     deccost rounds per process (4)
#   DEC_AB_CONNECTS  connects per measurement (2000)
#   DEC_AB_SIZES     backends (8,64,256)
#   DEC_AB_SHAPES    shapes both builds know (spread,affinity,affinity-key,affinity-new)
#
# Prints, per build, size and shape, the median of the per-round differences
# of connect4 ns from spread, with the quartiles. Builds each revision in a
# temporary worktree under /tmp, and removes it, the cgroups and the pins at
# exit.
set -u -o pipefail

if [ "$#" -ne 2 ]; then
	echo "usage: $0 REV_A REV_B" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "dec_ab: run as root (BPF programs, cgroups, a network namespace)" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${DEC_AB_ROUNDS:-8}
INNER=${DEC_AB_INNER:-4}
CONNECTS=${DEC_AB_CONNECTS:-2000}
SIZES=${DEC_AB_SIZES:-8,64,256}
SHAPES=${DEC_AB_SHAPES:-spread,affinity,affinity-key,affinity-new}

if [ -z "${DEC_AB_NETNS:-}" ]; then
	export DEC_AB_NETNS=1
	exec unshare -n -- bash "$0" "$@"
fi
ip link set lo up
sysctl -qw net.ipv4.ip_local_port_range="10240 65535"

cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cgroot" ] || { echo "dec_ab: no cgroup2 mount" >&2; exit 1; }
tag="smg-steer-decab-$$"
TMP=$(mktemp -d "/tmp/$tag.XXXXXX")
OB_PID=

cleanup() {
	trap - EXIT INT TERM
	[ -n "$OB_PID" ] && kill "$OB_PID" 2>/dev/null && wait "$OB_PID" 2>/dev/null
	rm -rf /sys/fs/bpf/"$tag"-* 2>/dev/null
	for cg in "$cgroot/$tag"-*; do
		[ -d "$cg" ] && rmdir "$cg" 2>/dev/null
	done
	for w in "$TMP"/a "$TMP"/b; do
		[ -d "$w" ] && git -C "$top" worktree remove --force "$w" 2>/dev/null
	done
	git -C "$top" worktree prune 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build() { # label rev
	echo "dec_ab: building $2 ($1)" >&2
	git -C "$top" worktree add -q --detach "$TMP/$1" "$2" || exit 1
	make -s -C "$TMP/$1" O=build build/bench/deccost build/bench/onebyte >"$TMP/$1.build" 2>&1 || {
		cat "$TMP/$1.build" >&2
		exit 1
	}
	mkdir -p "$cgroot/$tag-$1"
}
build a "$1"
build b "$2"

"$TMP/a/build/bench/onebyte" --base 127.0.3.1 --port 9000 --count 256 >"$TMP/onebyte.out" 2>&1 &
OB_PID=$!
for i in $(seq 100); do
	grep -q . "$TMP/onebyte.out" 2>/dev/null && break
	sleep 0.1
done

out="$TMP/dec.csv"
hdr=--header
for r in $(seq "$ROUNDS"); do
	for side in a b; do
		"$TMP/$side/build/bench/deccost" --pin "/sys/fs/bpf/$tag-$side" \
			--cgroup "$cgroot/$tag-$side" --first 127.0.3.1:9000 --sizes "$SIZES" \
			--shapes "$SHAPES" --connects "$CONNECTS" --rounds "$INNER" $hdr |
			sed "s/^/$side,$r,/" >>"$out" || exit 1
		hdr=
	done
	echo "dec_ab: round $r of $ROUNDS" >&2
done

python3 - "$out" "$1" "$2" <<'EOF'
import collections, csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0][2:]
col = {k: hdr.index(k) for k in ("round", "backends", "shape", "connect4_ns")}
d = collections.defaultdict(dict)
for r in rows[1:]:
    x = r[2:]
    if x[col["round"]] == "round":
        continue
    d[(r[0], int(x[col["backends"]]), x[col["shape"]])][r[1] + "." + x[col["round"]]] = \
        float(x[col["connect4_ns"]])
names = {"a": sys.argv[2], "b": sys.argv[3]}
print("connect4 ns: spread's median; each shape's median difference from spread, paired "
      "by round [quartiles]")
for side in ("a", "b"):
    for n in sorted({k[1] for k in d}):
        base = d.get((side, n, "spread"), {})
        line = [f"{names[side]:>12} {n:>3} backends: spread {statistics.median(base.values()):,.0f}"]
        for sh in sorted({k[2] for k in d if k[2] != "spread"}):
            m = d.get((side, n, sh), {})
            diff = sorted(m[k] - base[k] for k in m if k in base)
            if diff:
                q = len(diff) // 4
                line.append(f"{sh} {statistics.median(diff):+,.0f} "
                            f"[{diff[q]:+,.0f}, {diff[-1 - q]:+,.0f}]")
        print("; ".join(line))
EOF
