// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * send.c - what this router tells the others (--peer): its reports,
 * every --peer-interval and, with --peer-push, whenever the kernel wakes the
 * thread because a request was sent or answered; and in its full reports the
 * echoes that let every router measure its round trips. The thread and the
 * receiving side are in peer.c; the wire format proto/steer_peer.proto.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "common/common.h"
#include "peer_int.h"

#define BACKENDS_PER_REPORT 16 /* ~1.1 KB a datagram: below every MTU in use */
#define ECHOES_PER_REPORT 32   /* ~0.8 KB more in a full report's first datagram */

/* ---- Sending ------------------------------------------------------------------- */

/* Reports to and from an address are counted in its row. */
struct steer_peer_stat *peer_stat_of(struct steer_peer *p, const struct steer_addr *a)
{
	size_t i;

	for (i = 0; i < p->st.n; i++)
		if (steer_addr_equal(&p->st.p[i].addr, a))
			return &p->st.p[i];
	if (p->st.n == STEER_PEER_STATS_MAX)
		return NULL;
	memset(&p->st.p[p->st.n], 0, sizeof(p->st.p[0]));
	p->st.p[p->st.n].addr = *a;
	p->st.p[p->st.n].age_s = -1;
	return &p->st.p[p->st.n++];
}

void peer_stat_drop(struct steer_peer *p, const struct steer_addr *a)
{
	size_t i;

	for (i = 0; i < p->st.n; i++)
		if (steer_addr_equal(&p->st.p[i].addr, a)) {
			p->st.p[i] = p->st.p[--p->st.n];
			return;
		}
}

static void send_datagram(struct steer_peer *p, SmgSteer__Peer__Report *m, uint8_t *buf,
			  const struct steer_addr *peers, size_t n_peers)
{
	size_t len, i;

	m->seq = ++p->seq;
	m->sent_ns = peer_mono_ns();
	peer_auth_stamp(p, m);
	/* --peer-key: the tag follows the packed report (0: none made). */
	len = peer_auth_sign(p, buf, smg_steer__peer__report__pack(m, buf));
	for (i = 0; i < n_peers; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = peer_to_sockaddr(&peers[i], &ss);
		bool ok = len && sendto(p->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&ss,
					sl) == (ssize_t)len;
		struct steer_peer_stat *s;

		pthread_mutex_lock(&p->mu);
		s = peer_stat_of(p, &peers[i]);
		if (s) {
			s->configured = true;
			if (ok)
				s->sent++;
			else
				s->send_errors++;
		}
		pthread_mutex_unlock(&p->mu);
	}
}

/*
 * Echoes of the routers this one hears, up to ECHOES_PER_REPORT starting
 * where the last full report stopped, so that each gets its round trips
 * measured however many there are.
 */
static size_t fill_echoes(struct steer_peer *p, SmgSteer__Peer__Echo *ec, SmgSteer__Peer__Echo **ep)
{
	uint64_t now = peer_mono_ns();
	size_t k = 0, i;

	for (i = 0; i < p->n_remotes && k < ECHOES_PER_REPORT; i++) {
		const struct remote *r = &p->remotes[(p->next_echo + i) % p->n_remotes];

		if (!r->live || !r->sent_ns)
			continue;
		smg_steer__peer__echo__init(&ec[k]);
		ec[k].router = r->router;
		ec[k].sent_ns = r->sent_ns;
		ec[k].held_ns = now - r->last_ns;
		ep[k] = &ec[k];
		k++;
	}
	if (p->n_remotes)
		p->next_echo = (p->next_echo + i) % p->n_remotes;
	return k;
}

/*
 * This router's counters, for every backend whose counters moved since the
 * last report (full: every backend, which also tells the others this router
 * is alive, and echoes the others' reports), in datagrams of
 * BACKENDS_PER_REPORT.
 */
void peer_send_reports(struct steer_peer *p, bool full, uint8_t *buf, uint32_t interval_us)
{
	SmgSteer__Peer__Backend bk[BACKENDS_PER_REPORT], *bp[BACKENDS_PER_REPORT];
	SmgSteer__Peer__Echo ec[ECHOES_PER_REPORT], *ep[ECHOES_PER_REPORT];
	SmgSteer__Peer__Report m = SMG_STEER__PEER__REPORT__INIT;
	struct steer_addr peers[STEER_PEERS_MAX];
	size_t n_peers, i, k = 0;
	bool sent_any = false;

	pthread_mutex_lock(&p->mu);
	n_peers = p->n_peers;
	memcpy(peers, p->peers, n_peers * sizeof(peers[0]));
	pthread_mutex_unlock(&p->mu);
	m.router = p->router;
	m.interval_us = interval_us;
	m.backends = bp;
	m.echoes = ep;
	if (full)
		m.n_echoes = fill_echoes(p, ec, ep);
	for (i = 0; i <= p->v.n; i++) {
		if (i < p->v.n) {
			const struct steer_peer_target *t = &p->v.t[i];
			/* Answered first: the sent count read after it is at least as large. */
			uint64_t a = steer_dp_answered_bytes(p->dp, t->slot) / t->bytes_per_token;
			uint64_t s = steer_dp_sent_bytes(p->dp, t->slot) / t->bytes_per_token;

			if (a > s)
				a = s;
			if (!full && s == p->v.rep_sent[i] && a == p->v.rep_answered[i])
				continue;
			p->v.rep_sent[i] = s;
			p->v.rep_answered[i] = a;
			smg_steer__peer__backend__init(&bk[k]);
			bk[k].vip.data = (uint8_t *)t->vip.ip6;
			bk[k].vip.len = 16;
			bk[k].vip_port = ntohs(t->vip.port);
			bk[k].addr.data = (uint8_t *)t->addr.ip6;
			bk[k].addr.len = 16;
			bk[k].port = ntohs(t->addr.port);
			bk[k].sent_tokens = s;
			bk[k].answered_tokens = a;
			bp[k] = &bk[k];
			k++;
			if (k < BACKENDS_PER_REPORT)
				continue;
		}
		if (!k && (sent_any || !full))
			break;
		m.n_backends = k;
		send_datagram(p, &m, buf, peers, n_peers);
		m.n_echoes = 0; /* in the first datagram only */
		sent_any = true;
		k = 0;
	}
}

/* ---- Pushing (--peer-push) ---------------------------------------------------- */

static int kick_sample(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0; /* the record only wakes the thread */
}

/*
 * The kernel says a request was sent or answered: report the backends that
 * moved now, not at the next interval. The word is re-armed before the counters are
 * read (steer_kick in bpf/steer_wire.bpf.c), so a send that comes after the
 * read writes a new record, and one that came before is in this report.
 */
void peer_push_reports(struct steer_peer *p, uint8_t *buf, uint32_t interval_us)
{
	ring_buffer__consume(p->kick_rb);
	steer_dp_kick_rearm(p->dp);
	peer_send_reports(p, false, buf, interval_us);
	pthread_mutex_lock(&p->mu);
	p->st.push_wakeups++;
	pthread_mutex_unlock(&p->mu);
}

/* The kernel's wake-ups, when the request accounting is on (it is with
 * --peer). Here, before privileges are dropped: libbpf maps the ring. */
int peer_kick_open(struct steer_peer *p, char *err, size_t errlen)
{
	int fd = steer_dp_kick_ring_fd(p->dp);

	p->kick_fd = -1;
	if (fd < 0)
		return 0;
	p->kick_rb = ring_buffer__new(fd, kick_sample, p, NULL);
	if (!p->kick_rb)
		return steer_seterr(err, errlen, errno,
				    "--peer-push: cannot map the kernel's wake-up ring: %s",
				    strerror(errno));
	p->kick_fd = fd;
	return 0;
}
