/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sim_testlib.h - what the simulator's unit tests share: a small scenario, a
 * run that says why it failed, a CSV row, and a snapshot.
 */
#ifndef STEER_SIM_TESTLIB_H
#define STEER_SIM_TESTLIB_H

#include <stdio.h>

#include "sim.h"

/* A small scenario: big enough for queues, preemptions and tails, small
 * enough for a few seconds under ASan. */
static inline void small_config(struct sim_config *c, enum sim_policy p)
{
	sim_config_defaults(c);
	c->workers = 8;
	c->requests = 20000;
	c->warmup = 2000;
	c->seed = 7;
	c->policy = p;
}

static inline int run(const struct sim_config *c, struct sim_result *r)
{
	char why[160];

	if (sim_run(c, r, why, sizeof(why))) {
		printf("# sim_run: %s\n", why);
		return -1;
	}
	return 0;
}

static inline void csv_of(const struct sim_config *c, const struct sim_result *r, char *buf,
			  size_t len)
{
	sim_csv_row(buf, len, "t", sim_policy_name(c->policy), c, r);
}

static inline struct sim_snapshot snap(double queued, double tput)
{
	struct sim_snapshot s = { .valid = true, .reports_uncached = queued > 0 };

	s.load.queued_uncached_tokens = queued;
	s.load.throughput = tput;
	s.load.ranks = 1;
	return s;
}

#endif /* STEER_SIM_TESTLIB_H */
