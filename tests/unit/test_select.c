// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_select.c - the kernel's selection math, compiled from the very header
 * the BPF program includes, checked against independent references written
 * here with 128-bit arithmetic and a plain full scan.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "steer_common.h"
#include "tap.h"

static struct steer_slot slots[STEER_MAX_SLOTS];

static struct steer_slot *slot_at(void *ctx, __u32 slot)
{
	(void)ctx;
	return slot < STEER_MAX_SLOTS ? &slots[slot] : NULL;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* Values that exercise the edges: small, 32-bit boundary, huge. */
static uint64_t edgy(void)
{
	switch (rnd() % 6) {
	case 0:
		return rnd() % 1000;
	case 1:
		return (1ULL << 32) - 1 + (rnd() % 3);
	case 2:
		return STEER_U64_MAX - (rnd() % 3);
	case 3:
		return rnd() >> (rnd() % 64);
	case 4:
		return rnd() & 0xffffffffULL;
	default:
		return rnd();
	}
}

static uint64_t ref_sat(unsigned __int128 v)
{
	return v > STEER_U64_MAX ? STEER_U64_MAX : (uint64_t)v;
}

static void test_saturating_add_matches_128bit(void)
{
	int i;

	for (i = 0; i < 200000; i++) {
		uint64_t a = edgy(), b = edgy();
		uint64_t want = ref_sat((unsigned __int128)a + b);

		CHECK(steer_sat_add(a, b) == want, "a=%llu b=%llu", (unsigned long long)a,
		      (unsigned long long)b);
	}
	CHECK(steer_sat_add(STEER_U64_MAX, 1) == STEER_U64_MAX, "max+1");
	CHECK(steer_sat_add(0, 0) == 0, "0+0");
}

static void test_saturating_mul_matches_128bit(void)
{
	int i;

	for (i = 0; i < 200000; i++) {
		uint64_t a = edgy(), b = edgy();
		uint64_t want = ref_sat((unsigned __int128)a * b);

		CHECK(steer_sat_mul(a, b) == want, "a=%llu b=%llu got %llu want %llu",
		      (unsigned long long)a, (unsigned long long)b,
		      (unsigned long long)steer_sat_mul(a, b), (unsigned long long)want);
	}
	CHECK(steer_sat_mul(1ULL << 32, 1ULL << 32) == STEER_U64_MAX, "2^64 saturates");
	CHECK(steer_sat_mul(1ULL << 32, (1ULL << 32) - 1) == (1ULL << 32) * ((1ULL << 32) - 1),
	      "just below 2^64 is exact");
	CHECK(steer_sat_mul(STEER_U64_MAX, 0) == 0, "x*0");
	CHECK(steer_sat_mul(STEER_U64_MAX, 1) == STEER_U64_MAX, "x*1");
}

static void test_score_saturates(void)
{
	CHECK(steer_score(STEER_U64_MAX - 5, 1, 10) == STEER_U64_MAX, "base near max");
	CHECK(steer_score(10, STEER_U64_MAX, 2) == STEER_U64_MAX, "huge in-flight");
	CHECK(steer_score(7, 3, 5) == 22, "7 + 3*5");
}

/* Independent reference: full scan, exact 128-bit scores, first minimum. */
static int ref_argmin(const struct steer_table *t)
{
	unsigned __int128 best = 0;
	int pos = -1;
	__u32 i;

	for (i = 0; i < t->n; i++) {
		const struct steer_slot *s = &slots[t->e[i].slot];
		unsigned __int128 sc;

		if (s->flags & STEER_SLOT_DRAINED)
			continue;
		sc = ref_sat((unsigned __int128)t->e[i].base_wait_ns +
			     ref_sat((unsigned __int128)s->inflight_tokens * t->e[i].ns_per_token));
		if (pos < 0 || sc < best) {
			best = sc;
			pos = (int)i;
		}
	}
	return pos;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void random_table(struct steer_table *t, __u32 n, int equal_bases)
{
	uint64_t bases[STEER_MAX_BACKENDS];
	__u32 i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < n; i++)
		bases[i] = equal_bases ? 1000 : (rnd() % 4 ? rnd() % 5000000 : edgy());
	qsort(bases, n, sizeof(bases[0]), cmp_u64);
	for (i = 0; i < n; i++) {
		t->e[i].base_wait_ns = bases[i];
		t->e[i].ns_per_token = rnd() % 8 ? 1 + rnd() % 2000000 : edgy();
		t->e[i].slot = i;
		t->e[i].ip6[3] = i;
		slots[i].inflight_tokens = rnd() % 3 ? rnd() % 100000 : edgy();
		slots[i].flags = rnd() % 10 == 0 ? STEER_SLOT_DRAINED : 0;
	}
	t->n = n;
}

static void test_early_exit_never_changes_the_answer(void)
{
	static struct steer_table t;
	int round;

	for (round = 0; round < 20000; round++) {
		struct steer_pick early, full;
		__u32 n = 1 + (__u32)(rnd() % STEER_MAX_BACKENDS);
		int want;

		random_table(&t, n, round % 7 == 0);
		steer_select(&t, slot_at, NULL, 1, &early);
		steer_select(&t, slot_at, NULL, 0, &full);
		want = ref_argmin(&t);
		CHECK(early.found == (want >= 0), "round %d found=%u want=%d", round, early.found,
		      want);
		if (want < 0)
			continue;
		CHECK(early.pos == (__u32)want && full.pos == (__u32)want,
		      "round %d n=%u early=%u full=%u ref=%d", round, n, early.pos, full.pos, want);
		CHECK(early.score == full.score, "round %d scores differ", round);
		CHECK(early.ip6[3] == t.e[want].ip6[3] && early.slot == t.e[want].slot,
		      "round %d copied fields", round);
		CHECK(early.scanned <= full.scanned, "round %d scanned more", round);
	}
}

static void test_early_exit_stops_at_the_bound(void)
{
	static struct steer_table t;
	struct steer_pick p;
	__u32 i;

	memset(&t, 0, sizeof(t));
	memset(slots, 0, sizeof(slots));
	for (i = 0; i < 200; i++) {
		t.e[i].base_wait_ns = 1000 * (i + 1);
		t.e[i].ns_per_token = 1;
		t.e[i].slot = i;
	}
	t.n = 200;
	steer_select(&t, slot_at, NULL, 1, &p);
	/* Entry 0 scores 1000; entry 1's base is 2000 >= 1000: stop after 1. */
	CHECK(p.pos == 0 && p.scanned == 1, "pos=%u scanned=%u", p.pos, p.scanned);
	slots[0].inflight_tokens = 2500; /* entry 0 now scores 3500; entry 2 (3000) ends it */
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(p.pos == 1 && p.score == 2000 && p.scanned == 2, "pos=%u score=%llu scanned=%u",
	      p.pos, (unsigned long long)p.score, p.scanned);
}

static void test_ties_go_to_the_earlier_position(void)
{
	static struct steer_table t;
	struct steer_pick p;
	__u32 i;

	memset(&t, 0, sizeof(t));
	memset(slots, 0, sizeof(slots));
	for (i = 0; i < 5; i++) {
		t.e[i].base_wait_ns = 500;
		t.e[i].ns_per_token = 10;
		t.e[i].slot = 10 + i;
	}
	t.n = 5;
	slots[10].inflight_tokens = 1; /* 510 */
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(p.pos == 1, "pos=%u", p.pos);
	steer_select(&t, slot_at, NULL, 0, &p);
	CHECK(p.pos == 1, "full scan pos=%u", p.pos);
	/* All saturated: still the first one, found. */
	for (i = 0; i < 5; i++) {
		t.e[i].base_wait_ns = STEER_U64_MAX;
		slots[10 + i].inflight_tokens = 0;
	}
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(p.found && p.pos == 0 && p.score == STEER_U64_MAX, "found=%u pos=%u", p.found, p.pos);
}

static void test_drained_and_empty(void)
{
	static struct steer_table t;
	struct steer_pick p;

	memset(&t, 0, sizeof(t));
	memset(slots, 0, sizeof(slots));
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(!p.found, "empty table picks nothing");
	t.n = 2;
	t.e[0].slot = 1;
	t.e[1].slot = 2;
	slots[1].flags = STEER_SLOT_DRAINED;
	slots[2].flags = STEER_SLOT_DRAINED;
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(!p.found, "all drained picks nothing");
	slots[2].flags = 0;
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(p.found && p.pos == 1, "the undrained one");
	t.e[1].slot = STEER_MAX_SLOTS + 7; /* out of range: skipped, not read */
	steer_select(&t, slot_at, NULL, 1, &p);
	CHECK(!p.found, "bad slot skipped");
}

static void test_round_robin_cycles_and_skips_drained(void)
{
	static struct steer_table t;
	__u64 cursor;
	__u32 i;

	memset(&t, 0, sizeof(t));
	memset(slots, 0, sizeof(slots));
	t.n = 4;
	for (i = 0; i < 4; i++)
		t.e[i].slot = i;
	for (cursor = 0; cursor < 8; cursor++)
		CHECK(steer_round_robin(&t, slot_at, NULL, cursor) == cursor % 4, "cursor %llu",
		      (unsigned long long)cursor);
	slots[2].flags = STEER_SLOT_DRAINED;
	CHECK(steer_round_robin(&t, slot_at, NULL, 2) == 3, "skips drained");
	CHECK(steer_round_robin(&t, slot_at, NULL, STEER_U64_MAX) == 3,
	      "cursor wraps: 2^64-1 %% 4 = 3");
	t.n = 0;
	CHECK(steer_round_robin(&t, slot_at, NULL, 0) == STEER_NO_PICK, "empty");
}

/*
 * Water-filling: repeated select + credit against a reference that tracks
 * in-flight work in 128-bit and picks the first minimum.
 */
static void test_water_filling_matches_reference(void)
{
	static struct steer_table t;
	unsigned __int128 ref_inflight[8] = { 0 };
	const __u32 credit = 1024;
	int step;
	__u32 i;

	memset(&t, 0, sizeof(t));
	memset(slots, 0, sizeof(slots));
	t.n = 4;
	/* base waits 0, 0.2 ms, 0.3 ms, 2 ms; throughputs 2000, 4000, 1000, 8000 tok/s */
	uint64_t base[4] = { 0, 200000, 300000, 2000000 };
	uint64_t npt[4] = { 500000, 250000, 1000000, 125000 };
	for (i = 0; i < 4; i++) {
		t.e[i].base_wait_ns = base[i];
		t.e[i].ns_per_token = npt[i];
		t.e[i].slot = i;
	}
	for (step = 0; step < 200; step++) {
		struct steer_pick p;
		unsigned __int128 best = 0;
		int want = -1;

		for (i = 0; i < 4; i++) {
			unsigned __int128 sc = base[i] + ref_inflight[i] * npt[i];

			if (want < 0 || sc < best) {
				best = sc;
				want = (int)i;
			}
		}
		steer_select(&t, slot_at, NULL, 1, &p);
		CHECK(p.found && p.pos == (__u32)want, "step %d: got %u want %d", step, p.pos,
		      want);
		ref_inflight[want] += credit;
		__sync_fetch_and_add(&slots[p.slot].inflight_tokens, credit);
	}
}

/*
 * The kernel's selection tree (steer_svc_tree), driven the way connect4
 * drives it: build from the table and counters, pick the root, credit it,
 * replay its path; rebuild when a drain flag or a counter changes behind its
 * back. At every step its pick must be steer_select's, on random tables of
 * every size, with saturated and equal scores, drains and undrains.
 */
static void test_tree_picks_what_steer_select_picks(void)
{
	static struct steer_table t;
	static struct steer_svc_tree tr;
	int round, step, bad = 0;

	for (round = 0; round < 400 && !bad; round++) {
		__u32 n = round % 50 == 0 ? STEER_MAX_BACKENDS
					  : 1 + (__u32)(rnd() % STEER_MAX_BACKENDS);
		__u32 credit = rnd() % 4 ? 1024 : (__u32)edgy();

		random_table(&t, n, round % 5 == 0);
		t.generation = (__u64)round + 1;
		memset(&tr, 0xa5, sizeof(tr)); /* whatever a previous table left */
		steer_tree_build(&tr, &t, slot_at, NULL, 7);
		for (step = 0; step < 300 && !bad; step++) {
			struct steer_pick want;
			__u32 got = steer_tree_pick(&tr);

			steer_select(&t, slot_at, NULL, 0, &want);
			if ((want.found ? want.pos : STEER_NO_PICK) != got) {
				bad = 1;
				CHECK(0, "round %d step %d n=%u: tree %u, steer_select %u", round,
				      step, n, got, want.found ? want.pos : STEER_NO_PICK);
			}
			if (got == STEER_NO_PICK) {
				slots[t.e[rnd() % n].slot].flags = 0; /* undrain one, rebuild */
				steer_tree_build(&tr, &t, slot_at, NULL, 7);
				continue;
			}
			slots[t.e[got].slot].inflight_tokens += credit;
			steer_tree_credit(&tr, &t, got, steer_slot_inflight(&slots[t.e[got].slot]));
			if (rnd() % 40 == 0) { /* a drain flag, a daemon drain: rebuild */
				__u32 k = (__u32)(rnd() % n);

				slots[t.e[k].slot].flags ^= STEER_SLOT_DRAINED;
				/* and a fast ejection, or a readmission */
				slots[t.e[rnd() % n].slot].fails =
					rnd() % 2 ? STEER_FAIL_EJECT
						  : (__u32)(rnd() % STEER_FAIL_EJECT);
				slots[t.e[rnd() % n].slot].drained_tokens +=
					steer_slot_inflight(&slots[t.e[k].slot]) / 2;
				steer_tree_build(&tr, &t, slot_at, NULL, 8);
			}
		}
		memset(slots, 0, sizeof(slots));
	}
	CHECK(!bad, "see above");
}

static struct steer_wire wires[STEER_MAX_SLOTS];
/* Per slot, one socket's last response packet (the step cadence's gaps). */
static uint64_t sock_last[STEER_MAX_SLOTS];

static struct steer_wire *wire_at(void *ctx, __u32 slot)
{
	(void)ctx;
	return slot < STEER_MAX_SLOTS ? &wires[slot] : NULL;
}

/* ---- The fluid estimate: busy-until ------------------------------------------ */

/* An independent reference: argmin over eligible entries of
 * base + inflight x npt + max(busy_until, now) (with STEER_TBL_STEP,
 * max(busy_until, step_until, now)), in 128 bits, saturated at the
 * end (the sum of saturated non-negative terms saturates the same). */
static __u32 ref_fluid_pick(const struct steer_table *t, uint64_t now)
{
	unsigned __int128 best = 0;
	__u32 i, pos = STEER_NO_PICK;

	for (i = 0; i < t->n; i++) {
		const struct steer_entry *e = &t->e[i];
		const struct steer_slot *s = &slots[e->slot];
		const struct steer_wire *w = &wires[e->slot];
		uint64_t busy = w->busy_until_ns;
		unsigned __int128 k;

		if ((t->flags & STEER_TBL_STEP) && w->step_until_ns > busy)
			busy = w->step_until_ns;
		if (!steer_slot_eligible(s))
			continue;
		k = (unsigned __int128)e->base_wait_ns +
		    (unsigned __int128)steer_slot_inflight(s) * e->ns_per_token +
		    (busy > now ? busy : now);
		if (k > STEER_U64_MAX)
			k = STEER_U64_MAX;
		if (pos == STEER_NO_PICK || k < best) {
			best = k;
			pos = i;
		}
	}
	return pos;
}

/* Uniform in [0, x]. */
static uint64_t upto(uint64_t x)
{
	return x == STEER_U64_MAX ? rnd() : rnd() % (x + 1);
}

/*
 * A streamed response's packets on the step cadence, as the kernel's ingress
 * program handles them (bpf/steer_wire.bpf.c wire_step): a socket's first
 * packet after its send (the answer) only starts a gap, a later one measures
 * a step; step_until is written at once when it does not fall (the leaf
 * stays lazy) and under the lock with a re-key when it does.
 */
static void step_packet(struct steer_svc_tree *tr, struct steer_tree_clock *ck,
			const struct steer_slot *sl, struct steer_wire *w, __u32 slot, uint64_t now)
{
	uint64_t last = rnd() % 3 ? sock_last[slot] : 0, until;

	until = steer_step_next(w, last, now);
	if (until >= w->step_until_ns) {
		w->step_until_ns = until;
	} else {
		w->step_until_ns = until;
		steer_tree_rekey(tr, sl, w, ck);
	}
	sock_last[slot] = now;
}

/* The busy-until rule on one slot, by hand: requests queue behind each other
 * at peers x ns_per_token per token, never beyond the pending tokens' time,
 * and an answer caps it at what is still pending. */
static void test_busy_until_rule(void)
{
	struct steer_wire w = { .cache_npt = 1000, .bytes_per_token = 4, .cache_peers = 2 };
	uint64_t t0 = 5000000000ULL;

	/* 400 bytes = 100 tokens at an idle backend: 100 x 2 x 1000 ns. */
	w.sent_bytes = 400;
	steer_busy_sent(&w, t0, 0, 400);
	CHECK(w.busy_until_ns == t0 + 200000, "idle: %llu", (unsigned long long)w.busy_until_ns);
	CHECK(steer_busy_left(&w, 0, t0 + 50000) == 150000, "drains in time");
	/* 50 tokens more, 100 us later: they queue behind the first (100 us
	 * left) -> t0 + 100 us + 100 us + 100 us; the cap (150 pending tokens
	 * from now = 300 us) is not reached. */
	w.sent_bytes = 600;
	steer_busy_sent(&w, t0 + 100000, 400, 600);
	CHECK(w.busy_until_ns == t0 + 300000, "queued: %llu",
	      (unsigned long long)(w.busy_until_ns - t0));
	/* The first request answered (100 tokens): 50 pending -> at most 100 us. */
	w.answered_bytes = 400;
	steer_busy_cap(&w, t0 + 150000);
	CHECK(w.busy_until_ns == t0 + 250000, "capped at the answer: %llu",
	      (unsigned long long)(w.busy_until_ns - t0));
	/* Everything answered: idle at once. */
	w.answered_bytes = 600;
	steer_busy_cap(&w, t0 + 160000);
	CHECK(steer_busy_left(&w, 0, t0 + 160000) == 0, "idle when all is answered");
	/* A request sent long after the backend went idle starts from now; the
	 * send's own cap is its pending tokens. Segments of any size add the
	 * request's tokens exactly (the change in pending tokens). */
	w.sent_bytes = 601;
	steer_busy_sent(&w, t0 + 10000000, 0, 1);
	w.sent_bytes = 603;
	steer_busy_sent(&w, t0 + 10000000, 1, 3);
	w.sent_bytes = 605;
	steer_busy_sent(&w, t0 + 10000000, 3, 5);
	CHECK(w.busy_until_ns == t0 + 10000000 + 2000, "5 bytes = 1 token: %llu",
	      (unsigned long long)(w.busy_until_ns - t0 - 10000000));
	/* The score's key: base + credits x npt + max(busy, now). */
	CHECK(steer_key(7, 3, 2, &w, 0, t0 + 10000000) == 7 + 6 + t0 + 10002000, "key busy");
	CHECK(steer_key(7, 3, 2, &w, 0, t0 + 20000000) == 7 + 6 + t0 + 20000000, "key idle");
	CHECK(steer_key_wait(7 + 6 + t0 + 10002000, t0 + 10000000) == 7 + 6 + 2000, "wait");
	/* An answer: capped without overload protection; with it (resync) set to
	 * the pending tokens' time from now, also when the estimate ran out
	 * before the backend served them. */
	w.answered_bytes = 605;
	w.sent_bytes = 1005; /* 100 tokens pending, sent long ago */
	w.busy_until_ns = t0 + 20000000;
	steer_busy_answered(&w, t0 + 30000000);
	CHECK(w.busy_until_ns == t0 + 20000000, "no protection: capped only, %llu",
	      (unsigned long long)(w.busy_until_ns - t0));
	w.cache_flags = STEER_TBL_OVERLOAD;
	steer_busy_answered(&w, t0 + 30000000);
	CHECK(w.busy_until_ns == t0 + 30000000 + 200000, "resync: %llu",
	      (unsigned long long)(w.busy_until_ns - t0));
	w.busy_until_ns = t0 + 90000000; /* above: lowered as a cap */
	steer_busy_answered(&w, t0 + 30000000);
	CHECK(w.busy_until_ns == t0 + 30000000 + 200000, "resync lowers too: %llu",
	      (unsigned long long)(w.busy_until_ns - t0));
}

/*
 * The tree against the reference with time: random connects
 * (re-key the root until current, steer_tree_pick_at, then credit), request
 * bytes sent (busy_until grows, the leaf re-keyed at that time), answers and
 * abandons (busy_until capped, the real size credited), daemon drains and
 * drain flags (epoch bumps), and time steps that let busy-until times pass
 * each other. At every connect the tree's pick must be steer_select_at's at
 * the same now, full scan and early exit, and the 128-bit reference's.
 */
static void test_tree_with_busy_until_picks_what_steer_select_at_picks(void)
{
	static struct steer_table t;
	static struct steer_svc_tree tr;
	int round, step, bad = 0;
	long rebuilds = 0, connects = 0;

	for (round = 0; round < 300 && !bad; round++) {
		__u32 n = round % 50 == 0 ? STEER_MAX_BACKENDS
					  : 1 + (__u32)(rnd() % STEER_MAX_BACKENDS);
		uint64_t now = 1000000000ULL + rnd() % 1000000000000ULL, epoch = 7;
		struct steer_tree_clock ck = { 0, STEER_U64_MAX };
		__u32 i, bytes_per_token;

		random_table(&t, n, round % 5 == 0);
		/* Every other round with the step cadence: response packets then
		 * move step_until, raised lazily, lowered with a re-key. */
		t.flags = (round % 2 ? STEER_TBL_STEP : 0) |
			  (round % 3 == 0 ? STEER_TBL_OVERLOAD : 0);
		memset(sock_last, 0, sizeof(sock_last));
		for (i = 0; i < n; i++) {
			t.e[i].ns_per_token = rnd() % 16 ? 1 + rnd() % 20000 : edgy();
			t.e[i].peers = (__u16)(rnd() % 4);
			slots[i].inflight_tokens = rnd() % 3 ? rnd() % 1000 : edgy();
		}
		t.credit_tokens = 1024;
		t.bytes_per_token = (__u16)(round % 3 == 0 ? 0 : 1 + rnd() % 8);
		bytes_per_token = steer_bytes_per_token(t.bytes_per_token);
		t.generation = (__u64)round + 1;
		memset(&tr, 0xa5, sizeof(tr));
		tr.tgen = 0;
		for (step = 0; step < 600 && !bad; step++) {
			__u32 k = (__u32)(rnd() % n), got, want_ref;
			struct steer_wire *w = &wires[t.e[k].slot];
			struct steer_slot *sl = &slots[t.e[k].slot];
			struct steer_pick want, early;
			__u64 before, x;

			switch (rnd() % 8) {
			case 0:
			case 1: /* a connect at now */
				if (tr.tgen != t.generation || tr.epoch != epoch)
					rebuilds++;
				got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL,
							 epoch, now, &ck);
				connects++;
				steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 0, &want);
				steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 1, &early);
				want_ref = ref_fluid_pick(&t, now);
				if ((want.found ? want.pos : STEER_NO_PICK) != got ||
				    early.found != want.found || early.pos != want.pos ||
				    want_ref != got) {
					bad = 1;
					CHECK(0,
					      "round %d step %d n=%u: tree %u, full %u, early %u, "
					      "128-bit %u",
					      round, step, n, got,
					      want.found ? want.pos : STEER_NO_PICK,
					      early.found ? early.pos : STEER_NO_PICK, want_ref);
					break;
				}
				if (got == STEER_NO_PICK) {
					sl->flags = 0;
					epoch++;
					break;
				}
				slots[t.e[got].slot].inflight_tokens += t.credit_tokens;
				steer_tree_key_leaf(
					&tr, got,
					steer_entry_key(&t, &t.e[got], &slots[t.e[got].slot],
							&wires[t.e[got].slot], ck.ref_ns),
					steer_wire_until(&wires[t.e[got].slot], t.flags), &ck);
				break;
			case 2: /* request bytes sent at now */
				before = steer_wire_pending(w);
				x = rnd() % 8 ? rnd() % 20000 : rnd() % 4000000;
				w->sent_bytes += x;
				steer_busy_sent(w, now, before, before + x);
				/* Only a first send that withdraws its credit re-keys
				 * the leaf; any other send leaves it lazy, as the
				 * kernel does (its key only rose). */
				if (rnd() % 2 && steer_slot_inflight(sl) >= t.credit_tokens) {
					sl->drained_tokens += t.credit_tokens;
					steer_tree_rekey(&tr, sl, w, &ck);
				}
				break;
			case 3: /* an answer, or an abandoned request */
				x = upto(steer_wire_pending(w));
				w->answered_bytes += x;
				if (rnd() % 2)
					sl->inflight_tokens += x / bytes_per_token;
				if (rnd() % 2) /* an answer (resync with STEER_TBL_OVERLOAD) */
					steer_busy_answered(w, now);
				else /* abandoned */
					steer_busy_cap(w, now);
				steer_tree_rekey(&tr, sl, w, &ck);
				break;
			case 4: /* the daemon drains credits: bumps the epoch */
				sl->drained_tokens += upto(steer_slot_inflight(sl));
				epoch++;
				break;
			case 5: /* an operator drain flag flips: bumps the epoch */
				if (rnd() % 4 == 0) {
					sl->flags ^= STEER_SLOT_DRAINED;
					epoch++;
				}
				break;
			case 6: /* a response packet at now (the step cadence) */
				if (t.flags & STEER_TBL_STEP) {
					step_packet(&tr, &ck, sl, w, t.e[k].slot, now);
					break;
				}
				/* fallthrough */
			default: /* time passes */
				now += rnd() % 4 ? rnd() % 3000000 : rnd() % 300000000;
				(void)bytes_per_token;
			}
		}
		memset(slots, 0, sizeof(slots));
		memset(wires, 0, sizeof(wires));
	}
	CHECK(!bad, "see above");
	CHECK(connects > 10000, "%ld connects checked", connects);
	printf("# %ld connects compared, %ld of them on a stale tree\n", connects, rebuilds);
}

/*
 * What busy-until costs a connect when nothing is busy: with every
 * backend idle and equal, connects one clock tick apart must never rebuild
 * the tree (the reference time stays where the first build put it), and a
 * busy backend must cost one rebuild when it comes back to the front, not one
 * per tick.
 */
static void test_idle_backends_cost_no_rebuild_as_time_passes(void)
{
	static struct steer_table t;
	static struct steer_svc_tree tr;
	struct steer_tree_clock ck = { 0, STEER_U64_MAX };
	uint64_t now = 5000000000ULL, built_at;
	struct steer_pick want;
	int k, rebuilds = 0;
	__u32 i, got;

	memset(&t, 0, sizeof(t));
	memset(&tr, 0, sizeof(tr));
	t.n = 256;
	t.credit_tokens = 1024;
	t.generation = 1;
	for (i = 0; i < t.n; i++) {
		t.e[i].slot = i;
		t.e[i].ns_per_token = 500000;
	}
	got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL, 1, now, &ck);
	built_at = ck.ref_ns;
	for (k = 0; k < 3000; k++) {
		now += 4000000; /* one coarse tick */
		got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL, 1, now, &ck);
		steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 0, &want);
		CHECK(got == want.pos, "connect %d: tree %u, reference %u", k, got, want.pos);
		slots[got].inflight_tokens += t.credit_tokens;
		steer_tree_key_leaf(
			&tr, got,
			steer_entry_key(&t, &t.e[got], &slots[got], &wires[got], ck.ref_ns),
			wires[got].busy_until_ns, &ck);
	}
	CHECK(ck.ref_ns == built_at, "idle backends rebuilt the tree (reference time moved)");
	/* Backend 0 gets a request worth 10 s; connects go elsewhere until its
	 * busy time comes close to the others' credits, then back to it. */
	wires[0].busy_until_ns = now + 10000000000ULL;
	wires[0].sent_bytes = 1; /* a send: lazy, as the kernel leaves it */
	for (k = 0; k < 3000; k++) {
		uint64_t ref = ck.ref_ns;

		now += 4000000;
		got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL, 1, now, &ck);
		rebuilds += ck.ref_ns != ref;
		steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 0, &want);
		CHECK(got == want.pos, "busy phase, connect %d: tree %u, reference %u", k, got,
		      want.pos);
		slots[got].inflight_tokens += t.credit_tokens;
		steer_tree_key_leaf(
			&tr, got,
			steer_entry_key(&t, &t.e[got], &slots[got], &wires[got], ck.ref_ns),
			wires[got].busy_until_ns, &ck);
	}
	printf("# 3,000 connects a tick apart at 256 idle backends: 0 rebuilds; with one busy: "
	       "%d\n",
	       rebuilds);
	CHECK(rebuilds <= 64, "%d rebuilds in 3,000 connects with one busy backend", rebuilds);
	memset(slots, 0, sizeof(slots));
	memset(wires, 0, sizeof(wires));
}

/*
 * Overload marks (STEER_SLOT_OVERLOADED, STEER_SLOT_PUSHBACK): the tree and
 * the reference agree on every pick, a marked backend is picked only when
 * every eligible one is marked, and the pick's wait the tree leaves in
 * pick_wait_ns is the reference's score.
 */
static void test_overload_marks_sort_last(void)
{
	static struct steer_table t;
	static struct steer_svc_tree tr;
	int round, bad = 0;

	for (round = 0; round < 2000 && !bad; round++) {
		__u32 n = 1 + (__u32)(rnd() % STEER_MAX_BACKENDS), i, got, marked = 0, eligible = 0;
		uint64_t now = 1000000000ULL + rnd() % 1000000000000ULL;
		struct steer_tree_clock ck = { 0, STEER_U64_MAX };
		struct steer_pick want;
		int all = round % 4 == 0;

		random_table(&t, n, 0);
		t.flags = STEER_TBL_OVERLOAD;
		t.generation = (__u64)round + 1;
		for (i = 0; i < n; i++) {
			__u32 f = all || rnd() % 3 == 0 ? (rnd() % 2 ? STEER_SLOT_OVERLOADED
								     : STEER_SLOT_PUSHBACK)
							: 0;

			t.e[i].ns_per_token = 1 + rnd() % 20000;
			slots[i].inflight_tokens = rnd() % 1000;
			slots[i].flags = rnd() % 10 == 0 ? STEER_SLOT_DRAINED : f;
			wires[i].busy_until_ns = rnd() % 2 ? now + rnd() % 1000000000ULL : 0;
			marked += steer_slot_eligible(&slots[i]) && f && slots[i].flags == f;
			eligible += steer_slot_eligible(&slots[i]);
		}
		memset(&tr, 0xa5, sizeof(tr));
		tr.tgen = 0;
		got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL, 1, now, &ck);
		steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 0, &want);
		if ((want.found ? want.pos : STEER_NO_PICK) != got) {
			bad = 1;
			CHECK(0, "round %d: tree %u, reference %u", round, got, want.pos);
			break;
		}
		if (!want.found)
			continue;
		CHECK(tr.pick_wait_ns == want.score, "round %d: pick_wait_ns %llu, score %llu",
		      round, (unsigned long long)tr.pick_wait_ns, (unsigned long long)want.score);
		CHECK(!!steer_overload_ns(&slots[t.e[got].slot], &wires[t.e[got].slot]) ==
			      (marked == eligible),
		      "round %d: pick marked %d, %u of %u eligible marked", round,
		      !!steer_overload_ns(&slots[t.e[got].slot], &wires[t.e[got].slot]), marked,
		      eligible);
		/* A second pick at a later time, no rebuild: the same wait rule. */
		now += rnd() % 2000000000ULL;
		got = steer_tree_pick_at(&tr, &t, slot_at, NULL, wire_at, NULL, 1, now, &ck);
		steer_select_at(&t, slot_at, NULL, wire_at, NULL, now, 0, &want);
		CHECK(got == want.pos && tr.pick_wait_ns == want.score,
		      "round %d later: tree %u wait %llu, reference %u score %llu", round, got,
		      (unsigned long long)tr.pick_wait_ns, want.pos,
		      (unsigned long long)want.score);
	}
	memset(slots, 0, sizeof(slots));
	memset(wires, 0, sizeof(wires));
}

/* The branch-free bound check against the plain comparison, edges included. */
static void test_over_wait_bound(void)
{
	static const __u64 edges[] = { 0,
				       1,
				       2,
				       3,
				       999999999,
				       1000000000,
				       1000000001,
				       3600000000000ULL,
				       STEER_OVERLOAD_NS - 1,
				       STEER_OVERLOAD_NS,
				       STEER_U64_MAX - 1,
				       STEER_U64_MAX };
	size_t i, j;
	int k;

	for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		for (j = 0; j < 8; j++) {
			__u64 bound = (__u64[]){ 0,
						 1,
						 2,
						 1000000,
						 550000000,
						 1000000000,
						 3600000000000ULL,
						 3600000000001ULL }[j];
			__u64 w = edges[i];
			/* Halved: a wait one ns over an even bound reads as equal. */
			__u64 want = bound && (w >> 1) > (bound >> 1);

			CHECK(steer_over_wait_bound(w, bound) == want,
			      "wait %llu bound %llu: %llu, want %llu", (unsigned long long)w,
			      (unsigned long long)bound,
			      (unsigned long long)steer_over_wait_bound(w, bound),
			      (unsigned long long)want);
		}
	for (k = 0; k < 100000; k++) {
		__u64 w = rnd() % 2 ? rnd() : rnd() % 4000000000000ULL;
		__u64 bound = 1 + rnd() % 3600000000000ULL;

		CHECK(steer_over_wait_bound(w, bound) == ((w >> 1) > (bound >> 1)),
		      "wait %llu bound %llu", (unsigned long long)w, (unsigned long long)bound);
	}
}

/* ---- cache affinity (steer_affinity_judge, steer_affinity_settle) -------- */

#define MS 1000000ULL

/* One backend at slot 0, table position 0, with a wait of wait_ns at now
 * (no in-flight work, no accounting): the judge's verdict against pick_wait. */
static __u32 judge_one(struct steer_table *t, __u64 wait_ns, __u64 pick_wait, __u64 *wait)
{
	t->n = 1;
	t->e[0].base_wait_ns = wait_ns;
	t->e[0].ns_per_token = 1000;
	t->e[0].slot = 0;
	return steer_affinity_judge(t, &t->e[0], &slots[0], NULL, pick_wait, 5000 * MS, wait);
}

static void test_affinity_judge_stays_within_the_slack(void)
{
	static struct steer_table t;
	__u64 wait = 0;

	memset(&t, 0, sizeof(t));
	memset(&slots[0], 0, sizeof(slots[0]));
	t.affinity = STEER_AFF_CGROUP;
	t.affinity_slack_ns = 500 * MS;
	CHECK(judge_one(&t, 41 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "41 ms vs 12 + 500");
	CHECK(wait == 41 * MS, "wait %llu", (unsigned long long)wait);
	/* The boundary, exact: at the least wait plus the slack it stays, one ns
	 * over it leaves. */
	CHECK(judge_one(&t, 512 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "at the slack");
	CHECK(judge_one(&t, 512 * MS + 1, 12 * MS, &wait) == STEER_AFF_LEFT_SLACK,
	      "one ns over the slack");
	CHECK(wait == 512 * MS + 1, "wait %llu", (unsigned long long)wait);
	/* Slack 0: only a tie stays. */
	t.affinity_slack_ns = 0;
	CHECK(judge_one(&t, 12 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "a tie");
	CHECK(judge_one(&t, 12 * MS + 1, 12 * MS, &wait) == STEER_AFF_LEFT_SLACK, "no tie");
	/* In-flight work counts in the wait. */
	t.affinity_slack_ns = 500 * MS;
	slots[0].inflight_tokens = 1000; /* x 1000 ns/token: 1 ms */
	CHECK(judge_one(&t, 512 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_SLACK, "in flight");
	CHECK(wait == 513 * MS, "wait %llu", (unsigned long long)wait);
	memset(&slots[0], 0, sizeof(slots[0]));
}

static void test_affinity_judge_gone(void)
{
	static struct steer_table t;
	__u64 wait = 1;

	memset(&t, 0, sizeof(t));
	memset(&slots[0], 0, sizeof(slots[0]));
	t.affinity_slack_ns = 500 * MS;
	slots[0].flags = STEER_SLOT_DRAINED;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_GONE, "drained");
	CHECK(wait == 0, "a gone backend's wait is 0, not %llu", (unsigned long long)wait);
	slots[0].flags = 0;
	slots[0].fails = STEER_FAIL_EJECT;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_GONE, "ejected");
	slots[0].fails = STEER_FAIL_EJECT + 7;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_GONE, "ejected, more");
	slots[0].fails = STEER_FAIL_EJECT - 1;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "failing, not ejected");
	slots[0].fails = 0;
	wait = 1;
	CHECK(steer_affinity_judge(&t, NULL, &slots[0], NULL, 12 * MS, 0, &wait) ==
		      STEER_AFF_LEFT_GONE,
	      "no entry: out of the table, or its slot has another owner");
	CHECK(wait == 0, "wait %llu", (unsigned long long)wait);
	CHECK(steer_affinity_judge(&t, &t.e[0], NULL, NULL, 12 * MS, 0, &wait) ==
		      STEER_AFF_LEFT_GONE,
	      "no slot");
}

static void test_affinity_judge_overloaded(void)
{
	static struct steer_table t;
	struct steer_wire w;
	__u64 wait = 0;

	memset(&t, 0, sizeof(t));
	memset(&w, 0, sizeof(w));
	memset(&slots[0], 0, sizeof(slots[0]));
	t.affinity_slack_ns = 500 * MS;
	t.n = 1;
	t.e[0].base_wait_ns = 1 * MS;
	slots[0].flags = STEER_SLOT_OVERLOADED;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_OVERLOAD, "by its poll");
	slots[0].flags = STEER_SLOT_PUSHBACK;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_OVERLOAD, "pushing back");
	slots[0].flags = 0;
	/* At its bound of live connections. */
	w.max_live = 3;
	slots[0].live = 3;
	CHECK(steer_affinity_judge(&t, &t.e[0], &slots[0], &w, 12 * MS, 0, &wait) ==
		      STEER_AFF_LEFT_OVERLOAD,
	      "at max_live");
	slots[0].live = 5;
	slots[0].closed = 3;
	CHECK(steer_affinity_judge(&t, &t.e[0], &slots[0], &w, 12 * MS, 0, &wait) == STEER_AFF_STAY,
	      "below max_live");
	w.max_live = 0;
	slots[0].live = 1000;
	slots[0].closed = 0;
	CHECK(steer_affinity_judge(&t, &t.e[0], &slots[0], &w, 12 * MS, 0, &wait) == STEER_AFF_STAY,
	      "no bound of live connections");
	slots[0].live = 0;
	/* Over --worker-overload-wait, even within the slack. */
	t.wait_bound_ns = 40 * MS;
	CHECK(judge_one(&t, 41 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_OVERLOAD, "over the bound");
	CHECK(wait == 41 * MS, "wait %llu", (unsigned long long)wait);
	t.wait_bound_ns = 42 * MS;
	CHECK(judge_one(&t, 41 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "within the bound");
	/* Drained and overloaded: gone first. */
	slots[0].flags = STEER_SLOT_DRAINED | STEER_SLOT_OVERLOADED;
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_LEFT_GONE, "drained first");
	memset(&slots[0], 0, sizeof(slots[0]));
}

static void test_affinity_judge_saturates(void)
{
	static struct steer_table t;
	__u64 wait = 0;

	memset(&t, 0, sizeof(t));
	memset(&slots[0], 0, sizeof(slots[0]));
	t.affinity_slack_ns = STEER_U64_MAX; /* any wait stays */
	CHECK(judge_one(&t, 3600000 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "huge slack");
	slots[0].inflight_tokens = STEER_U64_MAX / 2; /* the wait saturates */
	CHECK(judge_one(&t, 1 * MS, 12 * MS, &wait) == STEER_AFF_STAY, "saturated wait");
	CHECK(wait == STEER_U64_MAX, "wait %llu", (unsigned long long)wait);
	t.affinity_slack_ns = 1;
	CHECK(judge_one(&t, 1 * MS, STEER_U64_MAX, &wait) == STEER_AFF_STAY,
	      "pick_wait saturated (the probe's)");
	CHECK(judge_one(&t, 1 * MS, STEER_U64_MAX - 2, &wait) == STEER_AFF_LEFT_SLACK,
	      "a saturated wait over an unsaturated sum");
	t.affinity_slack_ns = STEER_U64_MAX - 1;
	CHECK(judge_one(&t, 1 * MS, 2, &wait) == STEER_AFF_STAY, "the sum saturates");
	memset(&slots[0], 0, sizeof(slots[0]));
}

/* steer_affinity_settle as plainly as it can be written. */
static __u64 settle_ref(__u64 pick_wait, __u64 slack, __u32 state, __u32 verdict, __u64 wait,
			__u64 *final)
{
	if (!(state & STEER_AFF_KNOWN)) {
		*final = STEER_AFF_NEW;
		return 0;
	}
	if (verdict != STEER_AFF_STAY) {
		*final = verdict;
		return 0;
	}
	if (wait > steer_sat_add(pick_wait, slack)) {
		*final = STEER_AFF_LEFT_SLACK;
		return 0;
	}
	*final = STEER_AFF_STAY;
	return 1;
}

static int settle_check(__u64 pick, __u64 slack, __u32 state, __u32 verdict, __u64 wait)
{
	__u64 got_v = 99, want_v = 98;
	__u64 got = steer_affinity_settle(pick, slack, state, verdict, wait, &got_v);
	__u64 want = settle_ref(pick, slack, state, verdict, wait, &want_v);

	CHECK_RC(got == want && got_v == want_v,
		 "pick %llu slack %llu state %u verdict %u wait %llu: stay %llu verdict %llu, "
		 "want %llu %llu",
		 (unsigned long long)pick, (unsigned long long)slack, state, verdict,
		 (unsigned long long)wait, (unsigned long long)got, (unsigned long long)got_v,
		 (unsigned long long)want, (unsigned long long)want_v);
	return 0;
}

/* The kernel's branch-free settle against the plain comparison, to the ns. */
static void test_affinity_settle_matches_the_plain_rule(void)
{
	static const __u32 states[] = { 0, STEER_AFF_HAS_KEY, STEER_AFF_HAS_KEY | STEER_AFF_KNOWN };
	static const __u64 edges[] = { 0,
				       1,
				       2,
				       3,
				       500 * MS,
				       500 * MS + 1,
				       (1ULL << 32) - 1,
				       1ULL << 32,
				       STEER_OVERLOAD_NS - 1,
				       STEER_OVERLOAD_NS,
				       (1ULL << 63) - 1,
				       1ULL << 63,
				       STEER_U64_MAX - 1,
				       STEER_U64_MAX };
	const size_t ne = sizeof(edges) / sizeof(edges[0]);
	size_t i, j, k;
	__u32 st, v;
	int r;

	for (i = 0; i < ne; i++)
		for (j = 0; j < ne; j++) {
			__u64 best = steer_sat_add(edges[i], edges[j]);
			__u64 waits[] = { best, best + 1, best - 1, 0, STEER_U64_MAX };

			for (k = 0; k < sizeof(waits) / sizeof(waits[0]); k++)
				for (st = 0; st < 3; st++)
					for (v = 0; v < STEER_AFF_VERDICTS; v++)
						CHECK(settle_check(edges[i], edges[j], states[st],
								   v, waits[k]) == 0,
						      "edges");
		}
	for (r = 0; r < 300000; r++) {
		__u64 pick = edgy(), slack = rnd() % 3 ? rnd() % (10000 * MS) : edgy();
		__u64 best = steer_sat_add(pick, slack);
		__u64 wait = rnd() % 2 ? edgy() : best + (rnd() % 5) - 2;

		CHECK(settle_check(pick, slack, states[rnd() % 3],
				   (__u32)(rnd() % STEER_AFF_VERDICTS), wait) == 0,
		      "random");
	}
}

/* The affinity table's set: a client keeps its way, a new one takes an
 * empty way, then the least recently connected, the first of a tie. */
static void test_affinity_set_ways(void)
{
	struct steer_aff_set set;
	__u32 i;

	memset(&set, 0, sizeof(set));
	CHECK(steer_aff_way_of(&set, 7) == STEER_AFFINITY_WAYS, "found in an empty set");
	CHECK(steer_aff_way_to_write(&set, 7) == 0, "an empty set's first way");
	for (i = 0; i < STEER_AFFINITY_WAYS; i++) {
		set.way[i].tag = 11 + 2 * i;
		set.way[i].last_ns = 100 + (i == 2 ? 0 : 10 * (i + 1));
	}
	CHECK(steer_aff_way_of(&set, 15) == 2, "way of tag 15: %u", steer_aff_way_of(&set, 15));
	CHECK(steer_aff_way_to_write(&set, 13) == 1, "a known tag keeps its way");
	CHECK(steer_aff_way_to_write(&set, 99) == 2, "a new tag takes the least recent: %u",
	      steer_aff_way_to_write(&set, 99));
	set.way[3].tag = 0;
	set.way[3].last_ns = 0;
	CHECK(steer_aff_way_to_write(&set, 99) == 3, "a new tag takes an empty way first");
	/* Ties in time (one tick of the coarse clock): the first of them. */
	for (i = 0; i < STEER_AFFINITY_WAYS; i++)
		set.way[i].last_ns = 500;
	set.way[0].last_ns = 600;
	CHECK(steer_aff_way_to_write(&set, 99) == 1, "a tie goes to the first: %u",
	      steer_aff_way_to_write(&set, 99));
}

/* Clients a node hands out in sequence (cgroup ids, netns cookies) and one
 * subnet's addresses spread over the sets: as many sequential clients as
 * there are sets fill each set about once, never more than a few times. */
static void test_affinity_sets_spread_sequences(void)
{
	static uint8_t fill[STEER_AFFINITY_SETS];
	__u32 kinds[] = { STEER_AFF_CGROUP, STEER_AFF_SOURCE }, k, i, most, empty;

	for (k = 0; k < 2; k++) {
		memset(fill, 0, sizeof(fill));
		for (i = 0; i < STEER_AFFINITY_SETS; i++) {
			struct steer_aff_key key = { .svc_id = 3, .kind = kinds[k] };
			__u32 set;

			key.client = kinds[k] == STEER_AFF_SOURCE ? (__u64)htonl(0xc0000200u + i)
								  : 4096 + (__u64)i;
			set = steer_aff_set_of(steer_aff_hash(&key));
			if (fill[set] < 255)
				fill[set]++;
		}
		most = empty = 0;
		for (i = 0; i < STEER_AFFINITY_SETS; i++) {
			most = fill[i] > most ? fill[i] : most;
			empty += fill[i] == 0;
		}
		/* Uniform: 1/e of the sets empty (36.8 %), none above about 10. */
		CHECK(most <= 12 && empty > STEER_AFFINITY_SETS / 3 &&
			      empty < STEER_AFFINITY_SETS * 2 / 5,
		      "kind %u: the fullest set %u, %u sets empty of %u", kinds[k], most, empty,
		      STEER_AFFINITY_SETS);
	}
}

/* The kernel's two steps, the probe (the judge with the least wait aside) and
 * the settle after the pick, are the one rule: the judge with the pick's wait. */
static void test_affinity_probe_and_settle_are_the_judge(void)
{
	static struct steer_table t;
	struct steer_wire w;
	int r;

	for (r = 0; r < 100000; r++) {
		__u64 now = 1000 * MS + rnd() % (1000000 * MS), wait1 = 0, wait2 = 0, final = 0;
		__u64 pick = rnd() % 4 ? rnd() % (2000 * MS) : edgy();
		__u32 probe, want, stay;

		memset(&t, 0, sizeof(t));
		memset(&w, 0, sizeof(w));
		memset(&slots[0], 0, sizeof(slots[0]));
		t.n = 1;
		t.affinity_slack_ns = rnd() % 3 ? rnd() % (1000 * MS) : edgy();
		t.wait_bound_ns = rnd() % 3 ? 0 : rnd() % (3000 * MS);
		t.flags = rnd() % 2 ? STEER_TBL_STEP : 0;
		t.e[0].base_wait_ns = rnd() % 4 ? rnd() % (2000 * MS) : edgy();
		t.e[0].ns_per_token = rnd() % 100000;
		slots[0].inflight_tokens = rnd() % 3 ? rnd() % 100000 : edgy();
		slots[0].flags = rnd() % 8 == 0 ? (__u32)(rnd() % 8) : 0;
		slots[0].fails = rnd() % 8 == 0 ? (__u32)(rnd() % 8) : 0;
		slots[0].live = rnd() % 8;
		w.max_live = rnd() % 2 ? (__u32)(rnd() % 8) : 0;
		w.busy_until_ns = rnd() % 2 ? now - 1000 * MS + rnd() % (3000 * MS) : 0;
		w.step_until_ns = rnd() % 2 ? now - 1000 * MS + rnd() % (3000 * MS) : 0;
		probe = steer_affinity_judge(&t, &t.e[0], &slots[0], &w, STEER_U64_MAX, now,
					     &wait1);
		want = steer_affinity_judge(&t, &t.e[0], &slots[0], &w, pick, now, &wait2);
		stay = (__u32)steer_affinity_settle(pick, t.affinity_slack_ns,
						    STEER_AFF_HAS_KEY | STEER_AFF_KNOWN, probe,
						    wait1, &final);
		CHECK(probe != STEER_AFF_LEFT_SLACK, "the probe never judges the slack");
		CHECK(wait1 == wait2, "the wait does not depend on the pick");
		CHECK(final == want && stay == (want == STEER_AFF_STAY),
		      "round %d: settle %llu stay %u, judge %u", r, (unsigned long long) final,
		      stay, want);
	}
	memset(&slots[0], 0, sizeof(slots[0]));
}

int main(void)
{
	TAP_RUN(test_saturating_add_matches_128bit);
	TAP_RUN(test_saturating_mul_matches_128bit);
	TAP_RUN(test_score_saturates);
	TAP_RUN(test_early_exit_never_changes_the_answer);
	TAP_RUN(test_early_exit_stops_at_the_bound);
	TAP_RUN(test_ties_go_to_the_earlier_position);
	TAP_RUN(test_drained_and_empty);
	TAP_RUN(test_round_robin_cycles_and_skips_drained);
	TAP_RUN(test_water_filling_matches_reference);
	TAP_RUN(test_tree_picks_what_steer_select_picks);
	TAP_RUN(test_busy_until_rule);
	TAP_RUN(test_tree_with_busy_until_picks_what_steer_select_at_picks);
	TAP_RUN(test_idle_backends_cost_no_rebuild_as_time_passes);
	TAP_RUN(test_overload_marks_sort_last);
	TAP_RUN(test_over_wait_bound);
	TAP_RUN(test_affinity_judge_stays_within_the_slack);
	TAP_RUN(test_affinity_judge_gone);
	TAP_RUN(test_affinity_judge_overloaded);
	TAP_RUN(test_affinity_judge_saturates);
	TAP_RUN(test_affinity_settle_matches_the_plain_rule);
	TAP_RUN(test_affinity_probe_and_settle_are_the_judge);
	TAP_RUN(test_affinity_set_ways);
	TAP_RUN(test_affinity_sets_spread_sequences);
	return tap_done();
}
