// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer.bpf.c - the smg-steer data plane.
 *
 * cgroup/connect4 and cgroup/connect6 rewrite a connect to a virtual address
 * onto the backend with the least expected wait, picked from the service's
 * selection tree (steer_svc_tree) under its lock, and remember the socket in
 * a per-socket record (steer_socks); getpeername4/6 report the virtual
 * address from that record; cgroup/sock_release gives the record back and
 * takes the socket off its backend's live count; sockops counts a backend
 * that resets a steered connection at once as a failed connect (fast
 * ejection, steer_common.h). The daemon (smg-steerd)
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
#define ECONNRESET 104
#define ECONNREFUSED 111

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

static __always_inline int is_tcp(const struct bpf_sock_addr *ctx)
{
	return ctx->type == SOCK_STREAM && ctx->protocol == STEER_IPPROTO_TCP;
}

/* How a steered connection ended, for fast ejection (steer_common.h). */
enum conn_end {
	CONN_FAILED,  /* never established: refused, timed out, given up */
	CONN_THROUGH, /* established, and answered or still open */
	CONN_SILENT,  /* established, then closed by a reset or a timeout with nothing
		       * received: steer_sockops counted it if it was a reset soon
		       * after the handshake; it never resets the count */
};

/*
 * How the socket's connection ended, read when it is released or connected
 * again. The handshake completed when the SYN was acknowledged:
 * tcp_sock.bytes_acked counts the SYN as one byte, and a refused, timed-out
 * or abandoned connect leaves it at 0. A socket still open is in any state
 * but TCP_CLOSE (its release comes before the close); one in TCP_CLOSE that
 * received no byte was reset or timed out before an answer. Read-only,
 * through the kernel's type.
 */
static __always_inline enum conn_end conn_end(struct sock *sk)
{
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));

	if (!tp->bytes_acked)
		return CONN_FAILED;
	if (sk->__sk_common.skc_state == BPF_TCP_CLOSE && !tp->bytes_received)
		return CONN_SILENT;
	return CONN_THROUGH;
}

/* A live socket of the slot is released: off its live count. Crossing below
 * the slot's bound of live connections (--worker-overload-connections) drops
 * its key: the service's tree is rebuilt at the next connect. */
static __always_inline void live_released(struct steer_slot *s, __u32 slot, __u16 svc_id)
{
	struct steer_wire_array *wall = wire_all();
	__s64 before = (__s64)((__u64)s->live - __sync_fetch_and_add(&s->closed, 1));
	__u32 bound = wall ? wire_in(wall, slot)->max_live : 0;

	if (bound && before == (__s64)bound)
		svc_touch(svc_id);
}

/* One more failed connect of the slot: at STEER_FAIL_EJECT it is no longer
 * eligible, and its service's tree is rebuilt at the next connect. */
static __always_inline void slot_failed(struct steer_slot *s, __u16 svc_id)
{
	if (__sync_fetch_and_add(&s->fails, 1) == STEER_FAIL_EJECT - 1)
		svc_touch(svc_id);
}

/*
 * A steered socket is released, or connected again elsewhere: take it off its
 * backend's live count and settle its unanswered request bytes (wire_close);
 * a connect that never got established counts towards fast ejection, one
 * that got through resets the count. Nothing when the slot has changed owner
 * since (its gen moved on). Crossing the threshold either way has the
 * service's tree rebuilt at its next connect.
 */
static __always_inline void sock_done(struct steer_sock *r, enum conn_end end)
{
	struct steer_slot_array *all = slots_all();
	struct steer_slot *s;
	__u16 flags = wire_close(r);
	bool live = flags & STEER_SOCK_LIVE;

	if (!all)
		return;
	s = slot_in(all, r->slot);
	if (s->gen != r->slot_gen)
		return;
	if (live)
		live_released(s, r->slot, r->svc_id);
	if (flags & STEER_SOCK_FAILED)
		return; /* a 5xx answer counted it already, and it got nothing through */
	if (end == CONN_FAILED) {
		slot_failed(s, r->svc_id);
	} else if (end == CONN_THROUGH && s->fails) {
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
			sock_done(old, conn_end(sk));
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
	r->flags = STEER_SOCK_LIVE | (dest->credited ? STEER_SOCK_CREDITED : 0) |
		   (dest->status ? STEER_SOCK_STATUS : 0);
}

static __always_inline int refuse(void)
{
	/* Fail the connect() itself: no SYN ever leaves for the virtual address. */
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

/* ---- cache affinity: who connects ------------------------------------------- */

/* The key an application set on its socket (STEER_SOL_AFFINITY), kept with
 * the socket and gone with it. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_affkey SEC(".maps");

/*
 * The client of a connect under the service's affinity (steer_table.affinity,
 * on: the caller's test) in *ak; kind stays 0 when the socket has no key of
 * its own (STEER_AFF_SOCKOPT): it is then placed by least wait, and not
 * remembered. A global function, verified once on its own (steer_choose.bpf.h,
 * "cache affinity"). Always 0.
 */
__noinline int affinity_client(struct bpf_sock_addr *ctx, const struct steer_table *t,
			       struct steer_aff_key *ak)
{
	__u32 kind;
	__u64 *key;

	if (!t || !ak)
		return 0;
	kind = t->affinity;
	ak->svc_id = t->svc_id;
	if (kind == STEER_AFF_CGROUP) {
		ak->client = bpf_get_current_cgroup_id();
	} else if (kind == STEER_AFF_NETNS) {
		ak->client = bpf_get_netns_cookie(ctx);
	} else {
		key = ctx->sk ? bpf_sk_storage_get(&steer_affkey, ctx->sk, 0, 0) : 0;
		if (!key || !*key)
			return 0;
		ak->client = *key;
	}
	ak->kind = kind;
	return 0;
}

#define EINVAL 22

/*
 * setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, 8) from any
 * process of the cgroup, with no privilege: the key is kept with the socket
 * for its next connect, and the call ends here (the kernel would answer
 * ENOPROTOOPT). Every other option goes on to the kernel untouched; one
 * longer than a page only if optlen is set to 0 (the kernel's rule).
 */
SEC("cgroup/setsockopt")
int steer_setsockopt(struct bpf_sockopt *ctx)
{
	__u8 *val = ctx->optval, *end = ctx->optval_end;
	__u64 *stored;

	if (ctx->level != STEER_SOL_AFFINITY || ctx->optname != STEER_SO_AFFINITY_KEY) {
		if (ctx->optlen > 4096)
			ctx->optlen = 0;
		return 1;
	}
	if (ctx->optlen != 8 || val + 8 > end || !ctx->sk) {
		bpf_set_retval(-EINVAL);
		return 0;
	}
	stored = bpf_sk_storage_get(&steer_affkey, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!stored) {
		bpf_set_retval(-EINVAL);
		return 0;
	}
	__builtin_memcpy(stored, val, 8);
	ctx->optlen = -1; /* handled: the kernel does not see it */
	return 1;
}

/*
 * The common part of connect4 and connect6: 1 when the connect goes to dest,
 * 0 when it is not steered, -1 when it must be refused.
 */
static __always_inline int steer_connect(struct bpf_sock_addr *ctx, const struct steer_addr *vip,
					 struct steer_dest *dest)
{
	struct steer_table *t = table_lookup(vip);
	struct steer_aff_key ak = {};
	struct steer_sock *rec;
	struct sock *sk;
	__u64 cookie;
	int fresh;

	if (!t)
		return 0; /* not a virtual address: untouched */
	cookie = connect_cookie(ctx, &fresh, &sk);
	rec = sock_claim(cookie, fresh, sk);
	if (t->affinity)
		affinity_client(ctx, t, &ak);
	if (choose(t, dest, rec != 0, &ak) != CHOICE_STEERED) {
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
		sock_done(r, conn_end(sk));
		r->cookie = 0; /* free for the next socket */
	}
	return 1;
}

/* ---- fast ejection: resets soon after the handshake ---------------------------- */

/* When each steered socket's handshake completed, by record index (struct
 * steer_sock_est). Not pinned, like steer_sockrx: a new owner's program
 * starts it afresh, and a socket established before then is not counted if
 * it is reset (its entry names no socket, or another). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, struct steer_sock_est);
} steer_sockest SEC(".maps");

/* The sockops socket and its cookie, read without creating one; 0: none. */
static __always_inline __u64 ops_cookie(struct bpf_sock_ops *ctx, struct sock **sk)
{
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(ctx);

	*sk = k->sk;
	return *sk ? (*sk)->__sk_common.skc_cookie.counter : 0;
}

/*
 * A socket's handshake completed. A steered one has the time kept and its
 * state changes followed from now on: only steered sockets pay for the state
 * callback, and an unsteered one leaves after one load (no cookie: only a
 * steered connect creates one, or no record).
 */
static __always_inline void ops_established(struct bpf_sock_ops *ctx)
{
	struct steer_sock_est *est;
	struct sock *sk;
	__u64 cookie = ops_cookie(ctx, &sk);
	__u32 idx;

	if (!cookie || !sock_find_idx(cookie, &idx))
		return;
	est = bpf_map_lookup_elem(&steer_sockest, &idx);
	if (!est)
		return;
	est->cookie = cookie;
	est->at_ns = bpf_ktime_get_coarse_ns();
	bpf_sock_ops_cb_flags_set(ctx, ctx->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

/*
 * An established steered socket went straight to TCP_CLOSE. The backend
 * reset it (sk_err ECONNRESET: set before the state changes; a timeout sets
 * ETIMEDOUT) within STEER_RESET_FAIL_NS of the handshake, before one byte of
 * answer came back: a failed connect, as if it had been refused. Its release
 * then neither counts it again nor resets the count (CONN_SILENT). (An
 * application's own abort by connect(AF_UNSPEC) looks the same; one by
 * close() comes after the release, which has freed the record.)
 */
static __always_inline void ops_reset(struct bpf_sock_ops *ctx)
{
	struct steer_slot_array *all;
	struct steer_sock_est *est;
	struct steer_sock *r;
	struct steer_slot *s;
	struct sock *sk;
	__u64 cookie;
	__u32 idx;

	if (ctx->bytes_received)
		return;
	cookie = ops_cookie(ctx, &sk);
	if (!cookie || sk->sk_err != ECONNRESET)
		return;
	r = sock_find_idx(cookie, &idx);
	est = r ? bpf_map_lookup_elem(&steer_sockest, &idx) : 0;
	if (!est || est->cookie != cookie || !(r->flags & STEER_SOCK_LIVE) ||
	    bpf_ktime_get_coarse_ns() - est->at_ns > STEER_RESET_FAIL_NS)
		return;
	all = slots_all();
	if (!all)
		return;
	s = slot_in(all, r->slot);
	if (s->gen == r->slot_gen)
		slot_failed(s, r->svc_id);
}

/*
 * A steered socket left ESTABLISHED. Straight to CLOSE may be a reset to
 * count; any other way (a FIN either way) it is closing in order, and its
 * state changes are no longer followed: each would cost a run for nothing.
 */
static __always_inline void ops_left_established(struct bpf_sock_ops *ctx)
{
	if (ctx->args[1] == BPF_TCP_CLOSE)
		ops_reset(ctx);
	else
		bpf_sock_ops_cb_flags_set(ctx,
					  ctx->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_STATE_CB_FLAG);
}

/*
 * Every TCP socket of the cgroup passes here a few times while it connects
 * (the kernel asks for timeouts, windows and ECN, none of which this
 * program answers: the kernel's defaults stay) and once established; a
 * steered socket then passes once more, when it leaves ESTABLISHED.
 */
SEC("sockops")
int steer_sockops(struct bpf_sock_ops *ctx)
{
	if (ctx->op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		ops_established(ctx);
	else if (ctx->op == BPF_SOCK_OPS_STATE_CB && ctx->args[0] == BPF_TCP_ESTABLISHED)
		ops_left_established(ctx);
	return 1;
}
