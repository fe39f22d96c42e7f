#!/bin/sh
# A short run of every libFuzzer target (tests/fuzz/), FUZZ_SECONDS each
# (default 3): one TAP line per target, ok when it was built, ran and found
# no crash. `make test` builds the targets into build/fuzz first; the long
# runs are `make fuzz` (see docs/benchmarks.md, "Fuzzing").
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${STEER_TOP:-$(cd "$here/../.." && pwd)}
FUZZ_SECONDS=${FUZZ_SECONDS:-3} exec "$top/tests/fuzz/run.sh" "$top/build/fuzz"
