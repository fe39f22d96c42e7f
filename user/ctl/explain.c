// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * explain.c - smg-steerctl explain: the next connection's backend, computed
 * with the kernel's own selection code from steer_common.h over the counters as
 * read, and every term of every backend's score, as text or JSON.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "ctl.h"
#include "loads/loads.h"

/* ---- the kernel's decision, recomputed ----------------------------------------- */

enum decision_kind {
	DECIDE_PASSTHROUGH, /* no table: the connect goes to the address itself */
	DECIDE_SCORE,	    /* least expected wait */
	DECIDE_ROUND_ROBIN, /* the table expired */
	DECIDE_REFUSED,	    /* nothing eligible: ECONNREFUSED */
	DECIDE_OVERLOADED,  /* every backend overloaded, or the least wait over the bound,
			     * and --when-all-overloaded refuse: ECONNREFUSED */
};

/* Overload protection's verdict on the pick (STEER_TBL_OVERLOAD). */
enum over {
	OVER_NONE,
	OVER_ALL,  /* every backend overloaded (by a poll, or pushing back) */
	OVER_WAIT, /* the least expected wait is over --worker-overload-wait */
};

struct decision {
	enum decision_kind kind;
	struct steer_table *table; /* rebuilt from the view */
	struct steer_pick pick;	   /* DECIDE_SCORE */
	uint32_t rr_pos;	   /* DECIDE_ROUND_ROBIN: table position */
	bool has_next_best;
	uint32_t next_best_pos;
	uint64_t next_best_score;
	uint32_t eligible; /* table entries not drained */
	enum over over;	   /* DECIDE_SCORE or DECIDE_OVERLOADED */
};

/* The slot accessor handed to steer_select: the counters as read in the view. */
static struct steer_slot *view_slot_at(void *ctx, __u32 slot)
{
	struct steer_view_service *s = ctx;
	size_t i;

	for (i = 0; i < s->n_backends; i++)
		if (s->backends[i].slot == slot)
			return &s->backends[i].ctr;
	return NULL;
}

/* The wire accessor handed to steer_select_wire: the request accounting as read. */
static struct steer_wire *view_wire_at(void *ctx, __u32 slot)
{
	struct steer_view_service *s = ctx;
	size_t i;

	for (i = 0; i < s->n_backends; i++)
		if (s->backends[i].slot == slot)
			return &s->backends[i].wire;
	return NULL;
}

/* The time the whole explanation is computed at: the kernel's clock
 * (CLOCK_MONOTONIC_COARSE), read once when the view is read. */
static uint64_t explain_now;

/* The backend's work term in ns at explain_now, as the kernel scores it:
 * credits x ns/token plus the remaining busy time. */
static uint64_t backend_term_ns(const struct steer_view_service *s,
				const struct steer_view_backend *b)
{
	return steer_sat_add(steer_sat_mul(b->ctr.inflight_tokens, b->ns_per_token),
			     steer_busy_left(&b->wire, s->table_flags, explain_now));
}

/* The step cadence's time left until the step under way ends, ns. */
static uint64_t step_left(const struct steer_view_backend *b)
{
	return steer_until_left(b->wire.step_until_ns, explain_now);
}

/* The published table as the kernel holds it, rebuilt from the view's rows. */
static struct steer_table *rebuild_table(const struct steer_view_service *s)
{
	struct steer_table *t = calloc(1, sizeof(*t));
	uint32_t k;
	size_t i;

	if (!t)
		return NULL;
	t->expires_ns = s->expires_ns;
	t->published_ns = s->published_ns;
	t->generation = s->generation;
	t->svc_id = s->svc_id;
	t->n = s->n_table < STEER_MAX_BACKENDS ? s->n_table : STEER_MAX_BACKENDS;
	t->credit_tokens = s->credit_tokens;
	t->flags = (__u16)s->table_flags;
	t->bytes_per_token = (__u16)s->bytes_per_token;
	t->wait_bound_ns = s->wait_bound_ns;
	t->affinity = s->affinity;
	t->affinity_slack_ns = s->affinity_slack_ns;
	t->affinity_idle_ns = s->affinity_idle_ns;
	/* A row the view could not resolve stays unresolvable here too. */
	for (k = 0; k < t->n; k++)
		t->e[k].slot = STEER_NO_PICK;
	for (i = 0; i < s->n_backends; i++) {
		const struct steer_view_backend *b = &s->backends[i];
		struct steer_entry *e;

		if (b->rank < 0 || (uint32_t)b->rank >= t->n)
			continue;
		e = &t->e[b->rank];
		e->base_wait_ns = b->base_wait_ns;
		e->ns_per_token = b->ns_per_token;
		memcpy(e->ip6, b->addr.ip6, sizeof(e->ip6));
		e->port = b->addr.port;
		e->slot = b->slot;
	}
	return t;
}

static uint64_t entry_score(struct steer_view_service *s, const struct steer_table *t, uint32_t pos,
			    struct steer_slot *ctr)
{
	return steer_key_wait(
		steer_entry_key(t, &t->e[pos], ctr, view_wire_at(s, t->e[pos].slot), explain_now),
		explain_now);
}

/* The runner-up over the whole table (the kernel may not have looked). */
static void find_next_best(struct steer_view_service *s, struct decision *d)
{
	uint32_t k;

	for (k = 0; k < d->table->n; k++) {
		struct steer_slot *ctr = view_slot_at(s, d->table->e[k].slot);
		uint64_t sc;

		if (!ctr || (ctr->flags & STEER_SLOT_DRAINED))
			continue;
		d->eligible++;
		if (k == d->pick.pos)
			continue;
		sc = entry_score(s, d->table, k, ctr);
		if (!d->has_next_best || sc < d->next_best_score) {
			d->has_next_best = true;
			d->next_best_pos = k;
			d->next_best_score = sc;
		}
	}
}

/* The least key is the pick, as in the kernel (steer_choose.bpf.h): what holds
 * for it holds for every backend. */
static void judge_overload(const struct steer_view_service *s, struct decision *d)
{
	if (d->pick.score >= STEER_OVERLOAD_NS)
		d->over = OVER_ALL;
	else if (s->wait_bound_ns && d->pick.score > s->wait_bound_ns)
		d->over = OVER_WAIT;
	if (d->over != OVER_NONE && !(s->table_flags & STEER_TBL_OVERLOAD_LEAST))
		d->kind = DECIDE_OVERLOADED;
}

/* A wait as shown: without the overload mark of the key. */
static uint64_t shown_wait(uint64_t wait)
{
	return wait >= STEER_OVERLOAD_NS && wait != STEER_U64_MAX ? wait - STEER_OVERLOAD_NS : wait;
}

static int decide(const struct steer_view *v, struct steer_view_service *s, struct decision *d)
{
	memset(d, 0, sizeof(*d));
	d->pick.pos = STEER_NO_PICK;
	d->rr_pos = STEER_NO_PICK;
	if (!s->published) {
		d->kind = DECIDE_PASSTHROUGH;
		return 0;
	}
	d->table = rebuild_table(s);
	if (!d->table)
		return -ENOMEM;
	if (table_expired(v, s)) {
		/* The kernel uses the cursor's value, then advances it. */
		d->rr_pos = steer_round_robin(d->table, view_slot_at, s, s->stats.rr_cursor);
		d->kind = d->rr_pos == STEER_NO_PICK ? DECIDE_REFUSED : DECIDE_ROUND_ROBIN;
	} else {
		steer_select_at(d->table, view_slot_at, s, view_wire_at, s, explain_now, 1,
				&d->pick);
		d->kind = d->pick.found ? DECIDE_SCORE : DECIDE_REFUSED;
		if (d->kind == DECIDE_SCORE && (s->table_flags & STEER_TBL_OVERLOAD))
			judge_overload(s, d);
	}
	find_next_best(s, d);
	return 0;
}

static void decision_free(struct decision *d)
{
	free(d->table);
	d->table = NULL;
}

static const char *entry_addr(const struct steer_table *t, uint32_t pos, char *buf, size_t len)
{
	struct steer_addr a = { .port = t->e[pos].port, .proto = STEER_IPPROTO_TCP };

	memcpy(a.ip6, t->e[pos].ip6, sizeof(a.ip6));
	return steer_addr_format(&a, buf, len);
}

static const char *decision_kind_name(enum decision_kind k)
{
	switch (k) {
	case DECIDE_PASSTHROUGH:
		return "passthrough";
	case DECIDE_SCORE:
		return "least_wait";
	case DECIDE_ROUND_ROBIN:
		return "round_robin";
	case DECIDE_OVERLOADED:
		return "refused_overload";
	default:
		return "refused";
	}
}

/* Table position of the next connection's backend, or STEER_NO_PICK. */
static uint32_t decision_pos(const struct decision *d)
{
	if (d->kind == DECIDE_SCORE)
		return d->pick.pos;
	if (d->kind == DECIDE_ROUND_ROBIN)
		return d->rr_pos;
	return STEER_NO_PICK;
}

/* ---- cache affinity: explain --client ------------------------------------------ */

enum aff_case {
	AFF_CASE_OFF,	    /* the service has no affinity (or no table) */
	AFF_CASE_MISMATCH,  /* the service keys its clients by another kind */
	AFF_CASE_NO_KEY,    /* key:0, which is no key */
	AFF_CASE_UNSTEERED, /* the table expired (round robin) or the connect is refused */
	AFF_CASE_NO_MAP,    /* no steer_affin pinned, or unreadable */
	AFF_CASE_JUDGED,    /* verdict holds */
};

/* What the kernel's next connect of the client would do with its affinity
 * (steer_choose.bpf.h: affinity_probe, then affinity_stays after the pick). */
struct aff_explain {
	enum aff_case c;
	uint32_t mode;	 /* the service's enum steer_affinity */
	int map_err;	 /* AFF_CASE_NO_MAP: errno */
	bool remembered; /* steer_affin has the client */
	bool forgotten;	 /* remembered, idle past the timeout */
	struct steer_aff rec;
	uint64_t idle_ns;
	uint32_t pos;	   /* the remembered backend's table position, or STEER_NO_PICK */
	const char *gone;  /* LEFT_GONE: "drained", "ejected" or "not in the table" */
	__u64 verdict;	   /* enum steer_aff_verdict */
	__u64 stays;	   /* 1: the connect goes to pos */
	uint64_t wait_ns;  /* the remembered backend's expected wait */
	uint64_t least_ns; /* the pick's (least) wait */
	char backend[STEER_ADDR_STRLEN + 32]; /* the remembered backend, or "" */
};

/* The remembered slot's address: its table entry's, a configured backend's
 * outside the table, or the slot's number. */
static void aff_backend_name(const struct steer_view_service *s, const struct decision *d,
			     struct aff_explain *a)
{
	size_t i;

	if (a->pos != STEER_NO_PICK) {
		entry_addr(d->table, a->pos, a->backend, sizeof(a->backend));
		return;
	}
	for (i = 0; i < s->n_backends; i++)
		if (s->backends[i].slot == a->rec.slot) {
			steer_addr_format(&s->backends[i].addr, a->backend, sizeof(a->backend));
			return;
		}
	snprintf(a->backend, sizeof(a->backend), "slot %u (no backend of this service)",
		 a->rec.slot);
}

/* The remembered backend judged as the kernel judges it: found in the table
 * by its slot with the slot's owner unchanged (affinity_find), judged with
 * the least wait aside (affinity_probe), then settled against the pick's
 * wait (affinity_stays). */
static void aff_judge_known(struct steer_view_service *s, const struct decision *d,
			    struct aff_explain *a)
{
	const struct steer_table *t = d->table;
	const struct steer_entry *e = NULL;
	struct steer_slot *ctr = view_slot_at(s, a->rec.slot);
	struct steer_wire *w = view_wire_at(s, a->rec.slot);
	__u64 wait = 0;
	__u32 probe;
	uint32_t k;

	for (k = 0; k < t->n && a->pos == STEER_NO_PICK; k++)
		if (t->e[k].slot == a->rec.slot)
			a->pos = k;
	if (a->pos != STEER_NO_PICK && ctr && (uint16_t)ctr->gen == a->rec.slot_gen)
		e = &t->e[a->pos];
	probe = steer_affinity_judge(t, e, ctr, w, STEER_U64_MAX, explain_now, &wait);
	a->wait_ns = wait;
	a->stays = steer_affinity_settle(d->pick.score, t->affinity_slack_ns,
					 STEER_AFF_HAS_KEY | STEER_AFF_KNOWN, probe, wait,
					 &a->verdict);
	if (a->verdict == STEER_AFF_LEFT_GONE)
		a->gone = !e				      ? "not in the table"
			  : (ctr->flags & STEER_SLOT_DRAINED) ? "drained"
							      : "ejected";
	if (!e)
		a->pos = STEER_NO_PICK;
}

static void aff_explain_client(const struct steer_dp *dp, struct steer_view_service *s,
			       const struct decision *d, const struct ctl_client *cl,
			       struct aff_explain *a)
{
	struct steer_aff_set set;
	struct steer_aff_key key;
	char path[PATH_MAX];
	__u32 set_id, way;
	__u64 hash;
	int fd;

	memset(a, 0, sizeof(*a));
	a->pos = STEER_NO_PICK;
	a->verdict = STEER_AFF_NEW;
	a->mode = s->published ? s->affinity : STEER_AFF_OFF;
	if (a->mode == STEER_AFF_OFF) {
		a->c = AFF_CASE_OFF;
		return;
	}
	if (cl->kind != STEER_AFF_SOURCE && cl->kind != a->mode) {
		a->c = AFF_CASE_MISMATCH;
		return;
	}
	if (cl->kind == STEER_AFF_SOCKOPT && cl->client == 0) {
		a->c = AFF_CASE_NO_KEY;
		return;
	}
	if (d->kind != DECIDE_SCORE) {
		a->c = AFF_CASE_UNSTEERED;
		return;
	}
	a->least_ns = d->pick.score;
	snprintf(path, sizeof(path), "%s/%s", steer_dp_pin_dir(dp), STEER_MAP_AFFIN);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		a->c = AFF_CASE_NO_MAP;
		a->map_err = errno;
		return;
	}
	memset(&key, 0, sizeof(key));
	key.client = cl->client;
	key.svc_id = s->svc_id;
	key.kind = cl->kind;
	a->c = AFF_CASE_JUDGED;
	/* The client's set, read as the kernel's probe reads it (a read from
	 * user space renews nothing). */
	hash = steer_aff_hash(&key);
	set_id = steer_aff_set_of(hash);
	if (bpf_map_lookup_elem(fd, &set_id, &set) != 0) {
		a->c = AFF_CASE_NO_MAP;
		a->map_err = errno;
		close(fd);
		return;
	}
	way = steer_aff_way_of(&set, steer_aff_tag(hash));
	if (way >= STEER_AFFINITY_WAYS) {
		close(fd);
		return;
	}
	a->rec = set.way[way];
	close(fd);
	a->remembered = true;
	a->idle_ns = explain_now > a->rec.last_ns ? explain_now - a->rec.last_ns : 0;
	if (a->idle_ns > s->affinity_idle_ns) {
		a->forgotten = true;
		aff_backend_name(s, d, a);
		return;
	}
	aff_judge_known(s, d, a);
	aff_backend_name(s, d, a);
}

/* A duration as an operator writes it: 500ms, 10m, 3.2s, 12.345ms (three
 * decimals at most, trailing zeros dropped; minutes and hours only whole). */
static const char *fmt_dur(uint64_t ns, char *buf, size_t len)
{
	static const struct {
		uint64_t ns;
		const char *unit;
	} units[] = { { 3600000000000ULL, "h" }, { 60000000000ULL, "m" }, { 1000000000ULL, "s" },
		      { 1000000ULL, "ms" },	 { 1000ULL, "us" },	  { 1ULL, "ns" } };
	char num[48], *end;
	size_t i;

	if (ns == STEER_U64_MAX) {
		snprintf(buf, len, "saturated");
		return buf;
	}
	for (i = 0; i + 1 < sizeof(units) / sizeof(units[0]); i++)
		if (ns >= units[i].ns && (i >= 2 || ns % units[i].ns == 0))
			break;
	snprintf(num, sizeof(num), "%.3f", (double)ns / (double)units[i].ns);
	end = num + strlen(num);
	while (end > num && end[-1] == '0')
		*--end = '\0';
	if (end > num && end[-1] == '.')
		*--end = '\0';
	snprintf(buf, len, "%s%s", num, units[i].unit);
	return buf;
}

static const char *aff_leave_why(const struct aff_explain *a)
{
	switch (a->verdict) {
	case STEER_AFF_LEFT_SLACK:
		return "over the slack";
	case STEER_AFF_LEFT_GONE:
		return a->gone;
	case STEER_AFF_LEFT_OVERLOAD:
		return "overloaded";
	default:
		return "?";
	}
}

static void aff_text(const struct steer_view_service *s, const struct decision *d,
		     const struct ctl_client *cl, const struct aff_explain *a)
{
	char pick[STEER_ADDR_STRLEN], t1[32], t2[32], t3[32];

	printf("affinity (%s): ", ctl_affinity_name(cl->kind));
	switch (a->c) {
	case AFF_CASE_OFF:
		printf("affinity off%s\n",
		       s->published ? " for this service" : ": no table is published");
		return;
	case AFF_CASE_MISMATCH:
		printf("the service keys its clients by %s, not %s: a %s client is never looked "
		       "up\n",
		       ctl_affinity_name(a->mode), ctl_affinity_name(cl->kind),
		       ctl_affinity_name(cl->kind));
		return;
	case AFF_CASE_NO_KEY:
		printf("key 0 is no key: the connect is placed by least wait, not remembered\n");
		return;
	case AFF_CASE_UNSTEERED:
		printf("client %llu: not consulted: %s\n", (unsigned long long)cl->client,
		       d->kind == DECIDE_ROUND_ROBIN ? "the table expired, connects go round "
						       "robin and are not remembered"
						     : "the connect is refused");
		return;
	case AFF_CASE_NO_MAP:
		printf("client %llu: cannot read the pinned map %s: %s\n",
		       (unsigned long long)cl->client, STEER_MAP_AFFIN, strerror(a->map_err));
		return;
	case AFF_CASE_JUDGED:
		break;
	}
	entry_addr(d->table, d->pick.pos, pick, sizeof(pick));
	printf("client %llu", (unsigned long long)cl->client);
	if (cl->kind != STEER_AFF_SOCKOPT)
		printf(" (%s)", cl->value);
	if (!a->remembered) {
		printf(": not remembered: placed by least wait, %s\n", pick);
		return;
	}
	printf(" -> %s, idle %s of %s", a->backend, fmt_dur(a->idle_ns, t1, sizeof(t1)),
	       fmt_dur(s->affinity_idle_ns, t2, sizeof(t2)));
	if (a->forgotten) {
		printf(": forgotten (idle past the timeout): placed by least wait, %s\n", pick);
		return;
	}
	if (a->verdict == STEER_AFF_STAY || a->verdict == STEER_AFF_LEFT_SLACK)
		printf("; wait %s vs least %s + slack %s", fmt_dur(a->wait_ns, t1, sizeof(t1)),
		       fmt_dur(shown_wait(a->least_ns), t2, sizeof(t2)),
		       fmt_dur(s->affinity_slack_ns, t3, sizeof(t3)));
	else if (a->verdict == STEER_AFF_LEFT_OVERLOAD)
		printf("; wait %s", fmt_dur(a->wait_ns, t1, sizeof(t1)));
	if (a->stays)
		printf(": stays\n");
	else
		printf(": leaves (%s) for %s\n", aff_leave_why(a), pick);
}

static struct json_object *aff_json(const struct steer_view_service *s, const struct decision *d,
				    const struct ctl_client *cl, const struct aff_explain *a)
{
	struct json_object *o = json_object_new_object();
	char pick[STEER_ADDR_STRLEN];
	bool judged = a->c == AFF_CASE_JUDGED;
	uint32_t goes = a->stays ? a->pos : d->pick.pos;

	jadd_str(o, "mode", ctl_affinity_name(a->mode));
	jadd_str(o, "client_kind", ctl_affinity_name(cl->kind));
	jadd_u64(o, "client", cl->client);
	jadd_str(o, "client_arg", cl->arg);
	jadd_bool(o, "remembered", a->remembered);
	jadd_bool(o, "forgotten", a->forgotten);
	jadd(o, "backend", a->remembered ? json_object_new_string(a->backend) : NULL);
	jadd(o, "idle_ns", a->remembered ? json_object_new_uint64(a->idle_ns) : NULL);
	jadd_u64(o, "idle_timeout_ns", s->affinity_idle_ns);
	jadd(o, "wait_ns",
	     judged && a->remembered && !a->forgotten && a->verdict != STEER_AFF_LEFT_GONE
		     ? json_object_new_uint64(a->wait_ns)
		     : NULL);
	jadd(o, "least_wait_ns", judged ? json_object_new_uint64(shown_wait(a->least_ns)) : NULL);
	jadd_u64(o, "slack_ns", s->affinity_slack_ns);
	jadd(o, "verdict",
	     judged ? json_object_new_string(steer_aff_verdict_name(a->verdict)) : NULL);
	jadd(o, "gone", judged && a->gone ? json_object_new_string(a->gone) : NULL);
	jadd(o, "next_backend",
	     judged && goes != STEER_NO_PICK
		     ? json_object_new_string(entry_addr(d->table, goes, pick, sizeof(pick)))
		     : NULL);
	switch (a->c) {
	case AFF_CASE_OFF:
		jadd_str(o, "note", "affinity off");
		break;
	case AFF_CASE_MISMATCH:
		jadd_str(o, "error", "the service keys its clients by another kind");
		break;
	case AFF_CASE_NO_KEY:
		jadd_str(o, "note", "key 0 is no key: not remembered");
		break;
	case AFF_CASE_UNSTEERED:
		jadd_str(o, "note",
			 d->kind == DECIDE_ROUND_ROBIN ? "table expired: round robin" : "refused");
		break;
	case AFF_CASE_NO_MAP:
		jadd_str(o, "error", strerror(a->map_err));
		break;
	case AFF_CASE_JUDGED:
		break;
	}
	return o;
}

/* ---- explain, text --------------------------------------------------------------- */

/* Where a backend's queued tokens come from. The daemon estimates them in two
 * cases: the engine reports waiting requests but no token count (a snapshot),
 * or there is no load report at all (estimate and dark modes). */
static const char *queued_source(const struct steer_bk_info *info)
{
	if (!info->queued_estimated)
		return "report";
	return info->mode == STEER_MODE_SNAPSHOT ? "waiting_requests" : "live_connections";
}

static const char *queued_note(const struct steer_bk_info *info)
{
	const char *src = queued_source(info);

	if (!strcmp(src, "waiting_requests"))
		return " (estimated from waiting requests x mean prefill)";
	if (!strcmp(src, "live_connections"))
		return " (no load report: estimated from live connections x mean prefill)";
	return "";
}

/* Why the backend takes no new connection while another can, if it does not. */
static void explain_overload_text(const struct steer_view_service *s,
				  const struct steer_view_backend *b,
				  const struct steer_bk_info *info)
{
	if (!(s->table_flags & STEER_TBL_OVERLOAD))
		return;
	if (b->ctr.flags & STEER_SLOT_OVERLOADED)
		printf("    overloaded:     yes, by its last poll: %s at its bound "
		       "(--worker-overload-%s)\n",
		       info && info->overload == STEER_OVERLOAD_WAITING ? "waiting requests"
									: "KV usage",
		       info && info->overload == STEER_OVERLOAD_WAITING ? "waiting-requests"
									: "token-usage");
	else if (steer_at_max_live(&b->ctr, &b->wire))
		printf("    overloaded:     yes, %lld live connections, at its bound "
		       "(--worker-overload-connections %u)\n",
		       (long long)b->ctr.live, b->wire.max_live);
	else if (b->ctr.flags & STEER_SLOT_PUSHBACK)
		printf("    overloaded:     yes, it answered 429 or 503 (%llu so far); until a "
		       "good "
		       "poll, or %.1f s from now at most\n",
		       (unsigned long long)b->wire.pushbacks,
		       (double)steer_until_left(b->wire.pushback_until_ns, explain_now) / 1e9);
	else
		printf("    overloaded:     no\n");
}

/* The daemon's inputs to the base wait: queue, throughput, work and KV terms. */
static void explain_inputs_text(const struct steer_bk_info *info)
{
	char t[32];

	if (info->mode == STEER_MODE_NONE && info->updated_ns == 0) {
		/* Published by something that keeps no per-backend record. */
		printf("    (no record from smg-steerd for this backend: only the published costs "
		       "are known)\n");
		return;
	}
	printf("    mode:           %s (last poll: %s, %u DP ranks)\n", mode_name(info->mode),
	       poll_name(info->last_poll), info->dp_ranks);
	printf("    load source:    %s\n", steer_source_name((enum steer_source)info->source));
	printf("    queued tokens:  %llu%s\n", (unsigned long long)info->queued_tokens,
	       queued_note(info));
	if (info->queued_pending)
		printf("                    (reported %llu, less %u: this node's own unserved "
		       "request tokens when the poll left, which the kernel's busy term "
		       "counts)\n",
		       (unsigned long long)info->queued_tokens + info->queued_pending,
		       info->queued_pending);
	printf("    throughput:     %.1f tokens/s\n", (double)info->throughput_mtps / 1000.0);
	printf("    work term:      %s (queued / throughput)\n",
	       fmt_ms(info->work_ns, t, sizeof(t)));
	printf("    KV usage:       %.2f %% -> KV barrier term %s\n", (double)info->kv_ppm / 1e4,
	       fmt_ms(info->barrier_ns, t, sizeof(t)));
	if (info->phase_ns)
		printf("    phase:          %s (random anti-herding offset, --peer-routers > 1)\n",
		       fmt_ms(info->phase_ns, t, sizeof(t)));
}

/* The request bytes on this node's steered sockets to the backend. */
static void explain_wire_text(const struct steer_view_service *s,
			      const struct steer_view_backend *b)
{
	printf("    requests:       %llu sent, %llu bytes; %llu bytes (%llu tokens at %u bytes "
	       "per token) not answered yet\n",
	       (unsigned long long)b->wire.requests, (unsigned long long)b->wire.sent_bytes,
	       (unsigned long long)b->pending_bytes,
	       (unsigned long long)backend_pending_tokens(s, b),
	       steer_bytes_per_token(s->bytes_per_token));
	if (b->wire.peer_pending_tokens)
		printf("    other routers:  %llu tokens sent by them and not answered yet "
		       "(--peer; in the busy term)\n",
		       (unsigned long long)b->wire.peer_pending_tokens);
	printf("    busy until:     %.3f ms left (this node's unanswered requests at the "
	       "backend's rate; the score's busy term)\n",
	       (double)steer_busy_left(&b->wire, s->table_flags, explain_now) / 1e6);
	if (s->table_flags & STEER_TBL_STEP)
		printf("    engine step:    %.3f ms a step (streamed packets' gap); the step under "
		       "way ends in %.3f ms (in the busy term)\n",
		       (double)b->wire.step_ns / 1e6, (double)step_left(b) / 1e6);
}

static void explain_backend_text(const struct steer_dp *dp, const struct steer_view_service *s,
				 const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	char a[STEER_ADDR_STRLEN], h[32], t1[32], t2[32], t3[32];
	uint64_t inflight_ns, score;
	uint64_t busy_ns = steer_busy_left(&b->wire, s->table_flags, explain_now);

	health_text(b, info, h, sizeof(h));
	printf("  %s  slot %u, %s, ", steer_addr_format(&b->addr, a, sizeof(a)), b->slot, h);
	if (b->rank < 0) {
		printf("not in the table: not a candidate\n");
		return;
	}
	printf("rank %d%s\n", b->rank, b->drained ? " (drained: skipped)" : "");
	explain_inputs_text(info);
	explain_overload_text(s, b, info);
	printf("    base wait:      %s (published: work + barrier + phase)\n",
	       fmt_ms(b->base_wait_ns, t1, sizeof(t1)));
	explain_wire_text(s, b);
	inflight_ns = backend_term_ns(s, b);
	printf("    in-flight term: %llu credited x %llu ns/token + %.3f ms busy = %s\n",
	       (unsigned long long)b->ctr.inflight_tokens, (unsigned long long)b->ns_per_token,
	       (double)busy_ns / 1e6, fmt_ms(inflight_ns, t2, sizeof(t2)));
	score = steer_sat_add(b->base_wait_ns, inflight_ns);
	printf("    score:          %s (= %s + %s)\n", fmt_ms(score, t3, sizeof(t3)),
	       fmt_ms(b->base_wait_ns, t1, sizeof(t1)), fmt_ms(inflight_ns, t2, sizeof(t2)));
}

static void explain_scan_text(const struct decision *d)
{
	uint32_t n = d->table->n;
	char t[32];

	if (d->pick.scanned < n)
		printf("; scan stopped after %u of %u entries (early exit: the next entry's base "
		       "wait %s already reaches the best score)\n",
		       d->pick.scanned, n,
		       fmt_ms(d->table->e[d->pick.scanned].base_wait_ns, t, sizeof(t)));
	else
		printf("; scanned all %u entries\n", n);
}

static void explain_pick_text(const struct decision *d)
{
	char a[STEER_ADDR_STRLEN], b[STEER_ADDR_STRLEN], t1[32], t2[32];

	printf("next connection -> %s: lowest expected wait %s",
	       entry_addr(d->table, d->pick.pos, a, sizeof(a)),
	       fmt_ms(shown_wait(d->pick.score), t1, sizeof(t1)));
	if (d->over == OVER_ALL)
		printf(" (every backend overloaded: --when-all-overloaded least)");
	else if (d->over == OVER_WAIT)
		printf(" (over the wait bound: --when-all-overloaded least)");
	if (d->has_next_best) {
		printf(" (next best %s at %s%s%s)",
		       entry_addr(d->table, d->next_best_pos, b, sizeof(b)),
		       fmt_ms(shown_wait(d->next_best_score), t2, sizeof(t2)),
		       d->next_best_score >= STEER_OVERLOAD_NS ? ", overloaded" : "",
		       d->next_best_score == d->pick.score ? ", a tie: the earlier rank wins" : "");
	} else {
		printf(" (the only eligible backend)");
	}
	explain_scan_text(d);
}

static void explain_overloaded_text(const struct steer_view_service *s, const struct decision *d)
{
	char t1[32], t2[32];

	if (d->over == OVER_ALL)
		printf("next connection: refused (ECONNREFUSED): every backend is overloaded (KV "
		       "usage or waiting requests at their bound, or pushing back with 429/503); "
		       "the least bad would wait %s\n",
		       fmt_ms(shown_wait(d->pick.score), t1, sizeof(t1)));
	else
		printf("next connection: refused (ECONNREFUSED): the lowest expected wait %s is "
		       "over "
		       "the bound %s (--worker-overload-wait)\n",
		       fmt_ms(d->pick.score, t1, sizeof(t1)),
		       fmt_ms(s->wait_bound_ns, t2, sizeof(t2)));
}

static void explain_decision_text(const struct steer_view *v, const struct steer_view_service *s,
				  const struct decision *d)
{
	char a[STEER_ADDR_STRLEN];
	uint32_t drained = d->table ? d->table->n - d->eligible : 0;

	switch (d->kind) {
	case DECIDE_PASSTHROUGH:
		printf("next connection -> %s itself: no table is published for it, so the "
		       "kernel does not steer it\n",
		       steer_addr_format(&s->vip, a, sizeof(a)));
		break;
	case DECIDE_SCORE:
		explain_pick_text(d);
		break;
	case DECIDE_ROUND_ROBIN:
		printf("next connection -> %s: round robin, the table EXPIRED %.1f s ago "
		       "(cursor %llu -> rank %u of %u; scores are not used)\n",
		       entry_addr(d->table, d->rr_pos, a, sizeof(a)),
		       ns_to_s(mono_diff(v->now_ns, s->expires_ns)),
		       (unsigned long long)s->stats.rr_cursor, d->rr_pos, d->table->n);
		break;
	case DECIDE_REFUSED:
		printf("next connection: refused (ECONNREFUSED): no eligible backend (%u in the "
		       "table, %u of them drained)\n",
		       d->table->n, drained);
		break;
	case DECIDE_OVERLOADED:
		explain_overloaded_text(s, d);
		break;
	}
}

static void explain_text(const struct steer_dp *dp, const struct steer_view *v,
			 const struct steer_view_service *s, const struct decision *d,
			 const struct ctl_client *cl, const struct aff_explain *a)
{
	char vip[STEER_ADDR_STRLEN];
	size_t i;

	printf("service %s\n", steer_addr_format(&s->vip, vip, sizeof(vip)));
	print_table_state(v, s);
	if (s->table_flags & STEER_TBL_PEER_PUSH)
		printf("  peer push: on (each request sent or answered is reported to the other "
		       "routers at once)\n");
	if (s->table_flags & STEER_TBL_STEP)
		printf("  score = base wait (queued work + KV barrier) + credited tokens x ns per "
		       "token + busy time left (the later of busy-until and the engine step's "
		       "end)\n\n");
	else
		printf("  score = base wait (queued work + KV barrier) + credited tokens x ns per "
		       "token + busy time left (busy-until estimate)\n\n");
	for (i = 0; i < s->n_backends; i++)
		explain_backend_text(dp, s, &s->backends[i]);
	if (s->n_backends == 0)
		printf("  (no configured backends)\n");
	printf("\n");
	explain_decision_text(v, s, d);
	if (cl->arg)
		aff_text(s, d, cl, a);
}

/* ---- explain, JSON ---------------------------------------------------------------- */

static struct json_object *json_backend_explain(const struct steer_dp *dp,
						const struct steer_view_service *s,
						const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	struct json_object *o = json_backend_status(dp, s, b);
	bool ranked = b->rank >= 0;
	uint64_t work = b->ctr.inflight_tokens;
	uint64_t inflight_ns = backend_term_ns(s, b);

	jadd_u64(o, "queued_tokens", info->queued_tokens);
	jadd_bool(o, "queued_estimated", info->queued_estimated != 0);
	jadd_str(o, "queued_from", queued_source(info));
	jadd_u64(o, "queued_reported_tokens", info->queued_tokens + info->queued_pending);
	jadd_u64(o, "queued_pending_tokens", info->queued_pending);
	jadd_double(o, "throughput_tokens_per_s", (double)info->throughput_mtps / 1000.0);
	jadd_u64(o, "work_ns", info->work_ns);
	jadd_u64(o, "kv_ppm", info->kv_ppm);
	jadd_u64(o, "barrier_ns", info->barrier_ns);
	jadd_u64(o, "phase_ns", info->phase_ns);
	jadd_u64(o, "dp_ranks", info->dp_ranks);
	jadd(o, "inflight_ns", ranked ? json_object_new_uint64(inflight_ns) : NULL);
	jadd_u64(o, "work_tokens", work);
	jadd_u64(o, "busy_ns", steer_busy_left(&b->wire, s->table_flags, explain_now));
	jadd_u64(o, "step_ns", b->wire.step_ns);
	jadd_u64(o, "step_left_ns", step_left(b));
	jadd(o, "score_ns",
	     ranked ? json_object_new_uint64(steer_sat_add(b->base_wait_ns, inflight_ns)) : NULL);
	return o;
}

static void json_entry_ref(struct json_object *o, const char *prefix, const struct decision *d,
			   uint32_t pos)
{
	char key[64], a[STEER_ADDR_STRLEN];

	snprintf(key, sizeof(key), "%sbackend", prefix);
	jadd_str(o, key, entry_addr(d->table, pos, a, sizeof(a)));
	snprintf(key, sizeof(key), "%srank", prefix);
	jadd_u64(o, key, pos);
	snprintf(key, sizeof(key), "%sslot", prefix);
	jadd_u64(o, key, d->table->e[pos].slot);
}

static struct json_object *json_decision(const struct steer_view_service *s,
					 const struct decision *d)
{
	struct json_object *o = json_object_new_object();
	uint32_t pos = decision_pos(d);

	jadd_str(o, "kind", decision_kind_name(d->kind));
	if (pos != STEER_NO_PICK)
		json_entry_ref(o, "", d, pos);
	else
		jadd(o, "backend", NULL);
	if (d->kind == DECIDE_SCORE || d->kind == DECIDE_OVERLOADED) {
		jadd_u64(o, "score_ns", shown_wait(d->pick.score));
		jadd_str(o, "overload",
			 d->over == OVER_ALL	? "all_overloaded"
			 : d->over == OVER_WAIT ? "over_wait_bound"
						: "none");
	}
	if (d->kind == DECIDE_SCORE) {
		jadd_u64(o, "scanned", d->pick.scanned);
		jadd_bool(o, "early_exit", d->pick.scanned < d->table->n);
	}
	if (d->kind == DECIDE_ROUND_ROBIN)
		jadd_u64(o, "rr_cursor", s->stats.rr_cursor);
	if (d->kind == DECIDE_SCORE && d->has_next_best) {
		json_entry_ref(o, "next_best_", d, d->next_best_pos);
		jadd_u64(o, "next_best_score_ns", shown_wait(d->next_best_score));
	}
	if (d->table) {
		jadd_u64(o, "entries", d->table->n);
		jadd_u64(o, "eligible", d->eligible);
	}
	if (d->kind == DECIDE_REFUSED || d->kind == DECIDE_OVERLOADED)
		jadd_str(o, "error", "ECONNREFUSED");
	return o;
}

static int explain_json(const struct steer_dp *dp, const struct steer_view *v,
			const struct steer_view_service *s, const struct decision *d,
			const struct ctl_client *cl, const struct aff_explain *a)
{
	struct json_object *root = json_object_new_object(), *bks = json_object_new_array();
	size_t i;

	jadd_addr(root, "vip", &s->vip);
	jadd_u64(root, "svc_id", s->svc_id);
	json_table_state(root, v, s);
	jadd_u64(root, "rr_cursor", s->stats.rr_cursor);
	jadd_str(root, "estimator",
		 (s->table_flags & STEER_TBL_WIRE_OFF) ? "off"
		 : (s->table_flags & STEER_TBL_STEP)   ? "fluid-step"
						       : "fluid");
	jadd(root, "peer_push", json_object_new_boolean(!!(s->table_flags & STEER_TBL_PEER_PUSH)));
	jadd_u64(root, "now_ns", explain_now);
	for (i = 0; i < s->n_backends; i++)
		json_object_array_add(bks, json_backend_explain(dp, s, &s->backends[i]));
	jadd(root, "backends", bks);
	jadd(root, "next_connection", json_decision(s, d));
	if (cl->arg)
		jadd(root, "affinity", aff_json(s, d, cl, a));
	return json_print_and_free(root);
}

static void print_known_services(const struct steer_view *v)
{
	char a[STEER_ADDR_STRLEN];
	size_t i;

	if (v->n_services == 0) {
		fprintf(stderr, "%s: no service is configured\n", prog);
		return;
	}
	fprintf(stderr, "%s: configured services:", prog);
	for (i = 0; i < v->n_services; i++)
		fprintf(stderr, " %s", steer_addr_format(&v->services[i].vip, a, sizeof(a)));
	fprintf(stderr, "\n");
}

static int explain_service(const struct ctl *c, const struct steer_dp *dp,
			   const struct steer_view *v, struct steer_view_service *s,
			   const struct ctl_client *cl)
{
	struct aff_explain a;
	struct decision d;
	int rc = EXIT_OK;

	if (decide(v, s, &d) != 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_ERROR;
	}
	memset(&a, 0, sizeof(a));
	if (cl->arg)
		aff_explain_client(dp, s, &d, cl, &a);
	if (c->output == OUTPUT_JSON)
		rc = explain_json(dp, v, s, &d, cl, &a) == 0 ? EXIT_OK : EXIT_ERROR;
	else
		explain_text(dp, v, s, &d, cl, &a);
	/* A client the service never looks up, or a map not read: an error. */
	if (cl->arg && (a.c == AFF_CASE_MISMATCH || a.c == AFF_CASE_NO_MAP))
		rc = EXIT_ERROR;
	decision_free(&d);
	return rc;
}

int cmd_explain(const struct ctl *c, struct steer_dp *dp)
{
	struct steer_view_service *s;
	struct steer_view v;
	int rc;

	if (read_view(dp, &v) != 0)
		return EXIT_ERROR;
	explain_now = steer_dp_clock_ns();
	s = find_service(&v, &c->target);
	if (!s) {
		fprintf(stderr, "%s: %s is not a virtual address of any service at %s\n", prog,
			c->target_str, steer_dp_pin_dir(dp));
		print_known_services(&v);
		rc = EXIT_ERROR;
	} else {
		rc = explain_service(c, dp, &v, s, &c->client);
	}
	steer_view_free(&v);
	return rc;
}
