// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_ccprobe.bpf.c - PROBE ONLY (issues 10 and 11): can a congestion
 * control chosen per socket carry request accounting, so that only steered
 * sockets pay for it? Not loaded by smg-steerd; tools/bench/ccprobe loads it
 * in a private netns and cgroup. Standalone: it shares no map with the data
 * plane. docs/algorithm.md 12.8 has what it found.
 *
 * Why it could: every other hook that sees a socket's traffic (cgroup_skb,
 * sockops, tracepoints) runs for every socket of its cgroup or of the host. A
 * congestion control runs only for the sockets that use it, and a connect4
 * program may choose it per socket (bpf_setsockopt TCP_CONGESTION; the
 * capability check passes in a BPF context), so the connect that steers a
 * socket could also give it a wrapper of the host's own algorithm.
 *
 *   probe_connect_set   connect4 that sets the wrapper on every TCP connect
 *   probe_connect_none  the same program without the setsockopt (the floor)
 *   probe_connect_floor the setsockopt to probe_floor instead
 *   probe_floor         BBR's own functions through BPF and nothing else: what
 *       the wrapping costs by itself, next to the probes
 *   probe_wire          the wrapper: BBR's own functions (kfuncs), plus
 *       cwnd_event(CA_EVENT_TX_START)  the first send after the socket went
 *           idle: a request starts; its bytes are write_seq's advance;
 *       in_ack_event  each ACK that acknowledges new data (and every ACK on
 *           the slow path): more request bytes queued since, and any response
 *           bytes received by then.
 *
 * The limit it measures: no callback runs when response data arrives. In the
 * fast path the kernel calls tcp_ack() for a data segment only when that
 * segment also acknowledges new data; once the server has acknowledged the
 * request on its own (its delayed ACK), the answer arrives unseen.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define PROBE_SOL_TCP 6
#define PROBE_TCP_CONGESTION 13
#define PROBE_SOCK_STREAM 1
#define PROBE_SOCKS 4096

extern void bbr_init(struct sock *sk) __ksym;
extern void bbr_main(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs) __ksym;
extern u32 bbr_sndbuf_expand(struct sock *sk) __ksym;
extern u32 bbr_undo_cwnd(struct sock *sk) __ksym;
extern void bbr_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern u32 bbr_ssthresh(struct sock *sk) __ksym;
extern u32 bbr_min_tso_segs(struct sock *sk) __ksym;
extern void bbr_set_state(struct sock *sk, u8 new_state) __ksym;

/* Totals over every socket with the wrapper (user space reads them). */
struct probe_totals {
	__u64 tx_starts;      /* CA_EVENT_TX_START: requests begun */
	__u64 ack_events;     /* in_ack_event calls */
	__u64 request_bytes;  /* write_seq's advance, summed */
	__u64 answered_ack;   /* requests whose answer an in_ack_event saw */
	__u64 answered_late;  /* ... that only the next request's start saw */
	__u64 setsockopt_err; /* connects whose setsockopt failed */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct probe_totals);
} probe_totals SEC(".maps");

/* Per socket, by cookie: where its counting stands. */
struct probe_sock {
	__u32 counted_seq; /* write_seq up to which bytes were counted */
	__u32 pending;	   /* 1 while a request waits for its first answer byte */
	__u64 received;	   /* bytes_received when the request began */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROBE_SOCKS);
	__type(key, __u64);
	__type(value, struct probe_sock);
} probe_socks SEC(".maps");

static __always_inline struct probe_totals *totals(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&probe_totals, &k);
}

/* The socket's state, created at its first event. */
static __always_inline struct probe_sock *sock_state(struct sock *sk)
{
	__u64 cookie = sk->__sk_common.skc_cookie.counter;
	struct probe_sock *p = bpf_map_lookup_elem(&probe_socks, &cookie);
	struct probe_sock fresh = {};

	if (p)
		return p;
	fresh.counted_seq = ((struct tcp_sock *)sk)->write_seq;
	bpf_map_update_elem(&probe_socks, &cookie, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&probe_socks, &cookie);
}

/* Bytes the application queued since the last count (never a retransmission:
 * write_seq moves only when it writes). */
static __always_inline void count_sent(struct tcp_sock *tp, struct probe_sock *p,
				       struct probe_totals *t)
{
	__u32 w = tp->write_seq;

	__sync_fetch_and_add(&t->request_bytes, (__u32)(w - p->counted_seq));
	p->counted_seq = w;
}

SEC("struct_ops")
void BPF_PROG(probe_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct probe_totals *t;
	struct probe_sock *p;

	bbr_cwnd_event(sk, ev);
	if (ev != CA_EVENT_TX_START)
		return;
	t = totals();
	p = sock_state(sk);
	if (!t || !p)
		return;
	__sync_fetch_and_add(&t->tx_starts, 1);
	/* Still pending with answer bytes in: the answer arrived unseen. */
	if (p->pending && tp->bytes_received != p->received)
		__sync_fetch_and_add(&t->answered_late, 1);
	p->pending = 1;
	p->received = tp->bytes_received;
	count_sent(tp, p, t);
}

SEC("struct_ops")
void BPF_PROG(probe_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct probe_totals *t = totals();
	struct probe_sock *p = sock_state(sk);

	if (!t || !p)
		return;
	__sync_fetch_and_add(&t->ack_events, 1);
	count_sent(tp, p, t);
	if (p->pending && tp->bytes_received != p->received) {
		p->pending = 0;
		__sync_fetch_and_add(&t->answered_ack, 1);
	}
}

/*
 * BBR's own callbacks through BPF, one program each, for a prefix: the
 * wrapper's (probe_) and the floor's (floor_) are apart so that each has its
 * own run time. cwnd_event is each one's own.
 */
#define BBR_PASSTHROUGH(p)                                                                        \
	SEC("struct_ops") void BPF_PROG(p##_init, struct sock *sk)                                \
	{                                                                                         \
		bbr_init(sk);                                                                     \
	}                                                                                         \
	SEC("struct_ops")                                                                         \
	void BPF_PROG(p##_main, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs) \
	{                                                                                         \
		bbr_main(sk, ack, flag, rs);                                                      \
	}                                                                                         \
	SEC("struct_ops") u32 BPF_PROG(p##_sndbuf_expand, struct sock *sk)                        \
	{                                                                                         \
		return bbr_sndbuf_expand(sk);                                                     \
	}                                                                                         \
	SEC("struct_ops") u32 BPF_PROG(p##_undo_cwnd, struct sock *sk)                            \
	{                                                                                         \
		return bbr_undo_cwnd(sk);                                                         \
	}                                                                                         \
	SEC("struct_ops") u32 BPF_PROG(p##_ssthresh, struct sock *sk)                             \
	{                                                                                         \
		return bbr_ssthresh(sk);                                                          \
	}                                                                                         \
	SEC("struct_ops") u32 BPF_PROG(p##_min_tso_segs, struct sock *sk)                         \
	{                                                                                         \
		return bbr_min_tso_segs(sk);                                                      \
	}                                                                                         \
	SEC("struct_ops") void BPF_PROG(p##_set_state, struct sock *sk, u8 state)                 \
	{                                                                                         \
		bbr_set_state(sk, state);                                                         \
	}

BBR_PASSTHROUGH(probe)
BBR_PASSTHROUGH(floor)

SEC("struct_ops")
void BPF_PROG(floor_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	bbr_cwnd_event(sk, ev);
}

/* BBR's own callbacks, as the host's default algorithm (Debian's kernel
 * default is cubic; this machine's is bbr), with the two probes added. */
SEC(".struct_ops")
struct tcp_congestion_ops probe_wire = {
	.init = (void *)probe_init,
	.cong_control = (void *)probe_main,
	.sndbuf_expand = (void *)probe_sndbuf_expand,
	.undo_cwnd = (void *)probe_undo_cwnd,
	.cwnd_event = (void *)probe_cwnd_event,
	.in_ack_event = (void *)probe_in_ack_event,
	.ssthresh = (void *)probe_ssthresh,
	.min_tso_segs = (void *)probe_min_tso_segs,
	.set_state = (void *)probe_set_state,
	.name = "smg_ccprobe",
};

SEC(".struct_ops")
struct tcp_congestion_ops probe_floor = {
	.init = (void *)floor_init,
	.cong_control = (void *)floor_main,
	.sndbuf_expand = (void *)floor_sndbuf_expand,
	.undo_cwnd = (void *)floor_undo_cwnd,
	.cwnd_event = (void *)floor_cwnd_event,
	.ssthresh = (void *)floor_ssthresh,
	.min_tso_segs = (void *)floor_min_tso_segs,
	.set_state = (void *)floor_set_state,
	.name = "smg_ccfloor",
};

/* The connect's part: the cookie (the data plane's connect takes it too) and,
 * in the _set variant, the wrapper. Both read the same things. */
static __always_inline int probe_connect(struct bpf_sock_addr *ctx, int which)
{
	char probe[] = "smg_ccprobe", floor[] = "smg_ccfloor", *name = which == 1 ? probe : floor;
	struct probe_totals *t;

	if (ctx->type != PROBE_SOCK_STREAM)
		return 1;
	bpf_get_socket_cookie(ctx);
	if (!which)
		return 1;
	if (bpf_setsockopt(ctx, PROBE_SOL_TCP, PROBE_TCP_CONGESTION, name, sizeof(probe))) {
		t = totals();
		if (t)
			__sync_fetch_and_add(&t->setsockopt_err, 1);
	}
	return 1;
}

SEC("cgroup/connect4")
int probe_connect_set(struct bpf_sock_addr *ctx)
{
	return probe_connect(ctx, 1);
}

SEC("cgroup/connect4")
int probe_connect_none(struct bpf_sock_addr *ctx)
{
	return probe_connect(ctx, 0);
}

SEC("cgroup/connect4")
int probe_connect_floor(struct bpf_sock_addr *ctx)
{
	return probe_connect(ctx, 2);
}
