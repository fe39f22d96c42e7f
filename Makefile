# smg-steer: load-aware connection steering for LLM inference fleets.
#
#   make          build everything into build/ (installs missing Debian packages first)
#   make test     build with ASan/UBSan into build/san/ and run every test
#   make demo     live demo, about 30 s (DEMO_SECONDS=N to change)
#   make bench    benchmarks (see docs/benchmarks.md)
#   make fuzz     libFuzzer targets into build/fuzz/, FUZZ_SECONDS=60 each
#   make install  PREFIX=/usr/local DESTDIR=
#   make image    OCI image with buildah from a Debian 12 root (downloads it; not in make test)
#   make image-test  run that image with podman: --version, --check-config
#   make image-dockerfile  build the Dockerfile with buildah and run the same checks
#
# O is the output directory; SAN=1 builds with AddressSanitizer and UBSan.

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
LDLIBS_BPF := -lbpf -lelf -lz
LDLIBS_GRPC := -lgrpc -lgpr -lprotobuf-c
# --peer-key's HMAC-SHA256 (user/peer_auth.c): OpenSSL's libcrypto, libssl-dev.
LDLIBS_CRYPTO := $(or $(shell pkg-config --libs libcrypto 2>/dev/null),-lcrypto)
LDLIBS_ALL := $(LDLIBS_BPF) $(LDLIBS_GRPC) -lyaml -lmicrohttpd -ljson-c -lcurl -lcares -lseccomp -lcap $(LDLIBS_CRYPTO) -lpthread -lm

BPF_OBJ := $(O)/steer.bpf.o
SKEL := $(O)/steer.skel.h
# XDP ingress and the backends' decap: skeletons linked into the same modules.
XDP_SKELS := $(O)/steer_xdp.skel.h $(O)/steer_decap.skel.h
# Request accounting on steered sockets: a second object sharing the maps by pin.
WIRE_OBJ := $(O)/steer_wire.bpf.o
WIRE_SKEL := $(O)/steer_wire.skel.h
BPF_HDRS := bpf/steer_common.h bpf/steer_select.h bpf/steer_maps.bpf.h bpf/steer_choose.bpf.h bpf/steer_wire.bpf.h
VMLINUX := $(O)/vmlinux.h
# Every proto/*.proto: the GetLoads subsets of the engines' services.
PROTO_NAMES := $(patsubst proto/%.proto,%,$(wildcard proto/*.proto))
PROTO_C := $(patsubst %,$(O)/proto/%.pb-c.c,$(PROTO_NAMES))
PROTO_H := $(patsubst %,$(O)/proto/%.pb-c.h,$(PROTO_NAMES))
PROTO_OBJS := $(patsubst %,$(O)/obj/%.pb-c.o,$(PROTO_NAMES))

# Modules shared by the daemon, the tools and the tests: every user/*.c but
# the daemon's main, plus the generated protobuf code.
LIB_SRCS := $(filter-out user/smg-steerd.c user/daemon_%.c,$(wildcard user/*.c))
# The daemon's own parts (user/daemon.h): linked into smg-steerd only.
DAEMON_OBJS := $(patsubst user/%.c,$(O)/obj/%.o,$(wildcard user/daemon_*.c))
LIB_OBJS := $(patsubst user/%.c,$(O)/obj/%.o,$(LIB_SRCS)) $(PROTO_OBJS)
SIM_SRCS := $(wildcard tools/sim/*.c)

# Every tests/test_*.c is a test program linked with all modules.
TEST_NAMES := $(patsubst tests/%.c,%,$(wildcard tests/test_*.c))
TEST_BINS := $(addprefix $(O)/tests/,$(TEST_NAMES))
PY_PROTO := $(patsubst %,$(O)/py/%_pb2.py,$(PROTO_NAMES))

SIM_LIB_SRCS := $(filter-out tools/sim/main.c,$(SIM_SRCS))

# Each tools/bench/*.c is a benchmark program linked with all modules.
BENCH_BINS := $(patsubst tools/bench/%.c,$(O)/bench/%,$(wildcard tools/bench/*.c))

PROGRAMS := $(if $(wildcard user/smg-steerd.c),$(O)/smg-steerd) \
	$(if $(wildcard tools/smg-steerctl.c),$(O)/smg-steerctl) \
	$(if $(SIM_SRCS),$(O)/steer-sim)

# Each tests/fuzz/fuzz_*.c is a libFuzzer target; its seeds are tests/fuzz/<name>/.
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(addprefix $(O)/fuzz_,$(FUZZ_NAMES))
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?=

.SECONDARY: $(PROTO_C) $(PROTO_H)
.PHONY: all build-all deps deps-test deps-bench deps-image test tests demo bench image image-test \
	image-dockerfile install clean format check-format fuzz fuzz-build
.DEFAULT_GOAL := all

all: deps
	@$(MAKE) --no-print-directory build-all

build-all: $(SKEL) $(WIRE_SKEL) $(XDP_SKELS) $(LIB_OBJS) $(PROGRAMS) tests $(PY_PROTO)

deps:
	@tools/deps.sh build

deps-test:
	@tools/deps.sh test

deps-bench:
	@tools/deps.sh bench

# ---- BPF ------------------------------------------------------------------

$(VMLINUX):
	@mkdir -p $(@D)
	@test -r /sys/kernel/btf/vmlinux || { echo "error: /sys/kernel/btf/vmlinux missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is required)" >&2; exit 1; }
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(O)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) $(VMLINUX)
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(O) -Ibpf -c $< -o $@

# Test fixture: an XDP_PASS program for the peer of a veth that XDP_TX sends into.
XDP_PASS_OBJ := $(O)/tests/xdp_pass.bpf.o

$(XDP_PASS_OBJ): tests/data/xdp_pass.bpf.c
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -I/usr/include/$(shell uname -m)-linux-gnu -Wall -Werror -c $< -o $@

$(SKEL): $(BPF_OBJ)
	$(BPFTOOL) gen skeleton $< name steer_bpf > $@.tmp && mv $@.tmp $@

# The other objects' skeletons (wire, XDP, decap): named after the object.
$(O)/%.skel.h: $(O)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# ---- protobuf ------------------------------------------------------------------

$(O)/proto/%.pb-c.c $(O)/proto/%.pb-c.h &: proto/%.proto
	@mkdir -p $(O)/proto
	$(PROTOC_C) --proto_path=proto --c_out=$(O)/proto $<

# Python message classes for the fake worker (an implementation independent of ours).
$(O)/py/%_pb2.py: proto/%.proto
	@mkdir -p $(@D)
	protoc --proto_path=proto --python_out=$(@D) $<

# ---- user space -----------------------------------------------------------------

HDRS := $(wildcard user/*.h) bpf/steer_common.h bpf/steer_select.h

$(O)/obj/%.o: user/%.c $(SKEL) $(WIRE_SKEL) $(PROTO_H) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# The loaders of XDP ingress and of the decap include their skeletons.
$(O)/obj/xdp.o: $(O)/steer_xdp.skel.h
$(O)/obj/decap.o: $(O)/steer_decap.skel.h

$(O)/obj/%.pb-c.o: $(O)/proto/%.pb-c.c $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(filter-out -Wextra,$(CFLAGS_ALL)) -c $< -o $@

$(O)/smg-steerd: user/smg-steerd.c $(DAEMON_OBJS) $(LIB_OBJS) $(HDRS)
	$(CC) $(CFLAGS_ALL) $< $(DAEMON_OBJS) $(LIB_OBJS) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL)

# smg-steerctl's parts: tools/smg-steerctl.c and tools/ctl_*.c (tools/ctl.h).
CTL_SRCS := tools/smg-steerctl.c $(wildcard tools/ctl_*.c)
$(O)/smg-steerctl: $(CTL_SRCS) tools/ctl.h $(LIB_OBJS) $(HDRS)
	$(CC) $(CFLAGS_ALL) $(CTL_SRCS) $(LIB_OBJS) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL)

$(O)/steer-sim: $(SIM_SRCS) $(wildcard tools/sim/*.h) $(O)/obj/policy.o $(HDRS)
	$(CC) $(CFLAGS_ALL) -Itools/sim $(SIM_SRCS) $(O)/obj/policy.o -o $@ $(LDFLAGS_SAN) -lm

# ---- tests ----------------------------------------------------------------------

tests: $(TEST_BINS) $(XDP_PASS_OBJ)

# The simulator's test links the simulator's modules (all but its main).
$(O)/tests/test_sim: tests/test_sim.c tests/tap.h $(SIM_LIB_SRCS) $(wildcard tools/sim/*.h) $(O)/obj/policy.o $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -Itools/sim $< $(SIM_LIB_SRCS) $(O)/obj/policy.o -o $@ $(LDFLAGS_SAN) -lm

$(O)/obj/testenv.o: tests/testenv.c tests/testenv.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -c $< -o $@

$(O)/obj/wire_lib.o: tests/wire_lib.c tests/wire_lib.h $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -c $< -o $@

# The request-accounting tests share their responders and client.
$(O)/tests/test_wire $(O)/tests/test_wire_fluid $(O)/tests/test_wire_cgroup: $(O)/obj/wire_lib.o

$(O)/tests/%: tests/%.c $(wildcard tests/*.h) $(O)/obj/testenv.o $(LIB_OBJS) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -Itools/sim $< $(filter %.o,$^) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL) -lcmocka

test: deps deps-test
	@$(MAKE) --no-print-directory O=build/san SAN=1 build-all
	@$(MAKE) --no-print-directory O=build/fuzz FUZZ=1 CC=$(CLANG) fuzz-build
	@tests/run.sh build/san

# ---- fuzzing ----------------------------------------------------------------------

$(O)/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) $(LIB_OBJS) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests/fuzz $< $(LIB_OBJS) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL)

fuzz-build: $(FUZZ_BINS)

# Every target for FUZZ_SECONDS (default 60); FUZZ_RUNS=N stops each after N inputs.
fuzz: deps deps-test
	@$(MAKE) --no-print-directory O=build/fuzz FUZZ=1 CC=$(CLANG) fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz/run.sh build/fuzz

# ---- benchmarks ---------------------------------------------------------------------

$(O)/bench/%: tools/bench/%.c $(LIB_OBJS) $(HDRS) $(wildcard tools/bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itools/bench $< $(LIB_OBJS) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL)

bench: deps deps-bench
	@$(MAKE) --no-print-directory build-all $(BENCH_BINS)
	STEER_BUILD=$(CURDIR)/build tools/bench/run.sh

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

FORMAT_FILES = bpf/*.c bpf/*.h user/*.c user/*.h tests/*.c tests/*.h tests/fuzz/*.c tests/fuzz/*.h tools/*.c tools/*.h $(wildcard tools/sim/*.c tools/sim/*.h tools/bench/*.c tools/bench/*.h)

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
