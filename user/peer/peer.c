// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peer.c - several routers share their request accounting: the reports this
 * router receives and what each does to the kernel, the thread, and the API;
 * the reports it sends are in send.c, the state both share in
 * peer_int.h. See peer.h for the design; the wire format is
 * proto/steer_peer.proto (protobuf-c), the kernel half steer_peer_apply
 * (bpf/steer_wire.bpf.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "peer_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "config/config.h"
#include "common/common.h"
#include "steer_peer.pb-c.h"

#define MAX_DATAGRAM 65536
#define NS_PER_MS 1000000ULL

/* ---- A hash of backends by (vip, address) ------------------------------------ */

static uint64_t key_hash(const struct steer_bk_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static struct applied *applied_find(struct applied_table *t, const struct steer_bk_key *k,
				    bool insert)
{
	size_t i, mask;

	if (insert && (t->n + 1) * 2 > t->cap) {
		struct applied_table g = { .cap = t->cap ? t->cap * 2 : 64 };

		g.e = calloc(g.cap, sizeof(*g.e));
		if (!g.e)
			return NULL;
		for (i = 0; i < t->cap; i++)
			if (t->e[i].used) {
				size_t j = key_hash(&t->e[i].key) & (g.cap - 1);

				while (g.e[j].used)
					j = (j + 1) & (g.cap - 1);
				g.e[j] = t->e[i];
				g.n++;
			}
		free(t->e);
		*t = g;
	}
	if (!t->cap)
		return NULL;
	mask = t->cap - 1;
	for (i = key_hash(k) & mask; t->e[i].used; i = (i + 1) & mask)
		if (!memcmp(&t->e[i].key, k, sizeof(*k)))
			return &t->e[i];
	if (!insert)
		return NULL;
	memset(&t->e[i], 0, sizeof(t->e[i]));
	t->e[i].used = true;
	t->e[i].key = *k;
	t->n++;
	return &t->e[i];
}

static void from_sockaddr(const struct sockaddr_storage *ss, struct steer_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->proto = STEER_IPPROTO_TCP; /* only compared with other steer_addr */
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		a->ip6[2] = htonl(0xffff);
		memcpy(&a->ip6[3], &s4->sin_addr, 4);
		a->port = s4->sin_port;
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		memcpy(a->ip6, &s6->sin6_addr, 16);
		a->port = s6->sin6_port;
	}
}

/* ---- Applying changes to the kernel ---------------------------------------- */

static void delta_add(struct steer_peer *p, uint32_t svc_id, uint32_t slot, uint32_t gen,
		      uint64_t sent, uint64_t answered, uint64_t ns_per_token)
{
	struct pending_delta *d;

	if (!sent && !answered)
		return;
	if (p->n_deltas == p->cap_deltas) {
		size_t cap = p->cap_deltas ? p->cap_deltas * 2 : 256;
		struct pending_delta *g = realloc(p->deltas, cap * sizeof(*g));

		if (!g) {
			log_error("peer: out of memory; a change of slot %u is lost", slot);
			return;
		}
		p->deltas = g;
		p->cap_deltas = cap;
	}
	d = &p->deltas[p->n_deltas];
	d->order = (uint32_t)p->n_deltas++;
	d->svc_id = svc_id;
	d->d = (struct steer_peer_delta){ .slot = slot,
					  .slot_gen = gen,
					  .sent_tokens = sent,
					  .answered_tokens = answered,
					  .ns_per_token = ns_per_token };
}

static int by_service(const void *a, const void *b)
{
	const struct pending_delta *x = a, *y = b;

	if (x->svc_id != y->svc_id)
		return x->svc_id < y->svc_id ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Apply what this pass collected: one run per STEER_PEER_BATCH changes of a
 * service, in order within each service. */
static void deltas_flush(struct steer_peer *p)
{
	struct steer_peer_batch b;
	char err[256];
	size_t i = 0, k;

	if (!p->n_deltas)
		return;
	qsort(p->deltas, p->n_deltas, sizeof(*p->deltas), by_service);
	while (i < p->n_deltas) {
		memset(&b, 0, sizeof(b));
		b.svc_id = p->deltas[i].svc_id;
		for (k = 0;
		     i < p->n_deltas && k < STEER_PEER_BATCH && p->deltas[i].svc_id == b.svc_id;
		     k++, i++)
			b.d[k] = p->deltas[i].d;
		b.n = (uint32_t)k;
		if (steer_dp_peer_apply(p->dp, &b, err, sizeof(err)) != 0) {
			pthread_mutex_lock(&p->mu);
			if (!p->st.apply_errors++)
				log_error("peer: %s", err);
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		pthread_mutex_lock(&p->mu);
		p->st.applied += b.applied;
		pthread_mutex_unlock(&p->mu);
	}
	p->n_deltas = 0;
}

/*
 * The line that says a sender's work was taken back. Without --peer-key
 * anyone can send from a new address, fall silent and so make one: other
 * senders' lines are limited to one every PEER_WARN_EVERY_NS, the routers
 * of the peer list's to STEER_PEERS_MAX as often, so that a whole fleet
 * restarting at once is still logged line by line. Every one is counted in
 * smg_steer_peer_forgotten_total all the same.
 */
static void say_forgotten(struct steer_peer *p, const struct remote *r, const char *why,
			  uint64_t total)
{
	struct steer_log_limit *l = r->configured ? &p->said_forgot_conf : &p->said_forgot_other;
	char addr[STEER_ADDR_STRLEN], more[96] = "";
	uint64_t held;

	if (!steer_log_limit_pass(l, peer_mono_ns(), PEER_WARN_EVERY_NS,
				  r->configured ? STEER_PEERS_MAX : 1, &held))
		return;
	if (held)
		snprintf(more, sizeof(more), " (%llu line(s) like it held back since the last)",
			 (unsigned long long)held);
	log_info("peer %s (router %016llx) %s; its %llu pending token(s) no longer count%s",
		 steer_addr_format(&r->from, addr, sizeof(addr)), (unsigned long long)r->router,
		 why, (unsigned long long)total, more);
}

/* Take back everything applied for one sender (silent, restarted, or giving
 * its place). */
void peer_remote_forget(struct steer_peer *p, struct remote *r, const char *why)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < r->applied.cap; i++) {
		struct applied *a = &r->applied.e[i];

		if (!a->used)
			continue;
		total += a->outstanding;
		delta_add(p, a->svc_id, a->slot, a->slot_gen, 0, a->outstanding, 0);
	}
	free(r->applied.e);
	memset(&r->applied, 0, sizeof(r->applied));
	if (r->router) {
		struct steer_peer_stat *s;

		say_forgotten(p, r, why, total);
		pthread_mutex_lock(&p->mu);
		s = peer_stat_of(p, &r->from);
		if (s)
			s->forgotten++;
		pthread_mutex_unlock(&p->mu);
	}
}

/* ---- The backends ----------------------------------------------------------- */

static const struct steer_peer_target *view_find(const struct view *v, const struct steer_bk_key *k)
{
	size_t i, mask;

	if (!v->cap)
		return NULL;
	mask = v->cap - 1;
	for (i = key_hash(k) & mask; v->index[i]; i = (i + 1) & mask) {
		const struct steer_peer_target *t = &v->t[v->index[i] - 1];

		if (steer_addr_equal(&t->vip, &k->vip) && steer_addr_equal(&t->addr, &k->backend))
			return t;
	}
	return NULL;
}

static void view_free(struct view *v)
{
	free(v->t);
	free(v->index);
	free(v->rep_sent);
	free(v->rep_answered);
	memset(v, 0, sizeof(*v));
}

static struct steer_bk_key target_key(const struct steer_peer_target *t)
{
	struct steer_bk_key k;

	memset(&k, 0, sizeof(k));
	k.vip = t->vip;
	k.backend = t->addr;
	return k;
}

/* A new list of backends: indexed; what the last reports said is kept for
 * the backends that stay. Takes t. */
static int view_build(struct view *nv, struct steer_peer_target *t, size_t n,
		      const struct view *old)
{
	size_t i, cap = 16;

	while (cap < 2 * n)
		cap *= 2;
	memset(nv, 0, sizeof(*nv));
	nv->t = t;
	nv->n = n;
	nv->cap = cap;
	nv->index = calloc(cap, sizeof(*nv->index));
	nv->rep_sent = calloc(n ? n : 1, sizeof(uint64_t));
	nv->rep_answered = calloc(n ? n : 1, sizeof(uint64_t));
	if (!nv->index || !nv->rep_sent || !nv->rep_answered) {
		view_free(nv);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct steer_bk_key k = target_key(&t[i]);
		const struct steer_peer_target *was = view_find(old, &k);
		size_t j = key_hash(&k) & (cap - 1);

		while (nv->index[j])
			j = (j + 1) & (cap - 1);
		nv->index[j] = i + 1;
		/* UINT64_MAX: never reported, so the next report includes it. */
		nv->rep_sent[i] = UINT64_MAX;
		if (was && was->slot == t[i].slot && was->slot_gen == t[i].slot_gen) {
			nv->rep_sent[i] = old->rep_sent[was - old->t];
			nv->rep_answered[i] = old->rep_answered[was - old->t];
		}
	}
	return 0;
}

/*
 * A daemon that starts on pins an earlier one left takes back what that one
 * applied for the other routers: nobody tracks it any more. Done for each
 * slot the first time this daemon maps a backend to it (a slot given to a
 * new owner starts at 0 anyway); a backend that leaves the view and comes
 * back to the same slot keeps what the senders' entries still account for.
 */
static void clear_leftovers(struct steer_peer *p)
{
	size_t i;

	for (i = 0; i < p->v.n; i++) {
		const struct steer_peer_target *t = &p->v.t[i];
		uint32_t slot = t->slot & (STEER_SLOT_IDS - 1);

		if (p->seen_gen[slot] == t->slot_gen + 1)
			continue;
		p->seen_gen[slot] = t->slot_gen + 1;
		delta_add(p, t->svc_id, t->slot, t->slot_gen, 0,
			  steer_dp_peer_pending_tokens(p->dp, t->slot), t->ns_per_token);
	}
	deltas_flush(p);
}

static void take_targets(struct steer_peer *p)
{
	struct steer_peer_target *t = NULL;
	struct view nv;
	size_t n = 0;

	pthread_mutex_lock(&p->mu);
	if (p->next_ready) {
		t = p->next_t;
		n = p->next_n;
		p->next_t = NULL;
		p->next_ready = false;
	}
	pthread_mutex_unlock(&p->mu);
	if (!t && !n)
		return;
	if (view_build(&nv, t, n, &p->v) != 0) {
		log_error("peer: out of memory; the backends stay as they were");
		return;
	}
	view_free(&p->v);
	p->v = nv;
	clear_leftovers(p);
}

/* ---- Receiving ---------------------------------------------------------------- */

static bool addr_field(const ProtobufCBinaryData *b, uint32_t port, struct steer_addr *a)
{
	if (b->len != 16 || port == 0 || port > 65535)
		return false;
	memset(a, 0, sizeof(*a));
	memcpy(a->ip6, b->data, 16);
	a->port = htons((uint16_t)port);
	a->proto = STEER_IPPROTO_TCP;
	return true;
}

/*
 * One backend of a report: the sender's cumulative counters S (sent) and A
 * (answered). What changes since its last report is applied; what it says
 * is outstanding is applied anew when this is the first report of it, when
 * this router's slot for the backend changed, or when the sender's counters
 * went back (its slot started over): what was applied before is taken back.
 */
static void apply_backend(struct steer_peer *p, struct remote *r, const struct steer_peer_target *t,
			  const struct steer_bk_key *k, uint64_t s, uint64_t a, uint64_t seq)
{
	struct applied *e = applied_find(&r->applied, k, true);
	bool fresh;

	if (!e) {
		log_error("peer: out of memory; a report of a backend is ignored");
		return;
	}
	/* A datagram overtaken by a later one: its counters are older than
	 * those applied, not a restart of the sender's slot. */
	if (e->tracked && seq < e->last_seq)
		return;
	e->last_seq = seq;
	fresh = !e->tracked;
	e->tracked = true;
	if (fresh || e->slot != t->slot || e->slot_gen != t->slot_gen || e->svc_id != t->svc_id ||
	    s < e->last_sent || a < e->last_answered) {
		delta_add(p, e->svc_id, e->slot, e->slot_gen, 0, e->outstanding, 0);
		e->svc_id = t->svc_id;
		e->slot = t->slot;
		e->slot_gen = t->slot_gen;
		e->outstanding = s > a ? s - a : 0;
		delta_add(p, t->svc_id, t->slot, t->slot_gen, e->outstanding, 0, t->ns_per_token);
	} else {
		uint64_t ds = s - e->last_sent, da = a - e->last_answered;

		if (da > e->outstanding + ds)
			da = e->outstanding + ds;
		e->outstanding += ds - da;
		delta_add(p, t->svc_id, t->slot, t->slot_gen, ds, da, t->ns_per_token);
	}
	e->last_sent = s;
	e->last_answered = a;
}

/* Every backend of the report is well formed, or none is used. */
static bool report_valid(const SmgSteer__Peer__Report *m)
{
	struct steer_addr x;
	size_t i;

	if (!m->router)
		return false;
	for (i = 0; i < m->n_backends; i++) {
		const SmgSteer__Peer__Backend *b = m->backends[i];

		if (!addr_field(&b->vip, b->vip_port, &x) || !addr_field(&b->addr, b->port, &x) ||
		    b->answered_tokens > b->sent_tokens)
			return false;
	}
	return true;
}

static void count_report(struct steer_peer *p, const struct remote *r, uint64_t lost, uint64_t late,
			 uint64_t unknown)
{
	struct steer_peer_stat *s;

	pthread_mutex_lock(&p->mu);
	s = peer_stat_of(p, &r->from);
	if (s) {
		s->received++;
		s->lost += lost;
		s->lost -= late < s->lost ? late : s->lost;
		s->router = r->router;
		s->last_ns = r->last_ns;
		s->up = true;
	}
	p->st.unknown_backends += unknown;
	pthread_mutex_unlock(&p->mu);
}

/* This router's own report, echoed back by r: one round trip (the time r
 * held it left out), in r's histogram. */
static void count_rtt(struct steer_peer *p, const struct remote *r, const SmgSteer__Peer__Report *m,
		      uint64_t now)
{
	struct steer_peer_stat *s;
	double rtt;
	size_t i;
	int b;

	for (i = 0; i < m->n_echoes; i++) {
		const SmgSteer__Peer__Echo *e = m->echoes[i];

		if (e->router != p->router)
			continue;
		/* Not one of ours (an earlier run's), or a hold longer than the
		 * whole trip: nothing to measure. */
		if (!e->sent_ns || e->sent_ns > now || e->held_ns > now - e->sent_ns)
			return;
		rtt = (double)(now - e->sent_ns - e->held_ns) / 1e9;
		pthread_mutex_lock(&p->mu);
		s = peer_stat_of(p, &r->from);
		if (s) {
			for (b = 0; b < STEER_PEER_RTT_BUCKETS; b++)
				if (rtt <= steer_peer_rtt_bounds[b])
					s->rtt_buckets[b]++;
			s->rtt_count++;
			s->rtt_sum_s += rtt;
		}
		pthread_mutex_unlock(&p->mu);
		return;
	}
}

void peer_count_rejected(struct steer_peer *p)
{
	pthread_mutex_lock(&p->mu);
	p->st.rejected++;
	pthread_mutex_unlock(&p->mu);
}

/* The sender's entry for a report it may apply, or NULL. Malformed, or from
 * more senders than the table holds: counted rejected. Refused by
 * --peer-key's rules: peer_auth_admit counts it itself. */
static struct remote *report_admitted(struct steer_peer *p, const struct steer_addr *from,
				      const SmgSteer__Peer__Report *m)
{
	struct remote *r;

	if (!m || !report_valid(m)) {
		peer_count_rejected(p);
		return NULL;
	}
	if (!peer_auth_admit(p, from, m))
		return NULL;
	r = peer_remote_of(p, from);
	if (!r)
		peer_count_rejected(p);
	return r;
}

static void handle_report(struct steer_peer *p, const struct steer_addr *from, const uint8_t *buf,
			  size_t len, uint64_t now)
{
	uint64_t unknown = 0, lost = 0, late = 0;
	SmgSteer__Peer__Report *m;
	struct remote *r;
	size_t i;

	/* --peer-key: nothing of a datagram is read before its tag is checked. */
	if (!peer_auth_verify(p, from, buf, &len))
		return;
	m = smg_steer__peer__report__unpack(NULL, len, buf);
	if (m && m->router == p->router) {
		/* This router's own report (a --peer list or a listen address
		 * that reaches itself): its work is in its kernel already. */
		pthread_mutex_lock(&p->mu);
		p->st.own_reports++;
		pthread_mutex_unlock(&p->mu);
		smg_steer__peer__report__free_unpacked(m, NULL);
		return;
	}
	r = report_admitted(p, from, m);
	if (!r) {
		if (m)
			smg_steer__peer__report__free_unpacked(m, NULL);
		return;
	}
	if (r->router && r->router != m->router && r->live) {
		/* A silent one was forgotten already. */
		if (!peer_new_router_admitted(p, r, m->router, now)) {
			smg_steer__peer__report__free_unpacked(m, NULL);
			return;
		}
	} else if (r->router && r->live && m->seq > r->next_seq)
		lost = m->seq - r->next_seq;
	else if (r->router && r->live && m->seq < r->next_seq)
		late = 1; /* counted lost when the gap was seen */
	if (r->router != m->router)
		r->next_seq = 0; /* a new router counts its sequence from its own start */
	r->router = m->router;
	if (m->seq >= r->next_seq)
		r->next_seq = m->seq + 1;
	r->last_ns = now;
	r->sent_ns = m->sent_ns;
	r->unix_ns = m->sent_unix_ns;
	r->live = true;
	count_rtt(p, r, m, now);
	for (i = 0; i < m->n_backends; i++) {
		const SmgSteer__Peer__Backend *b = m->backends[i];
		const struct steer_peer_target *t;
		struct steer_bk_key k;

		memset(&k, 0, sizeof(k));
		addr_field(&b->vip, b->vip_port, &k.vip);
		addr_field(&b->addr, b->port, &k.backend);
		t = view_find(&p->v, &k);
		if (!t) {
			unknown++;
			continue;
		}
		apply_backend(p, r, t, &k, b->sent_tokens, b->answered_tokens, m->seq);
	}
	smg_steer__peer__report__free_unpacked(m, NULL);
	count_report(p, r, lost, late, unknown);
}

static void receive_all(struct steer_peer *p, uint8_t *buf)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct steer_addr from;
		ssize_t n = recvfrom(p->fd, buf, MAX_DATAGRAM, MSG_DONTWAIT, (struct sockaddr *)&ss,
				     &sl);

		if (n < 0)
			break; /* EAGAIN, or an ICMP error of an earlier send */
		from_sockaddr(&ss, &from);
		handle_report(p, &from, buf, (size_t)n, peer_mono_ns());
	}
	deltas_flush(p);
}

/* Senders silent for the timeout, or idle long enough to free their places
 * (remotes.c). */
static void expire_remotes(struct steer_peer *p, uint64_t now, uint64_t timeout)
{
	peer_remotes_expire(p, now, timeout);
	deltas_flush(p);
}

/* ---- The thread ----------------------------------------------------------------- */

static void *peer_main(void *arg)
{
	struct steer_peer *p = arg;
	uint8_t *buf = malloc(MAX_DATAGRAM);
	uint64_t next_send = peer_mono_ns();

	if (!buf) {
		log_error("peer: out of memory; not sharing with the other routers");
		return NULL;
	}
	prctl(PR_SET_NAME, "smg-peer"); /* top -H, and the bench, tell it apart */
	while (!atomic_load(&p->stop)) {
		uint64_t now, interval, timeout;
		struct pollfd pf[2] = { { .fd = p->fd, .events = POLLIN },
					{ .fd = p->kick_fd, .events = POLLIN } };
		struct timespec ts;

		pthread_mutex_lock(&p->mu);
		interval = p->interval_ns;
		timeout = p->timeout_ns;
		pthread_mutex_unlock(&p->mu);
		peer_take_peers(p);
		take_targets(p);
		peer_auth_take(p);
		now = peer_mono_ns();
		if (now >= next_send) {
			/* Every backend again a few times per timeout: the others see
			 * this router alive even when nothing moves. */
			bool full = now - p->last_full_ns >= timeout / 4;

			/* Re-armed here too: a wake-up the ring lost delays the
			 * pushes by one interval, not for ever. */
			steer_dp_kick_rearm(p->dp);
			peer_send_reports(p, full, buf, (uint32_t)(interval / 1000));
			if (full)
				p->last_full_ns = now;
			next_send += interval;
			if (next_send <= now)
				next_send = now + interval; /* overran: do not burst */
		}
		expire_remotes(p, now, timeout);
		now = peer_mono_ns();
		ts.tv_sec = 0;
		ts.tv_nsec = next_send > now ? (long)(next_send - now) : 0;
		if (ts.tv_nsec > 100 * (long)NS_PER_MS)
			ts.tv_nsec = 100 * (long)NS_PER_MS;
		if (ppoll(pf, p->kick_rb ? 2 : 1, &ts, NULL) <= 0)
			continue;
		peer_auth_take(p); /* a key handed over during the wait: for these */
		if (pf[1].revents & POLLIN)
			peer_push_reports(p, buf, (uint32_t)(interval / 1000));
		if (pf[0].revents & POLLIN)
			receive_all(p, buf);
	}
	free(buf);
	return NULL;
}

/* ---- API ------------------------------------------------------------------------- */

/* Whether the list of peers changed. */
static bool set_peers_locked(struct steer_peer *p, const struct steer_addr *peers, size_t n,
			     uint64_t interval_ns, uint64_t timeout_ns)
{
	bool changed;

	if (n > STEER_PEERS_MAX)
		n = STEER_PEERS_MAX;
	changed = n != p->n_peers || memcmp(p->peers, peers, n * sizeof(peers[0]));
	memcpy(p->peers, peers, n * sizeof(peers[0]));
	p->n_peers = n;
	p->peers_gen += changed || !p->peers_gen; /* the first list is a change too */
	p->interval_ns = interval_ns;
	p->timeout_ns = timeout_ns;
	return changed;
}

int steer_peer_open(const struct steer_peer_opts *o, struct steer_peer **out, char *err,
		    size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = peer_to_sockaddr(&o->listen, &ss);
	struct steer_peer *p = calloc(1, sizeof(*p));
	char addr[STEER_ADDR_STRLEN];
	int rc;

	*out = NULL;
	if (!p)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	p->dp = o->dp;
	pthread_mutex_init(&p->mu, NULL);
	set_peers_locked(p, o->peers, o->n_peers, o->interval_ns, o->timeout_ns);
	if (getrandom(&p->router, sizeof(p->router), 0) != sizeof(p->router) || !p->router)
		p->router = peer_mono_ns() | 1;
	p->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (p->fd < 0 || bind(p->fd, (struct sockaddr *)&ss, sl) != 0) {
		rc = steer_seterr(err, errlen, errno, "--peer-listen %s: %s",
				  steer_addr_format(&o->listen, addr, sizeof(addr)),
				  strerror(errno));
		if (p->fd >= 0)
			close(p->fd);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return rc;
	}
	rc = peer_kick_open(p, err, errlen);
	if (!rc)
		rc = peer_auth_open(p, o->keys, err, errlen);
	if (rc) {
		ring_buffer__free(p->kick_rb);
		close(p->fd);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int steer_peer_start(struct steer_peer *p, char *err, size_t errlen)
{
	int rc = pthread_create(&p->thr, NULL, peer_main, p);

	if (rc)
		return steer_seterr(err, errlen, rc, "cannot start the peer thread: %s",
				    strerror(rc));
	p->started = true;
	return 0;
}

int steer_peer_set_targets(struct steer_peer *p, const struct steer_peer_target *t, size_t n)
{
	struct steer_peer_target *copy = malloc((n ? n : 1) * sizeof(*copy));

	if (!copy)
		return -ENOMEM;
	memcpy(copy, t, n * sizeof(*t));
	pthread_mutex_lock(&p->mu);
	free(p->next_t);
	p->next_t = copy;
	p->next_n = n;
	p->next_ready = true;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

bool steer_peer_set_peers(struct steer_peer *p, const struct steer_addr *peers, size_t n,
			  uint64_t interval_ns, uint64_t timeout_ns)
{
	bool changed;

	pthread_mutex_lock(&p->mu);
	changed = set_peers_locked(p, peers, n, interval_ns, timeout_ns);
	pthread_mutex_unlock(&p->mu);
	return changed;
}

void steer_peer_stats(struct steer_peer *p, struct steer_peer_stats *out)
{
	uint64_t now = peer_mono_ns();
	size_t i;

	pthread_mutex_lock(&p->mu);
	*out = p->st;
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < out->n; i++) {
		struct steer_peer_stat *s = &out->p[i];

		s->age_s = !s->last_ns	      ? -1
			   : now > s->last_ns ? (double)(now - s->last_ns) / 1e9
					      : 0;
	}
}

void steer_peer_stop(struct steer_peer *p)
{
	size_t i;

	if (!p)
		return;
	atomic_store(&p->stop, true);
	if (p->started)
		pthread_join(p->thr, NULL);
	close(p->fd);
	ring_buffer__free(p->kick_rb);
	for (i = 0; i < p->n_remotes; i++)
		free(p->remotes[i].applied.e);
	view_free(&p->v);
	free(p->next_t);
	free(p->deltas);
	peer_auth_free(p->auth);
	peer_auth_free(p->next_auth);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
