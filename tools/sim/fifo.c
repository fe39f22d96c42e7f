// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fifo.c - the first worker model: a continuous-batching server reduced to
 * what decides the queueing wait.
 *  - prefill: one FIFO queue of token-work served at the worker's token rate,
 *    one request at a time (the head); a request's wait ends when its first
 *    prefill starts, and its first token comes when that prefill ends;
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

#include "internal.h"

/* Remaining prefill work of the head at time t, tokens. */
double fifo_head_remaining(const struct worker *w, double t)
{
	double left;

	if (w->cur == NONE)
		return 0;
	left = (w->cur_end - t) * w->rate;
	return left > 0 ? left : 0;
}

/* True queueing delay a request arriving at t would see: all work ahead / rate. */
double fifo_true_wait(const struct worker *w, double t)
{
	return w->queued_tokens / w->rate + (w->cur == NONE ? 0 : fmax(w->cur_end - t, 0));
}

/* Prefill work served up to t, the head's progress included. */
double fifo_served_at(const struct sim *s, const struct worker *w, double t)
{
	if (w->cur == NONE)
		return w->served_done;
	return w->served_done + s->reqs[w->cur].work - fifo_head_remaining(w, t);
}

/*
 * Bring the backlog integral to time t. Called before every change of the
 * queue, so between two calls the backlog is the constant queued part plus
 * a head that shrinks linearly (its completion is itself an event).
 */
void fifo_advance(struct worker *w, double t)
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

	sim_list_unlink(s, &w->run_head, &w->run_tail, i);
	w->running--;
	w->kv_used -= r->kv_held;
	r->kv_held = 0;
	r->out_left -= generated;
	r->work = r->prompt + (r->output - r->out_left);
	r->epoch++; /* cancels its decode completion */
	sim_list_push_front(s, &w->q_head, &w->q_tail, i);
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

/* KV a prefill holds: its whole prompt, cached prefix included (attention
 * reads it all), or on a recompute all it prefills again. */
static uint32_t kv_need(const struct req *r)
{
	return r->work > r->prompt ? r->work : r->prompt;
}

/* Start the head's prefill if the worker is free and its prompt fits. */
static int try_start_prefill(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	int32_t i = w->q_head;
	struct req *r;

	if (w->cur != NONE || i == NONE || w->kv_used + kv_need(&s->reqs[i]) > w->kv_cap)
		return 0;
	r = &s->reqs[i];
	sim_list_unlink(s, &w->q_head, &w->q_tail, i);
	w->waiting--;
	w->queued_tokens -= r->work;
	if (w->waiting == 0)
		w->queued_tokens = 0; /* no drift from adding and removing doubles */
	sim_req_started(s, i, t);
	w->kv_used += kv_need(r);
	r->kv_held = kv_need(r);
	w->cur = i;
	w->cur_end = t + r->work / w->rate;
	return sim_push(s, w->cur_end, EV_PREFILL_DONE, wi, 0);
}

int fifo_on_prefill_done(struct sim *s, uint32_t wi, double t)
{
	struct worker *w = &s->w[wi];
	int32_t i = w->cur;
	struct req *r = &s->reqs[i];

	fifo_advance(w, t);
	w->served_done += r->work;
	make_room(s, w, r->out_left, t);
	w->cur = NONE;
	w->kv_used += r->out_left;
	r->kv_held += r->out_left;
	r->decode_start = t;
	sim_list_push_back(s, &w->run_head, &w->run_tail, i);
	w->running++;
	sim_req_first_token(s, i, t); /* a no-op after a recompute */
	if (sim_push(s, t + r->out_left / w->decode_rate, EV_DECODE_DONE, (uint32_t)i, r->epoch))
		return -1;
	return try_start_prefill(s, wi, t);
}

int fifo_on_decode_done(struct sim *s, int32_t i, uint32_t epoch, double t)
{
	struct req *r = &s->reqs[i];
	uint32_t wi = r->worker;
	struct worker *w = &s->w[wi];

	if (r->epoch != epoch)
		return 0; /* preempted since: it will decode again */
	fifo_advance(w, t);
	sim_list_unlink(s, &w->run_head, &w->run_tail, i);
	w->running--;
	w->kv_used -= r->kv_held;
	sim_req_done(s, i, t);
	/* The freed memory may admit a head that was waiting for it. */
	return try_start_prefill(s, wi, t);
}

int fifo_enqueue(struct sim *s, uint32_t wi, int32_t i, double t)
{
	struct worker *w = &s->w[wi];

	fifo_advance(w, t);
	sim_list_push_back(s, &w->q_head, &w->q_tail, i);
	w->waiting++;
	w->queued_tokens += s->reqs[i].work;
	return try_start_prefill(s, wi, t);
}
