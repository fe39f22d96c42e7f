// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire_cost.bpf.c - where the BPF time of a request sent goes, for the
 * bench only (wirecost's variants find and lock). The shipped egress program
 * (steer_wire.bpf.c, included unchanged) finds the socket's record by cookie,
 * then its slot, counters and service tree, then takes the service's lock and
 * counts. These two stop partway:
 *   steer_wcost_find  after the record's lookup (what every request sent by a
 *                     steered socket pays before any accounting);
 *   steer_wcost_lock  after taking and releasing the lock, with the clock read
 *                     before it, counting nothing.
 * The shipped program less each is the cost of the step after it.
 * Attached alone on egress (the shipped ingress program detached). The step
 * cadence's programs, at the end, are a pair of their own.
 */
#include "steer_wire.bpf.c"

/* The shipped egress program's steps up to the record: the record of a
 * steered socket's segment with new payload, or NULL. */
static __always_inline struct steer_sock *cost_record(struct __sk_buff *ctx, __u64 *cookie)
{
	__u32 len;

	*cookie = egress_new_bytes(ctx, &len);
	return *cookie ? sock_find(*cookie) : 0;
}

SEC("cgroup_skb/egress")
int steer_wcost_find(struct __sk_buff *ctx)
{
	__u64 cookie;
	struct steer_sock *r = cost_record(ctx, &cookie);

	return r ? 1 : 1; /* the lookup's helper calls stay: they may have effects */
}

SEC("cgroup_skb/egress")
int steer_wcost_lock(struct __sk_buff *ctx)
{
	__u64 cookie, clock;
	struct steer_sock *r = cost_record(ctx, &cookie);
	struct wire_ref ref;

	if (!r || !wire_ref(r, &ref))
		return 1;
	clock = WIRE_CLOCK_NS();
	bpf_spin_lock(&ref.tr->lock);
	/* what the shipped program reads first under the lock */
	if (key_clock(ref.st, clock) == 0)
		ref.w->requests += 0;
	bpf_spin_unlock(&ref.tr->lock);
	return 1;
}

/*
 * The step cadence's cost (wirecost's variant cad). docs/simulator.md ("What
 * the kernel would need") describes a per-slot step estimate learnt from the
 * gaps between one response's packets, and leaves its cost unmeasured: this
 * is that work, on maps of its own (not the shipped layout's), next to the
 * shipped programs' accounting, which it includes unchanged:
 *   steer_wcad_out  the shipped egress program, and at a send the socket's
 *                   last response-packet time is cleared;
 *   steer_wcad_in   the shipped ingress program's answer, and on every later
 *                   packet of the response: its gap to the socket's previous
 *                   one is a step of the backend. The slot's step_until only
 *                   grows lazily (a key that rises may stay lower in the
 *                   tree, docs/algorithm.md 4.2); a shorter step that lowers
 *                   it takes the service's lock and re-keys the leaf.
 * The selection here does not read step_until (the shipped key is unchanged):
 * what is measured is the work per packet, not its effect on picks.
 */
struct wcad_slot {
	__u64 last_rx_ns;    /* ns, coarse clock: the slot's last response packet */
	__u64 step_ns;	     /* ns: the last one-step gap */
	__u64 step_until_ns; /* ns, coarse clock: last_rx_ns + step_ns, kept lazily */
	__u64 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct wcad_slot);
} steer_wcad_slot SEC(".maps");

/* Per socket record (same index as steer_socks): the time of its last
 * response packet since its last send; 0: none yet. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, __u64);
} steer_wcad_rx SEC(".maps");

/* Which path each response packet took (per CPU; user space sums). */
struct wcad_stats {
	__u64 answers; /* first response byte after a send */
	__u64 raised;  /* a step that keeps or raises step_until: no lock */
	__u64 lowered; /* a shorter step: under the lock, leaf re-keyed */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wcad_stats);
} steer_wcad_stats SEC(".maps");

static __always_inline struct wcad_stats *wcad_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steer_wcad_stats, &zero);
}

SEC("cgroup_skb/egress")
int steer_wcad_out(struct __sk_buff *ctx)
{
	__u32 len, idx = 0;
	__u64 cookie = egress_new_bytes(ctx, &len), *rx;
	struct steer_sock *r;

	if (!cookie)
		return 1;
	r = sock_find_idx(cookie, &idx);
	if (!r)
		return 1;
	wire_sent(r, cookie, len);
	rx = bpf_map_lookup_elem(&steer_wcad_rx, &idx);
	if (rx)
		*rx = 0; /* a new request: the next response packet starts no step */
	return 1;
}

/* A response packet after the first: one step of the backend since the
 * socket's previous packet. */
static __always_inline void wcad_step(struct steer_sock *r, __u64 *rx, struct wcad_stats *cs_st)
{
	__u64 now = bpf_ktime_get_coarse_ns(), last = *rx, until;
	__u32 slot = r->slot & (STEER_SLOT_IDS - 1);
	struct wcad_slot *cs = bpf_map_lookup_elem(&steer_wcad_slot, &slot);
	struct wire_ref ref;

	*rx = now;
	if (!last || !cs)
		return;
	cs->step_ns = now - last;
	cs->last_rx_ns = now;
	until = now + cs->step_ns;
	if (until >= cs->step_until_ns) {
		cs->step_until_ns = until; /* the key can only rise: lazy */
		cs_st->raised++;
		return;
	}
	if (!wire_ref(r, &ref))
		return;
	bpf_spin_lock(&ref.tr->lock);
	cs->step_until_ns = until;
	wire_rescore(&ref);
	bpf_spin_unlock(&ref.tr->lock);
	cs_st->lowered++;
}

SEC("cgroup_skb/ingress")
int steer_wcad_in(struct __sk_buff *ctx)
{
	struct sk_buff *kskb;
	struct sock *sk;
	__u64 cookie = skb_cookie(ctx, &kskb, &sk), *rx;
	struct wcad_stats *st;
	struct steer_sock *r;
	__u32 seq = 0, len = 0, idx = 0;

	if (!cookie)
		return 1;
	if (!tcp_payload(ctx, kskb, &seq, &len) || !len)
		return 1;
	r = sock_find_idx(cookie, &idx);
	rx = bpf_map_lookup_elem(&steer_wcad_rx, &idx);
	st = wcad_stats();
	if (!r || !rx || !st)
		return 1;
	if (r->unanswered) {
		wire_answered(r, cookie);
		*rx = bpf_ktime_get_coarse_ns();
		st->answers++;
		return 1;
	}
	wcad_step(r, rx, st);
	return 1;
}

/*
 * The shipped ingress program as it was before the step cadence (wirecost's
 * variant prev): the record by sock_find, the answer, nothing else. Against
 * the shipped one (skb, the cadence off) it is what the cadence's two extra
 * lookups cost every received packet of a steered socket when nobody asked
 * for it.
 */
SEC("cgroup_skb/ingress")
int steer_wprev_in(struct __sk_buff *ctx)
{
	struct sk_buff *kskb;
	struct sock *sk;
	__u64 cookie = skb_cookie(ctx, &kskb, &sk);
	struct steer_sock *r;
	__u32 seq = 0, len = 0;

	if (!cookie)
		return 1;
	if (!tcp_payload(ctx, kskb, &seq, &len) || !len)
		return 1;
	r = sock_find(cookie);
	if (r)
		wire_answered(r, cookie);
	return 1;
}

/*
 * The floor next to steer_peer_apply (peerbench): a syscall program that
 * does nothing, run the same way (BPF_PROG_TEST_RUN, no context). What the
 * system call, the dispatch and the statistics cost by themselves.
 */
SEC("syscall")
int steer_peer_floor(void *ctx)
{
	return 0;
}
