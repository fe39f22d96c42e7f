#!/bin/sh
# Overload protection (docs/simulator.md, "Overload"): admission control at
# connect under bursts and constant overload, both engines, streaming. Writes
# OUTDIR/overload.csv and prints the tables with the targets checked:
#   steer with the wait bound B keeps the admitted p99 <= 1.1 x B, and refuses
#   at most 1.2 x what the oracle with the same bound refuses.
#
# Usage: tools/sim/overload.sh [OUTDIR] [--quick]
#   OUTDIR    where overload.csv goes (default build/sim)
#   --quick   tiny runs (seconds): the numbers are not meaningful
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/sim/lib.sh
. "$here/lib.sh"
sim_setup overload "$@"

# As run.sh: 1M measured requests on the FIFO engine, 500k on the batching
# one (about 6 and 1 simulated hours, some 500 and 100 bursts).
if [ "$quick" = 1 ]; then
	n_fifo=20000 n_batch=8000 seeds=1
else
	n_fifo=1000000 n_batch=500000 seeds="1 2 3"
fi
# B: one large prompt's prefill (6000 tokens) at a 1x worker, above every
# wait at 80 % load (docs/simulator.md).
b_fifo=3 b_batch=0.75
# The batching engine's running-request limit (smg's mock worker).
cap=256

main="steer,steer+bound,steer+shed,jsq+shed,oracle+bound"
for e in fifo batch; do
	if [ $e = fifo ]; then n=$n_fifo b=$b_fifo; else n=$n_batch b=$b_batch; fi
	for w in b1.2 b1.5 c1.2 c1.5; do
		case $w in
		b*) load="--load 0.6 --burst-load ${w#b}" ;;
		c*) load="--load ${w#c}" ;;
		esac
		for s in $seeds; do
			a="--engine $e --requests $n --seed $s --wait-bound $b $load"
			if [ "$s" = 1 ]; then pols=$main; else pols="steer+bound,oracle+bound"; fi
			job "$e-$w-s$s-main" "--scenario overload $a --policies $pols"
			if [ $e = batch ]; then
				job "$e-$w-s$s-cap" "--scenario overload-cap $a --running-cap $cap --policies steer+bound"
			fi
		done
	done
done

# Why steer+bound misses on constant overload (seed 1): the FIFO engine with
# KV to spare (no waits for memory, no preemptions) or reporting the request
# in prefill; the batching engine with a bound of B / 5, or publishing the
# prefill rate it measured instead of its nominal one.
for w in c1.2 c1.5; do
	a="--engine fifo --requests $n_fifo --wait-bound $b_fifo --load ${w#c} --policies steer+bound"
	job "fifo-$w-why-kv" "--scenario overload-why-kv64 $a --kv-tokens $((49152 * 64))"
	job "fifo-$w-why-running" "--scenario overload-why-running $a --report-running-prefill"
done
for w in b1.5 c1.2 c1.5; do
	case $w in
	b*) load="--load 0.6 --burst-load ${w#b}" ;;
	c*) load="--load ${w#c}" ;;
	esac
	a="--engine batch --requests $n_batch $load --policies steer+bound"
	job "batch-$w-why-b5" "--scenario overload-why-b5 $a --wait-bound $(awk "BEGIN { print $b_batch / 5 }")"
	job "batch-$w-why-measured" "--scenario overload-why-measured $a --wait-bound $b_batch --tput measured"
done

sim_run_jobs "$out/overload.csv"

sh "$here/overload-table.sh" "$out/overload.csv"
