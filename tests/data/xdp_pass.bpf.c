// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_pass.bpf.c - test fixture: an XDP program that passes everything. A
 * veth accepts frames sent into it with XDP_TX (by the program on its peer)
 * only while it runs an XDP program itself; tests/lib/topo_lib.py attaches this
 * one to the switch side of the load balancer's veth.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}
