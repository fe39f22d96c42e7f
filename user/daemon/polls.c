// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * polls.c - smg-steerd's load polls: starting them, their results, health and
 * fast ejection, and the wait for results that every loop of the daemon runs.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon.h"

/* ---- polling ------------------------------------------------------------------------ */

static const char *poll_kind_text(enum steer_poll_kind k)
{
	switch (k) {
	case STEER_POLL_OK:
		return "ok";
	case STEER_POLL_UNIMPLEMENTED:
		return "GetLoads unimplemented";
	case STEER_POLL_UNAVAILABLE:
		return "unavailable";
	case STEER_POLL_DEADLINE:
		return "deadline exceeded";
	case STEER_POLL_INVALID:
		return "invalid response";
	case STEER_POLL_ERROR:
		return "error";
	default:
		return "none";
	}
}

static void start_poll(struct daemon *d, struct backend *b)
{
	if (b->call_pending)
		return;
	/* What is credited now is in the snapshot this call returns, and so are
	 * the requests sent and not answered yet. */
	b->inflight_at_send = 0;
	b->busy_at_send = 0;
	if (b->slot != NO_SLOT) {
		b->inflight_at_send = steer_dp_inflight_read(d->dp, b->slot);
		/* Those credits are the daemon's to drain now: their sockets no
		 * longer take them back at their first send. */
		steer_dp_inflight_mark(d->dp, b->slot);
		b->busy_at_send = steer_dp_busy_left_tokens(d->dp, b->slot, steer_dp_clock_ns());
	}
	if (steer_loads_start(d->loads, b->handle, d->cfg.timeout_ns) == 0) {
		b->call_pending = true;
		d->pending++;
	}
}

void start_polls(struct daemon *d)
{
	size_t i, j;

	for (i = 0; i < d->n_svcs; i++)
		for (j = 0; j < d->svcs[i].n; j++)
			start_poll(d, d->svcs[i].b[j]);
}

/*
 * Fast ejection, the daemon's half. The kernel stops choosing a backend once
 * STEER_FAIL_EJECT of its steered connects in a row failed (a dead worker
 * refuses thousands of connects a second; polls come once a second). Looked
 * at every wait slice (<= 100 ms) and by the main loop before each publish:
 * such a backend is kept out of the tables, so that a publish does not list
 * it and reset the kernel's count, and polled at once, so that a dead worker
 * is ejected at once (confirm_suspect). A good poll does not put it back:
 * only a connect to its traffic port does (ejects.c), whose probe moves on
 * here too.
 */
/*
 * A capacity pushback (a 429 or 503 answer, which the kernel flagged) ends at
 * its Retry-After, or at a good poll sent after it, whichever is first: the
 * flag is cleared here, every wait slice.
 */
static void check_pushback(struct daemon *d, const struct service *s, struct backend *b,
			   uint64_t coarse_now)
{
	struct steer_dp_pushback pb;

	if (b->slot == NO_SLOT)
		return;
	steer_dp_pushback(d->dp, b->slot, &pb);
	if (!pb.on || (coarse_now < pb.until_ns && b->poll_ok_sent_ns <= pb.at_ns))
		return;
	steer_dp_pushback_end(d->dp, b->slot, pb.at_ns);
	log_debug("%s: backend %s: pushback over (%s)", s->vip_str, b->cfg.addr_str,
		  coarse_now >= pb.until_ns ? "its Retry-After passed" : "a good poll");
}

void check_fast_ejections(struct daemon *d)
{
	uint64_t now = steer_monotonic_ns(), coarse_now = steer_dp_clock_ns();
	size_t i, j;

	for (i = 0; i < d->n_svcs; i++)
		for (j = 0; j < d->svcs[i].n; j++) {
			struct backend *b = d->svcs[i].b[j];

			check_pushback(d, &d->svcs[i], b, coarse_now);

			if (b->suspect) {
				eject_step(d, &d->svcs[i], b, now);
				continue;
			}
			if (b->slot == NO_SLOT || b->health == STEER_HEALTH_EJECTED ||
			    steer_dp_fails(d->dp, b->slot) < STEER_FAIL_EJECT)
				continue;
			eject_skip(d, &d->svcs[i], b, now);
			start_poll(d, b);
		}
}

/* The poll that followed fast ejection answered. Dead: ejected at once, as
 * if it had failed --unhealthy-after polls. Alive: out all the same, until
 * its traffic port takes a connect (ejects.c). */
static void confirm_suspect(struct daemon *d, const struct service *s, struct backend *b,
			    bool alive)
{
	b->ej.confirm = false;
	if (alive)
		return;
	b->health = STEER_HEALTH_EJECTED;
	b->consec_ok = 0;
	if (b->consec_fail < d->cfg.unhealthy_after)
		b->consec_fail = d->cfg.unhealthy_after;
	if (b->ej.logged)
		log_warn("%s: backend %s ejected: %d connects in a row failed and so did its poll",
			 s->vip_str, b->cfg.addr_str, STEER_FAIL_EJECT);
}

/* How much earlier than its send a good poll is dated for pushback: more than
 * a tick of the coarse clock (4 ms at HZ=250, 10 ms at HZ=100). */
#define POLL_OK_EARLY_NS (20 * NS_PER_MS)

static void observe_duration(struct service *s, uint64_t ns)
{
	double sec = (double)ns / 1e9;
	int i;

	s->poll_count++;
	s->poll_sum_s += sec;
	for (i = 0; i < STEER_POLL_BUCKETS; i++)
		if (sec <= steer_poll_bucket_bounds[i])
			s->poll_buckets[i]++;
}

/* Log a poll outcome only when it changes, never once per poll. */
static void log_poll_change(const struct service *s, struct backend *b,
			    const struct steer_loads_result *r)
{
	const char *src = r->source == STEER_SOURCE_NONE ? "probing" : steer_source_name(r->source);

	if (r->kind == STEER_POLL_UNIMPLEMENTED && !b->told_no_loads) {
		/* Once per backend: it is alive and stays in the table. */
		log_warn("%s: backend %s reports no load (%s from %s); scoring it from its live "
			 "connections, alive while %s",
			 s->vip_str, b->cfg.addr_str,
			 r->source == STEER_SOURCE_TCP ? "no gRPC GetLoads, /v1/loads or /metrics"
						       : "GetLoads unimplemented",
			 b->cfg.loads_str,
			 r->source == STEER_SOURCE_TCP ? "its traffic port accepts connections"
						       : "it answers");
		b->told_no_loads = true;
	}
	if (r->kind == b->logged_kind)
		return;
	if (r->kind == STEER_POLL_OK)
		log_info("%s: backend %s: load from %s (%s) is ok", s->vip_str, b->cfg.addr_str,
			 b->cfg.loads_str, src);
	else if (r->kind != STEER_POLL_UNIMPLEMENTED)
		log_warn("%s: backend %s: load poll of %s (%s) failed: %s%s%s", s->vip_str,
			 b->cfg.addr_str, b->cfg.loads_str, src, poll_kind_text(r->kind),
			 r->detail[0] ? ": " : "", r->detail);
	b->logged_kind = r->kind;
}

static void health_success(const struct service *s, struct backend *b, uint32_t healthy_after)
{
	b->consec_fail = 0;
	b->consec_ok++;
	if (b->health == STEER_HEALTH_UNKNOWN) {
		b->health = STEER_HEALTH_HEALTHY; /* a new backend: one good poll admits it */
		log_debug("%s: backend %s admitted", s->vip_str, b->cfg.addr_str);
	} else if (b->health == STEER_HEALTH_EJECTED && b->consec_ok >= healthy_after) {
		b->health = STEER_HEALTH_HEALTHY;
		log_info("%s: backend %s readmitted after %u good polls", s->vip_str,
			 b->cfg.addr_str, b->consec_ok);
	}
}

static void health_failure(const struct service *s, struct backend *b, uint32_t unhealthy_after)
{
	b->consec_ok = 0;
	b->consec_fail++;
	if (b->health != STEER_HEALTH_EJECTED && b->consec_fail >= unhealthy_after) {
		b->health = STEER_HEALTH_EJECTED;
		log_warn("%s: backend %s ejected after %u failed polls", s->vip_str,
			 b->cfg.addr_str, b->consec_fail);
	}
}

static void handle_result(struct daemon *d, const struct steer_loads_result *r)
{
	struct backend *b = r->tag; /* removed backends' results are never reported */
	struct service *s = b->svc;

	if (b->call_pending && d->pending)
		d->pending--;
	b->call_pending = false;
	d->cycle_results++;
	d->last_result_ns = steer_monotonic_ns();
	if (r->duration_ns > d->slowest_result_ns)
		d->slowest_result_ns = r->duration_ns;
	b->last_kind = r->kind;
	if (r->kind == STEER_POLL_OK || r->kind == STEER_POLL_UNIMPLEMENTED)
		b->source = r->source;
	if (r->kind < STEER_POLL_KINDS)
		b->polls[r->kind]++;
	/* A good poll ends a capacity pushback answered before it was sent. The
	 * kernel dates pushback on the coarse clock, which lags this one by up
	 * to a tick: dated a little early, a pushback answered just after the
	 * send is never taken as before it. */
	if (r->kind == STEER_POLL_OK || r->kind == STEER_POLL_UNIMPLEMENTED)
		b->poll_ok_sent_ns =
			r->started_ns > POLL_OK_EARLY_NS ? r->started_ns - POLL_OK_EARLY_NS : 0;
	observe_duration(s, r->duration_ns);
	log_poll_change(s, b, r);
	switch (r->kind) {
	case STEER_POLL_OK:
		b->has_snap = true;
		b->snap = r->load;
		b->snap_ns = r->started_ns + r->duration_ns;
		if (r->load.queued_uncached_tokens > 0)
			b->reports_uncached = true;
		/* The snapshot covers what had been credited when the call left,
		 * and the requests pending then: kept with it for every publish
		 * that scores it. */
		b->pending_drain = b->inflight_at_send;
		b->busy_at_snap = b->busy_at_send;
		health_success(s, b, d->cfg.healthy_after);
		break;
	case STEER_POLL_UNIMPLEMENTED:
		b->has_snap = false; /* healthy, but scored by the degradation rules */
		health_success(s, b, d->cfg.healthy_after);
		break;
	default:
		health_failure(s, b, d->cfg.unhealthy_after);
		break;
	}
	if (b->suspect && b->ej.confirm)
		confirm_suspect(d, s, b,
				r->kind == STEER_POLL_OK || r->kind == STEER_POLL_UNIMPLEMENTED);
}

/* When a cycle stops waiting for the polls still out (see STRAGGLER_QUIET_MIN_NS). */
static uint64_t stragglers_cutoff(const struct daemon *d)
{
	uint64_t quiet = 2 * d->slowest_result_ns;

	if (!d->cycle_results)
		return UINT64_MAX; /* nothing answered yet: wait for the deadline */
	return d->last_result_ns +
	       (quiet > STRAGGLER_QUIET_MIN_NS ? quiet : STRAGGLER_QUIET_MIN_NS);
}

/* A SIGHUP to act on, or a reload's parse ready to apply. */
static bool reload_pending(struct daemon *d)
{
	return reload_requested || steer_reload_ready(d->reload);
}

/*
 * Process results until the deadline, in slices so that signals are seen;
 * stop early once no call is pending or only stragglers are (when collecting
 * a cycle's results) or on a reload (when idling between cycles).
 */
void wait_results(struct daemon *d, uint64_t deadline_ns, bool until_all_done)
{
	struct steer_loads_result r;

	while (!stop_requested && (until_all_done ? d->pending > 0 : !reload_pending(d))) {
		uint64_t now = steer_monotonic_ns(), until;

		steer_discovery_step(d->disc, now); /* never waits */
		if (!until_all_done && steer_discovery_changed(d->disc))
			break; /* main() rebuilds the services, then a cycle polls them */

		if (until_all_done && stragglers_cutoff(d) < deadline_ns)
			deadline_ns = stragglers_cutoff(d);
		if (now >= deadline_ns)
			break;
		check_fast_ejections(d);
		metrics_tick(d, now);
		until = deadline_ns - now > SLICE_NS ? now + SLICE_NS : deadline_ns;
		if (steer_loads_next(d->loads, until, &r) == 1)
			handle_result(d, &r);
	}
}
