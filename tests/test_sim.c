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
#include "tap.h"

/* A small scenario: big enough for queues, preemptions and tails, small
 * enough for a few seconds under ASan. */
static void small_config(struct sim_config *c, enum sim_policy p)
{
	sim_config_defaults(c);
	c->workers = 8;
	c->requests = 20000;
	c->warmup = 2000;
	c->seed = 7;
	c->policy = p;
}

static int run(const struct sim_config *c, struct sim_result *r)
{
	char why[160];

	if (sim_run(c, r, why, sizeof(why))) {
		printf("# sim_run: %s\n", why);
		return -1;
	}
	return 0;
}

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

static void csv_of(const struct sim_config *c, const struct sim_result *r, char *buf, size_t len)
{
	sim_csv_row(buf, len, "t", sim_policy_name(c->policy), c, r);
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
static struct sim_snapshot snap(double queued, double tput)
{
	struct sim_snapshot s = { .valid = true, .reports_uncached = queued > 0 };

	s.load.queued_uncached_tokens = queued;
	s.load.throughput = tput;
	s.load.ranks = 1;
	return s;
}

static struct sim_router *steer_router(uint32_t workers)
{
	struct sim_config c;

	sim_config_defaults(&c);
	c.workers = workers;
	c.policy = SIM_POL_STEER;
	c.estimator = SIM_EST_FLAT; /* one credit per connection, as before issue 11 */
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
	return tap_done();
}
