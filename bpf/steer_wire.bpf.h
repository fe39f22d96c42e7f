// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire.bpf.h - request accounting on steered sockets: what a message
 * sent, a response byte received, or a socket closed does to its record
 * (steer_sock.unanswered) and to its backend's counters (steer_wire), and to
 * the backend's leaf in its service's tree. Everything here is written under
 * the service's lock, like a connect's credit, so that the kernel's pick stays
 * exactly steer_select_at()'s. The hooks that call it (cgroup_skb in
 * steer_wire.bpf.c, release in steer.bpf.c) only find the record and the byte
 * count.
 * Include after steer_maps.bpf.h.
 */
#ifndef STEER_WIRE_BPF_H
#define STEER_WIRE_BPF_H

#define WIRE_U32_MAX 0xffffffffu

/* The clock a send or an answer reads: the coarse one (one tick of
 * resolution, and cheaper than the precise one). */
#define WIRE_CLOCK_NS() bpf_ktime_get_coarse_ns()

/* What a record's accounting touches; NULL members when the maps are missing. */
struct wire_ref {
	struct steer_slot *s;
	struct steer_wire *w;
	struct steer_svc_tree *tr;
	struct steer_svc_stats *st;
};

/* The record's slot and its accounting (ref->w NULL when the maps are
 * missing). False when missing, or when the slot has changed owner since the
 * connect (its gen moved on). */
static __always_inline bool wire_slot(const struct steer_sock *r, struct wire_ref *ref)
{
	struct steer_slot_array *all = slots_all();
	struct steer_wire_array *wall = wire_all();

	ref->w = 0;
	if (!all || !wall)
		return false;
	ref->s = slot_in(all, r->slot);
	ref->w = wire_in(wall, r->slot);
	return ref->s->gen == r->slot_gen;
}

/* The record's service tree and statistics; false (ref->tr NULL) when missing. */
static __always_inline bool wire_tree(const struct steer_sock *r, struct wire_ref *ref)
{
	__u32 id = r->svc_id & (STEER_SVC_IDS - 1);

	ref->tr = bpf_map_lookup_elem(&steer_tree, &id);
	ref->st = bpf_map_lookup_elem(&steer_svcst, &id);
	if (!ref->tr || !ref->st) {
		ref->tr = 0;
		return false;
	}
	return true;
}

/* The record's slot, its accounting and its service's tree (ref->tr NULL
 * when a map is missing). False when something is missing or the slot has
 * changed owner since the connect. */
static __always_inline bool wire_ref(const struct steer_sock *r, struct wire_ref *ref)
{
	bool same = wire_slot(r, ref);

	ref->tr = 0;
	if (!ref->w || !wire_tree(r, ref))
		return false;
	return same;
}

/* Under the lock: the slot's leaf re-keyed with its work as it is now (at the
 * tree's reference time, docs/algorithm.md, "busy-until"). */
static __always_inline void wire_rescore(struct wire_ref *ref)
{
	steer_tree_rekey(ref->tr, ref->s, ref->w, &ref->st->tree_clock);
}

/*
 * Under the lock, at a socket's first send: its flat connect credit is taken
 * back (its real size is now counted), unless the daemon drained the slot's
 * credits since the connect (drain_seq moved): then that credit is gone
 * already. User space adds to drained_tokens with compare-and-swap, so does
 * this; never more than is in flight.
 */
static __always_inline void wire_withdraw(struct steer_slot *s, struct steer_wire *w)
{
	__u64 credit = w->cache_credit, d = s->drained_tokens;
	int i;

	for (i = 0; i < 3; i++) {
		__u64 in = s->inflight_tokens - d, take = credit < in ? credit : in, old;

		if (!take)
			return;
		old = __sync_val_compare_and_swap(&s->drained_tokens, d, d + take);
		if (old == d) {
			w->withdrawn_tokens += take;
			return;
		}
		d = old;
	}
}

/* What a send or an answer does once the slot's counters moved, outside the
 * lock: steer_wire.bpf.c wakes smg-steerd's peer thread when the table asks
 * for it (--peer-push); the release hook (steer.bpf.c) does nothing. */
#ifndef WIRE_MOVED
#define WIRE_MOVED(w) \
	do {          \
	} while (0)
#endif

/* The socket with this record and cookie sent bytes of request. */
static __always_inline void wire_sent(struct steer_sock *r, __u64 cookie, __u64 bytes)
{
	struct wire_ref ref;
	__u32 room, add;
	__u64 now, before, clock;

	if (!bytes || !wire_ref(r, &ref))
		return;
	clock = WIRE_CLOCK_NS(); /* no helper runs under the lock */
	bpf_spin_lock(&ref.tr->lock);
	now = key_clock(ref.st, clock);
	/* Released (or reconnected) meanwhile: its bytes are not the slot's. */
	if (r->cookie != cookie || !(r->flags & STEER_SOCK_LIVE))
		goto out;
	room = WIRE_U32_MAX - r->unanswered;
	add = bytes < room ? (__u32)bytes : room;
	if (!r->unanswered)
		ref.w->requests++; /* the first send after a response: a new request */
	r->unanswered += add;
	before = steer_wire_pending(ref.w);
	ref.w->sent_bytes += add;
	steer_busy_sent(ref.w, now, before, before + add);
	/* A send only raises the slot's key (more busy time, more pending), so
	 * the leaf's cached key stays a lower bound and may be left as it is:
	 * the next connect re-keys it if it comes to the root (docs/algorithm.md
	 * 4.2). A first send that takes its connect's credit back may lower it:
	 * that one re-keys the leaf at once. */
	if (!(r->flags & STEER_SOCK_SENT)) {
		r->flags |= STEER_SOCK_SENT;
		if ((r->flags & STEER_SOCK_CREDITED) && r->drain_seq == (__u32)ref.w->drain_seq) {
			wire_withdraw(ref.s, ref.w);
			wire_rescore(&ref);
		}
	}
	bpf_spin_unlock(&ref.tr->lock);
	WIRE_MOVED(ref.w);
	return;
out:
	bpf_spin_unlock(&ref.tr->lock);
}

/* Under the lock: the socket's unanswered bytes are answered (or abandoned);
 * returns how many. Never more than the slot has pending: a record that
 * outlived its slot's counters (steer_wire unpinned and created anew) cannot
 * wrap them. */
static __always_inline __u64 wire_settle(struct steer_sock *r, struct steer_wire *w)
{
	__u64 pending = steer_wire_pending(w);
	__u64 n = r->unanswered < pending ? r->unanswered : pending;

	w->answered_bytes += n;
	r->unanswered = 0;
	return n;
}

/* What the first bytes of an answer say (STEER_SOCK_STATUS sockets). */
enum answer_kind {
	ANSWER_PLAIN,	 /* anything else, or not read */
	ANSWER_PUSHBACK, /* HTTP status 429 or 503: the backend is pushing back */
	ANSWER_ERROR,	 /* another 5xx: a failed connect, for fast ejection */
};

struct wire_answer {
	enum answer_kind kind;
	__u64 hold_ns; /* ANSWER_PUSHBACK: its Retry-After, at most STEER_PUSHBACK_MAX_NS */
};

/* Under the lock: what the answer's status does to the slot. True when the
 * answer is a failed connect, which the caller counts after the lock. A
 * pushback flags the slot, before the caller re-keys its leaf. */
static __always_inline bool wire_status(struct steer_sock *r, struct wire_ref *ref,
					const struct wire_answer *ans, __u64 clock)
{
	if (ans->kind == ANSWER_PUSHBACK) {
		ref->w->pushback_at_ns = clock;
		ref->w->pushback_until_ns = clock + ans->hold_ns;
		ref->w->pushbacks++;
		__sync_fetch_and_or(&ref->s->flags, STEER_SLOT_PUSHBACK);
		return false;
	}
	if (ans->kind != ANSWER_ERROR || (r->flags & STEER_SOCK_FAILED))
		return false;
	ref->w->server_errors++;
	r->flags |= STEER_SOCK_FAILED;
	return true;
}

/* The socket received response bytes: what it had sent is answered, and
 * becomes an in-flight credit of its real size. With the step cadence on
 * (STEER_TBL_STEP) the answer is also a packet at a step end: the slot's
 * step_until moves to now + its last step (never lower: see
 * steer_step_next). Returns the time of the answer when the cadence is on
 * (the caller starts the socket's gap there), else 0. */
static __always_inline __u64 wire_answered(struct steer_sock *r, __u64 cookie,
					   const struct wire_answer *ans)
{
	struct wire_ref ref;
	__u64 clock, at = 0;
	bool moved = false, failed = false;

	if (!r->unanswered || !wire_ref(r, &ref))
		return 0;
	clock = WIRE_CLOCK_NS();
	bpf_spin_lock(&ref.tr->lock);
	if (r->cookie == cookie && (r->flags & STEER_SOCK_LIVE) && r->unanswered) {
		__u64 now = key_clock(ref.st, clock);
		/* The engine has the request: its real size is in flight from now
		 * on, as a connect's credit is, until the daemon drains it. */
		__u64 tokens =
			wire_settle(r, ref.w) / steer_bytes_per_token(ref.w->bytes_per_token);

		ref.s->inflight_tokens += tokens;
		ref.w->answered_tokens += tokens;
		steer_busy_answered(ref.w, now);
		if (ref.w->cache_flags & STEER_TBL_STEP) {
			ref.w->step_until_ns = steer_step_next(ref.w, 0, now);
			at = clock;
		}
		failed = wire_status(r, &ref, ans, clock);
		wire_rescore(&ref);
		moved = true;
	}
	bpf_spin_unlock(&ref.tr->lock);
	/* At STEER_FAIL_EJECT it is no longer eligible: the tree is rebuilt. */
	if (failed && __sync_fetch_and_add(&ref.s->fails, 1) == STEER_FAIL_EJECT - 1)
		__sync_fetch_and_add(&ref.st->epoch, 1);
	if (moved)
		WIRE_MOVED(ref.w);
	return at;
}

/*
 * Raise *at to until without the lock, unless until is lower (false: the
 * caller lowers it under the lock, with a re-key). Compare-and-swap, so that
 * a raise on one CPU never overwrites a higher value another CPU wrote
 * meanwhile: without the lock a step_until may only grow, or a leaf's cached
 * key could exceed its key (docs/algorithm.md, "busy-until", I1). Gives up after three
 * tries: others are raising it, and a value that is lower than it could be
 * is only a shorter prediction.
 */
static __always_inline bool wire_raise_u64(__u64 *at, __u64 until)
{
	__u64 old = *at, seen;
	int i;

	for (i = 0; i < 3; i++) {
		if (until < old)
			return false;
		seen = __sync_val_compare_and_swap(at, old, until);
		if (seen == old)
			return true;
		old = seen;
	}
	return true;
}

/*
 * A later packet of a response (the step cadence, docs/algorithm.md, "The step cadence"):
 * its gap to the socket's previous packet since the answer (rx) is one step
 * of the backend's engine. step_until that rises (the usual case: steps of
 * one engine are alike) is raised without the lock (wire_raise_u64), the
 * leaf's cached key left lower, like a send's; one that falls (a shorter
 * step) is written under the service's lock and the leaf re-keyed, so the
 * pick stays exact.
 */
static __always_inline void wire_step(struct steer_sock *r, __u64 cookie, struct steer_sock_rx *rx)
{
	struct wire_ref ref;
	__u64 now, last, until;

	/* No answer seen on this socket with the cadence on, or its slot's
	 * table does not ask for it (any more), or the slot changed owner. */
	if (rx->cookie != cookie || !wire_slot(r, &ref) || !(ref.w->cache_flags & STEER_TBL_STEP))
		return;
	now = WIRE_CLOCK_NS();
	last = rx->last_ns;
	rx->last_ns = now;
	until = steer_step_next(ref.w, last, now);
	if (wire_raise_u64(&ref.w->step_until_ns, until) || !wire_tree(r, &ref))
		return;
	bpf_spin_lock(&ref.tr->lock);
	ref.w->step_until_ns = until;
	wire_rescore(&ref);
	bpf_spin_unlock(&ref.tr->lock);
}

/*
 * The socket is released or connected again: it is no longer live, and what
 * it sent unanswered is abandoned. Under the lock, so that a send on another
 * CPU either lands before (and is settled here) or sees the live flag gone.
 * Returns the flags as they were.
 */
static __always_inline __u16 wire_close(struct steer_sock *r)
{
	struct wire_ref ref;
	bool same = wire_ref(r, &ref);
	/* The clock only when there is something to settle: most sockets close
	 * answered, and the release of every steered socket runs this. The
	 * precise read is the same CLOCK_MONOTONIC, less than a tick ahead of the
	 * coarse one, and it only caps busy_until (keys are computed at the tree's
	 * reference time). */
	__u64 clock = same && r->unanswered ? bpf_ktime_get_ns() : 0;
	__u16 flags;

	if (!ref.tr) {
		flags = r->flags;
		r->flags = flags & ~STEER_SOCK_LIVE;
		return flags;
	}
	bpf_spin_lock(&ref.tr->lock);
	flags = r->flags;
	r->flags = flags & ~STEER_SOCK_LIVE;
	if (same && r->unanswered) {
		__u64 now = key_clock(ref.st, clock);

		wire_settle(r, ref.w);
		steer_busy_cap(ref.w, now);
		wire_rescore(&ref);
	}
	r->unanswered = 0;
	bpf_spin_unlock(&ref.tr->lock);
	return flags;
}

#endif /* STEER_WIRE_BPF_H */
