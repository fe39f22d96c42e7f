#!/bin/sh
# Cache affinity at connect (docs/simulator.md, "Cache affinity"): smg-steer
# with and without affinity at several slacks, its first placement by least
# wait or by rendezvous hash, and the baselines, on conversations (multi-turn,
# every worker with a prefix cache) and on single requests, both engines, at
# the headline load. Writes OUTDIR/affinity.csv and prints the tables with the
# targets checked:
#   on conversations affinity cuts the mean and the p99 TTFT by >= 20 %;
#   on single requests it costs at most 5 % of either.
#
# Usage: tools/sim/affinity.sh [OUTDIR] [--quick]
#   OUTDIR    where affinity.csv goes (default build/sim)
#   --quick   tiny runs (seconds): the numbers are not meaningful
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/sim/lib.sh
. "$here/lib.sh"
sim_setup affinity "$@"

# Measured requests (turns, for conversations). A conversation's turn is
# about 4.7 times a single request's prompt, so at the same load turns come
# that much slower: 1M turns on the FIFO engine are some 33 simulated
# hours, 200k on the batching one (step by step, the costlier) some 2.5.
if [ "$quick" = 1 ]; then
	n_mt=20000 n_mt_b=4000 n_st=20000 n_st_b=5000 n_seed=10000 n_seed_b=3000 seeds=
else
	n_mt=1000000 n_mt_b=200000 n_st=1000000 n_st_b=500000 n_seed=500000 n_seed_b=100000 seeds="2 3"
fi
# Conversations: 4 turns on average, 10 s to think between them.
conv="--turns 4 --think 10"
# Single requests from clients that share a key (a cgroup, say): 64.
keys=64

# smg-steer without affinity, with it at every slack (first placement by
# least wait), by rendezvous hash at three, the context-scaled slack (the
# variant, docs), and the baselines.
slacks="0 0.05 0.1 0.25 0.5 1 inf"
lw=steer
for s in $slacks; do lw="$lw,steer@$s"; done
hrw="steer@hrw0.1,steer@hrw0.5,steer@hrwinf"
var="steer@ctx0,steer@hrwctx0"
base="cache-aware,chbl,jsq,oracle,oracle-cache"

for e in fifo batch; do
	if [ $e = fifo ]; then mt=$n_mt st=$n_st; else mt=$n_mt_b st=$n_st_b; fi
	# Conversations: one job per group, the batching engine's being long
	# (the labels keep the groups in this order in the CSV).
	i=1
	for pols in "$lw" "$hrw" "$var" "$base"; do
		job "$e-mt-$i" "--scenario aff-mt --engine $e --requests $mt $conv --policies $pols"
		i=$((i + 1))
	done
	# Single requests: one key each (a key per conversation), and keys
	# shared by unrelated requests (a key per client).
	job "$e-st-1lw" "--scenario aff-st --engine $e --requests $st --policies $lw"
	job "$e-st-2rest" "--scenario aff-st --engine $e --requests $st --policies $hrw,$var,$base"
	job "$e-stk-1lw" "--scenario aff-st-keys --engine $e --requests $st --keys $keys --policies $lw"
	job "$e-stk-2rest" "--scenario aff-st-keys --engine $e --requests $st --keys $keys --policies $hrw,$var,$base"
	# Fewer and more clients per key.
	for k in 16 256; do
		job "$e-stk$k" "--scenario aff-st-keys$k --engine $e --requests $st --keys $k --policies steer,steer@0.05,steer@0.1,steer@0.25,$var"
	done
	# Conversations above the headline load (of the prompts as sent): a
	# fleet that prefills the cached tokens again saturates first.
	for l in 1.0 1.2 1.5; do
		job "$e-load$l" "--scenario aff-load --engine $e --requests $mt --load $l $conv --policies steer,steer@0.5,steer@ctx0,cache-aware,oracle-cache"
	done
	# Seeds 2 and 3: the targets' rows.
	if [ $e = fifo ]; then ms=$n_seed; else ms=$n_seed_b; fi
	for s in $seeds; do
		job "$e-seed$s-mt" "--scenario aff-mt --engine $e --requests $ms --seed $s $conv --policies $lw,$var"
		job "$e-seed$s-stk" "--scenario aff-st-keys --engine $e --requests $ms --seed $s --keys $keys --policies $lw,$var"
	done
done

# First placement: 16 routers sharing their request accounting, each turn of
# a conversation through any of them (their tables differ; rendezvous
# hashing agrees without sharing them).
r16="--scenario aff-mt-r16 --requests $((n_mt / 4)) $conv --routers 16 --share-wire --turn-router-any"
job "fifo-mt-r16" "$r16 --policies steer,steer@0.1,steer@0.5,steer@inf,$hrw,$var,cache-aware,chbl,oracle-cache"

# Why a fixed slack misses on the FIFO engine, each with one thing changed:
# the kernel counting only the tokens the worker prefills, a prefix cache of
# the FIFO engine's KV (49,152 tokens).
w="--engine fifo --requests $n_mt $conv"
job "fifo-why-wire" "--scenario aff-why-wireuncached $w --wire-uncached --policies steer,steer@0.1,steer@0.25,steer@0.5,$var"
job "fifo-why-cache" "--scenario aff-why-cache49152 $w --cache-tokens 49152 --policies steer,steer@0.1,steer@0.25,steer@0.5,steer@inf,$var,oracle-cache"

sim_run_jobs "$out/affinity.csv"

sh "$here/affinity-table.sh" "$out/affinity.csv"
