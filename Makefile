# smg-steer: load-aware connection steering for LLM inference fleets.
#
#   make          build smg-steerd and smg-steerctl into build/ (installs missing
#                 Debian packages first)
#   make check    the unit tests (no root, no package installation, a few minutes)
#   make man      regenerate the OPTIONS of docs/man/smg-steerd.8 from the options table
#   make test     build with ASan/UBSan into build/san/ and run every test
#   make demo     live demo, about 30 s (DEMO_SECONDS=N to change)
#   make install  PREFIX=/usr/local DESTDIR=
#   make bench    benchmarks (tools/bench; see docs/benchmarks.md)
#   make sim      the routing-quality simulator, build/steer-sim (tools/sim)
#   make fuzz     libFuzzer targets into build/fuzz/, FUZZ_SECONDS=60 each
#   make image    OCI image with buildah from a Debian 12 root (downloads it; not in make test)
#   make image-test  run that image with podman: --version, --check-config
#   make image-dockerfile  build the Dockerfile with buildah and run the same checks
#
# O is the output directory; SAN=1 builds with AddressSanitizer and UBSan.
#
# The product is bpf/ (the kernel programs) and user/, one folder per module
# with one header as its interface (user/MODULE/MODULE.h). Each module is an
# archive; a program or a test links the archives of the modules it uses, and
# from them only the objects it needs.

O ?= build
SAN ?= 0
PREFIX ?= /usr/local
DESTDIR ?=

CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PROTOC_C ?= protoc-c

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -I$(O) -Ibpf -Iuser -I$(O)/proto
ifeq ($(SAN),1)
CFLAGS_BASE += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
endif
# FUZZ=1 (with CC=clang): libFuzzer coverage plus ASan and UBSan, for build/fuzz.
ifeq ($(FUZZ),1)
CFLAGS_BASE += -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=fuzzer,address,undefined
endif
CFLAGS ?=
CFLAGS_ALL := $(CFLAGS_BASE) $(CFLAGS)

.SECONDARY:
.PHONY: all build-all deps deps-test deps-bench deps-image check check-build man test tests \
	demo bench sim image image-test image-dockerfile install clean format check-format \
	fuzz fuzz-build
.DEFAULT_GOAL := all

all: deps
	@$(MAKE) --no-print-directory build-all

deps:
	@tools/deps.sh build

deps-test:
	@tools/deps.sh test

deps-bench:
	@tools/deps.sh bench

# ---- BPF: the programs smg-steerd loads -----------------------------------------

BPF_HDRS := $(wildcard bpf/*.h)
VMLINUX := $(O)/vmlinux.h
# steer: connect4/6, getpeername4/6, release; steer_wire: request accounting;
# steer_xdp: XDP ingress; steer_decap: the backends' tc decap.
BPF_NAMES := steer steer_wire steer_xdp steer_decap
SKELS := $(patsubst %,$(O)/%.skel.h,$(BPF_NAMES))
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(O) -Ibpf

$(VMLINUX):
	@mkdir -p $(@D)
	@test -r /sys/kernel/btf/vmlinux || { echo "error: /sys/kernel/btf/vmlinux missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is required)" >&2; exit 1; }
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(O)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) $(VMLINUX)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# The skeleton of steer.bpf.o is steer_bpf; the others are named after their object.
$(O)/steer.skel.h: $(O)/steer.bpf.o
	$(BPFTOOL) gen skeleton $< name steer_bpf > $@.tmp && mv $@.tmp $@
$(O)/%.skel.h: $(O)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# ---- protobuf: the GetLoads subsets of the engines' services, and the reports
# between routers ------------------------------------------------------------------

PROTO_NAMES := $(patsubst proto/%.proto,%,$(wildcard proto/*.proto))
PROTO_H := $(patsubst %,$(O)/proto/%.pb-c.h,$(PROTO_NAMES))

$(O)/proto/%.pb-c.c $(O)/proto/%.pb-c.h &: proto/%.proto
	@mkdir -p $(O)/proto
	$(PROTOC_C) --proto_path=proto --c_out=$(O)/proto $<

$(O)/obj/proto/%.pb-c.o: $(O)/proto/%.pb-c.c $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(filter-out -Wextra,$(CFLAGS_ALL)) -c $< -o $@

# Python message classes for the fake workers (an implementation independent of ours).
PY_PROTO := $(patsubst %,$(O)/py/%_pb2.py,$(PROTO_NAMES))
$(O)/py/%_pb2.py: proto/%.proto
	@mkdir -p $(@D)
	protoc --proto_path=proto --python_out=$(@D) $<

# ---- user space: one archive per module --------------------------------------------
#
# A module's archive, its generated inputs, and the libraries its objects need.
# Modules are listed from the top of the dependency order to the bottom: a
# module uses only modules after it (tests/unit/test_layout.py checks it).

MODULES := peer probe discovery config metrics xdp dataplane loads privs policy common

LIBS_peer := -lprotobuf-c $(or $(shell pkg-config --libs libcrypto 2>/dev/null),-lcrypto)
LIBS_probe := -lcurl -lpthread
LIBS_discovery := -lcares
LIBS_config := -lyaml
LIBS_metrics := -lmicrohttpd -lpthread
LIBS_xdp := -lbpf -lelf -lz
LIBS_dataplane := -lbpf -lelf -lz -lpthread
LIBS_loads := -lgrpc -lgpr -lprotobuf-c -lcurl -ljson-c -lpthread
LIBS_privs := -lseccomp -lcap
LIBS_policy := -lm
LIBS_common :=

# What a module's sources need generated before they compile.
GEN_dataplane := $(O)/steer.skel.h $(O)/steer_wire.skel.h
GEN_xdp := $(O)/steer_xdp.skel.h $(O)/steer_decap.skel.h
GEN_loads := $(PROTO_H)
GEN_peer := $(PROTO_H)
# The generated protobuf code, in the archive of the module that uses it.
PROTO_OF_loads := sglang_scheduler tokenspeed_scheduler vllm_engine
PROTO_OF_peer := steer_peer

mod_objs = $(patsubst user/$(1)/%.c,$(O)/obj/$(1)/%.o,$(wildcard user/$(1)/*.c)) \
	$(patsubst %,$(O)/obj/proto/%.pb-c.o,$(PROTO_OF_$(1)))
lib_of = $(O)/lib/lib$(1).a
# The archives and libraries of a list of modules, in link order.
libs_of = $(foreach m,$(filter $(1),$(MODULES)),$(call lib_of,$(m)))
ldlibs_of = $(sort $(foreach m,$(1),$(LIBS_$(m))))

USER_HDRS := $(wildcard user/*/*.h) bpf/steer_common.h bpf/steer_select.h

define module_rules
$(O)/obj/$(1)/%.o: user/$(1)/%.c $(USER_HDRS) $(GEN_$(1))
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS_ALL) -c $$< -o $$@
$(call lib_of,$(1)): $(call mod_objs,$(1))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rules,$(m))))

# ---- the programs -----------------------------------------------------------------

DAEMON_MODS := $(MODULES)
CTL_MODS := xdp dataplane loads privs policy common

$(O)/obj/daemon/%.o: user/daemon/%.c $(USER_HDRS) $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@
$(O)/obj/ctl/%.o: user/ctl/%.c $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

DAEMON_OBJS := $(patsubst user/daemon/%.c,$(O)/obj/daemon/%.o,$(wildcard user/daemon/*.c))
CTL_OBJS := $(patsubst user/ctl/%.c,$(O)/obj/ctl/%.o,$(wildcard user/ctl/*.c))

# --as-needed: a program records only the shared libraries its objects use
# (smg-steerctl takes the names of the load sources from loads, not gRPC).
LDFLAGS_PROG := -Wl,--as-needed

$(O)/smg-steerd: $(DAEMON_OBJS) $(call libs_of,$(DAEMON_MODS))
	$(CC) $(CFLAGS_ALL) $^ -o $@ $(LDFLAGS_SAN) $(LDFLAGS_PROG) $(call ldlibs_of,$(DAEMON_MODS)) \
		-lpthread

$(O)/smg-steerctl: $(CTL_OBJS) $(call libs_of,$(CTL_MODS))
	$(CC) $(CFLAGS_ALL) $^ -o $@ $(LDFLAGS_SAN) $(LDFLAGS_PROG) $(call ldlibs_of,$(CTL_MODS)) \
		-ljson-c

PROGRAMS := $(O)/smg-steerd $(O)/smg-steerctl

# ---- tests ------------------------------------------------------------------------
#
# tests/unit: no root, no network namespace; tests/integration: root, real BPF
# programs in a throwaway cgroup, real connections; tests/lib: the harness and
# the fakes. Every C test links every module's archive: the linker takes only
# the objects the test uses.

TEST_CFLAGS := -Itests/lib -Itools/sim
UNIT_TESTS := $(patsubst tests/unit/%.c,$(O)/tests/unit/%,$(filter-out tests/unit/test_sim%.c,$(wildcard tests/unit/test_*.c)))
INTEGRATION_TESTS := $(patsubst tests/integration/%.c,$(O)/tests/integration/%,$(wildcard tests/integration/test_*.c))
# The unit tests of the pure modules: no BPF object, no skeleton.
UNIT_MODS := config loads policy common

$(O)/obj/tests/%.o: tests/lib/%.c $(wildcard tests/lib/*.h) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) -c $< -o $@

$(O)/tests/unit/%: tests/unit/%.c $(wildcard tests/lib/*.h) $(call libs_of,$(UNIT_MODS)) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) $< $(call libs_of,$(UNIT_MODS)) -o $@ $(LDFLAGS_SAN) \
		$(call ldlibs_of,$(UNIT_MODS)) -lpthread

# The simulator's test links the simulator (all but its main) and the policy.
SIM_SRCS := $(wildcard tools/sim/*.c)
SIM_LIB_SRCS := $(filter-out tools/sim/main.c,$(SIM_SRCS))
SIM_TESTS := $(patsubst tests/unit/%.c,$(O)/tests/unit/%,$(wildcard tests/unit/test_sim*.c))
$(SIM_TESTS): $(O)/tests/unit/%: tests/unit/%.c tests/lib/tap.h tests/lib/sim_testlib.h $(SIM_LIB_SRCS) $(wildcard tools/sim/*.h) $(call libs_of,policy) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) $< $(SIM_LIB_SRCS) $(call libs_of,policy) -o $@ $(LDFLAGS_SAN) -lm

UNIT_TESTS += $(SIM_TESTS)

# The options' test compares the man page with what tools/man writes.
MAN_LIB_SRCS := $(filter-out tools/man/gen_options.c,$(wildcard tools/man/*.c))
$(O)/tests/unit/test_options: tests/unit/test_options.c tests/lib/tap.h $(MAN_LIB_SRCS) $(wildcard tools/man/*.h) $(call libs_of,$(UNIT_MODS)) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) -Itools/man $< $(MAN_LIB_SRCS) $(call libs_of,$(UNIT_MODS)) \
		-o $@ $(LDFLAGS_SAN) $(call ldlibs_of,$(UNIT_MODS)) -lpthread

# The request-accounting tests share their responders and client.
WIRE_TESTS := $(patsubst %,$(O)/tests/integration/%,test_wire test_wire_fluid test_wire_cgroup)
$(WIRE_TESTS): $(O)/obj/tests/wire_lib.o

$(O)/tests/integration/%: tests/integration/%.c $(wildcard tests/lib/*.h) $(O)/obj/tests/testenv.o $(call libs_of,$(MODULES)) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(TEST_CFLAGS) $< $(filter %.o,$^) $(call libs_of,$(MODULES)) -o $@ \
		$(LDFLAGS_SAN) $(call ldlibs_of,$(MODULES)) -lpthread -lcmocka

# Test fixture: an XDP_PASS program for the peer of a veth that XDP_TX sends into.
XDP_PASS_OBJ := $(O)/tests/xdp_pass.bpf.o
$(XDP_PASS_OBJ): tests/data/xdp_pass.bpf.c
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -I/usr/include/$(shell uname -m)-linux-gnu -Wall -Werror -c $< -o $@

tests: $(UNIT_TESTS) $(INTEGRATION_TESTS) $(XDP_PASS_OBJ)

build-all: $(PROGRAMS) $(PY_PROTO)

# make check: the unit tests, sanitized, in build/check (with smg-steerd, whose
# command line some of them run). Nothing is installed and nothing needs root;
# as root, the tests run as nobody all the same.
check:
	@$(MAKE) --no-print-directory O=build/check SAN=1 check-build
	@tests/run.sh build/check unit

check-build: $(UNIT_TESTS) $(PY_PROTO) $(O)/smg-steerd

# make man: the OPTIONS of smg-steerd(8), written from the options table
# (user/config/options.c) by a build tool; test_options fails when the
# committed page differs from what it writes.
$(O)/gen-options: $(wildcard tools/man/*.c tools/man/*.h) $(call libs_of,$(UNIT_MODS)) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itools/man $(wildcard tools/man/*.c) $(call libs_of,$(UNIT_MODS)) -o $@ \
		$(LDFLAGS_SAN) $(call ldlibs_of,$(UNIT_MODS)) -lpthread

man: $(O)/gen-options
	$(O)/gen-options docs/man/smg-steerd.8

# make test: everything, the README's test command (with the simulator, whose
# options the docs' check reads from its --help).
test: deps deps-test
	@$(MAKE) --no-print-directory O=build/san SAN=1 build-all tests build/san/steer-sim
	@$(MAKE) --no-print-directory O=build/rel build/rel/smg-steerd # test_memory: RSS unsanitized
	@$(MAKE) --no-print-directory O=build/fuzz FUZZ=1 CC=$(CLANG) fuzz-build
	@tests/run.sh build/san all

# ---- fuzzing ----------------------------------------------------------------------

FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(addprefix $(O)/fuzz_,$(FUZZ_NAMES))
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?=
FUZZ_MODS := config loads policy common

$(O)/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) $(call libs_of,$(FUZZ_MODS)) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests/fuzz $< $(call libs_of,$(FUZZ_MODS)) -o $@ $(LDFLAGS_SAN) \
		$(call ldlibs_of,$(FUZZ_MODS)) -lpthread

fuzz-build: $(FUZZ_BINS)

# Every target for FUZZ_SECONDS (default 60); FUZZ_RUNS=N stops each after N inputs.
fuzz: deps deps-test
	@$(MAKE) --no-print-directory O=build/fuzz FUZZ=1 CC=$(CLANG) fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz/run.sh build/fuzz

# ---- the lab: benchmarks and the simulator, with their own targets -----------------

include tools/bench/bench.mk

# The peak RSS of decoding hostile load answers: the decoders of OLD (a tree, or
# a commit; default 31cd3db) beside this tree's, -O2 without sanitizers
# (tools/bench/decode_mem.sh; no root, about a minute).
.PHONY: bench-decode-mem
bench-decode-mem:
	tools/bench/decode_mem.sh $(OLD)

include tools/sim/sim.mk

# ---- demo -------------------------------------------------------------------------

DEMO_SECONDS ?= 30

demo: deps deps-test
	@$(MAKE) --no-print-directory build-all
	STEER_BUILD=$(CURDIR)/build DEMO_SECONDS=$(DEMO_SECONDS) /usr/bin/python3 tools/demo.py

# ---- container image --------------------------------------------------------------

deps-image:
	@tools/deps.sh image

# The release build (not the sanitized one) in an image, as the Dockerfile builds it.
image: deps-image
	@$(MAKE) --no-print-directory build-all
	O=$(O) tools/image.sh build

image-test: deps-image
	O=$(O) tools/image.sh test

# The Dockerfile itself, built by buildah (a local Debian root stands in for its base).
image-dockerfile: deps-image
	O=$(O) tools/image.sh dockerfile

# ---- misc -----------------------------------------------------------------------

FORMAT_FILES = $(wildcard bpf/*.c bpf/*.h user/*/*.c user/*/*.h tests/*/*.c tests/*/*.h \
	include/*.h tools/sim/*.c tools/sim/*.h tools/bench/*.c tools/bench/*.h tools/bench/bpf/*.c \
	tools/man/*.c tools/man/*.h)

format:
	clang-format -i $(FORMAT_FILES)

check-format:
	clang-format --dry-run --Werror $(FORMAT_FILES)

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 build/smg-steerd build/smg-steerctl $(DESTDIR)$(PREFIX)/sbin/
	install -m 0644 $(wildcard docs/man/*.8) $(DESTDIR)$(PREFIX)/share/man/man8/

clean:
	rm -rf build
