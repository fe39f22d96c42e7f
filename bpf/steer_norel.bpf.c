// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_norel.bpf.c - ABLATION ONLY (issue 10, "unsteered <= 150 ns"): the
 * data plane without the cgroup/sock_release hook. Not loaded by smg-steerd;
 * tools/bench/norelbench and tests/test_norel load it next to the real
 * programs, sharing their pinned maps (same pin root).
 *
 * Without the release hook nothing runs when a steered socket goes away, so:
 *   - norel_walk (iter/tcp), run by user space once per poll, marks the
 *     record of every steered TCP socket that still has a file (not orphaned)
 *     as seen in this pass; user space then frees the records of sockets no
 *     longer seen (user/norel.c) and settles their live counts;
 *   - norel_reset (tp_btf/tcp_receive_reset) is the fast-ejection signal: a
 *     reset received in SYN_SENT is a refused connect. It counts the failure
 *     and frees the record at once. It runs for every reset any TCP socket on
 *     the host receives (rare), never for a connection that goes well;
 *   - a connect that got through resets the failure count when the walk
 *     sees it established (poll granularity, not at release).
 * The cgroup programs themselves are the shipped ones, included unchanged.
 * The floor_* programs are empty programs of other hook types, for the
 * bench's floor of each hook (not loaded unless asked for).
 */
#include "steer.bpf.c"
#include <bpf/bpf_tracing.h>

#define NOREL_TCP_SYN_SENT 2

/* Per record (same index as steer_socks): the cookie of the socket the last
 * walk found there, and that walk's pass number. */
struct norel_seen {
	__u64 cookie;
	__u64 pass;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, struct norel_seen);
} norel_seen SEC(".maps");

/* The walk's control (user space maps it): the pass being walked, set
 * before each walk; sockets visited and, of those, with a record. */
struct norel_ctl {
	__u64 pass, visited, matched;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct norel_ctl);
} norel_ctl SEC(".maps");

/* The index of the record of the socket with this cookie, or -1. */
static __always_inline int sock_index(__u64 cookie)
{
	__u32 p;

	for (p = 0; p < STEER_SOCK_PROBES; p++) {
		__u32 idx = (__u32)(cookie + p) & (STEER_SOCK_RECORDS - 1);
		struct steer_sock *r = bpf_map_lookup_elem(&steer_socks, &idx);

		if (r && r->cookie == cookie)
			return (int)idx;
	}
	return -1;
}

/* A steered connect got through: the slot's failures in a row end. */
static __always_inline void norel_success(struct steer_sock *r)
{
	struct steer_slot_array *all = slots_all();
	struct steer_slot *s;
	bool was_out;

	if (!all)
		return;
	s = slot_in(all, r->slot);
	if (s->gen != r->slot_gen || !s->fails)
		return;
	was_out = s->fails >= STEER_FAIL_EJECT;
	s->fails = 0;
	if (was_out)
		svc_touch(r->svc_id);
}

SEC("iter/tcp")
int norel_walk(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	__u32 zero = 0;
	struct norel_ctl *ctl = bpf_map_lookup_elem(&norel_ctl, &zero);
	struct norel_seen *seen;
	struct steer_sock *r;
	struct tcp_sock *tp;
	__u64 cookie;
	__u32 idx;
	int i;

	if (!skc || !ctl)
		return 0;
	ctl->visited++;
	tp = bpf_skc_to_tcp_sock(skc); /* NULL: a time-wait or request socket */
	if (!tp || !tp->inet_conn.icsk_inet.sk.sk_socket)
		return 0; /* no file any more: released, as sock_release would see it */
	cookie = tp->inet_conn.icsk_inet.sk.__sk_common.skc_cookie.counter;
	if (!cookie)
		return 0;
	i = sock_index(cookie);
	if (i < 0)
		return 0;
	idx = (__u32)i;
	r = bpf_map_lookup_elem(&steer_socks, &idx);
	seen = bpf_map_lookup_elem(&norel_seen, &idx);
	if (!r || !seen)
		return 0;
	ctl->matched++;
	seen->cookie = cookie;
	seen->pass = ctl->pass;
	if (tp->bytes_acked)
		norel_success(r);
	return 0;
}

/* A reset received: in SYN_SENT, a refused connect. Its record is settled
 * and freed here (counted as a failure), as the release would have. */
SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(norel_reset, struct sock *sk)
{
	__u64 cookie;
	int i;
	__u32 idx;
	struct steer_sock *r;

	if (sk->__sk_common.skc_state != NOREL_TCP_SYN_SENT)
		return 0;
	cookie = sk->__sk_common.skc_cookie.counter;
	if (!cookie)
		return 0;
	i = sock_index(cookie);
	if (i < 0)
		return 0;
	idx = (__u32)i;
	r = bpf_map_lookup_elem(&steer_socks, &idx);
	if (!r)
		return 0;
	sock_done(r, false);
	r->cookie = 0;
	return 0;
}

/* The shipped release hook without its layout-0 branch: what keeping the
 * hook but cutting the unsteered path to one load and a test costs (the
 * bench swaps it into a third data plane's release link). */
SEC("cgroup/sock_release")
int lean_release(struct bpf_sock *ctx)
{
	struct sock *sk = bpf_cast_to_kern_ctx(ctx);
	__u64 cookie = sk->__sk_common.skc_cookie.counter;
	struct steer_sock *r;

	if (cookie && (r = sock_find(cookie))) {
		sock_done(r, ever_established(sk));
		r->cookie = 0;
	}
	return 1;
}

/* ---- floors: empty programs of the hook types a design could use ----------- */

SEC("tp_btf/tcp_receive_reset")
int floor_reset(void *ctx)
{
	(void)ctx;
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int floor_set_state(void *ctx)
{
	(void)ctx;
	return 0;
}

SEC("fentry/tcp_done")
int floor_tcp_done(void *ctx)
{
	(void)ctx;
	return 0;
}

SEC("sockops")
int floor_sockops(struct bpf_sock_ops *ctx)
{
	(void)ctx;
	return 1;
}
