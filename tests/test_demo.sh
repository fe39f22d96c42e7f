#!/bin/sh
# make demo, short: it must run, show steering, exit 0 and leave nothing
# behind (network namespaces, cgroups, pins, processes).
top=${STEER_TOP:-$(cd "$(dirname "$0")/.." && pwd)}
out=$(mktemp /tmp/smg-steer-demo-test.XXXXXX)
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }

netns_before=$(ip netns list 2>/dev/null | wc -l)
cd "$top" && make --no-print-directory demo DEMO_SECONDS=5 >"$out" 2>&1
rc=$?
sed 's/^/# /' "$out" | tail -40
[ $rc = 0 ] && ok "make demo DEMO_SECONDS=5 exits 0" || nok "make demo exits 0 (got $rc)"

grep -q '^t= *[0-9.]*s' "$out" && grep -q '127.0.0.11:8000' "$out" &&
	grep -q 'total: w1' "$out" && ! grep -q 'status unavailable' "$out" &&
	ok "the demo prints its per-backend table every second" ||
	nok "the demo prints its per-backend table every second"

# Connections went to more than one worker: steering, not a single default.
used=$(grep '^total:' "$out" | grep -o 'w[1-4] [0-9]*' | awk '$2 > 0' | wc -l)
[ "$used" -ge 2 ] && ok "connections spread over $used workers" ||
	nok "connections spread over workers (only $used used)"

left=""
[ "$(ip netns list 2>/dev/null | wc -l)" -gt "$netns_before" ] && left="$left netns"
ls -d /sys/fs/bpf/smg-steer-test-demo-* >/dev/null 2>&1 && left="$left pins"
cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
ls -d "$cg"/smg-steer-test-demo-* >/dev/null 2>&1 && left="$left cgroups"
pgrep -f 'smg-steer-demo-|smg-steer-test-demo-' >/dev/null 2>&1 && left="$left processes"
pgrep -f 'tools/demo.py' >/dev/null 2>&1 && left="$left demo"
[ -z "$left" ] && ok "nothing left behind" || nok "left behind:$left"
rm -f "$out"
echo "1..$n"
exit $fail
