#!/bin/sh
# The step cadence (docs/simulator.md, "The step cadence"): fluid with and
# without the rest of the engine's current step as the response packets
# predict it, side by side with the oracle, on both engines, both response
# modes, 1 and 16 routers. Writes OUTDIR/cadence.csv
# and prints the tables. Separate from run.sh: the grid's results.csv is
# unchanged.
#
# Usage: tools/sim/cadence.sh [OUTDIR] [--quick]
#   OUTDIR    where cadence.csv goes (default build/sim)
#   --quick   tiny runs (seconds): the numbers are not meaningful
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/sim/lib.sh
. "$here/lib.sh"
sim_setup cadence "$@"

# As run.sh: 500k measured requests on the batching engine, 1M on the FIFO one.
if [ "$quick" = 1 ]; then
	n_batch=3000 n_fifo=5000
else
	n_batch=500000 n_fifo=1000000
fi

v1="steer,steer:max,steer:sum,steer:periodic"
v16="steer-peers,steer-peers:max,steer-peers:sum,steer-peers:periodic"
for e in batch fifo; do
	if [ $e = batch ]; then n=$n_batch; else n=$n_fifo; fi
	for m in stream full; do
		a="--scenario cadence --engine $e --response $m --requests $n"
		job "$e-$m-r1" "$a --policies oracle,$v1"
		job "$e-$m-r1-sparse" "$a --step-sparse --policies steer:max,steer:sum,steer:periodic"
		job "$e-$m-r16" "$a --routers 16 --policies $v16"
	done
done
# Batching, streaming, one router: the step length as an EWMA, and a
# coarse clock (the kernel's coarse tick is 4 ms at HZ=250).
b="--scenario cadence-est --engine batch --requests $n_batch"
job "batch-stream-ewma0.25" "$b --step-ewma 0.25 --policies steer:max,steer:sum,steer:periodic"
job "batch-stream-ewma0.125" "$b --step-ewma 0.125 --policies steer:max,steer:sum,steer:periodic"
for t in 0.001 0.004; do
	job "batch-stream-tick$t" "$b --clock-tick $t --policies steer:max,steer:sum,steer:periodic"
done
for s in 2 3; do
	job "batch-stream-seed$s" "--scenario cadence-seed --engine batch --requests $n_batch --seed $s --policies oracle,steer,steer:max,steer:periodic"
done

sim_run_jobs "$out/cadence.csv"

# Columns: 1 scenario, 2 policy, 3 variant, 6 routers, 12 seed, 16 p99,
# 23 engine, 24 response, 28 TTFT p99.
awk -F, '
NR > 1 {
	v = $3
	sub(/^base$/, "fluid", v)
	sub(/^step/, "", v)
	if ($2 == "oracle") v = "oracle"
	k = $1 "|" $12 "|" $23 "|" $24 "|" $6 "|" v
	p99[k] = $16
	ttft[k] = $28
}
function cell(sc, seed, e, m, r, v,   k, o) {
	k = sc "|" seed "|" e "|" m "|" r "|" v
	if (!(k in p99)) return "-"
	o = p99[sc "|" seed "|" e "|" m "|1|oracle"]
	if (r == 1)
		return sprintf("%.1f ms, %.2fx (%.3f s)", p99[k] * 1000, o > 0 ? p99[k] / o : 0, ttft[k])
	return sprintf("%.3f s, %.1fx", p99[k], p99[sc "|" seed "|" e "|" m "|1|" v] > 0 ? p99[k] / p99[sc "|" seed "|" e "|" m "|1|" v] : 0)
}
function cell2(sc, v,   k, o) {
	k = sc "|1|batch|stream|1|" v
	o = p99["cadence|1|batch|stream|1|oracle"]
	if (!(k in p99) || o <= 0) return "-"
	return sprintf("%.1f ms, %.2fx", p99[k] * 1000, p99[k] / o)
}
END {
	split("fluid max sum periodic max+sparse sum+sparse periodic+sparse oracle", vs, " ")
	split("batch|stream batch|full fifo|stream fifo|full", cols, " ")
	print "One router: p99 wait, / oracle (TTFT p99)"
	print ""
	print "| variant | batching, stream | batching, full | FIFO, stream | FIFO, full |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= 8; i++) {
		line = "| " vs[i]
		for (j = 1; j <= 4; j++) {
			split(cols[j], em, "|")
			line = line " | " cell("cadence", 1, em[1], em[2], 1, vs[i])
		}
		print line " |"
	}
	print ""
	print "16 routers, --peer-routers 16: p99 wait, / the same variant at one router"
	print ""
	print "| variant | batching, stream | batching, full | FIFO, stream | FIFO, full |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= 4; i++) {
		line = "| " vs[i]
		for (j = 1; j <= 4; j++) {
			split(cols[j], em, "|")
			line = line " | " cell("cadence", 1, em[1], em[2], 16, vs[i])
		}
		print line " |"
	}
	print ""
	print "Batching, stream, other seeds: p99 wait, / oracle (TTFT p99)"
	print ""
	print "| variant | seed 2 | seed 3 |"
	print "|---|---|---|"
	split("fluid max periodic oracle", ss, " ")
	for (i = 1; i <= 4; i++)
		printf("| %s | %s | %s |\n", ss[i], cell("cadence-seed", 2, "batch", "stream", 1, ss[i]),
			cell("cadence-seed", 3, "batch", "stream", 1, ss[i]))
	print ""
	print "Batching, stream, one router: the step length and the clock, p99 wait / oracle"
	print ""
	print "| step length, clock | max | sum | periodic |"
	print "|---|---|---|---|"
	split("|last gap, exact;+ewma0.25|EWMA 1/4, exact;+ewma0.125|EWMA 1/8, exact;+tick0.001|last gap, 1 ms tick;+tick0.004|last gap, 4 ms tick", es, ";")
	for (i = 1; i <= 5; i++) {
		split(es[i], pr, "|")
		sc = i == 1 ? "cadence" : "cadence-est"
		printf("| %s | %s | %s | %s |\n", pr[2], cell2(sc, "max" pr[1]), cell2(sc, "sum" pr[1]),
			cell2(sc, "periodic" pr[1]))
	}
}' "$out/cadence.csv"
