#!/bin/sh
# The step probe (docs/simulator.md, "The step probe"): on the
# batching engine, every router keeps one streaming request of its own
# decoding on every worker (--step-probe), so the step cadence sees every step
# end even when the clients' responses are full ones. Side by side, per
# response mode and seed: the oracle and JSQ without and with the probes (they
# cost the engine a decoding request each), fluid, and fluid with the cadence
# (max, sum, periodic); at 16 routers, --peer-routers 16 with and without the
# probes (16 per worker); 16 routers that share their wire counters 0 to 5 ms
# late (smg-steerd --peer) with the cadence; a 4 ms coarse clock. Writes
# OUTDIR/probe.csv and prints the tables.
#
# Usage: tools/sim/probe.sh [OUTDIR] [--quick]
#   OUTDIR    where probe.csv goes (default build/sim)
#   --quick   tiny runs (seconds): the numbers are not meaningful
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/sim/lib.sh
. "$here/lib.sh"
sim_setup probe "$@"

if [ "$quick" = 1 ]; then n=3000; else n=500000; fi

for m in full stream; do
	for s in 1 2 3; do
		a="--scenario probe --engine batch --response $m --requests $n --seed $s"
		job "$m-seed$s" "$a --policies oracle,jsq,steer,steer:max"
		job "$m-seed$s-probe" "$a --step-probe --policies oracle,jsq,steer:max,steer:sum,steer:periodic"
	done
	a="--scenario probe16 --engine batch --response $m --requests $n --routers 16"
	job "$m-r16" "$a --policies oracle,steer-peers:max"
	job "$m-r16-probe" "$a --step-probe --policies oracle,steer-peers:max"
done
# 16 routers that share their wire counters (smg-steerd --peer) with the
# cadence: D seconds late with the random phase (--peer keeps it), and at
# once without it (the bound an exchange could reach).
for m in stream full; do
	a="--scenario shared16 --engine batch --response $m --requests $n --routers 16 --share-wire --policies steer:max"
	[ $m = full ] && a="$a --step-probe"
	job "$m-shared0" "$a --share-delay 0"
	for dl in 0.001 0.002 0.005; do
		job "$m-shared$dl" "$a --share-delay $dl --steer-jitter"
	done
done
# The same with one probe per worker for the whole fleet (--step-probe-one:
# its step ends reach every router at once; not built in smg-steerd).
a="--scenario shared16one --engine batch --response full --requests $n --routers 16 --share-wire --step-probe-one --policies steer:max"
job "one-shared0" "$a --share-delay 0"
for dl in 0.001 0.002 0.005; do
	job "one-shared$dl" "$a --share-delay $dl --steer-jitter"
done
job "full-tick" "--scenario probe-tick --engine batch --response full --requests $n --step-probe --clock-tick 0.004 --policies steer:max,steer:sum"

sim_run_jobs "$out/probe.csv"

# Columns: 1 scenario, 2 policy, 3 variant, 6 routers, 12 seed, 16 p99,
# 24 response, 28 TTFT p99. Ratios are to the oracle without probes.
awk -F, '
NR > 1 {
	k = $1 "|" $24 "|" $12 "|" $2 "|" $3
	p99[k] = $16
	ttft[k] = $28
}
function cell(sc, m, s, pol, v,   k, o) {
	k = sc "|" m "|" s "|" pol "|" v
	o = p99["probe|" m "|" s "|oracle|base"]
	if (!(k in p99) || o <= 0) return "-"
	return sprintf("%.1f ms, %.2fx (%.3f s)", p99[k] * 1000, p99[k] / o, ttft[k])
}
END {
	n = split("oracle|base oracle|probe jsq|base jsq|probe steer|base steer|stepmax steer|probe+stepmax steer|probe+stepsum steer|probe+stepperiodic", vs, " ")
	print "Batching engine, one router: p99 wait, / the oracle without probes (TTFT p99)"
	print ""
	print "| policy, variant | full, seed 1 | full, seed 2 | full, seed 3 | stream, seed 1 | stream, seed 2 | stream, seed 3 |"
	print "|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) {
		split(vs[i], pv, "|")
		line = "| " pv[1] ", " pv[2]
		for (j = 0; j < 6; j++)
			line = line " | " cell("probe", j < 3 ? "full" : "stream", j % 3 + 1, pv[1], pv[2])
		print line " |"
	}
	print ""
	print "Batching engine, seed 1: 16 routers sharing their wire counters, fluid + max (full: with the probes)"
	print ""
	print "| response | 1 router | 16, at once, no phase | 1 ms late, phase | 2 ms | 5 ms |"
	print "|---|---|---|---|---|---|"
	for (j = 0; j < 2; j++) {
		m = j ? "full" : "stream"
		one = p99["probe|" m "|1|steer|" (j ? "probe+stepmax" : "stepmax")]
		line = "| " m " | " sprintf("%.1f ms", one * 1000)
		split("shared+stepmax jitter+shared0.001+stepmax jitter+shared0.002+stepmax jitter+shared0.005+stepmax", sv, " ")
		for (i = 1; i <= 4; i++) {
			v = sv[i]
			if (j) sub(/\+stepmax$/, "+probe+stepmax", v)
			k = "shared16|" m "|1|steer|" v
			line = line " | " ((k in p99) && one > 0 ? sprintf("%.1f ms, %.2fx", p99[k] * 1000, p99[k] / one) : "-")
		}
		print line " |"
	}
	one = p99["probe|full|1|steer|probe+stepmax"]
	line = "| full, one probe per worker | " sprintf("%.1f ms", one * 1000)
	split("shared+probe1+stepmax jitter+shared0.001+probe1+stepmax jitter+shared0.002+probe1+stepmax jitter+shared0.005+probe1+stepmax", sv, " ")
	for (i = 1; i <= 4; i++) {
		k = "shared16one|full|1|steer|" sv[i]
		line = line " | " ((k in p99) && one > 0 ? sprintf("%.1f ms, %.2fx", p99[k] * 1000, p99[k] / one) : "-")
	}
	print line " |"
}' "$out/probe.csv"
