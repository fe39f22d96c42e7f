// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_aggregate.c - steer_load_aggregate (user/policy/policy.c): every load source
 * (the three gRPC engines, /v1/loads, /metrics) is validated and aggregated
 * across DP ranks by this one function, so what it refuses is refused for
 * all of them. A refused report is a failed poll, never an idle worker.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "policy/policy.h"
#include "steer_common.h"
#include "tap.h"

static bool near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want));
}

/* ---- Aggregation and validation ----------------------------------------- */

static void test_aggregate_sums_dp_ranks(void)
{
	struct steer_rank_load r[2] = {
		{ .dp_rank = 0,
		  .num_running_reqs = 3,
		  .num_waiting_reqs = 1,
		  .num_waiting_uncached_tokens = 100,
		  .token_usage = 0.2,
		  .gen_throughput = 60.0 },
		{ .dp_rank = 1,
		  .num_running_reqs = 4,
		  .num_waiting_reqs = 2,
		  .num_waiting_uncached_tokens = 200,
		  .token_usage = 0.6,
		  .gen_throughput = 40.0 },
	};
	const struct steer_policy p = STEER_POLICY_DEFAULTS;
	struct steer_policy_input in = { 0 };
	struct steer_policy_score sc;
	struct steer_load *l = &in.load;
	char why[128] = "";

	CHECK(steer_load_aggregate(r, 2, l, why, sizeof(why)) == 0, "rejected: %s", why);
	CHECK(l->queued_uncached_tokens == 300.0, "uncached %g", l->queued_uncached_tokens);
	CHECK(l->throughput == 100.0, "tp %g", l->throughput);
	CHECK(near(l->kv_usage, 0.4), "kv %g (mean, not sum or max)", l->kv_usage);
	CHECK(l->waiting_reqs == 3.0 && l->running_reqs == 7.0, "waiting %g running %g",
	      l->waiting_reqs, l->running_reqs);
	CHECK(l->ranks == 2, "ranks %u", l->ranks);

	/* Scored: 300 / 100 = 3 s + 0.15 x 0.4 / 0.6 = 0.1 s. */
	in.has_snapshot = true;
	in.reports_uncached = true;
	steer_policy_score_all(&p, &in, 1, &sc);
	CHECK(near(sc.base_wait_s, 3.1), "base %.9f", sc.base_wait_s);

	/* Two full ranks: the sum exceeds int32 without overflowing. */
	r[0].num_waiting_uncached_tokens = INT32_MAX;
	r[1].num_waiting_uncached_tokens = INT32_MAX;
	CHECK(steer_load_aggregate(r, 2, l, why, sizeof(why)) == 0, "rejected: %s", why);
	CHECK(l->queued_uncached_tokens == 4294967294.0, "uncached %.17g",
	      l->queued_uncached_tokens);
}

struct bad_rank {
	const char *field;
	int32_t running, waiting, uncached;
	double usage, tp;
};

static void test_aggregate_rejects_bad_numbers(void)
{
	static const struct bad_rank cases[] = {
		{ "num_waiting_uncached_tokens", 0, 0, -1, 0.1, 10 },
		{ "num_waiting_uncached_tokens", 0, 0, INT32_MIN, 0.1, 10 },
		{ "num_waiting_reqs", 0, -1, 0, 0.1, 10 },
		{ "num_running_reqs", -5, 0, 0, 0.1, 10 },
		{ "token_usage", 0, 0, 0, -0.01, 10 },
		{ "token_usage", 0, 0, 0, NAN, 10 },
		{ "token_usage", 0, 0, 0, INFINITY, 10 },
		{ "token_usage", 0, 0, 0, -INFINITY, 10 },
		{ "gen_throughput", 0, 0, 0, 0.1, -1 },
		{ "gen_throughput", 0, 0, 0, 0.1, NAN },
		{ "gen_throughput", 0, 0, 0, 0.1, INFINITY },
		{ "gen_throughput", 0, 0, 0, 0.1, -INFINITY },
		/* KV usage is a fraction, throughput has a sane bound. */
		{ "token_usage", 0, 0, 0, 5.0, 10 },
		{ "token_usage", 0, 0, 0, 1.0000001, 10 },
		{ "token_usage", 0, 0, 0, 1e308, 10 },
		{ "gen_throughput", 0, 0, 0, 0.1, 1.000001e9 },
		{ "gen_throughput", 0, 0, 0, 0.1, DBL_MAX },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_rank *c = &cases[i];
		/* The bad value sits in the second rank; the first is valid. */
		struct steer_rank_load r[2] = {
			{ .dp_rank = 0, .token_usage = 0.5, .gen_throughput = 10 },
			{ .dp_rank = 1,
			  .num_running_reqs = c->running,
			  .num_waiting_reqs = c->waiting,
			  .num_waiting_uncached_tokens = c->uncached,
			  .token_usage = c->usage,
			  .gen_throughput = c->tp },
		};
		struct steer_load out, before;
		char why[160] = "";

		memset(&out, 0xa5, sizeof(out));
		before = out;
		CHECK(steer_load_aggregate(r, 2, &out, why, sizeof(why)) == -1, "case %zu accepted",
		      i);
		CHECK(strstr(why, c->field) != NULL, "case %zu: '%s' does not name %s", i, why,
		      c->field);
		CHECK(strstr(why, "rank 1") != NULL, "case %zu: '%s' does not name rank 1", i, why);
		CHECK(memcmp(&out, &before, sizeof(out)) == 0, "case %zu: out written on failure",
		      i);
	}
}

/*
 * A hostile probe's repro: two ranks of token_usage = 1e308 and
 * gen_throughput = 1e308 summed to infinity and were accepted with kv = inf,
 * which the score's clamp then read as 0: the fullest worker looked idle.
 */
static void test_aggregate_rejects_overflowing_sums(void)
{
	struct steer_rank_load r[2] = {
		{ .dp_rank = 0, .token_usage = 1e308, .gen_throughput = 1e308 },
		{ .dp_rank = 1, .token_usage = 1e308, .gen_throughput = 1e308 },
	};
	struct steer_load out = { 0 };
	char why[160] = "";

	CHECK(steer_load_aggregate(r, 2, &out, why, sizeof(why)) == -1,
	      "accepted: kv %g throughput %g", out.kv_usage, out.throughput);
	CHECK(strstr(why, "token_usage") != NULL, "'%s' does not name token_usage", why);

	/* Within every per-rank bound, 1024 ranks still sum to finite values. */
	{
		static struct steer_rank_load many[1024];
		size_t i;

		for (i = 0; i < 1024; i++)
			many[i] =
				(struct steer_rank_load){ .dp_rank = (int32_t)i,
							  .num_running_reqs = INT32_MAX,
							  .num_waiting_reqs = INT32_MAX,
							  .num_waiting_uncached_tokens = INT32_MAX,
							  .token_usage = 1.0,
							  .gen_throughput = 1e9 };
		CHECK(steer_load_aggregate(many, 1024, &out, why, sizeof(why)) == 0, "%s", why);
		CHECK(out.kv_usage == 1.0 && out.throughput == 1024e9, "kv %g tp %g", out.kv_usage,
		      out.throughput);
		CHECK(isfinite(out.queued_uncached_tokens), "uncached %g",
		      out.queued_uncached_tokens);
	}
}

/* The bounds themselves are valid: a full KV cache and 1e9 tokens/s. */
static void test_aggregate_accepts_the_bounds(void)
{
	struct steer_rank_load r[2] = {
		{ .dp_rank = 0, .token_usage = 1.0, .gen_throughput = 1e9 },
		{ .dp_rank = 1, .token_usage = 0.0, .gen_throughput = 0.0 },
	};
	struct steer_load out;
	char why[160] = "";

	CHECK(steer_load_aggregate(r, 2, &out, why, sizeof(why)) == 0, "%s", why);
	CHECK(out.kv_usage == 0.5 && out.throughput == 1e9, "kv %g tp %g", out.kv_usage,
	      out.throughput);
}

static void test_aggregate_rejects_empty_and_tolerates_small_why(void)
{
	struct steer_rank_load r = { .num_waiting_reqs = -1 };
	struct steer_load out;
	char why[8];

	CHECK(steer_load_aggregate(NULL, 0, &out, why, sizeof(why)) == -1, "empty accepted");
	CHECK(steer_load_aggregate(&r, 1, &out, NULL, 0) == -1, "no why buffer");
	memset(why, 'x', sizeof(why));
	CHECK(steer_load_aggregate(&r, 1, &out, why, sizeof(why)) == -1, "small why");
	CHECK(memchr(why, '\0', sizeof(why)) != NULL, "why not terminated");
	CHECK(strlen(why) == sizeof(why) - 1, "why '%s' should be truncated", why);
}

int main(void)
{
	TAP_RUN(test_aggregate_sums_dp_ranks);
	TAP_RUN(test_aggregate_rejects_bad_numbers);
	TAP_RUN(test_aggregate_rejects_overflowing_sums);
	TAP_RUN(test_aggregate_accepts_the_bounds);
	TAP_RUN(test_aggregate_rejects_empty_and_tolerates_small_why);
	return tap_done();
}
