// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * router.c - the routing policies. Each router knows what a real one knows:
 * the workers' last snapshots (shared by all routers) and its own dispatches.
 * Only the oracle reads the true state, and it is there as a lower bound.
 */
#include <math.h>
#include <stdlib.h>

#include "router.h"

/* Its own stream for every router: the choices of one never shift another's. */
struct sim_router *sim_router_new(const struct sim_config *c, uint32_t index)
{
	struct sim_router *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->policy = c->policy;
	r->admission = c->admission;
	r->bound_s = c->wait_bound_s;
	r->bound_ns = steer_policy_u64_sat(c->wait_bound_s * 1e9);
	r->shed_kv = c->shed_kv;
	r->shed_waiting = c->shed_waiting;
	r->n = c->workers;
	r->knobs = c->knobs;
	r->jitter = c->steer_jitter;
	r->est = c->estimator;
	r->share = c->share_wire;
	/* As the kernel: with overload protection on (STEER_TBL_OVERLOAD, any
	 * admission here) an answer sets busy-until to the pending work
	 * (steer_busy_answered); --busy-resync does it without. */
	r->resync = c->busy_resync || c->admission != SIM_ADMIT_ALL;
	r->running_cap = c->running_cap;
	r->phase_tokens = c->phase_tokens;
	r->guess_mean = c->peer_guess_mean;
	r->peer_fill = c->peer_fill && c->knobs.peer_routers > 1;
	r->cadence = c->step_cadence;
	r->step_sparse = c->step_sparse;
	r->step_ewma = c->step_ewma;
	r->tick = c->clock_tick_s;
	r->probe = c->step_probe;
	for (uint32_t i = 0; i < c->workers; i++)
		r->last_rx[i] = -1;
	sim_rng_seed(&r->rng, c->seed, SIM_STREAM_ROUTER + index);
	/* Round robin starts somewhere random, as independent routers do. */
	r->rr_next = sim_rng_below(&r->rng, r->n);
	for (uint32_t i = 0; i < r->n; i++)
		r->npt[i] = steer_policy_u64_sat(1e9 / r->knobs.default_throughput);
	if (r->policy == SIM_POL_STEER) {
		r->table = calloc(1, sizeof(*r->table));
		if (!r->table) {
			free(r);
			return NULL;
		}
		r->table_stale = true; /* built at the first pick: no snapshot yet */
	}
	if (router_keys_init(r, c)) {
		sim_router_free(r);
		return NULL;
	}
	return r;
}

void sim_router_free(struct sim_router *r)
{
	if (!r)
		return;
	router_keys_free(r);
	free(r->table);
	free(r);
}

/* How many routers' sends one of its own stands for. */
static uint32_t peers(const struct sim_router *r)
{
	return r->share || r->peer_fill || !r->knobs.peer_routers ? 1 : r->knobs.peer_routers;
}

/* Own tokens and the other routers' guessed with them: x peers, or
 * (ablation) + (peers - 1) x mean prefill. */
static double scaled(const struct sim_router *r, uint64_t tokens)
{
	if (r->guess_mean)
		return (double)tokens + (double)(peers(r) - 1) * r->knobs.mean_prefill_tokens;
	return (double)tokens * peers(r);
}

/* E at r->now: what was sent, less what the backend served since at its
 * published throughput. */
static double fluid_now(const struct sim_router *r, uint32_t w)
{
	double v = r->fluid[w] - (r->now - r->fluid_t[w]) * 1e9 / (double)r->npt[w];

	return v > 0 ? v : 0;
}

/* Re-anchor E at r->now, at most cap tokens. */
static void fluid_set(struct sim_router *r, uint32_t w, double v, double cap)
{
	r->fluid[w] = v < cap ? v : cap;
	r->fluid_t[w] = r->now;
}

/* The time as the step cadence's clock reads it. */
static double cadence_clock(const struct sim_router *r, double t)
{
	return r->tick > 0 ? floor(t / r->tick) * r->tick : t;
}

/*
 * The rest of w's step under way at r->now, as the step cadence predicts it
 * (seconds): the step that began at the last response packet ends L later.
 * max and sum stop counting once that time has passed; periodic assumes
 * the steps went on back to back, unseen.
 */
static double step_rest_s(const struct sim_router *r, uint32_t w)
{
	double l = r->step_s[w], since = cadence_clock(r, r->now) - r->last_rx[w];

	if (r->cadence == SIM_CAD_OFF || l <= 0 || r->last_rx[w] < 0 || since < 0)
		return 0;
	if (r->cadence == SIM_CAD_PERIODIC)
		return l - fmod(since, l);
	return since < l ? l - since : 0;
}

/* fluid's E (tokens) with the step cadence's rest of the step, converted to
 * tokens at the published throughput: max() is a later busy-until. */
static double fluid_with_cadence(const struct sim_router *r, uint32_t w)
{
	double e = fluid_now(r, w), rest = step_rest_s(r, w) * 1e9 / (double)r->npt[w];

	return r->cadence == SIM_CAD_MAX ? fmax(e, rest) : e + rest;
}

/* The slot's in-flight tokens, as steer_select() reads them, from the
 * counters the estimator uses. */
static void update_slot(struct sim_router *r, uint32_t w)
{
	uint64_t v = r->unsent[w];

	switch (r->est) {
	case SIM_EST_FLAT:
	case SIM_EST_CREDIT:
		v += r->credited[w];
		break;
	case SIM_EST_PENDING:
	case SIM_EST_SUM:
		v += r->pending[w];
		break;
	case SIM_EST_PEND_PEERS:
		v += r->pending[w] + (uint64_t)(peers(r) - 1) * r->sent_poll[w];
		break;
	case SIM_EST_FLUID:
	default:
		v += (uint64_t)ceil(r->cadence == SIM_CAD_OFF ? fluid_now(r, w)
							      : fluid_with_cadence(r, w)) +
		     (uint64_t)ceil(r->others[w]);
		break;
	}
	r->slots[w].inflight_tokens = v;
}

void sim_router_connected(struct sim_router *r, uint32_t w)
{
	r->conns[w]++;
}

void sim_router_sent(struct sim_router *r, uint32_t w, uint32_t tokens, bool first, double t)
{
	r->now = t;
	r->live[w]++;
	r->since_snap[w]++;
	if (r->stats.sent_tokens == 0)
		r->first_sent = t;
	r->stats.sent_tokens += tokens;
	/* The connection's flat credit gives way to the real size. */
	if (first && r->policy == SIM_POL_STEER && r->est != SIM_EST_FLAT)
		r->unsent[w] -= r->unsent[w] < r->table->credit_tokens ? r->unsent[w]
								       : r->table->credit_tokens;
	sim_router_peer_sent(r, w, tokens, t);
}

void sim_router_peer_sent(struct sim_router *r, uint32_t w, uint32_t tokens, double t)
{
	r->now = t;
	r->pending[w] += tokens; /* what the kernel counts, whatever the policy */
	r->sent_poll[w] += tokens;
	if (r->policy != SIM_POL_STEER)
		return;
	if (r->est == SIM_EST_CREDIT)
		r->credited[w] += (uint64_t)tokens * peers(r);
	fluid_set(r, w, fluid_now(r, w) + scaled(r, tokens), scaled(r, r->pending[w]));
	update_slot(r, w);
}

void sim_router_answered(struct sim_router *r, uint32_t w, uint32_t tokens, double t)
{
	r->stats.answered_tokens += tokens;
	r->streams[w]++;
	sim_router_peer_answered(r, w, tokens, t);
}

void sim_router_peer_answered(struct sim_router *r, uint32_t w, uint32_t tokens, double t)
{
	r->now = t;
	r->pending[w] -= r->pending[w] < tokens ? r->pending[w] : tokens;
	if (r->policy != SIM_POL_STEER)
		return;
	/* What is answered is served: E is at most what is still pending.
	 * --busy-resync: and at least, as one FIFO engine's next prefill
	 * starts with every pending request still to serve. */
	fluid_set(r, w, r->resync ? scaled(r, r->pending[w]) : fluid_now(r, w),
		  scaled(r, r->pending[w]));
	update_slot(r, w);
}

void sim_router_finished(struct sim_router *r, uint32_t w)
{
	if (r->live[w] > 0)
		r->live[w]--;
	if (r->streams[w] > 0)
		r->streams[w]--;
}

/*
 * A response packet from w at t. When this router had a response in
 * progress at the previous packet (streaming: a request decoding, which
 * gets a token at every step end), the gap is exactly one step: L is that
 * gap, the last step's length (the steps' lengths change slowly; an EWMA
 * of them, --step-ewma, did worse). Other gaps (full responses, or nothing streaming)
 * span one step or many and leave L alone, unless --step-sparse: then L
 * drops to a shorter gap at once and rises by at most L/16 per gap.
 */
void sim_router_rx(struct sim_router *r, uint32_t w, double t_exact)
{
	double t = cadence_clock(r, t_exact), gap = t - r->last_rx[w], l = r->step_s[w];

	if (r->last_rx[w] >= 0 && gap <= 0)
		return; /* the same step end: another packet of it */
	if (r->last_rx[w] >= 0 && r->one_step[w])
		r->step_s[w] = l <= 0 || r->step_ewma >= 1 ? gap : l + (gap - l) * r->step_ewma;
	else if (r->last_rx[w] >= 0 && r->step_sparse)
		r->step_s[w] = l <= 0 || gap < l ? gap : l + (fmin(gap, 2 * l) - l) / 16;
	r->last_rx[w] = t;
	r->one_step[w] = r->streams[w] > 0 || r->probe;
	if (r->policy == SIM_POL_STEER && r->cadence != SIM_CAD_OFF) {
		r->now = t_exact;
		update_slot(r, w);
	}
}

void sim_router_rx_step(struct sim_router *r, uint32_t w, double at, double now, double gap_s)
{
	double t = cadence_clock(r, at), l = r->step_s[w];

	if (t <= r->last_rx[w])
		return; /* a packet of its own came at or after it */
	if (gap_s > 0)
		r->step_s[w] = l <= 0 || r->step_ewma >= 1 ? gap_s : l + (gap_s - l) * r->step_ewma;
	r->last_rx[w] = t;
	r->one_step[w] = true;
	if (r->policy == SIM_POL_STEER && r->cadence != SIM_CAD_OFF) {
		r->now = now;
		update_slot(r, w);
	}
}

void sim_router_closed(struct sim_router *r, uint32_t w)
{
	if (r->conns[w] > 0)
		r->conns[w]--;
}

void sim_router_dispatched(struct sim_router *r, uint32_t w)
{
	sim_router_connected(r, w);
	sim_router_sent(r, w, 0, true, r->now);
}

void sim_router_snapshot_taken(struct sim_router *r, uint32_t w, double t)
{
	r->now = t;
	r->since_snap[w] = 0;
	r->pending_poll[w] = r->pending[w];
	r->fluid_poll[w] = fluid_now(r, w);
	r->others[w] = 0; /* the snapshot has them now */
	r->sent_poll[w] = 0;
	if (r->policy == SIM_POL_STEER) {
		/* The daemon drains what was credited when the poll was taken;
		 * the simulated poll is instantaneous, so that is all of it. */
		r->credited[w] = 0;
		update_slot(r, w);
		r->table_stale = true;
	}
}

void sim_router_get_stats(const struct sim_router *r, struct sim_router_stats *out)
{
	uint32_t i;

	*out = r->stats;
	out->pending_tokens = 0;
	for (i = 0; i < r->n; i++)
		out->pending_tokens += r->pending[i];
}

const struct steer_table *sim_router_table(const struct sim_router *r)
{
	return r->table;
}

uint64_t sim_router_inflight_tokens(const struct sim_router *r, uint32_t w)
{
	return w < r->n ? r->slots[w].inflight_tokens : 0;
}

uint64_t sim_router_slot_tokens_at(struct sim_router *r, uint32_t w, double t)
{
	if (w >= r->n)
		return 0;
	r->now = t;
	update_slot(r, w);
	return r->slots[w].inflight_tokens;
}

uint64_t sim_router_pending_tokens(const struct sim_router *r, uint32_t w)
{
	return w < r->n ? r->pending[w] : 0;
}

double sim_router_last_rx(const struct sim_router *r, uint32_t w)
{
	return w < r->n ? r->last_rx[w] : -1;
}

double sim_router_step_estimate(const struct sim_router *r, uint32_t w)
{
	return w < r->n ? r->step_s[w] : 0;
}

/* ---- Helpers ------------------------------------------------------------ */

/*
 * Running argmin with uniform tie-breaking (reservoir over the tied): the
 * baselines would otherwise all favour worker 0 whenever counts are equal.
 */
struct argmin {
	double best;
	uint32_t pick, ties;
};

static void argmin_init(struct argmin *a)
{
	a->best = INFINITY;
	a->pick = 0;
	a->ties = 0;
}

static void argmin_offer(struct argmin *a, struct sim_rng *rng, uint32_t w, double score)
{
	if (score < a->best) {
		a->best = score;
		a->pick = w;
		a->ties = 1;
	} else if (score == a->best && sim_rng_below(rng, ++a->ties) == 0) {
		a->pick = w;
	}
}

/* The KV barrier of smg's policies, w * k / (1 - k), from a snapshot. */
static double kv_barrier_s(const struct steer_policy *knobs, const struct sim_snapshot *s)
{
	double k;

	if (!s->valid)
		return 0;
	k = s->load.kv_usage;
	if (!isfinite(k) || k < 0)
		k = 0;
	if (k > STEER_KV_CLAMP_MAX)
		k = STEER_KV_CLAMP_MAX;
	return knobs->kv_pressure_weight * k / (1.0 - k);
}

bool sim_shed_overloaded(const struct sim_snapshot *s, double kv, uint32_t waiting)
{
	if (!s->valid)
		return false;
	return s->load.kv_usage >= kv || (waiting > 0 && s->load.waiting_reqs >= waiting);
}

/* Worker w is out of the routing: the shed is on and its last snapshot says
 * it is overloaded. Judged on the snapshot alone, so it changes at polls. */
static bool shed(const struct sim_router *r, const struct sim_snapshot *snap, uint32_t w)
{
	return r->admission == SIM_ADMIT_SHED &&
	       sim_shed_overloaded(&snap[w], r->shed_kv, r->shed_waiting);
}

/* ---- Baselines ---------------------------------------------------------- */

static uint32_t pick_rr(struct sim_router *r)
{
	return (uint32_t)(r->rr_next++ % r->n);
}

static uint32_t pick_random(struct sim_router *r)
{
	return sim_rng_below(&r->rng, r->n);
}

/* Among the workers the shed leaves (all of them without it); refused when
 * it leaves none. */
static uint32_t pick_jsq(struct sim_router *r, const struct sim_observation *obs)
{
	struct argmin a;
	uint32_t i;

	argmin_init(&a);
	for (i = 0; i < r->n; i++)
		if (!shed(r, obs->snap, i))
			argmin_offer(&a, &r->rng, i, (double)r->conns[i]);
	return a.ties ? a.pick : SIM_REFUSED;
}

/* Queue length as this router estimates it: waiting requests in the
 * snapshot plus what it sent there since. */
static double p2c_queue(const struct sim_router *r, const struct sim_observation *obs, uint32_t w)
{
	const struct sim_snapshot *s = &obs->snap[w];

	return (s->valid ? s->load.waiting_reqs : 0) + (double)r->since_snap[w];
}

static uint32_t pick_p2c(struct sim_router *r, const struct sim_observation *obs)
{
	uint32_t a, b;
	double qa, qb;

	if (r->n == 1)
		return 0;
	a = sim_rng_below(&r->rng, r->n);
	b = sim_rng_below(&r->rng, r->n - 1);
	if (b >= a)
		b++; /* two distinct workers */
	qa = p2c_queue(r, obs, a);
	qb = p2c_queue(r, obs, b);
	if (qa != qb)
		return qa < qb ? a : b;
	return sim_rng_below(&r->rng, 2) ? b : a;
}

/* smg's least_load before PR #1647: in-flight requests plus the KV barrier
 * (the two added as they were, a count plus seconds). */
static uint32_t pick_reqcount(struct sim_router *r, const struct sim_observation *obs)
{
	struct argmin a;
	uint32_t i;

	argmin_init(&a);
	for (i = 0; i < r->n; i++)
		argmin_offer(&a, &r->rng, i,
			     (double)r->live[i] + kv_barrier_s(&r->knobs, &obs->snap[i]));
	return a.pick;
}

static double oracle_wait(const struct sim_observation *obs, uint32_t w, double limit)
{
	return obs->exact_wait ? obs->exact_wait(obs->exact_ctx, w, limit) : obs->true_wait_s[w];
}

/* True wait now; among equals (idle workers) the fastest, then the lowest
 * index. With the bound, refused when the pick's exact wait is over B. */
static uint32_t pick_oracle(struct sim_router *r, const struct sim_observation *obs)
{
	uint32_t i, best = 0;

	for (i = 1; i < r->n; i++) {
		double wi = obs->true_wait_s[i], wb = obs->true_wait_s[best];

		if (wi < wb || (wi == wb && obs->rate[i] > obs->rate[best]))
			best = i;
	}
	/* Admission by the truth: the pick's exact wait, over B or not. */
	if (r->admission == SIM_ADMIT_BOUND && oracle_wait(obs, best, r->bound_s) > r->bound_s)
		return SIM_REFUSED;
	return best;
}

/* ---- smg-steer ------------------------------------------------------------ */

/* --running-cap: a backend with as many live connections of this router as
 * its engine runs requests at once is skipped, as a drained one is: a new
 * request there would wait for a running one to finish, which no wait
 * estimate of prefill work sees. */
struct steer_slot *sim_slot_at(void *ctx, __u32 slot)
{
	struct sim_router *r = ctx;

	if (slot >= r->n || (r->running_cap && r->conns[slot] >= r->running_cap))
		return NULL;
	return &r->slots[slot];
}

/* What the daemon feeds the policy: the snapshot, and the live connections
 * the kernel counts. With the pending estimators the snapshot's queue loses
 * what this router had pending when it was taken (P_poll): those requests
 * are counted in real time, as pending, for as long as they are. */
static void steer_inputs(const struct sim_router *r, const struct sim_observation *obs,
			 struct steer_policy_input *in)
{
	uint32_t i;

	for (i = 0; i < r->n; i++) {
		in[i] = (struct steer_policy_input){
			.has_snapshot = obs->snap[i].valid,
			.load = obs->snap[i].load,
			.reports_uncached = obs->snap[i].reports_uncached,
			.live_conns = r->conns[i],
		};
		if (r->est == SIM_EST_PENDING || r->est == SIM_EST_PEND_PEERS ||
		    r->est == SIM_EST_FLUID) {
			double mine = r->est == SIM_EST_FLUID ? r->fluid_poll[i]
							      : (double)r->pending_poll[i];
			double q = in[i].load.queued_uncached_tokens - mine;

			in[i].load.queued_uncached_tokens = q > 0 ? q : 0;
		}
	}
}

/* Sort key of the published table: base wait, then worker index, as the
 * daemon's publish orders its entries. */
static void sort_entries(struct steer_entry *e, uint32_t n)
{
	uint32_t i, j;

	for (i = 1; i < n; i++) {
		struct steer_entry x = e[i];

		for (j = i;
		     j > 0 && (e[j - 1].base_wait_ns > x.base_wait_ns ||
			       (e[j - 1].base_wait_ns == x.base_wait_ns && e[j - 1].slot > x.slot));
		     j--)
			e[j] = e[j - 1];
		e[j] = x;
	}
}

/* A uniform offset in [0, one credit's wait): a random phase of the
 * water-fill, different for every router. */
static __u64 random_phase_ns(struct sim_router *r, __u32 credit, __u64 ns_per_token)
{
	double u = sim_rng_uniform(&r->rng);

	return steer_policy_u64_sat(u * (double)credit * (double)ns_per_token);
}

/* The shed as the daemon would apply it: the overloaded workers are left
 * out of the table it publishes (the order of the others is kept). Returns
 * the entries left. */
static uint32_t shed_entries(const struct sim_router *r, const struct sim_observation *obs,
			     struct steer_entry *e, uint32_t n)
{
	uint32_t i, k = 0;

	for (i = 0; i < n; i++)
		if (!shed(r, obs->snap, e[i].slot))
			e[k++] = e[i];
	return k;
}

static void steer_rebuild(struct sim_router *r, const struct sim_observation *obs)
{
	struct steer_policy_input in[SIM_MAX_WORKERS];
	struct steer_policy_score sc[SIM_MAX_WORKERS];
	struct steer_table *t = r->table;
	uint32_t i;

	steer_inputs(r, obs, in);
	steer_policy_score_all(&r->knobs, in, r->n, sc);
	t->n = r->n;
	t->credit_tokens = steer_policy_credit(&r->knobs);
	t->generation++;
	for (i = 0; i < r->n; i++) {
		/* E keeps its value; from now on it drains at the new rate. */
		r->fluid[i] = fluid_now(r, i);
		r->fluid_t[i] = r->now;
		r->npt[i] = sc[i].ns_per_token_u ? sc[i].ns_per_token_u : 1;
		r->base_ns[i] = sc[i].base_wait_ns;
		t->e[i] = (struct steer_entry){
			.base_wait_ns = sc[i].base_wait_ns,
			.ns_per_token = sc[i].ns_per_token_u,
			.slot = i,
		};
		if (r->phase_tokens >= 0) /* ablation: a phase of that many tokens */
			t->e[i].base_wait_ns = steer_sat_add(
				t->e[i].base_wait_ns,
				random_phase_ns(r, (__u32)r->phase_tokens, sc[i].ns_per_token_u));
		else if (r->jitter) /* ablation: a phase even with one peer router */
			t->e[i].base_wait_ns = steer_sat_add(
				t->e[i].base_wait_ns,
				random_phase_ns(r, t->credit_tokens, sc[i].ns_per_token_u));
		else if (r->knobs.peer_routers > 1) { /* what smg-steerd does */
			steer_policy_add_phase(&r->knobs, &sc[i], sim_rng_uniform(&r->rng));
			t->e[i].base_wait_ns = sc[i].base_wait_ns;
		}
	}
	sort_entries(t->e, r->n);
	if (r->admission == SIM_ADMIT_SHED)
		t->n = shed_entries(r, obs, t->e, r->n);
	r->table_stale = false;
	r->stats.rebuilds++;
}

/*
 * --peer-fill (ablation): since the last pick the other routers sent about
 * (peers - 1) x this router's own token rate x the time; predict that they
 * water-filled it over the backends' expected waits, as this router would.
 * Each backend serves the predicted work at its published rate, sharing it
 * with this router's own E in proportion.
 */
static void peer_fill_advance(struct sim_router *r)
{
	double dt = r->now - r->fill_t, x[SIM_MAX_WORKERS], rate[SIM_MAX_WORKERS];
	double work, lo = INFINITY, hi = -INFINITY, sum_rate = 0;
	uint32_t i, k;

	r->fill_t = r->now;
	if (dt <= 0 || r->stats.sent_tokens == 0 || r->now <= r->first_sent)
		return;
	work = (double)(r->knobs.peer_routers - 1) * (double)r->stats.sent_tokens /
	       (r->now - r->first_sent) * dt;
	for (i = 0; i < r->n; i++) {
		double e = fluid_now(r, i), served;

		rate[i] = 1e9 / (double)r->npt[i];
		served = rate[i] * dt * (r->others[i] / (r->others[i] + e + 1e-9));
		r->others[i] = r->others[i] > served ? r->others[i] - served : 0;
		x[i] = (double)r->base_ns[i] / 1e9 + (e + r->others[i] + r->unsent[i]) / rate[i];
		lo = fmin(lo, x[i]);
		hi = fmax(hi, x[i]);
		sum_rate += rate[i];
	}
	/* The level L with sum(rate x max(0, L - x)) = work, by bisection. */
	hi += work / sum_rate;
	for (k = 0; k < 60; k++) {
		double mid = (lo + hi) / 2, f = 0;

		for (i = 0; i < r->n; i++)
			f += rate[i] * fmax(0, mid - x[i]);
		if (f > work)
			hi = mid;
		else
			lo = mid;
	}
	for (i = 0; i < r->n; i++)
		r->others[i] += rate[i] * fmax(0, lo - x[i]);
}

/*
 * The kernel's connect path: least expected wait over the sorted table with
 * early exit, then credit the chosen slot, so that the next arrival before
 * the next snapshot sees it (the water-fill).
 */
static uint32_t pick_steer(struct sim_router *r, const struct sim_observation *obs)
{
	struct steer_pick p;
	uint32_t slot;

	r->now = obs->now;
	if (r->table_stale)
		steer_rebuild(r, obs);
	if (r->peer_fill)
		peer_fill_advance(r);
	if (r->est == SIM_EST_FLUID) /* E drains in time: the kernel reads the clock */
		for (uint32_t i = 0; i < r->n; i++)
			update_slot(r, i);
	steer_select(r->table, sim_slot_at, r, 1, &p);
	r->stats.steer_selects++;
	r->stats.steer_scanned += p.scanned;
	/* Not found: the shed left no worker in the table, or every one is
	 * full (--running-cap). Over B: the least expected wait is, so no
	 * worker takes the connection. Either way nothing is credited: the
	 * connection never happens. */
	if (!p.found || (r->admission == SIM_ADMIT_BOUND && p.score > r->bound_ns))
		return SIM_REFUSED;
	slot = r->aff ? affinity_choose(r, obs, &p) : p.slot;
	/* The kernel credits every new connection; the wire estimators
	 * replace that credit by the request's real size at its first send. */
	if (r->est == SIM_EST_FLAT)
		r->credited[slot] += r->table->credit_tokens;
	else
		r->unsent[slot] += r->table->credit_tokens;
	update_slot(r, slot);
	return slot;
}

static uint32_t pick_policy(struct sim_router *r, const struct sim_observation *obs)
{
	switch (r->policy) {
	case SIM_POL_RR:
		return pick_rr(r);
	case SIM_POL_RANDOM:
		return pick_random(r);
	case SIM_POL_JSQ:
		return pick_jsq(r, obs);
	case SIM_POL_P2C:
		return pick_p2c(r, obs);
	case SIM_POL_REQCOUNT:
		return pick_reqcount(r, obs);
	case SIM_POL_STEER:
		return pick_steer(r, obs);
	case SIM_POL_CACHE_AWARE:
		return pick_cache_aware(r, obs);
	case SIM_POL_CHBL:
		return pick_chbl(r, obs);
	case SIM_POL_ORACLE_CACHE:
		return pick_oracle_cache(r, obs);
	case SIM_POL_ORACLE:
	default:
		return pick_oracle(r, obs);
	}
}

uint32_t sim_router_pick(struct sim_router *r, const struct sim_observation *obs)
{
	uint32_t w = pick_policy(r, obs);

	r->stats.picks++;
	r->stats.refused += w == SIM_REFUSED;
	return w;
}
