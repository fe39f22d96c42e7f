// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer.bpf.c - the smg-steer data plane.
 *
 * TEST FIXTURE: layout 0 as of commit 1795703 (bpf/steer.bpf.c there), for
 * tests/test_upgrade.c. Not used by the product.
 *
 * cgroup/connect4 and cgroup/connect6 rewrite a connect to a virtual address
 * onto the backend with the least expected wait; getpeername4/6 keep reporting
 * the virtual address; sockops counts live connections per backend.
 * The daemon (smg-steerd) publishes the per-service tables; this file only
 * reads them, credits in-flight work and counts.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "steer_common.h"

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define ECONNREFUSED 111

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * One generation of tables: every service, keyed by its virtual address.
 * User space never edits a generation in place; it builds a new one and swaps
 * it into steer_gen, and the kernel frees the old one only after every
 * program that might still read it has finished (RCU).
 */
struct steer_gen_inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, STEER_MAX_SERVICES);
	__type(key, struct steer_addr);
	__type(value, struct steer_table);
};

/* Never created (user space turns autocreate off): it exists so that the
 * object's BTF carries struct steer_table in full, which user space needs to
 * create each generation with named fields for bpftool. */
struct steer_gen_inner steer_tmpl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct steer_gen_inner);
} steer_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct steer_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, __u32);
	__type(value, struct steer_svc_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_svcst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct steer_sk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_sk SEC(".maps");

/* The registries below are written and read by user space only; they live in
 * this object so that they are created, typed and pinned with the others. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, struct steer_addr);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_svcid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, struct steer_bk_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_bkslot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_MAX_DRAINED);
	__type(key, struct steer_addr);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_drain SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_ports);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_ports SEC(".maps");

/* Per-CPU working memory of steer_select (see there why). Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_pick);
} steer_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct steer_bk_info);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_bkinfo SEC(".maps");

static __always_inline struct steer_slot *slot_lookup(void *ctx, __u32 slot)
{
	return bpf_map_lookup_elem(&steer_slots, &slot);
}

/* Cheap first test: is any virtual address on this port (network order)? */
static __always_inline int port_may_be_virtual(__u32 user_port)
{
	__u32 zero = 0;
	struct steer_ports *p = bpf_map_lookup_elem(&steer_ports, &zero);

	return p && steer_port_is_virtual(p, bpf_ntohs((__u16)user_port));
}

static __always_inline struct steer_table *table_lookup(const struct steer_addr *vip)
{
	__u32 zero = 0;
	void *gen = bpf_map_lookup_elem(&steer_gen, &zero);

	if (!gen)
		return 0;
	return bpf_map_lookup_elem(gen, vip);
}

static __always_inline int is_tcp(const struct bpf_sock_addr *ctx)
{
	return ctx->type == SOCK_STREAM && ctx->protocol == STEER_IPPROTO_TCP;
}

/* Where a steered connect goes, copied out of the table. */
struct steer_dest {
	__u32 ip6[4];
	__u16 port;
	__u32 slot;
	__u32 slot_gen; /* the slot's generation, for sockops' live count */
};

/*
 * Choose a backend for a connect to the service of table t. Returns 1 with
 * dest filled, or 0 when no backend is eligible (empty, or all drained).
 */
static __always_inline int choose(struct steer_table *t, struct steer_dest *dest)
{
	struct steer_svc_stats *svc;
	struct steer_slot *s;
	__u32 svc_id = t->svc_id;
	/* The coarse read of CLOCK_MONOTONIC (one tick of resolution) costs a
	 * fraction of a precise one; expiry is seconds away from any tick. */
	int stale = bpf_ktime_get_coarse_ns() > t->expires_ns;

	svc = bpf_map_lookup_elem(&steer_svcst, &svc_id);
	if (stale) {
		__u64 cursor = svc ? __sync_fetch_and_add(&svc->rr_cursor, 1) : 0;
		__u32 pos = steer_round_robin(t, slot_lookup, 0, cursor);
		const struct steer_entry *e;

		if (pos >= STEER_MAX_BACKENDS)
			goto refused;
		/* Keep clang from re-deriving pos from an unchecked copy. */
		barrier_var(pos);
		pos &= STEER_MAX_BACKENDS - 1;
		e = &t->e[pos];
		dest->ip6[0] = e->ip6[0];
		dest->ip6[1] = e->ip6[1];
		dest->ip6[2] = e->ip6[2];
		dest->ip6[3] = e->ip6[3];
		dest->port = e->port;
		dest->slot = e->slot;
	} else {
		__u32 zero = 0;
		struct steer_pick *p = bpf_map_lookup_elem(&steer_scratch, &zero);

		if (!p)
			goto refused;
		steer_select(t, slot_lookup, 0, 1, p);
		if (!p->found)
			goto refused;
		dest->ip6[0] = p->ip6[0];
		dest->ip6[1] = p->ip6[1];
		dest->ip6[2] = p->ip6[2];
		dest->ip6[3] = p->ip6[3];
		dest->port = p->port;
		dest->slot = p->slot;
	}

	s = slot_lookup(0, dest->slot);
	if (s) {
		dest->slot_gen = s->gen;
		if (stale) {
			__sync_fetch_and_add(&s->fallbacks, 1);
		} else {
			__sync_fetch_and_add(&s->inflight_tokens, t->credit_tokens);
			__sync_fetch_and_add(&s->steered, 1);
		}
	}
	if (svc)
		__sync_fetch_and_add(stale ? &svc->fallbacks : &svc->steered, 1);
	return 1;
refused:
	if (svc)
		__sync_fetch_and_add(&svc->refused, 1);
	return 0;
}

/* Remember the virtual address for getpeername and the slot for sockops. */
static __always_inline void remember(struct bpf_sock_addr *ctx, const struct steer_addr *vip,
				     const struct steer_dest *dest)
{
	struct steer_sk *st;

	st = bpf_sk_storage_get(&steer_sk, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	st->vip_ip6[0] = vip->ip6[0];
	st->vip_ip6[1] = vip->ip6[1];
	st->vip_ip6[2] = vip->ip6[2];
	st->vip_ip6[3] = vip->ip6[3];
	st->vip_port = vip->port;
	st->slot = dest->slot;
	st->slot_gen = dest->slot_gen;
	st->flags = STEER_SK_STEERED;
}

static __always_inline int refuse(void)
{
	/* Fail the connect() itself: no SYN ever leaves for the virtual address. */
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

SEC("cgroup/connect4")
int steer_connect4(struct bpf_sock_addr *ctx)
{
	struct steer_addr vip = {};
	struct steer_dest dest = {};
	struct steer_table *t;

	if (!is_tcp(ctx) || !port_may_be_virtual(ctx->user_port))
		return 1;
	vip.ip6[2] = bpf_htonl(0x0000ffff);
	vip.ip6[3] = ctx->user_ip4;
	vip.port = (__u16)ctx->user_port;
	vip.proto = STEER_IPPROTO_TCP;
	t = table_lookup(&vip);
	if (!t)
		return 1; /* not a virtual address: untouched */
	if (!choose(t, &dest))
		return refuse();
	remember(ctx, &vip, &dest);
	ctx->user_ip4 = dest.ip6[3];
	ctx->user_port = dest.port;
	return 1;
}

SEC("cgroup/connect6")
int steer_connect6(struct bpf_sock_addr *ctx)
{
	struct steer_addr vip = {};
	struct steer_dest dest = {};
	struct steer_table *t;

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
	t = table_lookup(&vip);
	if (!t)
		return 1;
	if (!choose(t, &dest))
		return refuse();
	remember(ctx, &vip, &dest);
	ctx->user_ip6[0] = dest.ip6[0];
	ctx->user_ip6[1] = dest.ip6[1];
	ctx->user_ip6[2] = dest.ip6[2];
	ctx->user_ip6[3] = dest.ip6[3];
	ctx->user_port = dest.port;
	return 1;
}

SEC("cgroup/getpeername4")
int steer_getpeername4(struct bpf_sock_addr *ctx)
{
	struct steer_sk *st = bpf_sk_storage_get(&steer_sk, ctx->sk, 0, 0);

	if (st && (st->flags & STEER_SK_STEERED)) {
		ctx->user_ip4 = st->vip_ip6[3];
		ctx->user_port = st->vip_port;
	}
	return 1;
}

SEC("cgroup/getpeername6")
int steer_getpeername6(struct bpf_sock_addr *ctx)
{
	struct steer_sk *st = bpf_sk_storage_get(&steer_sk, ctx->sk, 0, 0);

	if (st && (st->flags & STEER_SK_STEERED)) {
		ctx->user_ip6[0] = st->vip_ip6[0];
		ctx->user_ip6[1] = st->vip_ip6[1];
		ctx->user_ip6[2] = st->vip_ip6[2];
		ctx->user_ip6[3] = st->vip_ip6[3];
		ctx->user_port = st->vip_port;
	}
	return 1;
}

/*
 * Live connection accounting: +1 when a steered connect is established,
 * -1 once when it closes, on the slot it was steered to. State callbacks are
 * enabled from the start of the active open, so that a connect that fails
 * (or a socket closed before it was established) is seen too: its storage is
 * cleared, and a later connect of the same socket elsewhere is not mistaken
 * for a steered one.
 */
static __always_inline void want_state_changes(struct bpf_sock_ops *skops)
{
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

SEC("sockops")
int steer_sockops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct steer_slot *s;
	struct steer_sk *st;
	__u32 op = skops->op;

	if (!sk)
		return 1;
	if (op != BPF_SOCK_OPS_TCP_CONNECT_CB && op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    op != BPF_SOCK_OPS_STATE_CB)
		return 1;
	st = bpf_sk_storage_get(&steer_sk, sk, 0, 0);
	if (!st || !(st->flags & STEER_SK_STEERED))
		return 1;
	if (op == BPF_SOCK_OPS_TCP_CONNECT_CB) {
		want_state_changes(skops);
		return 1;
	}
	s = slot_lookup(0, st->slot);
	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
		want_state_changes(skops); /* also for a connect older than this program */
		/* A slot handed to another backend meanwhile is not this one's. */
		if (!s || (st->flags & STEER_SK_LIVE) || s->gen != st->slot_gen)
			return 1;
		st->flags |= STEER_SK_LIVE;
		__sync_fetch_and_add(&s->live, 1);
		return 1;
	}
	if (skops->args[1] != BPF_TCP_CLOSE)
		return 1;
	if ((st->flags & STEER_SK_LIVE) && s && s->gen == st->slot_gen)
		__sync_fetch_and_add(&s->live, -1);
	st->flags &= ~(STEER_SK_LIVE | STEER_SK_STEERED);
	return 1;
}
