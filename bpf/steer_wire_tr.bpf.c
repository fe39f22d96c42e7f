// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire_tr.bpf.c - request accounting from two BTF tracepoints, an
 * ablation of the shipped cgroup_skb programs (steer_wire.bpf.c), kept for
 * the bench (wirecost, offcost) and its test (test_wire_trace).
 *
 *   tp_btf/sock_send_length  after every sendmsg: its return value is exactly
 *       the bytes the application handed the socket (never a retransmission);
 *   tp_btf/tcp_probe         at the start of tcp_rcv_established, for every
 *       segment an established TCP socket receives: one with payload answers
 *       what the socket had sent.
 *
 * Why it was tried: a cgroup_skb program runs for every packet of every
 * socket in its cgroup, and the dispatch alone costs each packet 57-68 ns
 * (benchmarks run 10), so an unsteered connection pays about 0.7 us. These
 * run per sendmsg call and per segment received once established instead.
 * What was measured (run 13): each run costs about as much dispatch (~50 ns),
 * so an unsteered connection pays about half, still far above 150 ns; and
 * tracepoints are the whole host's: every socket of the node pays them, and
 * --wire-cgroup cannot narrow them. Not adopted (docs/algorithm.md 12.8).
 * (fentry and fexit would run once per call too, but load with EPERM here.)
 *
 * Shares the data plane's maps by pin, and the accounting (steer_wire.bpf.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include "steer_common.h"
#include "steer_maps.bpf.h"
/* Tracing programs may not read the coarse clock. */
#define WIRE_CLOCK_NS() bpf_ktime_get_ns()
#include "steer_wire.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

#define TR_TCPHDR_FIN 0x01
#define TR_TCPHDR_SYN 0x02

/* The socket's record and cookie: NULL (the one early return) when no cookie
 * was ever made for it, or it has no record: then connect4 did not steer it. */
static __always_inline struct steer_sock *tr_record(struct sock *sk, __u64 *cookie)
{
	if (!sk)
		return 0;
	*cookie = sk->__sk_common.skc_cookie.counter;
	return *cookie ? sock_find(*cookie) : 0;
}

/* After sock_sendmsg: ret > 0 bytes were queued on the socket. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(steer_wtr_send, struct sock *sk, int ret, int flags)
{
	__u64 cookie = 0;
	struct steer_sock *r;

	if (ret <= 0)
		return 0;
	r = tr_record(sk, &cookie);
	if (r)
		wire_sent(r, cookie, (__u64)ret);
	return 0;
}

/* A segment arrives on an established TCP socket. Its payload length is its
 * sequence span less the flags that take a sequence number (the stack filled
 * TCP_SKB_CB before this point); a pure ACK or a bare FIN answers nothing. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(steer_wtr_recv, struct sock *sk, struct sk_buff *skb)
{
	__u64 cookie = 0;
	struct steer_sock *r = tr_record(sk, &cookie);
	struct tcp_skb_cb *cb;
	__u32 span;

	if (!r)
		return 0;
	cb = bpf_rdonly_cast(skb->cb, bpf_core_type_id_kernel(struct tcp_skb_cb));
	span = cb->end_seq - cb->seq;
	if (cb->tcp_flags & TR_TCPHDR_FIN)
		span--;
	if (cb->tcp_flags & TR_TCPHDR_SYN)
		span--;
	if ((__s32)span > 0)
		wire_answered(r, cookie);
	return 0;
}
