// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * policy.c - expected-wait scoring (see policy.h). Pure: no I/O.
 */
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>

#define STR_(x) #x
#define STR(x) STR_(x)

uint64_t steer_policy_u64_sat(double x)
{
	if (!(x > 0)) /* also NaN */
		return 0;
	if (x >= 18446744073709551616.0) /* 2^64 */
		return STEER_U64_MAX;
	return (uint64_t)x;
}

int steer_policy_check(const struct steer_policy *p, char *why, size_t whylen)
{
	const char *msg = NULL;

	if (!isfinite(p->kv_pressure_weight) || p->kv_pressure_weight < 0)
		msg = "least-load-kv-pressure-weight must be a finite number >= 0 (seconds)";
	else if (!isfinite(p->default_throughput) || p->default_throughput <= 0)
		msg = "least-load-default-throughput must be a finite number > 0 (tokens/s)";
	else if (p->mean_prefill_tokens < 1)
		msg = "least-load-mean-prefill-tokens must be an integer >= 1";
	else if (p->peer_routers < 1)
		msg = "peer-routers must be an integer >= 1";
	else if (p->bytes_per_token > STEER_MAX_BYTES_PER_TOKEN)
		msg = "bytes-per-token must be an integer from 1 to " STR(
			STEER_MAX_BYTES_PER_TOKEN) " (0: the default)";
	else if (!(p->overload_token_usage >= 0 && p->overload_token_usage <= 1))
		msg = "worker-overload-token-usage must be a number > 0 and <= 1 (0: none)";
	else if (p->overload_wait_ns >= STEER_OVERLOAD_NS)
		msg = "worker-overload-wait must be under 2^62 ns";
	else if (p->affinity > STEER_AFF_SOCKOPT)
		msg = "affinity must be off, cgroup, netns or sockopt";
	else if (p->affinity_slack_ns >= STEER_OVERLOAD_NS)
		msg = "affinity-slack must be under 2^62 ns";
	if (!msg)
		return 0;
	if (why && whylen)
		snprintf(why, whylen, "%s", msg);
	return -1;
}

static int reject(char *why, size_t whylen, int32_t dp_rank, const char *field, const char *rule)
{
	if (why && whylen)
		snprintf(why, whylen, "dp_rank %d: %s %s", dp_rank, field, rule);
	return -1;
}

/* One rank's numbers, each against its own range: 0 or -1 with why. A value
 * out of range is a broken report, never clamped into a plausible one (an
 * infinite KV usage once clamped to 0 made the fullest worker look idle). */
static int check_rank(const struct steer_rank_load *r, char *why, size_t whylen)
{
	int32_t idx = r->dp_rank;

	if (r->num_waiting_uncached_tokens < 0)
		return reject(why, whylen, idx, "num_waiting_uncached_tokens", "is negative");
	if (r->num_waiting_reqs < 0)
		return reject(why, whylen, idx, "num_waiting_reqs", "is negative");
	if (r->num_running_reqs < 0)
		return reject(why, whylen, idx, "num_running_reqs", "is negative");
	if (!isfinite(r->token_usage))
		return reject(why, whylen, idx, "token_usage", "is not finite");
	if (r->token_usage < 0 || r->token_usage > 1)
		return reject(why, whylen, idx, "token_usage", "is outside [0, 1]");
	if (!isfinite(r->gen_throughput))
		return reject(why, whylen, idx, "gen_throughput", "is not finite");
	if (r->gen_throughput < 0)
		return reject(why, whylen, idx, "gen_throughput", "is negative");
	if (r->gen_throughput > STEER_MAX_RANK_THROUGHPUT)
		return reject(why, whylen, idx, "gen_throughput", "is above 1e9 tokens/s");
	return 0;
}

int steer_load_aggregate(const struct steer_rank_load *ranks, size_t n, struct steer_load *out,
			 char *why, size_t whylen)
{
	struct steer_load a = { 0 };
	size_t i;

	if (n == 0) {
		if (why && whylen)
			snprintf(why, whylen, "the response has no load entries");
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct steer_rank_load *r = &ranks[i];

		if (check_rank(r, why, whylen) != 0)
			return -1;
		a.queued_uncached_tokens += r->num_waiting_uncached_tokens;
		a.waiting_reqs += r->num_waiting_reqs;
		a.running_reqs += r->num_running_reqs;
		a.throughput += r->gen_throughput;
		a.kv_usage += r->token_usage;
	}
	a.kv_usage /= (double)n; /* upstream: effective_token_usage is the mean */
	/* Bounded per rank, the sums stay finite for any realistic n; an
	 * infinite sum is refused rather than trusted all the same. */
	if (!isfinite(a.throughput) || !isfinite(a.kv_usage) ||
	    !isfinite(a.queued_uncached_tokens)) {
		if (why && whylen)
			snprintf(why, whylen, "the sum over %zu ranks is not finite", n);
		return -1;
	}
	a.ranks = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	*out = a;
	return 0;
}

static bool usable_throughput(double t)
{
	return isfinite(t) && t > 0;
}

double steer_policy_nominal_throughput(const struct steer_policy *p,
				       const struct steer_policy_input *in, size_t n)
{
	double mean = 0;
	size_t i, count = 0;

	/* A running mean: a sum of huge reports could overflow to infinity. */
	for (i = 0; i < n; i++)
		if (in[i].has_snapshot && usable_throughput(in[i].load.throughput)) {
			count++;
			mean += (in[i].load.throughput - mean) / (double)count;
		}
	if (count == 0 || !usable_throughput(mean))
		return p->default_throughput;
	return mean;
}

bool steer_policy_fleet_has_loads(const struct steer_policy_input *in, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (in[i].has_snapshot)
			return true;
	return false;
}

static double clamp_kv(double k)
{
	if (!isfinite(k) || k < 0)
		return 0;
	return k > STEER_KV_CLAMP_MAX ? STEER_KV_CLAMP_MAX : k;
}

/* Queued token-work of a backend with a snapshot. */
static double queued_tokens(const struct steer_policy *p, const struct steer_policy_input *in,
			    bool *estimated)
{
	const struct steer_load *l = &in->load;

	*estimated = false;
	/* An engine that never reported the field while requests wait would
	 * look idle as its queue grows: estimate from the request count. */
	if (!in->reports_uncached && l->queued_uncached_tokens <= 0 && l->waiting_reqs > 0) {
		*estimated = true;
		return l->waiting_reqs * (double)p->mean_prefill_tokens;
	}
	return l->queued_uncached_tokens > 0 ? l->queued_uncached_tokens : 0;
}

static void finish(struct steer_policy_score *s)
{
	s->base_wait_s = s->work_s + s->barrier_s + s->phase_s;
	s->ns_per_token = 1e9 / s->throughput;
	s->base_wait_ns = steer_policy_u64_sat(s->base_wait_s * 1e9);
	s->ns_per_token_u = steer_policy_u64_sat(s->ns_per_token);
}

static void score_snapshot(const struct steer_policy *p, const struct steer_policy_input *in,
			   struct steer_policy_score *s)
{
	s->mode = STEER_MODE_SNAPSHOT;
	s->queued_reported = queued_tokens(p, in, &s->queued_estimated);
	s->queued_tokens =
		steer_policy_wire_queue(s->queued_reported, in->busy_at_poll, &s->wire_subtracted);
	s->throughput = usable_throughput(in->load.throughput) ? in->load.throughput
							       : p->default_throughput;
	s->kv = clamp_kv(in->load.kv_usage);
	s->work_s = s->queued_tokens / s->throughput;
	s->barrier_s = p->kv_pressure_weight * s->kv / (1.0 - s->kv);
	finish(s);
}

/* No snapshot: the live connections' drain time at a given throughput. */
static void score_from_live(const struct steer_policy *p, const struct steer_policy_input *in,
			    double throughput, enum steer_mode mode, struct steer_policy_score *s)
{
	s->mode = mode;
	/* Like the credit, scaled by the peer routers: this node sees only its
	 * own connections and assumes its peers hold as many. */
	s->queued_tokens = (double)in->live_conns * (double)p->mean_prefill_tokens *
			   (double)(p->peer_routers ? p->peer_routers : 1);
	s->queued_reported = s->queued_tokens;
	s->queued_estimated = true;
	s->throughput = throughput;
	s->kv = 0;
	s->work_s = s->queued_tokens / throughput;
	s->barrier_s = 0;
	finish(s);
	/* In the kernel's own units, so that a live connection weighs exactly
	 * what a credited connection does: live x prefill tokens x ns/token. */
	s->base_wait_ns = steer_sat_mul(steer_policy_u64_sat(s->queued_tokens), s->ns_per_token_u);
}

void steer_policy_score_all(const struct steer_policy *p, const struct steer_policy_input *in,
			    size_t n, struct steer_policy_score *out)
{
	bool fleet = steer_policy_fleet_has_loads(in, n);
	double nominal = steer_policy_nominal_throughput(p, in, n);
	size_t i;

	for (i = 0; i < n; i++) {
		struct steer_policy_score *s = &out[i];

		*s = (struct steer_policy_score){ 0 };
		if (in[i].has_snapshot)
			score_snapshot(p, &in[i], s);
		else if (fleet)
			score_from_live(p, &in[i], nominal, STEER_MODE_ESTIMATE, s);
		else
			score_from_live(p, &in[i], p->default_throughput, STEER_MODE_DARK, s);
	}
}

void steer_policy_add_phase(const struct steer_policy *p, struct steer_policy_score *s, double u01)
{
	uint64_t phase;

	if ((p->peer_routers <= 1 && !p->peers_report) || !(u01 > 0))
		return;
	if (u01 >= 1)
		u01 = 0.999999;
	/* In the kernel's units: a fraction of one credit at this backend's rate. */
	phase = steer_policy_u64_sat(u01 * (double)steer_policy_credit(p) *
				     (double)s->ns_per_token_u);
	s->phase_s = (double)phase / 1e9;
	s->base_wait_s = s->work_s + s->barrier_s + s->phase_s;
	s->base_wait_ns = steer_sat_add(s->base_wait_ns, phase);
}

uint64_t steer_policy_wire_tokens(const struct steer_policy *p, uint64_t bytes)
{
	return bytes / steer_bytes_per_token(p->bytes_per_token);
}

double steer_policy_wire_queue(double queued, uint64_t pending_at_poll, double *subtracted)
{
	double pending = (double)pending_at_poll, take;

	if (!(queued > 0)) /* also NaN */
		queued = 0;
	take = pending < queued ? pending : queued;
	if (subtracted)
		*subtracted = take;
	return queued - take;
}

uint32_t steer_policy_credit(const struct steer_policy *p)
{
	uint64_t c = (uint64_t)p->mean_prefill_tokens * (p->peer_routers ? p->peer_routers : 1);

	return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

double steer_policy_total_s(const struct steer_policy_score *s, double inflight_tokens)
{
	return s->base_wait_s + inflight_tokens / s->throughput;
}

const char *steer_affinity_name(uint32_t affinity)
{
	static const char *const names[] = {
		[STEER_AFF_OFF] = "off",       [STEER_AFF_CGROUP] = "cgroup",
		[STEER_AFF_NETNS] = "netns",   [STEER_AFF_SOCKOPT] = "sockopt",
		[STEER_AFF_SOURCE] = "source",
	};

	return affinity < sizeof(names) / sizeof(names[0]) ? names[affinity] : "";
}

const char *steer_aff_verdict_name(uint32_t verdict)
{
	static const char *const names[STEER_AFF_VERDICTS] = {
		[STEER_AFF_NEW] = "new",
		[STEER_AFF_STAY] = "stay",
		[STEER_AFF_LEFT_SLACK] = "left_slack",
		[STEER_AFF_LEFT_GONE] = "left_gone",
		[STEER_AFF_LEFT_OVERLOAD] = "left_overload",
	};

	return verdict < STEER_AFF_VERDICTS ? names[verdict] : "";
}

bool steer_policy_overload_on(const struct steer_policy *p)
{
	return steer_policy_kv_bound(p) > 0 || p->overload_waiting || p->overload_wait_ns ||
	       p->overload_connections;
}

double steer_policy_kv_bound(const struct steer_policy *p)
{
	if (p->overload_token_usage > 0)
		return p->overload_token_usage;
	return p->overload_protection ? STEER_OVERLOAD_DEFAULT_TOKEN_USAGE : 0;
}

enum steer_overload_reason steer_policy_overloaded(const struct steer_policy *p,
						   const struct steer_policy_input *in)
{
	double kv = steer_policy_kv_bound(p);

	if (!in->has_snapshot)
		return STEER_OVERLOAD_NONE;
	if (kv > 0 && in->load.kv_usage >= kv)
		return STEER_OVERLOAD_KV;
	if (p->overload_waiting && in->load.waiting_reqs >= p->overload_waiting)
		return STEER_OVERLOAD_WAITING;
	return STEER_OVERLOAD_NONE;
}

const char *steer_overload_reason_name(enum steer_overload_reason r)
{
	switch (r) {
	case STEER_OVERLOAD_KV:
		return "kv";
	case STEER_OVERLOAD_WAITING:
		return "waiting";
	case STEER_OVERLOAD_PUSHBACK:
		return "pushback";
	default:
		return "";
	}
}
