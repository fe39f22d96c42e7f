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

#define SOCK_STREAM 1
#define ECONNREFUSED 111

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

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
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_slot_array);
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
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, __u32);
	__type(value, struct steer_svc_tree);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_tree SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, struct steer_sock);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_socks SEC(".maps");

/* Sockets steered by layout 0 keep their storage here until they close. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct steer_sk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_layout);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_layout SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct steer_bk_info);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_bkinfo SEC(".maps");

/* ---- helpers ----------------------------------------------------------------- */

/* The slot accessor of steer_common.h over the one value holding them all:
 * plain address arithmetic, so it may run under a service lock. */
static __always_inline struct steer_slot *slot_in(void *all, __u32 slot)
{
	return &((struct steer_slot_array *)all)->s[slot & (STEER_SLOT_IDS - 1)];
}

static __always_inline struct steer_slot_array *slots_all(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steer_slots, &zero);
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

static __always_inline struct steer_sock *sock_at(__u64 cookie, __u32 probe)
{
	__u32 idx = (__u32)(cookie + probe) & (STEER_SOCK_RECORDS - 1);

	return bpf_map_lookup_elem(&steer_socks, &idx);
}

/* The record of the socket with this cookie, or NULL. */
static __always_inline struct steer_sock *sock_find(__u64 cookie)
{
	__u32 p;

	for (p = 0; p < STEER_SOCK_PROBES; p++) {
		struct steer_sock *r = sock_at(cookie, p);

		if (r && r->cookie == cookie)
			return r;
	}
	return 0;
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

static __always_inline void svc_touch(__u16 svc_id)
{
	__u32 id = svc_id;
	struct steer_svc_stats *st = bpf_map_lookup_elem(&steer_svcst, &id);

	if (st)
		__sync_fetch_and_add(&st->epoch, 1);
}

/*
 * A steered socket is released, or connected again elsewhere: take it off its
 * backend's live count, and count a connect that never got established
 * towards fast ejection (one that did resets the count). Nothing when the
 * slot has changed owner since (its gen moved on). Crossing the threshold
 * either way has the service's tree rebuilt at its next connect.
 */
static __always_inline void sock_done(struct steer_sock *r, bool established)
{
	struct steer_slot_array *all = slots_all();
	struct steer_slot *s;
	bool live = r->flags & STEER_SOCK_LIVE;

	r->flags &= ~STEER_SOCK_LIVE;
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

/* Where a steered connect goes, copied out of the table under the lock. */
struct steer_dest {
	__u32 ip6[4];
	__u16 port;
	__u16 svc_id;
	__u32 slot;
	__u32 slot_gen;
};

enum choice {
	CHOICE_STEERED,
	CHOICE_REFUSED,
};

/* Expired table: round robin over the entries, no credit. Under the lock. */
static __always_inline __u32 pick_round_robin(struct steer_table *t, struct steer_slot_array *all,
					      struct steer_svc_stats *st)
{
	__u64 cursor = st->rr_cursor++;

	return steer_round_robin(t, slot_in, all, cursor);
}

/*
 * Fresh table: the root of the service's tree, rebuilt first when the table
 * or anything it caches changed. A winner that is no longer eligible means a
 * drain or an ejection landed just before its epoch bump: rebuild with the
 * slots as they are now.
 */
static __always_inline __u32 pick_least_wait(struct steer_table *t, struct steer_slot_array *all,
					     struct steer_svc_stats *st, struct steer_svc_tree *tr)
{
	__u32 pos = steer_tree_pick(tr);
	bool out = pos < STEER_MAX_BACKENDS && !steer_slot_eligible(slot_in(all, t->e[pos].slot));

	if (tr->tgen != t->generation || tr->epoch != st->epoch || out) {
		steer_tree_build(tr, t, slot_in, all, st->epoch);
		pos = steer_tree_pick(tr);
	}
	return pos;
}

/*
 * Choose a backend for a connect to the service of table t and account for
 * it: everything a connect writes is written here, under the service's lock,
 * so that the lock is the one atomic a steered connect pays on a shared line.
 * tracked: the socket has a record, so its release will be seen and it may
 * count as live.
 */
static __always_inline enum choice choose(struct steer_table *t, struct steer_dest *dest,
					  bool tracked)
{
	__u32 svc_id = t->svc_id & (STEER_SVC_IDS - 1), pos;
	/* The coarse read of CLOCK_MONOTONIC (one tick of resolution) costs a
	 * fraction of a precise one; expiry is seconds away from any tick. */
	bool stale = bpf_ktime_get_coarse_ns() > t->expires_ns;
	struct steer_slot_array *all = slots_all();
	struct steer_svc_stats *st = bpf_map_lookup_elem(&steer_svcst, &svc_id);
	struct steer_svc_tree *tr = bpf_map_lookup_elem(&steer_tree, &svc_id);
	const struct steer_entry *e;
	struct steer_slot *s;

	if (!all || !st || !tr)
		return CHOICE_REFUSED;
	bpf_spin_lock(&tr->lock);
	pos = stale ? pick_round_robin(t, all, st) : pick_least_wait(t, all, st, tr);
	if (pos >= STEER_MAX_BACKENDS) {
		st->refused++;
		bpf_spin_unlock(&tr->lock);
		return CHOICE_REFUSED;
	}
	e = &t->e[pos];
	s = slot_in(all, e->slot);
	if (stale) {
		s->fallbacks++;
		st->fallbacks++;
	} else {
		s->inflight_tokens += t->credit_tokens;
		s->steered++;
		st->steered++;
		steer_tree_credit(tr, t, pos, steer_slot_inflight(s));
	}
	if (tracked)
		s->live++;
	else
		st->untracked++;
	dest->slot_gen = s->gen;
	bpf_spin_unlock(&tr->lock);
	dest->ip6[0] = e->ip6[0];
	dest->ip6[1] = e->ip6[1];
	dest->ip6[2] = e->ip6[2];
	dest->ip6[3] = e->ip6[3];
	dest->port = e->port;
	dest->slot = e->slot;
	dest->svc_id = (__u16)svc_id;
	return CHOICE_STEERED;
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
	r->flags = STEER_SOCK_LIVE;
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

static __always_inline bool legacy_sockets(void)
{
	__u32 zero = 0;
	struct steer_layout *l = bpf_map_lookup_elem(&steer_layout, &zero);

	return l && (l->flags & STEER_LAYOUT_LEGACY_SK);
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
		return 1;
	}
	if (legacy_sockets()) {
		struct steer_sk *st = bpf_sk_storage_get(&steer_sk, ctx->sk, 0, 0);

		if (st && (st->flags & STEER_SK_STEERED)) {
			ctx->user_ip4 = st->vip_ip6[3];
			ctx->user_port = st->vip_port;
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
		return 1;
	}
	if (legacy_sockets()) {
		struct steer_sk *st = bpf_sk_storage_get(&steer_sk, ctx->sk, 0, 0);

		if (st && (st->flags & STEER_SK_STEERED)) {
			ctx->user_ip6[0] = st->vip_ip6[0];
			ctx->user_ip6[1] = st->vip_ip6[1];
			ctx->user_ip6[2] = st->vip_ip6[2];
			ctx->user_ip6[3] = st->vip_ip6[3];
			ctx->user_port = st->vip_port;
		}
	}
	return 1;
}

/* A socket steered by layout 0 closes: off the live count it was migrated
 * into (same slot numbers), once. */
static __always_inline void release_legacy(struct bpf_sock *ctx)
{
	__u32 zero = 0;
	struct steer_layout *l = bpf_map_lookup_elem(&steer_layout, &zero);
	struct steer_slot_array *all;
	struct steer_sk *st;

	if (!l || !(l->flags & STEER_LAYOUT_LEGACY_SK))
		return;
	st = bpf_sk_storage_get(&steer_sk, ctx, 0, 0);
	if (!st || !(st->flags & STEER_SK_LIVE))
		return;
	st->flags &= ~STEER_SK_LIVE;
	all = slots_all();
	if (all && slot_in(all, st->slot)->gen == st->slot_gen)
		__sync_fetch_and_add(&slot_in(all, st->slot)->closed, 1);
	__sync_fetch_and_add(&l->legacy_live, -1);
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
		return 1;
	}
	release_legacy(ctx);
	return 1;
}
