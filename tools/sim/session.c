// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * session.c - conversations and the workers' prefix caches (docs/simulator.md,
 * "Cache affinity").
 *
 * A conversation has geometric turns (mean c->turns). A turn's prompt is the
 * context so far, every earlier prompt and answer, plus new user tokens drawn
 * from c->dist; its answer's length is drawn as a single request's. The next
 * turn comes a think time after the answer's last token, on a new connection
 * (every turn connects anew: keep-alive off). Every draw comes from the
 * conversation's own stream, in a fixed order per turn, so that every policy
 * sees the very same conversations; only when their turns come depends on
 * the policy. A conversation ends after its turns, or at the first turn whose
 * prompt would be longer than SIM_PROMPT_CAP.
 *
 * A worker's prefix cache maps a conversation to the tokens of its context
 * it holds, from the start. A turn prefills only the tokens beyond that
 * prefix. Its prompt is cached from its dispatch (it is in the cache from
 * its prefill on, and no later turn of the conversation comes before it is
 * answered), its answer when it completes, as the mock worker caches the
 * blocks it decodes.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

bool conversations(const struct sim *s)
{
	return s->c->turns > 0;
}

/* One turn's draws, always all of them and in this order. */
struct turn_draw {
	uint32_t user, output, router;
	double think_s;
};

static void draw_turn(struct sim_rng *rng, const struct sim_config *c, struct turn_draw *d)
{
	d->user = sim_draw_prompt(rng, c->dist);
	d->output = sim_draw_output(rng, c->mean_output);
	d->router = sim_rng_below(rng, c->routers);
	d->think_s = sim_rng_exp(rng, c->think_s);
}

/* Geometric turns of the given mean, at least 1, at most SIM_TURNS_MAX. */
static uint32_t draw_turns(struct sim_rng *rng, double mean)
{
	double u = sim_rng_uniform(rng), n;

	if (mean <= 1)
		return 1;
	n = 1 + floor(log1p(-u) / log1p(-1.0 / mean));
	return n >= SIM_TURNS_MAX ? SIM_TURNS_MAX : (uint32_t)n;
}

/* Prompt tokens a conversation offers over all its turns. */
static double conv_tokens(struct sim_rng *rng, const struct sim_config *c)
{
	uint32_t turns = draw_turns(rng, c->turns), context = 0, k;
	double sum = 0;

	for (k = 0; k < turns; k++) {
		struct turn_draw d;

		draw_turn(rng, c, &d);
		if (context + d.user > SIM_PROMPT_CAP)
			break;
		sum += context + d.user;
		context += d.user + d.output;
	}
	return sum;
}

/* 100,000 conversations of seed 0: the mean within about 0.5 %, and the
 * same arrival rate for every seed, as the exact mean gives single
 * requests. */
#define CONV_SAMPLE 100000

double sim_conversation_mean_tokens(const struct sim_config *c)
{
	double sum = 0;
	uint32_t i;

	for (i = 0; i < CONV_SAMPLE; i++) {
		struct sim_rng rng;

		sim_rng_seed(&rng, 0, SIM_STREAM_CONV + i);
		sum += conv_tokens(&rng, c);
	}
	return sum / CONV_SAMPLE;
}

static int32_t conv_alloc(struct sim *s)
{
	int32_t i;

	if (s->conv_free != NONE) {
		i = s->conv_free;
		s->conv_free = s->convs[i].next;
		return i;
	}
	if (s->nconvs == s->capconvs) {
		size_t cap = s->capconvs ? s->capconvs * 2 : 256;
		struct conv *v;

		if (cap > INT32_MAX)
			return NONE;
		v = realloc(s->convs, cap * sizeof(*v));
		if (!v)
			return NONE;
		s->convs = v;
		s->capconvs = cap;
	}
	return (int32_t)s->nconvs++;
}

static void conv_release(struct sim *s, int32_t ci)
{
	s->convs[ci].next = s->conv_free;
	s->conv_free = ci;
}

void conv_free_all(struct sim *s)
{
	free(s->convs);
	s->convs = NULL;
}

int conv_start(struct sim *s, double t)
{
	int32_t ci = conv_alloc(s);
	struct conv *v;

	if (ci == NONE)
		return -1;
	v = &s->convs[ci];
	sim_rng_seed(&v->rng, s->c->seed, SIM_STREAM_CONV + s->conv_started);
	v->key = ++s->conv_started;
	v->context = 0;
	v->turns_left = draw_turns(&v->rng, s->c->turns);
	v->router = UINT32_MAX;
	return conv_next_turn(s, ci, t);
}

/* The conversation's next turn arrives at t; it ends instead when it has
 * no turn left, when the run has had all its arrivals, when the prompt
 * would be too long, or when its turn is refused. */
int conv_next_turn(struct sim *s, int32_t ci, double t)
{
	struct conv *v = &s->convs[ci];
	struct turn_draw d;
	uint32_t router;
	int rc;

	if (v->turns_left == 0 || s->arrived >= s->total) {
		conv_release(s, ci);
		return 0;
	}
	draw_turn(&v->rng, s->c, &d);
	if (v->context + d.user > SIM_PROMPT_CAP) {
		conv_release(s, ci);
		return 0;
	}
	v->turns_left--;
	if (v->router == UINT32_MAX)
		v->router = d.router;
	v->think_s = d.think_s;
	router = s->c->turn_router_any ? d.router : v->router;
	rc = sim_arrive(s, t, v->context + d.user, d.output, router, v->key, ci);
	if (rc == 1)
		conv_release(s, ci);
	return rc < 0 ? -1 : 0;
}

/* Worker wi caches tokens of the key's context from its start. */
static int cache_put(struct sim *s, uint32_t wi, uint64_t key, uint64_t tokens)
{
	struct worker *w = &s->w[wi];

	if (!s->c->cache_tokens)
		return 0;
	if (sim_lru_put(&w->cache, key, 0, tokens))
		return -1;
	if (w->cache.weight > w->cache_max)
		w->cache_max = w->cache.weight;
	return 0;
}

int conv_turn_done(struct sim *s, const struct req *r, double t)
{
	struct conv *v = &s->convs[r->conv];

	v->context = r->prompt + r->output;
	if (cache_put(s, r->worker, r->key, (uint64_t)r->prompt + r->output))
		return -1;
	if (v->turns_left == 0 || s->arrived >= s->total) {
		conv_release(s, r->conv);
		return 0;
	}
	return sim_push(s, t + v->think_s, EV_TURN, (uint32_t)r->conv, 0);
}

uint32_t cache_uncached(const struct sim *s, uint32_t wi, const struct req *r)
{
	uint64_t have = 0;

	if (r->conv == NONE || !s->c->cache_tokens ||
	    !sim_lru_peek(&s->w[wi].cache, r->key, NULL, &have))
		return r->prompt;
	/* An engine prefills at least the last token, to sample from it. */
	if (have >= r->prompt)
		have = r->prompt - 1;
	return r->prompt - (uint32_t)have;
}

/* The fewest tokens any worker would prefill of r's prompt. */
static uint32_t least_uncached(const struct sim *s, const struct req *r)
{
	uint32_t i, least = r->prompt;

	for (i = 0; i < s->n && r->conv != NONE && s->c->cache_tokens; i++) {
		uint32_t u = cache_uncached(s, i, r);

		least = u < least ? u : least;
	}
	return least;
}

int cache_dispatch(struct sim *s, struct req *r)
{
	r->uncached = cache_uncached(s, r->worker, r);
	r->work = r->uncached;
	if (r->measured_idx >= 0) {
		s->prompt_measured += r->prompt;
		s->cached_measured += r->prompt - r->uncached;
		s->lost_measured += r->uncached - least_uncached(s, r);
	}
	if (r->conv == NONE)
		return 0;
	return cache_put(s, r->worker, r->key, r->prompt);
}
