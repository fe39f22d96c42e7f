/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * steer_select.h - the selection math shared verbatim by the kernel and user
 * space: saturating scores, the reference argmins (steer_select without time,
 * steer_select_at with it), the busy-until estimate and the kernel's selection
 * tree. Included by steer_common.h, after every struct
 * and constant it uses; include steer_common.h, not this file.
 */
#ifndef STEER_SELECT_H
#define STEER_SELECT_H

static __always_inline __u64 steer_sat_add(__u64 a, __u64 b)
{
	__u64 s = a + b;

	return s < a ? STEER_U64_MAX : s;
}

static __always_inline __u64 steer_sat_mul(__u64 a, __u64 b)
{
	__u64 a_hi = a >> 32, b_hi = b >> 32, small, big_hi, cross;

	/* Fast path: two 32-bit operands cannot overflow 64 bits. */
	if ((a_hi | b_hi) == 0)
		return a * b;
	if (a_hi && b_hi)
		return STEER_U64_MAX; /* both >= 2^32 */
	/* Exactly one operand has high bits: (hi*2^32 + lo) * small, with
	 * small < 2^32. Written without division or 128-bit products, which
	 * the BPF target does not have. */
	if (a_hi) {
		small = b;
		big_hi = a_hi;
		cross = (a & 0xffffffffULL) * small;
	} else {
		small = a;
		big_hi = b_hi;
		cross = (b & 0xffffffffULL) * small;
	}
	big_hi *= small; /* < 2^64: both factors < 2^32 */
	if (big_hi >> 32)
		return STEER_U64_MAX;
	return steer_sat_add(big_hi << 32, cross);
}

/* Expected wait of one backend for the next connection, ns, saturating. */
static __always_inline __u64 steer_score(__u64 base_wait_ns, __u64 inflight_tokens,
					 __u64 ns_per_token)
{
	return steer_sat_add(base_wait_ns, steer_sat_mul(inflight_tokens, ns_per_token));
}

/* Resolves a slot number to its request accounting, or NULL (no pending work). */
typedef struct steer_wire *(*steer_wire_fn)(void *wctx, __u32 slot);

/* The outcome of one selection. */
struct steer_pick {
	__u64 score;   /* ns; the chosen backend's score (its expected wait) */
	__u64 key;     /* its sort key (steer_key): the score, plus now in the fluid mode */
	__u32 found;   /* 1 when a backend was chosen */
	__u32 pos;     /* its table position (not read by the kernel, see below) */
	__u32 slot;    /* its slot */
	__u32 ip6[4];  /* its traffic address, network order */
	__u16 port;    /* its traffic port, network order */
	__u16 scanned; /* entries examined before the early exit */
};

/*
 * Resolves a slot number to its counters, or NULL when out of range. The
 * kernel passes a function that looks into steer_slots; user space passes one
 * that indexes an array. Always inlined, so BPF sees a direct access.
 */
typedef struct steer_slot *(*steer_slot_fn)(void *ctx, __u32 slot);

/*
 * Least expected wait over a table sorted by base_wait_ns ascending:
 * score_b = base_wait_ns_b + inflight_b * ns_per_token_b, argmin, where
 * inflight_b is the slot's in-flight credits, ties to the earlier position. In-flight work only adds to base_wait_ns, so
 * once the next entry's base_wait_ns reaches the best score no later entry can
 * win, not even a tie: the scan stops there and the answer is exact.
 * Drained backends are skipped. With early_exit false the whole table is
 * scanned (tests compare the two). The result is left in *best.
 *
 * Why *best is caller memory and the winner's fields are copied out as it
 * improves: in the kernel, best points into a per-CPU map value, which the
 * verifier does not track by value. Kept in registers or on the stack, a best
 * score that is a known constant on some paths (initial, saturated) and a
 * position that differs on every path would stop the verifier from pruning
 * states, and its work would grow exponentially with the table size.
 */
static __always_inline void steer_select(const struct steer_table *t, steer_slot_fn slot_at,
					 void *ctx, int early_exit, struct steer_pick *best)
{
	__u32 n = t->n, i;

	best->score = STEER_U64_MAX;
	best->found = 0;
	best->pos = STEER_NO_PICK;
	best->slot = 0;
	best->ip6[0] = best->ip6[1] = best->ip6[2] = best->ip6[3] = 0;
	best->port = 0;
	best->scanned = 0;
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		const struct steer_entry *e;
		struct steer_slot *s;
		__u64 score;

		if (i >= n)
			break;
		e = &t->e[i];
		if (early_exit && best->found && e->base_wait_ns >= best->score)
			break;
		best->scanned = (__u16)(i + 1);
		s = slot_at(ctx, e->slot);
		if (!s || !steer_slot_eligible(s))
			continue;
		score = steer_score(e->base_wait_ns, steer_slot_inflight(s), e->ns_per_token);
		if (!best->found || score < best->score) {
			best->found = 1;
			best->score = score;
			best->pos = i;
			best->slot = e->slot;
			best->ip6[0] = e->ip6[0];
			best->ip6[1] = e->ip6[1];
			best->ip6[2] = e->ip6[2];
			best->ip6[3] = e->ip6[3];
			best->port = e->port;
		}
	}
}

static __always_inline __u64 steer_max_u64(__u64 a, __u64 b)
{
	return a > b ? a : b;
}

/* Busy time one pending token adds at a slot: ns_per_token x peers, from the
 * slot's cache of its table entry (steer_tree_build_at). */
static __always_inline __u64 steer_busy_unit(const struct steer_wire *w)
{
	return steer_sat_mul(w->cache_npt, w->cache_peers ? w->cache_peers : 1);
}

/* T new tokens queue at now behind what the backend is busy with, and it is
 * never busy longer than all its P pending tokens (T among them) take:
 *     busy_until = min(max(busy_until, now) + T x unit, now + P x unit) */
static __always_inline void steer_busy_add(struct steer_wire *w, __u64 now, __u64 tokens,
					   __u64 pending_tokens)
{
	__u64 unit = steer_busy_unit(w);
	__u64 grown =
		steer_sat_add(steer_max_u64(w->busy_until_ns, now), steer_sat_mul(tokens, unit));
	__u64 cap = steer_sat_add(now, steer_sat_mul(pending_tokens, unit));

	w->busy_until_ns = grown < cap ? grown : cap;
}

/*
 * A request's bytes were sent at now: the slot's pending bytes went from
 * before to after. Its new tokens are the change in pending tokens, so that
 * segments of any size add up to the request's tokens (steer_busy_add; P
 * counts the other routers' pending tokens too).
 */
static __always_inline void steer_busy_sent(struct steer_wire *w, __u64 now, __u64 before,
					    __u64 after)
{
	__u32 bytes_per_token = steer_bytes_per_token(w->bytes_per_token);
	__u64 p = after / bytes_per_token;

	steer_busy_add(w, now, p - before / bytes_per_token,
		       steer_sat_add(p, w->peer_pending_tokens));
}

/* Pending work dropped at now (a first response byte, an abandoned request,
 * a peer's answer): busy_until = min(busy_until, now + P x unit), P the
 * pending tokens left (the other routers' too). */
static __always_inline void steer_busy_cap(struct steer_wire *w, __u64 now)
{
	__u64 cap = now;

	/* Nothing left pending (the usual answer): idle from now, no division. */
	if (steer_wire_pending(w) || w->peer_pending_tokens) {
		__u32 bytes_per_token = steer_bytes_per_token(w->bytes_per_token);
		__u64 pending = steer_wire_pending_tokens(w, bytes_per_token);

		cap = steer_sat_add(now, steer_sat_mul(pending, steer_busy_unit(w)));
	}
	if (w->busy_until_ns > cap)
		w->busy_until_ns = cap;
}

/*
 * A first response byte at now (this router's, or a peer's report of one).
 * Without overload protection busy_until is only lowered to what the pending
 * tokens take (steer_busy_cap). With it (resync, STEER_TBL_OVERLOAD) it is
 * set to that: a worker that served slower than its published rate (waiting
 * for KV memory, prefilling a preempted request again) still has every
 * pending token to serve when it answers, and a wait bound must not admit on
 * time the estimate lost. Raising a key keeps every cached key below it.
 */
static __always_inline void steer_busy_answered(struct steer_wire *w, __u64 now)
{
	__u32 bytes_per_token = steer_bytes_per_token(w->bytes_per_token);

	if (!(w->cache_flags & STEER_TBL_OVERLOAD)) {
		steer_busy_cap(w, now);
		return;
	}
	w->busy_until_ns =
		steer_sat_add(now, steer_sat_mul(steer_wire_pending_tokens(w, bytes_per_token),
						 steer_busy_unit(w)));
}

/*
 * Another router reported (steer_peer_apply, under the service's lock) that
 * since its last report it sent sent tokens to this backend and saw answered
 * tokens answered. Its sends queue like this router's own (steer_busy_add),
 * its answers set the busy time like this router's (steer_busy_answered): the
 * fluid estimate of every router's requests, as one router would keep it
 * (docs/algorithm.md, "Several routers"). Pending tokens never go below 0.
 */
static __always_inline void steer_busy_peer(struct steer_wire *w, __u64 now, __u64 sent,
					    __u64 answered)
{
	if (sent) {
		__u32 bytes_per_token = steer_bytes_per_token(w->bytes_per_token);

		w->peer_pending_tokens = steer_sat_add(w->peer_pending_tokens, sent);
		steer_busy_add(w, now, sent, steer_wire_pending_tokens(w, bytes_per_token));
	}
	if (answered) {
		w->peer_pending_tokens -=
			answered < w->peer_pending_tokens ? answered : w->peer_pending_tokens;
		steer_busy_answered(w, now);
	}
}

/*
 * The time until which a fluid key holds the backend busy: busy_until, and
 * with the step cadence (STEER_TBL_STEP) the predicted end of the engine step
 * under way too. A max of until-times keeps the key's form (base + work +
 * max(until, now)), so the tree's reasoning (docs/algorithm.md, "busy-until") holds
 * with this in place of busy_until. 0 without accounting.
 */
static __always_inline __u64 steer_wire_until(const struct steer_wire *w, __u32 flags)
{
	if (!w)
		return 0;
	if (flags & STEER_TBL_STEP)
		return steer_max_u64(w->busy_until_ns, w->step_until_ns);
	return w->busy_until_ns;
}

/*
 * The step cadence: a response packet arrives at now on a socket whose
 * previous response packet since its last send came at last (0: this is the
 * first, the answer). Every streaming request running on the backend gets a
 * token at each step end, so the gap is one step of its engine. The slot's
 * step_ns and last_rx_ns are written here; the returned value is the new
 * step_until_ns, which the caller writes: at once when it does not fall
 * (the leaf's cached key stays a lower bound, like a send's), under the
 * service's lock with the leaf re-keyed when it does. A gap of 0 (the same
 * coarse clock tick: one step's bytes in several segments) is not a step.
 */
static __always_inline __u64 steer_step_next(struct steer_wire *w, __u64 last, __u64 now)
{
	if (last && now > last)
		w->step_ns = now - last;
	if (now > w->last_rx_ns)
		w->last_rx_ns = now;
	return steer_sat_add(w->last_rx_ns, w->step_ns);
}

/*
 * The sort key of a backend at time now (ns, CLOCK_MONOTONIC coarse):
 *   base + inflight x npt + max(until, now), until the slot's busy_until (and
 *   step_until with STEER_TBL_STEP) = its expected wait + now.
 * All saturating. A key only grows with now, so a key computed at an earlier
 * time is a lower bound of the key now (docs/algorithm.md, "Selection").
 */
static __always_inline __u64 steer_key(__u64 base_wait_ns, __u64 ns_per_token, __u64 inflight,
				       const struct steer_wire *w, __u32 flags, __u64 now)
{
	return steer_sat_add(steer_score(base_wait_ns, inflight, ns_per_token),
			     steer_max_u64(steer_wire_until(w, flags), now));
}

/* The expected wait a key stands for at now. */
static __always_inline __u64 steer_key_wait(__u64 key, __u64 now)
{
	if (key == STEER_U64_MAX || key < now)
		return key;
	return key - now;
}

/* ns from now until until; 0 once it has passed. */
static __always_inline __u64 steer_until_left(__u64 until, __u64 now)
{
	return until > now ? until - now : 0;
}

/* The backend's remaining busy time at now, ns (0 when idle or no
 * accounting), with the step under way when flags have STEER_TBL_STEP. */
static __always_inline __u64 steer_busy_left(const struct steer_wire *w, __u32 flags, __u64 now)
{
	return steer_until_left(steer_wire_until(w, flags), now);
}

/* ---- Overload (STEER_TBL_OVERLOAD) ---------------------------------------- */

/*
 * Added to an overloaded backend's key: 2^62 ns (146 years), above any real
 * wait. Overloaded backends then sort after every other one, among
 * themselves by wait, so that the tree needs no second eligibility: a pick
 * that carries it means every backend is overloaded.
 */
#define STEER_OVERLOAD_NS (1ULL << 62)

/*
 * 1 when the slot's live connections are at its bound (w->max_live, 0: none),
 * else 0. Live is signed (a release may count its close first) and small, so
 * the sign of live - bound says it, without a branch.
 */
static __always_inline __u64 steer_at_max_live(const struct steer_slot *s,
					       const struct steer_wire *w)
{
	__u64 bound = w ? w->max_live : 0;

	return (((__u64)(steer_slot_live(s) - (__s64)bound) >> 63) ^ 1) & ((0 - bound) >> 63);
}

/*
 * What overload adds to the slot's key: STEER_OVERLOAD_NS when it is flagged
 * overloaded (by its poll, or pushing back) or at its bound of live
 * connections, else 0. Without a branch: a tree build runs this for every
 * leaf, and each branch there would multiply the verifier's states. Flags
 * change with an epoch bump or a re-key, and so does a live count that
 * crosses its bound (a connect re-keys its leaf, a release below the bound
 * bumps the epoch), so every cached key stays at or under its key.
 */
static __always_inline __u64 steer_overload_ns(const struct steer_slot *s,
					       const struct steer_wire *w)
{
	__u64 f = (s->flags / STEER_SLOT_OVERLOADED) & 3; /* OVERLOADED, PUSHBACK */

	return ((f | (f >> 1) | steer_at_max_live(s, w)) & 1) << 62;
}

/*
 * Is a pick's expected wait over the bound (0: none)? 1 or 0. Without a
 * branch: every path of the kernel's pick reaches the check with its own
 * wait, and a branch on it would double the verifier's states of everything
 * after. Halved, both are below 2^63, so the sign of their difference is the
 * answer (to a nanosecond); a bound is below 2^63 (an hour at most).
 */
static __always_inline __u64 steer_over_wait_bound(__u64 wait, __u64 bound)
{
	return (((bound >> 1) - (wait >> 1)) >> 63) & ((0 - bound) >> 63);
}

/* Entry e's key at now, with its slot s (eligible) and accounting w (or
 * NULL), overload included. */
static __always_inline __u64 steer_entry_key(const struct steer_table *t,
					     const struct steer_entry *e,
					     const struct steer_slot *s, const struct steer_wire *w,
					     __u64 now)
{
	return steer_sat_add(steer_key(e->base_wait_ns, e->ns_per_token, steer_slot_inflight(s), w,
				       t->flags, now),
			     steer_overload_ns(s, w));
}

/* Entry e's expected wait at now, overload aside: what --worker-overload-wait
 * bounds. */
static __always_inline __u64 steer_entry_wait(const struct steer_table *t,
					      const struct steer_entry *e,
					      const struct steer_slot *s,
					      const struct steer_wire *w, __u64 now)
{
	return steer_key_wait(steer_key(e->base_wait_ns, e->ns_per_token, steer_slot_inflight(s), w,
					t->flags, now),
			      now);
}

/*
 * Cache affinity (steer_table.affinity): may a client's connect stay on the
 * backend of its last connect? e is that backend's entry in table t (NULL:
 * it is no longer in the table, or its slot has changed owner), s its slot, w
 * its accounting (or NULL); pick_wait is the least expected wait at now (the
 * pick's, overload included). It stays while it is admitted (not drained,
 * ejected or overloaded, its wait within --worker-overload-wait) and its
 * expected wait, in-flight work included, is at most pick_wait plus the
 * slack. *wait is its expected wait at now (0 when gone). Returns an enum
 * steer_aff_verdict: STEER_AFF_STAY or the reason it leaves.
 */
static __always_inline __u32 steer_affinity_judge(const struct steer_table *t,
						  const struct steer_entry *e,
						  const struct steer_slot *s,
						  const struct steer_wire *w, __u64 pick_wait,
						  __u64 now, __u64 *wait)
{
	*wait = 0;
	if (!e || !s || !steer_slot_eligible(s))
		return STEER_AFF_LEFT_GONE;
	*wait = steer_entry_wait(t, e, s, w, now);
	if (steer_overload_ns(s, w) || steer_over_wait_bound(*wait, t->wait_bound_ns))
		return STEER_AFF_LEFT_OVERLOAD;
	if (*wait > steer_sat_add(pick_wait, t->affinity_slack_ns))
		return STEER_AFF_LEFT_SLACK;
	return STEER_AFF_STAY;
}

/*
 * Cache affinity settled after the pick, without a branch on a wait (the
 * kernel's affinity_stays, steer_choose.bpf.h). state (STEER_AFF_HAS_KEY,
 * STEER_AFF_KNOWN), verdict and wait are the probe's: steer_affinity_judge of
 * the client's backend with the least wait aside (pick_wait STEER_U64_MAX),
 * so STEER_AFF_STAY there means a candidate. pick_wait is the pick's wait,
 * slack the table's. Returns 1 when the connect stays on the candidate, else
 * 0; *final is the verdict to count: STEER_AFF_NEW unless the client is
 * known, a candidate whose wait is over pick_wait + slack (saturated)
 * STEER_AFF_LEFT_SLACK, else the probe's. Exactly steer_affinity_judge's
 * comparison, to the nanosecond: wait > best is the borrow out of best - wait.
 */
static __always_inline __u64 steer_affinity_settle(__u64 pick_wait, __u64 slack, __u32 state,
						   __u32 verdict, __u64 wait, __u64 *final)
{
	__u64 known = (state / STEER_AFF_KNOWN) & 1;
	__u64 v = verdict & 7;
	__u64 cand = ((v ^ STEER_AFF_STAY) - 1) >> 63; /* v == STAY: 1 */
	__u64 sum = pick_wait + slack;
	/* saturated: the carry out of bit 63 sets every bit */
	__u64 best = sum | (0 - (((pick_wait & slack) | ((pick_wait | slack) & ~sum)) >> 63));
	__u64 over = ((~best & wait) | (~(best ^ wait) & (best - wait))) >> 63;

	/* NEW unless known; a candidate over the slack leaves for the slack */
	*final = (v + (cand & over)) & (0 - known);
	return known & cand & (over ^ 1);
}

/*
 * The exact reference of the kernel's pick at time now: argmin of steer_key
 * over the eligible entries, ties to the earlier position. Every key is at
 * least base_wait_ns + now, so once that reaches the best
 * key no later entry can win, not even a tie: the early exit is exact.
 * best->score is the winner's expected wait, best->key its key.
 */
static __always_inline void steer_select_at(const struct steer_table *t, steer_slot_fn slot_at,
					    void *ctx, steer_wire_fn wire_at, void *wctx, __u64 now,
					    int early_exit, struct steer_pick *best)
{
	__u32 n = t->n, i;

	best->score = STEER_U64_MAX;
	best->key = STEER_U64_MAX;
	best->found = 0;
	best->pos = STEER_NO_PICK;
	best->slot = 0;
	best->ip6[0] = best->ip6[1] = best->ip6[2] = best->ip6[3] = 0;
	best->port = 0;
	best->scanned = 0;
	for (i = 0; i < STEER_MAX_BACKENDS && i < n; i++) {
		const struct steer_entry *e = &t->e[i];
		struct steer_slot *s;
		__u64 key;

		if (early_exit && best->found && steer_sat_add(e->base_wait_ns, now) >= best->key)
			break;
		best->scanned = (__u16)(i + 1);
		s = slot_at(ctx, e->slot);
		if (!s || !steer_slot_eligible(s))
			continue;
		key = steer_entry_key(t, e, s, wire_at ? wire_at(wctx, e->slot) : 0, now);
		if (!best->found || key < best->key) {
			best->found = 1;
			best->key = key;
			best->score = steer_key_wait(key, now);
			best->pos = i;
			best->slot = e->slot;
			best->ip6[0] = e->ip6[0];
			best->ip6[1] = e->ip6[1];
			best->ip6[2] = e->ip6[2];
			best->ip6[3] = e->ip6[3];
			best->port = e->port;
		}
	}
}

/*
 * Stale-table fallback: the next backend round-robin from cursor, skipping
 * drained ones. Returns the table position or STEER_NO_PICK.
 */
static __always_inline __u32 steer_round_robin(const struct steer_table *t, steer_slot_fn slot_at,
					       void *ctx, __u64 cursor)
{
	__u32 n = t->n;
	__u32 start, i;

	if (n == 0 || n > STEER_MAX_BACKENDS)
		return STEER_NO_PICK;
	start = (__u32)(cursor % n);
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		__u32 pos;
		struct steer_slot *s;

		if (i >= n)
			break;
		pos = start + i;
		if (pos >= n)
			pos -= n;
		if (pos >= STEER_MAX_BACKENDS)
			break;
		s = slot_at(ctx, t->e[pos].slot);
		if (s && steer_slot_eligible(s))
			return pos;
	}
	return STEER_NO_PICK;
}

/* ---- The selection tree (steer_svc_tree), shared verbatim too ------------ */

/* The better of two tree nodes' winners: a is from the left (lower positions),
 * so a tie keeps a, as steer_select's strict < keeps the earlier position. */
static __always_inline __u16 steer_tree_better(const struct steer_svc_tree *tr, __u16 a, __u16 b)
{
	if (b == STEER_TREE_NONE)
		return a;
	if (a == STEER_TREE_NONE)
		return b;
	return tr->score[b & (STEER_MAX_BACKENDS - 1)] < tr->score[a & (STEER_MAX_BACKENDS - 1)]
		       ? b
		       : a;
}

/* Re-play the matches above leaf pos, after its score changed. */
static __always_inline void steer_tree_fix(struct steer_svc_tree *tr, __u32 pos)
{
	__u32 node = STEER_TREE_LEAF0 + (pos & (STEER_MAX_BACKENDS - 1)), i;

	for (i = 0; i < STEER_TREE_DEPTH; i++) {
		node = (node - 1) >> 1;
		tr->win[node & (2 * STEER_MAX_BACKENDS - 1)] = steer_tree_better(
			tr, tr->win[(2 * node + 1) & (2 * STEER_MAX_BACKENDS - 1)],
			tr->win[(2 * node + 2) & (2 * STEER_MAX_BACKENDS - 1)]);
	}
}

/*
 * Build the tree from table t and the live counters at time now: leaf p is
 * entry p when its slot resolves and is eligible, keyed steer_entry_key() at
 * now. With wire_at, each slot's accounting also learns where its leaf is and
 * what its entry says (cache_*), so that a message can re-key it later. Sets
 * tgen and epoch. (now = 0 gives lower bounds of the keys at any time.)
 */
static __always_inline void steer_tree_build_at(struct steer_svc_tree *tr,
						const struct steer_table *t, steer_slot_fn slot_at,
						void *ctx, steer_wire_fn wire_at, void *wctx,
						__u64 epoch, __u64 now, struct steer_tree_clock *ck)
{
	__u32 n = t->n, i, bytes_per_token = steer_bytes_per_token(t->bytes_per_token);

	/* In the clock's memory, not in a register: a register that is a
	 * constant on some paths and not on others would keep the verifier
	 * from pruning the loop's states. The keys below read the time from
	 * there too, for the same reason. */
	if (ck) {
		ck->ref_ns = now;
		ck->busy_min = STEER_U64_MAX;
	}

	/* Three plain loops rather than one with an "i < n" test inside: the
	 * verifier then walks each once, instead of once per value of n. */
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		tr->win[STEER_TREE_LEAF0 + i] = STEER_TREE_NONE;
	for (i = 0; i < n && i < STEER_MAX_BACKENDS; i++) {
		const struct steer_entry *e = &t->e[i];
		struct steer_slot *s = slot_at(ctx, e->slot);
		struct steer_wire *w = wire_at ? wire_at(wctx, e->slot) : 0;

		if (w) {
			w->cache_tgen = t->generation;
			w->cache_base_ns = e->base_wait_ns;
			w->cache_npt = e->ns_per_token;
			w->cache_pos = (__u16)i;
			w->bytes_per_token = (__u16)bytes_per_token;
			w->cache_credit = t->credit_tokens;
			w->cache_peers = e->peers ? e->peers : 1;
			w->cache_flags = t->flags;
		}
		if (!s || !steer_slot_eligible(s))
			continue;
		tr->score[i] = steer_entry_key(t, e, s, w, ck ? ck->ref_ns : now);
		tr->win[STEER_TREE_LEAF0 + i] = (__u16)i;
		if (ck && steer_wire_until(w, t->flags) > now && tr->score[i] < ck->busy_min)
			ck->busy_min = tr->score[i];
	}
	for (i = 0; i < STEER_TREE_LEAF0; i++) {
		__u32 node = STEER_TREE_LEAF0 - 1 - i;

		tr->win[node] = steer_tree_better(tr, tr->win[2 * node + 1], tr->win[2 * node + 2]);
	}
	tr->n = n;
	tr->tgen = t->generation;
	tr->epoch = epoch;
}

/* The tree at time 0 (lower bounds of the keys at any time), without the
 * request accounting's caches: the tests' and the simulator's. */
static __always_inline void steer_tree_build(struct steer_svc_tree *tr, const struct steer_table *t,
					     steer_slot_fn slot_at, void *ctx, __u64 epoch)
{
	steer_tree_build_at(tr, t, slot_at, ctx, 0, 0, epoch, 0, 0);
}

/* The table position the tree picks, or STEER_NO_PICK. */
static __always_inline __u32 steer_tree_pick(const struct steer_svc_tree *tr)
{
	__u16 w = tr->win[0];

	return w == STEER_TREE_NONE ? STEER_NO_PICK : w;
}

/* Record that position pos's slot now has inflight tokens in flight (the
 * time-free tree of steer_tree_build). */
static __always_inline void
steer_tree_credit(struct steer_svc_tree *tr, const struct steer_table *t, __u32 pos, __u64 inflight)
{
	const struct steer_entry *e = &t->e[pos & (STEER_MAX_BACKENDS - 1)];

	tr->score[pos & (STEER_MAX_BACKENDS - 1)] =
		steer_score(e->base_wait_ns, inflight, e->ns_per_token);
	steer_tree_fix(tr, pos);
}

static __always_inline void steer_tree_set(struct steer_svc_tree *tr, __u32 pos, __u64 key)
{
	tr->score[pos & (STEER_MAX_BACKENDS - 1)] = key;
	steer_tree_fix(tr, pos);
}

/* Leaf pos now holds key, computed at the tree's reference time with the
 * slot busy until busy (steer_wire_until): re-play its matches, and lower
 * busy_min when the leaf is keyed busy (busy > ck->ref_ns). */
static __always_inline void steer_tree_key_leaf(struct steer_svc_tree *tr, __u32 pos, __u64 key,
						__u64 busy, struct steer_tree_clock *ck)
{
	if (busy > ck->ref_ns && key < ck->busy_min)
		ck->busy_min = key;
	steer_tree_set(tr, pos, key);
}

/* Re-key the leaf of a slot whose work changed between connects (a request
 * answered or abandoned, a credit withdrawn), from its cache, at the tree's
 * reference time. The cache says where the leaf is, valid while the tree is
 * built from the table the cache is from: a slot not in that tree (not in its
 * table, or not eligible) has no leaf to fix, and the next build keys it. */
static __always_inline void steer_tree_rekey(struct steer_svc_tree *tr, const struct steer_slot *s,
					     const struct steer_wire *w,
					     struct steer_tree_clock *ck)
{
	__u32 pos = w->cache_pos & (STEER_MAX_BACKENDS - 1);

	if (w->cache_tgen != tr->tgen || !tr->tgen || tr->win[STEER_TREE_LEAF0 + pos] != pos)
		return;
	steer_tree_key_leaf(
		tr, pos,
		steer_sat_add(steer_key(w->cache_base_ns, w->cache_npt, steer_slot_inflight(s), w,
					w->cache_flags, ck->ref_ns),
			      steer_overload_ns(s, w)),
		steer_wire_until(w, w->cache_flags), ck);
}

/*
 * A copy of x that the BPF verifier does not link to x: comparing the copy
 * narrows the copy's range only, so that x reaches a later join with the same
 * range on every path and the verifier's states there can be pruned. A no-op
 * elsewhere.
 */
#ifdef __bpf__
#define STEER_UNLINKED(x)                            \
	({                                           \
		__u64 __c = (x);                     \
		asm volatile("%0 ^= 0" : "+r"(__c)); \
		__c;                                 \
	})
#else
#define STEER_UNLINKED(x) (x)
#endif

/* Leaves re-keyed at most per connect before the tree is rebuilt instead. */
#define STEER_TREE_REFRESH 4

/*
 * The tree's pick at time now (>= ck->ref_ns), exactly steer_select_at()'s at
 * now, and its expected wait at now in tr->pick_wait_ns (its key less now,
 * overload included) (docs/algorithm.md, "busy-until"). Every leaf's cached key is its key at the
 * reference time ref, or lower (a send raises a key lazily). The root r is
 * re-keyed at ref until its cached key is current; then it is the answer when
 *  - the key is saturated;
 *  - r is keyed busy (until > ref, steer_wire_until) and still busy at now: its key is
 *    exact, and every other key can only have grown since ref;
 *  - r is keyed idle: idle leaves keep their order as time passes, and r's
 *    key at now (its time-free part + now) is below busy_min, under every
 *    leaf keyed busy.
 * Otherwise (a busy root whose time ran out, a busy leaf that may have come
 * to the front, STEER_TREE_REFRESH re-keys, a new table or epoch, a root no
 * longer eligible) the tree is rebuilt at now, which makes every key exact.
 * So idle backends cost nothing as time passes: a rebuild happens only when
 * the order may really have changed.
 */
static __always_inline __u32 steer_tree_pick_at(struct steer_svc_tree *tr,
						const struct steer_table *t, steer_slot_fn slot_at,
						void *ctx, steer_wire_fn wire_at, void *wctx,
						__u64 epoch, __u64 now, struct steer_tree_clock *ck)
{
	int built = tr->tgen == t->generation && tr->epoch == epoch;
	__u32 pos = steer_tree_pick(tr), i;
	__u64 at = STEER_UNLINKED(now); /* compared below; now itself is for the build */

	for (i = 0; built && i < STEER_TREE_REFRESH; i++) {
		const struct steer_entry *e;
		const struct steer_wire *w;
		struct steer_slot *s;
		__u64 key, busy, work;

		if (pos >= STEER_MAX_BACKENDS)
			return STEER_NO_PICK;
		e = &t->e[pos & (STEER_MAX_BACKENDS - 1)];
		s = slot_at(ctx, e->slot);
		if (!s || !steer_slot_eligible(s))
			break; /* a drain or an ejection ahead of its epoch bump */
		w = wire_at ? wire_at(wctx, e->slot) : 0;
		busy = steer_wire_until(w, t->flags);
		/* steer_entry_key, with its time-free part kept for the idle test */
		work = steer_sat_add(
			steer_score(e->base_wait_ns, steer_slot_inflight(s), e->ns_per_token),
			steer_overload_ns(s, w));
		key = steer_sat_add(work, steer_max_u64(busy, ck->ref_ns));
		if (key != tr->score[pos & (STEER_MAX_BACKENDS - 1)]) {
			steer_tree_key_leaf(tr, pos, key, busy, ck);
			pos = steer_tree_pick(tr);
			continue;
		}
		if (key == STEER_U64_MAX) {
			tr->pick_wait_ns = key;
			return pos;
		}
		if (busy > ck->ref_ns) {
			if (busy >= at) {
				tr->pick_wait_ns = key - at; /* key = work + busy, busy >= at */
				return pos;
			}
			break; /* its busy time ran out: the order may have changed */
		}
		if (steer_sat_add(work, at) < ck->busy_min) {
			tr->pick_wait_ns = work; /* idle */
			return pos;
		}
		break; /* a backend keyed busy may be ahead by now */
	}
	steer_tree_build_at(tr, t, slot_at, ctx, wire_at, wctx, epoch, now, ck);
	pos = steer_tree_pick(tr);
	/* every key is at now after a build */
	/* Every key is at least now after a build at now; without a branch (for
	 * the verifier's states), and meaningless when there is no pick. */
	tr->pick_wait_ns = tr->score[pos & (STEER_MAX_BACKENDS - 1)] - now;
	return pos;
}

#endif /* STEER_SELECT_H */
