#!/bin/sh
# Run every test of smg-steer and print one summary line "N passed, N failed".
# Usage: tests/run.sh BUILD_DIR   (BUILD_DIR holds tests/ built with SAN=1)
# Each test program prints TAP ("ok N - name" / "not ok N - name"); a program
# that dies without a plan counts as one more failure. Leftovers of a crashed
# test (pins, cgroups) are swept at the end.
set -u
B=${1:-build/san}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
export STEER_BUILD="$top/$B" STEER_TOP="$top"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"

passed=0
failed=0
logdir=$(mktemp -d /tmp/smg-steer-tests.XXXXXX)

# C test programs first (fast, unit level), then Python and shell tests
# (daemon, end to end, demo). TESTS may be set to run a subset.
if [ -z "${TESTS:-}" ]; then
	TESTS="$(ls "$B"/tests/test_* 2>/dev/null | sort) $(ls "$here"/test_*.py 2>/dev/null | sort) $(ls "$here"/test_*.sh 2>/dev/null | sort)"
fi

run_one() {
	t=$1
	name=$(basename "$t")
	log="$logdir/$name.log"
	echo "== $name"
	case "$t" in
	*.sh) timeout 300 sh "$t" >"$log" 2>&1 ;;
	*.py) timeout 300 /usr/bin/python3 "$t" >"$log" 2>&1 ;;
	*) timeout 300 "$t" >"$log" 2>&1 ;;
	esac
	rc=$?
	ok=$(grep -c '^ok ' "$log")
	nok=$(grep -c '^not ok ' "$log")
	grep -E '^(ok|not ok) ' "$log" | sed 's/^/   /'
	if ! grep -q '^1\.\.[0-9]' "$log" || { [ "$rc" != 0 ] && [ "$nok" = 0 ]; }; then
		echo "   not ok - $name exited with status $rc without a complete plan"
		nok=$((nok + 1))
	fi
	if [ "$nok" != 0 ]; then
		echo "   --- log of $name (last 60 lines) ---"
		tail -n 60 "$log" | sed 's/^/   | /'
	fi
	passed=$((passed + ok))
	failed=$((failed + nok))
}

for t in $TESTS; do
	if [ -e "$t" ]; then
		run_one "$t"
	else
		echo "== $(basename "$t")"
		echo "   not ok - $t is missing"
		failed=$((failed + 1))
	fi
done

# Sweep what a crashed test may have left: names end in the test's pid, and
# only those of processes that are gone are removed.
cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
for d in /sys/fs/bpf/smg-steer-test-* ${cg:+"$cg"/smg-steer-test-*}; do
	[ -d "$d" ] || continue
	pid=${d##*-}
	kill -0 "$pid" 2>/dev/null && continue
	case "$d" in
	/sys/fs/bpf/*) rm -rf "$d" ;;
	*) rmdir "$d" 2>/dev/null ;;
	esac
done
rm -rf "$logdir"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
