// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_wire_fluid.c - the busy-until estimate ("fluid", the default
 * score of unanswered requests) with the real programs in a throwaway cgroup
 * and network namespace:
 *  - at every connect the kernel picks exactly what steer_select_at() picks
 *    at the kernel's own time (the connect's coarse clock tick), over random
 *    requests sent, answered and credits drained;
 *  - a large plain-JSON request (answered only at its end) keeps new
 *    connections away from its backend for the time its tokens take at the
 *    backend's rate, not until its answer;
 *  - a streaming answer's first chunk ends that at once;
 *  - with the step cadence (STEER_TBL_STEP) the gap between two chunks of
 *    one streamed answer is a step of the backend's engine, and new
 *    connections avoid it until the step under way is predicted to end;
 *  - another router's report (steer_peer_apply, --peer) keeps new
 *    connections away from the backend it sent a large request to, and its
 *    answer brings them back, with the leaf re-keyed under the lock;
 *  - the step probe's packets (steer_probe_apply, --step-probe) set the
 *    step cadence as a streamed answer's do: a long step keeps new
 *    connections away, and a shorter one after it lowers the leaf's key at
 *    once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"
#include "wire_lib.h"

static struct steer_addr vip_ref, vip_json, vip_sse, vip_step, vip_peer, vip_probe;
static struct responder r_ref[3], r_json[2], r_sse[2], r_step[2], r_peer[2], r_probe[2];

static uint64_t steered(uint32_t slot)
{
	return steer_dp_slot_counters(dp, slot)->steered;
}

/* The table as published (every base 0, so in the given order). */
static void mirror_of(struct steer_table *t, const uint32_t *slots, int n, double npt)
{
	int k;

	memset(t, 0, sizeof(*t));
	t->n = (uint32_t)n;
	t->bytes_per_token = STEER_DEFAULT_BYTES_PER_TOKEN;
	for (k = 0; k < n; k++) {
		t->e[k].ns_per_token = (uint64_t)npt;
		t->e[k].slot = slots[k];
		t->e[k].peers = 1;
	}
}

/* Which of the slots a connect made just now was steered to, from the
 * steered counters before (was) and now; -1 when not exactly one moved. */
static int moved(const uint32_t *slots, const uint64_t *was, int n)
{
	int k, which = -1;

	for (k = 0; k < n; k++)
		if (steered(slots[k]) != was[k]) {
			if (which >= 0)
				return -1;
			which = k;
		}
	return which;
}

static uint64_t seed = 0x2545f4914f6cdd1dULL;

static uint64_t rnd(void)
{
	seed ^= seed >> 12;
	seed ^= seed << 25;
	seed ^= seed >> 27;
	return seed * 2685821657736338717ULL;
}

/* ---- 1. the kernel picks what steer_select_at picks at its own time -------------- */

#define REF_NPT 100000.0 /* 0.1 ms per token: requests keep a backend busy 10 ms - 1 s */

static void test_the_kernel_picks_what_steer_select_at_picks(void)
{
	struct responder *be[3] = { &r_ref[0], &r_ref[1], &r_ref[2] };
	static struct steer_table mirror;
	uint32_t slots[3];
	bool open_req[3] = { false, false, false };
	int fd[3], k, step, compared = 0, skipped = 0;

	CHECK(publish_flags(&vip_ref, be, 3, 0, 0, REF_NPT) == 0, "publish: %s", err);
	for (k = 0; k < 3; k++) {
		slots[k] = slot_of(&vip_ref, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	mirror_of(&mirror, slots, 3, REF_NPT);
	/* One keep-alive connection per backend: credits water-fill A, B, C. */
	for (k = 0; k < 3; k++) {
		uint64_t was = steered(slots[k]);

		fd[k] = client_connect(&vip_ref);
		CHECK(fd[k] >= 0, "connect %d: %s", k, strerror(-fd[k]));
		CHECK(steered(slots[k]) == was + 1, "connection %d did not reach backend %d", k, k);
	}
	for (step = 0; step < 120; step++) {
		int j = (int)(rnd() % 3), got;
		uint64_t was[3], t0, t1;
		struct steer_pick want;
		int probe;

		if (open_req[j]) {
			allow_chunk(be[j]);
			CHECK(read_some(fd[j]) > 0, "step %d: no answer from %d", step, j);
			open_req[j] = false;
		} else if (rnd() % 3) {
			CHECK(send_request(fd[j], be[j], 400 + rnd() % 40000) == 0,
			      "step %d: request to %d not received", step, j);
			open_req[j] = true;
		}
		if (rnd() % 8 == 0)
			for (k = 0; k < 3; k++)
				steer_dp_inflight_exchange(dp, slots[k]); /* a daemon drain */
		for (k = 0; k < 3; k++)
			was[k] = steered(slots[k]);
		t0 = steer_dp_clock_ns();
		steer_select_at(&mirror, slot_at, dp, steer_dp_wire_at, dp, t0, 1, &want);
		probe = client_connect(&vip_ref);
		t1 = steer_dp_clock_ns();
		CHECK(probe >= 0, "probe %d: %s", step, strerror(-probe));
		close(probe);
		got = moved(slots, was, 3);
		CHECK(got >= 0, "step %d: no single backend was steered to", step);
		if (t0 != t1) {
			skipped++; /* the kernel's clock may have read either tick */
			continue;
		}
		compared++;
		CHECK(want.found && want.slot == slots[got],
		      "step %d at %llu: the kernel chose backend %d, steer_select_at slot %u", step,
		      (unsigned long long)t0, got, want.slot);
	}
	for (k = 0; k < 3; k++) {
		if (open_req[k]) {
			allow_chunk(be[k]);
			read_some(fd[k]);
		}
		close(fd[k]);
	}
	printf("# %d connects compared at the kernel's tick, %d straddled a tick\n", compared,
	       skipped);
	CHECK(compared >= 20, "only %d of 120 connects fell within one clock tick", compared);
}

/* ---- 2. plain JSON: busy for the request's tokens, not until its answer ----------- */

#define JSON_NPT 20000.0 /* 20 us per token: 10,000 tokens keep A busy 200 ms */

static void test_a_large_json_request_keeps_a_busy_only_for_its_tokens(void)
{
	struct responder *be[2] = { &r_json[0], &r_json[1] };
	uint32_t slots[2];
	uint64_t t_send0, t_send1, until, first_a = 0, busy_ns = (uint64_t)(10000 * JSON_NPT);
	int fd, k, to_b = 0;

	CHECK(publish_flags(&vip_json, be, 2, 0, 0, JSON_NPT) == 0, "publish: %s", err);
	for (k = 0; k < 2; k++) {
		slots[k] = slot_of(&vip_json, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	fd = client_connect(&vip_json);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(steered(slots[0]) == 1, "the tie did not go to A");
	/* 40,000 bytes = 10,000 tokens on A, answered only when told. */
	t_send0 = steer_dp_clock_ns();
	CHECK(send_request(fd, be[0], 40000) == 0, "request not received");
	t_send1 = steer_dp_clock_ns();
	until = steer_dp_wire_counters(dp, slots[0])->busy_until_ns;
	CHECK(until >= t_send0 + busy_ns && until <= t_send1 + busy_ns,
	      "busy_until %llu ns after the send began, want %llu (the send took %llu ns)",
	      (unsigned long long)(until - t_send0), (unsigned long long)busy_ns,
	      (unsigned long long)(t_send1 - t_send0));
	/* New connections go to B while A is busy (B's credits drained before
	 * each, as a publish would), and to A from the first tick at or after
	 * busy_until, with the request still unanswered. */
	for (;;) {
		uint64_t was[2] = { steered(slots[0]), steered(slots[1]) }, t0, t1;
		int probe, got;

		/* Paced: B's responder holds each probe in its accept queue (1,024). */
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		steer_dp_inflight_exchange(dp, slots[1]);
		t0 = steer_dp_clock_ns();
		probe = client_connect(&vip_json);
		t1 = steer_dp_clock_ns();
		CHECK(probe >= 0, "probe: %s", strerror(-probe));
		close(probe);
		got = moved(slots, was, 2);
		CHECK(got >= 0, "no single backend was steered to");
		if (got == 0) {
			CHECK(t1 >= until, "A chosen at %llu ns, %llu ns before its busy_until",
			      (unsigned long long)t1, (unsigned long long)(until - t1));
			first_a = t1;
			break;
		}
		CHECK(t0 < until, "B chosen at %llu ns, %llu ns after A's busy_until",
		      (unsigned long long)t0, (unsigned long long)(t0 - until));
		to_b++;
		CHECK(t0 < t_send0 + (uint64_t)WAIT_MS * 1000000ULL, "A never chosen again");
	}
	CHECK(steer_dp_pending_bytes(dp, slots[0]) == 40000, "the request is no longer pending");
	CHECK(to_b >= 1, "not one connection avoided A while it was busy");
	printf("# A busy %.1f ms (10,000 tokens x 20 us): %d connections to B, A again %.1f ms "
	       "after the send, still unanswered\n",
	       (double)busy_ns / 1e6, to_b, (double)(first_a - t_send0) / 1e6);
	allow_chunk(be[0]);
	CHECK(read_some(fd) > 0, "no response");
	CHECK(steer_dp_pending_bytes(dp, slots[0]) == 0, "answered, yet pending");
	close(fd);
}

/* ---- 3. streaming: the first chunk ends the busy time ------------------------------ */

#define SSE_NPT 1000000.0 /* 1 ms per token: 10,000 tokens would keep A busy 10 s */

static void test_a_streaming_answer_caps_the_busy_time(void)
{
	struct responder *be[2] = { &r_sse[0], &r_sse[1] };
	uint32_t slots[2];
	uint64_t was[2], now;
	int fd, probe, k;

	CHECK(publish_flags(&vip_sse, be, 2, 0, 0, SSE_NPT) == 0, "publish: %s", err);
	for (k = 0; k < 2; k++) {
		slots[k] = slot_of(&vip_sse, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	fd = client_connect(&vip_sse);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(steered(slots[0]) == 1, "the tie did not go to A");
	CHECK(send_request(fd, be[0], 40000) == 0, "request not received");
	now = steer_dp_clock_ns();
	CHECK(steer_dp_busy_left_ns(dp, slots[0], now) > 9000000000ULL, "A busy for %llu ns only",
	      (unsigned long long)steer_dp_busy_left_ns(dp, slots[0], now));
	steer_dp_inflight_exchange(dp, slots[1]);
	was[0] = steered(slots[0]);
	was[1] = steered(slots[1]);
	probe = client_connect(&vip_sse);
	CHECK(probe >= 0, "probe: %s", strerror(-probe));
	close(probe);
	CHECK(moved(slots, was, 2) == 1, "while A is busy the connect did not go to B");
	/* The first chunk: the request is answered, nothing is pending, and the
	 * busy time is capped at what is left pending: none. */
	allow_chunk(be[0]);
	CHECK(read_some(fd) > 0, "no first chunk");
	now = steer_dp_clock_ns();
	CHECK(steer_dp_pending_bytes(dp, slots[0]) == 0 &&
		      steer_dp_busy_left_ns(dp, slots[0], now) == 0,
	      "after the first chunk: pending %llu, busy %llu ns",
	      (unsigned long long)steer_dp_pending_bytes(dp, slots[0]),
	      (unsigned long long)steer_dp_busy_left_ns(dp, slots[0], now));
	/* A now holds the answered request's real size in flight (until the
	 * daemon drains it): drained here, A and B tie and A wins the tie. */
	steer_dp_inflight_exchange(dp, slots[0]);
	steer_dp_inflight_exchange(dp, slots[1]);
	was[0] = steered(slots[0]);
	was[1] = steered(slots[1]);
	probe = client_connect(&vip_sse);
	CHECK(probe >= 0, "probe: %s", strerror(-probe));
	close(probe);
	CHECK(moved(slots, was, 2) == 0, "after the first chunk the connect did not go to A");
	for (k = 1; k < SSE_CHUNKS; k++) {
		allow_chunk(be[0]);
		CHECK(read_some(fd) > 0, "chunk %d missing", k);
	}
	close(fd);
}

/* A probe connect: 1 when it went to B, 0 to A, -1 otherwise; *at is the
 * kernel's clock just after it. With tie, the credits in flight are drained
 * first, so that A and B tie but for the step; that bumps the epoch, and the
 * connect then rebuilds the tree. */
static int probe_pick(const struct steer_addr *vip, const uint32_t *slots, bool tie, uint64_t *at)
{
	uint64_t was[2] = { steered(slots[0]), steered(slots[1]) };
	int fd;

	if (tie) {
		steer_dp_inflight_exchange(dp, slots[0]);
		steer_dp_inflight_exchange(dp, slots[1]);
	}
	fd = client_connect(vip);
	*at = steer_dp_clock_ns();
	if (fd < 0)
		return -1;
	close(fd);
	return moved(slots, was, 2);
}

#define STEP_LONG_NS 2000000000ULL /* the first step: 2 s between two chunks */
#define STEP_SHORT_NS 100000000ULL /* the next: 100 ms */
#define TICK_NS 4000000ULL	   /* the coarse clock's resolution (HZ=250) */
#define STEP_NPT 10000.0	   /* 10 us per token: a connect's credit is 10 ms */

/*
 * The step cadence, on the real programs: A streams an answer in three
 * chunks, 2 s and then 100 ms apart. The first chunk only answers (no step
 * is known: the tie still goes to A). The second is one step of 2 s after
 * it: A is keyed busy until a step after that, and the next connect goes to
 * B. The third is a shorter step: step_until falls, the leaf is re-keyed
 * under the lock, and once that shorter step has passed connects go to A
 * again, though the first prediction has not run out yet.
 */
static void test_the_step_cadence_avoids_a_backend_until_its_step_ends(void)
{
	struct responder *be[2] = { &r_step[0], &r_step[1] };
	const struct steer_wire *w;
	uint32_t slots[2];
	uint64_t t_chunk2, at, first_until;
	int fd, k, pick;

	CHECK(publish_flags(&vip_step, be, 2, 0, STEER_TBL_STEP, STEP_NPT) == 0, "publish: %s",
	      err);
	for (k = 0; k < 2; k++) {
		slots[k] = slot_of(&vip_step, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	w = steer_dp_wire_counters(dp, slots[0]);
	fd = client_connect(&vip_step);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(steered(slots[0]) == 1, "the tie did not go to A");
	CHECK(send_request(fd, be[0], 400) == 0, "request not received");
	allow_chunk(be[0]);
	CHECK(read_some(fd) > 0, "no first chunk");
	CHECK(w->step_ns == 0 && w->step_until_ns == w->last_rx_ns && w->last_rx_ns > 0,
	      "after the answer: step %llu ns, until %llu, last %llu",
	      (unsigned long long)w->step_ns, (unsigned long long)w->step_until_ns,
	      (unsigned long long)w->last_rx_ns);
	CHECK(probe_pick(&vip_step, slots, true, &at) == 0, "after the answer alone: not A");

	/* One step of 2 s (long, so that the shorter one after it is shorter even on a
	 * stalled machine). */
	usleep(STEP_LONG_NS / 1000);
	allow_chunk(be[0]);
	CHECK(read_some(fd) > 0, "no second chunk");
	t_chunk2 = steer_dp_clock_ns();
	CHECK(w->step_ns >= STEP_LONG_NS - TICK_NS && w->step_ns < STEP_LONG_NS + 10000000000ULL &&
		      w->step_until_ns == w->last_rx_ns + w->step_ns,
	      "after the second chunk: step %llu ns, until - last %lld",
	      (unsigned long long)w->step_ns, (long long)(w->step_until_ns - w->last_rx_ns));
	first_until = w->step_until_ns;
	pick = probe_pick(&vip_step, slots, true, &at);
	CHECK(at >= first_until || pick == 1,
	      "while A's step runs (%lld ms left) the connect went to %d, not B",
	      (long long)(first_until - at) / 1000000, pick);
	printf("# step %.1f ms learnt; connect %.1f ms after the chunk went to %s\n",
	       (double)w->step_ns / 1e6, (double)(at - t_chunk2) / 1e6, pick == 1 ? "B" : "A");

	/* A shorter step: step_until falls and the leaf is re-keyed. */
	usleep(STEP_SHORT_NS / 1000);
	allow_chunk(be[0]);
	CHECK(read_some(fd) > 0, "no third chunk");
	CHECK(w->step_ns >= STEP_SHORT_NS - TICK_NS && w->step_ns < first_until - t_chunk2 &&
		      w->step_until_ns == w->last_rx_ns + w->step_ns &&
		      w->step_until_ns < first_until,
	      "after the third chunk: step %llu ns, until %llu (first %llu)",
	      (unsigned long long)w->step_ns, (unsigned long long)w->step_until_ns,
	      (unsigned long long)first_until);
	for (k = 0; k < WAIT_MS && steer_dp_clock_ns() <= w->step_until_ns + TICK_NS; k++)
		usleep(1000);
	/* No drain now (no epoch bump, so no rebuild): B holds the last probe's
	 * credit, and only A's re-keyed leaf lets the tree see that A is free
	 * again before the first prediction runs out. */
	pick = probe_pick(&vip_step, slots, false, &at);
	CHECK(pick == 0, "after the shorter step ended the connect went to %d, not A", pick);
	printf("# after the shorter step: A, %.1f ms before the first prediction ran out\n",
	       at < first_until ? (double)(first_until - at) / 1e6 : 0.0);
	close(fd);
}

/* ---- 5. other routers' work: steer_peer_apply ---------------------------------------- */

#define PEER_NPT 20000.0 /* 20 us per token: 10,000 tokens keep A busy 200 ms */

/* One delta for the slot: run the program; returns how many it applied. */
static int peer_apply(uint32_t svc_id, uint32_t slot, uint32_t gen, uint64_t sent,
		      uint64_t answered)
{
	struct steer_peer_batch b = { .svc_id = svc_id, .n = 1 };

	b.d[0] = (struct steer_peer_delta){
		.slot = slot, .slot_gen = gen, .sent_tokens = sent, .answered_tokens = answered
	};
	if (steer_dp_peer_apply(dp, &b, err, sizeof(err)) != 0)
		return -1;
	return (int)b.applied;
}

/*
 * Another router sent 10,000 tokens to A (as its daemon reports them): A is
 * busy for their time at A's rate, and the next connect goes to B, though
 * this router sent nothing. The peer sees them answered: A's pending and busy
 * time fall to 0 under the lock, its leaf is re-keyed, and the next connect
 * (no drain, no epoch bump, so no rebuild) goes to A. A delta for a slot of
 * another owner generation is not applied; an answer never takes more than
 * is pending.
 */
static void test_another_routers_request_keeps_new_connections_away(void)
{
	struct responder *be[2] = { &r_peer[0], &r_peer[1] };
	uint32_t slots[2], gen;
	uint64_t before, after, until, at, busy_ns = (uint64_t)(10000 * PEER_NPT);
	int svc, k, pick;

	CHECK(publish_flags(&vip_peer, be, 2, 0, 0, PEER_NPT) == 0, "publish: %s", err);
	for (k = 0; k < 2; k++) {
		slots[k] = slot_of(&vip_peer, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	svc = steer_dp_service_id(dp, &vip_peer);
	CHECK(svc >= 0, "no service id");
	gen = steer_dp_slot_gen(dp, slots[0]);
	/* The tree is built (and A's cache written) by a first connect. */
	CHECK(probe_pick(&vip_peer, slots, true, &at) == 0, "the tie did not go to A");

	CHECK(peer_apply((uint32_t)svc, slots[0], gen + 1, 10000, 0) == 0,
	      "a delta for another owner generation was applied");
	CHECK(steer_dp_peer_pending_tokens(dp, slots[0]) == 0, "pending after a stale delta");

	before = steer_dp_clock_ns();
	CHECK(peer_apply((uint32_t)svc, slots[0], gen, 10000, 0) == 1, "not applied: %s", err);
	after = steer_dp_clock_ns();
	until = steer_dp_wire_counters(dp, slots[0])->busy_until_ns;
	CHECK(steer_dp_peer_pending_tokens(dp, slots[0]) == 10000, "peer pending %llu",
	      (unsigned long long)steer_dp_peer_pending_tokens(dp, slots[0]));
	CHECK(steer_dp_pending_bytes(dp, slots[0]) == 0, "this router's own pending moved");
	CHECK(until >= before + busy_ns && until <= after + busy_ns,
	      "busy_until %lld ns after the run began, want %llu", (long long)(until - before),
	      (unsigned long long)busy_ns);
	pick = probe_pick(&vip_peer, slots, true, &at);
	CHECK(at >= until || pick == 1, "with A busy for the peer the connect went to %d", pick);

	/* Answered, more than once over: pending stops at 0, A idle at once. */
	CHECK(peer_apply((uint32_t)svc, slots[0], gen, 0, 4000) == 1, "not applied: %s", err);
	CHECK(steer_dp_peer_pending_tokens(dp, slots[0]) == 6000, "peer pending %llu, want 6000",
	      (unsigned long long)steer_dp_peer_pending_tokens(dp, slots[0]));
	CHECK(peer_apply((uint32_t)svc, slots[0], gen, 0, 9000) == 1, "not applied: %s", err);
	CHECK(steer_dp_peer_pending_tokens(dp, slots[0]) == 0 &&
		      steer_dp_busy_left_ns(dp, slots[0], steer_dp_clock_ns()) == 0,
	      "after the answers: peer pending %llu, busy %llu ns",
	      (unsigned long long)steer_dp_peer_pending_tokens(dp, slots[0]),
	      (unsigned long long)steer_dp_busy_left_ns(dp, slots[0], steer_dp_clock_ns()));
	/* B holds the last probe's credit; only A's re-keyed leaf shows A free. */
	pick = probe_pick(&vip_peer, slots, false, &at);
	CHECK(pick == 0, "after the peer's answer the connect went to %d, not A", pick);
}

/* ---- 6. the step probe's packets: steer_probe_apply ---------------------------------- */

static int probe_apply(uint32_t svc_id, const struct steer_probe_step *p, uint32_t n)
{
	struct steer_probe_batch b = { .svc_id = svc_id, .n = n };

	memcpy(b.p, p, n * sizeof(*p));
	if (steer_dp_probe_apply(dp, &b, err, sizeof(err)) != 0)
		return -1;
	return (int)b.applied;
}

/*
 * The probe's packets, as the daemon's probe thread hands them over (times of
 * the coarse clock): a packet of another owner generation is not applied; a
 * stream's first packet only marks the time; a 2 s gap is a 2 s step, and
 * the next connect goes to B; a 1 ms gap after it lowers step_until under
 * the lock with A's leaf re-keyed, so that once that short step has ended the
 * next connect (no drain, no rebuild) goes to A again. Several packets in one
 * run apply in order.
 */
static void test_the_probes_packets_set_the_step_cadence(void)
{
	struct responder *be[2] = { &r_probe[0], &r_probe[1] };
	const struct steer_wire *w;
	uint32_t slots[2], gen;
	uint64_t now, until, at;
	int svc, k, pick;

	CHECK(publish_flags(&vip_probe, be, 2, 0, STEER_TBL_STEP, STEP_NPT) == 0, "publish: %s",
	      err);
	for (k = 0; k < 2; k++) {
		slots[k] = slot_of(&vip_probe, be[k]);
		steer_dp_inflight_exchange(dp, slots[k]);
	}
	svc = steer_dp_service_id(dp, &vip_probe);
	CHECK(svc >= 0, "no service id");
	gen = steer_dp_slot_gen(dp, slots[0]);
	w = steer_dp_wire_counters(dp, slots[0]);
	CHECK(probe_pick(&vip_probe, slots, true, &at) == 0, "the tie did not go to A");

	now = steer_dp_clock_ns();
	CHECK(probe_apply((uint32_t)svc,
			  &(struct steer_probe_step){ slots[0], gen + 1, now - STEP_LONG_NS, now },
			  1) == 0,
	      "a packet for another owner generation was applied");
	CHECK(w->step_ns == 0 && w->step_until_ns == 0, "a stale packet moved the step");
	CHECK(probe_apply((uint32_t)svc, &(struct steer_probe_step){ slots[0], gen, 0, now - 1 },
			  1) == 1,
	      "not applied: %s", err);
	CHECK(w->step_ns == 0 && w->last_rx_ns == now - 1, "a first packet: step %llu, last %llu",
	      (unsigned long long)w->step_ns, (unsigned long long)w->last_rx_ns);
	CHECK(probe_apply((uint32_t)svc,
			  &(struct steer_probe_step){ slots[0], gen, now - STEP_LONG_NS, now },
			  1) == 1,
	      "not applied: %s", err);
	until = w->step_until_ns;
	CHECK(w->step_ns == STEP_LONG_NS && w->last_rx_ns == now && until == now + STEP_LONG_NS,
	      "a 2 s gap: step %llu, last - now %lld, until - now %lld",
	      (unsigned long long)w->step_ns, (long long)(w->last_rx_ns - now),
	      (long long)(until - now));
	pick = probe_pick(&vip_probe, slots, true, &at);
	CHECK(at >= until || pick == 1, "during A's 2 s step the connect went to %d, not B", pick);

	/* Two packets in one run, in order: a 1 ms step after the 2 s one. */
	now = steer_dp_clock_ns();
	{
		struct steer_probe_step two[2] = { { slots[0], gen, 0, now - 1000000 },
						   { slots[0], gen, now - 1000000, now } };

		CHECK(probe_apply((uint32_t)svc, two, 2) == 2, "not applied: %s", err);
	}
	CHECK(w->step_ns == 1000000 && w->step_until_ns == now + 1000000 &&
		      w->step_until_ns < until,
	      "after a 1 ms gap: step %llu, until - now %lld", (unsigned long long)w->step_ns,
	      (long long)(w->step_until_ns - now));
	for (k = 0; k < WAIT_MS && steer_dp_clock_ns() <= w->step_until_ns + TICK_NS; k++)
		usleep(1000);
	/* B holds the last probe's credit; only A's re-keyed leaf shows A free. */
	pick = probe_pick(&vip_probe, slots, false, &at);
	CHECK(pick == 0, "after the short step the connect went to %d, not A", pick);
}

static int setup(void)
{
	if (testenv_init("wirefl") != 0)
		return -1;
	if (responder_start(&r_ref[0], "127.0.6.1:9601", RESP_JSON) != 0 ||
	    responder_start(&r_ref[1], "127.0.6.2:9602", RESP_JSON) != 0 ||
	    responder_start(&r_ref[2], "127.0.6.3:9603", RESP_JSON) != 0 ||
	    responder_start(&r_json[0], "127.0.6.4:9604", RESP_JSON) != 0 ||
	    responder_start(&r_json[1], "127.0.6.5:9605", RESP_JSON) != 0 ||
	    responder_start(&r_sse[0], "127.0.6.6:9606", RESP_SSE) != 0 ||
	    responder_start(&r_sse[1], "127.0.6.7:9607", RESP_SSE) != 0 ||
	    responder_start(&r_step[0], "127.0.6.8:9608", RESP_SSE) != 0 ||
	    responder_start(&r_step[1], "127.0.6.9:9609", RESP_SSE) != 0 ||
	    responder_start(&r_peer[0], "127.0.6.10:9610", RESP_JSON) != 0 ||
	    responder_start(&r_peer[1], "127.0.6.11:9611", RESP_JSON) != 0 ||
	    responder_start(&r_probe[0], "127.0.6.12:9612", RESP_JSON) != 0 ||
	    responder_start(&r_probe[1], "127.0.6.13:9613", RESP_JSON) != 0)
		return -1;
	steer_addr_parse("127.0.0.122:8301", &vip_ref, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8302", &vip_json, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8303", &vip_sse, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8304", &vip_step, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8305", &vip_peer, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8306", &vip_probe, err, sizeof(err));
	return wire_dp_open();
}

int main(void)
{
	struct responder *all[] = { &r_ref[0],	&r_ref[1],   &r_ref[2],	 &r_json[0], &r_json[1],
				    &r_sse[0],	&r_sse[1],   &r_step[0], &r_step[1], &r_peer[0],
				    &r_peer[1], &r_probe[0], &r_probe[1] };
	size_t i;

	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_the_kernel_picks_what_steer_select_at_picks);
	TAP_RUN(test_a_large_json_request_keeps_a_busy_only_for_its_tokens);
	TAP_RUN(test_a_streaming_answer_caps_the_busy_time);
	TAP_RUN(test_the_step_cadence_avoids_a_backend_until_its_step_ends);
	TAP_RUN(test_another_routers_request_keeps_new_connections_away);
	TAP_RUN(test_the_probes_packets_set_the_step_cadence);
	wire_dp_close();
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		responder_stop(all[i]);
	return tap_done();
}
