#!/bin/sh
# make demo, short: it must run, show steering, exit 0 and leave nothing
# behind (network namespaces, cgroups, pins, processes).
top=${STEER_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
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

# The table: header and rows aligned; each row's published wait agrees with the
# inputs shown next to it (one source: queue / throughput + 0.15 s x kv / (1 - kv));
# every failed connect explained.
check=$(/usr/bin/python3 - "$out" <<'EOF2'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
bad = []
tables = 0
for i, line in enumerate(lines):
    if not line.startswith("  backend "):
        continue
    tables += 1
    head = line
    rows = [r for r in lines[i + 1:i + 5] if re.match(r"^  w[1-4] ", r)]
    if len(rows) != 4:
        bad.append(f"table at line {i}: {len(rows)} rows")
    for r in rows:
        if len(r) != len(head) or r.index(r.split()[2]) != head.index("health"):
            bad.append(f"misaligned:\n{head}\n{r}")
        f = r.split()
        if f[4] == "-":
            continue
        q, tp, kv, base = float(f[4]), float(f[5]), float(f[6]), float(f[7])
        barrier = lambda k: 150.0 * k / (1.0 - k)
        want = q / tp * 1000 + barrier(kv)
        tol = 0.06 + q / tp * 1000 * 0.5 / tp + barrier(min(kv + 0.0005, 0.999)) - barrier(kv)
        if abs(base - want) > tol:
            bad.append(f"base {base} ms but queue {q}, tput {tp}, kv {kv} give {want:.1f} ms: {r}")
total = [l for l in lines if l.startswith("total:")]
if not total or not re.search(r"failed (\d+) \(.*\b0 other\)", total[0]):
    bad.append(f"unexplained failed connects: {total}")
print("ok" if tables >= 3 and not bad else f"{tables} tables; " + "\n".join(bad[:5]))
EOF2
)
[ "$check" = ok ] && ok "the table is aligned, its waits match its inputs, failures are explained" ||
	{ nok "the table is aligned, its waits match its inputs, failures are explained"; echo "$check" | sed 's/^/# /'; }

grep -q 'w4 is killed. Until smg-steerd ejects it' "$out" &&
	ok "the demo explains the failed connects while a killed worker awaits ejection" ||
	nok "the demo explains the failed connects while a killed worker awaits ejection"

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
