// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * stats.c - quantiles, dispersion and the CSV row format.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

double sim_quantile(const double *sorted, size_t n, double q)
{
	double rank;
	size_t k;

	if (n == 0)
		return 0;
	/* Nearest rank: the smallest value with at least q of the sample at
	 * or below it. */
	rank = ceil(q * (double)n);
	k = rank < 1 ? 0 : (size_t)rank - 1;
	return sorted[k < n ? k : n - 1];
}

double sim_cov(const double *v, size_t n)
{
	double mean = 0, var = 0;
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		mean += v[i];
	mean /= (double)n;
	if (mean <= 0)
		return 0;
	for (i = 0; i < n; i++)
		var += (v[i] - mean) * (v[i] - mean);
	return sqrt(var / (double)n) / mean;
}

const char *sim_csv_header(void)
{
	return "scenario,policy,variant,peer_routers,workers,routers,load,poll_s,stagger,dist,tput,"
	       "seed,requests,mean_s,p50_s,p99_s,p999_s,max_s,preemptions,cov_backlog,window_s,"
	       "steer_scanned_per_pick,engine,response,keepalive,estimator,ttft_mean_s,ttft_p99_s,"
	       "admission,wait_bound_s,shed_kv,shed_waiting,burst_load,burst_on_s,burst_off_s,"
	       "refused,refused_frac,over_bound_frac,ttft_p50_s,tput_rps,cached_frac,turns,think_s,"
	       "keys,cache_tokens,slack_s,aff_first,aff_known_frac,aff_stay_frac,lost_frac";
}

/* The ablations and proposed fixes in effect, "base" for none. */
static void variant_name(const struct sim_config *c, char *buf, size_t len)
{
	char extra[24] = "";
	size_t n;

	if (c->share_wire && c->n_share_delays)
		snprintf(extra, sizeof(extra), "~samples");
	else if (c->share_wire && c->share_delay_s > 0)
		snprintf(extra, sizeof(extra), "%g", c->share_delay_s);
	snprintf(buf, len, "%s%s%s%s%s%s%s", c->report_running_prefill ? "+running" : "",
		 c->steer_jitter ? "+jitter" : "", c->share_wire ? "+shared" : "", extra,
		 c->peer_guess_mean ? "+guessmean" : "", c->peer_fill ? "+peerfill" : "",
		 c->oracle_blind_step ? "+blindstep" : "");
	n = strlen(buf);
	if (c->step_probe) { /* the engine's: every policy of the run pays for it */
		snprintf(buf + n, len - n,
			 c->share_steps_backdated ? "+probe1backdated"
			 : c->share_steps	  ? "+probe1shared"
			 : c->step_probe_one	  ? "+probe1"
						  : "+probe");
		n = strlen(buf);
	}
	if (c->busy_resync) {
		snprintf(buf + n, len - n, "+resync");
		n = strlen(buf);
	}
	if (c->engine == SIM_ENGINE_FIFO && c->kv_tokens != SIM_KV_TOKENS) {
		snprintf(buf + n, len - n, "+kv%u", c->kv_tokens);
		n = strlen(buf);
	}
	if (c->turns > 0 && c->cache_tokens != SIM_CACHE_TOKENS) {
		snprintf(buf + n, len - n, "+cache%u", c->cache_tokens);
		n = strlen(buf);
	}
	if (c->wire_uncached) {
		snprintf(buf + n, len - n, "+wireuncached");
		n = strlen(buf);
	}
	if (c->turns > 0 && c->turn_router_any) {
		snprintf(buf + n, len - n, "+anyrouter");
		n = strlen(buf);
	}
	if (c->running_cap) {
		snprintf(buf + n, len - n, "+cap%u", c->running_cap);
		n = strlen(buf);
	}
	if (c->wire_scale != 1.0) {
		snprintf(buf + n, len - n, "+wirex%g", c->wire_scale);
		n = strlen(buf);
	}
	if (c->phase_tokens >= 0) {
		snprintf(buf + n, len - n, "+phase%lld", (long long)c->phase_tokens);
		n = strlen(buf);
	}
	/* The step cadence only changes smg-steer's fluid estimator. */
	if (c->step_cadence != SIM_CAD_OFF && c->policy == SIM_POL_STEER &&
	    c->estimator == SIM_EST_FLUID) {
		snprintf(buf + n, len - n, "+step%s%s", sim_cadence_name(c->step_cadence),
			 c->step_sparse ? "+sparse" : "");
		n = strlen(buf);
		if (c->step_ewma < 1)
			snprintf(buf + n, len - n, "+ewma%g", c->step_ewma);
		n = strlen(buf);
		if (c->clock_tick_s > 0)
			snprintf(buf + n, len - n, "+tick%g", c->clock_tick_s);
	}
	if (!buf[0])
		snprintf(buf, len, "+base");
	memmove(buf, buf + 1, strlen(buf)); /* drop the leading '+' */
}

/* Conversations and affinity: the TTFT median, the throughput, the share
 * of the prompts' tokens cached, the workload and the affinity's rule, and
 * how often a key had a worker and stayed there. */
static int affinity_columns(char *buf, size_t len, const struct sim_config *c,
			    const struct sim_result *r)
{
	uint64_t picks = r->routers.picks, known = r->routers.aff_known;
	char slack[24] = "-";

	if (c->slack_s >= 0)
		snprintf(slack, sizeof(slack), isinf(c->slack_s) ? "inf" : "%g", c->slack_s);
	double prompt = r->prompt_tokens > 0 ? r->prompt_tokens : 1;

	return snprintf(buf, len, "%.6f,%.3f,%.6f,%g,%g,%u,%u,%s,%s%s,%.6f,%.6f,%.6f",
			r->ttft_p50_s, r->tput_rps, r->cached_tokens / prompt, c->turns, c->think_s,
			c->keys, c->cache_tokens, slack,
			c->slack_s < 0 ? "-"
			: c->aff_hrw   ? "hrw"
				       : "lw",
			c->slack_s >= 0 && c->aff_ctx ? "+ctx" : "",
			picks ? (double)known / (double)picks : 0,
			known ? (double)r->routers.aff_stayed / (double)known : 0,
			r->lost_tokens / prompt);
}

int sim_csv_row(char *buf, size_t len, const char *scenario, const char *label,
		const struct sim_config *c, const struct sim_result *r)
{
	double scanned = r->routers.steer_selects ? (double)r->routers.steer_scanned /
							    (double)r->routers.steer_selects
						  : 0;
	double offered = (double)(r->measured + r->refused);
	char variant[128];
	int n, m;

	variant_name(c, variant, sizeof(variant));
	n = snprintf(buf, len,
		     "%s,%s,%s,%u,%u,%u,%.2f,%g,%d,%s,%s,%llu,%llu,%.6f,%.6f,%.6f,%.6f,%.6f,"
		     "%llu,%.4f,%.1f,%.3f,%s,%s,%u,%s,%.6f,%.6f,",
		     scenario, label, variant, c->knobs.peer_routers, c->workers, c->routers,
		     c->load, c->poll_s, c->stagger ? 1 : 0, sim_dist_name(c->dist),
		     c->tput == SIM_TPUT_MEASURED ? "measured" : "nominal",
		     (unsigned long long)c->seed, (unsigned long long)r->measured, r->mean_s,
		     r->p50_s, r->p99_s, r->p999_s, r->max_s, (unsigned long long)r->preemptions,
		     r->cov_backlog, r->window_s, scanned, sim_engine_name(c->engine),
		     sim_response_name(c->response), c->keepalive,
		     c->policy == SIM_POL_STEER ? sim_estimator_name(c->estimator) : "-",
		     r->ttft_mean_s, r->ttft_p99_s);
	if (n < 0 || (size_t)n >= len)
		return n;
	/* Admission and bursts: what was refused, and how far the admitted
	 * waits went past the bound. */
	m = snprintf(buf + n, len - (size_t)n, "%s,%g,%g,%u,%g,%g,%g,%llu,%.6f,%.6f,",
		     sim_admission_name(c->admission), c->wait_bound_s, c->shed_kv, c->shed_waiting,
		     c->burst_load, c->burst_on_s, c->burst_off_s, (unsigned long long)r->refused,
		     offered > 0 ? (double)r->refused / offered : 0, r->over_bound);
	if (m < 0 || (size_t)(n + m) >= len)
		return m < 0 ? m : n + m;
	return n + m + affinity_columns(buf + n + m, len - (size_t)(n + m), c, r);
}
