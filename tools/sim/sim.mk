# tools/sim/sim.mk - the routing-quality simulator (included by the Makefile).
#
#   make sim      build/steer-sim; tools/sim/run.sh and the other scripts run it
#
# The simulator links the product's policy module (user/policy) and compiles
# the kernel's selection math (bpf/steer_select.h), so that it scores and
# picks exactly as smg-steerd and the kernel do.

$(O)/steer-sim: $(SIM_SRCS) $(wildcard tools/sim/*.h) $(call libs_of,policy) $(USER_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itools/sim $(SIM_SRCS) $(call libs_of,policy) -o $@ $(LDFLAGS_SAN) -lm

sim: $(O)/steer-sim
