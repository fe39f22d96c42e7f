#!/bin/sh
# tools/sim/peers.sh - the 16-router target with the routers sharing their
# wire counters (smg-steerd --peer): p99 wait at 16 routers against one
# router, both engines, both response modes, three seeds, for exchanges
# 1, 2 and 5 ms late, and without sharing (--peer-routers 16, the best a
# router can do alone). Prints a markdown table (docs/simulator.md).
#
#   tools/sim/peers.sh [BUILD_DIR]     (default build; about 10 minutes)
#
# --share-wire --share-delay D: every router learns every other router's
# sends and answers D seconds late (the exchange's interval plus its network
# latency); --steer-jitter: the random phase smg-steerd adds with --peer.
set -eu
S=${1:-build}/steer-sim
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for eng in fifo batch; do
	n=1000000
	[ "$eng" = batch ] && n=500000
	for resp in stream full; do
		for seed in 1 2 3; do
			c="--no-header --requests $n --seed $seed --engine $eng --response $resp"
			$S $c --policies steer --scenario one >>"$out"
			$S $c --routers 16 --policies steer-peers --scenario alone >>"$out"
			for dl in 0.001 0.002 0.005; do
				$S $c --routers 16 --share-wire --share-delay $dl --steer-jitter \
					--policies steer --scenario "shared$dl" >>"$out"
			done
		done
	done
done
python3 - "$out" <<'PY'
import collections, csv, sys
# Columns: 0 scenario, 11 seed, 15 p99, 22 engine, 23 response.
p99 = collections.defaultdict(dict)
for r in csv.reader(open(sys.argv[1])):
    p99[(r[22], r[23], r[0])][r[11]] = float(r[15])
print("| engine | response | 1 router p99 (s) | 16 alone (peer-routers 16) | 16 shared, 1 ms late | 2 ms | 5 ms |")
print("|---|---|---|---|---|---|---|")
worst = {}
for eng in ("fifo", "batch"):
    for resp in ("stream", "full"):
        one = p99[(eng, resp, "one")]
        cells = []
        for sc in ("alone", "shared0.001", "shared0.002", "shared0.005"):
            x = [p99[(eng, resp, sc)][s] / one[s] for s in sorted(one)]
            worst[sc] = max(worst.get(sc, 0), max(x))
            cells.append("/".join(f"{v:.2f}x" for v in x))
        print(f"| {eng} | {resp} | " + "/".join(f"{one[s]:.4f}" for s in sorted(one)) + " | "
              + " | ".join(cells) + " |")
print()
print("Seeds 1/2/3. Target: 16 routers <= 1.3x one router. Worst over engines, "
      "modes and seeds: " + ", ".join(f"{k} {v:.2f}x ({'met' if v <= 1.3 else 'missed'})"
                                      for k, v in worst.items()))
PY
