// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_decap.bpf.c - the backend side of XDP ingress: tc ingress (clsact)
 * strips the outer header of IPv4-in-IPv4 and IPv6-in-IPv6 packets, so that
 * the inner packet, addressed to the VIP on lo, reaches the stack as if the
 * client had sent it here. The backend replies to the client directly.
 *
 * It stands in for an ipip/ip6tnl device (which this needs no kernel module
 * for) and, like a tunnel device without a fixed remote, accepts tunnel
 * packets from any sender: filter IPIP (protocol 4 and 41) at the edge.
 * Fragments of tunnel packets are not decapsulated (passed as they are).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "steer_common.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_IPIP 4
#define IPPROTO_IPV6_ENCAP 41
#define IP_MF_OFFSET 0x3fff
#define TC_ACT_OK 0

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Not pinned by name: the backends of one host may share a bpffs, and each
 * attachment keeps its own counters (found through its program). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_decap_ctr);
} steer_dcp_ctr SEC(".maps");

/* Remove hdr bytes right after the Ethernet header. */
static __always_inline void strip(struct __sk_buff *skb, __u32 hdr, __u64 *ok_ctr,
				  struct steer_decap_ctr *c)
{
	if (bpf_skb_adjust_room(skb, -(__s32)hdr, BPF_ADJ_ROOM_MAC, 0) == 0) {
		if (ok_ctr)
			(*ok_ctr)++;
	} else if (c) {
		c->failed++;
	}
}

SEC("tc")
int steer_decap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct steer_decap_ctr *c;
	__u32 zero = 0;

	if ((void *)(eth + 1) > end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1), *in = ip + 1;

		if ((void *)(in + 1) > end || ip->protocol != IPPROTO_IPIP || ip->ihl != 5 ||
		    (ip->frag_off & bpf_htons(IP_MF_OFFSET)) || in->version != 4)
			return TC_ACT_OK;
		c = bpf_map_lookup_elem(&steer_dcp_ctr, &zero);
		strip(skb, sizeof(*ip), c ? &c->ipip : 0, c);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1), *in = ip6 + 1;

		if ((void *)(in + 1) > end || ip6->nexthdr != IPPROTO_IPV6_ENCAP ||
		    in->version != 6)
			return TC_ACT_OK;
		c = bpf_map_lookup_elem(&steer_dcp_ctr, &zero);
		strip(skb, sizeof(*ip6), c ? &c->ip6ip6 : 0, c);
	}
	return TC_ACT_OK;
}
