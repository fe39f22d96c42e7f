#!/bin/sh
# Run steer-sim's scenario grid, write OUTDIR/results.csv and the plots, and
# print the headline scenario as a markdown table.
#
# Usage: tools/sim/run.sh OUTDIR [--quick]
#   --quick   tiny runs (seconds), for tests: the numbers are not meaningful
#
# Builds the release binary (make build/steer-sim) and runs two simulations
# at a time. Every run is deterministic (seed in the CSV), so the same
# command gives byte-identical results.csv.
set -eu
export LC_ALL=C # file order, sort and number formats the same everywhere

usage() {
	echo "usage: $0 OUTDIR [--quick]" >&2
	exit 2
}

[ $# -ge 1 ] || usage
out=$1
quick=0
if [ $# -ge 2 ]; then
	[ "$2" = "--quick" ] || usage
	quick=1
fi

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
sim="$top/build/steer-sim"
make -s -C "$top" build/steer-sim >&2
mkdir -p "$out"
work=$(mktemp -d /tmp/steer-sim-run.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

# Measured requests per run. The headline needs the most: the oracle's p99
# moves by +-20 % between seeds at 200k requests and settles near 2M.
if [ "$quick" = 1 ]; then
	n_head=20000 n_seed=5000 n_sweep=5000 n_abl=5000
else
	n_head=2000000 n_seed=1000000 n_sweep=500000 n_abl=1000000
fi

# One job per line: a label (file name order = CSV order) and arguments.
jobs="$work/jobs"
: >"$jobs"
job() {
	printf '%s\t%s\n' "$1" "$2" >>"$jobs"
}

# Headline: bimodal, 80 % load, 1 s poll, 16 workers; 1 and 16 routers.
job 00-head-r1 "--scenario headline --requests $n_head"
job 01-head-r16 "--scenario headline --requests $n_head --routers 16"
for s in 2 3; do
	job 02-seed$s "--scenario headline-seed --requests $n_seed --seed $s"
done

# Sweeps around the headline, one parameter at a time.
for l in 0.5 0.6 0.7 0.8 0.9 0.95; do
	job "10-load-$l" "--scenario load --requests $n_sweep --load $l"
done
for p in 0.1 0.3 1 3 10; do
	job "20-poll-$p" "--scenario poll --requests $n_sweep --poll $p"
	# Ablations: which missing information costs what.
	job "21-poll-$p-run" "--scenario poll --requests $n_sweep --poll $p --policies steer --report-running-prefill"
	job "22-poll-$p-credit" "--scenario poll --requests $n_sweep --poll $p --policies steer --steer-credit-actual"
	job "23-poll-$p-both" "--scenario poll --requests $n_sweep --poll $p --policies steer --report-running-prefill --steer-credit-actual"
done
for r in 1 2 4 8 16; do
	job "30-routers-$r" "--scenario routers --requests $n_sweep --routers $r"
	# Proposed fix for herding: a random water-fill phase per router.
	job "31-routers-$r-jitter" "--scenario routers --requests $n_sweep --routers $r --policies steer,steer-peers --steer-jitter"
done
for d in bimodal lognormal uniform; do
	job "40-dist-$d" "--scenario dist --requests $n_sweep --dist $d"
done
for w in 4 8 16 32; do
	job "50-workers-$w" "--scenario workers --requests $n_sweep --workers $w"
done
# Model choices: staggered polls, measured gen_throughput.
job 60-stagger "--scenario stagger --requests $n_abl --stagger --policies jsq,p2c,reqcount,steer,oracle"
job 61-tput "--scenario tput-measured --requests $n_abl --tput measured --policies jsq,p2c,reqcount,steer,oracle"

# Two at a time, each into its own file; merged in label order.
export sim work
start=$(date +%s)
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
tr '\t' '\n' <"$jobs" | xargs -d '\n' -n 2 -P 2 sh -c '
	label=$1; args=$2
	# shellcheck disable=SC2086
	"$sim" --no-header $args >"$work/$label.csv" || { echo "steer-sim failed: $args" >&2; exit 255; }
' sh
{
	"$sim" --csv-header
	for f in "$work"/*.csv; do cat "$f"; done
} >"$out/results.csv"
echo "steer-sim: $(($(wc -l <"$out/results.csv") - 1)) rows in $(($(date +%s) - start)) s -> $out/results.csv" >&2

# Plots (gnuplot-nox); skipped with a note when gnuplot is missing.
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot -e "csv='$out/results.csv'; outdir='$out'" "$here/plot.gp"
else
	echo "steer-sim: gnuplot not found, no plots (apt-get install gnuplot-nox)" >&2
fi

sh "$here/table.sh" "$out/results.csv"
