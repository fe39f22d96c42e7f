// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_policy.c - the pure scoring module (user/policy/policy.c) against smg's
 * least_load policy (model_gateway/src/policies/least_load.rs).
 *
 * Every upstream unit test is mirrored here. Upstream selects in one step;
 * here the daemon scores (steer_policy_score_all) and the kernel selects, so
 * a "connect" is simulated the way the kernel does it: the argmin of
 * steer_score(base_wait_ns, inflight, ns_per_token) from bpf/steer_common.h,
 * ties to the lower index, then the winner is credited steer_policy_credit()
 * tokens. Expected values are worked out by hand in each test, never copied
 * from the module's output.
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "policy/policy.h"
#include "steer_common.h"
#include "tap.h"

#define MAXB 8
#define NS 1e9

typedef unsigned long long ull;

/* A small fleet as the daemon and the kernel see it. */
struct fleet {
	struct steer_policy p;
	size_t n;
	struct steer_policy_input in[MAXB];
	struct steer_policy_score sc[MAXB];
	uint64_t inflight[MAXB]; /* the kernel's steer_slot.inflight_tokens */
	uint64_t credited[MAXB]; /* credited since the last poll: what the daemon drains */
};

static void fleet_init(struct fleet *f, size_t n)
{
	const struct steer_policy defaults = STEER_POLICY_DEFAULTS;

	memset(f, 0, sizeof(*f));
	f->p = defaults;
	f->n = n;
}

static void fleet_score(struct fleet *f)
{
	steer_policy_score_all(&f->p, f->in, f->n, f->sc);
}

static uint64_t kernel_score(const struct fleet *f, size_t i)
{
	return steer_score(f->sc[i].base_wait_ns, f->inflight[i], f->sc[i].ns_per_token_u);
}

/* Where the kernel would send the next connection: strict <, so ties stay
 * with the lower index. */
static size_t fleet_pick(const struct fleet *f)
{
	size_t i, best = 0;

	for (i = 1; i < f->n; i++)
		if (kernel_score(f, i) < kernel_score(f, best))
			best = i;
	return best;
}

/* One connect: pick, then credit the winner as the BPF program does. */
static size_t fleet_connect(struct fleet *f)
{
	size_t best = fleet_pick(f);
	uint32_t credit = steer_policy_credit(&f->p);

	f->inflight[best] = steer_sat_add(f->inflight[best], credit);
	f->credited[best] += credit;
	return best;
}

/* A fresh snapshot for every backend: the daemon subtracts what the kernel
 * credited since the last poll (the snapshot now accounts for that work) and
 * scores again. */
static void fleet_poll_all(struct fleet *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		f->inflight[i] -= f->credited[i];
		f->credited[i] = 0;
	}
	fleet_score(f);
}

/* Upstream's make_load(): one DP rank with the given queued tokens, KV usage
 * and throughput, aggregated as the poller does. */
static int set_snapshot(struct steer_policy_input *in, int32_t uncached, double usage, double tp)
{
	struct steer_rank_load r = { .dp_rank = 0,
				     .num_waiting_uncached_tokens = uncached,
				     .token_usage = usage,
				     .gen_throughput = tp };
	char why[128] = "";

	CHECK_RC(steer_load_aggregate(&r, 1, &in->load, why, sizeof(why)) == 0, "aggregate: %s",
		 why);
	in->has_snapshot = true;
	in->reports_uncached = uncached > 0;
	return 0;
}

static bool near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want));
}

/* A published integer against the exact value: truncation and the double
 * rounding of the seconds may cost a nanosecond or so, no more. */
static bool near_ns(uint64_t got, double want_ns)
{
	return fabs((double)got - want_ns) <= 2.0 + want_ns * 1e-12;
}

/* ---- The upstream unit tests ------------------------------------------- */

static void test_cold_start_picks_lowest_in_flight(void)
{
	struct fleet f;

	/* No snapshot anywhere: the fleet is dark; join-shortest-queue. */
	fleet_init(&f, 2);
	f.in[0].live_conns = 5;
	f.in[1].live_conns = 0;
	fleet_score(&f);
	CHECK(f.sc[0].mode == STEER_MODE_DARK && f.sc[1].mode == STEER_MODE_DARK, "modes %d %d",
	      f.sc[0].mode, f.sc[1].mode);
	/* a: 5 x 1024 tokens at the default 2000 tok/s = 2.56 s; b: 0. */
	CHECK(near(f.sc[0].base_wait_s, 5.0 * 1024.0 / 2000.0), "a base %.9f", f.sc[0].base_wait_s);
	CHECK(near_ns(f.sc[0].base_wait_ns, 2.56e9), "a base_ns %llu", (ull)f.sc[0].base_wait_ns);
	CHECK(f.sc[1].base_wait_ns == 0, "b base_ns %llu", (ull)f.sc[1].base_wait_ns);
	CHECK(fleet_pick(&f) == 1, "picked %zu, want b", fleet_pick(&f));
}

static void test_routes_to_lower_queued_token_work(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 8000, 0.2, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 1000, 0.2, 100.0) == 0, "snapshot b");
	fleet_score(&f);
	/* a: 8000/100 = 80 s; b: 1000/100 = 10 s; both + 0.15 x 0.2 / 0.8 = 0.0375 s. */
	CHECK(near(f.sc[0].work_s, 80.0), "a work %.9f", f.sc[0].work_s);
	CHECK(near(f.sc[1].work_s, 10.0), "b work %.9f", f.sc[1].work_s);
	CHECK(near(f.sc[0].barrier_s, 0.0375), "a barrier %.9f", f.sc[0].barrier_s);
	CHECK(near(f.sc[0].base_wait_s, 80.0375), "a base %.9f", f.sc[0].base_wait_s);
	CHECK(near_ns(f.sc[0].base_wait_ns, 80.0375e9), "a ns %llu", (ull)f.sc[0].base_wait_ns);
	CHECK(near_ns(f.sc[1].base_wait_ns, 10.0375e9), "b ns %llu", (ull)f.sc[1].base_wait_ns);
	/* 1e9 / 100 tok/s = 1e7 ns per token. */
	CHECK(near(f.sc[0].ns_per_token, 1e7), "ns/token %.3f", f.sc[0].ns_per_token);
	CHECK(f.sc[0].ns_per_token_u == 10000000ULL, "ns/token %llu", (ull)f.sc[0].ns_per_token_u);
	CHECK(f.sc[0].mode == STEER_MODE_SNAPSHOT, "mode %d", f.sc[0].mode);
	CHECK(fleet_pick(&f) == 1, "picked %zu, want b", fleet_pick(&f));
}

static void test_throughput_normalization_prefers_faster_worker(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 5000, 0.2, 50.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 5000, 0.2, 500.0) == 0, "snapshot b");
	fleet_score(&f);
	/* a: 5000/50 = 100 s; b: 5000/500 = 10 s. */
	CHECK(near(f.sc[0].work_s, 100.0), "a work %.9f", f.sc[0].work_s);
	CHECK(near(f.sc[1].work_s, 10.0), "b work %.9f", f.sc[1].work_s);
	CHECK(f.sc[0].ns_per_token_u == 20000000ULL, "a ns/token %llu",
	      (ull)f.sc[0].ns_per_token_u);
	CHECK(f.sc[1].ns_per_token_u == 2000000ULL, "b ns/token %llu", (ull)f.sc[1].ns_per_token_u);
	CHECK(fleet_pick(&f) == 1, "picked %zu, want b", fleet_pick(&f));
}

static void test_zero_throughput_falls_back_to_default(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 10000, 0.2, 0.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 1000, 0.2, 0.0) == 0, "snapshot b");
	fleet_score(&f);
	CHECK(f.sc[0].throughput == 2000.0 && f.sc[1].throughput == 2000.0, "tp %g %g",
	      f.sc[0].throughput, f.sc[1].throughput);
	/* 10000/2000 and 1000/2000 are exact in binary. */
	CHECK(f.sc[0].work_s == 5.0, "a work %.17g", f.sc[0].work_s);
	CHECK(f.sc[1].work_s == 0.5, "b work %.17g", f.sc[1].work_s);
	CHECK(f.sc[0].ns_per_token_u == 500000ULL, "ns/token %llu", (ull)f.sc[0].ns_per_token_u);
	CHECK(fleet_pick(&f) == 1, "picked %zu, want b", fleet_pick(&f));
}

static void test_missing_snapshot_estimated_in_time_units(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 4000, 0.0, 100.0) == 0, "snapshot a");
	f.in[1].live_conns = 5;
	fleet_score(&f);
	CHECK(f.sc[1].mode == STEER_MODE_ESTIMATE, "b mode %d", f.sc[1].mode);
	CHECK(f.sc[1].queued_estimated, "b queue should be marked estimated");
	/* a: 4000/100 = 40 s; b: 5 x 1024 / 100 (the only peer's throughput) = 51.2 s.
	 * On a raw count (5) b would wrongly beat a. */
	CHECK(near(f.sc[0].base_wait_s, 40.0), "a base %.9f", f.sc[0].base_wait_s);
	CHECK(near(f.sc[1].throughput, 100.0), "b tp %g", f.sc[1].throughput);
	CHECK(near(f.sc[1].queued_tokens, 5120.0), "b queued %g", f.sc[1].queued_tokens);
	CHECK(near(f.sc[1].base_wait_s, 51.2), "b base %.9f", f.sc[1].base_wait_s);
	CHECK(near_ns(f.sc[1].base_wait_ns, 51.2e9), "b ns %llu", (ull)f.sc[1].base_wait_ns);
	CHECK(fleet_pick(&f) == 0, "picked %zu, want a", fleet_pick(&f));
}

static void test_kv_barrier_avoids_full_worker(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	f.p.kv_pressure_weight = 2.0;
	CHECK(set_snapshot(&f.in[0], 0, 0.98, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 0, 0.0, 100.0) == 0, "snapshot b");
	fleet_score(&f);
	/* a: 0 + 2 x 0.98 / 0.02 = 98 s; b: 0. */
	CHECK(near(f.sc[0].barrier_s, 98.0), "a barrier %.9f", f.sc[0].barrier_s);
	CHECK(near_ns(f.sc[0].base_wait_ns, 98e9), "a ns %llu", (ull)f.sc[0].base_wait_ns);
	CHECK(f.sc[1].base_wait_ns == 0, "b ns %llu", (ull)f.sc[1].base_wait_ns);
	CHECK(fleet_pick(&f) == 1, "picked %zu, want b", fleet_pick(&f));
}

static void test_inflight_correction_spreads_within_poll_interval(void)
{
	struct fleet f;
	size_t first, second, i;

	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 0, 0.1, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 0, 0.1, 100.0) == 0, "snapshot b");
	fleet_score(&f);
	first = fleet_connect(&f);
	second = fleet_connect(&f);
	CHECK(first != second, "both connects went to %zu", first);
	/* One credit is 1024 tokens x 1e7 ns = 10.24 s on top of the equal base. */
	CHECK(kernel_score(&f, 0) == f.sc[0].base_wait_ns + 10240000000ULL, "a score %llu",
	      (ull)kernel_score(&f, 0));
	/* Water-filling keeps alternating while no poll arrives. */
	for (i = 0; i < 6; i++)
		CHECK(fleet_connect(&f) == i % 2, "connect %zu went elsewhere", i + 3);
}

static void test_update_loads_resets_inflight(void)
{
	struct fleet f;
	size_t i;

	/* a is lighter by base alone: a 0.1667 s of barrier, b 1 s more queue. */
	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 0, 0.1, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 100, 0.1, 100.0) == 0, "snapshot b");
	fleet_score(&f);
	/* Three connects: a (0.017 s < 1.017 s), b (1.017 < 10.257), a (10.257 < 11.257). */
	CHECK(fleet_connect(&f) == 0, "connect 1");
	CHECK(fleet_connect(&f) == 1, "connect 2");
	CHECK(fleet_connect(&f) == 0, "connect 3");
	CHECK(f.inflight[0] == 2048 && f.inflight[1] == 1024, "inflight %llu %llu",
	      (ull)f.inflight[0], (ull)f.inflight[1]);
	/* Now in-flight decides: a 20.497 s vs b 11.257 s. */
	CHECK(fleet_pick(&f) == 1, "before the poll the next connect goes to b");

	fleet_poll_all(&f);
	for (i = 0; i < f.n; i++)
		CHECK(f.inflight[i] == 0, "inflight[%zu] %llu", i, (ull)f.inflight[i]);
	CHECK(fleet_pick(&f) == 0, "after the poll the base-only order must hold again");
}

static void test_single_worker_always_selected(void)
{
	struct fleet f;
	int i;

	/* Even saturated and nearly full, the only worker is the choice. */
	fleet_init(&f, 1);
	CHECK(set_snapshot(&f.in[0], INT32_MAX, 0.999, 1e-9) == 0, "snapshot");
	fleet_score(&f);
	for (i = 0; i < 5; i++)
		CHECK(fleet_connect(&f) == 0, "connect %d", i);
	fleet_init(&f, 1); /* and dark */
	f.in[0].live_conns = 1000;
	fleet_score(&f);
	CHECK(fleet_connect(&f) == 0, "dark single worker");
}

static void test_stale_load_evicted_falls_back_to_in_flight(void)
{
	struct fleet f;

	/* b's snapshot went stale (the daemon clears has_snapshot), but its
	 * load still says idle: it must be scored on its 50 live connections. */
	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], 0, 0.2, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 0, 0.0, 100.0) == 0, "snapshot b");
	f.in[1].has_snapshot = false;
	f.in[1].live_conns = 50;
	fleet_score(&f);
	/* b: 50 x 1024 / 100 = 512 s; a: 0.15 x 0.2 / 0.8 = 0.0375 s. */
	CHECK(f.sc[1].mode == STEER_MODE_ESTIMATE, "b mode %d", f.sc[1].mode);
	CHECK(near(f.sc[1].base_wait_s, 512.0), "b base %.9f", f.sc[1].base_wait_s);
	CHECK(near(f.sc[0].base_wait_s, 0.0375), "a base %.9f", f.sc[0].base_wait_s);
	CHECK(fleet_pick(&f) == 0, "picked %zu, want a", fleet_pick(&f));
}

static void test_remove_worker_prunes_state(void)
{
	struct fleet all, rest;

	/* a reports 1000 tok/s, b 100, c has no snapshot and 5 live. */
	fleet_init(&all, 3);
	CHECK(set_snapshot(&all.in[0], 0, 0.5, 1000.0) == 0, "snapshot a");
	CHECK(set_snapshot(&all.in[1], 0, 0.3, 100.0) == 0, "snapshot b");
	all.in[2].live_conns = 5;
	fleet_score(&all);
	/* Nominal (1000 + 100) / 2 = 550: c = 5 x 1024 / 550 s. */
	CHECK(near(all.sc[2].throughput, 550.0), "c tp %g", all.sc[2].throughput);
	CHECK(near(all.sc[2].base_wait_s, 5120.0 / 550.0), "c base %.9f", all.sc[2].base_wait_s);

	/* a removed: only b and c are scored; nothing of a survives. */
	fleet_init(&rest, 2);
	rest.in[0] = all.in[1];
	rest.in[1] = all.in[2];
	fleet_score(&rest);
	CHECK(near(rest.sc[1].throughput, 100.0), "c tp %g", rest.sc[1].throughput);
	CHECK(near(rest.sc[1].base_wait_s, 51.2), "c base %.9f", rest.sc[1].base_wait_s);
	CHECK(memcmp(&rest.sc[0], &all.sc[1], sizeof(rest.sc[0])) == 0,
	      "b's own score must not depend on a");
	/* b: 0.15 x 0.3 / 0.7 s of barrier. */
	CHECK(near(rest.sc[0].base_wait_s, 0.15 * 0.3 / 0.7), "b base %.9f",
	      rest.sc[0].base_wait_s);
}

/* ---- Robustness of the score -------------------------------------------- */

static bool score_is_sane(const struct steer_policy_score *s)
{
	const double v[] = { s->queued_tokens, s->throughput,  s->kv,	       s->work_s,
			     s->barrier_s,     s->base_wait_s, s->ns_per_token };
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (isnan(v[i]) || v[i] < 0)
			return false;
	/* The throughput is what divides: always usable. */
	if (!isfinite(s->throughput) || s->throughput <= 0)
		return false;
	if (s->kv > STEER_KV_CLAMP_MAX)
		return false;
	/* The published integers are the saturated seconds and ns. */
	if (isinf(s->base_wait_s) && s->base_wait_ns != STEER_U64_MAX)
		return false;
	if (isinf(s->ns_per_token) && s->ns_per_token_u != STEER_U64_MAX)
		return false;
	return true;
}

static void test_non_finite_inputs_never_produce_nan(void)
{
	static const double queued[] = { NAN, INFINITY, -INFINITY, -1, 0, 1000, 1e300 };
	static const double waiting[] = { NAN, INFINITY, -1, 0, 3 };
	static const double tps[] = { NAN, INFINITY, -INFINITY, -1, 0, 5e-324, 1e-300, 100, 1e300 };
	static const double kvs[] = { NAN, INFINITY, -INFINITY, -1, 0, 0.5, 0.999, 1, 1.5 };
	size_t a, b, c, d, i;
	int reports;

	/* Loads set directly, bypassing steer_load_aggregate: the score must
	 * hold up on its own. A non-reporting peer exercises the nominal rate. */
	for (a = 0; a < sizeof(queued) / sizeof(queued[0]); a++)
		for (b = 0; b < sizeof(waiting) / sizeof(waiting[0]); b++)
			for (c = 0; c < sizeof(tps) / sizeof(tps[0]); c++)
				for (d = 0; d < sizeof(kvs) / sizeof(kvs[0]); d++)
					for (reports = 0; reports < 2; reports++) {
						struct fleet f;

						fleet_init(&f, 2);
						f.in[0].has_snapshot = true;
						f.in[0].reports_uncached = reports;
						f.in[0].load.queued_uncached_tokens = queued[a];
						f.in[0].load.waiting_reqs = waiting[b];
						f.in[0].load.throughput = tps[c];
						f.in[0].load.kv_usage = kvs[d];
						f.in[1].live_conns = 7;
						fleet_score(&f);
						for (i = 0; i < 2; i++)
							CHECK(score_is_sane(&f.sc[i]),
							      "backend %zu: q=%g w=%g tp=%g kv=%g "
							      "rep=%d -> base %g tp %g kv %g",
							      i, queued[a], waiting[b], tps[c],
							      kvs[d], reports, f.sc[i].base_wait_s,
							      f.sc[i].throughput, f.sc[i].kv);
					}
}

static void test_unusable_throughput_uses_default(void)
{
	static const double bad[] = { 0, -0.0, -1, NAN, INFINITY, -INFINITY };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fleet f;

		fleet_init(&f, 2);
		f.p.default_throughput = 400;
		f.in[0].has_snapshot = true;
		f.in[0].reports_uncached = true;
		f.in[0].load.queued_uncached_tokens = 800;
		f.in[0].load.throughput = bad[i];
		f.in[1].live_conns = 2;
		fleet_score(&f);
		/* 800 / 400 = 2 s; 1e9 / 400 = 2.5e6 ns per token. */
		CHECK(f.sc[0].throughput == 400.0, "tp %g -> %g", bad[i], f.sc[0].throughput);
		CHECK(f.sc[0].work_s == 2.0, "tp %g: work %g", bad[i], f.sc[0].work_s);
		CHECK(f.sc[0].ns_per_token_u == 2500000ULL, "tp %g: ns/token %llu", bad[i],
		      (ull)f.sc[0].ns_per_token_u);
		/* No positive finite peer rate either: the estimate uses the default. */
		CHECK(f.sc[1].mode == STEER_MODE_ESTIMATE && f.sc[1].throughput == 400.0,
		      "tp %g: peer mode %d tp %g", bad[i], f.sc[1].mode, f.sc[1].throughput);
		CHECK(near(f.sc[1].base_wait_s, 2.0 * 1024.0 / 400.0), "tp %g: peer base %g",
		      bad[i], f.sc[1].base_wait_s);
	}
}

static void test_non_finite_kv_scores_as_zero(void)
{
	static const double bad[] = { NAN, INFINITY, -INFINITY, -0.5 };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fleet f;

		fleet_init(&f, 1);
		CHECK(set_snapshot(&f.in[0], 500, 0.0, 100.0) == 0, "snapshot");
		f.in[0].load.kv_usage = bad[i];
		fleet_score(&f);
		CHECK(f.sc[0].kv == 0.0 && f.sc[0].barrier_s == 0.0, "kv %g -> %g, barrier %g",
		      bad[i], f.sc[0].kv, f.sc[0].barrier_s);
		/* 500 / 100 = 5 s of work, nothing else. */
		CHECK(near_ns(f.sc[0].base_wait_ns, 5e9), "kv %g: ns %llu", bad[i],
		      (ull)f.sc[0].base_wait_ns);
	}
}

static void test_kv_clamped_below_one(void)
{
	static const double over[] = { 0.999, 1.0, 1.5, 1e300 };
	size_t i;

	for (i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		struct fleet f;

		fleet_init(&f, 1);
		f.p.kv_pressure_weight = 2.0;
		CHECK(set_snapshot(&f.in[0], 0, 0.5, 100.0) == 0, "snapshot");
		/* Set directly: steer_load_aggregate refuses usage above 1, the
		 * clamp guards loads that come from anywhere else. */
		f.in[0].load.kv_usage = over[i];
		fleet_score(&f);
		/* k = 0.999: barrier 2 x 0.999 / 0.001 = 1998 s, finite. */
		CHECK(f.sc[0].kv == 0.999, "kv %g -> %.17g", over[i], f.sc[0].kv);
		CHECK(near(f.sc[0].barrier_s, 1998.0), "kv %g: barrier %.9f", over[i],
		      f.sc[0].barrier_s);
		CHECK(near_ns(f.sc[0].base_wait_ns, 1998e9), "kv %g: ns %llu", over[i],
		      (ull)f.sc[0].base_wait_ns);
	}
}

static void test_waiting_requests_estimate(void)
{
	struct fleet f;

	/* An engine that has never reported uncached tokens: 3 waiting
	 * requests are 3 x 1024 tokens of queue. */
	fleet_init(&f, 1);
	f.in[0].has_snapshot = true;
	f.in[0].load.waiting_reqs = 3;
	f.in[0].load.throughput = 1024;
	fleet_score(&f);
	CHECK(f.sc[0].queued_tokens == 3072.0, "queued %g", f.sc[0].queued_tokens);
	CHECK(f.sc[0].queued_estimated, "must be marked estimated");
	/* 3072 / 1024 = 3 s. */
	CHECK(near_ns(f.sc[0].base_wait_ns, 3e9), "ns %llu", (ull)f.sc[0].base_wait_ns);

	/* The estimate follows the configured mean prefill. */
	f.p.mean_prefill_tokens = 100;
	fleet_score(&f);
	CHECK(f.sc[0].queued_tokens == 300.0, "queued %g", f.sc[0].queued_tokens);

	/* An engine known to report the field: 0 uncached means 0, whatever waits. */
	f.in[0].reports_uncached = true;
	fleet_score(&f);
	CHECK(f.sc[0].queued_tokens == 0.0, "queued %g", f.sc[0].queued_tokens);
	CHECK(!f.sc[0].queued_estimated, "must not be marked estimated");
	CHECK(f.sc[0].base_wait_ns == 0, "ns %llu", (ull)f.sc[0].base_wait_ns);

	/* A reported queue is used as is, not the request estimate. */
	f.in[0].reports_uncached = false;
	f.in[0].load.queued_uncached_tokens = 50;
	fleet_score(&f);
	CHECK(f.sc[0].queued_tokens == 50.0 && !f.sc[0].queued_estimated, "queued %g est %d",
	      f.sc[0].queued_tokens, f.sc[0].queued_estimated);

	/* Nothing waiting, nothing reported: idle, not estimated. */
	f.in[0].load.queued_uncached_tokens = 0;
	f.in[0].load.waiting_reqs = 0;
	fleet_score(&f);
	CHECK(f.sc[0].queued_tokens == 0.0 && !f.sc[0].queued_estimated, "queued %g est %d",
	      f.sc[0].queued_tokens, f.sc[0].queued_estimated);
}

static void test_integer_saturation(void)
{
	struct fleet f;

	CHECK(steer_policy_u64_sat(NAN) == 0, "NaN");
	CHECK(steer_policy_u64_sat(-1.0) == 0, "-1");
	CHECK(steer_policy_u64_sat(-INFINITY) == 0, "-inf");
	CHECK(steer_policy_u64_sat(INFINITY) == STEER_U64_MAX, "inf");
	CHECK(steer_policy_u64_sat(18446744073709551616.0) == STEER_U64_MAX, "2^64");
	CHECK(steer_policy_u64_sat(1e30) == STEER_U64_MAX, "1e30");
	/* The largest double below 2^64 is 2^64 - 2048, representable. */
	CHECK(steer_policy_u64_sat(nextafter(18446744073709551616.0, 0)) == 18446744073709549568ULL,
	      "2^64 - 2048");
	CHECK(steer_policy_u64_sat(1.9) == 1, "1.9 truncates");

	/* 2^31 - 1 tokens at 2^-20 tok/s is 2.25e15 s, 2.25e24 ns: beyond u64
	 * (1.8e19). 2^-20 is exact in binary, so the rate below is exact too. */
	fleet_init(&f, 2);
	CHECK(set_snapshot(&f.in[0], INT32_MAX, 0.0, 0x1p-20) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 0, 0.0, 1e-12) == 0, "snapshot b");
	fleet_score(&f);
	CHECK(f.sc[0].base_wait_ns == STEER_U64_MAX, "a ns %llu", (ull)f.sc[0].base_wait_ns);
	CHECK(isinf(f.sc[0].base_wait_s) || f.sc[0].base_wait_s > 2.25e15, "a base %g",
	      f.sc[0].base_wait_s);
	/* 1e9 x 2^20 = 1.048576e15 ns per token still fits. */
	CHECK(f.sc[0].ns_per_token_u == 1048576000000000ULL, "a ns/token %llu",
	      (ull)f.sc[0].ns_per_token_u);
	/* 1e9 / 1e-12 = 1e21 does not. */
	CHECK(f.sc[1].ns_per_token_u == STEER_U64_MAX, "b ns/token %llu",
	      (ull)f.sc[1].ns_per_token_u);
	CHECK(f.sc[1].base_wait_ns == 0, "b ns %llu", (ull)f.sc[1].base_wait_ns);
	/* b wins while empty; once credited it saturates, and ties to a. */
	CHECK(fleet_connect(&f) == 1, "first connect to the empty b");
	CHECK(kernel_score(&f, 1) == STEER_U64_MAX, "b score %llu", (ull)kernel_score(&f, 1));
	CHECK(fleet_connect(&f) == 0, "saturated tie goes to the lower index");

	/* A dark fleet with absurd live counts saturates too. */
	fleet_init(&f, 1);
	f.in[0].live_conns = UINT64_MAX;
	fleet_score(&f);
	CHECK(f.sc[0].base_wait_ns == STEER_U64_MAX, "dark ns %llu", (ull)f.sc[0].base_wait_ns);
}

static void test_equal_scores_tie_to_lower_index(void)
{
	struct fleet f;
	size_t i;

	fleet_init(&f, 4);
	for (i = 0; i < f.n; i++)
		CHECK(set_snapshot(&f.in[i], 777, 0.33, 123.4) == 0, "snapshot %zu", i);
	fleet_score(&f);
	/* Identical loads must give bit-identical published numbers, or the
	 * tie would be broken by rounding instead of by position. */
	for (i = 1; i < f.n; i++)
		CHECK(f.sc[i].base_wait_ns == f.sc[0].base_wait_ns &&
			      f.sc[i].ns_per_token_u == f.sc[0].ns_per_token_u,
		      "backend %zu differs", i);
	/* Equal states fill in index order: 0, 1, 2, 3, 0, 1, ... */
	for (i = 0; i < 8; i++)
		CHECK(fleet_connect(&f) == i % 4, "connect %zu", i);
}

static void test_nominal_throughput(void)
{
	struct fleet f;

	fleet_init(&f, 5);
	/* No snapshot at all: the default, and the fleet is dark. */
	CHECK(steer_policy_nominal_throughput(&f.p, f.in, f.n) == 2000.0, "dark nominal");
	CHECK(!steer_policy_fleet_has_loads(f.in, f.n), "dark fleet has loads");

	/* Mean of the positive finite snapshot rates: (100 + 300) / 2 = 200.
	 * A zero rate, and a stale load (no snapshot) however fast, are out. */
	f.in[0].has_snapshot = true;
	f.in[0].load.throughput = 100;
	f.in[1].has_snapshot = true;
	f.in[1].load.throughput = 300;
	f.in[2].has_snapshot = true;
	f.in[2].load.throughput = 0;
	f.in[3].load.throughput = 1e6;
	f.in[4].has_snapshot = true;
	f.in[4].load.throughput = NAN;
	CHECK(steer_policy_nominal_throughput(&f.p, f.in, f.n) == 200.0, "nominal %g",
	      steer_policy_nominal_throughput(&f.p, f.in, f.n));
	CHECK(steer_policy_fleet_has_loads(f.in, f.n), "fleet has loads");

	/* Snapshots that all lack a rate: loads, but the default rate. */
	f.in[0].load.throughput = 0;
	f.in[1].load.throughput = INFINITY;
	f.p.default_throughput = 750;
	CHECK(steer_policy_nominal_throughput(&f.p, f.in, f.n) == 750.0, "nominal %g",
	      steer_policy_nominal_throughput(&f.p, f.in, f.n));
	CHECK(steer_policy_fleet_has_loads(f.in, f.n), "fleet has loads");

	/* One snapshot anywhere is enough, not only in the first position. */
	f.in[0].has_snapshot = false;
	f.in[1].has_snapshot = false;
	f.in[2].has_snapshot = false;
	CHECK(steer_policy_fleet_has_loads(f.in, f.n), "a snapshot at the end only");

	/* Only the given inputs count. */
	CHECK(steer_policy_nominal_throughput(&f.p, f.in, 0) == 750.0, "empty");
	CHECK(!steer_policy_fleet_has_loads(f.in, 0), "empty fleet has loads");
}

static void test_estimate_uses_nominal_dark_uses_default(void)
{
	struct fleet f, g;

	fleet_init(&f, 3);
	f.p.default_throughput = 500;
	CHECK(set_snapshot(&f.in[0], 0, 0.0, 100.0) == 0, "snapshot x");
	CHECK(set_snapshot(&f.in[1], 0, 0.0, 300.0) == 0, "snapshot y");
	f.in[2].live_conns = 4;
	fleet_score(&f);
	/* Nominal (100 + 300) / 2 = 200: 4 x 1024 / 200 = 20.48 s, 5e6 ns/token. */
	CHECK(f.sc[2].mode == STEER_MODE_ESTIMATE, "mode %d", f.sc[2].mode);
	CHECK(f.sc[2].throughput == 200.0, "tp %g", f.sc[2].throughput);
	CHECK(near(f.sc[2].base_wait_s, 20.48), "base %.9f", f.sc[2].base_wait_s);
	CHECK(f.sc[2].ns_per_token_u == 5000000ULL, "ns/token %llu", (ull)f.sc[2].ns_per_token_u);
	CHECK(f.sc[2].kv == 0 && f.sc[2].barrier_s == 0, "no barrier without a snapshot");

	/* Order does not matter: the same fleet with the estimated one first. */
	fleet_init(&g, 3);
	g.p = f.p;
	g.in[0] = f.in[2];
	g.in[1] = f.in[0];
	g.in[2] = f.in[1];
	fleet_score(&g);
	CHECK(memcmp(&g.sc[0], &f.sc[2], sizeof(g.sc[0])) == 0, "first: mode %d tp %g base %.9f",
	      g.sc[0].mode, g.sc[0].throughput, g.sc[0].base_wait_s);

	/* The same backend in a dark fleet: the default, 4 x 1024 / 500 = 8.192 s. */
	f.in[0].has_snapshot = false;
	f.in[1].has_snapshot = false;
	fleet_score(&f);
	CHECK(f.sc[2].mode == STEER_MODE_DARK, "mode %d", f.sc[2].mode);
	CHECK(f.sc[2].throughput == 500.0, "tp %g", f.sc[2].throughput);
	CHECK(near(f.sc[2].base_wait_s, 8.192), "base %.9f", f.sc[2].base_wait_s);
	CHECK(f.sc[2].ns_per_token_u == 2000000ULL, "ns/token %llu", (ull)f.sc[2].ns_per_token_u);
}

static void test_dark_fleet_is_join_shortest_queue(void)
{
	static const uint64_t live[3] = { 2, 0, 1 };
	static const size_t want[] = { 1, 1, 2, 0, 1, 2 };
	struct fleet f;
	size_t i;

	/* With the default rate one credit is exactly one live connection:
	 * 1024 x (1e9 / 2000) = 512e6 ns = 1024 / 2000 s. */
	fleet_init(&f, 3);
	for (i = 0; i < 3; i++)
		f.in[i].live_conns = live[i];
	fleet_score(&f);
	CHECK(f.sc[0].base_wait_ns == 1024000000ULL, "2 live: %llu", (ull)f.sc[0].base_wait_ns);
	CHECK(f.sc[2].base_wait_ns == 512000000ULL, "1 live: %llu", (ull)f.sc[2].base_wait_ns);
	CHECK(steer_policy_credit(&f.p) * f.sc[0].ns_per_token_u == 512000000ULL, "credit ns");
	/* Counts (2, 0, 1): b to 1; b, c tie at 1 -> b; then all at 2 ->
	 * a, b, c in index order. */
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(fleet_connect(&f) == want[i], "connect %zu", i);
}

/* ---- Knobs and helpers ------------------------------------------------- */

static void test_credit_is_prefill_times_peer_routers(void)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;

	CHECK(steer_policy_credit(&p) == 1024, "default %u", steer_policy_credit(&p));
	p.peer_routers = 4;
	CHECK(steer_policy_credit(&p) == 4096, "4 routers %u", steer_policy_credit(&p));
	p.mean_prefill_tokens = 300;
	p.peer_routers = 3;
	CHECK(steer_policy_credit(&p) == 900, "300 x 3 %u", steer_policy_credit(&p));
	/* 65535 x 65537 = 2^32 - 1 fits exactly; 65536 x 65536 = 2^32 does not. */
	p.mean_prefill_tokens = 65535;
	p.peer_routers = 65537;
	CHECK(steer_policy_credit(&p) == UINT32_MAX, "2^32-1: %u", steer_policy_credit(&p));
	p.mean_prefill_tokens = 65536;
	p.peer_routers = 65536;
	CHECK(steer_policy_credit(&p) == UINT32_MAX, "2^32: %u", steer_policy_credit(&p));
	p.mean_prefill_tokens = UINT32_MAX;
	p.peer_routers = UINT32_MAX;
	CHECK(steer_policy_credit(&p) == UINT32_MAX, "max x max: %u", steer_policy_credit(&p));
	p.mean_prefill_tokens = 65535;
	p.peer_routers = 65536;
	CHECK(steer_policy_credit(&p) == 4294901760u, "65535 x 65536: %u", steer_policy_credit(&p));
	/* An unchecked 0 routers still credits (a 0 credit would disable the
	 * in-flight correction). */
	p.mean_prefill_tokens = 1024;
	p.peer_routers = 0;
	CHECK(steer_policy_credit(&p) == 1024, "0 routers %u", steer_policy_credit(&p));
}

struct bad_knob {
	const char *knob;
	double weight, tp;
	uint32_t prefill, peers;
};

/* With N peer routers, a live connection of this node stands for N across the
 * fleet, exactly like a credit: 2 live x 1024 x 4 = 8192 tokens. */
static void test_live_estimate_scales_with_peer_routers(void)
{
	struct fleet f;

	fleet_init(&f, 2);
	f.p.peer_routers = 4;
	CHECK(set_snapshot(&f.in[0], 1000, 0.0, 2000.0) == 0, "snapshot a");
	f.in[1].live_conns = 2;
	fleet_score(&f);
	CHECK(f.sc[1].mode == STEER_MODE_ESTIMATE, "mode %d", f.sc[1].mode);
	CHECK(f.sc[1].queued_tokens == 8192.0, "queued %.1f", f.sc[1].queued_tokens);
	/* 8192 tokens at the nominal 2000 tok/s = 4.096 s; one credit (4096
	 * tokens) is worth exactly one more live connection: 2.048 s. */
	CHECK(f.sc[1].base_wait_ns == 4096000000ULL, "base %llu",
	      (unsigned long long)f.sc[1].base_wait_ns);
	CHECK(steer_policy_credit(&f.p) * f.sc[1].ns_per_token_u == 2048000000ULL, "credit");
}

/* The anti-herding phase: nothing with one router; with N, u x one credit at
 * the backend's ns per token, added to the base in the kernel's units. */
static void test_phase_only_with_peer_routers(void)
{
	struct fleet f;
	uint64_t base;

	fleet_init(&f, 1);
	CHECK(set_snapshot(&f.in[0], 1000, 0.0, 2000.0) == 0, "snapshot");
	fleet_score(&f);
	base = f.sc[0].base_wait_ns; /* 1000 / 2000 = 0.5 s */
	CHECK(base == 500000000ULL, "base %llu", (unsigned long long)base);
	steer_policy_add_phase(&f.p, &f.sc[0], 0.5);
	CHECK(f.sc[0].base_wait_ns == base && f.sc[0].phase_s == 0, "phase with one router");

	f.p.peer_routers = 4;
	fleet_score(&f);
	steer_policy_add_phase(&f.p, &f.sc[0], 0.5);
	/* 0.5 x (1024 x 4 tokens) x 500000 ns/token = 1.024 s */
	CHECK(f.sc[0].base_wait_ns == base + 1024000000ULL, "base %llu",
	      (unsigned long long)f.sc[0].base_wait_ns);
	CHECK(fabs(f.sc[0].phase_s - 1.024) < 1e-9 && fabs(f.sc[0].base_wait_s - 1.524) < 1e-9,
	      "phase %.9f base %.9f", f.sc[0].phase_s, f.sc[0].base_wait_s);
	fleet_score(&f);
	steer_policy_add_phase(&f.p, &f.sc[0], 0.0);
	CHECK(f.sc[0].base_wait_ns == base, "u = 0 adds nothing");
	steer_policy_add_phase(&f.p, &f.sc[0], NAN);
	CHECK(f.sc[0].base_wait_ns == base, "u = NaN adds nothing");
	steer_policy_add_phase(&f.p, &f.sc[0], 7.0);
	CHECK(f.sc[0].base_wait_ns < base + 2048000000ULL, "u >= 1 stays below one credit");
}

static void test_policy_check_names_the_knob(void)
{
	static const struct bad_knob cases[] = {
		{ "least-load-kv-pressure-weight", -0.1, 2000, 1024, 1 },
		{ "least-load-kv-pressure-weight", NAN, 2000, 1024, 1 },
		{ "least-load-kv-pressure-weight", INFINITY, 2000, 1024, 1 },
		{ "least-load-default-throughput", 0.15, 0, 1024, 1 },
		{ "least-load-default-throughput", 0.15, -5, 1024, 1 },
		{ "least-load-default-throughput", 0.15, NAN, 1024, 1 },
		{ "least-load-default-throughput", 0.15, INFINITY, 1024, 1 },
		{ "least-load-mean-prefill-tokens", 0.15, 2000, 0, 1 },
		{ "peer-routers", 0.15, 2000, 1024, 0 },
	};
	struct steer_policy ok = STEER_POLICY_DEFAULTS;
	char why[160];
	size_t i;

	why[0] = '\0';
	CHECK(steer_policy_check(&ok, why, sizeof(why)) == 0, "defaults rejected: %s", why);
	ok.kv_pressure_weight = 0; /* the barrier may be switched off */
	ok.default_throughput = 1e-3;
	ok.mean_prefill_tokens = 1;
	CHECK(steer_policy_check(&ok, why, sizeof(why)) == 0, "edges rejected: %s", why);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct steer_policy p = { .kv_pressure_weight = cases[i].weight,
					  .default_throughput = cases[i].tp,
					  .mean_prefill_tokens = cases[i].prefill,
					  .peer_routers = cases[i].peers };

		why[0] = '\0';
		CHECK(steer_policy_check(&p, why, sizeof(why)) == -1, "case %zu accepted", i);
		CHECK(strstr(why, cases[i].knob) != NULL, "case %zu: '%s' does not name %s", i, why,
		      cases[i].knob);
		CHECK(steer_policy_check(&p, NULL, 0) == -1, "case %zu without why", i);
	}
}

static void test_total_s_is_the_upstream_score(void)
{
	struct fleet f;
	double want;
	size_t i;

	fleet_init(&f, 3);
	CHECK(set_snapshot(&f.in[0], 8000, 0.2, 100.0) == 0, "snapshot a");
	CHECK(set_snapshot(&f.in[1], 1000, 0.5, 250.0) == 0, "snapshot b");
	f.in[2].live_conns = 3;
	fleet_score(&f);
	/* Upstream: (queued + inflight) / throughput + w k / (1 - k).
	 * a with 2048 in flight: 10048 / 100 + 0.15 x 0.2 / 0.8 = 100.48 + 0.0375 s. */
	CHECK(near(steer_policy_total_s(&f.sc[0], 2048), 100.5175), "a %.9f",
	      steer_policy_total_s(&f.sc[0], 2048));
	/* b with 0: 1000 / 250 + 0.15 x 0.5 / 0.5 = 4.15 s. */
	CHECK(near(steer_policy_total_s(&f.sc[1], 0), 4.15), "b %.9f",
	      steer_policy_total_s(&f.sc[1], 0));
	/* c (estimated at nominal 175) with 1024: (3 + 1) x 1024 / 175 s. */
	CHECK(near(steer_policy_total_s(&f.sc[2], 1024), 4096.0 / 175.0), "c %.9f",
	      steer_policy_total_s(&f.sc[2], 1024));

	/* The kernel's integer score agrees with the seconds: the published
	 * ns per token is truncated, which costs less than 1 ns per in-flight
	 * token, and, for a backend scored from live connections (whose base
	 * is live x prefill tokens at that same ns per token), per live token. */
	for (i = 0; i < f.n; i++) {
		uint64_t inflight = 1024 * (i + 1);
		double tokens = (double)inflight;

		if (f.sc[i].mode != STEER_MODE_SNAPSHOT)
			tokens += f.sc[i].queued_tokens;
		f.inflight[i] = inflight;
		want = steer_policy_total_s(&f.sc[i], (double)inflight) * NS;
		CHECK(fabs((double)kernel_score(&f, i) - want) < tokens + 2.0,
		      "backend %zu: %llu vs %.1f", i, (ull)kernel_score(&f, i), want);
	}
}

/* ---- Request bytes on the wire -------------------------------------------------------- */

/* Bytes become tokens as the kernel counts them, rounded down; 0 is the default (4). */
static void test_wire_bytes_per_token(void)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;
	char why[160] = "";

	CHECK(steer_bytes_per_token(p.bytes_per_token) == 4, "default %u",
	      steer_bytes_per_token(p.bytes_per_token));
	CHECK(steer_policy_wire_tokens(&p, 1003) == 250, "1003 B / 4 = %llu",
	      (ull)steer_policy_wire_tokens(&p, 1003));
	p.bytes_per_token = 3;
	CHECK(steer_policy_wire_tokens(&p, 1000) == 333, "1000 B / 3 = %llu",
	      (ull)steer_policy_wire_tokens(&p, 1000));
	CHECK(steer_policy_wire_tokens(&p, UINT64_MAX) == UINT64_MAX / 3, "no overflow");
	p.bytes_per_token = 0;
	CHECK(steer_bytes_per_token(p.bytes_per_token) == 4 && steer_policy_wire_tokens(&p, 8) == 2,
	      "0 is the default");
	CHECK(steer_policy_check(&p, why, sizeof(why)) == 0, "0 rejected: %s", why);
	p.bytes_per_token = STEER_MAX_BYTES_PER_TOKEN;
	CHECK(steer_policy_check(&p, why, sizeof(why)) == 0, "1024 rejected: %s", why);
	p.bytes_per_token = STEER_MAX_BYTES_PER_TOKEN + 1;
	CHECK(steer_policy_check(&p, why, sizeof(why)) == -1 && strstr(why, "bytes-per-token"),
	      "1025: '%s'", why);
}

/* max(0, queued - busy at the poll), whatever the queue's source. */
static void test_busy_at_poll_leaves_the_snapshot_queue(void)
{
	double sub = -1;
	struct fleet f;

	CHECK(steer_policy_wire_queue(8000, 3000, &sub) == 5000 && sub == 3000, "8000 - 3000");
	CHECK(steer_policy_wire_queue(1000, 3000, &sub) == 0 && sub == 1000, "clamped at 0");
	CHECK(steer_policy_wire_queue(NAN, 5, &sub) == 0 && sub == 0, "NaN queue");
	CHECK(steer_policy_wire_queue(-4, 5, NULL) == 0, "negative queue");
	CHECK(steer_policy_wire_queue(700, 0, &sub) == 700 && sub == 0, "nothing pending");

	fleet_init(&f, 3);
	CHECK(set_snapshot(&f.in[0], 8000, 0, 100.0) == 0, "a");
	f.in[0].busy_at_poll = 3000;
	/* An engine without the uncached field: 4 waiting x 1024 = 4096, less 1000. */
	CHECK(set_snapshot(&f.in[1], 0, 0, 100.0) == 0, "b");
	f.in[1].load.waiting_reqs = 4;
	f.in[1].busy_at_poll = 1000;
	/* No snapshot: the live estimate stands, the pending figure is not used. */
	f.in[2].live_conns = 2;
	f.in[2].busy_at_poll = 999999;
	fleet_score(&f);
	CHECK(f.sc[0].queued_reported == 8000 && f.sc[0].wire_subtracted == 3000 &&
		      f.sc[0].queued_tokens == 5000,
	      "a: %g - %g = %g", f.sc[0].queued_reported, f.sc[0].wire_subtracted,
	      f.sc[0].queued_tokens);
	CHECK(f.sc[0].base_wait_ns == 50ULL * 1000000000ULL, "a: 5000 / 100 = 50 s, got %llu",
	      (ull)f.sc[0].base_wait_ns);
	CHECK(f.sc[1].queued_estimated && f.sc[1].queued_reported == 4096 &&
		      f.sc[1].queued_tokens == 3096,
	      "b: %g", f.sc[1].queued_tokens);
	CHECK(f.sc[2].mode == STEER_MODE_ESTIMATE && f.sc[2].queued_tokens == 2048 &&
		      f.sc[2].wire_subtracted == 0,
	      "c: %g", f.sc[2].queued_tokens);
}

/*
 * Nothing counted twice, nothing lost (docs/algorithm.md, "Combining this router's work with a snapshot"). The engine's
 * true queue at any moment is the other routers' work plus this router's
 * requests still pending; the kernel's score is base + (credits + pending
 * now) x ns per token. Walked through a poll: at its send this router has
 * 1000 + 2000 tokens pending, the other routers 4000; the engine reports
 * 7000. By the publish the 1000 has been answered and a 500 sent.
 */
static void test_wire_nothing_counted_twice(void)
{
	const uint64_t other = 4000, ours_at_poll = 3000;
	uint64_t pending_now, truth;
	struct fleet f;

	fleet_init(&f, 1);
	f.p.bytes_per_token = 3;
	CHECK(set_snapshot(&f.in[0], (int32_t)(other + ours_at_poll), 0, 1000.0) == 0, "a");
	/* The daemon reads the bytes at the poll's send: 9000 B / 3 = 3000 tokens. */
	f.in[0].busy_at_poll = steer_policy_wire_tokens(&f.p, 9000);
	fleet_score(&f);
	pending_now = ours_at_poll - 1000 + 500;
	truth = other + (ours_at_poll - 1000) + 500;
	f.inflight[0] = pending_now; /* the kernel adds what is pending now */
	CHECK(kernel_score(&f, 0) == truth * 1000000ULL, "score %llu, want %llu x 1 ms",
	      (ull)kernel_score(&f, 0), (ull)truth);
	/* Until the next poll every answer takes its tokens off at once... */
	f.inflight[0] = 0;
	CHECK(kernel_score(&f, 0) == other * 1000000ULL, "all answered: %llu",
	      (ull)kernel_score(&f, 0));
	/* ... and the next poll sees the engine's queue as it is: */
	CHECK(set_snapshot(&f.in[0], (int32_t)other, 0, 1000.0) == 0, "a again");
	f.in[0].busy_at_poll = 0;
	fleet_score(&f);
	CHECK(kernel_score(&f, 0) == other * 1000000ULL, "next poll: %llu",
	      (ull)kernel_score(&f, 0));
}

/* smg's overload bounds, judged on the snapshot: each on its own, all off by
 * default, nothing without a fresh snapshot. */
static void test_overload_bounds(void)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;
	struct steer_policy_input in = { .has_snapshot = true };

	in.load.kv_usage = 0.95;
	in.load.waiting_reqs = 20;
	CHECK(!steer_policy_overload_on(&p) && steer_policy_kv_bound(&p) == 0, "off by default");
	p.overload_protection = true;
	CHECK(steer_policy_kv_bound(&p) == 0.9 &&
		      steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_KV,
	      "--worker-overload-protection: KV 0.95 >= 0.9");
	in.load.kv_usage = 0.89;
	CHECK(steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_NONE, "KV 0.89 under 0.9");
	p.overload_token_usage = 0.8;
	CHECK(steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_KV, "K 0.8: KV 0.89 over");
	p.overload_protection = false;
	CHECK(steer_policy_overload_on(&p) && steer_policy_kv_bound(&p) == 0.8,
	      "the token usage bound is on by itself");
	p.overload_token_usage = 0;
	p.overload_waiting = 20;
	CHECK(steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_WAITING, "20 waiting >= 20");
	in.load.waiting_reqs = 19;
	CHECK(steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_NONE, "19 waiting < 20");
	in.load.waiting_reqs = 30;
	in.has_snapshot = false;
	CHECK(steer_policy_overloaded(&p, &in) == STEER_OVERLOAD_NONE, "no snapshot: no verdict");
	p.overload_waiting = 0;
	p.overload_wait_ns = 2000000000ULL;
	CHECK(steer_policy_overload_on(&p), "the wait bound turns it on");
	p.overload_token_usage = 1.5;
	CHECK(steer_policy_check(&p, NULL, 0) != 0, "token usage 1.5 accepted");
}

int main(void)
{
	/* Upstream least_load.rs unit tests, mirrored. */
	TAP_RUN(test_cold_start_picks_lowest_in_flight);
	TAP_RUN(test_routes_to_lower_queued_token_work);
	TAP_RUN(test_throughput_normalization_prefers_faster_worker);
	TAP_RUN(test_zero_throughput_falls_back_to_default);
	TAP_RUN(test_missing_snapshot_estimated_in_time_units);
	TAP_RUN(test_kv_barrier_avoids_full_worker);
	TAP_RUN(test_inflight_correction_spreads_within_poll_interval);
	TAP_RUN(test_update_loads_resets_inflight);
	TAP_RUN(test_single_worker_always_selected);
	TAP_RUN(test_stale_load_evicted_falls_back_to_in_flight);
	TAP_RUN(test_remove_worker_prunes_state);
	/* This module's own contract. */
	TAP_RUN(test_non_finite_inputs_never_produce_nan);
	TAP_RUN(test_unusable_throughput_uses_default);
	TAP_RUN(test_non_finite_kv_scores_as_zero);
	TAP_RUN(test_kv_clamped_below_one);
	TAP_RUN(test_waiting_requests_estimate);
	TAP_RUN(test_integer_saturation);
	TAP_RUN(test_equal_scores_tie_to_lower_index);
	TAP_RUN(test_nominal_throughput);
	TAP_RUN(test_estimate_uses_nominal_dark_uses_default);
	TAP_RUN(test_dark_fleet_is_join_shortest_queue);
	TAP_RUN(test_credit_is_prefill_times_peer_routers);
	TAP_RUN(test_live_estimate_scales_with_peer_routers);
	TAP_RUN(test_phase_only_with_peer_routers);
	TAP_RUN(test_policy_check_names_the_knob);
	TAP_RUN(test_total_s_is_the_upstream_score);
	TAP_RUN(test_overload_bounds);
	/* Request bytes on the wire. */
	TAP_RUN(test_wire_bytes_per_token);
	TAP_RUN(test_busy_at_poll_leaves_the_snapshot_queue);
	TAP_RUN(test_wire_nothing_counted_twice);
	return tap_done();
}
