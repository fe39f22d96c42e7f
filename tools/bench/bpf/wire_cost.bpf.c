// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * wire_cost.bpf.c - the bench's own programs next to the shipped request
 * accounting (bpf/steer_wire.bpf.c, included unchanged), on its pinned maps:
 *
 * Where the BPF time of a request sent goes (wirecost's variants find and
 * lock). The shipped egress program finds the socket's record by cookie, then
 * its slot, counters and service tree, then takes the service's lock and
 * counts. These two stop partway:
 *   steer_wcost_find  after the record's lookup (what every request sent by a
 *                     steered socket pays before any accounting);
 *   steer_wcost_lock  after taking and releasing the lock, with the clock read
 *                     before it, counting nothing.
 * The shipped program less each is the cost of the step after it. Attached
 * alone on egress (the shipped ingress program detached).
 *
 * The least an exact per-socket count writes (wirecost's variant min,
 * steer_wmin_out and steer_wmin_in): the bound under any design's cost per
 * message when a socket's sends and its received packets run on different
 * CPUs.
 *
 * The floor next to steer_peer_apply and steer_probe_apply (peerbench): an
 * empty syscall program, steer_peer_floor.
 */
#include "steer_wire.bpf.c"

/* The shipped egress program's steps up to the record: the record (its
 * index, the new payload's bytes) of a steered socket's segment with new
 * payload, or NULL. */
static __always_inline struct steer_sock *cost_tx_record(struct __sk_buff *ctx, __u64 *cookie,
							 __u32 *idx, __u32 *len)
{
	*cookie = egress_new_bytes(ctx, len);
	return *cookie ? sock_find_idx(*cookie, idx) : 0;
}

static __always_inline struct steer_sock *cost_record(struct __sk_buff *ctx, __u64 *cookie)
{
	__u32 idx, len;

	return cost_tx_record(ctx, cookie, &idx, &len);
}

/* The shipped ingress program's steps up to the record: the record (and its
 * index) of a steered socket's packet with payload, or NULL. */
static __always_inline struct steer_sock *cost_rx_record(struct __sk_buff *ctx, __u64 *cookie,
							 __u32 *idx)
{
	struct sk_buff *kskb;
	struct sock *sk;
	__u32 seq = 0, len = 0, off = 0;

	*cookie = skb_cookie(ctx, &kskb, &sk);
	if (!*cookie || !tcp_payload(ctx, kskb, &seq, &len, &off) || !len)
		return 0;
	return sock_find_idx(*cookie, idx);
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
 * The least an exact per-socket count can write (wirecost's variant min), to
 * bound any design's cost when a socket's sends and its received packets run
 * on different CPUs. Shared with the other CPU: only the socket's record (its
 * unanswered bytes: added by a send, taken by an answer). The slot's sent and
 * answered bytes go to per-CPU counters, which a reader would sum; no busy
 * time, no tree, no lock. Not a design that picks: what a message costs when
 * the one line that must move, moves.
 */
struct wmin_slot {
	__u64 sent_bytes;     /* bytes sent on this CPU */
	__u64 answered_bytes; /* bytes answered on this CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct wmin_slot);
} steer_wmin_slot SEC(".maps");

static __always_inline struct wmin_slot *wmin_slot(const struct steer_sock *r)
{
	__u32 slot = r->slot & (STEER_SLOT_IDS - 1);

	return bpf_map_lookup_elem(&steer_wmin_slot, &slot);
}

SEC("cgroup_skb/egress")
int steer_wmin_out(struct __sk_buff *ctx)
{
	__u32 len = 0, idx = 0;
	__u64 cookie;
	struct steer_sock *r = cost_tx_record(ctx, &cookie, &idx, &len);
	struct wmin_slot *m;

	if (!r || !(r->flags & STEER_SOCK_LIVE))
		return 1;
	m = wmin_slot(r);
	if (!m)
		return 1;
	__sync_fetch_and_add(&r->unanswered, len);
	m->sent_bytes += len;
	return 1;
}

SEC("cgroup_skb/ingress")
int steer_wmin_in(struct __sk_buff *ctx)
{
	__u32 idx = 0, u;
	__u64 cookie;
	struct steer_sock *r = cost_rx_record(ctx, &cookie, &idx);
	struct wmin_slot *m;

	if (!r || !r->unanswered)
		return 1;
	m = wmin_slot(r);
	if (!m)
		return 1;
	u = __sync_lock_test_and_set(&r->unanswered, 0);
	m->answered_bytes += u;
	return 1;
}

/*
 * The floor next to steer_peer_apply and steer_probe_apply (peerbench): a
 * syscall program that does nothing, run the same way (BPF_PROG_TEST_RUN, no context). What the
 * system call, the dispatch and the statistics cost by themselves.
 */
SEC("syscall")
int steer_peer_floor(void *ctx)
{
	return 0;
}
