/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * peer_int.h - the peer thread's state, shared by user/peer/peer.c (receiving,
 * applying, the thread, the API), user/peer/remotes.c (the senders' places)
 * and user/peer/send.c (sending, pushing, round-trip echoes). Not an API:
 * see peer.h.
 */
#ifndef STEER_PEER_INT_H
#define STEER_PEER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/common.h" /* struct steer_log_limit */
#include "config/config.h" /* STEER_PEERS_MAX */
#include "peer/peer.h"
#include "steer_peer.pb-c.h"

struct ring_buffer;
struct peer_auth;

/* --peer-key refuses a report sent this far from its own clock, either way
 * ("stale"): beyond any clock skew NTP leaves. So no report, nor any
 * recording of one, is taken once this old: remotes.c keeps a silent sender's
 * entry as long (remote_idle_ns). */
#define PEER_REPORT_TTL_NS (30 * 1000000000ULL)
/* A warning that any sender can cause is logged at most this often. */
#define PEER_WARN_EVERY_NS (10 * 1000000000ULL)

/* What this router applied for one sender at one backend. */
struct applied {
	struct steer_bk_key key;
	bool used;
	bool tracked;			   /* applied at least once */
	uint32_t svc_id, slot, slot_gen;   /* where it was applied */
	uint64_t last_sent, last_answered; /* the sender's counters, tokens */
	uint64_t last_seq;		   /* the report they came in */
	uint64_t outstanding;		   /* tokens applied and not taken back */
};

struct applied_table {
	struct applied *e;
	size_t cap, n; /* cap a power of two, or 0 */
};

/* A router that reports to this one, by the address its reports come from. */
struct remote {
	struct steer_addr from;
	uint64_t router; /* 0: none yet */
	uint64_t last_ns, next_seq;
	uint64_t sent_ns; /* its last report's sent_ns, echoed back to it (0: none) */
	uint64_t unix_ns; /* --peer-key: its last report's sent_unix_ns */
	bool live;
	bool configured; /* from a --peer or --peer-dns router's address: a place is kept */
	struct applied_table applied;
};

/* The backends, as the thread uses them. */
struct view {
	struct steer_peer_target *t;
	size_t n;
	size_t *index; /* hash of (vip, addr) -> 1 + position in t; 0 empty */
	size_t cap;
	uint64_t *rep_sent, *rep_answered; /* what the last report said, per target */
};

struct steer_peer {
	int fd;
	/* --peer-push: the kernel's wake-ups (steer_kick_ring) and the ring's
	 * map fd, polled directly (not through libbpf's epoll fd: one wake-up
	 * fewer); NULL / -1 when the accounting is off. */
	struct ring_buffer *kick_rb;
	int kick_fd;
	pthread_t thr;
	bool started;
	atomic_bool stop;
	struct steer_dp *dp;
	uint64_t router, seq;
	/* --peer-key: the thread's keys (NULL: none); its warnings of dropped
	 * reports, per reason; the reports it could not sign. */
	struct peer_auth *auth;
	struct steer_log_limit auth_warn[STEER_PEER_REFUSALS];
	uint64_t auth_sign_failed;
	/* Lines any sender can cause (peer.c, remotes.c): a sender refused for
	 * want of room, a new router id refused at a live router's address, and
	 * work taken back, of a router of the peer list and of any other. */
	struct steer_log_limit warn_full, warn_new_id, said_forgot_conf, said_forgot_other;

	pthread_mutex_t mu; /* guards everything below */
	struct steer_addr peers[STEER_PEERS_MAX];
	size_t n_peers;
	uint64_t peers_gen; /* moves when peers changes */
	uint64_t interval_ns, timeout_ns;
	struct steer_peer_target *next_t; /* handed over by set_targets */
	size_t next_n;
	bool next_ready;
	struct peer_auth *next_auth; /* handed over by set_keys */
	bool next_auth_ready;
	struct steer_peer_stats st;

	/* The thread's own. */
	struct view v;
	/* Its copy of peers (at peers_gen conf_gen): the addresses whose places
	 * in remotes and st.p are kept; and of timeout_ns. */
	struct steer_addr conf[STEER_PEERS_MAX];
	size_t n_conf;
	uint64_t conf_gen, conf_timeout_ns;
	/* Per slot: 1 + the owner generation this daemon mapped a backend at
	 * (0: never), for clear_leftovers. */
	uint32_t seen_gen[STEER_SLOT_IDS];
	struct remote remotes[STEER_PEER_STATS_MAX];
	size_t n_remotes;
	size_t next_echo; /* where the next full report's echoes start */
	uint64_t last_full_ns;
	/* The changes one pass collected, applied by service in batches. */
	struct pending_delta {
		uint32_t svc_id;
		uint32_t order; /* within the pass: changes of a slot keep their order */
		struct steer_peer_delta d;
	} * deltas;
	size_t n_deltas, cap_deltas;
};

/* CLOCK_MONOTONIC, ns. */
static inline uint64_t peer_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* a as a sockaddr for sendto and bind; its length. */
static inline socklen_t peer_to_sockaddr(const struct steer_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (steer_addr_is_v4(a)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = a->port;
		memcpy(&s4->sin_addr, &a->ip6[3], 4);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = a->port;
	memcpy(&s6->sin6_addr, a->ip6, 16);
	return sizeof(*s6);
}

/* send.c: the stats row of an address, added when missing (NULL when
 * full); a row removed (none: nothing). Under mu. */
struct steer_peer_stat *peer_stat_of(struct steer_peer *p, const struct steer_addr *a);
void peer_stat_drop(struct steer_peer *p, const struct steer_addr *a);

/* peer.c: take back everything applied for a sender (silent, restarted,
 * or giving its place), logged (limited: say_forgotten) with why; count a
 * datagram rejected. */
void peer_remote_forget(struct steer_peer *p, struct remote *r, const char *why);
void peer_count_rejected(struct steer_peer *p);

/* remotes.c: the senders' places (the rules are there). The entry of an
 * address, or NULL; the same, made when missing (NULL: no place, warned
 * of). */
struct remote *peer_remote_find(struct steer_peer *p, const struct steer_addr *from);
struct remote *peer_remote_of(struct steer_peer *p, const struct steer_addr *from);
/* The thread takes the peer list and timeout that set_peers handed over. */
void peer_take_peers(struct steer_peer *p);
/* r silent: its work taken back, reported down. */
void peer_remote_silence(struct steer_peer *p, struct remote *r);
/* Whether r, live, may become router `router` (else refused, counted and
 * warned of). */
bool peer_new_router_admitted(struct steer_peer *p, struct remote *r, uint64_t router,
			      uint64_t now);
/* Senders silent for timeout: silenced; idle long enough: their places
 * freed. The caller applies what was taken back. */
void peer_remotes_expire(struct steer_peer *p, uint64_t now, uint64_t timeout);

/* send.c: this router's reports (full: every backend, and the echoes),
 * and the kernel's wake-ups (--peer-push). */
void peer_send_reports(struct steer_peer *p, bool full, uint8_t *buf, uint32_t interval_us);
void peer_push_reports(struct steer_peer *p, uint8_t *buf, uint32_t interval_us);
int peer_kick_open(struct steer_peer *p, char *err, size_t errlen);

/* auth.c (--peer-key): the keys as the thread uses them, or NULL for
 * k NULL; 0, or -errno. */
int peer_auth_new(const struct steer_peer_keys *k, struct peer_auth **out);
/* steer_peer_open's: the keys of opts. Before privileges are dropped:
 * libcrypto loads its provider here, with a key or without. */
int peer_auth_open(struct steer_peer *p, const struct steer_peer_keys *k, char *err, size_t errlen);
void peer_auth_free(struct peer_auth *a);
/* The thread takes the keys set_keys handed over, if any. */
void peer_auth_take(struct steer_peer *p);
/* Before a report is packed: its sent_unix_ns. After: the tag appended to
 * the len bytes at buf; the datagram's length, 0 when it could not be made. */
void peer_auth_stamp(const struct steer_peer *p, SmgSteer__Peer__Report *m);
size_t peer_auth_sign(struct steer_peer *p, uint8_t *buf, size_t len);
/* A datagram from `from`: its tag made by one of the keys (*len is then the
 * report's length, the tag left out), or false, counted and warned of. */
bool peer_auth_verify(struct steer_peer *p, const struct steer_addr *from, const uint8_t *buf,
		      size_t *len);
/* Its report, verified and valid: fresh, and not a replay (false: counted
 * and warned of). */
bool peer_auth_admit(struct steer_peer *p, const struct steer_addr *from,
		     const SmgSteer__Peer__Report *m);

#endif /* STEER_PEER_INT_H */
