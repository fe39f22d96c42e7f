#!/bin/sh
# Run every libFuzzer target of tests/fuzz/ and print TAP, one line per target:
#   ok N - fuzz_NAME: RUNS runs in S s, 0 crashes
# Usage: tests/fuzz/run.sh BUILD_DIR   (BUILD_DIR holds fuzz_* from `make fuzz-build`)
# FUZZ_SECONDS (default 60) bounds each target's run, FUZZ_RUNS (optional) its
# inputs; FUZZ_SECONDS=0 with FUZZ_RUNS=N runs exactly N inputs. Seeds are read
# from tests/fuzz/NAME/ and never written: new inputs go to a scratch corpus.
# A crash, leak, timeout or out-of-memory leaves its input in
# BUILD_DIR/fuzz-artifacts/NAME/ and makes the line "not ok".
set -u
B=${1:?usage: $0 BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
secs=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-}
n=0
failed=0
for src in "$here"/fuzz_*.c; do
	name=$(basename "$src" .c)
	target=${name#fuzz_}
	n=$((n + 1))
	bin="$B/$name"
	if [ ! -x "$bin" ]; then
		echo "not ok $n - $name: not built ($bin missing; make O=$B FUZZ=1 CC=clang fuzz-build)"
		failed=$((failed + 1))
		continue
	fi
	work=$(mktemp -d /tmp/smg-steer-fuzz-run.XXXXXX)
	mkdir -p "$work/corpus" "$work/art"
	set -- -max_total_time="$secs" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 \
		-artifact_prefix="$work/art/"
	[ -n "$runs" ] && set -- "$@" -runs="$runs"
	[ -f "$here/$target.dict" ] && set -- "$@" -dict="$here/$target.dict"
	start=$(date +%s)
	# stdin from /dev/null: no input ever waits on a terminal.
	"$bin" "$@" "$work/corpus" "$here/$target" </dev/null >"$work/log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
	crashes=$(find "$work/art" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
	if [ "$rc" = 0 ] && [ "$crashes" = 0 ] && [ "${execs:-0}" -gt 0 ]; then
		echo "ok $n - $name: ${execs} runs in ${took} s, 0 crashes"
	else
		echo "not ok $n - $name: exit $rc, ${execs:-0} runs in ${took} s, $crashes crash(es)"
		mkdir -p "$B/fuzz-artifacts/$target"
		cp "$work"/art/* "$B/fuzz-artifacts/$target/" 2>/dev/null
		cp "$work/log" "$B/fuzz-artifacts/$target/log"
		grep -v '^#\|^INFO\|^Done\|^stat::' "$work/log" | tail -n 40 | sed 's/^/# /'
		echo "# inputs and log kept in $B/fuzz-artifacts/$target/"
		failed=$((failed + 1))
	fi
	rm -rf "$work"
done
echo "1..$n"
[ "$failed" = 0 ]
