#!/bin/sh
# Run steer-sim's scenario grid, write OUTDIR/results.csv and the plots, and
# print the headline scenario as a markdown table.
#
# Usage: tools/sim/run.sh [OUTDIR] [--quick]
#   OUTDIR    where results.csv and the plots go (default build/sim)
#   --quick   tiny runs (seconds), for tests: the numbers are not meaningful
#
# Builds the release binary (make sim: build/steer-sim) and runs two simulations
# at a time. Every run is deterministic (seed in the CSV), so the same
# command gives byte-identical results.csv.
set -eu
export LC_ALL=C # file order, sort and number formats the same everywhere

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/sim/lib.sh
. "$here/lib.sh"
sim_setup run "$@"

# Measured requests per run. The headline needs the most: the oracle's p99
# moves by +-20 % between seeds at 200k requests and settles near 2M. The
# batching engine costs about three times as much per request.
if [ "$quick" = 1 ]; then
	n_head=20000 n_seed=5000 n_sweep=5000 n_abl=5000 n_batch=3000 n_ka=3000
else
	n_head=2000000 n_seed=1000000 n_sweep=500000 n_abl=1000000 n_batch=500000 n_ka=300000
fi

# One job per line: a label (file name order = CSV order) and arguments.

# Headline: bimodal, 80 % load, 1 s poll, 16 workers; 1 and 16 routers.
# 'all' runs smg-steer as it is (steer: the fluid wire estimator) and with
# the flat credit alone (steer=flat: one credit per connection, no bytes).
job 00-head-r1 "--scenario headline --requests $n_head"
job 01-head-r16 "--scenario headline --requests $n_head --routers 16"
for s in 2 3; do
	job 02-seed$s "--scenario headline-seed --requests $n_seed --seed $s"
	job 02-seed$s-r16 "--scenario headline-seed --requests $n_seed --seed $s --routers 16 --policies steer-peers"
done

# Every estimator, both response modes, both engines, 1 and 16 routers
# (the targets' figures). The FIFO engine's stream/1-router baselines are
# the headline rows above.
est="steer=flat,steer=credit,steer=pending,steer=sum,steer=fluid"
estp="steer-peers=flat,steer-peers=credit,steer-peers=pending,steer-peers=pending-peers,steer-peers=sum,steer-peers=fluid"
for e in fifo batch; do
	if [ $e = fifo ]; then n=$n_abl; else n=$n_batch; fi
	for m in stream full; do
		job "05-est-$e-$m-r1" "--scenario estimators --engine $e --response $m --requests $n --policies jsq,p2c,reqcount,oracle,$est"
		job "06-est-$e-$m-r16" "--scenario estimators --engine $e --response $m --requests $n --routers 16 --policies jsq,$estp"
	done
done
# 16 routers: what is missing, and what would reach one router's p99.
for m in stream full; do
	a="--scenario routers16 --response $m --requests $n_abl --routers 16"
	job "07-r16-$m-running" "$a --report-running-prefill --policies steer-peers"
	job "07-r16-$m-poll01" "$a --poll 0.1 --policies steer-peers"
	job "07-r16-$m-poll01-running" "$a --poll 0.1 --report-running-prefill --policies steer-peers"
	job "07-r16-$m-phase1024" "$a --phase-tokens 1024 --policies steer-peers"
	job "07-r16-$m-guessmean" "$a --peer-guess-mean --policies steer-peers"
	job "07-r16-$m-peerfill" "$a --peer-fill --phase-tokens 0 --policies steer-peers"
	job "07-r16-$m-share0" "$a --share-wire --policies steer"
	for d in 0.01 0.1; do
		job "07-r16-$m-share$d" "$a --share-wire --share-delay $d --steer-jitter --policies steer"
	done
	b="--scenario routers16 --engine batch --response $m --requests $n_batch --routers 16"
	job "08-r16-batch-$m-running" "$b --report-running-prefill --policies steer-peers"
	job "08-r16-batch-$m-poll01-running" "$b --poll 0.1 --report-running-prefill --policies steer-peers"
	job "08-r16-batch-$m-share0" "$b --share-wire --policies steer"
	job "08-r16-batch-$m-share0.01" "$b --share-wire --share-delay 0.01 --steer-jitter --policies steer"
	job "08-r16-batch-$m-share0.01-nojitter" "$b --share-wire --share-delay 0.01 --policies steer"
done
# Keep-alive: K requests per connection, most recently idle connection first.
for m in stream full; do
	for k in 1 2 4 8; do
		job "09-ka-$m-$k" "--scenario keepalive --response $m --keepalive $k --requests $n_ka --policies jsq,oracle,steer=flat,steer=credit,steer=pending,steer=fluid"
	done
done
# Robustness: the kernel's token count off by a factor (a wrong bytes-per-token).
for m in stream full; do
	for x in 0.5 0.75 1.5 2; do
		job "11-wirex-$m-$x" "--scenario wire-scale --response $m --requests $n_ka --wire-token-scale $x --policies steer=pending,steer"
	done
done
# Robustness: gen_throughput measured instead of nominal.
for m in stream full; do
	job "10-tput-$m" "--scenario tput-measured --response $m --requests $n_abl --tput measured --policies jsq,p2c,reqcount,oracle,steer=flat,steer=pending,steer=fluid"
done

# Sweeps around the headline, one parameter at a time.
for l in 0.5 0.6 0.7 0.8 0.9 0.95; do
	job "20-load-$l" "--scenario load --requests $n_sweep --load $l"
done
for p in 0.1 0.3 1 3 10; do
	job "30-poll-$p" "--scenario poll --requests $n_sweep --poll $p"
	# Ablations of the flat credit: which missing information costs what.
	job "31-poll-$p-run" "--scenario poll --requests $n_sweep --poll $p --policies steer=flat,steer --report-running-prefill"
	job "32-poll-$p-credit" "--scenario poll --requests $n_sweep --poll $p --policies steer=credit"
	job "33-poll-$p-both" "--scenario poll --requests $n_sweep --poll $p --policies steer=credit --report-running-prefill"
done
for r in 1 2 4 8 16; do
	job "40-routers-$r" "--scenario routers --requests $n_sweep --routers $r"
	# The random water-fill phase forced at --peer-routers 1.
	job "41-routers-$r-jitter" "--scenario routers --requests $n_sweep --routers $r --policies steer=flat,steer-peers=flat,steer,steer-peers --steer-jitter"
done
for d in bimodal lognormal uniform; do
	job "50-dist-$d" "--scenario dist --requests $n_sweep --dist $d"
done
for w in 4 8 16 32; do
	job "60-workers-$w" "--scenario workers --requests $n_sweep --workers $w"
done
# Model choices: staggered polls, measured gen_throughput (above).
job 70-stagger "--scenario stagger --requests $n_abl --stagger --policies jsq,p2c,reqcount,steer=flat,steer,oracle"

sim_run_jobs "$out/results.csv"

# Plots (gnuplot-nox); skipped with a note when gnuplot is missing.
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot -e "csv='$out/results.csv'; outdir='$out'" "$here/plot.gp"
else
	echo "steer-sim: gnuplot not found, no plots (apt-get install gnuplot-nox)" >&2
fi

sh "$here/table.sh" "$out/results.csv"
