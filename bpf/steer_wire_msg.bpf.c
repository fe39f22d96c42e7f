// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire_msg.bpf.c - the ablation: request accounting the way the design
 * card describes it, kept buildable for the side-by-side in tools/bench
 * (wirecost) and never attached by smg-steerd (docs/algorithm.md 12.8).
 *
 * sockops puts each steered socket into a SOCKHASH at ACTIVE_ESTABLISHED; an
 * sk_msg program on that map attributes each sendmsg's bytes to the socket's
 * backend; an sk_skb stream verdict program on the same map sees each chunk
 * of data the socket receives, and the first after a send marks the request
 * answered. The accounting is steer_wire.bpf.h's, as in the shipped
 * cgroup_skb programs, so the two differ only in how the bytes are found.
 * Loaded with the same pin root as steer.bpf.o: the maps are shared.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "steer_common.h"
#include "steer_maps.bpf.h"
#include "steer_wire.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The steered sockets, keyed by cookie; not pinned: it lives with its programs. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u64);
	__type(value, __u64);
} steer_wmsg_hash SEC(".maps");

static __always_inline __u64 sk_cookie(struct sock *sk)
{
	return sk ? sk->__sk_common.skc_cookie.counter : 0;
}

SEC("sockops")
int steer_wmsg_ops(struct bpf_sock_ops *ctx)
{
	struct bpf_sock_ops_kern *k;
	__u64 cookie;

	if (ctx->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	k = bpf_cast_to_kern_ctx(ctx);
	cookie = sk_cookie(k->sk);
	if (cookie && sock_find(cookie))
		bpf_sock_hash_update(ctx, &steer_wmsg_hash, &cookie, BPF_ANY);
	return 1;
}

SEC("sk_msg")
int steer_wmsg_send(struct sk_msg_md *ctx)
{
	struct sk_msg *k = bpf_cast_to_kern_ctx(ctx);
	__u64 cookie = sk_cookie(k->sk);
	struct steer_sock *r = cookie ? sock_find(cookie) : 0;

	if (r)
		wire_sent(r, cookie, ctx->size);
	return SK_PASS;
}

SEC("sk_skb/stream_verdict")
int steer_wmsg_recv(struct __sk_buff *ctx)
{
	struct sk_buff *k = bpf_cast_to_kern_ctx(ctx);
	__u64 cookie = sk_cookie(k->sk);
	struct steer_sock *r;

	if (!ctx->len || !cookie)
		return SK_PASS;
	r = sock_find(cookie);
	if (r)
		wire_answered(r, cookie);
	return SK_PASS;
}
