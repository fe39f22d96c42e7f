#!/bin/sh
# 16 routers that push each request to each other (smg-steerd --peer-push on),
# with and without the random phase (--peer-phase): docs/simulator.md, "16
# routers with the step cadence". Per engine, response mode and seed: one
# router, and 16 routers sharing their wire counters (--share-wire) 0.1 to
# 1 ms late and with the delays measured between two real daemons by `make
# bench` part peer, drawn per event: on a quiet host
# (data/peer_push_delays_quiet.txt) and on a loaded one
# (data/peer_push_delays_loaded.txt), without the phase, and with it
# (--steer-jitter). fluid everywhere; on the batching engine also the step
# cadence (max), with plain JSON answers with the step probe: one per router
# per worker (--step-probe, what smg-steerd does) and one per worker for the
# fleet (--step-probe-one, not built in smg-steerd), its step ends reaching
# every router at once or, with --share-steps, pushed to the other routers as
# late as the sends (--share-steps-backdated: and dated when they happened,
# as a clock the routers share would let them); the cadence that extrapolates
# steps (periodic) next to max.
# Writes OUTDIR/push.csv and prints the table of ratios to one router.
#
# Usage: tools/sim/push.sh [OUTDIR] [--quick]
#   OUTDIR    where push.csv goes (default build/sim)
#   --quick   tiny runs (seconds): the numbers are not meaningful
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
sim_setup push "$@"
loaded="$here/data/peer_push_delays_loaded.txt"
quiet="$here/data/peer_push_delays_quiet.txt"

if [ "$quick" = 1 ]; then n=3000; nf=3000; else n=500000; nf=1000000; fi

for s in 1 2 3; do
	for eng in fifo batch; do
		for m in stream full; do
			a="--engine $eng --response $m --seed $s"
			if [ $eng = fifo ]; then
				a="$a --requests $nf --policies steer"
			else
				a="$a --requests $n --policies steer,steer:max,steer:periodic"
			fi
			probes=none
			[ $eng = batch ] && [ $m = full ] &&
				probes="--step-probe --step-probe-one --step-probe-one+--share-steps --step-probe-one+--share-steps-backdated"
			for p in $probes; do
				[ "$p" = none ] && p=""
				p=$(echo "$p" | tr + ' ')
				tag=$(echo "$eng-$m-s$s$p" | tr -d ' ')
				one=$p
				case "$p" in --step-probe-one*) one=--step-probe ;; esac
				job "$tag-one" "--scenario one $a $one"
				b="--scenario r16 $a $p --routers 16 --share-wire"
				for dl in 0.0001 0.0002 0.0003 0.0005 0.001; do
					job "$tag-nophase$dl" "$b --share-delay $dl"
				done
				job "$tag-nophase-samples" "$b --share-delay-samples $loaded"
				job "$tag-nophase-samplesquiet" "$(echo "$b" | sed 's/--scenario r16/--scenario r16b/') --share-delay-samples $quiet"
				job "$tag-phase-samples" "$b --share-delay-samples $loaded --steer-jitter"
				job "$tag-phase0.001" "$b --share-delay 0.001 --steer-jitter"
			done
		done
	done
done

sim_run_jobs "$out/push.csv"

# Ratios of 16 routers to one router of the same estimator and cadence (with
# plain JSON on the batching engine: one router with its probes), seeds 1/2/3.
awk -F, '
function kind(v) {
	return ((v ~ /stepmax/) ? "fluid-step (max)" : (v ~ /stepperiodic/) ? "fluid-step (periodic)" : "fluid") "|" \
	       ((v ~ /probe1backdated/) ? "one per worker, pushed, dated" : (v ~ /probe1shared/) ? "one per worker, pushed" : \
	        (v ~ /probe1/) ? "one per worker, at once" : (v ~ /probe/) ? "per router" : "-")
}
NR > 1 {
	v = $3
	key = $23 "|" $24 "|" kind(v)
	if ($1 == "one") {
		one[key "|" $12] = $16
		if (v ~ /probe/) { # the same one router for every probe kind
			sub(/per router$/, "one per worker, at once", key)
			one[key "|" $12] = $16
			sub(/at once$/, "pushed", key)
			one[key "|" $12] = $16
			sub(/pushed$/, "pushed, dated", key)
			one[key "|" $12] = $16
		}
		next
	}
	d = "0"
	if (v ~ /shared~samples/) d = ($1 == "r16b") ? "measured, quiet" : "measured, loaded"
	else if (match(v, /shared[0-9.e-]+/)) d = substr(v, RSTART + 6, RLENGTH - 6)
	r16[key "|" ((v ~ /jitter/) ? "phase " : "no phase ") d "|" $12] = $16
}
END {
	ncol = split("no phase 0.0001|no phase 0.0002|no phase 0.0003|no phase 0.0005|no phase 0.001|no phase measured, loaded|no phase measured, quiet|phase measured, loaded|phase 0.001", cols, "|")
	nrow = split("fifo|stream|fluid|- ;fifo|full|fluid|- ;batch|stream|fluid|- ;batch|stream|fluid-step (max)|- ;batch|full|fluid|per router;batch|full|fluid-step (max)|per router;batch|full|fluid|one per worker, at once;batch|full|fluid-step (max)|one per worker, at once;batch|full|fluid|one per worker, pushed;batch|full|fluid-step (max)|one per worker, pushed;batch|stream|fluid-step (periodic)|- ;batch|full|fluid-step (periodic)|per router;batch|full|fluid-step (periodic)|one per worker, pushed;batch|full|fluid-step (max)|one per worker, pushed, dated;batch|full|fluid-step (periodic)|one per worker, pushed, dated", rows, ";")
	printf "| engine | response | estimator | step probe | 1 router p99 (ms) |"
	for (i = 1; i <= ncol; i++) printf " 16: %s |", cols[i]
	printf "\n|---|---|---|---|---|"
	for (i = 1; i <= ncol; i++) printf "---|"
	printf "\n"
	for (j = 1; j <= nrow; j++) {
		k = rows[j]
		sub(/ $/, "", k)
		split(k, kp, "|")
		line = "| " kp[1] " | " kp[2] " | " kp[3] " | " kp[4] " | "
		sep = ""
		for (s = 1; s <= 3; s++) {
			line = line sep (((k "|" s) in one) ? sprintf("%.1f", one[k "|" s] * 1000) : "-")
			sep = "/"
		}
		line = line " |"
		for (i = 1; i <= ncol; i++) {
			cell = ""; sep = ""
			for (s = 1; s <= 3; s++) {
				x = r16[k "|" cols[i] "|" s]; o = one[k "|" s]
				cell = cell sep ((x > 0 && o > 0) ? sprintf("%.2f", x / o) : "-"); sep = "/"
			}
			line = line " " cell " |"
		}
		print line
	}
}' "$out/push.csv"
