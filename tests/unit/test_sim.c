// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_sim.c - the routing-quality simulator (tools/sim): its bookkeeping
 * (work is conserved, no worker beats its rate), its determinism, and that
 * each policy does what it claims, the smg-steer one through the very
 * steer_select() and policy module the daemon and the kernel use.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"
#include "sim_testlib.h"
#include "tap.h"

static void test_work_is_conserved(void)
{
	struct sim_config c;
	struct sim_result r;
	double in, out;
	uint32_t i;

	/* Stop at the last arrival, with queues still full, under a policy
	 * that overloads the slow workers, and with less KV than the default
	 * (32k: the smallest that holds the largest request plus a margin)
	 * so that preemptions re-queue work too. */
	small_config(&c, SIM_POL_RR);
	c.drain = false;
	c.load = 0.9;
	c.kv_tokens = 32768;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.arrived == c.warmup + c.requests, "arrived %llu", (unsigned long long)r.arrived);
	CHECK(r.queued_tokens_end > 0, "the test needs work left at the end");
	CHECK(r.recompute_tokens > 0, "the test needs preemptions");
	in = r.arrived_tokens + r.recompute_tokens;
	out = r.served_tokens + r.queued_tokens_end;
	CHECK(fabs(in - out) <= 1e-6 * in, "arrived+recompute %.3f != served+queued %.3f", in, out);
	for (i = 0; i < r.workers; i++)
		CHECK(r.w[i].served_tokens <= r.w[i].rate * r.end_s * (1 + 1e-9),
		      "worker %u served %.1f tokens in %.1f s at %.1f tokens/s", i,
		      r.w[i].served_tokens, r.end_s, r.w[i].rate);
	/* With drain, every measured request gets its wait. */
	c.drain = true;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.measured == c.requests, "measured %llu", (unsigned long long)r.measured);
}

static void test_busy_worker_serves_at_its_rate(void)
{
	struct sim_config c;
	struct sim_result r;
	uint32_t i;

	/* Round robin at 90 % overloads the slowest workers for the whole
	 * run: with memory to spare (nothing blocks admission) they must have
	 * worked at their rate, and no faster. */
	small_config(&c, SIM_POL_RR);
	c.drain = false;
	c.load = 0.9;
	c.kv_tokens = 1u << 30;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.preemptions == 0, "preemptions with unbounded memory");
	for (i = 0; i < r.workers; i++) {
		if (r.w[i].speed > 0.5)
			continue;
		CHECK(r.w[i].served_tokens > 0.95 * r.w[i].rate * r.end_s &&
			      r.w[i].served_tokens <= r.w[i].rate * r.end_s * (1 + 1e-9),
		      "slowest worker served %.0f of %.0f", r.w[i].served_tokens,
		      r.w[i].rate * r.end_s);
	}
}

static void test_oracle_has_the_lowest_mean_wait(void)
{
	static const enum sim_policy others[] = { SIM_POL_RR,  SIM_POL_RANDOM,	 SIM_POL_JSQ,
						  SIM_POL_P2C, SIM_POL_REQCOUNT, SIM_POL_STEER };
	struct sim_config c;
	struct sim_result oracle, r;
	size_t i;

	small_config(&c, SIM_POL_ORACLE);
	CHECK(run(&c, &oracle) == 0, "run failed");
	CHECK(oracle.mean_s > 0, "the oracle waited for nothing: the scenario is too light");
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		c.policy = others[i];
		CHECK(run(&c, &r) == 0, "run failed");
		CHECK(oracle.mean_s <= r.mean_s, "oracle mean %.4f s > %s mean %.4f s",
		      oracle.mean_s, sim_policy_name(others[i]), r.mean_s);
	}
}

static void test_same_seed_same_output(void)
{
	struct sim_config c;
	struct sim_result a, b;
	char ra[512], rb[512];
	uint32_t i;

	small_config(&c, SIM_POL_STEER);
	c.routers = 4;
	c.knobs.peer_routers = 4;
	CHECK(run(&c, &a) == 0 && run(&c, &b) == 0, "run failed");
	csv_of(&c, &a, ra, sizeof(ra));
	csv_of(&c, &b, rb, sizeof(rb));
	CHECK(strcmp(ra, rb) == 0, "same seed, different rows:\n# %s\n# %s", ra, rb);
	for (i = 0; i < a.workers; i++)
		CHECK(a.w[i].dispatched == b.w[i].dispatched &&
			      a.w[i].backlog_s == b.w[i].backlog_s,
		      "worker %u differs", i);
	/* And the seed matters, so the comparison above can fail. */
	c.seed++;
	CHECK(run(&c, &b) == 0, "run failed");
	csv_of(&c, &b, rb, sizeof(rb));
	CHECK(a.mean_s != b.mean_s, "another seed gave the same mean %.6f", a.mean_s);
}

/* ---- Router level --------------------------------------------------------- */

/* A valid snapshot with queued tokens and a throughput. */

static struct sim_router *steer_router(uint32_t workers)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = workers;
	c.policy = SIM_POL_STEER;
	c.estimator = SIM_EST_FLAT; /* one flat credit per connection */
	return sim_router_new(&c, 0);
}

static void test_steer_picks_through_steer_select_with_early_exit(void)
{
	/* Base waits at 2000 tokens/s: worker 2 idle, 1 at 10 ms, 3 at 20 ms,
	 * 0 at 5 s. One credit (1024 tokens) costs 512 ms. */
	struct sim_snapshot s[4] = { snap(10000, 2000), snap(20, 2000), snap(0, 2000),
				     snap(40, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router *r = steer_router(4);
	const struct steer_table *t;
	struct sim_router_stats st;
	uint32_t first, second;

	CHECK(r, "no memory");
	first = sim_router_pick(r, &obs);
	t = sim_router_table(r);
	sim_router_get_stats(r, &st);
	CHECK(first == 2, "first pick %u, want the idle worker 2", first);
	/* The table is the policy's scores sorted by base wait. */
	CHECK(t->n == 4 && t->e[0].slot == 2 && t->e[1].slot == 1 && t->e[2].slot == 3 &&
		      t->e[3].slot == 0,
	      "table order %u %u %u %u", t->e[0].slot, t->e[1].slot, t->e[2].slot, t->e[3].slot);
	CHECK(t->e[1].base_wait_ns == 10000000 && t->e[1].ns_per_token == 500000,
	      "base %llu npt %llu", (unsigned long long)t->e[1].base_wait_ns,
	      (unsigned long long)t->e[1].ns_per_token);
	CHECK(t->credit_tokens == STEER_DEFAULT_CREDIT_TOKENS, "credit %u", t->credit_tokens);
	/* Early exit: worker 1's base (10 ms) already reaches the best score 0. */
	CHECK(st.steer_selects == 1 && st.steer_scanned == 1, "selects %llu scanned %llu",
	      (unsigned long long)st.steer_selects, (unsigned long long)st.steer_scanned);
	CHECK(sim_router_inflight_tokens(r, 2) == 1024, "credit not applied");
	/* Worker 2 now costs 512 ms: worker 1 (10 ms) wins, and the scan
	 * stops at worker 3 (base 20 ms >= best 10 ms): two of four examined. */
	second = sim_router_pick(r, &obs);
	sim_router_get_stats(r, &st);
	CHECK(second == 1, "second pick %u, want 1", second);
	CHECK(st.steer_scanned == 1 + 2, "scanned %llu, want 3 (early exits)",
	      (unsigned long long)st.steer_scanned);
	CHECK(st.rebuilds == 1, "the table was rebuilt without a snapshot");
	sim_router_free(r);
}

static void test_steer_water_fills_between_polls(void)
{
	struct sim_snapshot s[4] = { snap(0, 2000), snap(0, 2000), snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router *r = steer_router(4);
	bool seen[4] = { false };
	struct sim_router_stats st;
	uint32_t i, w;

	CHECK(r, "no memory");
	/* Identical idle workers: the credits spread consecutive arrivals. */
	for (i = 0; i < 4; i++) {
		w = sim_router_pick(r, &obs);
		sim_router_dispatched(r, w);
		CHECK(!seen[w], "arrival %u went to worker %u again", i, w);
		seen[w] = true;
	}
	/* A fresh snapshot of worker 3 drains its credit: it is first again. */
	sim_router_snapshot_taken(r, 3, 0);
	CHECK(sim_router_inflight_tokens(r, 3) == 0, "credit survived the poll");
	CHECK(sim_router_inflight_tokens(r, 0) == 1024, "another worker's credit was drained");
	w = sim_router_pick(r, &obs);
	CHECK(w == 3, "after the poll: worker %u, want 3", w);
	sim_router_get_stats(r, &st);
	CHECK(st.rebuilds == 2, "rebuilds %llu", (unsigned long long)st.rebuilds);
	sim_router_free(r);
}

static void test_steer_peer_routers_scale_the_credit(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_config c;
	struct sim_router *r;
	uint32_t w;

	sim_config_defaults(&c);
	c.workers = 2;
	c.policy = SIM_POL_STEER;
	c.routers = 16;
	c.knobs.peer_routers = 16;
	c.estimator = SIM_EST_FLAT;
	r = sim_router_new(&c, 3);
	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	CHECK(sim_router_inflight_tokens(r, w) == 16 * 1024, "credit %llu",
	      (unsigned long long)sim_router_inflight_tokens(r, w));
	sim_router_free(r);
}

static void test_steer_run_uses_the_kernel_path(void)
{
	struct sim_config c;
	struct sim_result r;

	small_config(&c, SIM_POL_STEER);
	c.requests = 5000;
	c.warmup = 0;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.routers.steer_selects == r.routers.picks && r.routers.picks == r.arrived,
	      "picks %llu selects %llu", (unsigned long long)r.routers.picks,
	      (unsigned long long)r.routers.steer_selects);
	/* One rebuild per poll (polls are simultaneous), plus the first. */
	CHECK(r.routers.rebuilds >= r.window_s / c.poll_s - 2 &&
		      r.routers.rebuilds <= r.end_s / c.poll_s + 2,
	      "rebuilds %llu over %.0f s", (unsigned long long)r.routers.rebuilds, r.end_s);
	CHECK(r.routers.steer_scanned < r.routers.steer_selects * c.workers,
	      "early exit never happened");
}

static void test_round_robin_cycles(void)
{
	struct sim_snapshot s[5] = { 0 };
	struct sim_observation obs = { .snap = s };
	struct sim_config c;
	struct sim_router *r;
	uint32_t count[5] = { 0 }, prev, i, w;

	sim_config_defaults(&c);
	c.workers = 5;
	c.policy = SIM_POL_RR;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	prev = sim_router_pick(r, &obs);
	count[prev]++;
	for (i = 1; i < 15; i++) {
		w = sim_router_pick(r, &obs);
		CHECK(w == (prev + 1) % 5, "pick %u: %u after %u", i, w, prev);
		count[w]++;
		prev = w;
	}
	for (i = 0; i < 5; i++)
		CHECK(count[i] == 3, "worker %u got %u of 15", i, count[i]);
	sim_router_free(r);
}

static void test_jsq_and_p2c_read_their_signals(void)
{
	struct sim_snapshot s[3] = { snap(0, 2000), snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_config c;
	struct sim_router *r;
	uint32_t i, w, picks_of_2[2] = { 0, 0 };

	sim_config_defaults(&c);
	c.workers = 3;
	c.policy = SIM_POL_JSQ;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	sim_router_dispatched(r, 0);
	sim_router_dispatched(r, 2);
	w = sim_router_pick(r, &obs);
	CHECK(w == 1, "jsq picked %u, the only one with no live request is 1", w);
	sim_router_free(r);

	/* p2c: worker 0 has 5 waiting in its snapshot; 1 has 3 dispatched
	 * since; 2 has 1 dispatched since. Every pair must pick its shorter. */
	c.policy = SIM_POL_P2C;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	s[0].load.waiting_reqs = 5;
	for (i = 0; i < 3; i++)
		sim_router_dispatched(r, 1);
	sim_router_dispatched(r, 2);
	for (i = 0; i < 300; i++) {
		w = sim_router_pick(r, &obs);
		CHECK(w != 0, "p2c picked the longest queue");
		picks_of_2[0] += w == 2;
	}
	/* A fresh snapshot of 1 forgets its dispatches: 1 now beats 2. */
	sim_router_snapshot_taken(r, 1, 0);
	for (i = 0; i < 300; i++) {
		w = sim_router_pick(r, &obs);
		CHECK(w != 0, "p2c picked the longest queue");
		picks_of_2[1] += w == 2;
	}
	/* Worker 2 wins two pairs of three before, one after. */
	CHECK(picks_of_2[0] > 150 && picks_of_2[1] < 150, "worker 2 picked %u then %u times",
	      picks_of_2[0], picks_of_2[1]);
	sim_router_free(r);
}

static void test_size_distribution_means(void)
{
	static const enum sim_dist d[] = { SIM_DIST_BIMODAL, SIM_DIST_LOGNORMAL, SIM_DIST_UNIFORM };
	struct sim_rng rng;
	size_t k;
	int i;

	for (k = 0; k < 3; k++) {
		double sum = 0, want = sim_dist_mean(d[k]);
		const int n = 400000;

		sim_rng_seed(&rng, 3, 99);
		for (i = 0; i < n; i++) {
			uint32_t p = sim_draw_prompt(&rng, d[k]);

			CHECK(p >= 1 && p <= SIM_PROMPT_CAP, "prompt %u", p);
			sum += p;
		}
		CHECK(fabs(sum / n - want) < 0.02 * want, "%s: sample mean %.1f, model mean %.1f",
		      sim_dist_name(d[k]), sum / n, want);
	}
}

static void test_quantiles_and_cov(void)
{
	double v[100], same[4] = { 2, 2, 2, 2 }, two[2] = { 1, 3 };
	int i;

	for (i = 0; i < 100; i++)
		v[i] = i + 1;
	CHECK(sim_quantile(v, 100, 0.5) == 50, "p50 %g", sim_quantile(v, 100, 0.5));
	CHECK(sim_quantile(v, 100, 0.99) == 99, "p99 %g", sim_quantile(v, 100, 0.99));
	CHECK(sim_quantile(v, 100, 0.999) == 100, "p99.9 %g", sim_quantile(v, 100, 0.999));
	CHECK(sim_cov(same, 4) == 0, "cov of equal values");
	CHECK(fabs(sim_cov(two, 2) - 0.5) < 1e-12, "cov {1,3} %g", sim_cov(two, 2));
}

/* ---- The wire estimators, keep-alive, the batching engine ---------------- */

static struct sim_router *estimator_router(uint32_t workers, enum sim_estimator est)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = workers;
	c.policy = SIM_POL_STEER;
	c.estimator = est;
	return sim_router_new(&c, 0);
}

static void test_wire_credit_counts_every_keepalive_request(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router *flat = estimator_router(2, SIM_EST_FLAT);
	struct sim_router *wire = estimator_router(2, SIM_EST_CREDIT);
	uint32_t wf, ww;

	CHECK(flat && wire, "no memory");
	/* One connection, three requests on it (keep-alive): 100, 200, 6000. */
	wf = sim_router_pick(flat, &obs);
	ww = sim_router_pick(wire, &obs);
	sim_router_connected(flat, wf);
	sim_router_connected(wire, ww);
	CHECK(sim_router_inflight_tokens(wire, ww) == 1024,
	      "before its first send a connection holds the flat credit, got %llu",
	      (unsigned long long)sim_router_inflight_tokens(wire, ww));
	sim_router_sent(flat, wf, 100, true, 0.1);
	sim_router_sent(wire, ww, 100, true, 0.1);
	CHECK(sim_router_inflight_tokens(wire, ww) == 100, "first send: %llu, want 100",
	      (unsigned long long)sim_router_inflight_tokens(wire, ww));
	sim_router_sent(flat, wf, 200, false, 0.2);
	sim_router_sent(wire, ww, 200, false, 0.2);
	sim_router_sent(flat, wf, 6000, false, 0.3);
	sim_router_sent(wire, ww, 6000, false, 0.3);
	CHECK(sim_router_inflight_tokens(wire, ww) == 6300, "wire-credit %llu, want 6300",
	      (unsigned long long)sim_router_inflight_tokens(wire, ww));
	CHECK(sim_router_inflight_tokens(flat, wf) == 1024, "flat credit %llu, want one credit",
	      (unsigned long long)sim_router_inflight_tokens(flat, wf));
	/* Both drain at the poll. */
	sim_router_snapshot_taken(wire, ww, 0.5);
	CHECK(sim_router_inflight_tokens(wire, ww) == 0, "wire-credit survived the poll");
	sim_router_free(flat);
	sim_router_free(wire);
}

static void test_pending_is_added_at_send_and_removed_at_answer(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router *r = estimator_router(2, SIM_EST_PENDING);
	uint32_t w;

	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	sim_router_connected(r, w);
	sim_router_sent(r, w, 300, true, 0);
	sim_router_sent(r, w, 5000, false, 0);
	CHECK(sim_router_pending_tokens(r, w) == 5300, "pending %llu",
	      (unsigned long long)sim_router_pending_tokens(r, w));
	/* A poll does not drain pending work: it is real time. */
	sim_router_snapshot_taken(r, w, 1);
	CHECK(sim_router_inflight_tokens(r, w) == 5300, "slot %llu after a poll",
	      (unsigned long long)sim_router_inflight_tokens(r, w));
	sim_router_answered(r, w, 300, 2);
	CHECK(sim_router_inflight_tokens(r, w) == 5000, "slot %llu after one answer",
	      (unsigned long long)sim_router_inflight_tokens(r, w));
	sim_router_answered(r, w, 5000, 3);
	CHECK(sim_router_pending_tokens(r, w) == 0 && sim_router_inflight_tokens(r, w) == 0,
	      "pending %llu after every answer",
	      (unsigned long long)sim_router_pending_tokens(r, w));
	sim_router_free(r);
}

static void test_fluid_drains_at_the_published_rate_capped_by_pending(void)
{
	/* Worker 0 publishes 2000 tokens/s: 2000 tokens sent at t = 10 s are
	 * 1000 at 10.5 s and 0 from 11 s on; an answer caps E at what is
	 * still pending. */
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s, .now = 10 };
	struct sim_router *r = estimator_router(2, SIM_EST_FLUID);
	uint32_t w;
	uint64_t v;

	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	sim_router_connected(r, w);
	sim_router_sent(r, w, 2000, true, 10);
	v = sim_router_slot_tokens_at(r, w, 10.5);
	CHECK(v == 1000, "E at 10.5 s: %llu, want 1000", (unsigned long long)v);
	v = sim_router_slot_tokens_at(r, w, 12);
	CHECK(v == 0, "E at 12 s: %llu, want 0", (unsigned long long)v);
	/* Two requests queue (FIFO): 4000 + 4000 at 20 s. The first is
	 * answered at 21 s, early: E may not exceed the 4000 left pending. */
	sim_router_sent(r, w, 4000, false, 20);
	sim_router_sent(r, w, 4000, false, 20);
	sim_router_answered(r, w, 2000, 20); /* the first request, long done */
	v = sim_router_slot_tokens_at(r, w, 20);
	CHECK(v == 8000, "E at 20 s: %llu, want 8000", (unsigned long long)v);
	sim_router_answered(r, w, 4000, 21);
	v = sim_router_slot_tokens_at(r, w, 21);
	CHECK(v == 4000, "E after an answer: %llu, want the 4000 pending", (unsigned long long)v);
	v = sim_router_slot_tokens_at(r, w, 22);
	CHECK(v == 2000, "E at 22 s: %llu, want 2000", (unsigned long long)v);
	sim_router_free(r);
}

static void test_snapshot_share_is_not_counted_twice(void)
{
	/* Worker 0 reports 5000 queued tokens; 3000 of them are this
	 * router's, still pending (and unserved) when the poll was taken.
	 * pending and fluid count the queue once: 2000 from the snapshot
	 * (other routers') + 3000 in real time; the plain sum counts 8000. */
	static const enum sim_estimator est[] = { SIM_EST_PENDING, SIM_EST_FLUID, SIM_EST_SUM };
	static const double want_queued[] = { 2000, 2000, 5000 };
	size_t k;

	for (k = 0; k < 3; k++) {
		struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
		struct sim_observation obs = { .snap = s, .now = 0 };
		struct sim_router *r = estimator_router(2, est[k]);
		const struct steer_table *t;
		uint64_t base = 0, slot;
		uint32_t i, w;

		CHECK(r, "no memory");
		w = sim_router_pick(r, &obs);
		sim_router_connected(r, w);
		sim_router_sent(r, w, 3000, true, 0);
		s[w] = snap(5000, 2000);
		sim_router_snapshot_taken(r, w, 0);
		sim_router_snapshot_taken(r, 1 - w, 0);
		obs.now = 0;
		sim_router_pick(r, &obs); /* rebuilds the table */
		t = sim_router_table(r);
		for (i = 0; i < t->n; i++)
			if (t->e[i].slot == w)
				base = t->e[i].base_wait_ns;
		slot = sim_router_slot_tokens_at(r, w, 0);
		CHECK(base == (uint64_t)(want_queued[k] * 500000),
		      "%s: base %llu ns, want %.0f tokens' worth", sim_estimator_name(est[k]),
		      (unsigned long long)base, want_queued[k]);
		CHECK(slot >= 3000 && slot < 3000 + 1024 + 1, "%s: in flight %llu",
		      sim_estimator_name(est[k]), (unsigned long long)slot);
		sim_router_free(r);
	}
}

/* Run to completion: every request answered and finished. */
static void complete_config(struct sim_config *c, enum sim_engine e, enum sim_response resp,
			    uint32_t keepalive)
{
	small_config(c, SIM_POL_STEER);
	c->requests = e == SIM_ENGINE_BATCH ? 4000 : 8000;
	c->warmup = 400;
	c->engine = e;
	c->response = resp;
	c->keepalive = keepalive;
	c->complete = true;
}

static void test_every_request_counted_and_pending_returns_to_zero(void)
{
	static const uint32_t ka[] = { 1, 4 };
	int e, resp;
	size_t k;

	for (e = 0; e < SIM_ENGINE_COUNT; e++)
		for (resp = 0; resp < SIM_RESP_COUNT; resp++)
			for (k = 0; k < 2; k++) {
				struct sim_config c;
				struct sim_result r;
				double total;

				complete_config(&c, (enum sim_engine)e, (enum sim_response)resp,
						ka[k]);
				CHECK(run(&c, &r) == 0, "run failed");
				total = (double)(c.warmup + c.requests);
				CHECK(r.finished == r.arrived && r.answered == r.arrived &&
					      r.arrived == total,
				      "%s/%s/ka %u: arrived %llu answered %llu finished %llu",
				      sim_engine_name(c.engine), sim_response_name(c.response),
				      c.keepalive, (unsigned long long)r.arrived,
				      (unsigned long long)r.answered,
				      (unsigned long long)r.finished);
				/* Keep-alive: fewer connections, every request counted. */
				CHECK(c.keepalive == 1
					      ? r.connections == r.arrived
					      : r.connections < r.arrived &&
							r.connections * c.keepalive >= r.arrived,
				      "ka %u: %llu connections for %llu requests", c.keepalive,
				      (unsigned long long)r.connections,
				      (unsigned long long)r.arrived);
				CHECK((double)r.routers.sent_tokens == r.arrived_tokens,
				      "sent %llu tokens, arrived %.0f",
				      (unsigned long long)r.routers.sent_tokens, r.arrived_tokens);
				CHECK(r.routers.answered_tokens == r.routers.sent_tokens &&
					      r.routers.pending_tokens == 0,
				      "%s/%s/ka %u: pending %llu at the end",
				      sim_engine_name(c.engine), sim_response_name(c.response),
				      c.keepalive, (unsigned long long)r.routers.pending_tokens);
			}
}

static void test_counters_do_not_depend_on_the_policy(void)
{
	struct sim_config c;
	struct sim_result r;

	/* The kernel counts what crosses the wire whatever picks the backend. */
	complete_config(&c, SIM_ENGINE_FIFO, SIM_RESP_FULL, 4);
	c.policy = SIM_POL_JSQ;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK((double)r.routers.sent_tokens == r.arrived_tokens &&
		      r.routers.answered_tokens == r.routers.sent_tokens &&
		      r.routers.pending_tokens == 0,
	      "jsq: sent %llu answered %llu pending %llu of %.0f",
	      (unsigned long long)r.routers.sent_tokens,
	      (unsigned long long)r.routers.answered_tokens,
	      (unsigned long long)r.routers.pending_tokens, r.arrived_tokens);
}

static void test_pending_mid_run_equals_unanswered_work(void)
{
	int resp;

	for (resp = 0; resp < SIM_RESP_COUNT; resp++) {
		struct sim_config c;
		struct sim_result r;

		complete_config(&c, SIM_ENGINE_FIFO, (enum sim_response)resp, 4);
		c.complete = false;
		c.drain = false; /* stop at the last arrival, requests in flight */
		CHECK(run(&c, &r) == 0, "run failed");
		CHECK(r.routers.pending_tokens > 0, "nothing pending mid-run");
		CHECK((double)r.routers.pending_tokens == r.arrived_tokens - r.answered_tokens,
		      "%s: routers' pending %llu, unanswered %.0f", sim_response_name(c.response),
		      (unsigned long long)r.routers.pending_tokens,
		      r.arrived_tokens - r.answered_tokens);
	}
}

static void test_batch_engine_respects_its_limits(void)
{
	struct sim_config c;
	struct sim_result r;
	double in, out;
	uint32_t i, most = 0;

	/* Round robin overloads the slow workers; a narrow batch and a small
	 * KV make both limits bind. */
	small_config(&c, SIM_POL_RR);
	c.engine = SIM_ENGINE_BATCH;
	c.requests = 6000;
	c.warmup = 600;
	c.load = 0.9;
	c.drain = false;
	c.batch.max_running = 12;
	c.batch.kv_tokens = 32768;
	CHECK(run(&c, &r) == 0, "run failed");
	for (i = 0; i < r.workers; i++) {
		CHECK(r.w[i].max_running <= 12, "worker %u ran %u at once", i, r.w[i].max_running);
		CHECK(r.w[i].max_kv_used <= 32768, "worker %u admitted up to %u KV tokens", i,
		      r.w[i].max_kv_used);
		CHECK(r.w[i].served_tokens <= 8000 * r.w[i].speed * r.end_s * (1 + 1e-9),
		      "worker %u prefilled faster than its rate", i);
		if (r.w[i].max_running > most)
			most = r.w[i].max_running;
	}
	CHECK(most == 12, "no worker filled its batch (most %u)", most);
	CHECK(r.queued_tokens_end > 0, "the test needs work left at the end");
	in = r.arrived_tokens;
	out = r.served_tokens + r.queued_tokens_end;
	CHECK(fabs(in - out) <= 1e-6 * in, "arrived %.0f != prefilled + left %.0f", in, out);
}

static void test_batch_capacity_is_measured_once_and_below_nominal(void)
{
	struct sim_config c;
	double a, b;

	sim_config_defaults(&c);
	c.engine = SIM_ENGINE_BATCH;
	a = sim_batch_capacity(&c);
	b = sim_batch_capacity(&c);
	/* Decode shares the steps: below the 8000 tokens/s of prefill alone,
	 * and well above nothing. */
	CHECK(a == b, "capacity not deterministic: %f then %f", a, b);
	CHECK(a > 0.4 * 8000 && a < 8000, "capacity %.0f tokens/s", a);
	c.batch.capacity_tps = 1234;
	CHECK(sim_batch_capacity(&c) == 1234, "a configured capacity is not used");
}

/* p99 of one estimator on a small headline-like run. */
static double p99_of(enum sim_engine e, enum sim_response resp, enum sim_policy p,
		     enum sim_estimator est)
{
	struct sim_config c;
	struct sim_result r;

	small_config(&c, p);
	c.workers = 8;
	c.requests = e == SIM_ENGINE_BATCH ? 8000 : 20000;
	c.engine = e;
	c.response = resp;
	c.estimator = est;
	if (run(&c, &r))
		return -1;
	return r.p99_s;
}

static void test_headline_ordering_of_estimators(void)
{
	int e;

	for (e = 0; e < SIM_ENGINE_COUNT; e++) {
		enum sim_engine en = (enum sim_engine)e;
		double oracle = p99_of(en, SIM_RESP_STREAM, SIM_POL_ORACLE, SIM_EST_FLAT);
		double jsq = p99_of(en, SIM_RESP_STREAM, SIM_POL_JSQ, SIM_EST_FLAT);
		double flat = p99_of(en, SIM_RESP_STREAM, SIM_POL_STEER, SIM_EST_FLAT);
		double fluid_s = p99_of(en, SIM_RESP_STREAM, SIM_POL_STEER, SIM_EST_FLUID);
		double fluid_f = p99_of(en, SIM_RESP_FULL, SIM_POL_STEER, SIM_EST_FLUID);
		double pend_s = p99_of(en, SIM_RESP_STREAM, SIM_POL_STEER, SIM_EST_PENDING);
		double pend_f = p99_of(en, SIM_RESP_FULL, SIM_POL_STEER, SIM_EST_PENDING);

		printf("# %s p99: oracle %.3f jsq %.3f flat %.3f pending %.3f/%.3f fluid "
		       "%.3f/%.3f (stream/full)\n",
		       sim_engine_name(en), oracle, jsq, flat, pend_s, pend_f, fluid_s, fluid_f);
		CHECK(oracle >= 0 && oracle <= fluid_s, "oracle %.3f > fluid %.3f", oracle,
		      fluid_s);
		CHECK(fluid_s < flat && fluid_f < flat, "fluid %.3f/%.3f not below flat %.3f",
		      fluid_s, fluid_f, flat);
		CHECK(fluid_s < jsq, "fluid %.3f not below jsq %.3f", fluid_s, jsq);
		/* Only on the FIFO engine does the flat credit beat JSQ: with
		 * batching a prefill hides among running requests, which the
		 * snapshot's waiting queue does not show. */
		if (en == SIM_ENGINE_FIFO)
			CHECK(flat < jsq, "flat %.3f not below jsq %.3f", flat, jsq);
		/* Non-streaming answers arrive at the end: pending then counts
		 * decoding requests, the time drain does not. */
		CHECK(fluid_f < pend_f, "full responses: fluid %.3f not below pending %.3f",
		      fluid_f, pend_f);
		CHECK(pend_s < flat, "streaming: pending %.3f not below flat %.3f", pend_s, flat);
	}
}

/* ---- The step cadence on the wire ------------------------------------------ */

static struct sim_router *cadence_router(enum sim_step_cadence k)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = 2;
	c.policy = SIM_POL_STEER;
	c.estimator = SIM_EST_FLUID;
	c.step_cadence = k;
	return sim_router_new(&c, 0);
}

/* Slot tokens at t within [lo, lo + 1] (the slot holds whole tokens). */
static bool tokens_near(struct sim_router *r, uint32_t w, double t, double lo)
{
	uint64_t v = sim_router_slot_tokens_at(r, w, t);

	if ((double)v >= lo - 1e-6 && (double)v <= lo + 1 + 1e-6)
		return true;
	printf("# at %.3f s: %llu tokens, want %.0f\n", t, (unsigned long long)v, lo);
	return false;
}

static void test_step_cadence_predicts_the_rest_of_the_step(void)
{
	/* 2000 tokens/s published: 1 ms is 2 tokens. One request of 100
	 * tokens streams its answer: packets at 0.50 s and 0.52 s are two
	 * step ends, so a step lasts 20 ms and the one under way ends at
	 * 0.54 s. */
	static const enum sim_step_cadence k[] = { SIM_CAD_OFF, SIM_CAD_MAX, SIM_CAD_SUM,
						   SIM_CAD_PERIODIC };
	/* Slot tokens at 0.53 s (E = 0: rest 10 ms = 20 tokens), after 100
	 * more tokens at 0.53 s (E = 100), and at 0.55 s (E = 60; the
	 * predicted step end has passed: periodic assumes the next one,
	 * 10 ms away). */
	static const double at053[] = { 0, 20, 20, 20 }, more[] = { 100, 100, 120, 120 },
			    at055[] = { 60, 60, 60, 80 };
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	size_t i;

	for (i = 0; i < 4; i++) {
		struct sim_observation obs = { .snap = s, .now = 0 };
		struct sim_router *r = cadence_router(k[i]);
		uint32_t w;

		CHECK(r, "no memory");
		w = sim_router_pick(r, &obs);
		sim_router_connected(r, w);
		sim_router_sent(r, w, 100, true, 0);
		sim_router_answered(r, w, 100, 0.5); /* its first token: streaming */
		sim_router_rx(r, w, 0.5);
		CHECK(sim_router_step_estimate(r, w) == 0, "a step length from one packet");
		sim_router_rx(r, w, 0.52);
		sim_router_rx(r, w, 0.52); /* another packet of the same step end */
		CHECK(fabs(sim_router_step_estimate(r, w) - 0.02) < 1e-12 &&
			      sim_router_last_rx(r, w) == 0.52,
		      "step %.6f s, last packet %.3f s", sim_router_step_estimate(r, w),
		      sim_router_last_rx(r, w));
		CHECK(tokens_near(r, w, 0.53, at053[i]), "%s at 0.53 s", sim_cadence_name(k[i]));
		sim_router_sent(r, w, 100, false, 0.53);
		CHECK(tokens_near(r, w, 0.53, more[i]), "%s after a send", sim_cadence_name(k[i]));
		CHECK(tokens_near(r, w, 0.55, at055[i]), "%s at 0.55 s", sim_cadence_name(k[i]));
		sim_router_free(r);
	}
}

static void test_step_cadence_needs_a_response_in_progress(void)
{
	/* Full responses: each answer is also the request's end, so the gap
	 * between two packets may span many steps: no step length. */
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s, .now = 0 };
	struct sim_router *r = cadence_router(SIM_CAD_MAX);
	uint32_t w, j;

	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	for (j = 0; j < 3; j++) {
		sim_router_connected(r, w);
		sim_router_sent(r, w, 100, j == 0, 0.1 * j);
		sim_router_answered(r, w, 100, 0.5 + 0.1 * j);
		sim_router_finished(r, w);
		sim_router_rx(r, w, 0.5 + 0.1 * j);
	}
	CHECK(sim_router_step_estimate(r, w) == 0 && sim_router_last_rx(r, w) == 0.7,
	      "step %.3f s from completions, last packet %.3f s", sim_router_step_estimate(r, w),
	      sim_router_last_rx(r, w));
	CHECK(sim_router_slot_tokens_at(r, w, 0.71) == 0, "a step term without a step length");
	sim_router_free(r);
}

static void test_streaming_routers_see_every_step_end(void)
{
	static const uint32_t routers[] = { 1, 16 };
	size_t k;
	int resp;

	/* Stop mid-run, batches full: every router with a request decoding
	 * on a worker has seen that worker's last step end when streaming;
	 * with full responses only those with a completion there. */
	for (resp = 0; resp < SIM_RESP_COUNT; resp++)
		for (k = 0; k < 2; k++) {
			struct sim_config c;
			struct sim_result r;

			small_config(&c, SIM_POL_STEER);
			c.engine = SIM_ENGINE_BATCH;
			c.response = (enum sim_response)resp;
			c.routers = routers[k];
			c.knobs.peer_routers = routers[k];
			c.step_cadence = SIM_CAD_MAX;
			c.requests = 3000;
			c.warmup = 300;
			c.drain = false;
			CHECK(run(&c, &r) == 0, "run failed");
			CHECK(r.rx_pairs >= c.workers, "%u routers: %llu pairs to check", c.routers,
			      (unsigned long long)r.rx_pairs);
			if (c.response == SIM_RESP_STREAM)
				CHECK(r.rx_at_step_end == r.rx_pairs,
				      "streaming, %u routers: %llu of %llu saw the last step end",
				      c.routers, (unsigned long long)r.rx_at_step_end,
				      (unsigned long long)r.rx_pairs);
			else
				CHECK(r.rx_at_step_end < r.rx_pairs,
				      "full, %u routers: %llu of %llu saw the last step end",
				      c.routers, (unsigned long long)r.rx_at_step_end,
				      (unsigned long long)r.rx_pairs);
		}
}

/* p99 wait of smg-steer with a step cadence on a small batching run. */
static double cadence_p99(enum sim_response resp, enum sim_policy p, enum sim_step_cadence k,
			  bool probe)
{
	struct sim_config c;
	struct sim_result r;

	/* The headline's 16 workers: with 8 the prefill queue, not the
	 * step, makes the tail. */
	small_config(&c, p);
	c.workers = 16;
	c.engine = SIM_ENGINE_BATCH;
	c.response = resp;
	c.requests = 10000;
	c.step_cadence = k;
	c.step_probe = probe;
	if (run(&c, &r))
		return -1;
	return r.p99_s;
}

static void test_step_cadence_cuts_the_batching_p99_when_streaming(void)
{
	double oracle = cadence_p99(SIM_RESP_STREAM, SIM_POL_ORACLE, SIM_CAD_OFF, false);
	double fluid = cadence_p99(SIM_RESP_STREAM, SIM_POL_STEER, SIM_CAD_OFF, false);
	double max = cadence_p99(SIM_RESP_STREAM, SIM_POL_STEER, SIM_CAD_MAX, false);
	double fluid_full = cadence_p99(SIM_RESP_FULL, SIM_POL_STEER, SIM_CAD_OFF, false);
	double max_full = cadence_p99(SIM_RESP_FULL, SIM_POL_STEER, SIM_CAD_MAX, false);

	printf("# batching p99: oracle %.4f fluid %.4f max %.4f (stream), fluid %.4f max %.4f "
	       "(full)\n",
	       oracle, fluid, max, fluid_full, max_full);
	CHECK(oracle > 0 && max < 0.6 * fluid && max < 1.5 * oracle,
	      "streaming: max %.4f s, fluid %.4f s, oracle %.4f s", max, fluid, oracle);
	/* Full responses show no step: max is fluid, exactly. */
	CHECK(max_full == fluid_full, "full: max %.4f s, fluid %.4f s", max_full, fluid_full);
}

/* --step-probe: with full responses too, every router sees every step end
 * (its probe decodes on every worker); the probes cost the oracle a little;
 * max then cuts the batching p99 as streaming does. The FIFO engine, which
 * has no steps, refuses it. */
static void test_step_probe_shows_every_step_end_with_full_responses(void)
{
	static const uint32_t routers[] = { 1, 4 };
	struct sim_config c;
	struct sim_result r;
	double oracle, oracle_probed, fluid, max;
	char why[160];
	size_t k;

	for (k = 0; k < 2; k++) {
		small_config(&c, SIM_POL_STEER);
		c.engine = SIM_ENGINE_BATCH;
		c.response = SIM_RESP_FULL;
		c.routers = routers[k];
		c.knobs.peer_routers = routers[k];
		c.step_cadence = SIM_CAD_MAX;
		c.step_probe = true;
		c.requests = 3000;
		c.warmup = 300;
		c.drain = false;
		CHECK(run(&c, &r) == 0, "run failed");
		CHECK(r.rx_pairs >= c.workers && r.rx_at_step_end == r.rx_pairs,
		      "full with probes, %u routers: %llu of %llu saw the last step end", c.routers,
		      (unsigned long long)r.rx_at_step_end, (unsigned long long)r.rx_pairs);
	}
	/* One probe per worker for the fleet: every router still sees every
	 * step end. */
	small_config(&c, SIM_POL_STEER);
	c.engine = SIM_ENGINE_BATCH;
	c.response = SIM_RESP_FULL;
	c.routers = c.knobs.peer_routers = 4;
	c.step_cadence = SIM_CAD_MAX;
	c.step_probe = c.step_probe_one = true;
	c.requests = 3000;
	c.warmup = 300;
	c.drain = false;
	CHECK(run(&c, &r) == 0 && r.rx_at_step_end == r.rx_pairs && r.rx_pairs >= c.workers,
	      "one probe per worker, 4 routers: %llu of %llu saw the last step end",
	      (unsigned long long)r.rx_at_step_end, (unsigned long long)r.rx_pairs);
	small_config(&c, SIM_POL_STEER);
	c.step_probe = true; /* the FIFO engine */
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0 && strstr(why, "batching engine"),
	      "the FIFO engine took --step-probe: '%s'", why);

	oracle = cadence_p99(SIM_RESP_FULL, SIM_POL_ORACLE, SIM_CAD_OFF, false);
	oracle_probed = cadence_p99(SIM_RESP_FULL, SIM_POL_ORACLE, SIM_CAD_OFF, true);
	fluid = cadence_p99(SIM_RESP_FULL, SIM_POL_STEER, SIM_CAD_OFF, true);
	max = cadence_p99(SIM_RESP_FULL, SIM_POL_STEER, SIM_CAD_MAX, true);
	printf("# full, probes: oracle %.4f (probed %.4f) fluid %.4f max %.4f\n", oracle,
	       oracle_probed, fluid, max);
	CHECK(oracle > 0 && oracle_probed >= oracle && oracle_probed < 1.2 * oracle,
	      "the probes' cost: oracle %.4f s, with probes %.4f s", oracle, oracle_probed);
	CHECK(max < 0.6 * fluid && max < 1.5 * oracle,
	      "full with probes: max %.4f s, fluid %.4f s, oracle %.4f s", max, fluid, oracle);
}

/* --share-delay-samples: one sample is the constant delay, exactly; samples
 * drawn from two values differ from both constants; without --share-wire the
 * samples are refused. */
static void test_share_delay_samples_draw_each_event(void)
{
	static const double one[] = { 0.002 }, two[] = { 0.0005, 0.05 };
	struct sim_config c;
	struct sim_result konst, drawn, lo, hi;
	char why[160];

	small_config(&c, SIM_POL_STEER);
	c.routers = 4;
	c.share_wire = true;
	c.share_delay_s = 0.002;
	CHECK(run(&c, &konst) == 0, "run failed");
	c.share_delay_s = 0;
	c.share_delays = one;
	c.n_share_delays = 1;
	CHECK(run(&c, &drawn) == 0, "run failed");
	CHECK(drawn.mean_s == konst.mean_s && drawn.p99_s == konst.p99_s,
	      "one sample of 2 ms: mean %.9f p99 %.9f, constant: %.9f %.9f", drawn.mean_s,
	      drawn.p99_s, konst.mean_s, konst.p99_s);
	c.share_delays = two;
	c.n_share_delays = 2;
	CHECK(run(&c, &drawn) == 0, "run failed");
	c.share_delays = NULL;
	c.n_share_delays = 0;
	c.share_delay_s = two[0];
	CHECK(run(&c, &lo) == 0, "run failed");
	c.share_delay_s = two[1];
	CHECK(run(&c, &hi) == 0, "run failed");
	CHECK(drawn.mean_s != lo.mean_s && drawn.mean_s != hi.mean_s,
	      "two samples gave a constant's mean: %.9f (0.5 ms %.9f, 50 ms %.9f)", drawn.mean_s,
	      lo.mean_s, hi.mean_s);
	c.share_wire = false;
	c.share_delays = one;
	c.n_share_delays = 1;
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0 && strstr(why, "--share-wire"),
	      "samples without --share-wire: '%s'", why);
}

/* --share-steps: the fleet's probe on worker w is router w % 4's, and the
 * others learn its step ends as late as the sends. At once it is exactly
 * --step-probe-one; 0.5 ms late the p99 rises (the cadence needs them on
 * time); without --step-probe-one it is refused. */
static double shared_steps_p99(bool share_steps, double delay)
{
	struct sim_config c;
	struct sim_result r;

	small_config(&c, SIM_POL_STEER);
	c.workers = 16;
	c.engine = SIM_ENGINE_BATCH;
	c.response = SIM_RESP_FULL;
	c.requests = 10000;
	c.routers = 4;
	c.step_cadence = SIM_CAD_MAX;
	c.step_probe = c.step_probe_one = true;
	c.share_wire = true;
	c.share_steps = share_steps;
	c.share_delay_s = delay;
	return run(&c, &r) ? -1 : r.p99_s;
}

static void test_shared_step_ends_arrive_late(void)
{
	double at_once = shared_steps_p99(false, 0), shared0 = shared_steps_p99(true, 0);
	double late = shared_steps_p99(true, 0.0005);
	struct sim_config c;
	char why[160];

	printf("# 4 routers, one probe per worker: p99 %.4f at once, %.4f shared at once, %.4f "
	       "shared 0.5 ms late\n",
	       at_once, shared0, late);
	CHECK(at_once > 0 && shared0 == at_once, "shared at once %.6f, --step-probe-one %.6f",
	      shared0, at_once);
	CHECK(late > 1.1 * at_once, "0.5 ms late %.6f, at once %.6f", late, at_once);
	small_config(&c, SIM_POL_STEER);
	c.routers = 4;
	c.share_wire = true;
	c.share_steps = true;
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0 && strstr(why, "--step-probe-one"),
	      "--share-steps without the fleet's probe: '%s'", why);
}

int main(void)
{
	TAP_RUN(test_work_is_conserved);
	TAP_RUN(test_busy_worker_serves_at_its_rate);
	TAP_RUN(test_oracle_has_the_lowest_mean_wait);
	TAP_RUN(test_same_seed_same_output);
	TAP_RUN(test_steer_picks_through_steer_select_with_early_exit);
	TAP_RUN(test_steer_water_fills_between_polls);
	TAP_RUN(test_steer_peer_routers_scale_the_credit);
	TAP_RUN(test_steer_run_uses_the_kernel_path);
	TAP_RUN(test_round_robin_cycles);
	TAP_RUN(test_jsq_and_p2c_read_their_signals);
	TAP_RUN(test_size_distribution_means);
	TAP_RUN(test_quantiles_and_cov);
	TAP_RUN(test_wire_credit_counts_every_keepalive_request);
	TAP_RUN(test_pending_is_added_at_send_and_removed_at_answer);
	TAP_RUN(test_fluid_drains_at_the_published_rate_capped_by_pending);
	TAP_RUN(test_snapshot_share_is_not_counted_twice);
	TAP_RUN(test_every_request_counted_and_pending_returns_to_zero);
	TAP_RUN(test_pending_mid_run_equals_unanswered_work);
	TAP_RUN(test_counters_do_not_depend_on_the_policy);
	TAP_RUN(test_batch_engine_respects_its_limits);
	TAP_RUN(test_batch_capacity_is_measured_once_and_below_nominal);
	TAP_RUN(test_headline_ordering_of_estimators);
	TAP_RUN(test_step_cadence_predicts_the_rest_of_the_step);
	TAP_RUN(test_step_cadence_needs_a_response_in_progress);
	TAP_RUN(test_streaming_routers_see_every_step_end);
	TAP_RUN(test_step_cadence_cuts_the_batching_p99_when_streaming);
	TAP_RUN(test_step_probe_shows_every_step_end_with_full_responses);
	TAP_RUN(test_share_delay_samples_draw_each_event);
	TAP_RUN(test_shared_step_ends_arrive_late);
	return tap_done();
}
