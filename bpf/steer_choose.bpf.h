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

/* ---- cache affinity ------------------------------------------------------------
 *
 * What a connect's client may do, judged before the service's lock from what
 * the pick cannot change (affinity_probe), and settled after the pick without
 * a branch (affinity_stays). The probe and the record of where the client
 * went (affinity_remember) are global functions: the verifier checks each
 * once, on its own, and the connect sees only what they return and write.
 * Their many ways never multiply the ways through the pick, which is what a
 * connect's verification is made of.
 */

/* The probe's answer, in the connect's stack. */
struct aff_probe {
	__u32 state;   /* STEER_AFF_HAS_KEY, STEER_AFF_KNOWN */
	__u32 verdict; /* enum steer_aff_verdict with the least wait aside: STAY for a candidate */
	__u32 pos;     /* the client's backend's table position */
	__u32 set_id;  /* the client's set in steer_affin (with STEER_AFF_HAS_KEY) */
	__u64 wait_ns; /* ns: its expected wait at the probe */
	__u32 tag;     /* and its tag there */
	__u32 pad;
};

/* The table position of slot in t, as the publish wrote it (table_pos);
 * STEER_NO_PICK: not in t. */
static __always_inline __u32 affinity_find(const struct steer_table *t, const struct steer_wire *w,
					   __u32 slot)
{
	__u32 tp = w->table_pos, pos = tp & (STEER_MAX_BACKENDS - 1);

	if ((tp >> 16) == (t->generation & 0xffff) && pos < t->n && t->e[pos].slot == slot)
		return pos;
	return STEER_NO_PICK;
}

/*
 * Before the lock: the client ak's remembered backend (ak->kind 0: no key),
 * judged at clock by steer_affinity_judge with the least wait yet unknown:
 * gone, overloaded, or a candidate with its position and wait. Read without
 * the lock, a moment before the pick: what it misses is a connect of another
 * CPU in between. A known client's entry is renewed here. Always 0.
 */
__noinline int affinity_probe(const struct steer_table *t, const struct steer_aff_key *ak,
			      __u64 clock, struct aff_probe *out)
{
	struct steer_slot_array *all = slots_all();
	struct steer_wire_array *wall = wire_all();
	const struct steer_entry *e = 0;
	struct steer_aff_set *set;
	struct steer_aff *av;
	struct steer_slot *s;
	struct steer_wire *w;
	__u32 set_id, way, pos, slot, slot_gen;
	__u64 hash, last;

	if (!t || !ak || !out || !all || !wall || !ak->kind)
		return 0;
	hash = steer_aff_hash(ak);
	set_id = steer_aff_set_of(hash);
	/* for affinity_remember, which then need not hash again */
	out->state = STEER_AFF_HAS_KEY;
	out->set_id = set_id;
	out->tag = steer_aff_tag(hash);
	set = bpf_map_lookup_elem(&steer_affin, &set_id);
	if (!set)
		return 0;
	way = steer_aff_way_of(set, out->tag);
	if (way >= STEER_AFFINITY_WAYS)
		return 0; /* new */
	av = &set->way[way];
	/* Read once each: another CPU may be writing the way, and everything
	 * judged below must be of one slot. */
	slot = *(volatile __u16 *)&av->slot;
	slot_gen = *(volatile __u16 *)&av->slot_gen;
	last = *(volatile __u64 *)&av->last_ns;
	/* Another CPU may have dated the way a tick after this clock. */
	if (clock > last && clock - last > t->affinity_idle_ns)
		return 0; /* idle too long: forgotten */
	out->state |= STEER_AFF_KNOWN;
	/* Renewed now: a connect that stays then writes nothing more; one that
	 * leaves rewrites the way after the lock. */
	av->last_ns = clock;
	s = slot_in(all, slot);
	w = wire_in(wall, slot);
	pos = affinity_find(t, w, slot);
	if (pos < STEER_MAX_BACKENDS && (__u16)s->gen == slot_gen)
		e = &t->e[pos];
	out->verdict = steer_affinity_judge(t, e, s, w, STEER_U64_MAX, clock, &out->wait_ns);
	out->pos = pos;
	return 0;
}

/*
 * Under the lock, after the pick at pos with its wait in tr->pick_wait_ns:
 * the position the connect goes to, its verdict counted. Without a branch
 * on a wait: a candidate stays when its wait is within the pick's plus the
 * slack (steer_affinity_settle); STEER_AFF_STAYED in ap->state says so.
 */
static __always_inline __u32 affinity_stays(const struct steer_table *t, struct steer_svc_stats *st,
					    struct steer_svc_tree *tr, struct aff_probe *ap,
					    __u32 pos)
{
	__u64 has = ap->state & STEER_AFF_HAS_KEY, v;
	__u64 stay =
		steer_affinity_settle(*(volatile __u64 *)&tr->pick_wait_ns, t->affinity_slack_ns,
				      ap->state, ap->verdict, ap->wait_ns, &v);

	st->affinity[STEER_AFF_NEW] += has & (((v ^ STEER_AFF_NEW) - 1) >> 63);
	st->affinity[STEER_AFF_STAY] += has & (((v ^ STEER_AFF_STAY) - 1) >> 63);
	st->affinity[STEER_AFF_LEFT_SLACK] += has & (((v ^ STEER_AFF_LEFT_SLACK) - 1) >> 63);
	st->affinity[STEER_AFF_LEFT_GONE] += has & (((v ^ STEER_AFF_LEFT_GONE) - 1) >> 63);
	st->affinity[STEER_AFF_LEFT_OVERLOAD] += has & (((v ^ STEER_AFF_LEFT_OVERLOAD) - 1) >> 63);
	ap->state |= (__u32)stay * STEER_AFF_STAYED;
	return pos ^ ((pos ^ ap->pos) & (__u32)(0 - stay));
}

/* After the lock, when the connect did not stay: remember that the client of
 * tag in set set_id (the probe's) went to slot (steer_aff_record). Always 0. */
__noinline int affinity_remember(__u32 set_id, __u32 tag, __u32 slot, __u32 slot_gen, __u64 clock)
{
	struct steer_aff_set *set = bpf_map_lookup_elem(&steer_affin, &set_id);

	if (set)
		steer_aff_record(set, tag, slot, slot_gen, clock);
	return 0;
}

/*
 * Choose a backend for a connect to the service of table t and account for
 * it: everything a connect writes is written here, under the service's lock,
 * so that the lock is the one atomic a steered connect pays on a shared line.
 * tracked: the socket has a record, so its release will be seen and it may
 * count as live. ak: the client, with cache affinity on (kind 0: off, or a
 * connect without a key).
 */
static __always_inline enum choice choose(struct steer_table *t, struct steer_dest *dest,
					  bool tracked, const struct steer_aff_key *ak)
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
	struct aff_probe ap = {};

	if (!all || !wall || !st || !tr)
		return CHOICE_REFUSED;
	if (ak->kind && !stale)
		affinity_probe(t, ak, clock, &ap);
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
	pos = affinity_stays(t, st, tr, &ap, pos) & (STEER_MAX_BACKENDS - 1);
	e = &t->e[pos];
	s = slot_in(all, e->slot);
	w = wire_in(wall, e->slot);
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
	if ((ap.state & (STEER_AFF_HAS_KEY | STEER_AFF_STAYED)) == STEER_AFF_HAS_KEY)
		affinity_remember(ap.set_id, ap.tag, dest->slot, dest->slot_gen, clock);
	return CHOICE_STEERED;
}

#endif /* STEER_CHOOSE_BPF_H */
