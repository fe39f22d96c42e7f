// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * engine.c - the event loop, the clients (connections, keep-alive, what
 * each router's kernel sees of them), snapshots and statistics. The worker
 * models are in fifo.c (one prefill at a time) and batch.c (continuous
 * batching, smg's mock worker).
 *
 * A client sends a request on an idle keep-alive connection of its router
 * when there is one (the most recently used, as HTTP client pools do), else
 * it opens a new connection, which the router steers. A connection carries
 * c->keepalive requests, one at a time, then closes. Conversations
 * (session.c) bring their turns here one by one, each on a new connection.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- Event heap --------------------------------------------------------- */

static bool ev_before(const struct event *x, const struct event *y)
{
	return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int heap_insert(struct sim *s, struct event ev)
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
	ev.seq = s->seq++;
	h->v[i] = ev;
	while (i > 0 && ev_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct event tmp = h->v[i];

		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

int sim_push(struct sim *s, double t, uint32_t type, uint32_t a, uint32_t b)
{
	return heap_insert(s, (struct event){ .t = t, .t0 = t, .type = type, .a = a, .b = b });
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

void sim_list_push_back(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
{
	s->reqs[i].prev = *tail;
	s->reqs[i].next = NONE;
	if (*tail != NONE)
		s->reqs[*tail].next = i;
	else
		*head = i;
	*tail = i;
}

void sim_list_push_front(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
{
	s->reqs[i].next = *head;
	s->reqs[i].prev = NONE;
	if (*head != NONE)
		s->reqs[*head].prev = i;
	else
		*tail = i;
	*head = i;
}

void sim_list_unlink(struct sim *s, int32_t *head, int32_t *tail, int32_t i)
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

/* ---- The worker model in use ---------------------------------------------- */

static bool batching(const struct sim *s)
{
	return s->c->engine == SIM_ENGINE_BATCH;
}

static void worker_advance(struct sim *s, struct worker *w, double t)
{
	if (batching(s))
		batch_advance(w, t);
	else
		fifo_advance(w, t);
}

static double worker_true_wait(const struct sim *s, const struct worker *w, double t)
{
	if (batching(s) && s->c->oracle_blind_step)
		return (w->queued_tokens + w->prefill_left) / w->rate;
	return batching(s) ? batch_true_wait(w, t) : fifo_true_wait(w, t);
}

/* Prefill work served up to t. */
static double worker_served(const struct sim *s, const struct worker *w, double t)
{
	return batching(s) ? w->served_done : fifo_served_at(s, w, t);
}

/* Prompt tokens queued or running and not prefilled yet (the head's
 * remainder, or the running batch's). */
static double worker_unprefilled_running(const struct sim *s, const struct worker *w, double t)
{
	return batching(s) ? w->prefill_left : fifo_head_remaining(w, t);
}

static uint32_t worker_running(const struct sim *s, const struct worker *w)
{
	return batching(s) ? w->running : w->running + (w->cur != NONE);
}

static int worker_enqueue(struct sim *s, uint32_t wi, int32_t i, double t)
{
	return batching(s) ? batch_enqueue(s, wi, i, t) : fifo_enqueue(s, wi, i, t);
}

/* ---- Requests and connections, as the client and the router see them ------ */

void sim_req_started(struct sim *s, int32_t i, double t)
{
	struct req *r = &s->reqs[i];

	if (r->started)
		return;
	r->started = true;
	s->started++;
	if (r->measured_idx >= 0)
		s->waits[s->nwaits++] = t - r->arrival;
}

/* A request's tokens as the kernel counts them from its bytes. */
static uint32_t wire_tokens(const struct sim *s, const struct req *r)
{
	double v = round((s->c->wire_uncached ? r->uncached : r->prompt) * s->c->wire_scale);

	return v < 1 ? 1 : (uint32_t)v;
}

/* --share-wire: the other routers learn of a send or an answer, now or
 * share_delay_s later (or a delay drawn from --share-delay-samples). */
static void deliver_peer(struct sim *s, uint32_t type, uint32_t origin, uint32_t w, uint32_t tokens,
			 double t)
{
	uint32_t k;

	for (k = 0; k < s->c->routers; k++) {
		if (k == origin)
			continue;
		if (type == EV_PEER_SENT)
			sim_router_peer_sent(s->routers[k], w, tokens, t);
		else
			sim_router_peer_answered(s->routers[k], w, tokens, t);
	}
}

/* How late the other routers learn of a shared event. */
static double share_delay(struct sim *s)
{
	return s->c->n_share_delays
		       ? s->c->share_delays[sim_rng_below(&s->share, s->c->n_share_delays)]
		       : s->c->share_delay_s;
}

static void share(struct sim *s, uint32_t type, uint32_t origin, uint32_t w, uint32_t tokens,
		  double t)
{
	double delay;

	if (!s->c->share_wire || s->c->routers < 2)
		return;
	delay = share_delay(s);
	if (delay <= 0) {
		deliver_peer(s, type, origin, w, tokens, t);
		return;
	}
	/* A failed push only loses this notice: the peers' view is an estimate. */
	(void)sim_push(s, t + delay, type, w | origin << 16, tokens);
}

/* The owner's step end (at t0) reaches the other routers at t with the
 * step's length as the owner measured it (gap_us, microseconds; 0: none).
 * They take it as a step that ended at t, or with --share-steps-backdated
 * at t0 (as a clock the routers share would let them). */
static void deliver_step(struct sim *s, uint32_t owner, uint32_t w, uint32_t gap_us, double t0,
			 double t)
{
	double at = s->c->share_steps_backdated ? t0 : t;
	uint32_t k;

	for (k = 0; k < s->c->routers; k++)
		if (k != owner)
			sim_router_rx_step(s->routers[k], w, at, t, gap_us / 1e6);
}

uint32_t sim_probe_owner(const struct sim *s, uint32_t w)
{
	return s->c->share_steps ? w % s->c->routers : UINT32_MAX;
}

void sim_probe_step_shared(struct sim *s, uint32_t w, double gap_s, double t)
{
	uint32_t owner = sim_probe_owner(s, w), gap_us;
	double delay = share_delay(s);

	gap_us = gap_s > 0 && gap_s < 4e3 ? (uint32_t)(gap_s * 1e6 + 0.5) : 0;
	if (delay <= 0) {
		deliver_step(s, owner, w, gap_us, t, t);
		return;
	}
	/* A failed push loses this step end only. */
	(void)heap_insert(s, (struct event){ .t = t + delay,
					     .t0 = t,
					     .type = EV_PEER_STEP,
					     .a = w | owner << 16,
					     .b = gap_us });
}

/* The first response byte reaches the client: the router's kernel sees the
 * request answered. */
static void answer(struct sim *s, struct req *r)
{
	if (r->answered)
		return;
	r->answered = true;
	s->answered++;
	s->answered_tokens += r->prompt;
	sim_router_answered(s->routers[r->router], r->worker, wire_tokens(s, r), s->now);
	share(s, EV_PEER_ANSWERED, r->router, r->worker, wire_tokens(s, r), s->now);
}

void sim_req_first_token(struct sim *s, int32_t i, double t)
{
	struct req *r = &s->reqs[i];

	if (r->first_token)
		return; /* after a recompute */
	r->first_token = true;
	if (r->measured_idx >= 0)
		s->ttfts[s->nttfts++] = t - r->arrival;
	if (s->c->response == SIM_RESP_STREAM) {
		answer(s, &s->reqs[i]);
		/* The FIFO engine decodes outside any step: its first token and
		 * its completion are the packets modelled (batch.c: per step). */
		if (!batching(s))
			sim_router_rx(s->routers[r->router], r->worker, t);
	}
}

static int32_t conn_alloc(struct sim *s)
{
	int32_t i;

	if (s->conn_free != NONE) {
		i = s->conn_free;
		s->conn_free = s->conns[i].next;
		return i;
	}
	if (s->nconns == s->capconns) {
		size_t cap = s->capconns ? s->capconns * 2 : 1024;
		struct conn *v;

		if (cap > INT32_MAX)
			return NONE;
		v = realloc(s->conns, cap * sizeof(*v));
		if (!v)
			return NONE;
		s->conns = v;
		s->capconns = cap;
	}
	return (int32_t)s->nconns++;
}

/* A request completed: the connection goes back to its router's idle
 * stack, or closes after its last request. */
static void conn_release(struct sim *s, int32_t ci)
{
	struct conn *c = &s->conns[ci];

	if (c->requests >= s->c->keepalive) {
		sim_router_closed(s->routers[c->router], c->worker);
		c->next = s->conn_free;
		s->conn_free = ci;
		return;
	}
	c->next = s->idle[c->router];
	s->idle[c->router] = ci;
}

void sim_req_done(struct sim *s, int32_t i, double t)
{
	struct req *r = &s->reqs[i];

	answer(s, r); /* a no-op when streaming */
	sim_router_finished(s->routers[r->router], r->worker);
	sim_router_key_done(s->routers[r->router], r->key, r->prompt + r->output);
	if (!batching(s))
		sim_router_rx(s->routers[r->router], r->worker, t);
	s->finished++;
	conn_release(s, r->conn);
	/* A failed push or cache insert only ends the conversation early. */
	if (r->conv != NONE)
		(void)conv_turn_done(s, r, t);
	req_free(s, i);
}

/* ---- Snapshots ------------------------------------------------------------ */

/*
 * What GetLoads would report now. The waiting queue only: the request in
 * prefill (FIFO) or the running batch (batching) is running, not waiting, as
 * in SGLang and in smg's mock worker. gen_throughput is the
 * nominal rate, or the prefill tokens served since the last poll per second.
 */
static void take_snapshot(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	struct sim_snapshot *snap = &s->snap[wi];
	double served = worker_served(s, w, t);
	struct steer_rank_load rank = {
		.num_running_reqs = (int32_t)worker_running(s, w),
		.num_waiting_reqs = (int32_t)w->waiting,
		.num_waiting_uncached_tokens = (int32_t)fmin(w->queued_tokens, (double)INT32_MAX),
		.token_usage = (double)w->kv_used / w->kv_cap,
		.gen_throughput = w->rate,
	};
	uint32_t k;

	if (s->c->report_running_prefill)
		rank.num_waiting_uncached_tokens =
			(int32_t)fmin(w->queued_tokens + ceil(worker_unprefilled_running(s, w, t)),
				      (double)INT32_MAX);
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
		sim_router_snapshot_taken(s->routers[k], wi, t);
}

static int on_poll(struct sim *s, uint32_t which, double t)
{
	uint32_t i;

	if (which == ALL_WORKERS)
		for (i = 0; i < s->n; i++)
			take_snapshot(s, i, t);
	else
		take_snapshot(s, which, t);
	return sim_push(s, t + s->c->poll_s, EV_POLL, which, 0);
}

static int schedule_first_polls(struct sim *s)
{
	struct sim_rng rng;
	uint32_t i;

	/* The first poll comes at a random phase: until then the routers have
	 * no snapshot, as after a restart. */
	sim_rng_seed(&rng, s->c->seed, SIM_STREAM_POLL);
	if (!s->c->stagger)
		return sim_push(s, sim_rng_uniform(&rng) * s->c->poll_s, EV_POLL, ALL_WORKERS, 0);
	for (i = 0; i < s->n; i++)
		if (sim_push(s, sim_rng_uniform(&rng) * s->c->poll_s, EV_POLL, i, 0))
			return -1;
	return 0;
}

/* ---- Arrivals and the measurement window ---------------------------------- */

static void open_window(struct sim *s, double t)
{
	uint32_t i;

	s->win_start = t;
	s->finished_open = s->finished;
	for (i = 0; i < s->n; i++) {
		worker_advance(s, &s->w[i], t);
		s->w[i].area_win_start = s->w[i].backlog_area;
		s->w[i].served_win_start = worker_served(s, &s->w[i], t);
		s->w[i].preempt_win_start = s->w[i].preemptions;
	}
}

static void close_window(struct sim *s, double t)
{
	double len;
	uint32_t i;

	s->win_end = t;
	s->finished_close = s->finished;
	len = t - s->win_start;
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];

		worker_advance(s, w, t);
		w->served_win = worker_served(s, w, t) - w->served_win_start;
		w->backlog_win = len > 0 ? (w->backlog_area - w->area_win_start) / len : 0;
		w->preempt_win = w->preemptions - w->preempt_win_start;
	}
}

/* What the oracle's admission asks: the arriving request's exact wait. */
struct arrival {
	struct sim *s;
	uint32_t prompt;
	double t;
};

/* The FIFO engine's true wait is exact but for waits for KV memory and
 * preemptions still to come; the batching engine's is replayed. */
static double exact_wait(void *ctx, uint32_t wi, double limit)
{
	struct arrival *a = ctx;

	if (!batching(a->s))
		return fifo_true_wait(&a->s->w[wi], a->t);
	return batch_exact_wait(a->s, wi, a->prompt, a->t, limit);
}

static uint32_t route(struct sim *s, uint32_t router, const struct req *r, double t)
{
	double tw[SIM_MAX_WORKERS], rate[SIM_MAX_WORKERS];
	struct arrival a = { .s = s, .prompt = r->prompt, .t = t };
	uint32_t i, uncached[SIM_MAX_WORKERS];
	struct sim_observation obs = {
		.snap = s->snap,
		.true_wait_s = tw,
		.rate = rate,
		.now = t,
		.exact_wait = exact_wait,
		.exact_ctx = &a,
		.key = r->key,
		.prompt = r->prompt,
		.prefix = r->conv != NONE ? s->convs[r->conv].context : 0,
	};

	for (i = 0; i < s->n; i++) {
		/* Computed for every policy, read by the oracle only. */
		tw[i] = worker_true_wait(s, &s->w[i], t);
		rate[i] = s->w[i].rate;
	}
	if (s->c->policy == SIM_POL_ORACLE_CACHE) {
		for (i = 0; i < s->n; i++)
			uncached[i] = cache_uncached(s, i, r);
		obs.uncached = uncached;
	}
	return sim_router_pick(s->routers[router], &obs);
}

/* The connection request i goes out on: its router's most recently idle
 * one, or a new one steered by the router's policy. *refused when the
 * policy refused the new connection (then NONE, as when out of memory). */
static int32_t client_connection(struct sim *s, int32_t i, double t, bool *refused)
{
	struct req *r = &s->reqs[i];
	uint32_t router = r->router;
	int32_t ci = s->idle[router];
	uint32_t wi;

	*refused = false;
	if (ci != NONE) {
		s->idle[router] = s->conns[ci].next;
		return ci;
	}
	wi = route(s, router, r, t);
	if (wi == SIM_REFUSED) {
		*refused = true;
		return NONE;
	}
	ci = conn_alloc(s);
	if (ci == NONE)
		return NONE;
	s->conns[ci] = (struct conn){ .worker = wi, .router = router, .next = NONE };
	s->connections++;
	sim_router_connected(s->routers[router], wi);
	return ci;
}

/* A refused request is dropped: no worker, no retry, nothing sent. */
static void refuse(struct sim *s, int32_t i)
{
	struct req *r = &s->reqs[i];

	s->refused++;
	s->refused_measured += r->measured_idx >= 0;
	s->refused_tokens += r->prompt;
	req_free(s, i);
}

/* The request goes out on connection ci: the router's kernel sees its
 * bytes, and its worker queues it. */
static int dispatch(struct sim *s, int32_t i, int32_t ci, double t)
{
	struct req *r = &s->reqs[i];
	struct conn *c = &s->conns[ci];

	r->conn = ci;
	r->worker = c->worker;
	if (cache_dispatch(s, r))
		return -1;
	sim_router_sent(s->routers[r->router], r->worker, wire_tokens(s, r), c->requests == 0, t);
	share(s, EV_PEER_SENT, r->router, r->worker, wire_tokens(s, r), t);
	c->requests++;
	s->w[r->worker].dispatched++;
	return worker_enqueue(s, r->worker, i, t);
}

/*
 * The next arrival after t. Bursts: a time-varying Poisson process drawn by
 * inverting its integrated rate, one unit exponential per arrival, so that
 * the arrivals do not depend on anything a policy does. Without bursts the
 * plain draw, as it always was.
 */
static double next_arrival(struct sim *s, double t)
{
	const struct sim_config *c = s->c;
	double e, rate;

	if (!(c->burst_load > 0))
		return t + sim_rng_exp(&s->workload, 1.0 / s->lambda);
	e = sim_rng_exp(&s->workload, 1.0);
	for (;;) {
		rate = s->lambda / c->load * (s->in_burst ? c->burst_load : c->load);
		if (e <= rate * (s->phase_end - t))
			return t + e / rate;
		e -= rate * (s->phase_end - t);
		t = s->phase_end;
		s->in_burst = !s->in_burst;
		s->phase_end = t + (s->in_burst ? c->burst_on_s : c->burst_off_s);
	}
}

int sim_arrive(struct sim *s, double t, uint32_t prompt, uint32_t output, uint32_t router,
	       uint64_t key, int32_t conv)
{
	uint64_t idx = s->arrived++;
	int32_t i = req_alloc(s), ci;
	struct req *r;
	bool refused;

	if (i == NONE)
		return -1;
	r = &s->reqs[i];
	r->arrival = t;
	r->prompt = prompt;
	r->output = output;
	r->router = router;
	r->key = key;
	r->conv = conv;
	r->uncached = r->prompt;
	r->work = r->prompt;
	r->out_left = r->output;
	r->kv_held = 0;
	r->started = false;
	r->answered = false;
	r->first_token = false;
	r->measured_idx = idx >= s->c->warmup ? (int64_t)(idx - s->c->warmup) : -1;
	s->arrived_tokens += r->prompt;
	if (idx == s->c->warmup)
		open_window(s, t);
	ci = client_connection(s, i, t, &refused);
	if (refused)
		refuse(s, i);
	else if (ci == NONE || dispatch(s, i, ci, t))
		return -1;
	if (s->arrived == s->total)
		close_window(s, t);
	return refused ? 1 : 0;
}

/* A single request's key: one of --keys clients, or its own. Drawn from a
 * stream of its own, so that the requests are those of every other run. */
static uint64_t request_key(struct sim *s)
{
	if (s->c->keys)
		return 1 + sim_rng_below(&s->keys, s->c->keys);
	return s->arrived + 1;
}

/* A new single request, or a new conversation's first turn; then the next
 * arrival, until the run has had them all. */
static int on_arrival(struct sim *s, double t)
{
	int rc;

	if (s->arrived >= s->total)
		return 0; /* conversations' turns came first */
	if (conversations(s)) {
		rc = conv_start(s, t);
	} else {
		uint32_t prompt = sim_draw_prompt(&s->workload, s->c->dist);
		uint32_t output = sim_draw_output(&s->workload, s->c->mean_output);
		uint32_t router = sim_rng_below(&s->workload, s->c->routers);

		rc = sim_arrive(s, t, prompt, output, router, request_key(s), NONE);
	}
	if (rc < 0)
		return -1;
	if (s->arrived >= s->total)
		return 0;
	return sim_push(s, next_arrival(s, t), EV_ARRIVAL, 0, 0);
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
	s->conn_free = NONE;
	for (i = 0; i < SIM_MAX_ROUTERS; i++)
		s->idle[i] = NONE;
	s->total = c->warmup + c->requests;
	s->lambda = sim_arrival_rate(c);
	sim_rng_seed(&s->workload, c->seed, SIM_STREAM_WORKLOAD);
	sim_rng_seed(&s->share, c->seed, SIM_STREAM_SHARE);
	sim_rng_seed(&s->keys, c->seed, SIM_STREAM_KEYS);
	s->conv_free = NONE;
	sim_worker_speeds(c, speeds);
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];

		w->speed = speeds[i];
		w->rate = c->base_rate * speeds[i];
		w->decode_rate = c->decode_rate * speeds[i];
		w->kv_cap = c->kv_tokens;
		w->q_head = w->q_tail = w->cur = w->run_head = w->run_tail = NONE;
		if (batching(s))
			batch_init_worker(c, w);
		if (conversations(s) && c->cache_tokens)
			sim_lru_init(&w->cache, 0, (uint64_t)(c->cache_tokens * c->cache_high),
				     (uint64_t)(c->cache_tokens * c->cache_low));
	}
	for (i = 0; i < c->routers; i++) {
		s->routers[i] = sim_router_new(c, i);
		if (!s->routers[i])
			return -1;
	}
	if (batching(s) && !(s->replay = malloc((c->batch.max_running + 1) * sizeof(*s->replay))))
		return -1;
	s->waits = malloc(c->requests * sizeof(*s->waits));
	s->ttfts = malloc(c->requests * sizeof(*s->ttfts));
	if (!s->waits || !s->ttfts)
		return -1;
	if (schedule_first_polls(s))
		return -1;
	if (batching(s) && batch_start_probes(s, 0))
		return -1;
	s->phase_end = c->burst_off_s; /* a first phase at the base load */
	return sim_push(s, next_arrival(s, 0), EV_ARRIVAL, 0, 0);
}

static void sim_fini(struct sim *s)
{
	uint32_t i;

	for (i = 0; i < SIM_MAX_ROUTERS; i++)
		sim_router_free(s->routers[i]);
	free(s->heap.v);
	free(s->reqs);
	free(s->conns);
	free(s->waits);
	free(s->ttfts);
	free(s->replay);
	for (i = 0; i < s->n; i++)
		sim_lru_free(&s->w[i].cache);
	conv_free_all(s);
}

static bool finished(const struct sim *s)
{
	if (s->arrived < s->total)
		return false;
	if (s->c->complete)
		return s->finished + s->refused == s->total;
	return !s->c->drain || (s->nwaits + s->refused_measured == s->c->requests &&
				s->nttfts + s->refused_measured == s->c->requests);
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
			rc = fifo_on_prefill_done(s, e.a, e.t);
			break;
		case EV_DECODE_DONE:
			rc = fifo_on_decode_done(s, (int32_t)e.a, e.b, e.t);
			break;
		case EV_STEP_DONE:
			rc = batch_on_step_done(s, e.a, e.t);
			break;
		case EV_PEER_SENT:
		case EV_PEER_ANSWERED:
			deliver_peer(s, e.type, e.a >> 16, e.a & 0xffff, e.b, e.t);
			break;
		case EV_PEER_STEP:
			deliver_step(s, e.a >> 16, e.a & 0xffff, e.b, e.t0, e.t);
			break;
		case EV_POLL:
			rc = on_poll(s, e.a, e.t);
			break;
		case EV_TURN:
			rc = conv_next_turn(s, (int32_t)e.a, e.t);
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

/* The fraction of the sorted waits above the bound (0 without one). */
static double over_bound(const double *sorted, uint64_t n, double bound)
{
	uint64_t lo = 0, hi = n;

	if (!(bound > 0) || n == 0)
		return 0;
	while (lo < hi) { /* the first wait above the bound */
		uint64_t mid = lo + (hi - lo) / 2;

		if (sorted[mid] > bound)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (double)(n - lo) / (double)n;
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
	r->over_bound = over_bound(s->waits, s->nwaits, s->c->wait_bound_s);
	r->p50_s = sim_quantile(s->waits, s->nwaits, 0.50);
	r->p99_s = sim_quantile(s->waits, s->nwaits, 0.99);
	r->p999_s = sim_quantile(s->waits, s->nwaits, 0.999);
	r->max_s = s->waits[s->nwaits - 1];
	if (s->nttfts == 0)
		return;
	qsort(s->ttfts, s->nttfts, sizeof(*s->ttfts), cmp_double);
	for (sum = 0, i = 0; i < s->nttfts; i++)
		sum += s->ttfts[i];
	r->ttft_mean_s = sum / (double)s->nttfts;
	r->ttft_p50_s = sim_quantile(s->ttfts, s->nttfts, 0.50);
	r->ttft_p99_s = sim_quantile(s->ttfts, s->nttfts, 0.99);
}

/* Every router with a request that got a token at worker wi's last step
 * end (a running request past its prefill) should have seen that step end,
 * when streaming. */
static void rx_check(const struct sim *s, uint32_t wi, struct sim_result *r)
{
	const struct worker *w = &s->w[wi];
	uint64_t mask = 0;
	int32_t i;
	uint32_t k;

	for (i = w->run_head; i != NONE; i = s->reqs[i].next)
		if (s->reqs[i].generated > 0)
			mask |= 1ull << s->reqs[i].router;
	for (k = 0; mask; k++, mask >>= 1) {
		if (!(mask & 1))
			continue;
		r->rx_pairs++;
		r->rx_at_step_end += sim_router_last_rx(s->routers[k], wi) == w->last_step_end;
	}
}

static void collect(struct sim *s, struct sim_result *r)
{
	double backlog[SIM_MAX_WORKERS];
	uint32_t i;

	memset(r, 0, sizeof(*r));
	wait_stats(s, r);
	r->window_s = s->win_end - s->win_start;
	if (r->window_s > 0)
		r->tput_rps = (double)(s->finished_close - s->finished_open) / r->window_s;
	r->prompt_tokens = s->prompt_measured;
	r->cached_tokens = s->cached_measured;
	r->lost_tokens = s->lost_measured;
	r->end_s = s->now;
	r->arrived_tokens = s->arrived_tokens;
	r->recompute_tokens = s->recompute_tokens;
	r->arrived = s->arrived;
	r->started = s->started;
	r->finished = s->finished;
	r->answered = s->answered;
	r->answered_tokens = s->answered_tokens;
	r->connections = s->connections;
	r->refused = s->refused_measured;
	r->refused_all = s->refused;
	r->refused_tokens = s->refused_tokens;
	r->sent_tokens = s->arrived_tokens - s->refused_tokens; /* the rest is sent at once */
	r->workers = s->n;
	for (i = 0; i < s->n; i++) {
		struct worker *w = &s->w[i];
		struct sim_worker_result *o = &r->w[i];

		o->speed = w->speed;
		o->rate = w->rate;
		o->served_tokens = worker_served(s, w, s->now);
		o->backlog_s = w->backlog_win;
		o->served_window = w->served_win;
		o->dispatched = w->dispatched;
		o->preemptions = w->preempt_win;
		o->queued_tokens_end = w->queued_tokens + worker_unprefilled_running(s, w, s->now);
		o->max_running = w->max_running;
		o->max_kv_used = w->max_kv_used;
		o->last_step_end = batching(s) ? w->last_step_end : -1;
		o->cache_max = w->cache_max;
		if (batching(s))
			rx_check(s, i, r);
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
		r->routers.refused += st.refused;
		r->routers.sent_tokens += st.sent_tokens;
		r->routers.answered_tokens += st.answered_tokens;
		r->routers.pending_tokens += st.pending_tokens;
		r->routers.aff_known += st.aff_known;
		r->routers.aff_stayed += st.aff_stayed;
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
