// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * affinity.c - the policies that read who connects (docs/simulator.md,
 * "Cache affinity"):
 *  - smg-steer with affinity: a bounded LRU per router maps a key to the
 *    worker of its last connection (the kernel keeps 4-way sets, each an
 *    LRU, which a full LRU stands for); the key's next connection goes there
 *    while that worker is admitted and its expected wait (the score
 *    steer_select() computes, in-flight work included) is at most the best
 *    plus the slack; otherwise to the best, which becomes the key's worker.
 *    A key not in the table is placed by least wait, or (aff_hrw) starts at
 *    its rendezvous-hash worker among the admitted ones, under the same rule;
 *  - cache-aware, smg's cache_aware as this study specifies it: the worker
 *    it last sent the key to, while the part of that prompt this one repeats
 *    is more than half of this one (smg's cache_threshold: its tree matches
 *    text, so unrelated prompts never match), spilling to the least loaded
 *    when that worker's load is above both 1.5 x and 64 + the average (load:
 *    this router's requests in flight); otherwise the least loaded;
 *  - chbl: consistent hashing with bounded loads (Mirrokni et al.), load
 *    factor 1.25 over this router's requests in flight;
 *  - oracle-cache: the least true wait plus the prefill of what the worker
 *    does not cache of the prompt.
 */
#include <math.h>
#include <stdlib.h>

#include "router.h"

#define CHBL_VNODES 100	    /* ring points per worker */
#define CHBL_FACTOR 1.25    /* a worker takes at most 1.25 x the mean load */
#define SPILL_REL 1.5	    /* cache-aware spills above 1.5 x the mean load ... */
#define SPILL_ABS 64.0	    /* ... and above the mean + 64 requests */
#define CACHE_THRESHOLD 0.5 /* smg's cache_threshold: the share of the prompt matched */

struct chbl_point {
	uint64_t h;
	uint32_t w;
};

struct chbl_ring {
	uint32_t n;
	struct chbl_point p[SIM_MAX_WORKERS * CHBL_VNODES];
};

bool sim_affinity_stays(uint64_t wait_ns, uint64_t best_ns, uint64_t slack_ns)
{
	return wait_ns <= steer_sat_add(best_ns, slack_ns);
}

static int cmp_point(const void *a, const void *b)
{
	const struct chbl_point *x = a, *y = b;

	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return (x->w > y->w) - (x->w < y->w);
}

static struct chbl_ring *ring_new(uint32_t workers)
{
	struct chbl_ring *g = calloc(1, sizeof(*g));
	uint32_t w, v;

	if (!g)
		return NULL;
	for (w = 0; w < workers; w++)
		for (v = 0; v < CHBL_VNODES; v++)
			g->p[g->n++] =
				(struct chbl_point){ .h = sim_hash2(w + 1, ~(uint64_t)v), .w = w };
	qsort(g->p, g->n, sizeof(g->p[0]), cmp_point);
	return g;
}

int router_keys_init(struct sim_router *r, const struct sim_config *c)
{
	r->aff = c->policy == SIM_POL_STEER && c->slack_s >= 0;
	r->aff_hrw = r->aff && c->aff_hrw;
	r->aff_ctx = r->aff && c->aff_ctx;
	r->slack_ns = r->aff ? steer_policy_u64_sat(round(c->slack_s * 1e9)) : 0;
	sim_lru_init(&r->keys, c->aff_keys, 0, 0);
	if (c->policy == SIM_POL_CHBL && !(r->ring = ring_new(c->workers)))
		return -1;
	return 0;
}

void router_keys_free(struct sim_router *r)
{
	sim_lru_free(&r->keys);
	free(r->ring);
}

/* ---- smg-steer with affinity ---------------------------------------------- */

/* Worker w's table entry, when w is admitted: in the published table (the
 * shed leaves the overloaded out), not drained, ejected or full. */
static const struct steer_entry *admitted_entry(struct sim_router *r, uint32_t w)
{
	const struct steer_table *t = r->table;
	struct steer_slot *s = sim_slot_at(r, w);
	uint32_t i;

	if (!s || !steer_slot_eligible(s))
		return NULL;
	for (i = 0; i < t->n; i++)
		if (t->e[i].slot == w)
			return &t->e[i];
	return NULL;
}

/* The key's rendezvous worker: the highest hash of (key, worker) among the
 * admitted ones, so that routers agree on it without sharing anything. */
static uint32_t hrw_worker(struct sim_router *r, uint64_t key)
{
	uint32_t i, best = SIM_REFUSED;
	uint64_t hb = 0;

	for (i = 0; i < r->table->n; i++) {
		uint32_t w = r->table->e[i].slot;
		uint64_t h = sim_hash2(key, w + 1);

		if (admitted_entry(r, w) && (best == SIM_REFUSED || h > hb)) {
			best = w;
			hb = h;
		}
	}
	return best;
}

/* The table's value: the worker, and above it (--aff-ctx) the tokens of the
 * key's last connection once it completed. */
#define KEY_WORKER(v) ((uint32_t)(v))
#define KEY_TOKENS(v) ((v) >> 32)

void sim_router_key_done(struct sim_router *r, uint64_t key, uint32_t tokens)
{
	uint64_t v;

	if (r->aff_ctx && sim_lru_peek(&r->keys, key, &v, NULL))
		(void)sim_lru_put(&r->keys, key, KEY_WORKER(v) | (uint64_t)tokens << 32, 1);
}

/* The slack a key has: S, and with --aff-ctx the prefill a leave forfeits,
 * its last connection's tokens at the best worker's published rate. */
static uint64_t key_slack(const struct sim_router *r, uint64_t v, const struct steer_pick *best)
{
	const struct steer_table *t = r->table;

	if (!r->aff_ctx || best->pos >= t->n)
		return r->slack_ns;
	return steer_sat_add(r->slack_ns,
			     steer_sat_mul(KEY_TOKENS(v), t->e[best->pos].ns_per_token));
}

uint32_t affinity_choose(struct sim_router *r, const struct sim_observation *obs,
			 const struct steer_pick *best)
{
	uint32_t a = SIM_REFUSED, pick = best->slot;
	const struct steer_entry *e;
	uint64_t v = 0;

	if (sim_lru_peek(&r->keys, obs->key, &v, NULL))
		a = KEY_WORKER(v);
	else if (r->aff_hrw)
		a = hrw_worker(r, obs->key);
	if (a != SIM_REFUSED) {
		r->stats.aff_known++;
		e = admitted_entry(r, a);
		if (e && sim_affinity_stays(steer_score(e->base_wait_ns,
							steer_slot_inflight(&r->slots[a]),
							e->ns_per_token),
					    best->score, key_slack(r, v, best))) {
			pick = a;
			r->stats.aff_stayed++;
		}
	}
	/* Out of memory only loses the key: its next connection is new. */
	(void)sim_lru_put(&r->keys, obs->key, pick, 1);
	return pick;
}

/* ---- Baselines that read the key ------------------------------------------ */

/* This router's requests in flight: their sum, and the least loaded worker
 * (ties uniformly at random, as the other baselines break them). */
static uint32_t least_live(struct sim_router *r, double *sum)
{
	uint32_t i, pick = 0, ties = 0;

	*sum = 0;
	for (i = 0; i < r->n; i++) {
		*sum += r->live[i];
		if (!ties || r->live[i] < r->live[pick]) {
			pick = i;
			ties = 1;
		} else if (r->live[i] == r->live[pick] && sim_rng_below(&r->rng, ++ties) == 0) {
			pick = i;
		}
	}
	return pick;
}

uint32_t pick_cache_aware(struct sim_router *r, const struct sim_observation *obs)
{
	uint64_t worker, sent;
	double sum, avg;
	uint32_t pick = least_live(r, &sum), a;

	avg = sum / r->n;
	/* The match: what of the prompt it sent there this one repeats. */
	if (sim_lru_peek(&r->keys, obs->key, &worker, &sent) &&
	    (double)(sent < obs->prefix ? sent : obs->prefix) > CACHE_THRESHOLD * obs->prompt) {
		a = (uint32_t)worker;
		if (!(r->live[a] > SPILL_REL * avg && r->live[a] > avg + SPILL_ABS))
			pick = a;
	}
	(void)sim_lru_put(&r->keys, obs->key, pick, obs->prompt);
	return pick;
}

uint32_t pick_chbl(struct sim_router *r, const struct sim_observation *obs)
{
	const struct chbl_ring *g = r->ring;
	uint64_t h = sim_hash2(obs->key, 0);
	uint32_t lo = 0, hi = g->n, k, i, total = 0, cap;

	for (i = 0; i < r->n; i++)
		total += r->live[i];
	/* The bound: no worker above ceil(c x (load + 1) / n) with this one. */
	cap = (uint32_t)ceil(CHBL_FACTOR * (total + 1) / r->n);
	while (lo < hi) { /* the first point at or after h, clockwise */
		uint32_t mid = lo + (hi - lo) / 2;

		if (g->p[mid].h < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = 0; k < g->n; k++) {
		uint32_t w = g->p[(lo + k) % g->n].w;

		if (r->live[w] < cap)
			return w;
	}
	return g->p[lo % g->n].w; /* not reached: some worker is below the mean */
}

/* True wait plus the prefill of the uncached prompt, at the true rate; ties
 * to the fastest, then the lowest index. */
uint32_t pick_oracle_cache(struct sim_router *r, const struct sim_observation *obs)
{
	uint32_t i, best = 0;
	double vb = INFINITY;

	for (i = 0; i < r->n; i++) {
		double v = obs->true_wait_s[i] +
			   (obs->uncached ? obs->uncached[i] : obs->prompt) / obs->rate[i];

		if (v < vb || (v == vb && obs->rate[i] > obs->rate[best])) {
			best = i;
			vb = v;
		}
	}
	return best;
}
