// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * probes.c - smg-steerd's side of the step probe (--step-probe;
 * user/probe/probe.c does the work on its own thread): start and stop, the
 * backends after each publish, reloads, /metrics.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

static int probe_start(struct daemon *d, const struct steer_config *c, char *err, size_t errlen)
{
	if (steer_probe_start(d->dp, c->step_probe_path, c->step_probe_body, &d->probe, err,
			      errlen))
		return -1;
	log_info("step probe: a streaming POST %s on every backend shows its engine's steps",
		 c->step_probe_path);
	probes_update_targets(d);
	return 0;
}

/* After the first publish: the backends have their slots. No privileges
 * needed: the probes are plain TCP connections to the backends. */
int probes_start(struct daemon *d, char *err, size_t errlen)
{
	if (!d->cfg.step_probe_path[0])
		return 0;
	return probe_start(d, &d->cfg, err, errlen);
}

/* A backend's probe: where its stream's packets go, and its bearer token
 * (borrowed from d->cfg; the probe thread copies it). */
static struct steer_probe_target probe_target(const struct daemon *d,
					      const struct slotted_backend *sb)
{
	return (struct steer_probe_target){ .addr = sb->b->cfg.addr,
					    .svc_id = sb->svc_id,
					    .slot = sb->b->slot,
					    .slot_gen = sb->slot_gen,
					    .token = backend_token(&d->cfg, &sb->b->cfg) };
}

/* Every backend with a slot: each gets a probe. */
void probes_update_targets(struct daemon *d)
{
	struct slotted_backend *sb;
	struct steer_probe_target *t;
	size_t i, n;

	if (!d->probe)
		return;
	sb = slotted_backends(d, &n);
	t = calloc(n ? n : 1, sizeof(*t));
	for (i = 0; sb && t && i < n; i++)
		t[i] = probe_target(d, &sb[i]);
	if (!sb || !t || steer_probe_set_targets(d->probe, t, n) != 0)
		log_error("step probe: out of memory; the backends it probes stay as they were");
	free(sb);
	free(t); /* only borrowed pointers to the tokens: nothing to wipe */
}

/* A reload turns the probe on or off, or changes what it sends. */
void probes_reload(struct daemon *d, const struct steer_config *next)
{
	char err[256];

	if (next->step_probe_path[0] && next->wire_off) {
		/* --wire-estimator off was kept (a restart attaches the programs) */
		log_warn("reload: the step probe needs the request accounting, which stays off "
			 "until a restart; no probe");
		probes_stop(d);
		return;
	}
	if (!next->step_probe_path[0]) {
		if (d->probe)
			log_info("reload: step probe off");
		probes_stop(d);
		return;
	}
	if (!d->probe) {
		if (probe_start(d, next, err, sizeof(err)))
			log_error("reload: %s; running without the step probe", err);
		return;
	}
	if (steer_probe_set_request(d->probe, next->step_probe_path, next->step_probe_body))
		log_error("reload: step probe: out of memory; it sends what it sent");
}

/* /metrics: the node's counters, and the statistics the backends' rows are
 * filled from (probes_fill_backend). */
void probes_metrics(struct daemon *d, struct steer_metrics_snapshot *snap)
{
	if (!d->probe)
		return;
	if (!d->probe_stats)
		d->probe_stats = malloc(sizeof(*d->probe_stats));
	if (!d->probe_stats)
		return;
	steer_probe_stats(d->probe, d->probe_stats);
	snap->probes_on = true;
	snap->probe_applied_total = d->probe_stats->applied;
	snap->probe_apply_errors_total = d->probe_stats->apply_errors;
}

void probes_fill_backend(struct daemon *d, const struct steer_addr *addr,
			 struct steer_metrics_backend *mb)
{
	const struct steer_probe_stats *st = d->probe_stats;
	size_t i;

	for (i = 0; d->probe && st && i < st->n; i++) {
		if (!steer_addr_equal(&st->p[i].addr, addr))
			continue;
		mb->probe_streaming = st->p[i].streaming;
		mb->probe_requests_total = st->p[i].starts;
		mb->probe_failures_total = st->p[i].failures;
		mb->probe_steps_total = st->p[i].packets;
		return;
	}
}

void probes_stop(struct daemon *d)
{
	steer_probe_stop(d->probe);
	d->probe = NULL;
	free(d->probe_stats);
	d->probe_stats = NULL;
}
