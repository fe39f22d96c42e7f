# tools/bench/bench.mk - the benchmarks (included by the Makefile).
#
#   make bench    build the benchmark programs into build/bench and run
#                 tools/bench/run.sh (docs/benchmarks.md has what it measures)
#
# Each tools/bench/*.c is a program that links the product's modules; each
# tools/bench/bpf/*.bpf.c is a BPF object of the bench's own, loaded next to
# the shipped programs on their pinned maps. tools/bench/run.sh's header has
# the parts and the knobs (BENCH_*).

BENCH_BINS := $(patsubst tools/bench/%.c,$(O)/bench/%,$(wildcard tools/bench/*.c))
BENCH_BPF := $(patsubst tools/bench/bpf/%.bpf.c,$(O)/bench/%.bpf.o,$(wildcard tools/bench/bpf/*.bpf.c))

$(O)/bench/%.bpf.o: tools/bench/bpf/%.bpf.c $(BPF_HDRS) $(VMLINUX)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(O)/bench/%: tools/bench/%.c $(wildcard tools/bench/*.h) $(call libs_of,$(MODULES)) $(PROTO_H) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itools/bench $< $(call libs_of,$(MODULES)) -o $@ $(LDFLAGS_SAN) \
		$(call ldlibs_of,$(MODULES)) -lpthread

bench: deps deps-bench
	@$(MAKE) --no-print-directory build-all $(BENCH_BINS) $(BENCH_BPF)
	STEER_BUILD=$(abspath $(O)) tools/bench/run.sh

# The cache affinity table on its own (tools/bench/affmap.c): an array of
# steer_affin's shape, 4-way set-associative, BPF time per insert and lookup
# by BPF_PROG_TEST_RUN. Root; no data plane; not part of make bench.
# AFFMAP_ROUNDS (9) rounds of AFFMAP_REPEAT (1000000) runs each.
AFFMAP_ROUNDS ?= 9
AFFMAP_REPEAT ?= 1000000

$(O)/bench/affmap: tools/bench/affmap.c bpf/steer_common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(LDFLAGS_SAN) -lbpf

.PHONY: bench-affmap
bench-affmap: $(O)/bench/affmap $(O)/bench/affmap.bpf.o
	$(O)/bench/affmap $(O)/bench/affmap.bpf.o $(AFFMAP_ROUNDS) $(AFFMAP_REPEAT)
