# smg-steer: load-aware connection steering for LLM inference fleets.
#
#   make          build everything into build/ (installs missing Debian packages first)
#   make test     build with ASan/UBSan into build/san/ and run every test
#   make demo     live demo, about 30 s (DEMO_SECONDS=N to change)
#   make bench    benchmarks (see docs/benchmarks.md)
#   make install  PREFIX=/usr/local DESTDIR=
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
CFLAGS ?=
CFLAGS_ALL := $(CFLAGS_BASE) $(CFLAGS)
LDLIBS_BPF := -lbpf -lelf -lz
LDLIBS_GRPC := -lgrpc -lgpr -lprotobuf-c
LDLIBS_ALL := $(LDLIBS_BPF) $(LDLIBS_GRPC) -lyaml -lmicrohttpd -lpthread -lm

BPF_OBJ := $(O)/steer.bpf.o
SKEL := $(O)/steer.skel.h
VMLINUX := $(O)/vmlinux.h
PROTO_C := $(O)/proto/sglang_scheduler.pb-c.c
PROTO_H := $(O)/proto/sglang_scheduler.pb-c.h

# Modules shared by the daemon, the tools and the tests.
LIB_SRCS := user/dataplane.c
LIB_OBJS := $(patsubst user/%.c,$(O)/obj/%.o,$(LIB_SRCS))

TEST_BINS := $(O)/tests/test_select $(O)/tests/test_dataplane

.PHONY: all deps deps-test deps-bench test tests demo bench install clean format check-format
.DEFAULT_GOAL := all

all: deps
	@$(MAKE) --no-print-directory build-all

build-all: $(SKEL) $(LIB_OBJS) tests

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

$(BPF_OBJ): bpf/steer.bpf.c bpf/steer_common.h $(VMLINUX)
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(O) -Ibpf -c $< -o $@

$(SKEL): $(BPF_OBJ)
	$(BPFTOOL) gen skeleton $< name steer_bpf > $@.tmp && mv $@.tmp $@

# ---- protobuf ------------------------------------------------------------------

$(PROTO_C) $(PROTO_H) &: proto/sglang_scheduler.proto
	@mkdir -p $(O)/proto
	$(PROTOC_C) --proto_path=proto --c_out=$(O)/proto $<

# ---- user space -----------------------------------------------------------------

$(O)/obj/%.o: user/%.c $(SKEL) $(PROTO_H) $(wildcard user/*.h) bpf/steer_common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# ---- tests ----------------------------------------------------------------------

tests: $(TEST_BINS)

$(O)/tests/test_select: tests/test_select.c bpf/steer_common.h tests/tap.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests $< -o $@ $(LDFLAGS_SAN)

$(O)/tests/test_dataplane: tests/test_dataplane.c tests/tap.h tests/testenv.h $(O)/obj/testenv.o $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests $< $(O)/obj/testenv.o $(LIB_OBJS) -o $@ $(LDFLAGS_SAN) $(LDLIBS_ALL)

$(O)/obj/testenv.o: tests/testenv.c tests/testenv.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -c $< -o $@

test: deps deps-test
	@$(MAKE) --no-print-directory O=build/san SAN=1 build-all
	@tests/run.sh build/san

# ---- misc -----------------------------------------------------------------------

format:
	clang-format -i bpf/*.c bpf/*.h user/*.c user/*.h tests/*.c tests/*.h

check-format:
	clang-format --dry-run --Werror bpf/*.c bpf/*.h user/*.c user/*.h tests/*.c tests/*.h

clean:
	rm -rf build
