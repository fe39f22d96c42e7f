// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * guard.c - the metrics server's choice of a connection to drop
 * (see guard.h). A linear scan: at most a few hundred connections.
 */
#include "guard.h"

#include <stdlib.h>

struct steer_guard_conn {
	void *owner;
	uint64_t since_ns; /* start of the current phase */
	bool answering;	   /* a complete request is being answered */
	bool dropped;	   /* told to the caller: on its way out */
	size_t index;	   /* in steer_guard.conns */
};

struct steer_guard {
	size_t limit, cap, n, open;
	uint64_t answer_deadline_ns;
	uint64_t dropped;
	struct steer_guard_conn **conns;
};

struct steer_guard *steer_guard_new(size_t limit, size_t cap, uint64_t answer_deadline_ns)
{
	struct steer_guard *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->conns = calloc(cap ? cap : 1, sizeof(*g->conns));
	if (!g->conns) {
		free(g);
		return NULL;
	}
	g->limit = limit ? limit : 1;
	g->cap = cap > g->limit ? cap : g->limit;
	g->answer_deadline_ns = answer_deadline_ns;
	return g;
}

void steer_guard_free(struct steer_guard *g)
{
	size_t i;

	if (!g)
		return;
	for (i = 0; i < g->n; i++)
		free(g->conns[i]);
	free(g->conns);
	free(g);
}

/* True when a is a better victim than b (NULL: none yet). */
static bool better_victim(const struct steer_guard_conn *a, const struct steer_guard_conn *b)
{
	if (!b)
		return true;
	if (a->answering != b->answering)
		return !a->answering; /* not being answered goes first */
	return a->since_ns < b->since_ns;
}

/* The connection to drop to make room, other than skip; NULL if none may go. */
static struct steer_guard_conn *pick_victim(struct steer_guard *g,
					    const struct steer_guard_conn *skip, uint64_t now)
{
	struct steer_guard_conn *best = NULL;
	size_t i;

	for (i = 0; i < g->n; i++) {
		struct steer_guard_conn *c = g->conns[i];

		if (c == skip || c->dropped)
			continue;
		/* An answer in progress goes only once it is overdue (a phase
		 * stamped after now, by a clock read race, is not). */
		if (c->answering &&
		    (now <= c->since_ns || now - c->since_ns <= g->answer_deadline_ns))
			continue;
		if (better_victim(c, best))
			best = c;
	}
	return best;
}

static struct steer_guard_conn *drop(struct steer_guard *g, struct steer_guard_conn *c)
{
	c->dropped = true;
	g->open--;
	g->dropped++;
	return c;
}

struct steer_guard_conn *steer_guard_admit(struct steer_guard *g, void *owner, uint64_t now_ns,
					   struct steer_guard_conn **self)
{
	struct steer_guard_conn *c, *victim;

	*self = NULL;
	if (g->n >= g->cap || !(c = calloc(1, sizeof(*c))))
		return NULL;
	c->owner = owner;
	c->since_ns = now_ns;
	c->index = g->n;
	g->conns[g->n++] = c;
	g->open++;
	*self = c;
	if (g->open <= g->limit)
		return NULL;
	victim = pick_victim(g, c, now_ns);
	return drop(g, victim ? victim : c);
}

void steer_guard_answering(struct steer_guard_conn *c, uint64_t now_ns)
{
	if (c && !c->answering) {
		c->answering = true;
		c->since_ns = now_ns;
	}
}

void steer_guard_idle(struct steer_guard_conn *c, uint64_t now_ns)
{
	if (c) {
		c->answering = false;
		c->since_ns = now_ns;
	}
}

void steer_guard_closed(struct steer_guard *g, struct steer_guard_conn *c)
{
	struct steer_guard_conn *last;

	if (!c)
		return;
	if (!c->dropped)
		g->open--;
	last = g->conns[--g->n];
	g->conns[c->index] = last;
	last->index = c->index;
	free(c);
}

void *steer_guard_owner(const struct steer_guard_conn *c)
{
	return c->owner;
}

size_t steer_guard_open(const struct steer_guard *g)
{
	return g->open;
}

uint64_t steer_guard_dropped(const struct steer_guard *g)
{
	return g->dropped;
}
