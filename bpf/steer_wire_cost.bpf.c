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
 * Attached alone on egress (the shipped ingress program detached).
 */
#include "steer_wire.bpf.c"

/* The shipped egress program's steps up to the record: its new payload
 * bytes, or 0 when the segment carries none or is not a steered socket's. */
static __always_inline struct steer_sock *cost_record(struct __sk_buff *ctx, __u64 *cookie)
{
	struct sk_buff *kskb;
	struct sock *sk;
	struct tcp_sock *tp;
	__u32 seq = 0, len = 0;

	*cookie = skb_cookie(ctx, &kskb, &sk);
	if (!*cookie || !tcp_payload(ctx, kskb, &seq, &len) || !len)
		return 0;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	if ((__s32)(seq + len - tp->snd_nxt) <= 0)
		return 0;
	return sock_find(*cookie);
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
