# shellcheck shell=sh
# tools/sim/lib.sh - what the simulator's scripts (run.sh, cadence.sh,
# probe.sh, push.sh) share, sourced by them: their arguments ([OUTDIR]
# [--quick]; OUTDIR defaults to build/sim of the source tree), the release
# binary, a work directory removed at exit, and a job list run two
# simulations at a time into one CSV. Every run is deterministic, so the same
# jobs give a byte-identical CSV.

# sim_setup NAME [OUTDIR] [--quick]: sets out, quick, top, sim and work, for
# the sourcing script, which has set here (its own directory).
# shellcheck disable=SC2034,SC2154
sim_setup() {
	name=$1
	shift
	top=$(cd "$here/../.." && pwd)
	out=
	quick=0
	for arg in "$@"; do
		case $arg in
		--quick) quick=1 ;;
		-*) sim_usage ;;
		*)
			[ -z "$out" ] || sim_usage
			out=$arg
			;;
		esac
	done
	[ -n "$out" ] || out="$top/build/sim"
	sim="$top/build/steer-sim"
	make -s -C "$top" build/steer-sim >&2
	mkdir -p "$out"
	work=$(mktemp -d "/tmp/steer-sim-$name.XXXXXX")
	trap 'rm -rf "$work"' EXIT INT TERM
	jobs="$work/jobs"
	: >"$jobs"
}

sim_usage() {
	echo "usage: $0 [OUTDIR] [--quick]   (OUTDIR: default build/sim)" >&2
	exit 2
}

# job LABEL ARGS: one simulation; the CSV keeps the jobs in label order.
job() {
	printf '%s\t%s\n' "$1" "$2" >>"$jobs"
}

# sim_run_jobs CSV: every job, two at a time, each into its own file, then
# merged in label order under one header.
sim_run_jobs() {
	start=$(date +%s)
	export sim work
	# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
	tr '\t' '\n' <"$jobs" | xargs -d '\n' -n 2 -P 2 sh -c '
		label=$1; args=$2
		# shellcheck disable=SC2086
		"$sim" --no-header $args >"$work/$label.csv" || { echo "steer-sim failed: $args" >&2; exit 255; }
	' sh
	{
		"$sim" --csv-header
		for f in "$work"/*.csv; do cat "$f"; done
	} >"$1"
	echo "steer-sim: $(($(wc -l <"$1") - 1)) rows in $(($(date +%s) - start)) s -> $1" >&2
}
