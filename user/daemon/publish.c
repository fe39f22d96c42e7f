// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * publish.c - smg-steerd's scoring and publishing: candidates, scores, the
 * tables, in-flight drains, steer_bkinfo and the metrics snapshot.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon.h"

/* ---- scoring and publishing ----------------------------------------------------------- */

/* Uniform in [0, 1). Every node seeds its own, so peers' phases differ. */
static double random_unit(struct daemon *d)
{
	d->rng ^= d->rng << 13;
	d->rng ^= d->rng >> 7;
	d->rng ^= d->rng << 17;
	return (double)(d->rng >> 11) / 9007199254740992.0; /* 2^53 */
}

void seed_random(struct daemon *d)
{
	if (getrandom(&d->rng, sizeof(d->rng), 0) != sizeof(d->rng))
		d->rng = steer_monotonic_ns() ^ ((uint64_t)getpid() << 32);
	if (!d->rng)
		d->rng = 0x9e3779b97f4a7c15ULL;
}

static bool is_drained(const struct daemon *d, const struct backend *b)
{
	size_t i;

	for (i = 0; i < d->n_drained; i++)
		if (steer_addr_equal(&d->drained[i], &b->cfg.addr))
			return true;
	return false;
}

/*
 * The backends of a service that go into its table: healthy and not drained.
 * When every backend is ejected, fail open: all of them (the kernel spreads
 * them), logged at each change of that state.
 */
static size_t pick_candidates(struct daemon *d, struct service *s, struct backend **c)
{
	bool drained[STEER_MAX_BACKENDS];
	size_t j, n = 0, healthy = 0, eligible = 0, unpolled = 0;
	bool fail_open;

	/* Drained backends neither count as healthy nor come back by failing open. */
	for (j = 0; j < s->n; j++) {
		drained[j] = is_drained(d, s->b[j]);
		eligible += !drained[j];
		healthy +=
			!drained[j] && s->b[j]->health == STEER_HEALTH_HEALTHY && !s->b[j]->suspect;
		unpolled += !drained[j] && s->b[j]->last_kind == STEER_POLL_NONE;
	}
	fail_open = healthy == 0 && eligible > 0;
	if (fail_open != s->fail_open) {
		/* A service that a reload just added has backends no poll has
		 * answered yet: nothing has failed, so no alarm. */
		if (fail_open && unpolled == eligible)
			log_info("%s: no backend polled yet; publishing all %zu until their first "
				 "polls",
				 s->vip_str, eligible);
		else if (fail_open)
			log_error("%s: no backend is healthy (ejected, or never polled "
				  "successfully); failing open: publishing all %zu",
				  s->vip_str, eligible);
		else if (s->fail_open_alarm)
			log_info("%s: %zu backend(s) healthy again; no longer failing open",
				 s->vip_str, healthy);
		else
			log_info("%s: %zu backend(s) healthy after their first polls", s->vip_str,
				 healthy);
		s->fail_open = fail_open;
		s->fail_open_alarm = fail_open && unpolled != eligible;
	}
	for (j = 0; j < s->n; j++) {
		struct backend *b = s->b[j];

		b->in_table = false;
		if (drained[j] || (!fail_open && (b->health != STEER_HEALTH_HEALTHY || b->suspect)))
			continue;
		c[n++] = b;
	}
	return n;
}

static bool snapshot_fresh(const struct daemon *d, const struct backend *b, uint64_t now)
{
	return b->has_snap && now - b->snap_ns <= d->cfg.max_age_ns;
}

/* Score the candidates; fills the table costs. */
static void score_service(struct daemon *d, struct service *s, struct backend **c, size_t n,
			  struct steer_dp_cost *costs, uint64_t now)
{
	struct steer_policy_input in[STEER_MAX_BACKENDS];
	struct steer_policy_score sc[STEER_MAX_BACKENDS];
	size_t k;

	if (n == 0)
		return;
	for (k = 0; k < n; k++) {
		struct backend *b = c[k];

		b->live_drain = 0;
		in[k] = (struct steer_policy_input){ 0 };
		in[k].has_snapshot = snapshot_fresh(d, b, now);
		in[k].load = b->snap;
		in[k].reports_uncached = b->reports_uncached;
		in[k].busy_at_poll = b->busy_at_snap;
		if (!in[k].has_snapshot && b->slot != NO_SLOT) {
			/* Read the credits first: the live count read after them
			 * already holds those connections. */
			b->live_drain = steer_dp_inflight_read(d->dp, b->slot);
			steer_dp_inflight_mark(d->dp, b->slot); /* drained below, not at send */
			in[k].live_conns = (uint64_t)steer_dp_live(d->dp, b->slot);
		}
	}
	steer_policy_score_all(&s->policy, in, n, sc);
	for (k = 0; k < n; k++) {
		struct backend *b = c[k];

		/* Off only when the routers exchange fast enough not to herd
		 * (--peer-phase off, docs/algorithm.md, "Several routers"). */
		if (!d->cfg.peer_no_phase)
			steer_policy_add_phase(&s->policy, &sc[k], random_unit(d));
		b->score = sc[k];
		b->in_table = true;
		b->overload = steer_policy_overload_on(&s->policy)
				      ? steer_policy_overloaded(&s->policy, &in[k])
				      : STEER_OVERLOAD_NONE;
		b->live_at_score = (uint32_t)in[k].live_conns;
		costs[k].addr = b->cfg.addr;
		/* The policy's saturated integers, as the kernel will see them. */
		costs[k].base_wait_ns = (double)sc[k].base_wait_ns;
		costs[k].ns_per_token = (double)sc[k].ns_per_token_u;
	}
}

/* Per-service buffers of one publish. */
struct publish_buf {
	struct backend *c[STEER_MAX_BACKENDS];
	struct steer_dp_cost costs[STEER_MAX_BACKENDS];
	struct steer_addr configured[STEER_MAX_BACKENDS];
	size_t n;
};

static void apply_drains(struct daemon *d, struct service *s)
{
	size_t j;

	for (j = 0; j < s->n; j++) {
		struct backend *b = s->b[j];

		if (b->slot == NO_SLOT)
			steer_dp_slot(d->dp, &s->vip, &b->cfg.addr, &b->slot);
		if (b->slot == NO_SLOT)
			continue;
		if (!b->in_table) {
			/* Out of the table nothing is credited; start clean on return. */
			steer_dp_inflight_exchange(d->dp, b->slot);
			b->pending_drain = 0;
			b->inflight_at_send = 0; /* a late result must not drain it again */
			continue;
		}
		if (b->score.mode == STEER_MODE_SNAPSHOT) {
			steer_dp_inflight_sub(d->dp, b->slot, b->pending_drain);
			/* A call still in flight read its inflight_at_send before this
			 * subtraction, so it holds what was just drained: take it out
			 * there too, or a late result would drain it a second time. */
			b->inflight_at_send = b->inflight_at_send > b->pending_drain
						      ? b->inflight_at_send - b->pending_drain
						      : 0;
			b->pending_drain = 0;
		} else {
			steer_dp_inflight_sub(d->dp, b->slot, b->live_drain);
			b->pending_drain = 0;
			b->inflight_at_send = 0; /* already covered by the live count */
		}
	}
}

/* Before the swap: each backend's overload by its poll; the new tables'
 * trees are built with it. */
static void apply_overload(struct daemon *d, struct service *s)
{
	size_t j;

	for (j = 0; j < s->n; j++) {
		struct backend *b = s->b[j];

		if (!b->in_table)
			b->overload = STEER_OVERLOAD_NONE;
		if (b->slot == NO_SLOT)
			continue;
		steer_dp_set_overloaded(d->dp, b->slot, b->overload != STEER_OVERLOAD_NONE);
		steer_dp_set_max_live(d->dp, b->slot, s->policy.overload_connections);
		if (!steer_policy_overload_on(&s->policy)) {
			struct steer_dp_pushback pb;

			steer_dp_pushback(d->dp, b->slot, &pb);
			if (pb.on) /* protection turned off by a reload */
				steer_dp_pushback_end(d->dp, b->slot, pb.at_ns);
		}
	}
}

/* A service starts or stops refusing connects for overload: one line each
 * way, at most one a minute of each (a service can flap every cycle). */
static void log_refusals(struct daemon *d, struct service *s, uint64_t now)
{
	struct steer_svc_stats st = { 0 };
	uint64_t refused, held = 0;
	bool refusing;

	if (steer_dp_service_stats(d->dp, &s->vip, &st) != 0)
		return;
	refused = st.overload_refused + st.wait_refused;
	refusing = refused != s->refused_seen;
	s->refused_seen = refused;
	if (refusing == s->refusing)
		return;
	s->refusing = refusing;
	if (!steer_log_limit_pass(&s->refusing_rl, now, 60 * NS_PER_S, 2, &held))
		return;
	if (refusing)
		log_warn("%s: refusing connects: every backend is overloaded (%llu refused so far: "
			 "%llu overloaded, %llu over the wait bound)",
			 s->vip_str, (unsigned long long)refused,
			 (unsigned long long)st.overload_refused,
			 (unsigned long long)st.wait_refused);
	else
		log_info("%s: no longer refusing connects (%llu refused so far)", s->vip_str,
			 (unsigned long long)refused);
}

static void write_bk_info(struct daemon *d, struct service *s, uint64_t now)
{
	size_t j;

	for (j = 0; j < s->n; j++) {
		struct backend *b = s->b[j];
		struct steer_bk_info *info;

		if (b->slot == NO_SLOT || !(info = steer_dp_bk_info(d->dp, b->slot)))
			continue;
		/* Out by fast ejection is out, whatever the polls say. */
		info->health = (__u8)(b->suspect ? STEER_HEALTH_EJECTED : b->health);
		info->last_poll = (__u8)b->last_kind;
		info->source = (__u8)b->source;
		info->snapshot_ns = b->has_snap ? b->snap_ns : 0;
		info->dp_ranks = b->has_snap ? b->snap.ranks : 0;
		info->updated_ns = now;
		info->mode = (__u8)(b->in_table ? b->score.mode : STEER_MODE_NONE);
		info->overload = (__u8)b->overload;
		if (!b->in_table)
			continue;
		info->queued_tokens = steer_policy_u64_sat(b->score.queued_tokens);
		info->throughput_mtps = steer_policy_u64_sat(b->score.throughput * 1000.0);
		info->work_ns = steer_policy_u64_sat(b->score.work_s * 1e9);
		info->barrier_ns = steer_policy_u64_sat(b->score.barrier_s * 1e9);
		info->phase_ns = steer_policy_u64_sat(b->score.phase_s * 1e9);
		info->kv_ppm = (__u32)(b->score.kv * 1e6);
		info->live_at_score = b->live_at_score;
		info->queued_estimated = b->score.queued_estimated;
		info->queued_pending =
			(__u32)(b->score.wire_subtracted > UINT32_MAX ? UINT32_MAX
								      : b->score.wire_subtracted);
	}
}

void publish(struct daemon *d)
{
	struct steer_dp_service *specs = calloc(d->n_svcs ? d->n_svcs : 1, sizeof(*specs));
	struct publish_buf *bufs = calloc(d->n_svcs ? d->n_svcs : 1, sizeof(*bufs));
	uint64_t now = steer_monotonic_ns();
	char err[512];
	size_t i, j;

	if (!specs || !bufs) {
		log_error("publish: out of memory");
		goto out;
	}
	d->n_drained = steer_dp_drained_list(d->dp, d->drained, STEER_MAX_DRAINED);
	for (i = 0; i < d->n_svcs; i++) {
		struct service *s = &d->svcs[i];
		struct publish_buf *pb = &bufs[i];

		pb->n = pick_candidates(d, s, pb->c);
		score_service(d, s, pb->c, pb->n, pb->costs, now);
		for (j = 0; j < s->n; j++)
			pb->configured[j] = s->b[j]->cfg.addr;
		specs[i] = (struct steer_dp_service){
			.vip = s->vip,
			.configured = pb->configured,
			.n_configured = s->n,
			.table = pb->costs,
			.n_table = pb->n,
			.credit_tokens = steer_policy_credit(&s->policy),
			.bytes_per_token = steer_bytes_per_token(s->policy.bytes_per_token),
			.ttl_ns = d->cfg.max_age_ns,
			.allow_empty = true, /* every backend drained: refuse */
			.flags = (s->fail_open ? STEER_TBL_FAIL_OPEN : 0) |
				 (s->policy.wire_step ? STEER_TBL_STEP : 0) |
				 (d->cfg.peer_push ? STEER_TBL_PEER_PUSH : 0) | /* needs --peer */
				 (d->cfg.wire_off ? STEER_TBL_WIRE_OFF : 0) |
				 (steer_policy_overload_on(&s->policy) ? STEER_TBL_OVERLOAD : 0) |
				 (s->policy.overload_least ? STEER_TBL_OVERLOAD_LEAST : 0),
			.peers = s->policy.peer_routers,
			.wait_bound_ns = s->policy.overload_wait_ns,
			/* Cache affinity: off publishes nothing of it. */
			.affinity = s->policy.affinity,
			.affinity_slack_ns = s->policy.affinity ? s->policy.affinity_slack_ns : 0,
			.affinity_idle_ns = s->policy.affinity ? s->policy.affinity_idle_ns : 0,
		};
		apply_overload(d, s);
	}
	if (steer_dp_publish(d->dp, specs, d->n_svcs, err, sizeof(err)) != 0) {
		log_error("publish failed, the previous tables stay until they expire: %s", err);
		update_metrics(d); /* polls and health go on being reported */
		goto out;
	}
	/* The new tables are in effect: this is where a cycle ends. */
	d->last_publish_ns = steer_monotonic_ns();
	d->last_publish_s = (double)(d->last_publish_ns - now) / 1e9;
	if (d->cycle_start_ns)
		d->last_cycle_s = (double)(d->last_publish_ns - d->cycle_start_ns) / 1e9;
	/* A connect still reading the old tables could credit a backend after
	 * its drain below (an ejected one after its exchange): wait them out. */
	steer_dp_settle(d->dp);
	for (i = 0; i < d->n_svcs; i++) {
		d->svcs[i].publishes++;
		apply_drains(d, &d->svcs[i]);
		write_bk_info(d, &d->svcs[i], now);
		log_refusals(d, &d->svcs[i], now);
		log_debug("%s: published %zu of %zu backends", d->svcs[i].vip_str, bufs[i].n,
			  d->svcs[i].n);
	}
	peers_update_targets(d);
	probes_update_targets(d);
	update_metrics(d);
out:
	free(specs);
	free(bufs);
}

/* Until its first real table, a service refuses connects: no SYN ever goes
 * to the virtual address. Services a previous daemon left published keep
 * their tables (adoption without a gap). */
void publish_refusing_tables(struct daemon *d)
{
	struct steer_view v;
	char err[512];
	size_t i, k;

	if (steer_dp_view(d->dp, &v, err, sizeof(err)) != 0) {
		log_warn("cannot read the current tables: %s", err);
		return;
	}
	for (i = 0; i < d->n_svcs; i++) {
		struct steer_dp_service spec = { .vip = d->svcs[i].vip,
						 .allow_empty = true,
						 .ttl_ns = d->cfg.max_age_ns };
		bool published = false;

		for (k = 0; k < v.n_services; k++)
			if (steer_addr_equal(&v.services[k].vip, &d->svcs[i].vip))
				published = v.services[k].published;
		if (published) {
			log_info("%s: adopting the published table", d->svcs[i].vip_str);
			continue;
		}
		if (steer_dp_publish_one(d->dp, &spec, err, sizeof(err)) != 0)
			log_error("%s: %s", d->svcs[i].vip_str, err);
	}
	steer_view_free(&v);
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void fill_metrics_backend(struct daemon *d, const struct service *s, const struct backend *b,
				 struct steer_metrics_backend *mb)
{
	const struct steer_slot *ctr =
		b->slot == NO_SLOT ? NULL : steer_dp_slot_counters(d->dp, b->slot);
	double inflight = ctr ? (double)steer_dp_inflight_read(d->dp, b->slot) : 0;

	snprintf(mb->vip, sizeof(mb->vip), "%s", s->vip_str);
	snprintf(mb->backend, sizeof(mb->backend), "%s", b->cfg.addr_str);
	mb->healthy = b->health == STEER_HEALTH_HEALTHY && !b->suspect; /* as steer_bkinfo */
	mb->inflight_tokens = inflight;
	mb->live_connections = ctr ? steer_dp_live(d->dp, b->slot) : 0;
	mb->steered_total = ctr ? ctr->steered + ctr->fallbacks : 0;
	memcpy(mb->polls_total, b->polls, sizeof(mb->polls_total));
	mb->source = (int)b->source;
	probes_fill_backend(d, &b->cfg.addr, mb);
	if (d->xdp_ctr && b->slot != NO_SLOT) {
		struct steer_xdp_ctr x;

		if (steer_xdp_stats_backend(d->xdp_ctr, b->slot, &x) == 0) {
			mb->xdp_packets_total = x.packets;
			mb->xdp_bytes_total = x.bytes;
			mb->xdp_new_flows_total = x.new_flows;
			mb->xdp_ended_total = x.ended;
		}
	}
	if (ctr) {
		mb->pending_bytes = steer_dp_pending_bytes(d->dp, b->slot);
		mb->pending_tokens = steer_policy_wire_tokens(&s->policy, mb->pending_bytes);
		mb->sent_bytes_total = steer_dp_sent_bytes(d->dp, b->slot);
		mb->requests_total = steer_dp_requests(d->dp, b->slot);
		uint64_t now = steer_dp_clock_ns();

		mb->busy_left_s = (double)steer_dp_busy_left_ns(d->dp, b->slot, now) / 1e9;
		mb->step_s = (double)steer_dp_step_ns(d->dp, b->slot) / 1e9;
		mb->step_left_s = (double)steer_dp_step_left_ns(d->dp, b->slot, now) / 1e9;
		mb->peer_pending_tokens = steer_dp_peer_pending_tokens(d->dp, b->slot);
	}
	if (ctr) {
		struct steer_dp_pushback pb;

		steer_dp_pushback(d->dp, b->slot, &pb);
		mb->overloaded = b->overload != STEER_OVERLOAD_NONE || pb.on ||
				 (s->policy.overload_connections &&
				  mb->live_connections >= s->policy.overload_connections);
		mb->pushbacks_total = pb.pushbacks;
		mb->server_errors_total = pb.server_errors;
	}
	if (b->in_table) {
		mb->queued_pending_tokens = b->score.wire_subtracted;
		/* As the kernel scores: credits, and the remaining busy time
		 * (with fluid-step until the later of it and the step's end). */
		mb->score_s = steer_policy_total_s(&b->score, inflight) +
			      (s->policy.wire_step && mb->step_left_s > mb->busy_left_s
				       ? mb->step_left_s
				       : mb->busy_left_s);
		mb->queued_tokens = b->score.queued_tokens;
		mb->throughput = b->score.throughput;
		mb->kv_usage = b->score.kv;
	}
}

static void fill_metrics_xdp(struct daemon *d, const struct service *s,
			     struct steer_metrics_service *ms)
{
	int id = d->xdp_ctr ? steer_dp_service_id(d->dp, &s->vip) : -1;
	struct steer_xdp_ctr x;

	if (id < 0 || steer_xdp_stats_vip(d->xdp_ctr, (uint32_t)id, &x) != 0)
		return;
	ms->xdp_packets_total = x.packets;
	ms->xdp_bytes_total = x.bytes;
	ms->xdp_new_flows_total = x.new_flows;
	ms->xdp_lru_miss_total = x.lru_miss;
}

void update_metrics(struct daemon *d)
{
	struct steer_metrics_snapshot snap = { 0 };
	size_t i, j, nb = 0;

	if (!d->metrics)
		return;
	for (i = 0; i < d->n_svcs; i++)
		nb += d->svcs[i].n;
	snap.services = calloc(d->n_svcs ? d->n_svcs : 1, sizeof(*snap.services));
	snap.backends = calloc(nb ? nb : 1, sizeof(*snap.backends));
	if (!snap.services || !snap.backends)
		goto out;
	probes_metrics(d, &snap); /* before the backends: their probe rows */
	for (i = 0; i < d->n_svcs; i++) {
		struct service *s = &d->svcs[i];
		struct steer_metrics_service *ms = &snap.services[snap.n_services++];
		struct steer_svc_stats st = { 0 };

		snprintf(ms->vip, sizeof(ms->vip), "%s", s->vip_str);
		ms->table_publishes_total = s->publishes;
		memcpy(ms->poll_buckets, s->poll_buckets, sizeof(ms->poll_buckets));
		ms->poll_count = s->poll_count;
		ms->poll_sum_s = s->poll_sum_s;
		ms->bytes_per_token = steer_bytes_per_token(s->policy.bytes_per_token);
		if (steer_dp_service_stats(d->dp, &s->vip, &st) == 0) {
			ms->fallback_connections_total = st.fallbacks;
			ms->refused_connections_total = st.refused;
			ms->overload_refused_total = st.overload_refused;
			ms->wait_refused_total = st.wait_refused;
			ms->overload_admitted_total = st.overload_admitted;
			memcpy(ms->affinity_connections_total, st.affinity,
			       sizeof(ms->affinity_connections_total));
		}
		fill_metrics_xdp(d, s, ms);
		for (j = 0; j < s->n; j++)
			fill_metrics_backend(d, s, s->b[j], &snap.backends[snap.n_backends++]);
	}
	snap.last_publish_ns = d->last_publish_ns;
	snap.last_cycle_s = d->last_cycle_s;
	snap.last_publish_s = d->last_publish_s;
	snap.healthy_within_ns = 3 * d->cfg.interval_ns;
	snap.xdp = d->xdp_ctr != NULL;
	steer_discovery_metrics(d->disc, &snap);
	peers_metrics(d, &snap);
	steer_metrics_update(d->metrics, &snap);
out:
	free(snap.peers);
	free(snap.services);
	free(snap.backends);
	free(snap.dns_names);
	free(snap.dns_entries);
}

void metrics_tick(struct daemon *d, uint64_t now_ns)
{
	if (!d->peer || now_ns - d->peer_metrics_ns < 1000 * NS_PER_MS)
		return;
	d->peer_metrics_ns = now_ns;
	update_metrics(d);
}
