#!/bin/sh
# Run smg-steer's tests and print one summary line "N passed, N failed".
#
# Usage: tests/run.sh BUILD_DIR [unit|all]
#   unit  tests/unit only: no root, no network namespace; run as root, they
#         run as nobody all the same, so that none comes to depend on root
#   all   tests/unit, then tests/integration (root: real BPF programs in
#         throwaway cgroups and network namespaces), the default
# TESTS may name the tests to run instead (paths, as the default lists them).
#
# Each test program prints TAP ("ok N - name" / "not ok N - name"); a program
# that dies without a plan counts as one more failure. Leftovers of a crashed
# test (pins, cgroups) are swept at the end.
set -u
B=${1:-build/san}
SUITE=${2:-all}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
case "$B" in /*) ;; *) B="$top/$B" ;; esac
export STEER_BUILD="$B" STEER_TOP="$top"
export PYTHONPATH="$here/lib${PYTHONPATH:+:$PYTHONPATH}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$here/lib/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"

passed=0
failed=0
logdir=$(mktemp -d /tmp/smg-steer-tests.XXXXXX)
chmod 755 "$logdir"

# The C programs of a suite, then its Python and shell tests.
suite_tests() {
	ls "$B/tests/$1"/test_* 2>/dev/null | sort
	ls "$here/$1"/test_*.py "$here/$1"/test_*.sh 2>/dev/null | sort
}

if [ -z "${TESTS:-}" ]; then
	case "$SUITE" in
	unit) TESTS=$(suite_tests unit) ;;
	all) TESTS="$(suite_tests unit) $(suite_tests integration)" ;;
	*)
		echo "usage: $0 BUILD_DIR [unit|all]" >&2
		exit 2
		;;
	esac
fi

# Unit tests never need root: as root, they run as nobody (LeakSanitizer
# needs ptrace of its own process, which a setuid-less nobody keeps).
as_unprivileged() {
	if [ "$(id -u)" = 0 ] && [ "$SUITE" = unit ]; then
		setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$@"
	else
		"$@"
	fi
}

run_one() {
	t=$1
	name=$(basename "$t")
	log="$logdir/$name.log"
	echo "== $name"
	case "$t" in
	*.sh) as_unprivileged timeout 300 sh "$t" >"$log" 2>&1 ;;
	*.py) as_unprivileged timeout 300 /usr/bin/python3 "$t" >"$log" 2>&1 ;;
	*) as_unprivileged timeout 300 "$t" >"$log" 2>&1 ;;
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
if [ "$SUITE" != unit ]; then
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
fi
rm -rf "$logdir"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
