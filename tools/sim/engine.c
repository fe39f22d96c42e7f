// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * engine.c - the event loop and the worker model.
 *
 * A worker is a continuous-batching server reduced to what decides the
 * queueing wait:
 *  - prefill: one FIFO queue of token-work served at the worker's token rate,
 *    one request at a time (the head); a request's wait ends when its first
 *    prefill starts;
 *  - decode: after its prefill a request decodes at decode_rate x speed
 *    tokens/s, in parallel with everything else (decode is memory-bound and
 *    batched, so it does not take prefill capacity);
 *  - KV: a request holds its prompt from the start of its prefill and
 *    reserves its output when decoding starts, until it finishes. Admission
 *    is optimistic, as in SGLang: the head starts its prefill as soon as its
 *    prompt fits (else the queue waits for memory). When the output
 *    reservation then does not fit, the most recently started decodes are
 *    preempted (recompute): each goes back to the front of the queue with
 *    its prompt plus the tokens it had generated as new prefill work, and
 *    waits for memory like any other request (so two large requests cannot
 *    evict each other forever).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum ev_type {
	EV_ARRIVAL = 0,
	EV_PREFILL_DONE = 1, /* a: worker */
	EV_DECODE_DONE = 2,  /* a: request, b: its epoch */
	EV_POLL = 3,	     /* a: worker, or every worker when not staggered */
};

#define ALL_WORKERS 0xffffffffu
#define NONE (-1)

struct event {
	double t;
	uint64_t seq; /* insertion order: equal times run first-in first-out */
	uint32_t type, a, b;
};

struct heap {
	struct event *v;
	size_t n, cap;
};

struct req {
	double arrival, decode_start;
	int64_t measured_idx; /* index among measured requests, or -1 */
	uint32_t prompt, output;
	uint32_t work;	   /* prefill work of the pending pass: prompt (+ generated on recompute) */
	uint32_t out_left; /* output tokens still to generate */
	uint32_t kv_held;
	uint32_t epoch; /* bumped by preemption and by freeing: cancels its decode event */
	uint32_t worker, router;
	int32_t prev, next; /* links in a worker's queue or decode list, or the free list */
	bool started;
};

struct worker {
	double speed, rate, decode_rate;
	uint32_t kv_cap, kv_used;
	/* Waiting queue: FIFO of requests not in prefill. */
	int32_t q_head, q_tail;
	uint32_t waiting;
	double queued_tokens;
	/* The request in prefill, or NONE. */
	int32_t cur;
	double cur_end;
	/* Decoding requests, oldest first. */
	int32_t run_head, run_tail;
	uint32_t running;
	/* Accounting. */
	double acc_t, backlog_area; /* integral of (queued work / rate) dt */
	double served_done;	    /* prefill work of finished passes */
	double snap_t, served_at_snap;
	uint64_t preemptions, dispatched;
	double area_win_start;
	uint64_t preempt_win_start, preempt_win;
	double backlog_win;
};

struct sim {
	const struct sim_config *c;
	uint32_t n;
	struct worker w[SIM_MAX_WORKERS];
	struct sim_snapshot snap[SIM_MAX_WORKERS];
	struct sim_router *routers[SIM_MAX_ROUTERS];
	struct heap heap;
	uint64_t seq;
	struct req *reqs;
	size_t nreqs, capreqs;
	int32_t free_head;
	struct sim_rng workload;
	double lambda, now;
	uint64_t total, arrived, finished, started;
	double *waits;
	uint64_t nwaits;
	double win_start, win_end;
	double arrived_tokens, recompute_tokens;
};

/* ---- Event heap --------------------------------------------------------- */

static bool ev_before(const struct event *x, const struct event *y)
{
	return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int heap_push(struct sim *s, double t, uint32_t type, uint32_t a, uint32_t b)
{
	struct heap *h = &s->heap;
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		struct event *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -1;
		h->v = v;
		h->cap = cap;
	}
	i = h->n++;
	h->v[i] = (struct event){ .t = t, .seq = s->seq++, .type = type, .a = a, .b = b };
	while (i > 0 && ev_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct event tmp = h->v[i];

		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct event heap_pop(struct heap *h)
{
	struct event top = h->v[0];
	size_t i = 0;

	h->v[0] = h->v[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct event tmp;

		if (l < h->n && ev_before(&h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && ev_before(&h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			break;
		tmp = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = tmp;
		i = m;
	}
	return top;
}

/* ---- Request pool --------------------------------------------------------- */

static int32_t req_alloc(struct sim *s)
{
	int32_t i;

	if (s->free_head != NONE) {
		i = s->free_head;
		s->free_head = s->reqs[i].next;
		return i;
	}
	if (s->nreqs == s->capreqs) {
		size_t cap = s->capreqs ? s->capreqs * 2 : 4096;
		struct req *v;

		if (cap > INT32_MAX)
			return NONE;
		v = realloc(s->reqs, cap * sizeof(*v));
		if (!v)
			return NONE;
		s->reqs = v;
		s->capreqs = cap;
	}
	s->reqs[s->nreqs].epoch = 0;
	return (int32_t)s->nreqs++;
}

static void req_free(struct sim *s, int32_t i)
{
	s->reqs[i].epoch++; /* any event still pointing here is now stale */
	s->reqs[i].next = s->free_head;
	s->free_head = i;
}

/* ---- Intrusive lists (waiting queue and decode list) --------------------- */

static void list_push_back(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
{
	s->reqs[i].prev = *tail;
	s->reqs[i].next = NONE;
	if (*tail != NONE)
		s->reqs[*tail].next = i;
	else
		*head = i;
	*tail = i;
}

static void list_push_front(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
{
	s->reqs[i].next = *head;
	s->reqs[i].prev = NONE;
	if (*head != NONE)
		s->reqs[*head].prev = i;
	else
		*tail = i;
	*head = i;
}

static void list_unlink(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
{
	struct req *r = &s->reqs[i];

	if (r->prev != NONE)
		s->reqs[r->prev].next = r->next;
	else
		*head = r->next;
	if (r->next != NONE)
		s->reqs[r->next].prev = r->prev;
	else
		*tail = r->prev;
	r->prev = r->next = NONE;
}

/* ---- Worker model -------------------------------------------------------- */

/* Remaining prefill work of the head at time t, tokens. */
static double head_remaining(const struct worker *w, double t)
{
	double left;

	if (w->cur == NONE)
		return 0;
	left = (w->cur_end - t) * w->rate;
	return left > 0 ? left : 0;
}

/* True queueing delay a request arriving at t would see: all work ahead / rate. */
static double true_wait(const struct worker *w, double t)
{
	return w->queued_tokens / w->rate + (w->cur == NONE ? 0 : fmax(w->cur_end - t, 0));
}

/* Prefill work served up to t, the head's progress included. */
static double served_at(const struct sim *s, const struct worker *w, double t)
{
	if (w->cur == NONE)
		return w->served_done;
	return w->served_done + s->reqs[w->cur].work - head_remaining(w, t);
}

/*
 * Bring the backlog integral to time t. Called before every change of the
 * queue, so between two calls the backlog is the constant queued part plus
 * a head that shrinks linearly (its completion is itself an event).
 */
static void worker_advance(struct worker *w, double t)
{
	double dt = t - w->acc_t;

	if (dt <= 0)
		return;
	w->backlog_area += w->queued_tokens / w->rate * dt;
	if (w->cur != NONE) {
		double h0 = w->cur_end - w->acc_t;

		w->backlog_area += h0 * dt - dt * dt / 2.0;
	}
	w->acc_t = t;
}

/* Recompute preemption of the most recently started decode. */
static void preempt_newest(struct sim *s, struct worker *w, double t)
{
	int32_t i = w->run_tail;
	struct req *r = &s->reqs[i];
	double progress = (t - r->decode_start) * w->decode_rate;
	uint32_t generated = progress >= r->out_left ? r->out_left - 1 : (uint32_t)progress;

	list_unlink(s, &w->run_head, &w->run_tail, i);
	w->running--;
	w->kv_used -= r->kv_held;
	r->kv_held = 0;
	r->out_left -= generated;
	r->work = r->prompt + (r->output - r->out_left);
	r->epoch++; /* cancels its decode completion */
	list_push_front(s, &w->q_head, &w->q_tail, i);
	w->waiting++;
	w->queued_tokens += r->work;
	s->recompute_tokens += r->work;
	w->preemptions++;
}

/* Preempt decodes until need more KV tokens fit. Always succeeds: the
 * requester holds at most its prompt, and a whole request never needs more
 * than SIM_PROMPT_CAP + SIM_OUTPUT_CAP <= kv_cap. */
static void make_room(struct sim *s, struct worker *w, uint32_t need, double t)
{
	while (w->kv_used + need > w->kv_cap && w->run_tail != NONE)
		preempt_newest(s, w, t);
}

/* Start the head's prefill if the worker is free and its prompt fits. */
static int try_start_prefill(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	int32_t i = w->q_head;
	struct req *r;

	if (w->cur != NONE || i == NONE || w->kv_used + s->reqs[i].work > w->kv_cap)
		return 0;
	r = &s->reqs[i];
	list_unlink(s, &w->q_head, &w->q_tail, i);
	w->waiting--;
	w->queued_tokens -= r->work;
	if (w->waiting == 0)
		w->queued_tokens = 0; /* no drift from adding and removing doubles */
	if (!r->started) {
		r->started = true;
		s->started++;
		if (r->measured_idx >= 0)
			s->waits[s->nwaits++] = t - r->arrival;
	}
	w->kv_used += r->work;
	r->kv_held = r->work;
	w->cur = i;
	w->cur_end = t + r->work / w->rate;
	return heap_push(s, w->cur_end, EV_PREFILL_DONE, wi, 0);
}

static int on_prefill_done(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	int32_t i = w->cur;
	struct req *r = &s->reqs[i];

	worker_advance(w, t);
	w->served_done += r->work;
	make_room(s, w, r->out_left, t);
	w->cur = NONE;
	w->kv_used += r->out_left;
	r->kv_held += r->out_left;
	r->decode_start = t;
	list_push_back(s, &w->run_head, &w->run_tail, i);
	w->running++;
	if (heap_push(s, t + r->out_left / w->decode_rate, EV_DECODE_DONE, (uint32_t)i, r->epoch))
		return -1;
	return try_start_prefill(s, wi, t);
}

static int on_decode_done(struct sim *s, int32_t i, uint32_t epoch, double t)
{
	struct req *r = &s->reqs[i];
	uint32_t wi = r->worker;
	struct worker *w = &s->w[wi];

	if (r->epoch != epoch)
		return 0; /* preempted since: it will decode again */
	worker_advance(w, t);
	list_unlink(s, &w->run_head, &w->run_tail, i);
	w->running--;
	w->kv_used -= r->kv_held;
	sim_router_finished(s->routers[r->router], r->worker);
	s->finished++;
	req_free(s, i);
	/* The freed memory may admit a head that was waiting for it. */
	return try_start_prefill(s, wi, t);
}

static int enqueue(struct sim *s, uint32_t wi, int32_t i, double t)
{
	struct worker *w = &s->w[wi];

	worker_advance(w, t);
	list_push_back(s, &w->q_head, &w->q_tail, i);
	w->waiting++;
	w->queued_tokens += s->reqs[i].work;
	return try_start_prefill(s, wi, t);
}

/* ---- Snapshots ------------------------------------------------------------ */

/*
 * What GetLoads would report now. The waiting queue only: the request in
 * prefill is running, not waiting, as in SGLang. gen_throughput is the
 * nominal rate, or the prefill tokens served since the last poll per second.
 */
static void take_snapshot(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	struct sim_snapshot *snap = &s->snap[wi];
	double served = served_at(s, w, t);
	struct steer_rank_load rank = {
		.num_running_reqs = (int32_t)(w->running + (w->cur != NONE)),
		.num_waiting_reqs = (int32_t)w->waiting,
		.num_waiting_uncached_tokens = (int32_t)fmin(w->queued_tokens, (double)INT32_MAX),
		.token_usage = (double)w->kv_used / w->kv_cap,
		.gen_throughput = w->rate,
	};
	uint32_t k;

	if (s->c->report_running_prefill)
		rank.num_waiting_uncached_tokens = (int32_t)fmin(
			w->queued_tokens + ceil(head_remaining(w, t)), (double)INT32_MAX);
	if (s->c->tput == SIM_TPUT_MEASURED)
		rank.gen_throughput =
			t > w->snap_t ? (served - w->served_at_snap) / (t - w->snap_t) : 0;
	w->snap_t = t;
	w->served_at_snap = served;
	if (steer_load_aggregate(&rank, 1, &snap->load, NULL, 0) == 0)
		snap->valid = true;
	if (rank.num_waiting_uncached_tokens > 0)
		snap->reports_uncached = true;
	for (k = 0; k < s->c->routers; k++)
		sim_router_snapshot_taken(s->routers[k], wi);
}

static int on_poll(struct sim *s, uint32_t which, double t)
{
	uint32_t i;

	if (which == ALL_WORKERS)
		for (i = 0; i < s->n; i++)
			take_snapshot(s, i, t);
	else
		take_snapshot(s, which, t);
	return heap_push(s, t + s->c->poll_s, EV_POLL, which, 0);
}

static int schedule_first_polls(struct sim *s)
{
	struct sim_rng rng;
	uint32_t i;

	/* The first poll comes at a random phase: until then the routers have
	 * no snapshot, as after a restart. */
	sim_rng_seed(&rng, s->c->seed, SIM_STREAM_POLL);
	if (!s->c->stagger)
		return heap_push(s, sim_rng_uniform(&rng) * s->c->poll_s, EV_POLL, ALL_WORKERS, 0);
	for (i = 0; i < s->n; i++)
		if (heap_push(s, sim_rng_uniform(&rng) * s->c->poll_s, EV_POLL, i, 0))
			return -1;
	return 0;
}

/* ---- Arrivals and the measurement window ---------------------------------- */

static void open_window(struct sim *s, double t)
{
	uint32_t i;

	s->win_start = t;
	for (i = 0; i < s->n; i++) {
		worker_advance(&s->w[i], t);
		s->w[i].area_win_start = s->w[i].backlog_area;
		s->w[i].preempt_win_start = s->w[i].preemptions;
	}
}

static void close_window(struct sim *s, double t)
{
	double len;
	uint32_t i;

	s->win_end = t;
	len = t - s->win_start;
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];

		worker_advance(w, t);
		w->backlog_win = len > 0 ? (w->backlog_area - w->area_win_start) / len : 0;
		w->preempt_win = w->preemptions - w->preempt_win_start;
	}
}

static uint32_t route(struct sim *s, uint32_t router, uint32_t prompt, double t)
{
	double tw[SIM_MAX_WORKERS], rate[SIM_MAX_WORKERS];
	struct sim_observation obs = {
		.snap = s->snap, .true_wait_s = tw, .rate = rate, .prompt_tokens = prompt
	};
	uint32_t i;

	for (i = 0; i < s->n; i++) {
		/* Computed for every policy, read by the oracle only. */
		tw[i] = true_wait(&s->w[i], t);
		rate[i] = s->w[i].rate;
	}
	return sim_router_pick(s->routers[router], &obs);
}

static int on_arrival(struct sim *s, double t)
{
	uint64_t idx = s->arrived++;
	int32_t i = req_alloc(s);
	struct req *r;
	uint32_t wi;

	if (i == NONE)
		return -1;
	r = &s->reqs[i];
	r->arrival = t;
	r->prompt = sim_draw_prompt(&s->workload, s->c->dist);
	r->output = sim_draw_output(&s->workload, s->c->mean_output);
	r->router = sim_rng_below(&s->workload, s->c->routers);
	r->work = r->prompt;
	r->out_left = r->output;
	r->kv_held = 0;
	r->started = false;
	r->measured_idx = idx >= s->c->warmup ? (int64_t)(idx - s->c->warmup) : -1;
	s->arrived_tokens += r->prompt;
	if (idx == s->c->warmup)
		open_window(s, t);
	wi = route(s, r->router, r->prompt, t);
	r = &s->reqs[i];
	r->worker = wi;
	sim_router_dispatched(s->routers[r->router], wi);
	s->w[wi].dispatched++;
	if (enqueue(s, wi, i, t))
		return -1;
	if (s->arrived == s->total) {
		close_window(s, t);
		return 0;
	}
	return heap_push(s, t + sim_rng_exp(&s->workload, 1.0 / s->lambda), EV_ARRIVAL, 0, 0);
}

/* ---- Setup, loop, results ------------------------------------------------- */

static int sim_init(struct sim *s, const struct sim_config *c)
{
	double speeds[SIM_MAX_WORKERS];
	uint32_t i;

	memset(s, 0, sizeof(*s));
	s->c = c;
	s->n = c->workers;
	s->free_head = NONE;
	s->total = c->warmup + c->requests;
	s->lambda = sim_arrival_rate(c);
	sim_rng_seed(&s->workload, c->seed, SIM_STREAM_WORKLOAD);
	sim_worker_speeds(c, speeds);
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];

		w->speed = speeds[i];
		w->rate = c->base_rate * speeds[i];
		w->decode_rate = c->decode_rate * speeds[i];
		w->kv_cap = c->kv_tokens;
		w->q_head = w->q_tail = w->cur = w->run_head = w->run_tail = NONE;
	}
	for (i = 0; i < c->routers; i++) {
		s->routers[i] = sim_router_new(c, i);
		if (!s->routers[i])
			return -1;
	}
	s->waits = malloc(c->requests * sizeof(*s->waits));
	if (!s->waits)
		return -1;
	if (schedule_first_polls(s))
		return -1;
	return heap_push(s, sim_rng_exp(&s->workload, 1.0 / s->lambda), EV_ARRIVAL, 0, 0);
}

static void sim_fini(struct sim *s)
{
	uint32_t i;

	for (i = 0; i < SIM_MAX_ROUTERS; i++)
		sim_router_free(s->routers[i]);
	free(s->heap.v);
	free(s->reqs);
	free(s->waits);
}

static bool finished(const struct sim *s)
{
	if (s->arrived < s->total)
		return false;
	return !s->c->drain || s->nwaits == s->c->requests;
}

static int run_events(struct sim *s)
{
	while (!finished(s) && s->heap.n > 0) {
		struct event e = heap_pop(&s->heap);
		int rc = 0;

		s->now = e.t;
		switch (e.type) {
		case EV_ARRIVAL:
			rc = on_arrival(s, e.t);
			break;
		case EV_PREFILL_DONE:
			rc = on_prefill_done(s, e.a, e.t);
			break;
		case EV_DECODE_DONE:
			rc = on_decode_done(s, (int32_t)e.a, e.b, e.t);
			break;
		case EV_POLL:
			rc = on_poll(s, e.a, e.t);
			break;
		}
		if (rc)
			return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void wait_stats(struct sim *s, struct sim_result *r)
{
	double sum = 0;
	uint64_t i;

	r->measured = s->nwaits;
	if (s->nwaits == 0)
		return;
	qsort(s->waits, s->nwaits, sizeof(*s->waits), cmp_double);
	for (i = 0; i < s->nwaits; i++)
		sum += s->waits[i];
	r->mean_s = sum / (double)s->nwaits;
	r->p50_s = sim_quantile(s->waits, s->nwaits, 0.50);
	r->p99_s = sim_quantile(s->waits, s->nwaits, 0.99);
	r->p999_s = sim_quantile(s->waits, s->nwaits, 0.999);
	r->max_s = s->waits[s->nwaits - 1];
}

static void collect(struct sim *s, struct sim_result *r)
{
	double backlog[SIM_MAX_WORKERS];
	uint32_t i;

	memset(r, 0, sizeof(*r));
	wait_stats(s, r);
	r->window_s = s->win_end - s->win_start;
	r->end_s = s->now;
	r->arrived_tokens = s->arrived_tokens;
	r->recompute_tokens = s->recompute_tokens;
	r->arrived = s->arrived;
	r->started = s->started;
	r->finished = s->finished;
	r->workers = s->n;
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];
		struct sim_worker_result *o = &r->w[i];

		o->speed = w->speed;
		o->rate = w->rate;
		o->served_tokens = served_at(s, w, s->now);
		o->backlog_s = w->backlog_win;
		o->dispatched = w->dispatched;
		o->preemptions = w->preempt_win;
		o->queued_tokens_end = w->queued_tokens + head_remaining(w, s->now);
		backlog[i] = w->backlog_win;
		r->preemptions += o->preemptions;
		r->served_tokens += o->served_tokens;
		r->queued_tokens_end += o->queued_tokens_end;
	}
	r->cov_backlog = sim_cov(backlog, s->n);
	for (i = 0; i < s->c->routers; i++) {
		struct sim_router_stats st;

		sim_router_get_stats(s->routers[i], &st);
		r->routers.picks += st.picks;
		r->routers.steer_selects += st.steer_selects;
		r->routers.steer_scanned += st.steer_scanned;
		r->routers.rebuilds += st.rebuilds;
	}
}

int sim_run(const struct sim_config *c, struct sim_result *r, char *why, size_t whylen)
{
	struct sim *s;
	int rc = -1;

	if (sim_config_check(c, why, whylen))
		return -1;
	s = malloc(sizeof(*s));
	if (!s) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (sim_init(s, c) == 0 && run_events(s) == 0) {
		collect(s, r);
		rc = 0;
	} else {
		snprintf(why, whylen, "out of memory");
	}
	sim_fini(s);
	free(s);
	return rc;
}
