// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_xdp.bpf.c - XDP ingress: steers TCP flows that clients off the node
 * send to a virtual address, Katran-style, with the connect hooks' tables,
 * selection and in-flight credits.
 *
 * A SYN to VIP:port picks a backend with choose() (steer_choose.bpf.h), the
 * very select-and-credit of cgroup/connect4, under the same service lock, so
 * on-node and off-node connections water-fill one view of each backend. The
 * flow is remembered in steer_xflows; every later packet of it goes to the
 * same backend, whatever is published or drained meanwhile. Packets are
 * encapsulated (IPv4-in-IPv4, IPv6-in-IPv6) towards the backend and sent back
 * out with XDP_TX (or redirected when the FIB says another interface); the
 * backend decapsulates (steer_decap.bpf.c) and replies to the client directly.
 *
 * Anything else passes untouched: non-TCP traffic after no map lookup, TCP to
 * a port no VIP uses after one (steer_ports).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "steer_common.h"
#include "steer_maps.bpf.h"
#include "steer_choose.bpf.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_ICMP 1
#define IPPROTO_ICMPV6 58
#define ICMP_DEST_UNREACH 3
#define ICMP_FRAG_NEEDED 4
#define ICMPV6_PKT_TOOBIG 2
#define IPPROTO_IPIP 4
#define IPPROTO_IPV6_ENCAP 41
#define IP_DF 0x4000
#define IP_MF_OFFSET 0x3fff
#define AF_INET 2
#define AF_INET6 10
#define OUTER_TTL 64

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__uint(max_entries, STEER_XDP_FLOWS);
	__type(key, struct steer_xflow_key);
	__type(value, struct steer_xflow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_xflows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, __u32);
	__type(value, struct steer_xdp_ctr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_xvipst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct steer_xdp_ctr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_xbkst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_xdp_cfg);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_xcfg SEC(".maps");

/* What the parser found: the flow, its TCP flags and where the L3 header is. */
struct pkt {
	struct steer_xflow_key key;
	__u32 len; /* frame length before encapsulation */
	__u8 syn;  /* SYN without ACK: a new connection */
	__u8 fin_rst;
	__u8 tos;    /* IPv4 TOS / IPv6 traffic class, copied to the outer header */
	__u8 df;     /* IPv4 DF, copied to the outer header */
	__u16 l3len; /* the inner IP packet's length (header included) */
};

static __always_inline struct steer_xdp_ctr *vip_ctr(__u32 svc_id)
{
	__u32 k = svc_id & (STEER_SVC_IDS - 1);

	return bpf_map_lookup_elem(&steer_xvipst, &k);
}

static __always_inline struct steer_xdp_ctr *bk_ctr(__u32 slot)
{
	__u32 k = slot & (STEER_SLOT_IDS - 1);

	return bpf_map_lookup_elem(&steer_xbkst, &k);
}

static __always_inline void tcp_flags(struct pkt *p, const struct tcphdr *th)
{
	p->syn = th->syn && !th->ack;
	p->fin_rst = th->fin || th->rst;
	p->key.sport = th->source;
	p->key.dport = th->dest;
}

enum pkt_kind {
	PKT_OTHER = 0,
	PKT_TCP,	 /* a TCP packet from a client */
	PKT_ICMP_TOOBIG, /* an ICMP error about a packet a backend sent from a VIP */
};

/*
 * ICMP "fragmentation needed" sent to a VIP by a router on the way from a
 * backend to the client: it quotes the backend's packet (VIP -> client), so
 * p->key becomes the flow as the client sends it, and the error follows the
 * flow to its backend, whose stack then lowers the path MTU.
 */
static __always_inline int parse_icmp4(struct iphdr *ip, void *end, struct pkt *p)
{
	struct icmphdr *ic = (void *)(ip + 1);
	struct iphdr *in = (void *)(ic + 1);
	__u16 *ports = (void *)(in + 1);

	if (ip->ihl != 5 || (void *)(ports + 2) > end || ic->type != ICMP_DEST_UNREACH ||
	    ic->code != ICMP_FRAG_NEEDED || in->ihl != 5 || in->protocol != STEER_IPPROTO_TCP ||
	    in->saddr != ip->daddr)
		return PKT_OTHER;
	p->key.family = 4;
	p->key.src[3] = in->daddr;
	p->key.dst[3] = in->saddr;
	p->key.sport = ports[1];
	p->key.dport = ports[0];
	p->tos = ip->tos;
	p->df = (ip->frag_off & bpf_htons(IP_DF)) != 0;
	p->l3len = bpf_ntohs(ip->tot_len);
	return PKT_ICMP_TOOBIG;
}

/* The same for ICMPv6 "packet too big". */
static __always_inline int parse_icmp6(struct ipv6hdr *ip6, void *end, struct pkt *p)
{
	struct icmp6hdr *ic = (void *)(ip6 + 1);
	struct ipv6hdr *in = (void *)(ic + 1);
	__u16 *ports = (void *)(in + 1);

	if ((void *)(ports + 2) > end || ic->icmp6_type != ICMPV6_PKT_TOOBIG ||
	    in->nexthdr != STEER_IPPROTO_TCP ||
	    ((in->saddr.in6_u.u6_addr32[0] ^ ip6->daddr.in6_u.u6_addr32[0]) |
	     (in->saddr.in6_u.u6_addr32[1] ^ ip6->daddr.in6_u.u6_addr32[1]) |
	     (in->saddr.in6_u.u6_addr32[2] ^ ip6->daddr.in6_u.u6_addr32[2]) |
	     (in->saddr.in6_u.u6_addr32[3] ^ ip6->daddr.in6_u.u6_addr32[3])))
		return PKT_OTHER;
	p->key.family = 6;
	__builtin_memcpy(p->key.src, &in->daddr, 16);
	__builtin_memcpy(p->key.dst, &in->saddr, 16);
	p->key.sport = ports[1];
	p->key.dport = ports[0];
	p->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
	p->l3len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	return PKT_ICMP_TOOBIG;
}

/* A TCP packet (no fragment, no IPv6 extension header), an ICMP error about
 * one, or anything else (enum pkt_kind). */
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tcphdr *th;

	if ((void *)(eth + 1) > end)
		return PKT_OTHER;
	p->len = (__u32)(end - data);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl < 5 ||
		    (ip->frag_off & bpf_htons(IP_MF_OFFSET)))
			return PKT_OTHER;
		if (ip->protocol == IPPROTO_ICMP)
			return parse_icmp4(ip, end, p);
		if (ip->protocol != STEER_IPPROTO_TCP)
			return PKT_OTHER;
		th = (void *)ip + ip->ihl * 4;
		if ((void *)(th + 1) > end)
			return PKT_OTHER;
		p->key.family = 4;
		p->key.src[3] = ip->saddr;
		p->key.dst[3] = ip->daddr;
		p->tos = ip->tos;
		p->df = (ip->frag_off & bpf_htons(IP_DF)) != 0;
		p->l3len = bpf_ntohs(ip->tot_len);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return PKT_OTHER;
		if (ip6->nexthdr == IPPROTO_ICMPV6)
			return parse_icmp6(ip6, end, p);
		if (ip6->nexthdr != STEER_IPPROTO_TCP)
			return PKT_OTHER;
		th = (void *)(ip6 + 1);
		if ((void *)(th + 1) > end)
			return PKT_OTHER;
		p->key.family = 6;
		__builtin_memcpy(p->key.src, &ip6->saddr, 16);
		__builtin_memcpy(p->key.dst, &ip6->daddr, 16);
		p->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
		p->l3len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	} else {
		return PKT_OTHER;
	}
	tcp_flags(p, th);
	return PKT_TCP;
}

/* The service key of the packet's destination, as the connect hooks key it. */
static __always_inline void vip_of(const struct pkt *p, struct steer_addr *vip)
{
	if (p->key.family == 4) {
		vip->ip6[2] = bpf_htonl(0x0000ffff);
		vip->ip6[3] = p->key.dst[3];
	} else {
		__builtin_memcpy(vip->ip6, p->key.dst, 16);
	}
	vip->port = p->key.dport;
	vip->proto = STEER_IPPROTO_TCP;
}

/* A hash of the client's address and port: the host bits of the outer
 * source, so that the backends' RSS (which often hashes the outer header of
 * IPIP only) spreads flows over queues, and each flow stays on one. */
static __always_inline __u32 flow_hash(const struct steer_xflow_key *k)
{
	__u32 h = k->src[0] ^ k->src[1] ^ k->src[2] ^ k->src[3];

	h ^= ((__u32)k->sport << 16) | k->dport;
	h *= 0x9e3779b1u;
	return h ^ (h >> 15);
}

/* Fill the flow's L2 next hop from the FIB; 0 when it is not resolvable now
 * (no route, or no neighbour entry yet: the packet is dropped and counted). */
static __always_inline int resolve(struct xdp_md *ctx, struct steer_xflow *f, __u32 family)
{
	struct bpf_fib_lookup fib = {};

	fib.ifindex = ctx->ingress_ifindex;
	if (family == 4) {
		fib.family = AF_INET;
		fib.ipv4_dst = f->be_ip6[3];
	} else {
		fib.family = AF_INET6;
		__builtin_memcpy(fib.ipv6_dst, f->be_ip6, 16);
	}
	/* The kernel answers only for an interface that forwards
	 * (net.ipv4.conf.IFACE.forwarding, net.ipv6.conf.IFACE.forwarding):
	 * smg-steerd checks them at start. */
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	f->ifindex = fib.ifindex;
	__builtin_memcpy(f->dmac, fib.dmac, 6);
	__builtin_memcpy(f->smac, fib.smac, 6);
	__sync_fetch_and_or(&f->flags, STEER_XFLOW_L2);
	return 1;
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __always_inline int encap4(struct xdp_md *ctx, const struct pkt *p,
				  const struct steer_xflow *f, const struct steer_xdp_cfg *cfg)
{
	void *data, *end;
	struct ethhdr *eth;
	struct iphdr *ip;
	__u16 *w;
	__u32 sum = 0;
	int i;

	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct iphdr)))
		return 0;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return 0;
	__builtin_memcpy(eth->h_dest, f->dmac, 6);
	__builtin_memcpy(eth->h_source, f->smac, 6);
	eth->h_proto = bpf_htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = p->tos;
	ip->tot_len = bpf_htons(p->l3len + sizeof(struct iphdr));
	ip->id = 0;
	ip->frag_off = p->df ? bpf_htons(IP_DF) : 0;
	ip->ttl = OUTER_TTL;
	ip->protocol = IPPROTO_IPIP;
	ip->check = 0;
	ip->saddr = cfg->src4 | (bpf_htonl(flow_hash(&p->key)) & cfg->src4_host);
	ip->daddr = f->be_ip6[3];
	w = (__u16 *)ip;
	for (i = 0; i < (int)sizeof(struct iphdr) / 2; i++)
		sum += w[i];
	ip->check = csum_fold(sum);
	return 1;
}

static __always_inline int encap6(struct xdp_md *ctx, const struct pkt *p,
				  const struct steer_xflow *f, const struct steer_xdp_cfg *cfg)
{
	__u32 h = bpf_htonl(flow_hash(&p->key));
	void *data, *end;
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	int i;

	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct ipv6hdr)))
		return 0;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return 0;
	__builtin_memcpy(eth->h_dest, f->dmac, 6);
	__builtin_memcpy(eth->h_source, f->smac, 6);
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	*(__u32 *)ip6 = bpf_htonl(0x60000000u | ((__u32)p->tos << 20));
	ip6->payload_len = bpf_htons(p->l3len);
	ip6->nexthdr = IPPROTO_IPV6_ENCAP;
	ip6->hop_limit = OUTER_TTL;
	for (i = 0; i < 4; i++)
		ip6->saddr.in6_u.u6_addr32[i] = cfg->src6[i] | (h & cfg->src6_host[i]);
	__builtin_memcpy(&ip6->daddr, f->be_ip6, 16);
	return 1;
}

static __always_inline void count(struct steer_xdp_ctr *c, __u32 len)
{
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* Forward one packet of a known flow to its backend. */
static __always_inline int forward(struct xdp_md *ctx, const struct pkt *p, struct steer_xflow *f)
{
	__u32 zero = 0, ingress = ctx->ingress_ifindex;
	struct steer_xdp_cfg *cfg = bpf_map_lookup_elem(&steer_xcfg, &zero);
	struct steer_xdp_ctr *vc = vip_ctr(f->svc_id), *bc = bk_ctr(f->slot);
	int ok;

	if (!cfg)
		return XDP_PASS;
	if (!(f->flags & STEER_XFLOW_L2) && !resolve(ctx, f, p->key.family)) {
		if (vc)
			vc->no_route++;
		if (bc)
			bc->no_route++;
		return XDP_DROP;
	}
	count(vc, p->len);
	count(bc, p->len);
	ok = p->key.family == 4 ? encap4(ctx, p, f, cfg) : encap6(ctx, p, f, cfg);
	if (!ok)
		return XDP_ABORTED;
	if (f->ifindex == ingress)
		return XDP_TX;
	return bpf_redirect(f->ifindex, 0);
}

/* The client sent FIN or RST: the flow leaves its backend's live count, once
 * (several CPUs may see FINs of one flow; the atomic and decides). */
static __always_inline void flow_end(struct steer_xflow *f)
{
	struct steer_slot_array *all;
	struct steer_xdp_ctr *bc;

	if (!(__sync_fetch_and_and(&f->flags, ~STEER_XFLOW_LIVE) & STEER_XFLOW_LIVE))
		return;
	all = slots_all();
	if (all && slot_in(all, f->slot)->gen == f->slot_gen)
		__sync_fetch_and_add(&slot_in(all, f->slot)->closed, 1);
	bc = bk_ctr(f->slot);
	if (bc)
		bc->ended++;
}

/* With cache affinity on (the caller's test), the client of a SYN is its
 * source address (STEER_AFF_SOURCE, whatever the service keys its connects
 * by), in *ak. A global function, verified once on its own
 * (steer_choose.bpf.h, "cache affinity"). Always 0. */
__noinline int flow_client(const struct steer_table *t, const struct steer_xflow_key *k,
			   struct steer_aff_key *ak)
{
	if (!t || !k || !ak)
		return 0;
	ak->svc_id = t->svc_id;
	ak->client = steer_aff_source_client(k->src);
	ak->kind = STEER_AFF_SOURCE;
	return 0;
}

/* A SYN to a VIP: choose and credit like a connect, remember the flow.
 * replace: the flow's old entry (a 4-tuple reused) is to be overwritten. */
static __always_inline int new_flow(struct xdp_md *ctx, struct pkt *p, struct steer_table *t,
				    bool replace)
{
	struct steer_xflow f = {}, *stored;
	struct steer_aff_key ak = {};
	struct steer_dest d = {};
	struct steer_xdp_ctr *vc = vip_ctr(t->svc_id), *bc;

	/* The configuration keeps a service's backends in its VIP's family
	 * (cfg_backend_check_family), so the outer header is of that family. */
	if (t->affinity)
		flow_client(t, &p->key, &ak);
	if (choose(t, &d, true, &ak) != CHOICE_STEERED) {
		if (vc)
			vc->refused++;
		return XDP_DROP; /* a connect would be refused; the client retries its SYN */
	}
	__builtin_memcpy(f.be_ip6, d.ip6, 16);
	if (p->key.family == 4)
		f.be_ip6[0] = f.be_ip6[1] = f.be_ip6[2] = 0;
	f.slot = d.slot;
	f.slot_gen = d.slot_gen;
	f.svc_id = d.svc_id;
	f.flags = STEER_XFLOW_LIVE;
	if (vc)
		vc->new_flows++;
	bc = bk_ctr(d.slot);
	if (bc)
		bc->new_flows++;
	/* Two copies of one SYN on two CPUs both miss and both choose: the
	 * first to insert wins, the other follows it and gives its live count
	 * back (its credit drains with the next snapshot, as any credit). */
	if (bpf_map_update_elem(&steer_xflows, &p->key, &f, replace ? BPF_ANY : BPF_NOEXIST))
		flow_end(&f);
	stored = bpf_map_lookup_elem(&steer_xflows, &p->key);
	return forward(ctx, p, stored ? stored : &f);
}

SEC("xdp")
int steer_xdp(struct xdp_md *ctx)
{
	struct steer_addr vip = {};
	struct steer_xflow *f;
	struct steer_table *t;
	struct pkt p = {};
	int kind = parse(ctx, &p);

	if (kind == PKT_OTHER || !port_may_be_virtual(p.key.dport))
		return XDP_PASS;
	f = bpf_map_lookup_elem(&steer_xflows, &p.key);
	if (kind == PKT_ICMP_TOOBIG) {
		struct steer_xdp_ctr *vc;

		if (!f)
			return XDP_PASS; /* of no flow here: the node's own */
		vc = vip_ctr(f->svc_id);
		if (vc)
			vc->icmp++;
		return forward(ctx, &p, f);
	}
	if (f) {
		if (!p.syn) {
			if (!(f->flags & STEER_XFLOW_ACKED))
				__sync_fetch_and_or(&f->flags, STEER_XFLOW_ACKED);
			if (p.fin_rst && (f->flags & STEER_XFLOW_LIVE))
				flow_end(f);
			return forward(ctx, &p, f);
		}
		/* A SYN of a flow that never got past its SYN: a retransmit, to
		 * the same backend, credited once. */
		if (!(f->flags & STEER_XFLOW_ACKED))
			return forward(ctx, &p, f);
		/* The client reuses the 4-tuple for a new connection. */
		flow_end(f);
	}
	vip_of(&p, &vip);
	t = table_lookup(&vip);
	if (!t)
		return XDP_PASS; /* not a VIP: the node's own traffic on that port */
	if (!p.syn) {
		/* Mid-stream packet of no known flow (evicted, or older than this
		 * program): dropped, not re-picked. A least-wait re-pick would
		 * mostly choose another backend, which holds no such connection. */
		struct steer_xdp_ctr *vc = vip_ctr(t->svc_id);

		if (vc)
			vc->lru_miss++;
		return XDP_DROP;
	}
	return new_flow(ctx, &p, t, f != 0);
}
