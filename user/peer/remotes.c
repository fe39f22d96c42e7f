// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * remotes.c - the routers that report to this one, by address (struct
 * remote, peer_int.h): who gets a place in the table and who waits, when a
 * place is freed, and when a new router id at an address replaces the old
 * one. What a report does to the kernel is peer.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "peer_int.h"

/*
 * remotes has STEER_PEER_STATS_MAX places, one per address that reports.
 * The routers of the peer list (--peer and --peer-dns, the thread's conf:
 * at most STEER_PEERS_MAX) always find one: other senders may hold at most
 * STEER_PEER_STATS_MAX - n_conf. Without --peer-key any address can send,
 * so a place is never held for ever: an entry goes remote_idle_ns after its
 * sender's last report (peer_remotes_expire), and a new sender that finds no
 * room takes the place of the other sender idle longest, once that one's
 * work is already taken back (silent for --peer-timeout: evicting it loses
 * nothing). When every other sender still reports, the new one is refused,
 * with a warning at most every PEER_WARN_EVERY_NS: a router that reports
 * keeps its place and its work, rather than losing them to whoever sends
 * from the most addresses. The routers an operator listed never wait;
 * anyone else waits until a place frees, and the warning says how to keep
 * forgers out.
 */

static bool is_configured(const struct steer_peer *p, const struct steer_addr *a)
{
	size_t i;

	for (i = 0; i < p->n_conf; i++)
		if (steer_addr_equal(&p->conf[i], a))
			return true;
	return false;
}

struct remote *peer_remote_find(struct steer_peer *p, const struct steer_addr *from)
{
	size_t i;

	for (i = 0; i < p->n_remotes; i++)
		if (steer_addr_equal(&p->remotes[i].from, from))
			return &p->remotes[i];
	return NULL;
}

/*
 * How long an entry outlives its sender's last report: its work is taken
 * back after --peer-timeout, and the entry stays PEER_REPORT_TTL_NS (30 s)
 * more, the age past which --peer-key refuses any report as stale: until
 * then the entry still tells a replay of the silent router's last reports,
 * at its own address, from a new one (peer_auth_admit); after it, every
 * recording of them is stale anyway. Without a key it serves nothing more,
 * and one rule does for both.
 */
static uint64_t remote_idle_ns(const struct steer_peer *p)
{
	return p->conf_timeout_ns + PEER_REPORT_TTL_NS;
}

/* Silent for --peer-timeout: its work is taken back, it is reported down. */
void peer_remote_silence(struct steer_peer *p, struct remote *r)
{
	struct steer_peer_stat *s;

	peer_remote_forget(p, r, "fell silent");
	r->live = false;
	pthread_mutex_lock(&p->mu);
	s = peer_stat_of(p, &r->from);
	if (s)
		s->up = false;
	pthread_mutex_unlock(&p->mu);
}

/* Entry i gone: its work taken back if it still counts, its metrics row
 * with it unless reports go to that address; the last entry takes its place. */
static void remote_drop(struct steer_peer *p, size_t i, const char *why)
{
	struct remote *r = &p->remotes[i];

	if (r->live)
		peer_remote_forget(p, r, why);
	free(r->applied.e);
	if (!r->configured) {
		pthread_mutex_lock(&p->mu);
		peer_stat_drop(p, &r->from);
		pthread_mutex_unlock(&p->mu);
	}
	*r = p->remotes[--p->n_remotes];
}

/* Whether a has been idle longer than b: silent first, then heard longer ago. */
static bool idle_before(const struct remote *a, const struct remote *b)
{
	if (a->live != b->live)
		return !a->live;
	return a->last_ns < b->last_ns;
}

/* The entry whose place a new sender takes, or SIZE_MAX: of the senders not
 * in the peer list, the one idle longest whose work is taken back already;
 * for a router of the list, failing that, the one heard from longest ago. */
static size_t remote_victim(const struct steer_peer *p, bool for_configured)
{
	size_t i, v = SIZE_MAX;

	for (i = 0; i < p->n_remotes; i++) {
		const struct remote *r = &p->remotes[i];

		if (r->configured || (r->live && !for_configured))
			continue;
		if (v == SIZE_MAX || idle_before(r, &p->remotes[v]))
			v = i;
	}
	return v;
}

static size_t remotes_unconfigured(const struct steer_peer *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->n_remotes; i++)
		n += !p->remotes[i].configured;
	return n;
}

static void warn_full(struct steer_peer *p, const struct steer_addr *from)
{
	char addr[STEER_ADDR_STRLEN];
	uint64_t held;

	if (!steer_log_limit_pass(&p->warn_full, peer_mono_ns(), PEER_WARN_EVERY_NS, 1, &held))
		return;
	log_warn("peer: ignored a report from %s: the other %zu senders still report, and %zu "
		 "place(s) are kept for the routers of --peer and --peer-dns (%d in all; without "
		 "--peer-key anyone who reaches --peer-listen can take the others); %llu more "
		 "ignored since the last warning",
		 steer_addr_format(from, addr, sizeof(addr)), remotes_unconfigured(p), p->n_conf,
		 STEER_PEER_STATS_MAX, (unsigned long long)held);
}

/* The sender's entry, made when missing; NULL (warned of) when there is no
 * place for it. */
struct remote *peer_remote_of(struct steer_peer *p, const struct steer_addr *from)
{
	struct remote *r = peer_remote_find(p, from);
	bool conf;
	size_t v;

	if (r)
		return r;
	conf = is_configured(p, from);
	if (p->n_remotes == STEER_PEER_STATS_MAX ||
	    (!conf && remotes_unconfigured(p) + p->n_conf >= STEER_PEER_STATS_MAX)) {
		v = remote_victim(p, conf);
		if (v == SIZE_MAX) {
			warn_full(p, from);
			return NULL;
		}
		remote_drop(p, v, "gave its place to a router of --peer or --peer-dns");
	}
	r = &p->remotes[p->n_remotes++];
	memset(r, 0, sizeof(*r));
	r->from = *from;
	r->configured = conf;
	return r;
}

/*
 * The thread's copy of the peer list and timeout, taken when they change:
 * each entry and metrics row learns whether its address is listed, and a
 * row whose address is neither listed nor reporting goes.
 */
void peer_take_peers(struct steer_peer *p)
{
	size_t i;

	pthread_mutex_lock(&p->mu);
	p->conf_timeout_ns = p->timeout_ns;
	if (p->conf_gen == p->peers_gen) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	p->conf_gen = p->peers_gen;
	p->n_conf = p->n_peers;
	memcpy(p->conf, p->peers, p->n_peers * sizeof(p->peers[0]));
	for (i = 0; i < p->st.n;) {
		struct steer_peer_stat *s = &p->st.p[i];

		s->configured = is_configured(p, &s->addr);
		if (!s->configured && !peer_remote_find(p, &s->addr)) {
			peer_stat_drop(p, &s->addr);
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->n_remotes; i++)
		p->remotes[i].configured = is_configured(p, &p->remotes[i].from);
}

/*
 * A new router id at the address of a router that still reports. With
 * --peer-key it is signed, and newer than the old router's last report
 * (peer_auth_admit): the same router restarted, whose predecessor's work is
 * taken back at once. Without a key anyone can send from that address, and
 * taking back a live router's work on the word of one datagram would let a
 * forger erase it: the new id is refused until the old one has been silent
 * for --peer-timeout, after which its work would be taken back anyway
 * (peer_remotes_expire). A genuine restart is picked up at most that much
 * later, its first report applied whole (its counters are cumulative); a
 * forgery changes nothing while the router it names reports. False:
 * refused, counted rejected, and warned of at most every PEER_WARN_EVERY_NS.
 */
bool peer_new_router_admitted(struct steer_peer *p, struct remote *r, uint64_t router, uint64_t now)
{
	char addr[STEER_ADDR_STRLEN];
	uint64_t held;

	if (p->auth) {
		peer_remote_forget(p, r, "restarted");
		return true;
	}
	if (now - r->last_ns > p->conf_timeout_ns) {
		peer_remote_silence(p, r);
		return true;
	}
	peer_count_rejected(p);
	if (steer_log_limit_pass(&p->warn_new_id, now, PEER_WARN_EVERY_NS, 1, &held))
		log_warn(
			"peer: ignored a report from %s: router %016llx, while router %016llx "
			"still reports from there (without --peer-key a new router id at an "
			"address counts only once the old one has been silent for --peer-timeout); "
			"%llu more ignored since the last warning",
			steer_addr_format(&r->from, addr, sizeof(addr)), (unsigned long long)router,
			(unsigned long long)r->router, (unsigned long long)held);
	return false;
}

/* Senders silent for the timeout: their work is taken back; idle for
 * remote_idle_ns: their places are freed. */
void peer_remotes_expire(struct steer_peer *p, uint64_t now, uint64_t timeout)
{
	size_t i = 0;

	while (i < p->n_remotes) {
		struct remote *r = &p->remotes[i];
		uint64_t idle = now > r->last_ns ? now - r->last_ns : 0;

		if (r->live && idle > timeout)
			peer_remote_silence(p, r);
		if (!r->live && idle > remote_idle_ns(p)) {
			remote_drop(p, i, NULL);
			continue; /* the last entry moved to i */
		}
		i++;
	}
}
