// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peers.c - smg-steerd's side of sharing the request accounting with
 * the other routers (--peer; user/peer/peer.c does the work on its own thread):
 * start and stop, the backends after each publish, the routers --peer-dns
 * names resolve to, reloads, /metrics.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

/* Before privileges are dropped: the socket is bound here. The --peer
 * addresses only: --peer-dns names are looked up later (peers_follow). */
int peers_open(struct daemon *d, char *err, size_t errlen)
{
	struct steer_peer_opts o = { .dp = d->dp,
				     .listen = d->cfg.peer_listen,
				     .peers = d->cfg.peers,
				     .n_peers = d->cfg.n_peers,
				     .interval_ns = d->cfg.peer_interval_ns,
				     .timeout_ns = d->cfg.peer_timeout_ns,
				     .keys = d->cfg.peer_keys };

	if (!steer_config_peers_on(&d->cfg))
		return 0;
	return steer_peer_open(&o, &d->peer, err, errlen);
}

/* Hands the peer thread cfg's routers (its --peer addresses and what its
 * --peer-dns names resolve to now), interval and timeout; logs a change of
 * routers. */
static void peers_set(struct daemon *d, const struct steer_config *cfg)
{
	struct steer_addr now[STEER_PEERS_MAX];
	size_t n = steer_discovery_peers(d->disc, cfg, now);

	if (steer_peer_set_peers(d->peer, now, n, cfg->peer_interval_ns, cfg->peer_timeout_ns))
		log_info("peer: reporting to %zu router(s)%s", n,
			 cfg->n_peer_dns ? " (--peer and --peer-dns)" : "");
}

/* A --peer-dns name's addresses changed (discovery_apply). */
void peers_follow(struct daemon *d)
{
	if (d->peer && d->cfg.n_peer_dns)
		peers_set(d, &d->cfg);
}

/* The thread, once the first backends are known (publish_refusing_tables). */
int peers_start(struct daemon *d, char *err, size_t errlen)
{
	if (!d->peer)
		return 0;
	peers_update_targets(d);
	if (steer_peer_start(d->peer, err, errlen))
		return -1;
	log_info("sharing request accounting with %zu router(s)%s every %.3g ms%s; reports arrive "
		 "at %s (UDP)%s%s",
		 d->cfg.n_peers, d->cfg.n_peer_dns ? " and those --peer-dns names give" : "",
		 (double)d->cfg.peer_interval_ns / 1e6,
		 d->cfg.peer_push ? " and at each request (--peer-push)" : "",
		 d->cfg.peer_listen_str,
		 d->cfg.peer_keys ? ", signed and verified with the key of " : "",
		 d->cfg.peer_keys ? d->cfg.peer_key_file : "");
	return 0;
}

/* Every backend with a slot, as the peer thread maps the others' reports. */
void peers_update_targets(struct daemon *d)
{
	struct slotted_backend *sb;
	struct steer_peer_target *t;
	size_t i, n;

	if (!d->peer)
		return;
	sb = slotted_backends(d, &n);
	t = calloc(n ? n : 1, sizeof(*t));
	for (i = 0; sb && t && i < n; i++) {
		const struct backend *b = sb[i].b;

		t[i] = (struct steer_peer_target){
			.vip = sb[i].s->vip,
			.addr = b->cfg.addr,
			.svc_id = sb[i].svc_id,
			.slot = b->slot,
			.slot_gen = sb[i].slot_gen,
			.bytes_per_token = steer_bytes_per_token(sb[i].s->policy.bytes_per_token),
			.ns_per_token = b->in_table ? b->score.ns_per_token_u : 0,
		};
	}
	if (!sb || !t || steer_peer_set_targets(d->peer, t, n) != 0)
		log_error("peer: out of memory; the backends it knows stay as they were");
	free(sb);
	free(t);
}

/* Whether two --peer-key loads hold different keys (none is one case). */
static bool keys_differ(const struct steer_peer_keys *a, const struct steer_peer_keys *b)
{
	return !a != !b || (a && memcmp(a, b, sizeof(*a)));
}

/* next keeps the running keys (and d->cfg, freed after the reload, next's),
 * so that the configuration says what runs. */
static void keep_running_keys(struct daemon *d, struct steer_config *next)
{
	struct steer_peer_keys *k = next->peer_keys;

	next->peer_keys = d->cfg.peer_keys;
	d->cfg.peer_keys = k;
	memcpy(next->peer_key_file, d->cfg.peer_key_file, sizeof(next->peer_key_file));
}

/* A reload's --peer-key: the thread signs and checks with it from its next
 * report on; the others' work it applied stays. Logged, never the key. */
static void peers_rekey(struct daemon *d, struct steer_config *next)
{
	const char *file = next->peer_key_file;

	if (!keys_differ(d->cfg.peer_keys, next->peer_keys))
		return;
	if (steer_peer_set_keys(d->peer, next->peer_keys) != 0) {
		log_error("reload: libcrypto cannot use the new --peer-key; the running key stays");
		keep_running_keys(d, next);
		return;
	}
	if (!next->peer_keys)
		log_warn("reload: --peer-key is gone: reports are no longer signed, and unsigned "
			 "ones are accepted");
	else if (!d->cfg.peer_keys)
		log_info("reload: reports are signed, and only signed ones accepted, with the key "
			 "of %s",
			 file);
	else
		log_info("reload: the keys of %s changed; the next report is signed with its "
			 "first line%s",
			 file, next->peer_keys->len[1] ? ", and both lines verify" : "");
}

/* A reload: the peers, interval, timeout and key change at once, --peer-push
 * and --peer-phase with the next publish (they are in the tables); the
 * listen address, and turning sharing on or off, need a restart: when next
 * asks for that, it keeps the running peer options. */
void peers_reload(struct daemon *d, struct steer_config *next)
{
	bool on = d->peer != NULL, want = steer_config_peers_on(next);

	if (on != want || (on && !steer_addr_equal(&next->peer_listen, &d->cfg.peer_listen))) {
		/* Only the listen address waits for a restart: a rotated key
		 * must not, or this router would drop out of the fleet when the
		 * others take the old key off. */
		if (on && want)
			peers_rekey(d, next);
		else
			keep_running_keys(d, next);
		log_warn("reload: turning --peer on or off, or a --peer-listen change, needs a "
			 "restart; the running peers stay%s",
			 on && want ? " (a --peer-key change is applied)" : "");
		memcpy(next->peers, d->cfg.peers, sizeof(next->peers));
		memcpy(next->peer_strs, d->cfg.peer_strs, sizeof(next->peer_strs));
		next->n_peers = d->cfg.n_peers;
		memcpy(next->peer_dns, d->cfg.peer_dns, sizeof(next->peer_dns));
		next->n_peer_dns = d->cfg.n_peer_dns;
		next->peer_listen_set = d->cfg.peer_listen_set;
		next->peer_listen = d->cfg.peer_listen;
		memcpy(next->peer_listen_str, d->cfg.peer_listen_str,
		       sizeof(next->peer_listen_str));
		next->peer_interval_ns = d->cfg.peer_interval_ns;
		next->peer_timeout_ns = d->cfg.peer_timeout_ns;
		next->peer_push = d->cfg.peer_push;
		next->peer_no_phase = d->cfg.peer_no_phase;
		return;
	}
	if (on) {
		peers_set(d, next); /* names new in next follow when they resolve */
		peers_rekey(d, next);
	}
}

/* /metrics: the peers' rows (the caller frees snap->peers). */
void peers_metrics(struct daemon *d, struct steer_metrics_snapshot *snap)
{
	struct steer_peer_stats *st;

	if (!d->peer)
		return;
	st = malloc(sizeof(*st));
	if (!st)
		return;
	steer_peer_stats(d->peer, st);
	snap->peers_on = true;
	snap->peer_rejected_total = st->rejected;
	snap->peer_unknown_backends_total = st->unknown_backends;
	snap->peer_applied_total = st->applied;
	snap->peer_apply_errors_total = st->apply_errors;
	snap->peer_own_reports_total = st->own_reports;
	snap->peer_push_wakeups_total = st->push_wakeups;
	snap->peer_keyed = st->keyed;
	memcpy(snap->peer_key_refused_total, st->refused, sizeof(snap->peer_key_refused_total));
	snap->peers = calloc(st->n ? st->n : 1, sizeof(*snap->peers));
	if (snap->peers) {
		size_t i;

		for (i = 0; i < st->n; i++) {
			struct steer_metrics_peer *mp = &snap->peers[i];
			const struct steer_peer_stat *s = &st->p[i];

			steer_addr_format(&s->addr, mp->peer, sizeof(mp->peer));
			mp->up = s->up;
			mp->age_s = s->age_s;
			mp->received_total = s->received;
			mp->lost_total = s->lost;
			mp->sent_total = s->sent;
			mp->send_errors_total = s->send_errors;
			mp->forgotten_total = s->forgotten;
			memcpy(mp->rtt_buckets, s->rtt_buckets, sizeof(mp->rtt_buckets));
			mp->rtt_count = s->rtt_count;
			mp->rtt_sum_s = s->rtt_sum_s;
		}
		snap->n_peers = st->n;
	}
	free(st);
}

void peers_stop(struct daemon *d)
{
	steer_peer_stop(d->peer);
	d->peer = NULL;
}
