// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * workload.c - random streams, request sizes and the simulator's fixed model
 * parameters. Every number here is chosen once, from first principles, and
 * documented in docs/simulator.md; none is tuned to any policy.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

/* ---- Random numbers ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed, uint64_t stream)
{
	/* Mix the stream id in before expanding, so that streams of one
	 * seed and the same stream of neighbouring seeds all differ. */
	uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double sim_rng_uniform(struct sim_rng *r)
{
	return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

uint32_t sim_rng_below(struct sim_rng *r, uint32_t n)
{
	/* Multiply-shift; the bias (n / 2^32) is far below anything measured. */
	return (uint32_t)(((sim_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

double sim_rng_exp(struct sim_rng *r, double mean)
{
	return -mean * log1p(-sim_rng_uniform(r));
}

double sim_rng_normal(struct sim_rng *r)
{
	/* Box-Muller with one of the pair kept: two draws per value, always,
	 * so the stream position never depends on earlier calls. */
	double u1 = 1.0 - sim_rng_uniform(r); /* (0, 1] */
	double u2 = sim_rng_uniform(r);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- Request sizes -------------------------------------------------------- */

#define BIMODAL_SMALL 200.0
#define BIMODAL_LARGE 6000.0
#define BIMODAL_P_LARGE 0.10
/* Lognormal: heavy tail (sigma 1.5: p99 ~ 33x the median) with the same
 * mean as the bimodal mix before the cap, so load maps to similar rates. */
#define LOGN_SIGMA 1.5
#define LOGN_MEAN 780.0
#define UNIFORM_LO 100u
#define UNIFORM_HI 1460u

static const char *const dist_names[SIM_DIST_COUNT] = { "bimodal", "lognormal", "uniform" };

const char *sim_dist_name(enum sim_dist d)
{
	return (unsigned)d < SIM_DIST_COUNT ? dist_names[d] : "?";
}

int sim_dist_parse(const char *s, enum sim_dist *out)
{
	int i;

	for (i = 0; i < SIM_DIST_COUNT; i++)
		if (strcmp(s, dist_names[i]) == 0) {
			*out = (enum sim_dist)i;
			return 0;
		}
	return -1;
}

static double logn_mu(void)
{
	return log(LOGN_MEAN) - LOGN_SIGMA * LOGN_SIGMA / 2.0;
}

uint32_t sim_draw_prompt(struct sim_rng *r, enum sim_dist d)
{
	double x;

	switch (d) {
	case SIM_DIST_BIMODAL:
		return sim_rng_uniform(r) < BIMODAL_P_LARGE ? (uint32_t)BIMODAL_LARGE
							    : (uint32_t)BIMODAL_SMALL;
	case SIM_DIST_LOGNORMAL:
		x = ceil(exp(logn_mu() + LOGN_SIGMA * sim_rng_normal(r)));
		return x >= SIM_PROMPT_CAP ? SIM_PROMPT_CAP : (uint32_t)x;
	case SIM_DIST_UNIFORM:
	default:
		return UNIFORM_LO + sim_rng_below(r, UNIFORM_HI - UNIFORM_LO + 1);
	}
}

uint32_t sim_draw_output(struct sim_rng *r, double mean)
{
	double x = ceil(sim_rng_exp(r, mean));

	if (x < 1)
		return 1;
	return x >= SIM_OUTPUT_CAP ? SIM_OUTPUT_CAP : (uint32_t)x;
}

static double normal_cdf(double z)
{
	return 0.5 * erfc(-z / M_SQRT2);
}

/* E[min(ceil(X), cap)] for X lognormal; the ceiling adds 1/2 on average
 * (the fractional part of a wide continuous variable is near uniform). */
static double lognormal_capped_mean(void)
{
	double mu = logn_mu(), s = LOGN_SIGMA, c = SIM_PROMPT_CAP, lc = log(c);
	double below = exp(mu + s * s / 2.0) * normal_cdf((lc - mu - s * s) / s);
	double above = c * (1.0 - normal_cdf((lc - mu) / s));

	return below + above + 0.5 * normal_cdf((lc - mu) / s);
}

double sim_dist_mean(enum sim_dist d)
{
	switch (d) {
	case SIM_DIST_BIMODAL:
		return BIMODAL_P_LARGE * BIMODAL_LARGE + (1 - BIMODAL_P_LARGE) * BIMODAL_SMALL;
	case SIM_DIST_LOGNORMAL:
		return lognormal_capped_mean();
	case SIM_DIST_UNIFORM:
	default:
		return (UNIFORM_LO + UNIFORM_HI) / 2.0;
	}
}

/* ---- Configuration -------------------------------------------------------- */

static const char *const policy_names[SIM_POL_COUNT] = {
	"rr",	 "random", "jsq",	  "p2c",  "reqcount",
	"steer", "oracle", "cache-aware", "chbl", "oracle-cache",
};

const char *sim_policy_name(enum sim_policy p)
{
	return (unsigned)p < SIM_POL_COUNT ? policy_names[p] : "?";
}

int sim_policy_parse(const char *s, enum sim_policy *out)
{
	int i;

	for (i = 0; i < SIM_POL_COUNT; i++)
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum sim_policy)i;
			return 0;
		}
	return -1;
}

static const char *const engine_names[SIM_ENGINE_COUNT] = { "fifo", "batch" };
static const char *const response_names[SIM_RESP_COUNT] = { "stream", "full" };
static const char *const estimator_names[SIM_EST_COUNT] = {
	"flat", "credit", "pending", "sum", "pending-peers", "fluid",
};

static const char *const cadence_names[SIM_CAD_COUNT] = { "off", "max", "sum", "periodic" };
static const char *const admission_names[SIM_ADMIT_COUNT] = { "all", "bound", "shed" };

static int parse_name(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *sim_engine_name(enum sim_engine e)
{
	return (unsigned)e < SIM_ENGINE_COUNT ? engine_names[e] : "?";
}

int sim_engine_parse(const char *s, enum sim_engine *out)
{
	int i = parse_name(s, engine_names, SIM_ENGINE_COUNT);

	if (i < 0)
		return -1;
	*out = (enum sim_engine)i;
	return 0;
}

const char *sim_response_name(enum sim_response r)
{
	return (unsigned)r < SIM_RESP_COUNT ? response_names[r] : "?";
}

int sim_response_parse(const char *s, enum sim_response *out)
{
	int i = parse_name(s, response_names, SIM_RESP_COUNT);

	if (i < 0)
		return -1;
	*out = (enum sim_response)i;
	return 0;
}

const char *sim_estimator_name(enum sim_estimator e)
{
	return (unsigned)e < SIM_EST_COUNT ? estimator_names[e] : "?";
}

int sim_estimator_parse(const char *s, enum sim_estimator *out)
{
	int i = parse_name(s, estimator_names, SIM_EST_COUNT);

	if (i < 0)
		return -1;
	*out = (enum sim_estimator)i;
	return 0;
}

const char *sim_cadence_name(enum sim_step_cadence k)
{
	return (unsigned)k < SIM_CAD_COUNT ? cadence_names[k] : "?";
}

int sim_cadence_parse(const char *s, enum sim_step_cadence *out)
{
	int i = parse_name(s, cadence_names, SIM_CAD_COUNT);

	if (i < 0)
		return -1;
	*out = (enum sim_step_cadence)i;
	return 0;
}

const char *sim_admission_name(enum sim_admission a)
{
	return (unsigned)a < SIM_ADMIT_COUNT ? admission_names[a] : "?";
}

int sim_admission_parse(const char *s, enum sim_admission *out)
{
	int i = parse_name(s, admission_names, SIM_ADMIT_COUNT);

	if (i < 0)
		return -1;
	*out = (enum sim_admission)i;
	return 0;
}

void sim_config_defaults(struct sim_config *c)
{
	*c = (struct sim_config){
		.workers = 16,
		.load = 0.8,
		.poll_s = 1.0,
		.stagger = false,
		.routers = 1,
		.dist = SIM_DIST_BIMODAL,
		.requests = 200000,
		.warmup = 20000,
		.seed = 1,
		.drain = true,
		.policy = SIM_POL_STEER,
		.knobs = STEER_POLICY_DEFAULTS,
		.tput = SIM_TPUT_NOMINAL,
		.estimator = SIM_EST_FLUID,
		.keepalive = 1,
		.phase_tokens = -1,
		.wire_scale = 1.0,
		.step_ewma = 1.0,
		.response = SIM_RESP_STREAM,
		/* smg's overload protection: KV usage 0.9; it has no default
		 * for the waiting requests, 8 is about 2 s of the FIFO
		 * engine's prefill at a 1x worker (docs/simulator.md). */
		.shed_kv = 0.9,
		.shed_waiting = 8,
		.burst_on_s = 20,
		.burst_off_s = 20,
		/* Conversations: off (single requests). A person reads the
		 * answer as it streams, then takes 10 s to write the next. */
		.think_s = 10,
		.cache_tokens = SIM_CACHE_TOKENS,
		.cache_high = 0.92,
		.cache_low = 0.85,
		.slack_s = -1,
		.aff_keys = SIM_AFF_KEYS,
		/* A 1x worker prefills at smg's default throughput, so the
		 * policy's fallback is right for the average worker. */
		.base_rate = STEER_DEFAULT_THROUGHPUT,
		.speed_min = 0.5,
		.speed_max = 2.0,
		/* 40 tokens/s per decoding request: 256 tokens in 6.4 s. */
		.decode_rate = 40.0,
		.mean_output = 256.0,
		/* At 100 % prefill utilisation the mean KV occupancy is
		 * (rate / E[p]) x E[(p + o) o] / decode_rate ~ 21k tokens for
		 * the bimodal mix (independent of the worker's speed, since
		 * decode speed scales with it): 32k leaves headroom for the
		 * mean and lets bursts of long requests preempt. */
		.kv_tokens = SIM_KV_TOKENS,
		.engine = SIM_ENGINE_FIFO,
		/* smg's mock worker, "Realistic engine" defaults. */
		.batch = {
			.prefill_tps = 8000.0,
			.prefill_chunk = 2048,
			.decode_base_s = 0.006,
			.decode_per_req_s = 0.00035,
			.max_running = 256,
			.kv_tokens = 524288,
			.kv_block = 16,
		},
	};
}

static int fail(char *why, size_t whylen, const char *msg)
{
	if (why && whylen)
		snprintf(why, whylen, "%s", msg);
	return -1;
}

/* The bound applies to the policies with an expected wait (smg-steer's
 * score, the oracle's true wait); the shed to those that can skip a worker. */
static int admission_check(const struct sim_config *c, char *why, size_t whylen)
{
	if ((unsigned)c->admission >= SIM_ADMIT_COUNT)
		return fail(why, whylen, "unknown admission");
	if (c->admission == SIM_ADMIT_BOUND &&
	    (c->policy != SIM_POL_STEER && c->policy != SIM_POL_ORACLE))
		return fail(why, whylen, "a wait bound needs steer or oracle");
	if (c->admission == SIM_ADMIT_BOUND && !(c->wait_bound_s > 0 && c->wait_bound_s <= 3600))
		return fail(why, whylen, "wait bound must be in (0, 3600] seconds");
	if (c->admission == SIM_ADMIT_SHED && c->policy != SIM_POL_STEER &&
	    c->policy != SIM_POL_JSQ)
		return fail(why, whylen, "the shed needs steer or jsq");
	if (!(c->shed_kv > 0 && c->shed_kv <= 1))
		return fail(why, whylen, "shed KV usage must be in (0, 1]");
	return 0;
}

/* Conversations need one request per connection (every turn connects
 * anew); affinity is smg-steer's, and not combined with the wait bound. */
static int affinity_check(const struct sim_config *c, char *why, size_t whylen)
{
	if (!(c->turns == 0 || (c->turns >= 1 && c->turns <= SIM_TURNS_MAX)))
		return fail(why, whylen, "turns must be 0 (single requests) or in [1, 64]");
	if (!(c->think_s >= 0 && c->think_s <= 3600))
		return fail(why, whylen, "think time must be in [0, 3600] seconds");
	if (c->turns > 0 && c->keepalive != 1)
		return fail(why, whylen, "conversations need --keepalive 1");
	if (c->keys > 1000000000)
		return fail(why, whylen, "keys must be 0..1e9");
	if (!(c->cache_high > 0 && c->cache_high <= 1 && c->cache_low > 0 &&
	      c->cache_low <= c->cache_high))
		return fail(why, whylen, "cache marks must be 0 < low <= high <= 1");
	if (c->aff_keys < 1)
		return fail(why, whylen, "the affinity table needs at least one key");
	if (isnan(c->slack_s))
		return fail(why, whylen, "slack must be a number of seconds or inf");
	if (c->slack_s >= 0 && c->policy != SIM_POL_STEER)
		return fail(why, whylen, "affinity needs steer");
	if (c->slack_s >= 0 && c->admission == SIM_ADMIT_BOUND)
		return fail(why, whylen, "affinity is not combined with a wait bound");
	return 0;
}

static int burst_check(const struct sim_config *c, char *why, size_t whylen)
{
	if (!(c->burst_load >= 0 && c->burst_load <= 2))
		return fail(why, whylen, "burst load must be in [0, 2] (0: no bursts)");
	if (c->burst_load > 0 && !(c->burst_on_s > 0 && c->burst_on_s <= 1e6 &&
				   c->burst_off_s > 0 && c->burst_off_s <= 1e6))
		return fail(why, whylen, "burst phases must be in (0, 1e6] seconds");
	return 0;
}

int sim_config_check(const struct sim_config *c, char *why, size_t whylen)
{
	if (c->workers < 1 || c->workers > SIM_MAX_WORKERS)
		return fail(why, whylen, "workers must be 1..32");
	if (!(c->load > 0 && c->load <= 2))
		return fail(why, whylen, "load must be in (0, 2]");
	if (!(c->poll_s > 0 && c->poll_s <= 3600))
		return fail(why, whylen, "poll interval must be in (0, 3600] seconds");
	if (c->routers < 1 || c->routers > SIM_MAX_ROUTERS)
		return fail(why, whylen, "routers must be 1..64");
	if ((unsigned)c->dist >= SIM_DIST_COUNT)
		return fail(why, whylen, "unknown size distribution");
	if ((unsigned)c->policy >= SIM_POL_COUNT)
		return fail(why, whylen, "unknown policy");
	if (c->requests < 1 || c->requests > 100000000)
		return fail(why, whylen, "requests must be 1..1e8");
	if (c->warmup > 100000000)
		return fail(why, whylen, "warm-up must be 0..1e8");
	if ((unsigned)c->estimator >= SIM_EST_COUNT)
		return fail(why, whylen, "unknown estimator");
	if ((unsigned)c->step_cadence >= SIM_CAD_COUNT)
		return fail(why, whylen, "unknown step cadence");
	if (!(c->clock_tick_s >= 0 && c->clock_tick_s <= 1))
		return fail(why, whylen, "clock tick must be in [0, 1] seconds");
	if (!(c->step_ewma > 0 && c->step_ewma <= 1))
		return fail(why, whylen, "step EWMA weight must be in (0, 1]");
	if ((unsigned)c->engine >= SIM_ENGINE_COUNT)
		return fail(why, whylen, "unknown engine");
	if (c->step_probe && c->engine != SIM_ENGINE_BATCH)
		return fail(why, whylen, "step probe needs the batching engine (it has steps)");
	if ((unsigned)c->response >= SIM_RESP_COUNT)
		return fail(why, whylen, "unknown response mode");
	if (!(c->wire_scale > 0 && c->wire_scale <= 100))
		return fail(why, whylen, "wire token scale must be in (0, 100]");
	if (!(c->share_delay_s >= 0 && c->share_delay_s <= 3600))
		return fail(why, whylen, "share delay must be in [0, 3600] seconds");
	if (c->n_share_delays && !c->share_wire)
		return fail(why, whylen, "share delay samples need --share-wire");
	if (c->share_steps && !(c->share_wire && c->step_probe_one))
		return fail(why, whylen, "--share-steps needs --share-wire and --step-probe-one");
	if (admission_check(c, why, whylen) || burst_check(c, why, whylen) ||
	    affinity_check(c, why, whylen))
		return -1;
	if (c->keepalive < 1 || c->keepalive > 1000000)
		return fail(why, whylen, "keepalive must be 1..1000000 requests per connection");
	if (c->engine == SIM_ENGINE_BATCH &&
	    (!(c->batch.prefill_tps > 0) || !isfinite(c->batch.prefill_tps) ||
	     c->batch.prefill_chunk < 1 || !(c->batch.decode_base_s >= 0) ||
	     !(c->batch.decode_per_req_s >= 0) || !isfinite(c->batch.decode_base_s) ||
	     !isfinite(c->batch.decode_per_req_s) || c->batch.max_running < 1 ||
	     c->batch.kv_block < 1 || c->batch.kv_tokens < c->batch.kv_block))
		return fail(why, whylen, "batching engine parameters must be finite and positive");
	if (steer_policy_check(&c->knobs, why, whylen) < 0)
		return -1;
	if (!(c->base_rate > 0) || !(c->speed_min > 0) || !(c->speed_max >= c->speed_min) ||
	    !(c->decode_rate > 0) || !(c->mean_output >= 1) || !isfinite(c->base_rate) ||
	    !isfinite(c->speed_max) || !isfinite(c->decode_rate) || !isfinite(c->mean_output))
		return fail(why, whylen, "model rates must be finite and positive");
	if (c->kv_tokens < SIM_PROMPT_CAP + SIM_OUTPUT_CAP)
		return fail(why, whylen,
			    "KV capacity must hold the largest request (28672 tokens)");
	return 0;
}

double sim_arrival_rate(const struct sim_config *c)
{
	double speeds[SIM_MAX_WORKERS], capacity = 0;
	uint32_t i;

	sim_worker_speeds(c, speeds);
	for (i = 0; i < c->workers; i++)
		capacity += speeds[i];
	capacity *= c->engine == SIM_ENGINE_BATCH ? sim_batch_capacity(c) : c->base_rate;
	/* Conversations: their rate, each offering all its turns' prompts. */
	if (c->turns > 0)
		return c->load * capacity / sim_conversation_mean_tokens(c);
	return c->load * capacity / sim_dist_mean(c->dist);
}

void sim_worker_speeds(const struct sim_config *c, double *speeds)
{
	struct sim_rng rng;
	uint32_t n = c->workers, i;

	for (i = 0; i < n; i++)
		speeds[i] =
			n == 1 ? 1.0 : c->speed_min + (c->speed_max - c->speed_min) * i / (n - 1);
	/* Shuffle, so that no policy's tie-break by index lines up with speed. */
	sim_rng_seed(&rng, c->seed, SIM_STREAM_SPEEDS);
	for (i = n; i > 1; i--) {
		uint32_t j = sim_rng_below(&rng, i);
		double t = speeds[i - 1];

		speeds[i - 1] = speeds[j];
		speeds[j] = t;
	}
}
