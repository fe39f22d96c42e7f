/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * peer.h - several routers share their request accounting (--peer; design
 * and measurements in docs/algorithm.md, "Several routers").
 *
 * With N routers in front of one fleet each kernel sees only its own
 * sockets' requests; between two load polls the others' large requests are
 * invisible, and the simulator puts 16 routers at 4.4x (FIFO engine) to 22x
 * (batching engine) the p99 of one. Every --peer-interval (1 ms) this router
 * reports, in one UDP datagram per 16 backends (proto/steer_peer.proto), its
 * kernel's cumulative sent and answered tokens per backend; each receiver
 * adds the changes to its own kernel's fluid estimate of that backend, under
 * the service's lock (the kernel program steer_peer_apply). The simulator
 * puts that at 0.99-1.05x of one router when it arrives within 2 ms.
 *
 * Exactness: counters are cumulative, so a lost datagram loses nothing (the
 * next carries the sum); per sender and backend the receiver tracks what it
 * applied (sent - answered, "outstanding"), and takes it all back when the
 * sender falls silent for --peer-timeout, restarts (a new router id: without
 * --peer-key, taken only once the old id has been silent for --peer-timeout,
 * so that a spoofed datagram cannot erase a live router's work), or its
 * counters or this router's slot start over. A daemon that starts clears
 * what an earlier one applied.
 *
 * With --peer-push the kernel also wakes the thread when a request is sent
 * or answered on a steered socket (a record in steer_kick_ring, written only
 * when no wake-up is pending), and the thread reports the backends that moved
 * at once: 0.2 ms from a send to the other router's kernel on this test VM
 * instead of half an interval and more (docs/benchmarks.md).
 *
 * With --peer-key each report ends in an HMAC-SHA256 tag of the rest of it
 * and carries the sender's wall clock: a receiver with the key drops, before
 * it unpacks anything, a report no key of its own made, and then one 30 s
 * off its clock, or one that replays a router's earlier report or its report
 * from another address (auth.c; docs/algorithm.md, "Several routers").
 *
 * Senders are tracked by address, in a table of STEER_PEER_STATS_MAX places
 * of which the routers of --peer and --peer-dns always find one; a place
 * is freed once its sender has been silent long enough (remotes.c).
 *
 * One thread owns the socket, the timer and every per-sender table; the main
 * thread hands it the backends after each publish (steer_peer_set_targets)
 * and reads its statistics for /metrics.
 */
#ifndef STEER_PEER_H
#define STEER_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/dataplane.h"
#include "metrics/metrics.h" /* STEER_PEER_RTT_BUCKETS */

/* One backend of one service, as this router's kernel knows it. */
struct steer_peer_target {
	struct steer_addr vip, addr;
	uint32_t svc_id;	  /* the service's id (steer_dp_service_id) */
	uint32_t slot;		  /* its slot */
	uint32_t slot_gen;	  /* steer_slot.gen when mapped */
	uint32_t bytes_per_token; /* the service's, resolved (>= 1) */
	uint64_t ns_per_token;	  /* as published; 0: not in the table */
};

struct steer_peer_keys; /* config.h: --peer-key's keys */

struct steer_peer_opts {
	struct steer_dp *dp; /* the owner's: steer_dp_peer_apply */
	/* --peer-key (copied; NULL: reports are neither signed nor verified). */
	const struct steer_peer_keys *keys;
	struct steer_addr listen;
	const struct steer_addr *peers; /* where reports go */
	size_t n_peers;
	uint64_t interval_ns;
	uint64_t timeout_ns;
};

/* What the thread counts, per address that reports or is reported to. */
struct steer_peer_stat {
	struct steer_addr addr;
	bool configured;      /* a --peer (reports go there) */
	bool up;	      /* its last report came within --peer-timeout */
	uint64_t router;      /* its router id (0: none heard) */
	uint64_t last_ns;     /* CLOCK_MONOTONIC of its last report (0: never) */
	double age_s;	      /* since its last report (-1: never), as steer_peer_stats read it */
	uint64_t received;    /* reports accepted */
	uint64_t lost;	      /* reports missed (gaps in its sequence) */
	uint64_t sent;	      /* reports sent to it */
	uint64_t send_errors; /* sends that failed */
	uint64_t forgotten;   /* times its work was taken back (timeout, restart) */
	/* Round trips to it (its echoes of this router's reports): cumulative
	 * counts per bucket of steer_peer_rtt_bounds, their number and sum. */
	uint64_t rtt_buckets[STEER_PEER_RTT_BUCKETS];
	uint64_t rtt_count;
	double rtt_sum_s;
};

/* Addresses tracked: the routers of --peer and --peer-dns always have a
 * place; other senders share the rest, and wait when those still report
 * (user/peer/remotes.c). */
#define STEER_PEER_STATS_MAX 128

/* Why a keyed router dropped a report before using any of it (auth.c). */
enum steer_peer_refusal {
	STEER_PEER_REFUSED_AUTH,   /* no tag, or none of its keys made it */
	STEER_PEER_REFUSED_STALE,  /* sent_unix_ns 30 s or more away, or older than the
				    * live router's it would replace */
	STEER_PEER_REFUSED_REPLAY, /* a router's earlier report, or its report from a
				    * second address */
	STEER_PEER_REFUSALS,
};
_Static_assert(STEER_PEER_REFUSALS == STEER_PEER_REFUSAL_REASONS, "metrics.h's reasons");

struct steer_peer_stats {
	size_t n;
	struct steer_peer_stat p[STEER_PEER_STATS_MAX];
	/* Datagrams that were not a valid report, from a sender with no place,
	 * or (without --peer-key) from a new router id at a live router's address. */
	uint64_t rejected;
	uint64_t unknown_backends; /* reported backends this router does not steer to */
	uint64_t applied;	   /* slot changes the kernel applied */
	uint64_t own_reports;	   /* this router's own reports that came back (ignored) */
	uint64_t apply_errors;	   /* runs of steer_peer_apply that failed */
	uint64_t push_wakeups;	   /* --peer-push: the kernel woke the thread to report */
	bool keyed;		   /* --peer-key: reports are signed and verified */
	uint64_t refused[STEER_PEER_REFUSALS]; /* --peer-key: dropped, by reason */
};

struct steer_peer;

/* Bind the socket (before privileges are dropped). 0, or -errno with err set. */
int steer_peer_open(const struct steer_peer_opts *o, struct steer_peer **out, char *err,
		    size_t errlen);
/* Start the thread. */
int steer_peer_start(struct steer_peer *p, char *err, size_t errlen);
/* The backends now (copied); the thread takes them at its next tick. */
int steer_peer_set_targets(struct steer_peer *p, const struct steer_peer_target *t, size_t n);
/* A reload, or a --peer-dns name that changed: new peers, interval and
 * timeout (the listen address stays). True when the list of peers changed. */
bool steer_peer_set_peers(struct steer_peer *p, const struct steer_addr *peers, size_t n,
			  uint64_t interval_ns, uint64_t timeout_ns);
/* A reload's --peer-key (copied; NULL: none): the thread signs its next
 * report and checks the next it receives with it; what the others' reports
 * applied stays. 0, or -ENOMEM (the running key stays). */
int steer_peer_set_keys(struct steer_peer *p, const struct steer_peer_keys *k);
void steer_peer_stats(struct steer_peer *p, struct steer_peer_stats *out);
/* Stop the thread and free p; what was applied stays in the kernel (the
 * next daemon clears it). NULL is fine. */
void steer_peer_stop(struct steer_peer *p);

#endif /* STEER_PEER_H */
