// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * batch.c - the second worker model: a continuous-batching engine, step by
 * step, as smg's mock worker runs it (crates/mock_worker/src/engine.rs,
 * SchedulerState::step; its prefix cache is session.c's, for conversations:
 * a request prefills only its uncached tokens). Every step:
 *  1. admission: waiting requests join the running batch in arrival order
 *     while fewer than max_running run and the prompt's KV blocks fit (an
 *     empty engine admits anything);
 *  2. chunked prefill: up to prefill_chunk prompt tokens, taken from the
 *     running requests in order;
 *  3. decode: one token for every running request whose prefill is done
 *     (one that finished its prefill in this step included: its first
 *     token);
 *  4. the step lasts max(prefill tokens / prefill rate, decode_base +
 *     decode_per_req x decoding), both divided by the worker's speed factor;
 *     its tokens are visible at its end, when finished requests leave.
 * A request's queueing wait ends when the step that prefills its first chunk
 * starts. KV is held in blocks of kv_block tokens: the prompt at admission,
 * then the context as it grows; there is no preemption (as in the mock).
 */
#include <math.h>

#include "internal.h"

static uint32_t kv_blocks(const struct sim_config *c, uint32_t tokens)
{
	uint32_t b = c->batch.kv_block;

	return (tokens + b - 1) / b * b;
}

void batch_init_worker(const struct sim_config *c, struct worker *w)
{
	w->rate = c->batch.prefill_tps * w->speed;
	w->kv_cap = c->batch.kv_tokens;
	w->pf = NONE;
	w->last_step_end = -1;
	w->probes = c->step_probe ? (c->step_probe_one ? 1 : c->routers) : 0;
}

/* What an arrival at t would wait: the prompt tokens ahead, the rest of the step. */
double batch_true_wait(const struct worker *w, double t)
{
	return (w->queued_tokens + w->prefill_left) / w->rate +
	       (w->stepping ? fmax(w->step_end - t, 0) : 0);
}

/* The backlog (prompt tokens not prefilled, in seconds) only changes at an
 * arrival and when a step starts: integrate it as a step function. */
void batch_advance(struct worker *w, double t)
{
	double dt = t - w->acc_t;

	if (dt <= 0)
		return;
	w->backlog_area += (w->queued_tokens + w->prefill_left) / w->rate * dt;
	w->acc_t = t;
}

static void admit(struct sim *s, struct worker *w)
{
	const struct sim_config *c = s->c;

	while (w->running < c->batch.max_running && w->q_head != NONE) {
		int32_t i = w->q_head;
		struct req *r = &s->reqs[i];
		uint32_t need = kv_blocks(c, r->prompt);

		if (w->running > 0 && w->kv_used + need > w->kv_cap)
			break; /* waits for KV room */
		sim_list_unlink(s, &w->q_head, &w->q_tail, i);
		w->waiting--;
		w->queued_tokens -= r->uncached;
		if (w->waiting == 0)
			w->queued_tokens = 0;
		sim_list_push_back(s, &w->run_head, &w->run_tail, i);
		w->running++;
		w->kv_used += need;
		r->kv_held = need;
		r->prefill_left = r->uncached; /* the cached prefix is in KV already */
		r->generated = 0;
		w->prefill_left += r->uncached;
		if (w->pf == NONE)
			w->pf = i;
		if (w->running > w->max_running)
			w->max_running = w->running;
		if (w->kv_used > w->max_kv_used)
			w->max_kv_used = w->kv_used;
	}
}

/* Prefill up to one chunk from the running requests in order; returns the
 * tokens prefilled. */
static uint32_t prefill_chunk(struct sim *s, struct worker *w, double t)
{
	uint32_t budget = s->c->batch.prefill_chunk, done = 0;
	int32_t i = w->pf;

	while (i != NONE && budget > 0) {
		struct req *r = &s->reqs[i];
		uint32_t c = r->prefill_left < budget ? r->prefill_left : budget;

		if (!r->started)
			sim_req_started(s, i, t);
		r->prefill_left -= c;
		budget -= c;
		done += c;
		if (r->prefill_left > 0)
			break;
		w->decoding++;
		i = r->next;
	}
	w->pf = i;
	w->prefill_left -= done;
	if (w->pf == NONE)
		w->prefill_left = 0; /* no drift */
	w->served_done += done;
	return done;
}

/* A step's length: its prefill or its decode, the longer. */
static double step_length(const struct sim_config *c, const struct worker *w, uint32_t prefilled,
			  uint32_t decoding)
{
	const struct sim_batch_params *b = &c->batch;
	double prefill_s = prefilled / w->rate, decode_s = 0, dur;

	if (decoding + w->probes > 0)
		decode_s = (b->decode_base_s + b->decode_per_req_s * (decoding + w->probes)) /
			   w->speed;
	dur = fmax(prefill_s, decode_s);
	return dur > 0 ? dur : 0.001; /* as the mock: never a step of no time */
}

static int begin_step(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	uint32_t prefilled;

	batch_advance(w, t);
	admit(s, w);
	prefilled = prefill_chunk(s, w, t);
	w->stepping = true;
	w->step_end = t + step_length(s->c, w, prefilled, w->decoding);
	return sim_push(s, w->step_end, EV_STEP_DONE, wi, 0);
}

/* One token for every request that decoded in the step: the running ones
 * before the first with prefill left. Their routers see response packets
 * at the step's end: every one with streaming, the completions only with
 * full responses; once per router and step, after the step's answers. */
static void decode_tokens(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	bool stream = s->c->response == SIM_RESP_STREAM;
	uint64_t rx = 0;
	int32_t i = w->run_head;
	uint32_t k, owner;

	while (i != NONE && i != w->pf) {
		struct req *r = &s->reqs[i];
		int32_t next = r->next;
		uint32_t held;

		r->generated++;
		held = kv_blocks(s->c, r->prompt + r->generated);
		w->kv_used += held - r->kv_held;
		r->kv_held = held;
		if (r->generated == 1)
			sim_req_first_token(s, i, t);
		if (stream || r->generated >= r->output)
			rx |= 1ull << r->router;
		if (r->generated >= r->output) {
			sim_list_unlink(s, &w->run_head, &w->run_tail, i);
			w->running--;
			w->decoding--;
			w->kv_used -= r->kv_held;
			sim_req_done(s, i, t);
		}
		i = next;
	}
	owner = w->probes > 0 ? sim_probe_owner(s, wi) : UINT32_MAX;
	if (owner != UINT32_MAX)
		rx |= 1ull << owner; /* the others learn it below */
	else if (w->probes > 0)	     /* every router's probe got a token (or saw the fleet's) */
		rx = s->c->routers >= 64 ? ~0ull : (1ull << s->c->routers) - 1;
	for (k = 0; rx; k++, rx >>= 1)
		if (rx & 1)
			sim_router_rx(s->routers[k], wi, t);
	if (owner != UINT32_MAX)
		sim_probe_step_shared(s, wi, w->last_step_end >= 0 ? t - w->last_step_end : 0, t);
}

int batch_on_step_done(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];

	decode_tokens(s, wi, t);
	w->stepping = false;
	w->last_step_end = t;
	if (w->running > 0 || w->waiting > 0 || w->probes > 0)
		return begin_step(s, wi, t);
	return 0;
}

int batch_start_probes(struct sim *s, double t)
{
	for (uint32_t wi = 0; wi < s->n; wi++)
		if (s->w[wi].probes > 0 && !s->w[wi].stepping && begin_step(s, wi, t))
			return -1;
	return 0;
}

int batch_enqueue(struct sim *s, uint32_t wi, int32_t i, double t)
{
	struct worker *w = &s->w[wi];

	batch_advance(w, t);
	sim_list_push_back(s, &w->q_head, &w->q_tail, i);
	w->waiting++;
	w->queued_tokens += s->reqs[i].uncached;
	if (!w->stepping)
		return begin_step(s, wi, t);
	return 0;
}

/* ---- Replay: the exact wait of an arrival -------------------------------- */

/*
 * An arrival's wait depends only on what is ahead of it: admission and
 * prefill are in arrival order, so no later arrival changes a step before
 * the one that prefills its first chunk. Replaying the worker's steps from
 * its state, as begin_step and decode_tokens run them, gives that step's
 * start exactly (the oracle's admission; the snapshot-free truth).
 */
struct replay {
	const struct sim_config *c;
	const struct worker *w;
	struct replay_req *run; /* the running requests, in order */
	uint32_t n, kv_used;
	int32_t next_waiting; /* the next waiting request to admit, or NONE */
	uint32_t prompt;      /* the arriving request's */
	bool mine_admitted;
};

/* The step's end: a token for every request past its prefill; the
 * complete ones leave. */
static void replay_tokens(struct replay *p)
{
	uint32_t j, k = 0;

	for (j = 0; j < p->n; j++) {
		struct replay_req r = p->run[j];

		if (r.prefill_left == 0) {
			uint32_t held = kv_blocks(p->c, r.prompt + ++r.generated);

			p->kv_used += held - r.kv_held;
			r.kv_held = held;
			if (r.generated >= r.output) {
				p->kv_used -= held;
				continue;
			}
		}
		p->run[k++] = r;
	}
	p->n = k;
}

/* admit(), on the copy: the waiting requests, then the arriving one. */
static void replay_admit(struct sim *s, struct replay *p)
{
	while (p->n < p->c->batch.max_running && !p->mine_admitted) {
		bool mine = p->next_waiting == NONE;
		const struct req *q = mine ? NULL : &s->reqs[p->next_waiting];
		uint32_t prompt = mine ? p->prompt : q->prompt;
		uint32_t need = kv_blocks(p->c, prompt);

		if (p->n > 0 && p->kv_used + need > p->c->batch.kv_tokens)
			break;
		p->run[p->n++] = (struct replay_req){ .prompt = prompt,
						      .output = mine ? UINT32_MAX : q->output,
						      .prefill_left = mine ? prompt : q->uncached,
						      .kv_held = need,
						      .mine = mine };
		p->kv_used += need;
		if (mine)
			p->mine_admitted = true;
		else
			p->next_waiting = s->reqs[p->next_waiting].next;
	}
}

/* prefill_chunk(), on the copy: the tokens prefilled, or -1 when the chunk
 * reaches the arriving request (its wait ends as this step starts). */
static int64_t replay_prefill(struct replay *p)
{
	uint32_t budget = p->c->batch.prefill_chunk, done = 0, j;

	for (j = 0; j < p->n && budget > 0; j++) {
		struct replay_req *r = &p->run[j];
		uint32_t c;

		if (r->prefill_left == 0)
			continue;
		if (r->mine)
			return -1;
		c = r->prefill_left < budget ? r->prefill_left : budget;
		r->prefill_left -= c;
		budget -= c;
		done += c;
		if (r->prefill_left > 0)
			break;
	}
	return done;
}

static uint32_t replay_decoding(const struct replay *p)
{
	uint32_t j, d = 0;

	for (j = 0; j < p->n; j++)
		d += p->run[j].prefill_left == 0;
	return d;
}

double batch_exact_wait(struct sim *s, uint32_t wi, uint32_t prompt, double t, double limit)
{
	const struct worker *w = &s->w[wi];
	struct replay p = { .c = s->c,
			    .w = w,
			    .run = s->replay,
			    .kv_used = w->kv_used,
			    .next_waiting = w->q_head,
			    .prompt = prompt };
	double at;
	int32_t i;

	if (!w->stepping)
		return 0; /* idle: the arrival starts a step at once */
	for (i = w->run_head; i != NONE; i = s->reqs[i].next) {
		const struct req *r = &s->reqs[i];

		p.run[p.n++] = (struct replay_req){ .prompt = r->prompt,
						    .output = r->output,
						    .prefill_left = r->prefill_left,
						    .generated = r->generated,
						    .kv_held = r->kv_held };
	}
	for (at = w->step_end; at - t <= limit;) {
		int64_t done;

		replay_tokens(&p);
		replay_admit(s, &p);
		done = replay_prefill(&p);
		if (done < 0)
			return at - t;
		at += step_length(s->c, w, (uint32_t)done, replay_decoding(&p));
	}
	return at - t; /* above the limit */
}

double sim_batch_capacity(const struct sim_config *c)
{
	struct sim_config one = *c;
	struct sim_result r;
	char why[160];

	if (c->batch.capacity_tps > 0)
		return c->batch.capacity_tps;
	/* One 1x worker offered twice its nominal prefill rate: its queue never
	 * empties after the first seconds, so what it serves is its capacity.
	 * The warm-up fills the batch before the measurement window. */
	one.workers = 1;
	one.speed_min = one.speed_max = 1.0;
	one.step_probe = one.step_probe_one = one.share_steps = one.share_steps_backdated =
		false; /* the same capacity with or without probes */
	one.routers = 1;
	one.policy = SIM_POL_RR;
	one.admission = SIM_ADMIT_ALL;
	one.burst_load = 0; /* the engine's capacity, whatever the workload's phases */
	one.load = 2.0;
	one.batch.capacity_tps = one.batch.prefill_tps;
	one.requests = 40000;
	one.warmup = 4000;
	one.drain = false;
	one.keepalive = 1;
	/* Conversations: their turns, prefill-heavier than single requests,
	 * with no cache: the capacity in prompt tokens sent, as load counts
	 * them. Overloaded, the queue holds more first turns than the mix
	 * offers (later turns come only after an answer): a little less
	 * prompt per turn than offered. */
	one.cache_tokens = 0;
	one.slack_s = -1;
	if (sim_run(&one, &r, why, sizeof(why)) || r.window_s <= 0)
		return c->batch.prefill_tps;
	return r.w[0].served_window / r.window_s;
}
