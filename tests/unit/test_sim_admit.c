// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_sim_admit.c - the simulator's admission and affinity at connect:
 * overload protection (the wait bound, smg's shed, bursts, the oracle's
 * exact admission) and cache affinity (conversations, prefix caches, the
 * stay-within-the-slack rule, its key table).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"
#include "sim_testlib.h"
#include "tap.h"

/* ---- Overload: admission control at connect --------------------------------- */

/* A steer router with the bound (fluid, as smg-steerd runs it). */
static struct sim_router *bound_router(uint32_t workers, enum sim_policy p, double bound_s)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = workers;
	c.policy = p;
	c.admission = SIM_ADMIT_BOUND;
	c.wait_bound_s = bound_s;
	return sim_router_new(&c, 0);
}

static void test_bound_refuses_only_when_every_wait_is_over(void)
{
	/* Base waits at 2000 tokens/s: 4 s, 5 s and 6 s, all over a 3 s
	 * bound: refused, and nothing credited. */
	struct sim_snapshot s[3] = { snap(8000, 2000), snap(10000, 2000), snap(12000, 2000) };
	struct sim_observation obs = { .snap = s, .now = 1 };
	struct sim_router *r = bound_router(3, SIM_POL_STEER, 3.0);
	struct sim_router_stats st;
	uint32_t w, i;

	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	CHECK(w == SIM_REFUSED, "picked %u with every wait over the bound", w);
	for (i = 0; i < 3; i++)
		CHECK(sim_router_inflight_tokens(r, i) == 0, "a refusal credited worker %u", i);
	/* Worker 1 drops to 2.5 s: admitted there, the least wait. Its credit
	 * (1024 tokens, 0.512 s) then puts it at 3.012 s: the next is refused. */
	s[1] = snap(5000, 2000);
	sim_router_snapshot_taken(r, 1, 1);
	w = sim_router_pick(r, &obs);
	CHECK(w == 1, "picked %u, want worker 1 (2.5 s <= 3 s)", w);
	w = sim_router_pick(r, &obs);
	CHECK(w == SIM_REFUSED, "picked %u, worker 1 is now at 3.012 s", w);
	sim_router_get_stats(r, &st);
	CHECK(st.picks == 3 && st.refused == 2, "picks %llu refused %llu",
	      (unsigned long long)st.picks, (unsigned long long)st.refused);
	sim_router_free(r);

	/* Exactly at the bound is admitted: only a wait over it refuses. */
	r = bound_router(1, SIM_POL_STEER, 3.0);
	CHECK(r, "no memory");
	s[0] = snap(6000, 2000);
	w = sim_router_pick(r, &obs);
	CHECK(w == 0, "a wait of exactly the bound was refused");
	sim_router_free(r);
}

static void test_oracle_bound_reads_the_true_wait(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	double tw[2] = { 3.5, 4.0 }, rate[2] = { 2000, 2000 };
	struct sim_observation obs = { .snap = s, .true_wait_s = tw, .rate = rate };
	struct sim_router *r = bound_router(2, SIM_POL_ORACLE, 3.0);
	uint32_t w;

	CHECK(r, "no memory");
	/* The snapshots say idle; the truth says both are over. */
	w = sim_router_pick(r, &obs);
	CHECK(w == SIM_REFUSED, "oracle admitted to %u over the bound", w);
	tw[1] = 2.0;
	w = sim_router_pick(r, &obs);
	CHECK(w == 1, "oracle picked %u, want worker 1 (2 s)", w);
	sim_router_free(r);
}

static void test_shed_excludes_overloaded_workers(void)
{
	/* Worker 0 reports 8 waiting requests (the default N), worker 2 KV
	 * at 0.9: both overloaded; worker 1 and 3 are not. */
	struct sim_snapshot s[4] = { snap(100, 2000), snap(60000, 2000), snap(0, 2000),
				     snap(90000, 2000) };
	struct sim_observation obs = { .snap = s };
	static const enum sim_policy pols[] = { SIM_POL_JSQ, SIM_POL_STEER };
	struct sim_config c;
	size_t k;
	uint32_t i, w;

	s[0].load.waiting_reqs = 8;
	s[1].load.waiting_reqs = 7;
	s[2].load.kv_usage = 0.9;
	s[3].load.kv_usage = 0.89;
	CHECK(sim_shed_overloaded(&s[0], 0.9, 8) && !sim_shed_overloaded(&s[1], 0.9, 8) &&
		      sim_shed_overloaded(&s[2], 0.9, 8) && !sim_shed_overloaded(&s[3], 0.9, 8),
	      "the overload test at its limits");
	CHECK(!sim_shed_overloaded(&s[0], 0.9, 0), "N = 0 still counts waiting requests");
	s[0].valid = false;
	CHECK(!sim_shed_overloaded(&s[0], 0.9, 8), "no snapshot yet, yet overloaded");
	s[0].valid = true;
	for (k = 0; k < 2; k++) {
		struct sim_router *r;

		sim_config_defaults(&c);
		c.workers = 4;
		c.policy = pols[k];
		c.admission = SIM_ADMIT_SHED;
		c.estimator = SIM_EST_FLAT;
		r = sim_router_new(&c, 0);
		CHECK(r, "no memory");
		/* Workers 0 and 2 are the least loaded, and never chosen. */
		for (i = 0; i < 40; i++) {
			w = sim_router_pick(r, &obs);
			CHECK(w == 1 || w == 3, "%s picked overloaded worker %u",
			      sim_policy_name(pols[k]), w);
			sim_router_dispatched(r, w);
		}
		/* Every worker overloaded (as of a new snapshot): refused. */
		s[1].load.waiting_reqs = 9;
		s[3].load.kv_usage = 0.95;
		sim_router_snapshot_taken(r, 1, 1);
		sim_router_snapshot_taken(r, 3, 1);
		w = sim_router_pick(r, &obs);
		CHECK(w == SIM_REFUSED, "%s picked %u with every worker overloaded",
		      sim_policy_name(pols[k]), w);
		s[1].load.waiting_reqs = 7;
		s[3].load.kv_usage = 0.89;
		sim_router_free(r);
	}
}

/* An overloaded run: 16 workers, constant load 1.5, the bound. The batching
 * engine takes tens of seconds to fill its running batches. */
static void overload_config(struct sim_config *c, enum sim_engine e, enum sim_policy p)
{
	small_config(c, p);
	c->workers = 16;
	c->engine = e;
	c->requests = e == SIM_ENGINE_BATCH ? 15000 : 12000;
	c->warmup = c->requests / 10;
	c->load = 1.5;
	c->admission = SIM_ADMIT_BOUND;
	c->wait_bound_s = e == SIM_ENGINE_BATCH ? 0.75 : 3.0;
}

static void test_refused_requests_never_reach_a_worker(void)
{
	int e;

	for (e = 0; e < SIM_ENGINE_COUNT; e++) {
		struct sim_config c;
		struct sim_result r;
		uint64_t dispatched = 0;
		double in, out;
		uint32_t i;

		overload_config(&c, (enum sim_engine)e, SIM_POL_STEER);
		c.complete = true;
		CHECK(run(&c, &r) == 0, "run failed");
		for (i = 0; i < r.workers; i++)
			dispatched += r.w[i].dispatched;
		CHECK(r.refused > 0 && r.refused_all >= r.refused, "%s: refused %llu of %llu",
		      sim_engine_name(c.engine), (unsigned long long)r.refused_all,
		      (unsigned long long)r.arrived);
		/* Every arrival either reached a worker or was refused, once. */
		CHECK(dispatched + r.refused_all == r.arrived && r.connections == dispatched &&
			      r.routers.refused == r.refused_all,
		      "%s: dispatched %llu + refused %llu != arrived %llu",
		      sim_engine_name(c.engine), (unsigned long long)dispatched,
		      (unsigned long long)r.refused_all, (unsigned long long)r.arrived);
		CHECK(r.finished + r.refused_all == r.arrived,
		      "%s: finished %llu refused %llu arrived %llu", sim_engine_name(c.engine),
		      (unsigned long long)r.finished, (unsigned long long)r.refused_all,
		      (unsigned long long)r.arrived);
		/* The workers served exactly the admitted work; the routers'
		 * kernels counted nothing of the refused. */
		in = r.arrived_tokens - r.refused_tokens + r.recompute_tokens;
		out = r.served_tokens + r.queued_tokens_end;
		CHECK(fabs(in - out) <= 1e-6 * in, "%s: admitted %.0f != served %.0f",
		      sim_engine_name(c.engine), in, out);
		CHECK((double)r.routers.sent_tokens == r.sent_tokens &&
			      r.sent_tokens == r.arrived_tokens - r.refused_tokens &&
			      r.routers.pending_tokens == 0,
		      "%s: the routers counted %llu tokens sent, %.0f admitted",
		      sim_engine_name(c.engine), (unsigned long long)r.routers.sent_tokens,
		      r.sent_tokens);
		CHECK(r.measured + r.refused == c.requests, "%s: measured %llu + refused %llu",
		      sim_engine_name(c.engine), (unsigned long long)r.measured,
		      (unsigned long long)r.refused);
	}
}

static void test_oracle_bound_holds_exactly_on_the_batching_engine(void)
{
	struct sim_config c;
	struct sim_result r;

	/* The oracle replays the engine's steps: no admitted request waits
	 * over the bound, and the bound does refuse. */
	overload_config(&c, SIM_ENGINE_BATCH, SIM_POL_ORACLE);
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.refused > 0 && r.max_s <= c.wait_bound_s && r.over_bound == 0,
	      "refused %llu, longest wait %.6f s over %.2f s (%.4f over)",
	      (unsigned long long)r.refused, r.max_s, c.wait_bound_s, r.over_bound);
}

static void test_bursts_offer_their_load(void)
{
	struct sim_config c;
	struct sim_result flat, burst;
	char why[160];

	/* 0.5 and 1.1 for 10 s each average 0.8: the same requests take
	 * about as long as at a constant 0.8. */
	small_config(&c, SIM_POL_JSQ);
	CHECK(run(&c, &flat) == 0, "run failed");
	c.load = 0.5;
	c.burst_load = 1.1;
	c.burst_on_s = c.burst_off_s = 10;
	CHECK(run(&c, &burst) == 0, "run failed");
	CHECK(fabs(burst.window_s / flat.window_s - 1) < 0.03, "window %.1f s, constant %.1f s",
	      burst.window_s, flat.window_s);
	CHECK(burst.p99_s > flat.p99_s, "bursts p99 %.3f s not above constant %.3f s", burst.p99_s,
	      flat.p99_s);
	c.burst_on_s = 0;
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0, "a burst of no time accepted");
	c.burst_on_s = 10;
	c.admission = SIM_ADMIT_BOUND;
	c.wait_bound_s = 3;
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0 && strstr(why, "bound"),
	      "jsq with a wait bound accepted: '%s'", why);
	c.policy = SIM_POL_ORACLE;
	c.admission = SIM_ADMIT_SHED;
	CHECK(sim_config_check(&c, why, sizeof(why)) != 0 && strstr(why, "shed"),
	      "the oracle with the shed accepted: '%s'", why);
}

static void test_overload_runs_are_deterministic(void)
{
	static const enum sim_policy pols[] = { SIM_POL_STEER, SIM_POL_JSQ, SIM_POL_ORACLE };
	static const enum sim_admission adm[] = { SIM_ADMIT_BOUND, SIM_ADMIT_SHED,
						  SIM_ADMIT_BOUND };
	size_t k;

	for (k = 0; k < 3; k++) {
		struct sim_config c;
		struct sim_result a, b;
		char ra[512], rb[512];

		overload_config(&c, SIM_ENGINE_FIFO, pols[k]);
		c.admission = adm[k];
		c.load = 0.6;
		c.burst_load = 1.5;
		CHECK(run(&c, &a) == 0 && run(&c, &b) == 0, "run failed");
		csv_of(&c, &a, ra, sizeof(ra));
		csv_of(&c, &b, rb, sizeof(rb));
		CHECK(a.refused > 0 && strcmp(ra, rb) == 0, "refused %llu; rows:\n# %s\n# %s",
		      (unsigned long long)a.refused, ra, rb);
		c.seed++;
		CHECK(run(&c, &b) == 0, "run failed");
		CHECK(a.refused != b.refused || a.p99_s != b.p99_s, "another seed, the same run");
	}
}

static void test_running_cap_and_resync_variants(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(2000, 2000) };
	struct sim_observation obs = { .snap = s, .now = 10 };
	struct sim_config c;
	struct sim_router *r;
	uint32_t w;
	uint64_t v;

	/* --running-cap 2: worker 0 (idle) holds two live connections and
	 * is full; worker 1 (1 s queued) takes the next. */
	sim_config_defaults(&c);
	c.workers = 2;
	c.policy = SIM_POL_STEER;
	c.running_cap = 2;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	sim_router_connected(r, 0);
	sim_router_connected(r, 0);
	w = sim_router_pick(r, &obs);
	CHECK(w == 1, "picked %u, worker 0 is full", w);
	sim_router_closed(r, 0);
	w = sim_router_pick(r, &obs);
	CHECK(w == 0, "picked %u, worker 0 has room again", w);
	sim_router_free(r);

	/* --busy-resync: 2000 + 4000 tokens sent at 10 s have drained at
	 * 20 s as fluid sees it; the answer of the first sets E to the 4000
	 * still pending, where plain fluid only caps it. */
	c.running_cap = 0;
	c.busy_resync = true;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	sim_router_connected(r, 0);
	sim_router_sent(r, 0, 2000, true, 10);
	sim_router_sent(r, 0, 4000, false, 10);
	v = sim_router_slot_tokens_at(r, 0, 20);
	CHECK(v == 0, "E at 20 s: %llu, want 0 (drained)", (unsigned long long)v);
	sim_router_answered(r, 0, 2000, 20);
	v = sim_router_slot_tokens_at(r, 0, 20);
	CHECK(v == 4000, "E after the answer: %llu, want the 4000 pending", (unsigned long long)v);
	sim_router_free(r);
}

/* ---- Cache affinity ------------------------------------------------------- */

static void conv_config(struct sim_config *c, enum sim_engine e, enum sim_policy p)
{
	small_config(c, p);
	c->engine = e;
	c->turns = 4;
	c->requests = e == SIM_ENGINE_BATCH ? 4000 : 20000;
	c->warmup = c->requests / 10;
}

static void test_cache_lru_stays_within_its_bound(void)
{
	struct sim_lru l;
	uint64_t w;
	struct sim_config c;
	struct sim_result r;
	uint32_t i;

	/* Above 100 tokens, down to 80: a (the least recent) goes, then b is
	 * trimmed by the 10 tokens still over; d, just put, never goes. */
	sim_lru_init(&l, 0, 100, 80);
	CHECK(sim_lru_put(&l, 'a', 0, 30) == 0 && sim_lru_put(&l, 'b', 0, 30) == 0 &&
		      sim_lru_put(&l, 'c', 0, 30) == 0,
	      "no memory");
	CHECK(l.weight == 90 && l.n == 3, "weight %llu, entries %u", (unsigned long long)l.weight,
	      l.n);
	CHECK(sim_lru_put(&l, 'd', 0, 30) == 0, "no memory");
	CHECK(l.weight == 80 && !sim_lru_peek(&l, 'a', NULL, NULL), "weight %llu, a kept",
	      (unsigned long long)l.weight);
	CHECK(sim_lru_peek(&l, 'b', NULL, &w) && w == 20, "b holds %llu, want 20",
	      (unsigned long long)w);
	CHECK(l.evicted == 1 && l.trimmed == 1, "evicted %llu trimmed %llu",
	      (unsigned long long)l.evicted, (unsigned long long)l.trimmed);
	/* Putting b again makes it the most recent: c goes next. */
	CHECK(sim_lru_put(&l, 'b', 0, 20) == 0 && sim_lru_put(&l, 'e', 0, 40) == 0, "no memory");
	CHECK(!sim_lru_peek(&l, 'c', NULL, NULL) && sim_lru_peek(&l, 'b', NULL, NULL),
	      "c should have gone before b");
	CHECK(l.weight <= 100, "weight %llu over the bound", (unsigned long long)l.weight);
	/* One entry over the bound by itself stays: the cache holds the
	 * request it is serving. */
	CHECK(sim_lru_put(&l, 'f', 0, 500) == 0, "no memory");
	CHECK(l.n == 1 && l.weight == 500, "entries %u weight %llu", l.n,
	      (unsigned long long)l.weight);
	sim_lru_free(&l);

	/* A run: no worker's cache ever held more than its high mark, and
	 * the bound was reached (the runs evicted). */
	conv_config(&c, SIM_ENGINE_FIFO, SIM_POL_STEER);
	c.cache_tokens = 40000; /* high 36,800 >= the longest context, 28,672 */
	CHECK(run(&c, &r) == 0, "run failed");
	for (i = 0; i < r.workers; i++)
		CHECK(r.w[i].cache_max <= 36800 && r.w[i].cache_max > 34000,
		      "worker %u's cache held up to %llu tokens", i,
		      (unsigned long long)r.w[i].cache_max);
}

static void test_prefill_costs_only_the_uncached_tokens(void)
{
	struct sim_config c;
	struct sim_result r, none;
	double per;

	/* One 1x FIFO worker: a turn's first token comes when the prefill of
	 * its uncached tokens ends, so mean TTFT = mean wait + mean uncached
	 * tokens / 2000, exactly; and with the cache some tokens are cached. */
	conv_config(&c, SIM_ENGINE_FIFO, SIM_POL_STEER);
	c.workers = 1;
	c.load = 0.3;
	c.requests = 5000;
	c.warmup = 0;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.cached_tokens > 0.3 * r.prompt_tokens, "cached %.0f of %.0f", r.cached_tokens,
	      r.prompt_tokens);
	per = (r.prompt_tokens - r.cached_tokens) / (double)r.measured / 2000.0;
	CHECK(fabs(r.ttft_mean_s - r.mean_s - per) < 1e-9, "TTFT %.9f - wait %.9f != %.9f",
	      r.ttft_mean_s, r.mean_s, per);
	/* Without the cache the whole prompt: the same identity, nothing cached. */
	c.cache_tokens = 0;
	CHECK(run(&c, &none) == 0, "run failed");
	per = none.prompt_tokens / (double)none.measured / 2000.0;
	CHECK(none.cached_tokens == 0 && fabs(none.ttft_mean_s - none.mean_s - per) < 1e-9,
	      "without a cache: cached %.0f, TTFT %.9f - wait %.9f != %.9f", none.cached_tokens,
	      none.ttft_mean_s, none.mean_s, per);

	/* Both engines prefill what is not cached, and nothing else: every
	 * request complete, the work served is the prompts less the cached. */
	c.workers = 4;
	c.load = 0.8;
	c.complete = true;
	c.cache_tokens = SIM_CACHE_TOKENS;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.prompt_tokens == r.arrived_tokens && r.cached_tokens > 0, "prompts %.0f of %.0f",
	      r.prompt_tokens, r.arrived_tokens);
	CHECK(fabs(r.served_tokens - (r.prompt_tokens - r.cached_tokens + r.recompute_tokens)) <
		      1e-6 * r.served_tokens,
	      "FIFO served %.0f, uncached %.0f + recomputed %.0f", r.served_tokens,
	      r.prompt_tokens - r.cached_tokens, r.recompute_tokens);
	c.engine = SIM_ENGINE_BATCH;
	c.requests = 3000;
	CHECK(run(&c, &r) == 0, "run failed");
	CHECK(r.prompt_tokens == r.arrived_tokens && r.cached_tokens > 0 &&
		      r.served_tokens == r.prompt_tokens - r.cached_tokens,
	      "batching served %.0f, prompts %.0f, cached %.0f", r.served_tokens, r.prompt_tokens,
	      r.cached_tokens);
}

static struct sim_router *aff_router(uint32_t workers, double slack_s, bool hrw, uint32_t index)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = workers;
	c.policy = SIM_POL_STEER;
	c.estimator = SIM_EST_FLAT; /* one flat credit per connection: 512 ms here */
	c.slack_s = slack_s;
	c.aff_hrw = hrw;
	c.aff_keys = 2;
	return sim_router_new(&c, index);
}

/* Key 7 connects to worker 0 (idle, worker 1 at 100 ms); a poll then puts
 * worker 0 at 500 ms and worker 1 at 0. Where does key 7 go next? */
static uint32_t second_connection(struct sim_router *r, struct sim_router_stats *st)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(200, 2000) };
	struct sim_observation obs = { .snap = s, .key = 7 };
	uint32_t w = sim_router_pick(r, &obs);

	if (w != 0)
		return 99;
	s[0] = snap(1000, 2000);
	s[1] = snap(0, 2000);
	sim_router_snapshot_taken(r, 0, 1);
	sim_router_snapshot_taken(r, 1, 1);
	w = sim_router_pick(r, &obs);
	sim_router_get_stats(r, st);
	return w;
}

static void test_affinity_stays_within_the_slack_and_no_further(void)
{
	struct sim_router_stats st;
	struct sim_router *r;
	uint32_t w;

	CHECK(sim_affinity_stays(150, 100, 50) && !sim_affinity_stays(151, 100, 50),
	      "the rule at its boundary");
	CHECK(sim_affinity_stays(STEER_U64_MAX, 100, STEER_U64_MAX), "an infinite slack");
	/* Worker 0 waits exactly 500 ms more than the best: a slack of 500 ms
	 * keeps the key there, one of 500 ms less a nanosecond does not. */
	r = aff_router(2, 0.5, false, 0);
	CHECK(r, "no memory");
	w = second_connection(r, &st);
	CHECK(w == 0 && st.aff_known == 1 && st.aff_stayed == 1,
	      "slack 500 ms: worker %u, known %llu, stayed %llu", w,
	      (unsigned long long)st.aff_known, (unsigned long long)st.aff_stayed);
	sim_router_free(r);
	r = aff_router(2, 0.499999999, false, 0);
	CHECK(r, "no memory");
	w = second_connection(r, &st);
	CHECK(w == 1 && st.aff_known == 1 && st.aff_stayed == 0,
	      "slack 500 ms - 1 ns: worker %u, stayed %llu", w, (unsigned long long)st.aff_stayed);
	sim_router_free(r);
	/* No affinity: the least wait, worker 1. */
	r = aff_router(2, -1, false, 0);
	CHECK(r, "no memory");
	w = second_connection(r, &st);
	CHECK(w == 1 && st.aff_known == 0, "without affinity: worker %u", w);
	sim_router_free(r);
}

static void test_affinity_needs_an_admitted_worker(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s, .key = 7 };
	struct sim_config c;
	struct sim_router *r;
	uint32_t w;

	/* An infinite slack, but worker 0 is full (--running-cap 1) once key
	 * 7's first connection is open: its second goes elsewhere. */
	sim_config_defaults(&c);
	c.workers = 2;
	c.policy = SIM_POL_STEER;
	c.slack_s = INFINITY;
	c.running_cap = 1;
	r = sim_router_new(&c, 0);
	CHECK(r, "no memory");
	w = sim_router_pick(r, &obs);
	sim_router_connected(r, w);
	CHECK(sim_router_pick(r, &obs) == 1 - w, "stayed at a full worker");
	sim_router_free(r);
}

static void test_affinity_table_keeps_its_last_keys(void)
{
	struct sim_snapshot s[2] = { snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router_stats st;
	struct sim_router *r;
	struct sim_lru l;
	uint64_t k;

	/* The map: at most 3 keys, the least recently put first to go. */
	sim_lru_init(&l, 3, 0, 0);
	for (k = 1; k <= 5; k++)
		CHECK(sim_lru_put(&l, k, k, 1) == 0, "no memory");
	CHECK(l.n == 3 && !sim_lru_peek(&l, 1, NULL, NULL) && !sim_lru_peek(&l, 2, NULL, NULL) &&
		      sim_lru_peek(&l, 3, NULL, NULL),
	      "entries %u", l.n);
	CHECK(sim_lru_put(&l, 3, 3, 1) == 0 && sim_lru_put(&l, 6, 6, 1) == 0, "no memory");
	CHECK(sim_lru_peek(&l, 3, NULL, NULL) && !sim_lru_peek(&l, 4, NULL, NULL),
	      "3 was put again, 4 should have gone");
	for (k = 100; k < 10000; k++)
		CHECK(sim_lru_put(&l, k, k, 1) == 0 && l.n <= 3, "entries %u", l.n);
	sim_lru_free(&l);

	/* A router's table of 2 keys: after keys 1, 2 and 3, key 1 is new
	 * again and key 3 is known. */
	r = aff_router(2, INFINITY, false, 0);
	CHECK(r, "no memory");
	for (k = 1; k <= 3; k++) {
		obs.key = k;
		sim_router_pick(r, &obs);
	}
	obs.key = 1;
	sim_router_pick(r, &obs);
	sim_router_get_stats(r, &st);
	CHECK(st.aff_known == 0, "key 1 still known after 2 newer keys");
	obs.key = 3;
	sim_router_pick(r, &obs);
	sim_router_get_stats(r, &st);
	CHECK(st.aff_known == 1 && st.aff_stayed == 1, "key 3 forgotten");
	sim_router_free(r);
}

static void test_rendezvous_first_placement_agrees_across_routers(void)
{
	struct sim_snapshot s[4] = { snap(0, 2000), snap(0, 2000), snap(0, 2000), snap(0, 2000) };
	struct sim_observation obs = { .snap = s };
	struct sim_router *a = aff_router(4, INFINITY, true, 0),
			  *b = aff_router(4, INFINITY, true, 5);
	uint64_t k;

	CHECK(a && b, "no memory");
	for (k = 1; k <= 16; k++) {
		uint32_t i, want = 0;

		for (i = 1; i < 4; i++)
			if (sim_hash2(k, i + 1) > sim_hash2(k, want + 1))
				want = i;
		obs.key = k;
		CHECK(sim_router_pick(a, &obs) == want && sim_router_pick(b, &obs) == want,
		      "key %llu: not its rendezvous worker %u", (unsigned long long)k, want);
	}
	sim_router_free(a);
	sim_router_free(b);
}

static void test_affinity_without_reuse_changes_nothing(void)
{
	struct sim_config c;
	struct sim_result a, b;

	/* A key per request: a key is never seen twice, so least-wait
	 * affinity picks what smg-steer picks, whatever the slack. */
	small_config(&c, SIM_POL_STEER);
	CHECK(run(&c, &a) == 0, "run failed");
	c.slack_s = INFINITY;
	CHECK(run(&c, &b) == 0, "run failed");
	CHECK(a.mean_s == b.mean_s && a.p99_s == b.p99_s && a.ttft_mean_s == b.ttft_mean_s &&
		      b.routers.aff_known == 0,
	      "mean %.6f vs %.6f, known %llu", a.mean_s, b.mean_s,
	      (unsigned long long)b.routers.aff_known);
}

static void test_conversation_runs_are_deterministic(void)
{
	static const enum sim_policy pols[] = { SIM_POL_STEER, SIM_POL_STEER, SIM_POL_CACHE_AWARE,
						SIM_POL_CHBL, SIM_POL_ORACLE_CACHE };
	static const enum sim_engine engines[] = { SIM_ENGINE_FIFO, SIM_ENGINE_BATCH };
	size_t k, e;

	for (e = 0; e < 2; e++)
		for (k = 0; k < sizeof(pols) / sizeof(pols[0]); k++) {
			struct sim_config c;
			struct sim_result a, b;
			char ra[1024], rb[1024];

			conv_config(&c, engines[e], pols[k]);
			c.routers = 2;
			c.turn_router_any = k == 1;
			c.slack_s = k == 0 ? 0.1 : k == 1 ? 0.5 : -1;
			c.aff_hrw = k == 1;
			CHECK(run(&c, &a) == 0 && run(&c, &b) == 0, "run failed");
			csv_of(&c, &a, ra, sizeof(ra));
			csv_of(&c, &b, rb, sizeof(rb));
			CHECK(strcmp(ra, rb) == 0 && a.cached_tokens > 0,
			      "%s: cached %.0f; rows:\n# %s\n# %s", sim_policy_name(pols[k]),
			      a.cached_tokens, ra, rb);
			c.seed++;
			CHECK(run(&c, &b) == 0, "run failed");
			CHECK(a.ttft_mean_s != b.ttft_mean_s, "another seed, the same run");
		}
}

int main(void)
{
	TAP_RUN(test_bound_refuses_only_when_every_wait_is_over);
	TAP_RUN(test_oracle_bound_reads_the_true_wait);
	TAP_RUN(test_shed_excludes_overloaded_workers);
	TAP_RUN(test_refused_requests_never_reach_a_worker);
	TAP_RUN(test_oracle_bound_holds_exactly_on_the_batching_engine);
	TAP_RUN(test_bursts_offer_their_load);
	TAP_RUN(test_overload_runs_are_deterministic);
	TAP_RUN(test_running_cap_and_resync_variants);
	TAP_RUN(test_cache_lru_stays_within_its_bound);
	TAP_RUN(test_prefill_costs_only_the_uncached_tokens);
	TAP_RUN(test_affinity_stays_within_the_slack_and_no_further);
	TAP_RUN(test_affinity_needs_an_admitted_worker);
	TAP_RUN(test_affinity_table_keeps_its_last_keys);
	TAP_RUN(test_rendezvous_first_placement_agrees_across_routers);
	TAP_RUN(test_affinity_without_reuse_changes_nothing);
	TAP_RUN(test_conversation_runs_are_deterministic);
	return tap_done();
}
