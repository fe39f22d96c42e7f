// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer.bpf.c - the smg-steer data plane.
 *
 * cgroup/connect4 and cgroup/connect6 rewrite a connect to a virtual address
 * onto the backend with the least expected wait, picked from the service's
 * selection tree (steer_svc_tree) under its lock, and remember the socket in
 * a per-socket record (steer_socks); getpeername4/6 report the virtual
 * address from that record; cgroup/sock_release gives the record back and
 * takes the socket off its backend's live count. The daemon (smg-steerd)
 * publishes the per-service tables; this file only reads them, credits
 * in-flight work and counts.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "steer_common.h"
#include "steer_maps.bpf.h"
#include "steer_choose.bpf.h"
#include "steer_wire.bpf.h"

#define SOCK_STREAM 1
#define ECONNREFUSED 111

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

static __always_inline int is_tcp(const struct bpf_sock_addr *ctx)
{
	return ctx->type == SOCK_STREAM && ctx->protocol == STEER_IPPROTO_TCP;
}

/*
 * Was the socket's handshake ever completed? Its SYN was acknowledged then:
 * tcp_sock.bytes_acked counts the SYN as one byte; a refused, timed-out or
 * abandoned connect leaves it at 0. Read-only, through the kernel's type.
 */
static __always_inline bool ever_established(struct sock *sk)
{
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));

	return tp->bytes_acked != 0;
}

/*
 * A steered socket is released, or connected again elsewhere: take it off its
 * backend's live count and settle its unanswered request bytes (wire_close), and count a connect that never got established
 * towards fast ejection (one that did resets the count). Nothing when the
 * slot has changed owner since (its gen moved on). Crossing the threshold
 * either way has the service's tree rebuilt at its next connect.
 */
static __always_inline void sock_done(struct steer_sock *r, bool established)
{
	struct steer_slot_array *all = slots_all();
	struct steer_slot *s;
	bool live = wire_close(r) & STEER_SOCK_LIVE;

	if (!all)
		return;
	s = slot_in(all, r->slot);
	if (s->gen != r->slot_gen)
		return;
	if (live)
		__sync_fetch_and_add(&s->closed, 1);
	if (!established) {
		if (__sync_fetch_and_add(&s->fails, 1) == STEER_FAIL_EJECT - 1)
			svc_touch(r->svc_id);
	} else if (s->fails) {
		bool was_out = s->fails >= STEER_FAIL_EJECT;

		s->fails = 0;
		if (was_out)
			svc_touch(r->svc_id);
	}
}

/*
 * The cookie of the socket being connected; *fresh is set when it had none
 * before this call, so that it cannot have a record yet. The cookie is read
 * from the socket directly first: bpf_get_socket_cookie would create it.
 */
static __always_inline __u64 connect_cookie(struct bpf_sock_addr *ctx, int *fresh, struct sock **sk)
{
	struct bpf_sock_addr_kern *k = bpf_cast_to_kern_ctx(ctx);

	*sk = k->sk;
	*fresh = k->sk->__sk_common.skc_cookie.counter == 0;
	return bpf_get_socket_cookie(ctx);
}

/*
 * The record for a socket being steered: its old one when it is connected
 * again (a connect that failed, retried), else a free one claimed with a
 * compare-and-swap. NULL when the probed records are all taken.
 */
static __always_inline struct steer_sock *sock_claim(__u64 cookie, int fresh, struct sock *sk)
{
	__u32 p;

	if (!fresh) {
		struct steer_sock *old = sock_find(cookie);

		if (old) {
			sock_done(old, ever_established(sk));
			return old;
		}
	}
	for (p = 0; p < STEER_SOCK_PROBES; p++) {
		struct steer_sock *r = sock_at(cookie, p);

		if (r && __sync_val_compare_and_swap(&r->cookie, 0, cookie) == 0)
			return r;
	}
	return 0;
}

static __always_inline void remember(struct steer_sock *r, const struct steer_addr *vip,
				     const struct steer_dest *dest)
{
	r->vip_ip6[0] = vip->ip6[0];
	r->vip_ip6[1] = vip->ip6[1];
	r->vip_ip6[2] = vip->ip6[2];
	r->vip_ip6[3] = vip->ip6[3];
	r->vip_port = vip->port;
	r->be_ip6[0] = dest->ip6[0];
	r->be_ip6[1] = dest->ip6[1];
	r->be_ip6[2] = dest->ip6[2];
	r->be_ip6[3] = dest->ip6[3];
	r->be_port = dest->port;
	r->slot = dest->slot;
	r->slot_gen = dest->slot_gen;
	r->svc_id = dest->svc_id;
	r->unanswered = 0;
	r->drain_seq = dest->drain_seq;
	r->flags = STEER_SOCK_LIVE | (dest->credited ? STEER_SOCK_CREDITED : 0);
}

static __always_inline int refuse(void)
{
	/* Fail the connect() itself: no SYN ever leaves for the virtual address. */
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

/*
 * The common part of connect4 and connect6: 1 when the connect goes to dest,
 * 0 when it is not steered, -1 when it must be refused.
 */
static __always_inline int steer_connect(struct bpf_sock_addr *ctx, const struct steer_addr *vip,
					 struct steer_dest *dest)
{
	struct steer_table *t = table_lookup(vip);
	struct steer_sock *rec;
	struct sock *sk;
	__u64 cookie;
	int fresh;

	if (!t)
		return 0; /* not a virtual address: untouched */
	cookie = connect_cookie(ctx, &fresh, &sk);
	rec = sock_claim(cookie, fresh, sk);
	if (choose(t, dest, rec != 0) != CHOICE_STEERED) {
		if (rec)
			rec->cookie = 0;
		return -1;
	}
	if (rec)
		remember(rec, vip, dest);
	return 1;
}

SEC("cgroup/connect4")
int steer_connect4(struct bpf_sock_addr *ctx)
{
	struct steer_addr vip = {};
	struct steer_dest dest = {};
	int rc;

	if (!is_tcp(ctx) || !port_may_be_virtual(ctx->user_port))
		return 1;
	vip.ip6[2] = bpf_htonl(0x0000ffff);
	vip.ip6[3] = ctx->user_ip4;
	vip.port = (__u16)ctx->user_port;
	vip.proto = STEER_IPPROTO_TCP;
	rc = steer_connect(ctx, &vip, &dest);
	if (rc < 0)
		return refuse();
	if (rc > 0) {
		ctx->user_ip4 = dest.ip6[3];
		ctx->user_port = dest.port;
	}
	return 1;
}

SEC("cgroup/connect6")
int steer_connect6(struct bpf_sock_addr *ctx)
{
	struct steer_addr vip = {};
	struct steer_dest dest = {};
	int rc;

	if (!is_tcp(ctx) || !port_may_be_virtual(ctx->user_port))
		return 1;
	vip.ip6[0] = ctx->user_ip6[0];
	vip.ip6[1] = ctx->user_ip6[1];
	vip.ip6[2] = ctx->user_ip6[2];
	vip.ip6[3] = ctx->user_ip6[3];
	vip.port = (__u16)ctx->user_port;
	vip.proto = STEER_IPPROTO_TCP;
	/* A v4-mapped destination (::ffff:a.b.c.d) finds the IPv4 service's key
	 * as is, and its IPv4 backends are written back v4-mapped. */
	rc = steer_connect(ctx, &vip, &dest);
	if (rc < 0)
		return refuse();
	if (rc > 0) {
		ctx->user_ip6[0] = dest.ip6[0];
		ctx->user_ip6[1] = dest.ip6[1];
		ctx->user_ip6[2] = dest.ip6[2];
		ctx->user_ip6[3] = dest.ip6[3];
		ctx->user_port = dest.port;
	}
	return 1;
}

/*
 * The record of a socket whose peer is reported, when it was steered to that
 * very peer: a socket whose steered connect failed and that then connected
 * elsewhere reports where it is. Its cookie is read without creating one.
 */
static __always_inline struct steer_sock *peer_record(struct bpf_sock_addr *ctx)
{
	struct bpf_sock_addr_kern *k = bpf_cast_to_kern_ctx(ctx);
	__u64 cookie = k->sk->__sk_common.skc_cookie.counter;

	return cookie ? sock_find(cookie) : 0;
}

SEC("cgroup/getpeername4")
int steer_getpeername4(struct bpf_sock_addr *ctx)
{
	struct steer_sock *r = peer_record(ctx);

	if (r) {
		if (r->be_ip6[3] == ctx->user_ip4 && r->be_port == (__u16)ctx->user_port) {
			ctx->user_ip4 = r->vip_ip6[3];
			ctx->user_port = r->vip_port;
		}
	}
	return 1;
}

SEC("cgroup/getpeername6")
int steer_getpeername6(struct bpf_sock_addr *ctx)
{
	struct steer_sock *r = peer_record(ctx);

	if (r) {
		if (r->be_ip6[0] == ctx->user_ip6[0] && r->be_ip6[1] == ctx->user_ip6[1] &&
		    r->be_ip6[2] == ctx->user_ip6[2] && r->be_ip6[3] == ctx->user_ip6[3] &&
		    r->be_port == (__u16)ctx->user_port) {
			ctx->user_ip6[0] = r->vip_ip6[0];
			ctx->user_ip6[1] = r->vip_ip6[1];
			ctx->user_ip6[2] = r->vip_ip6[2];
			ctx->user_ip6[3] = r->vip_ip6[3];
			ctx->user_port = r->vip_port;
		}
	}
	return 1;
}

/*
 * Every socket of the cgroup passes here once, when its last descriptor
 * closes. Only a socket with a cookie can have a record, and the cookie is
 * read without creating one: an unsteered socket leaves after one load.
 */
SEC("cgroup/sock_release")
int steer_release(struct bpf_sock *ctx)
{
	struct sock *sk = bpf_cast_to_kern_ctx(ctx);
	__u64 cookie = sk->__sk_common.skc_cookie.counter;
	struct steer_sock *r;

	if (cookie && (r = sock_find(cookie))) {
		sock_done(r, ever_established(sk));
		r->cookie = 0; /* free for the next socket */
	}
	return 1;
}
