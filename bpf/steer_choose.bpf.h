// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_choose.bpf.h - choosing a backend for a new connection and crediting
 * it, under the service's lock: the one path every steering hook shares, so
 * that connections steered by any of them water-fill one view of each backend.
 * Include after steer_maps.bpf.h.
 */
#ifndef STEER_CHOOSE_BPF_H
#define STEER_CHOOSE_BPF_H

/* Where a steered connect goes, copied out of the table under the lock. */
struct steer_dest {
	__u32 ip6[4];
	__u16 port;
	__u16 svc_id;
	__u32 slot;
	__u32 slot_gen;
	__u32 drain_seq; /* steer_wire.drain_seq at the credit (low 32 bits) */
	bool credited;	 /* the flat credit was added (a fresh table) */
	bool status;	 /* its answers' HTTP status is read (STEER_TBL_OVERLOAD) */
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
 * Fresh table: the root of the service's tree at time now, re-keyed until it
 * is current, or the tree rebuilt when the table or anything it caches
 * changed (steer_tree_pick_at).
 */
static __always_inline __u32 pick_least_wait(struct steer_table *t, struct steer_slot_array *all,
					     struct steer_wire_array *wall,
					     struct steer_svc_stats *st, struct steer_svc_tree *tr,
					     __u64 now)
{
	return steer_tree_pick_at(tr, t, slot_in, all, wire_in, wall, st->epoch, now,
				  &st->tree_clock);
}

/*
 * Under the lock, with overload protection on: may the connect take the pick?
 * The pick is the least key, so what holds for it holds for every backend:
 * it is overloaded (its poll, pushing back, or at its bound of live
 * connections) only when all are, and its
 * wait is over the bound only when every wait is. Counts what was done;
 * false: refuse the connect.
 */
static __always_inline bool overload_admits(const struct steer_table *t, const struct steer_slot *s,
					    const struct steer_wire *w, struct steer_svc_stats *st,
					    __u64 wait)
{
	__u64 all = steer_overload_ns(s, w) >> 62;
	__u64 over = all | steer_over_wait_bound(wait, t->wait_bound_ns);

	if (!over)
		return true;
	if (t->flags & STEER_TBL_OVERLOAD_LEAST) {
		st->overload_admitted++;
		return true;
	}
	st->overload_refused += all;
	st->wait_refused += over ^ all;
	return false;
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
	 * fraction of a precise one; expiry is seconds away from any tick, and
	 * busy-until times are read on the same clock everywhere. */
	__u64 clock = bpf_ktime_get_coarse_ns(), now;
	bool stale = clock > t->expires_ns;
	struct steer_slot_array *all = slots_all();
	struct steer_wire_array *wall = wire_all();
	struct steer_svc_stats *st = bpf_map_lookup_elem(&steer_svcst, &svc_id);
	struct steer_svc_tree *tr = bpf_map_lookup_elem(&steer_tree, &svc_id);
	const struct steer_entry *e;
	struct steer_slot *s;
	struct steer_wire *w;

	if (!all || !wall || !st || !tr)
		return CHOICE_REFUSED;
	bpf_spin_lock(&tr->lock);
	now = key_clock(st, clock);
	pos = stale ? pick_round_robin(t, all, st) : pick_least_wait(t, all, wall, st, tr, now);
	if (pos >= STEER_MAX_BACKENDS) {
		st->refused++;
		bpf_spin_unlock(&tr->lock);
		return CHOICE_REFUSED;
	}
	e = &t->e[pos];
	s = slot_in(all, e->slot);
	w = wire_in(wall, e->slot);
	if (!stale && (t->flags & STEER_TBL_OVERLOAD) &&
	    !overload_admits(t, s, w, st, *(volatile __u64 *)&tr->pick_wait_ns)) {
		bpf_spin_unlock(&tr->lock);
		return CHOICE_REFUSED;
	}
	dest->credited = !stale;
	dest->status = t->flags & STEER_TBL_OVERLOAD;
	dest->drain_seq = (__u32)w->drain_seq;
	/* Live first: the leaf's new key sees the count (a bound of live
	 * connections, --worker-overload-connections). */
	if (tracked)
		s->live++;
	else
		st->untracked++;
	if (stale) {
		s->fallbacks++;
		st->fallbacks++;
	} else {
		s->inflight_tokens += t->credit_tokens;
		s->steered++;
		st->steered++;
		steer_tree_key_leaf(tr, pos, steer_entry_key(t, e, s, w, st->tree_clock.ref_ns),
				    steer_wire_until(w, t->flags), &st->tree_clock);
	}
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

#endif /* STEER_CHOOSE_BPF_H */
